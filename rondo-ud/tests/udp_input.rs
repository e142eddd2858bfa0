//! What the UDP datapath takes from the network: TOS/ECN marks read back, and bad
//! datagrams from a foreign socket counted and dropped while a transfer runs.

#![cfg(target_os = "linux")]

mod udp_util;

use rondo_proto::wire::{Body, CommonRepr, DataRepr, Flags, Repr};
use rondo_proto::{Event, Host, Instant, Priority, Psn, Transmit, TxBuffer};
use rondo_ud::udp::{set_socket_tos, Clock, UdpConfig, UdpDatapath};
use std::net::UdpSocket;
use std::time::Duration;
use udp_util::*;

/// A DATA datagram holding a whole `len`-byte message for `flow`.
fn data_datagram(flow: u32, psn: u32, len: usize, token: Option<u64>) -> Vec<u8> {
    let repr = Repr {
        common: CommonRepr {
            flow,
            psn: Psn(psn),
            path: 0,
            flags: Flags::empty(),
            timestamp_ns: 1,
        },
        body: Body::Data(DataRepr {
            msg_id: 900,
            msg_len: len as u64,
            offset: 0,
            payload_len: len,
        }),
    };
    repr.to_datagram(&vec![0x33; len], token).unwrap()
}

/// Emits one datagram per priority class, then nothing.
struct OnePerClass(Vec<Priority>);

impl Host for OnePerClass {
    fn handle_datagram(&mut self, _: Instant, _: u16, _: &[u8], _: bool) {}
    fn handle_timeout(&mut self, _: Instant) {}
    fn poll_transmit<B: TxBuffer + ?Sized>(&mut self, _: Instant, tx: &mut B) -> Option<Transmit> {
        let priority = self.0.pop()?;
        tx.take(0, priority, 100)[0] = priority as u8;
        Some(Transmit {
            path: 0,
            priority,
            len: 100,
            flow: 5,
            payload: None,
        })
    }
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
}

#[test]
fn dscp_per_class_and_ect_are_set_and_read_back() {
    let cfg = UdpConfig {
        paths: 1,
        ..loopback(1)
    };
    let mut observer = UdpDatapath::bind(cfg.clone()).unwrap();
    if !observer.tos_readback() {
        println!("skipped: this kernel does not report the TOS byte (IP_RECVTOS refused)");
        return;
    }
    let mut sender = UdpDatapath::bind(cfg.clone()).unwrap();
    sender.add_peer(5, observer.local_addrs().to_vec()).unwrap();
    let mut host = OnePerClass(vec![Priority::Probe, Priority::Data, Priority::Control]);
    let clock = Clock::new();
    sender.poll(&mut host, &clock, Duration::ZERO).unwrap();
    let mut seen = Vec::new();
    for _ in 0..100 {
        observer
            .receive_with(Duration::from_millis(10), |_, data, tos| {
                seen.push((data[0], tos))
            })
            .unwrap();
        if seen.len() == 3 {
            break;
        }
    }
    seen.sort_unstable();
    let expect = |p: Priority| (p as u8, Some(cfg.tos(p)));
    assert_eq!(
        seen,
        [
            expect(Priority::Control),
            expect(Priority::Data),
            expect(Priority::Probe)
        ]
    );
    // Control 46, data 26, probe 8, each with ECT(0).
    assert_eq!(cfg.tos(Priority::Control), 46 << 2 | 0b10);
    assert_eq!(cfg.tos(Priority::Data), 26 << 2 | 0b10);
    assert_eq!(cfg.tos(Priority::Probe), 8 << 2 | 0b10);
    assert_eq!(observer.stats().tos_seen, 3);
    assert_eq!(observer.stats().ecn_ce, 0);
}

#[test]
fn ce_marks_reach_the_engine() {
    let clock = Clock::new();
    let cfg = flow(2);
    let (mut a, mut b) = pair(loopback(2), &cfg, &clock);
    if !b.dp.tos_readback() {
        println!("skipped: this kernel does not report the TOS byte (IP_RECVTOS refused)");
        return;
    }
    let foreign = UdpSocket::bind("127.0.0.1:0").unwrap();
    set_socket_tos(&foreign, 26 << 2 | 0b11).unwrap();
    let d = data_datagram(FLOW_B, 0, 500, cfg.token);
    foreign.send_to(&d, b.dp.local_addrs()[1]).unwrap();
    let first = first_event_at_b(&mut a, &mut b, &clock, 100_000)
        .expect("the CE-marked datagram was delivered");
    assert_eq!(b.dp.stats().ecn_ce, 1);
    let rx = b.host.connection(b.conn).receiver_stats();
    assert_eq!(rx.ce_marked, 1);
    assert!(matches!(&first, Event::Received { msg_id: 900, data } if data.len() == 500));
}

