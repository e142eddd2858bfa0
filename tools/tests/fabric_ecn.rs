//! The fabric's marks reach the UDP datapath: data that found a queue arrives with
//! CE in its TOS byte (and the data class's DSCP), as `rondo_ud`'s receive path
//! reads it, while the datagram that found the path idle arrives unmarked.

use rondo_fabric::{Class, Fabric, Topology};
use rondo_ud::udp::{UdpConfig, UdpDatapath};
use std::net::{Ipv4Addr, UdpSocket};
use std::time::{Duration, Instant};

#[test]
fn marks_are_read_back_by_the_udp_datapath() {
    let base = 30_500;
    let topo = Topology::parse(
        &format!(
            r#"
listen = "127.0.0.1:0"
[[host]]
name = "a"
ip = "127.0.0.1"
base_port = {base}
ports = 1
[[host]]
name = "b"
ip = "127.0.0.1"
base_port = {b}
ports = 1
[[path]]
rate_mbps = 10
delay_us = 100
ecn_kb = 0
"#,
            b = base + 10
        ),
        &[],
    )
    .unwrap();
    let mut rx = UdpDatapath::bind(UdpConfig {
        local_ip: Ipv4Addr::LOCALHOST.into(),
        base_port: base + 10,
        paths: 1,
        gro: false,
        ..UdpConfig::default()
    })
    .unwrap();
    if !rx.tos_readback() {
        eprintln!("skipped: this kernel does not report the TOS byte");
        return;
    }
    let tx = UdpSocket::bind(("127.0.0.1", base)).unwrap();
    let fabric = Fabric::spawn(&topo).unwrap();
    let mut d = vec![0u8; 1000];
    d[0] = 1;
    d[1] = 1;
    for _ in 0..5 {
        tx.send_to(&d, fabric.addr()).unwrap();
    }
    let mut tos = Vec::new();
    let start = Instant::now();
    while tos.len() < 5 && start.elapsed() < Duration::from_secs(5) {
        rx.receive_with(Duration::from_millis(50), |_, _, t| tos.push(t))
            .unwrap();
    }
    let c = fabric.stop().unwrap().counters;
    let marked = c.class(1, 0, Class::Data).marked;
    assert_eq!(tos.len(), 5, "{c:?}");
    let ce = tos.iter().filter(|t| t.is_some_and(|t| t & 3 == 3)).count() as u64;
    assert_eq!(
        ce, marked,
        "every mark the fabric counted arrives as CE: {tos:?}"
    );
    assert!(
        marked >= 1,
        "a 10 Mb/s path queues back-to-back datagrams: {c:?}"
    );
    assert_eq!(
        tos[0].map(|t| t & 3),
        Some(0b10),
        "the first found the path idle: ECT(0)"
    );
    assert!(
        tos.iter().all(|t| t.map(|t| t >> 2) == Some(26)),
        "data's DSCP: {tos:?}"
    );
}
