//! The report's goodput per workload table (`workloads`): a finite incast beside a
//! single-path background flow, each table with its own flows, goodput and JCT.

use rondo_sim::scenario::{parse, run, Override, RunOptions};

#[test]
fn each_workload_table_gets_its_flows_goodput_and_jct() {
    let text = r#"
        duration_us = 2000
        [topology]
        kind = "fattree"
        k = 4
        [[workload]]
        kind = "incast"
        senders = 4
        receiver = 0
        first_sender = 4
        bytes = 200000
        [[workload]]
        kind = "background"
        src = 8
        dst = 1
        stop_us = 600
    "#;
    let s = parse("w.toml", text, &[] as &[Override]).unwrap();
    let r = run(&s, "w.toml", RunOptions::default(), &mut |_| {})
        .unwrap()
        .report;
    assert_eq!(r.workloads.len(), 2);
    let (incast, bg) = (&r.workloads[0], &r.workloads[1]);
    assert_eq!((incast.kind.as_str(), incast.flows), ("incast", 4));
    assert_eq!((bg.kind.as_str(), bg.flows), ("background", 1));
    assert_eq!(incast.flows_completed, 4);
    assert_eq!(
        incast.jct_us, r.jct_us,
        "the only finite flows are the incast's"
    );
    assert_eq!(bg.jct_us, None, "a long-lived table has no JCT");
    assert!(incast.goodput_gbps > 0.0 && bg.goodput_gbps > 0.0, "{r:?}");
    let sum = incast.goodput_gbps + bg.goodput_gbps;
    assert!(
        (sum - r.goodput_gbps).abs() < 1e-9,
        "{sum} vs {}",
        r.goodput_gbps
    );
}
