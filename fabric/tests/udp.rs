//! The fabric over real UDP sockets on loopback: forwarding by source port, CE
//! marks in the TOS byte, and bad input (garbage, strangers, a vanished host)
//! ending in counters, not a crash.

use rondo_fabric::{Class, Fabric, Topology};
use std::net::UdpSocket;
use std::time::Duration;

fn topology(base: u16) -> Topology {
    Topology::parse(
        &format!(
            r#"
listen = "127.0.0.1:0"
[[host]]
name = "a"
ip = "127.0.0.1"
base_port = {a}
ports = 2
[[host]]
name = "b"
ip = "127.0.0.1"
base_port = {b}
ports = 2
[[path]]
rate_mbps = 100
delay_us = 500
[[path]]
rate_mbps = 100
delay_us = 500
"#,
            a = base,
            b = base + 10
        ),
        &[],
    )
    .unwrap()
}

fn data(len: usize) -> Vec<u8> {
    let mut d = vec![0u8; len];
    d[0] = 1;
    d[1] = 1;
    d
}

/// Binds a free pair of port ranges (tests run in parallel with other tests).
fn bind_hosts() -> (Topology, Vec<UdpSocket>, Vec<UdpSocket>) {
    for base in (31_000..60_000).step_by(97) {
        let t = topology(base);
        let a: Result<Vec<_>, _> = (0..2)
            .map(|i| UdpSocket::bind(t.hosts[0].addr(i)))
            .collect();
        let b: Result<Vec<_>, _> = (0..2)
            .map(|i| UdpSocket::bind(t.hosts[1].addr(i)))
            .collect();
        if let (Ok(a), Ok(b)) = (a, b) {
            return (t, a, b);
        }
    }
    panic!("no free ports");
}

#[test]
fn forwards_by_source_port_and_survives_bad_input() {
    let (t, a, b) = bind_hosts();
    let fabric = Fabric::spawn(&t).unwrap();
    let to = fabric.addr();
    for s in &b {
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    }
    // Garbage and a stranger first: counted, nothing delivered.
    a[0].send_to(b"not rondo", to).unwrap();
    a[0].send_to(&[], to).unwrap();
    let stranger = UdpSocket::bind("127.0.0.1:0").unwrap();
    stranger.send_to(&data(100), to).unwrap();
    // Then one datagram per path.
    a[0].send_to(&data(300), to).unwrap();
    a[1].send_to(&data(400), to).unwrap();
    let mut buf = [0u8; 2048];
    let (n0, from0) = b[0].recv_from(&mut buf).unwrap();
    let (n1, _) = b[1].recv_from(&mut buf).unwrap();
    assert_eq!(
        (n0, n1),
        (300, 400),
        "each path's datagram reaches that path's socket"
    );
    assert_eq!(from0.ip(), to.ip());
    // A host that vanished: its datagrams are sent into the void, counted.
    drop(a);
    for s in &b {
        s.send_to(&data(200), to).unwrap();
    }
    std::thread::sleep(Duration::from_millis(50));
    assert!(fabric.is_running());
    let report = fabric.stop().unwrap();
    let c = report.counters;
    assert_eq!(c.datagrams_in, 7, "{c:?}");
    assert_eq!(c.malformed, 2);
    assert_eq!(c.unknown_source, 1);
    assert_eq!(c.class(1, 0, Class::Data).delivered, 1);
    assert_eq!(c.class(1, 1, Class::Data).delivered, 1);
    assert_eq!(c.class(0, 0, Class::Data).enqueued, 1);
    assert_eq!(c.class(0, 1, Class::Data).enqueued, 1);
    assert!(report.cpu_ns > 0);
    let json: serde_json::Value = serde_json::from_str(&c.to_json()).unwrap();
    assert_eq!(json["malformed"], 2);
    assert!(c.to_table().contains("unknown source 1"));
}

#[test]
fn a_taken_listen_port_is_an_error_not_a_panic() {
    let (mut t, _a, _b) = bind_hosts();
    let busy = UdpSocket::bind("127.0.0.1:0").unwrap();
    t.listen = busy.local_addr().unwrap();
    let e = Fabric::spawn(&t).unwrap_err().to_string();
    assert!(e.contains("bind the fabric's socket"), "{e}");
}
