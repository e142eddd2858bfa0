//! The fault-injection middleware inside the simulator's network
//! (`rondo_sim::pair`), in both directions: a sender whose transmissions on one
//! path are black-holed and duplicated, a receiver whose arrivals are duplicated,
//! delayed and reordered; the message still arrives byte-exact. (Corruption is
//! left out: the engine's header carries no checksum, the datapath's does.)

use rondo_proto::*;
use rondo_sim::pair::{Pair, PathSpec};
use rondo_ud::fault::{FaultConfig, FaultInjector};

#[test]
fn a_transfer_survives_faults_on_both_sides() {
    let paths: Vec<PathSpec> = (0..4)
        .map(|i| PathSpec::new(25.0, 2.0 + f64::from(i)))
        .collect();
    let cfg = FlowConfig {
        paths: 4,
        line_rate_bps: 100_000_000_000,
        ..FlowConfig::default()
    };
    let buffer = || SharedBuffer::in_heap(BufferConfig::default()).unwrap();
    let mut a = Endpoint::new(buffer());
    let mut b = Endpoint::new(buffer());
    let ha = a.connect(Instant::ZERO, 1, 2, &cfg).unwrap();
    let hb = b
        .connect(
            Instant::ZERO,
            2,
            1,
            &FlowConfig {
                seed: cfg.seed + 1,
                ..cfg.clone()
            },
        )
        .unwrap();
    let data: Vec<u8> = (0..1_000_000u32).map(|i| (i * 13 + 5) as u8).collect();
    a.post(ha, Instant::ZERO, 9, data.clone()).unwrap();
    let a = FaultInjector::new(a, FaultConfig::default(), 1).with_transmit(
        FaultConfig {
            black_hole_path: Some(3),
            duplicate: 0.02,
            ..FaultConfig::default()
        },
        2,
    );
    let b = FaultInjector::new(
        b,
        FaultConfig {
            duplicate: 0.01,
            delay: Duration::from_us(1),
            jitter: Duration::from_us(2),
            reorder: 0.02,
            reorder_depth: 4,
            ..FaultConfig::default()
        },
        3,
    );
    let mut pair = Pair::new(5, a, b, 100.0, &paths);
    let mut got = None;
    let done = pair.net.drive_until(Instant::from_us(500_000), |_| false);
    assert!(!done);
    while let Some(e) = pair.net.host_mut_quiet(pair.b).inner_mut().poll_event(hb) {
        if let Event::Received { msg_id, data } = e {
            got = Some((msg_id, data));
        }
    }
    let (id, bytes) = got.expect("the message arrived");
    assert_eq!(id, 9);
    assert!(bytes == data, "byte-exact");
    let (tx, rx) = (
        pair.net.host(pair.a).transmit_stats(),
        pair.net.host(pair.b).stats(),
    );
    assert!(tx.black_holed > 0 && tx.duplicated > 0, "{tx:?}");
    assert!(
        rx.duplicated > 0 && rx.reordered > 0 && rx.delayed > 0,
        "{rx:?}"
    );
}
