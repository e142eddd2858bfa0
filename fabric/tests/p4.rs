//! The P4 control plane routes every source port exactly as the emulator does: the
//! generated table entries, read back from the text of both targets, against
//! `Switch::route` for every port of every host (and for strangers, which neither
//! routes).

use rondo_fabric::p4::{self, Target};
use rondo_fabric::{Switch, Topology};
use rondo_proto::time::Instant;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

/// (destination, source port) to (egress port, path), from the generated text.
fn read_back(text: &str, target: Target) -> HashMap<(IpAddr, u16), (u16, usize)> {
    let mut m = HashMap::new();
    for line in text.lines() {
        let entry = match target {
            Target::Bmv2 => line
                .strip_prefix("table_add RondoIngress.path_table RondoIngress.set_path ")
                .map(|rest| {
                    let w: Vec<&str> = rest.split_whitespace().collect();
                    assert_eq!(w[2], "=>", "{line}");
                    (
                        w[0].parse().unwrap(),
                        w[1].parse().unwrap(),
                        w[3].parse().unwrap(),
                        w[4].parse().unwrap(),
                    )
                }),
            Target::Tna => line
                .strip_prefix("ig.path_table.add_with_set_path(")
                .map(|rest| {
                    let args: HashMap<&str, &str> = rest
                        .trim_end_matches(')')
                        .split(", ")
                        .map(|kv| kv.split_once('=').unwrap())
                        .collect();
                    (
                        args["dst_addr"].trim_matches('"').parse().unwrap(),
                        args["src_port"].parse().unwrap(),
                        args["port"].parse().unwrap(),
                        args["path"].parse().unwrap(),
                    )
                }),
        };
        if let Some((dst, sport, port, path)) = entry {
            assert!(
                m.insert((dst, sport), (port, path)).is_none(),
                "duplicate key in {line}"
            );
        }
    }
    m
}

fn check(topo: &Topology) {
    let sw = Switch::new(topo, Instant::ZERO);
    for target in [Target::Bmv2, Target::Tna] {
        let table = read_back(&p4::config(topo, target, 4156), target);
        let mut routed = 0;
        for (s, host) in topo.hosts.iter().enumerate() {
            // Every port of the host's range and some around it.
            for port in host.base_port.saturating_sub(3)..host.base_port + host.ports + 3 {
                let from = SocketAddr::new(host.ip, port);
                let emulator = sw.route(from);
                let dst = topo.peer_of(s);
                let p4 = table.get(&(topo.hosts[dst].ip, port));
                match emulator {
                    Some((path, d)) => {
                        assert_eq!(d, dst);
                        let want = (topo.switch_port(dst, path), path);
                        assert_eq!(p4, Some(&want), "{target:?}: {from} to host {dst}");
                        routed += 1;
                    }
                    None => {
                        // A port no host owns: no entry for it toward this peer
                        // (another host may own it on the same address).
                        let owned = topo.hosts.iter().any(|h| h.ip == host.ip && h.owns(port));
                        if !owned {
                            assert_eq!(p4, None, "{target:?}: stranger {from} has an entry");
                        }
                    }
                }
            }
        }
        assert_eq!(
            routed,
            table.len(),
            "{target:?}: every entry is a route the emulator has"
        );
    }
}

#[test]
fn the_shipped_testbed_routes_alike() {
    check(&Topology::parse(rondo_fabric::topology::TESTBED, &[]).unwrap());
}

#[test]
fn explicit_routes_more_ports_than_paths_and_three_hosts_route_alike() {
    let t = Topology::parse(
        r#"
listen = "10.0.0.254:4900"
[[host]]
name = "a"
ip = "10.0.0.1"
base_port = 4792
ports = 8
peer = "b"
[[host]]
name = "b"
ip = "10.0.0.2"
base_port = 4792
ports = 8
peer = "c"
switch_ports = [11, 12, 13]
[[host]]
name = "c"
ip = "10.0.0.3"
base_port = 5000
ports = 3
peer = "a"
[[path]]
rate_mbps = 40000
[[path]]
rate_mbps = 25000
ecn_kb = 100
[[path]]
rate_mbps = 10000
[[route]]
dst = "b"
src_port = 4795
path = 0
[[route]]
dst = "c"
src_port = 4792
path = 2
"#,
        &[],
    )
    .unwrap();
    check(&t);
    let text = p4::config(&t, Target::Bmv2, 4156);
    assert!(
        text.contains("RondoIngress.set_path 10.0.0.2 4795 => 11 0"),
        "{text}"
    );
    assert!(
        text.contains("RondoIngress.set_path 10.0.0.3 4792 => 9 2"),
        "{text}"
    );
    assert!(
        text.contains("table_add RondoEgress.ecn_table RondoEgress.set_ecn_threshold 12 => 24"),
        "{text}"
    );
    assert!(text.contains("set_queue_rate 1203080 11 1"), "{text}");
}
