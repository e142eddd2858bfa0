//! Diagnostics of the bare engine over the UDP datapath, one thread per endpoint (as
//! two hosts would run it): goodput, packets per second, CPU per side, the engine's
//! per-path state (base RTT, smoothed RTT, window, ACK rate), its loss-recovery
//! counters and the datapath's batching, for one flow configuration.
//!
//! `cargo run --release -p rondo-verbs --example engine_udp_diag -- [BYTES] [SECONDS] [PATHS]`
//!
//! Environment (all optional): `MTU` (datagram bytes, default 4120), `DEPTH` (messages
//! in flight, 32), `CFG` (`udp`: `HostProfile::HOST_STACK`, the default; `nic`:
//! `HostProfile::NIC`; `paper`: `FlowConfig::default()`), `WAIT_US`
//! (longest sleep of a driver loop, default 1000).

use rondo_proto::{BufferConfig, Endpoint, Event, FlowConfig, SharedBuffer};
use rondo_ud::udp::{Clock, UdpConfig, UdpDatapath};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// CPU time of the calling thread, ns (from `/proc/thread-self/schedstat`).
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

fn main() {
    let args: Vec<f64> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("a number"))
        .collect();
    let size = args.first().copied().unwrap_or(65_536.0) as usize;
    let secs = args.get(1).copied().unwrap_or(3.0);
    let paths = args.get(2).copied().unwrap_or(4.0) as u16;
    let mtu = env("MTU", 4120) as usize;
    let depth = env("DEPTH", 32) as usize;
    let wait = Duration::from_micros(env("WAIT_US", 1000));
    let base = match std::env::var("CFG").as_deref() {
        Ok("paper") => FlowConfig::default(),
        Ok("nic") => rondo_ud::HostProfile::NIC.flow_config(paths),
        _ => rondo_ud::HostProfile::HOST_STACK.flow_config(paths),
    };
    let mut cfg = FlowConfig {
        mtu,
        token: Some(7),
        ..base
    };
    if let Some(us) = std::env::var("BASE_US")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        cfg.base_rtt =
            (us > 0).then(|| vec![rondo_proto::Duration::from_us(us); usize::from(paths)]);
    }
    if let Some(t) = std::env::var("TAU").ok().and_then(|v| v.parse().ok()) {
        cfg.target_queue_rtts = t;
    }
    if let Ok(v) = std::env::var("PACING") {
        cfg.pacing = v == "1";
    }
    if let Ok(v) = std::env::var("PROBING") {
        cfg.probing = v == "1";
    }
    if let Ok(v) = std::env::var("SCHED") {
        cfg.scheduler = v == "1";
    }
    if let Some(b) = std::env::var("BURST").ok().and_then(|v| v.parse().ok()) {
        cfg.pacing_burst = b;
    }
    if let Some(t) = std::env::var("ERT").ok().and_then(|v| v.parse().ok()) {
        cfg.early_recovery_threshold = t;
    }
    if let Some(w) = std::env::var("MINW").ok().and_then(|v| v.parse().ok()) {
        cfg.min_window = w;
        cfg.initial_window = w;
    }
    if let Some(ms) = std::env::var("RTO_MS").ok().and_then(|v| v.parse().ok()) {
        cfg.rto_min = rondo_proto::Duration::from_ms(ms);
    }
    if let Some(us) = std::env::var("DTOL_US").ok().and_then(|v| v.parse().ok()) {
        cfg.delay_stable_tolerance = rondo_proto::Duration::from_us(us);
    }
    if let Some(g) = std::env::var("LINE_GBPS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        cfg.line_rate_bps = g * 1_000_000_000;
    }
    let udp = UdpConfig {
        local_ip: "127.0.0.1".parse().expect("an address"),
        base_port: 0,
        paths,
        max_datagram: mtu.max(9216),
        ..UdpConfig::default()
    };
    let ec = BufferConfig {
        slot_size: mtu,
        capacity_bytes: 16 << 20,
        ..Default::default()
    };
    let clock = Clock::new();
    let (mut da, mut db) = (
        UdpDatapath::bind(udp.clone()).expect("bind"),
        UdpDatapath::bind(udp).expect("bind"),
    );
    let (mut ea, mut eb) = (
        Endpoint::new(SharedBuffer::new(ec).expect("endpoint")),
        Endpoint::new(SharedBuffer::new(ec).expect("endpoint")),
    );
    let ha = ea.connect(clock.now(), 1, 2, &cfg).expect("connect");
    let hb = eb.connect(clock.now(), 2, 1, &cfg).expect("connect");
    da.add_peer(1, db.local_addrs().to_vec()).expect("peer");
    db.add_peer(2, da.local_addrs().to_vec()).expect("peer");
    let stop = Arc::new(AtomicBool::new(false));
    let stop_b = stop.clone();
    let receiver = std::thread::spawn(move || {
        let cpu0 = thread_cpu_ns();
        let (mut bytes, mut rounds) = (0u64, 0u64);
        while !stop_b.load(Ordering::Relaxed) {
            db.poll(&mut eb, &clock, wait).expect("poll");
            rounds += 1;
            while let Some(e) = eb.poll_event(hb) {
                if let Event::Received { data, .. } = e {
                    bytes += data.len() as u64;
                }
            }
        }
        let c = eb.connection(hb);
        let rx = c.receiver_stats();
        (
            bytes,
            thread_cpu_ns() - cpu0,
            rounds,
            db.stats(),
            rx.ood.max(),
            rx.ood.quantile(0.99),
            rx.duplicates,
            rx.placed_repaired,
        )
    });
    let msg = vec![7u8; size];
    let cpu0 = thread_cpu_ns();
    let start = std::time::Instant::now();
    let end = start + Duration::from_secs_f64(secs);
    let (mut posted, mut done, mut rounds) = (0usize, 0usize, 0u64);
    while std::time::Instant::now() < end {
        while posted - done < depth {
            ea.post(ha, clock.now(), posted as u64, msg.clone())
                .expect("post");
            posted += 1;
        }
        da.poll(&mut ea, &clock, wait).expect("poll");
        rounds += 1;
        while let Some(e) = ea.poll_event(ha) {
            done += usize::from(matches!(e, Event::SendComplete { .. }));
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    let cpu_a = thread_cpu_ns() - cpu0;
    stop.store(true, Ordering::Relaxed);
    let (bytes, cpu_b, rounds_b, sb, ood_max, ood_p99, dups, repaired) =
        receiver.join().expect("receiver");
    let c = ea.connection(ha);
    let tx = c.sender_stats();
    let sa = da.stats();
    println!(
        "{size} B, mtu {mtu}, depth {depth}: {:.2} Gb/s goodput, {:.0} kpps data, cpu a {:.2} b {:.2} s, {:.0} kpps per core",
        bytes as f64 * 8.0 / elapsed / 1e9,
        tx.data_packets_sent as f64 / elapsed / 1e3,
        cpu_a as f64 / 1e9,
        cpu_b as f64 / 1e9,
        tx.data_packets_sent as f64 / ((cpu_a + cpu_b) as f64 / 1e9) / 1e3,
    );
    println!(
        "sender: sent {} retx {} spurious {} lost {} rto {} naks {} | receiver: ood max {ood_max} p99 {ood_p99} dups {dups} repaired {repaired}",
        tx.data_packets_sent,
        tx.retransmissions,
        tx.spurious_retransmissions,
        tx.lost_declared,
        tx.rto_fired,
        tx.naks_received,
    );
    println!("scheduler enabled at {:?}", c.scheduler_enabled_at());
    let cc = c.congestion_control();
    for (i, p) in c.paths().iter().enumerate() {
        println!(
            "path {i}: base {:?} srtt {:?} window {:.1} margin {:?} rate {:?}/us inflight {} skip {} fwd {:?}",
            p.base_rtt(),
            p.srtt(),
            cc.window(i),
            cc.arcc().map(|a| a.margin(i)),
            cc.arcc().map(|a| a.ack_rate(i)),
            c.paths().inflight(i),
            c.skip(i),
            p.forward_delay_ns().map(|d| (d / 1e3).round()),
        );
    }
    for (name, s, r) in [("a", sa, rounds), ("b", sb, rounds_b)] {
        println!(
            "dp {name}: rounds {r}, out {} in {} | {:.1} dgrams/sendmmsg, {} gso, {:.1} dgrams/recv batch, {} gro, truncated {}",
            s.datagrams_out,
            s.datagrams_in,
            s.datagrams_out as f64 / s.send_batches.max(1) as f64,
            s.gso_sends,
            s.datagrams_in as f64 / s.recv_batches.max(1) as f64,
            s.gro_receives,
            s.truncated,
        );
    }
}