#[test]
fn bad_datagrams_from_a_foreign_socket_are_counted_and_dropped() {
    let clock = Clock::new();
    let cfg = flow(4);
    let (mut a, mut b) = pair(loopback(4), &cfg, &clock);
    let msg = pattern(200_000, 5);
    a.host.post(a.conn, clock.now(), 1, msg.clone()).unwrap();
    let foreign = UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = b.dp.local_addrs()[2];
    let good = data_datagram(FLOW_B, 0, 100, cfg.token);
    foreign.send_to(&good[..30], to).unwrap(); // truncated
    foreign.send_to(&[0xff; 64], to).unwrap(); // not Rondo at all
    foreign
        .send_to(&data_datagram(99, 0, 100, cfg.token), to)
        .unwrap(); // unknown flow
    foreign
        .send_to(&data_datagram(FLOW_B, 0, 100, Some(7)), to)
        .unwrap(); // wrong token
    foreign
        .send_to(&data_datagram(FLOW_B, 0, 100, None), to)
        .unwrap(); // no token
    foreign
        .send_to(&data_datagram(FLOW_B, 0x4000_0000, 100, Some(7)), to)
        .unwrap(); // far outside the window, and the wrong token
    foreign
        .send_to(&data_datagram(FLOW_B, 0x4000_0000, 100, cfg.token), to)
        .unwrap(); // far outside the window with the right token: NAKed, never applied
    let (mut ev_a, mut ev_b) = (Vec::new(), Vec::new());
    let ok = drive(&mut a, &mut b, &clock, 2_000_000, |a, b| {
        events(&mut a.host, a.conn, &mut ev_a);
        events(&mut b.host, b.conn, &mut ev_b);
        ev_a.iter()
            .any(|e| matches!(e, Event::SendComplete { msg_id: 1 }))
    });
    assert!(ok, "the real transfer finished");
    let s = b.host.stats();
    assert_eq!(s.malformed, 2, "{s:?}");
    assert_eq!(s.unknown_flow, 1, "{s:?}");
    assert_eq!(s.bad_token, 3, "{s:?}");
    let received: Vec<_> = ev_b
        .iter()
        .filter_map(|e| match e {
            Event::Received { msg_id, data } => Some((*msg_id, data)),
            _ => None,
        })
        .collect();
    assert_eq!(
        received.len(),
        1,
        "nothing from the foreign socket was delivered"
    );
    assert!(received[0].0 == 1 && *received[0].1 == msg);
}

/// Emits one datagram per listed flow on path 0, then nothing.
struct Flows(Vec<u32>);

impl Host for Flows {
    fn handle_datagram(&mut self, _: Instant, _: u16, _: &[u8], _: bool) {}
    fn handle_timeout(&mut self, _: Instant) {}
    fn poll_transmit<B: TxBuffer + ?Sized>(&mut self, _: Instant, tx: &mut B) -> Option<Transmit> {
        let flow = self.0.pop()?;
        tx.take(0, Priority::Data, 10)[0] = flow as u8;
        Some(Transmit {
            path: 0,
            priority: Priority::Data,
            len: 10,
            flow,
            payload: None,
        })
    }
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
}

#[test]
fn transmits_go_to_their_flows_peer_and_unknown_flows_are_dropped() {
    let cfg = loopback(1);
    let mut x = UdpDatapath::bind(cfg.clone()).unwrap();
    let mut y = UdpDatapath::bind(cfg.clone()).unwrap();
    let mut sender = UdpDatapath::bind(cfg).unwrap();
    sender.add_peer(6, y.local_addrs().to_vec()).unwrap();
    sender.add_peer(5, x.local_addrs().to_vec()).unwrap();
    assert!(sender.add_peer(7, vec![]).is_err(), "one address per path");
    let clock = Clock::new();
    sender
        .poll(&mut Flows(vec![5, 6, 7, 5]), &clock, Duration::ZERO)
        .unwrap();
    assert_eq!(sender.stats().unroutable, 1, "flow 7 has no peer");
    let mut got_x = Vec::new();
    let mut got_y = Vec::new();
    for _ in 0..50 {
        x.receive_with(Duration::from_millis(5), |_, d, _| got_x.push(d[0]))
            .unwrap();
        y.receive_with(Duration::from_millis(5), |_, d, _| got_y.push(d[0]))
            .unwrap();
        if got_x.len() + got_y.len() == 3 {
            break;
        }
    }
    assert_eq!((got_x, got_y), (vec![5, 5], vec![6]));
    assert!(sender.remove_peer(5) && !sender.remove_peer(5));
}
