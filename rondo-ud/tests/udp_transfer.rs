//! Rondo over the UDP datapath on loopback with 4 paths: byte-exact transfers, with
//! and without injected loss and reordering.

#![cfg(target_os = "linux")]

mod udp_util;

use rondo_proto::Event;
use rondo_ud::udp::Clock;
use udp_util::*;

#[test]
fn messages_arrive_byte_exact_over_four_paths() {
    let clock = Clock::new();
    let cfg = flow(4);
    let (mut a, mut b) = pair(loopback(4), &cfg, &clock);
    let msgs: Vec<Vec<u8>> = (0..8).map(|i| pattern(1 + i * 70_001, i as u64)).collect();
    for (i, m) in msgs.iter().enumerate() {
        a.host
            .post(a.conn, clock.now(), i as u64, m.clone())
            .unwrap();
    }
    let (mut ev_a, mut ev_b) = (Vec::new(), Vec::new());
    let ok = drive(&mut a, &mut b, &clock, 2_000_000, |a, b| {
        events(&mut a.host, a.conn, &mut ev_a);
        events(&mut b.host, b.conn, &mut ev_b);
        ev_a.iter()
            .filter(|e| matches!(e, Event::SendComplete { .. }))
            .count()
            == msgs.len()
    });
    assert!(ok, "transfer did not finish: {:?}", a.dp.stats());
    let got: Vec<(u64, Vec<u8>)> = ev_b
        .into_iter()
        .filter_map(|e| match e {
            Event::Received { msg_id, data } => Some((msg_id, data)),
            _ => None,
        })
        .collect();
    assert_eq!(got.len(), msgs.len());
    for (i, (id, data)) in got.iter().enumerate() {
        assert_eq!(*id, i as u64);
        assert!(data == &msgs[i], "message {i} differs");
    }
    let conn = a.host.connection(a.conn);
    assert!(
        conn.paths().iter().all(|p| p.counters().data_sent > 0),
        "every path used"
    );
    let sa = a.dp.stats();
    let sb = b.dp.stats();
    assert!(sa.datagrams_out > 0 && sb.datagrams_in > 0);
    assert_eq!(sb.truncated, 0);
    assert_eq!(b.host.stats().bad_token, 0);
    assert_eq!(b.host.stats().malformed, 0);
}

/// 1% loss and 5% reordering injected at both receivers (middleware around the
/// datapath): every message still arrives byte-exact, and retransmissions happened.
#[test]
fn byte_exact_under_injected_loss_and_reordering() {
    use rondo_ud::fault::{FaultConfig, FaultInjector};
    let clock = Clock::new();
    let cfg = flow(4);
    let (a, b) = pair(loopback(4), &cfg, &clock);
    let faults = FaultConfig {
        loss: 0.01,
        reorder: 0.05,
        reorder_depth: 6,
        ..FaultConfig::default()
    };
    let wrap = |s: Side<rondo_proto::Endpoint>, seed| Side {
        dp: s.dp,
        host: FaultInjector::new(s.host, faults, seed),
        conn: s.conn,
    };
    let (mut a, mut b) = (wrap(a, 11), wrap(b, 12));
    let msgs: Vec<Vec<u8>> = (0..6)
        .map(|i| pattern(150_000 + i * 999, 100 + i as u64))
        .collect();
    for (i, m) in msgs.iter().enumerate() {
        a.host
            .inner_mut()
            .post(a.conn, clock.now(), i as u64, m.clone())
            .unwrap();
    }
    let (mut ev_a, mut ev_b) = (Vec::new(), Vec::new());
    let ok = drive(&mut a, &mut b, &clock, 5_000_000, |a, b| {
        events(a.host.inner_mut(), a.conn, &mut ev_a);
        events(b.host.inner_mut(), b.conn, &mut ev_b);
        ev_a.iter()
            .filter(|e| matches!(e, Event::SendComplete { .. }))
            .count()
            == msgs.len()
    });
    assert!(ok, "transfer did not finish under faults");
    let got: Vec<&Vec<u8>> = ev_b
        .iter()
        .filter_map(|e| match e {
            Event::Received { data, .. } => Some(data),
            _ => None,
        })
        .collect();
    assert_eq!(got.len(), msgs.len());
    for (g, m) in got.iter().zip(&msgs) {
        assert!(*g == m, "payload differs");
    }
    assert!(b.host.stats().dropped > 0 && b.host.stats().reordered > 0);
    let sender = a.host.inner().connection(a.conn).sender_stats();
    assert!(
        sender.retransmissions > 0,
        "losses were repaired: {sender:?}"
    );
    let rx = b.host.inner().connection(b.conn).receiver_stats();
    assert!(rx.ood.max() > 0, "reordering was seen");
}

/// The same over IPv6 loopback (traffic class instead of TOS), when the host has it.
#[test]
fn transfer_over_ipv6_loopback() {
    let udp = rondo_ud::udp::UdpConfig {
        local_ip: "::1".parse().unwrap(),
        ..loopback(2)
    };
    if let Err(e) = std::net::UdpSocket::bind("[::1]:0") {
        println!("skipped: no IPv6 loopback here ({e})");
        return;
    }
    let clock = Clock::new();
    let (mut a, mut b) = pair(udp, &flow(2), &clock);
    let msg = pattern(100_000, 6);
    a.host.post(a.conn, clock.now(), 2, msg.clone()).unwrap();
    assert_eq!(
        first_event_at_b(&mut a, &mut b, &clock, 2_000_000),
        Some(Event::Received {
            msg_id: 2,
            data: msg
        })
    );
    assert!(a.dp.local_addrs().iter().all(|a| a.is_ipv6()));
    if b.dp.tos_readback() {
        assert_eq!(b.dp.stats().tos_seen, b.dp.stats().datagrams_in);
    }
}
