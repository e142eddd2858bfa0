//! GSO/GRO on and off: the fallback path (one datagram per message, one per
//! receive buffer) moves the same bytes, and the raw blaster reaches every datagram.

#![cfg(target_os = "linux")]

mod udp_util;

use rondo_proto::Event;
use rondo_ud::udp::{Clock, UdpConfig, UdpDatapath};
use std::net::UdpSocket;
use std::time::Duration;
use udp_util::*;

fn no_offload(paths: u16) -> UdpConfig {
    UdpConfig {
        gso: false,
        gro: false,
        max_datagram: 2048,
        ..loopback(paths)
    }
}

#[test]
fn transfer_without_gso_and_gro() {
    let clock = Clock::new();
    let cfg = flow(4);
    let (mut a, mut b) = pair(no_offload(4), &cfg, &clock);
    assert!(!a.dp.gso() && !a.dp.gro());
    let msg = pattern(400_000, 21);
    a.host.post(a.conn, clock.now(), 4, msg.clone()).unwrap();
    // A datagram longer than the receive buffer is cut by the kernel: counted, dropped.
    let foreign = UdpSocket::bind("127.0.0.1:0").unwrap();
    foreign.send_to(&[1; 3000], b.dp.local_addrs()[0]).unwrap();
    assert_eq!(
        first_event_at_b(&mut a, &mut b, &clock, 2_000_000),
        Some(Event::Received {
            msg_id: 4,
            data: msg
        })
    );
    for s in [a.dp.stats(), b.dp.stats()] {
        assert_eq!(s.gso_sends, 0);
        assert_eq!(s.gro_receives, 0);
        assert!(s.datagrams_out > 0);
    }
    assert_eq!(b.dp.stats().truncated, 1);
    assert_eq!(
        b.host.stats().malformed,
        0,
        "the cut datagram never reached the engine"
    );
}

#[test]
fn raw_blast_reaches_every_datagram_with_and_without_offloads() {
    for udp in [loopback(4), no_offload(4)] {
        let mut tx = UdpDatapath::bind(udp.clone()).unwrap();
        let mut rx = UdpDatapath::bind(udp).unwrap();
        let peer = rx.local_addrs().to_vec();
        // Few enough datagrams for the default socket receive buffer.
        let sent = tx.raw_blast(&peer, 1200, 80).unwrap();
        assert_eq!(sent, 80);
        let got = rx.raw_receive(Duration::from_millis(200)).unwrap();
        assert_eq!(got.datagrams, 80);
        assert_eq!(got.bytes, 80 * 1200);
        let (ts, rs) = (tx.stats(), rx.stats());
        assert_eq!(ts.datagrams_out, 80);
        if tx.gso() {
            assert!(
                ts.gso_sends > 0,
                "equal-sized datagrams to one peer form GSO trains"
            );
            assert!(ts.send_batches < 80);
        } else {
            assert_eq!(ts.gso_sends, 0);
        }
        if !rx.gro() {
            assert_eq!(rs.gro_receives, 0);
        }
        assert_eq!(rs.datagrams_in, 80);
    }
}

/// A progress thread owns its datapath and endpoint: both move between threads.
#[test]
fn datapath_and_endpoint_are_send() {
    fn send<T: Send>() {}
    send::<UdpDatapath>();
    send::<rondo_proto::Endpoint>();
    send::<rondo_ud::fault::FaultInjector<rondo_proto::Endpoint>>();
    let dp = UdpDatapath::bind(loopback(2)).unwrap();
    let addrs = std::thread::spawn(move || dp.local_addrs().to_vec())
        .join()
        .unwrap();
    assert_eq!(addrs.len(), 2);
}
