//! Baseline for `udp_write_bw`: the bare engine over the UDP datapath, both
//! endpoints driven by this one thread, 64 KiB messages, 32 in flight.
//!
//! `cargo run --release -p rondo-verbs --example engine_udp_bw -- [BYTES] [ITERS] [PATHS]`

use rondo_proto::{BufferConfig, Endpoint, Event, FlowConfig, SharedBuffer};
use rondo_ud::udp::{Clock, UdpConfig, UdpDatapath};

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("a number"))
        .collect();
    let size = args.first().copied().unwrap_or(65_536);
    let iters = args.get(1).copied().unwrap_or(2_000);
    let paths = args.get(2).copied().unwrap_or(4) as u16;
    let udp = UdpConfig {
        local_ip: "127.0.0.1".parse().unwrap(),
        base_port: 0,
        paths,
        ..UdpConfig::default()
    };
    let cfg = FlowConfig {
        mtu: 9000,
        line_rate_bps: 10_000_000_000,
        token: Some(7),
        ..rondo_ud::HostProfile::HOST_STACK.flow_config(paths)
    };
    let clock = Clock::new();
    let ec = BufferConfig {
        slot_size: 9000,
        capacity_bytes: 4 << 20,
        ..Default::default()
    };
    let (mut da, mut db) = (
        UdpDatapath::bind(udp.clone()).unwrap(),
        UdpDatapath::bind(udp).unwrap(),
    );
    let (mut ea, mut eb) = (
        Endpoint::new(SharedBuffer::new(ec).unwrap()),
        Endpoint::new(SharedBuffer::new(ec).unwrap()),
    );
    let ha = ea.connect(clock.now(), 1, 2, &cfg).unwrap();
    let hb = eb.connect(clock.now(), 2, 1, &cfg).unwrap();
    da.add_peer(1, db.local_addrs().to_vec()).unwrap();
    db.add_peer(2, da.local_addrs().to_vec()).unwrap();
    let msg = vec![7u8; size];
    let start = std::time::Instant::now();
    let (mut posted, mut done) = (0, 0);
    while done < iters {
        while posted < iters && posted - done < 32 {
            ea.post(ha, clock.now(), posted as u64, msg.clone())
                .unwrap();
            posted += 1;
        }
        da.poll(&mut ea, &clock, std::time::Duration::ZERO).unwrap();
        db.poll(&mut eb, &clock, std::time::Duration::ZERO).unwrap();
        while let Some(e) = ea.poll_event(ha) {
            done += usize::from(matches!(e, Event::SendComplete { .. }));
        }
        while eb.poll_event(hb).is_some() {}
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "engine {size} B x {iters}: {:.2} Gb/s, {:.3} Mmsg/s, retx {}",
        (size * iters) as f64 * 8.0 / secs / 1e9,
        iters as f64 / secs / 1e6,
        ea.connection(ha).sender_stats().retransmissions
    );
}
