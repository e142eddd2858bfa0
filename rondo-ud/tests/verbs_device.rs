//! Rondo over the verbs UD datapath on a real RDMA device: two QPs on the first
//! device (or `RONDO_VERBS_DEVICE`), looped through the NIC, exchanging endpoint
//! data over TCP as two hosts would.
//!
//! A custom harness (`harness = false`): on a host without a device (ibverbs'
//! device list is empty) it prints one line saying the tests were skipped and why,
//! and reports them as skipped, never as passed.

use rondo_proto::{BufferConfig, ConnectionHandle, Endpoint, Event, SharedBuffer};
use rondo_ud::udp::Clock;
use rondo_ud::verbs::exchange::EndpointInfo;
use rondo_ud::verbs::inventory::{inventory, GidKind};
use rondo_ud::verbs::{VerbsConfig, VerbsDatapath, VerbsError, VerbsStats};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

/// A device test: panics on failure.
type DeviceTest = fn(&VerbsConfig);

const TESTS: &[(&str, DeviceTest)] = &[
    ("messages_arrive_byte_exact_over_four_paths", transfer),
    (
        "messages_land_in_place_with_nic_timestamps",
        transfer_in_place,
    ),
    ("a_missing_gid_index_is_a_typed_error", bad_gid_index),
];

fn main() {
    let cfg = match device_config() {
        Ok(cfg) => cfg,
        Err(why) => {
            println!("verbs_device: skipped {} tests: {why}", TESTS.len());
            println!(
                "test result: ok. 0 passed; 0 failed; {} ignored; 0 measured; 0 filtered out",
                TESTS.len()
            );
            return;
        }
    };
    println!(
        "verbs_device: device {} gid index {}",
        cfg.device, cfg.address.sgid_index
    );
    let mut passed = 0;
    for (name, test) in TESTS {
        test(&cfg); // panics (and fails the run) on a failed assertion
        println!("test {name} ... ok");
        passed += 1;
    }
    println!("test result: ok. {passed} passed; 0 failed; 0 ignored; 0 measured; 0 filtered out");
}

/// The device and RoCEv2 GID to test on, or why there is none.
fn device_config() -> Result<VerbsConfig, String> {
    let devices = inventory().map_err(|e| format!("no RDMA device ({e})"))?;
    if devices.is_empty() {
        return Err("no RDMA device (ibverbs' device list is empty); run `rondo doctor` on a host with a NIC".into());
    }
    let wanted = std::env::var("RONDO_VERBS_DEVICE").ok();
    for dev in &devices {
        if wanted.as_ref().is_some_and(|w| w != &dev.name) {
            continue;
        }
        for port in dev.ports.iter().filter(|p| p.active) {
            let gid = port
                .gids
                .iter()
                .find(|g| g.kind == GidKind::RoceV2 || g.kind == GidKind::Ib);
            if let Some(g) = gid {
                let mut cfg = VerbsConfig {
                    device: dev.name.clone(),
                    paths: 4,
                    ..VerbsConfig::default()
                };
                cfg.address.port = port.port;
                cfg.address.sgid_index = g.index as u8;
                return Ok(cfg);
            }
        }
    }
    Err(format!(
        "{} RDMA device(s) but no active port with a RoCE v2 or IB GID",
        devices.len()
    ))
}

struct Side {
    dp: VerbsDatapath,
    ep: Endpoint,
    conn: ConnectionHandle,
}

/// A datapath with its peer route, and an endpoint whose flow fits its MTU.
fn side(dp: VerbsDatapath, peer: EndpointInfo, clock: &Clock, local: u32, remote: u32) -> Side {
    let mut dp = dp;
    dp.add_peer(local, peer)
        .expect("add the peer: one AH per path and priority");
    let mut ep = Endpoint::new(SharedBuffer::new(BufferConfig::default()).unwrap());
    let cfg = dp.flow_config(peer.paths);
    dp.check_flow(&cfg).expect("the flow fits the send slots");
    let conn = ep.connect(clock.now(), local, remote, &cfg).unwrap();
    Side { dp, ep, conn }
}

/// Both endpoints' data over loopback TCP, as `rondo perf` exchanges it.
fn exchange(a: EndpointInfo, b: EndpointInfo) -> (EndpointInfo, EndpointInfo) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        b.exchange(&mut s).unwrap()
    });
    let got_b = a.exchange(&mut TcpStream::connect(addr).unwrap()).unwrap();
    (got_b, server.join().unwrap())
}

fn transfer(cfg: &VerbsConfig) {
    run_transfer(cfg, false);
}

