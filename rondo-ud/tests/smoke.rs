use rondo_ud::mem::PathSpec;
use rondo_ud::testbed::Testbed;
use rondo_ud::*;

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
        EndpointConfig::default(),
    )
    .unwrap();
    let data: Vec<u8> = (0..4_000_000u32).map(|i| (i * 7 + 3) as u8).collect();
    tb.post(7, data.clone()).unwrap();
    let ok = tb.run_until(Instant::from_us(20_000), |t| t.send_completions() == 1);
    let s = tb.sender();
    eprintln!("t={:?} stats={:?}", tb.now(), s.sender_stats());
    for p in s.paths() {
        eprintln!(
            "w={:.1} r={:.3} rtt={:?} skip={} inflight={} {:?}",
            p.window(),
            p.ack_rate(),
            p.srtt(),
            p.skip(),
            p.inflight(),
            p.counters()
        );
    }
    let r = tb.receiver().receiver_stats();
    eprintln!(
        "ood mean {:.2} p99 {} max {}; sched at {:?}",
        r.ood.mean(),
        r.ood.quantile(0.99),
        r.ood.max(),
        tb.sender().scheduler_enabled_at()
    );
    assert!(ok);
    let got: Vec<_> = tb.received().collect();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, 7);
    assert!(got[0].1 == data.as_slice());
}
