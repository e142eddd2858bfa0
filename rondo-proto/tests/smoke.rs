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