/// `b` receives in place (payloads straight into registered message buffers);
/// both sides use NIC completion timestamps when the device has them.
fn transfer_in_place(cfg: &VerbsConfig) {
    let (sa, sb) = run_transfer(cfg, true);
    assert!(sb.in_place_posted > 0, "{sb:?}");
    assert!(sb.in_place_hits + sb.in_place_repaired <= sb.in_place_posted);
    // Each of the six messages had its landing buffer, handed over whole or
    // copied out while WRs were still posted into it.
    let l = sb.landing;
    assert_eq!(l.zero_copy_messages + l.finish_copies, 6, "{sb:?}");
    assert_eq!(sb.malformed + sb.completion_errors, 0, "{sb:?}");
    if sb.rx_timestamps > 0 {
        assert_eq!(sb.rx_timestamps, sb.datagrams_in, "{sb:?}");
        assert!(sa.nic_rtt_samples > 0, "{sa:?}");
    } else {
        println!("verbs_device: the device offers no completion timestamps");
    }
}

fn run_transfer(cfg: &VerbsConfig, in_place: bool) -> (VerbsStats, VerbsStats) {
    let clock = Clock::new();
    let dp_a = VerbsDatapath::open(cfg.clone()).expect("open the verbs datapath");
    let dp_b = VerbsDatapath::open(cfg.clone()).expect("open a second QP");
    let (info_b, info_a) = exchange(dp_a.local_info(), dp_b.local_info());
    let mut a = side(dp_a, info_b, &clock, 1, 2);
    let mut b = side(dp_b, info_a, &clock, 2, 1);
    if in_place {
        let flow = b.dp.flow_config(info_a.paths);
        let min = 2 * b.dp.mtu() as u64;
        b.dp.receive_in_place(&mut b.ep, b.conn, &flow, min, 64 << 20)
            .expect("in-place receive for a flow of the datapath's MTU");
    }
    let msgs: Vec<Vec<u8>> = (0..6u64)
        .map(|i| {
            let mut rng = rondo_proto::rng::Rng::new(i);
            (0..100_003 * (i as usize + 1))
                .map(|_| rng.next_u64() as u8)
                .collect()
        })
        .collect();
    for (i, m) in msgs.iter().enumerate() {
        a.ep.post(a.conn, clock.now(), i as u64, m.clone()).unwrap();
    }
    let mut got = Vec::new();
    let mut completed = 0;
    for _ in 0..2_000_000 {
        a.dp.poll(&mut a.ep, &clock, Duration::from_micros(100))
            .unwrap();
        b.dp.poll_in_place(&mut b.ep, &clock, Duration::from_micros(100))
            .unwrap();
        while let Some(e) = a.ep.poll_event(a.conn) {
            completed += usize::from(matches!(e, Event::SendComplete { .. }));
        }
        while let Some(e) = b.ep.poll_event(b.conn) {
            if let Event::Received { msg_id, data } = e {
                got.push((msg_id, data));
            }
        }
        if completed == msgs.len() {
            break;
        }
    }
    assert_eq!(
        completed,
        msgs.len(),
        "transfer did not finish: {:?}",
        a.dp.stats()
    );
    assert_eq!(got.len(), msgs.len());
    for (i, (id, data)) in got.iter().enumerate() {
        assert_eq!(*id, i as u64);
        assert!(data == &msgs[i], "message {i} differs");
    }
    let (sa, sb) = (a.dp.stats(), b.dp.stats());
    assert!(
        sa.doorbells > 0 && sa.doorbells <= sa.datagrams_out,
        "{sa:?}"
    );
    assert!(sb.inline > 0, "ACKs go inline: {sb:?}");
    assert_eq!(sb.malformed + sb.completion_errors, 0, "{sb:?}");
    assert!(a
        .ep
        .connection(a.conn)
        .paths()
        .iter()
        .all(|p| p.counters().data_sent > 0));
    println!("verbs_device: a {sa:?}");
    println!("verbs_device: b {sb:?}");
    let mut samples = Vec::new();
    a.dp.take_rtt_samples(&mut samples);
    if let Some(min) = samples.iter().map(|s| s.rtt).min() {
        println!(
            "verbs_device: {} NIC RTT samples, min {min:?}",
            samples.len()
        );
    }
    (sa, sb)
}

fn bad_gid_index(cfg: &VerbsConfig) {
    let mut bad = cfg.clone();
    bad.address.sgid_index = 250;
    match VerbsDatapath::open(bad) {
        Err(VerbsError::Port { .. }) => {}
        other => panic!("expected a Port error for GID index 250, got {other:?}"),
    }
}
