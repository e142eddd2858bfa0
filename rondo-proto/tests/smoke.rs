//! One 4 MB message over the paper's four testbed paths, end to end.

use rondo_proto::*;
use rondo_sim::pair::PathSpec;
use rondo_sim::Testbed;

#[test]
fn one_message_over_four_paths() {
    let paths = [
        PathSpec::new(25.0, 10.0),
        PathSpec::new(20.0, 5.0),
        PathSpec::new(15.0, 5.0),
        PathSpec::new(10.0, 5.0),
    ];
    let mut tb = Testbed::new(
        1,
        100.0,
        &paths,
        &FlowConfig::default(),
        BufferConfig::default(),
    )
    .unwrap();
    let data: Vec<u8> = (0..4_000_000u32).map(|i| (i * 7 + 3) as u8).collect();
    tb.post(7, data.clone()).unwrap();
    assert!(tb.run_until(Instant::from_us(20_000), |t| t.send_completions() == 1));
    let got: Vec<_> = tb.received().collect();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, 7);
    assert!(got[0].1 == data.as_slice());
    // Every path carried data, and the scheduler came on.
    assert!(tb
        .sender()
        .paths()
        .iter()
        .all(|p| p.counters().data_sent > 0));
    assert!(tb.sender().scheduler_enabled_at().is_some());
}

/// A flow with a 9000-byte MTU gets its capacity probes answered: the testbed's
/// probe class holds two of its probes (the links' default, two 1500-byte
/// probes, dropped every one).
#[test]
fn jumbo_capacity_probes_cross_the_testbed() {
    let paths = [PathSpec::new(25.0, 5.0), PathSpec::new(25.0, 5.0)];
    let cfg = FlowConfig {
        mtu: 9000,
        ..FlowConfig::default()
    };
    let buffer = BufferConfig {
        slot_size: 9000,
        ..BufferConfig::default()
    };
    let mut tb = Testbed::new(1, 50.0, &paths, &cfg, buffer).unwrap();
    tb.post(1, vec![7; 2_000_000]).unwrap();
    assert!(tb.run_until(Instant::from_us(20_000), |t| t.send_completions() == 1));
    let s = tb.sender().sender_stats();
    assert!(s.probes_sent > 0, "{s:?}");
    assert!(s.probes_acked > 0, "{s:?}");
}
