//! Rondo over the UDP datapath between two network namespaces joined by a veth
//! pair (the commands are those of `docs/udp.md`). Needs root and `ip`; without
//! them the test prints one line saying why it was skipped.
//!
//! The peer side runs in the namespace as a second copy of this test binary
//! (`ip netns exec NS <this binary> netns_peer_side --ignored`), bound to the
//! default port 4792.

#![cfg(target_os = "linux")]

mod udp_util;

use rondo_proto::{BufferConfig, Endpoint, Event, SharedBuffer};
use rondo_ud::udp::{Clock, UdpConfig, UdpDatapath, DEFAULT_PORT};
use std::net::{IpAddr, SocketAddr};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use udp_util::*;

const PATHS: u16 = 4;
const MSG_LEN: usize = 1 << 20;
const SEED: u64 = 4792;

fn run(args: &[&str]) -> Result<(), String> {
    command("ip", args)
}

fn tc(args: &[&str]) -> Result<(), String> {
    command("tc", args)
}

fn command(cmd: &str, args: &[&str]) -> Result<(), String> {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .map_err(|e| format!("{cmd} {}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{cmd} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// A namespace with one end of a veth pair; deleted (with the pair) on drop.
struct Netns {
    name: String,
    /// This side's end of the veth pair.
    veth: String,
}

impl Netns {
    fn create(name: &str, veth: &str, host_ip: &str, ns_ip: &str) -> Result<Netns, String> {
        run(&["netns", "add", name])?;
        let ns = Netns {
            name: name.to_string(),
            veth: veth.to_string(),
        };
        let peer = format!("{veth}p");
        run(&["link", "add", veth, "type", "veth", "peer", "name", &peer])?;
        run(&["link", "set", &peer, "netns", name])?;
        run(&["addr", "add", &format!("{host_ip}/24"), "dev", veth])?;
        run(&["link", "set", veth, "up"])?;
        let ns_cidr = format!("{ns_ip}/24");
        for cmd in [
            ["addr", "add", ns_cidr.as_str(), "dev", peer.as_str()],
            ["link", "set", peer.as_str(), "up", ""],
            ["link", "set", "lo", "up", ""],
        ] {
            let mut args = vec!["netns", "exec", name, "ip"];
            args.extend(cmd.iter().copied().filter(|s| !s.is_empty()));
            run(&args)?;
        }
        Ok(ns)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = run(&["netns", "del", &self.name]);
    }
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// A namespace joined to this one by a veth pair (MTU 1500) on subnet
/// 10.`net`.x.0/24: the namespace and the host's and the namespace's addresses, or
/// `None` (having said why) where this machine cannot make one. Each test passes
/// its own `net`, so that tests running at once do not collide.
fn namespace(net: u8) -> Option<(Netns, String, String)> {
    if !is_root() {
        println!("skipped: creating network namespaces needs root");
        return None;
    }
    if Command::new("ip").arg("-V").output().is_err() {
        println!("skipped: the `ip` command (iproute2) is not installed");
        return None;
    }
    let id = std::process::id();
    let subnet = format!("10.{net}.{}", id % 250);
    let (host_ip, ns_ip) = (format!("{subnet}.1"), format!("{subnet}.2"));
    match Netns::create(
        &format!("rondo{net}-{id}"),
        &format!("rv{net}-{}", id % 100_000),
        &host_ip,
        &ns_ip,
    ) {
        Ok(ns) => Some((ns, host_ip, ns_ip)),
        Err(e) => {
            println!("skipped: could not set up the namespaces ({e})");
            None
        }
    }
}

/// A GSO segment cannot be fragmented: the kernel refuses a train of datagrams
/// longer than the route's MTU (EMSGSIZE) where it would fragment each one sent
/// alone. The datapath must send them alone, not drop them: it did, and a flow
/// whose retransmissions formed trains lost them all until `RetryExceeded` (about
/// 1 run in 10 of `transfer_between_network_namespaces`).
#[test]
fn gso_trains_longer_than_the_route_mtu_go_one_by_one() {
    let Some((_ns, host_ip, ns_ip)) = namespace(78) else {
        return;
    };
    let mut dp = UdpDatapath::bind(UdpConfig {
        local_ip: host_ip.parse().unwrap(),
        base_port: 0,
        paths: 2,
        ..UdpConfig::default()
    })
    .unwrap();
    if !dp.gso() {
        println!("skipped: this kernel has no UDP GSO");
        return;
    }
    // Nobody listens there; the datagrams only have to leave.
    let ns_ip: IpAddr = ns_ip.parse().unwrap();
    assert_eq!(
        rondo_ud::udp::route_mtu(ns_ip).unwrap(),
        1500,
        "a veth's MTU"
    );
    let peer = [SocketAddr::new(ns_ip, 9), SocketAddr::new(ns_ip, 9)];
    assert_eq!(dp.raw_blast(&peer, 1500, 40).unwrap(), 40);
    let s = dp.stats();
    assert_eq!(
        (s.send_errors, s.send_dropped, s.datagrams_out),
        (0, 0, 40),
        "{s:?}"
    );
    assert!(s.gso_fallbacks >= 1, "{s:?}");
    assert!(dp.gso(), "GSO stays on for shorter datagrams");
    assert!(dp.gso_segment_limit() < 1500, "{}", dp.gso_segment_limit());
    // Shorter datagrams still form trains.
    assert_eq!(dp.raw_blast(&peer, 1000, 40).unwrap(), 40);
    let t = dp.stats();
    assert!(t.gso_sends > s.gso_sends, "{t:?}");
    assert_eq!((t.send_errors, t.gso_fallbacks), (0, s.gso_fallbacks));
}

#[test]
fn transfer_between_network_namespaces() {
    let Some((ns, host_ip, ns_ip)) = namespace(77) else {
        return;
    };
    let (_, stats) = transfer(&ns, &host_ip, &ns_ip, MSG_LEN).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        stats.paths_used == PATHS,
        "every path carried data: {stats:?}"
    );
}

/// What a transfer's sender saw.
#[derive(Debug)]
struct Outcome {
    sender: rondo_proto::SenderStats,
    datapath: rondo_ud::udp::UdpStats,
    paths_used: u16,
}

/// One `len`-byte message from this namespace to `ns` over the UDP datapath,
/// checked byte for byte by the peer side: how long it took and what the sender
/// saw, or what both sides saw when it failed.
fn transfer(
    ns: &Netns,
    host_ip: &str,
    ns_ip: &str,
    len: usize,
) -> Result<(Duration, Outcome), String> {
    let clock = Clock::new();
    let mut dp = UdpDatapath::bind(UdpConfig {
        local_ip: host_ip.parse().unwrap(),
        base_port: 0,
        paths: PATHS,
        ..UdpConfig::default()
    })
    .unwrap();
    let mine: Vec<String> = dp.local_addrs().iter().map(|a| a.to_string()).collect();
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new("ip")
        .args(["netns", "exec", &ns.name])
        .arg(&exe)
        .args(["netns_peer_side", "--exact", "--ignored", "--nocapture"])
        .env(
            "RONDO_NETNS_PEER",
            format!("{ns_ip};{};{len}", mine.join(",")),
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let peer_ip: IpAddr = ns_ip.parse().unwrap();
    let peer: Vec<SocketAddr> = (0..PATHS)
        .map(|i| SocketAddr::new(peer_ip, DEFAULT_PORT + i))
        .collect();
    let cfg = flow(PATHS);
    let mut ep = Endpoint::new(SharedBuffer::new(BufferConfig::default()).unwrap());
    let h = ep.connect(clock.now(), FLOW_A, FLOW_B, &cfg).unwrap();
    dp.add_peer(FLOW_A, peer).unwrap();
    let started = Instant::now();
    ep.post(h, clock.now(), 1, pattern(len, SEED)).unwrap();
    let deadline = started + Duration::from_secs(60);
    let mut done = None;
    let mut failed = None;
    while done.is_none() && failed.is_none() && Instant::now() < deadline {
        dp.poll(&mut ep, &clock, Duration::from_millis(1)).unwrap();
        while let Some(e) = ep.poll_event(h) {
            if matches!(e, Event::SendComplete { msg_id: 1 }) {
                done = Some(started.elapsed());
            }
            if matches!(e, Event::Error(_)) {
                failed = Some(format!("{e:?} after {:?}", started.elapsed()));
            }
        }
    }
    let outcome = Outcome {
        sender: *ep.connection(h).sender_stats(),
        datapath: dp.stats(),
        paths_used: ep
            .connection(h)
            .paths()
            .iter()
            .filter(|p| p.counters().data_sent > 0)
            .count() as u16,
    };
    let Some(took) = done else {
        // The peer prints its counters when its stdin closes; then it exits.
        drop(child.stdin.take());
        let out = child.wait_with_output().unwrap();
        return Err(format!(
            "{}: {outcome:?}\npeer said: {}{}",
            failed.unwrap_or_else(|| "no completion in 60 s".into()),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    };
    // Keep acknowledging while the peer finishes.
    let until = Instant::now() + Duration::from_millis(200);
    while Instant::now() < until {
        dp.poll(&mut ep, &clock, Duration::from_millis(1)).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || !log.contains(&format!("peer: received {len} bytes, byte-exact")) {
        return Err(format!(
            "peer side failed: {log}{}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok((took, outcome))
}

/// A bottleneck of 200 Mbit/s with a queue of 8 KB (five datagrams) on the
/// way, made with `tc tbf` on this side of the veth: a 4 MiB WRITE must get
/// through byte-exact, however many datagrams the queue drops.
#[test]
fn transfer_through_a_slow_bottleneck_with_a_short_queue() {
    let Some((ns, host_ip, ns_ip)) = namespace(79) else {
        return;
    };
    let veth = ns.veth.clone();
    if let Err(e) = tc(&[
        "qdisc", "add", "dev", &veth, "root", "tbf", "rate", "200mbit", "burst", "8kb", "limit",
        "8kb",
    ]) {
        println!("skipped: no tbf qdisc here ({e})");
        return;
    }
    let len = 4 << 20;
    let (took, stats) = transfer(&ns, &host_ip, &ns_ip, len).unwrap_or_else(|e| panic!("{e}"));
    let gbps = len as f64 * 8.0 / took.as_secs_f64() / 1e9;
    println!("4 MiB through 200 Mbit/s in {took:?} ({gbps:.3} Gbit/s): {stats:?}");
    assert!(
        stats.sender.retransmissions > 0,
        "the queue dropped nothing, so this tests nothing: {:?}",
        stats.datapath
    );
}

/// The namespace side of `transfer_between_network_namespaces`; does nothing unless
/// started by it.
#[test]
#[ignore = "started by transfer_between_network_namespaces inside a namespace"]
fn netns_peer_side() {
    let Ok(spec) = std::env::var("RONDO_NETNS_PEER") else {
        return;
    };
    let mut parts = spec.split(';');
    let (ip, addrs) = (parts.next().unwrap(), parts.next().unwrap());
    let len: usize = parts.next().unwrap().parse().unwrap();
    let peer: Vec<SocketAddr> = addrs.split(',').map(|a| a.parse().unwrap()).collect();
    let clock = Clock::new();
    let mut dp = UdpDatapath::bind(UdpConfig {
        local_ip: ip.parse().unwrap(),
        paths: PATHS,
        ..UdpConfig::default() // the default port, 4792
    })
    .unwrap();
    let mut ep = Endpoint::new(SharedBuffer::new(BufferConfig::default()).unwrap());
    let h = ep
        .connect(clock.now(), FLOW_B, FLOW_A, &flow(PATHS))
        .unwrap();
    dp.add_peer(FLOW_B, peer).unwrap();
    // The test closes our stdin when it gives up: then say what we saw.
    let gave_up = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&gave_up);
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
        flag.store(true, Ordering::Relaxed);
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline && !gave_up.load(Ordering::Relaxed) {
        dp.poll(&mut ep, &clock, Duration::from_millis(1)).unwrap();
        if let Some(Event::Received { data, .. }) = ep.poll_event(h) {
            assert!(data == pattern(len, SEED), "payload differs");
            println!("peer: received {} bytes, byte-exact", data.len());
            // Keep acknowledging retransmissions for a moment.
            let until = Instant::now() + Duration::from_millis(100);
            while Instant::now() < until {
                dp.poll(&mut ep, &clock, Duration::from_millis(1)).unwrap();
            }
            return;
        }
    }
    panic!(
        "peer: the message did not arrive; {:?}; endpoint {:?}; datapath {:?}",
        ep.connection(h).receiver_stats(),
        ep.stats(),
        dp.stats()
    );
}
