//! The DCQCN baselines in the simulator: `ecmp` keeps each flow on one path and
//! DCQCN brings its rate down to that path's; `ar` turns the fabric's adaptive
//! routing on and gets the flow's packets spread (and reordered) by the switches.

use rondo_sim::scenario::{parse, run, Override, Report, RunOptions, Scenario};
use rondo_sim::Routing;

fn scenario(text: &str, sets: &[&str]) -> Scenario {
    let sets: Vec<Override> = sets.iter().map(|s| Override::parse(s).unwrap()).collect();
    let s = parse("dcqcn.toml", text, &sets).unwrap_or_else(|e| panic!("{e}"));
    s.check("dcqcn.toml").unwrap_or_else(|e| panic!("{e}"));
    s
}

fn report(text: &str, sets: &[&str]) -> Report {
    run(
        &scenario(text, sets),
        "dcqcn.toml",
        RunOptions::default(),
        &mut |_| {},
    )
    .unwrap_or_else(|e| panic!("{e}"))
    .report
}

/// One long flow over four 25 Gbit/s paths from a 100 Gbit/s host.
const FOUR_PATHS: &str = r#"
seed = 3
duration_us = 3000
warmup_us = 1500
[topology]
kind = "parallel"
host_gbps = 100
paths = [ { gbps = 25, delay_us = 2.0 }, { gbps = 25, delay_us = 2.0 },
          { gbps = 25, delay_us = 2.0 }, { gbps = 25, delay_us = 2.0 } ]
[workload]
kind = "long_flows"
flows = 1
"#;

#[test]
fn an_ecmp_flow_is_held_to_its_one_path_by_dcqcn() {
    let r = report(FOUR_PATHS, &["transport.kind=\"ecmp\""]);
    // One path of four: a quarter of the ideal 100 Gbit/s, most of it used once
    // DCQCN has come down from line rate.
    assert!(
        r.goodput_gbps > 18.0 && r.goodput_gbps < 25.0,
        "goodput {} Gbit/s",
        r.goodput_gbps
    );
    // In order on one path, no loss: DCQCN kept the queue below the drop limit.
    assert_eq!(r.ood.nic_max, 0);
    assert_eq!(r.retx.packets, 0);
    assert_eq!(r.drops.switch, 0);
    // Rondo sprays over all four.
    let rondo = report(FOUR_PATHS, &[]);
    assert!(
        rondo.goodput_gbps > 2.0 * r.goodput_gbps,
        "rondo {}",
        rondo.goodput_gbps
    );
}

/// Two pods of the paper's Clos are too big for a debug test; a k=4 fat tree's
/// permutation crosses pods on four equal-cost paths.
const PERMUTATION: &str = r#"
seed = 4
duration_us = 3000
[topology]
kind = "fattree"
k = 4
[workload]
kind = "permutation"
bytes = 200000
"#;

#[test]
fn ar_routes_adaptively_and_its_flows_complete_reordered() {
    let ar = scenario(PERMUTATION, &["transport.kind=\"ar\""]);
    assert_eq!(ar.sim_config().switch.routing, Routing::Adaptive);
    let pinned = scenario(
        PERMUTATION,
        &["transport.kind=\"ar\"", "switch.routing=\"ecmp\""],
    );
    assert_eq!(pinned.sim_config().switch.routing, Routing::Ecmp);
    // The baselines' switches hash; Rondo's steer by logical path.
    let ecmp = scenario(PERMUTATION, &["transport.kind=\"ecmp\""]);
    assert_eq!(ecmp.sim_config().switch.routing, Routing::Ecmp);
    let rondo = scenario(PERMUTATION, &[]);
    assert_eq!(rondo.sim_config().switch.routing, Routing::Steer);

    let r_ar = report(PERMUTATION, &["transport.kind=\"ar\""]);
    let r_ecmp = report(PERMUTATION, &["transport.kind=\"ecmp\""]);
    for r in [&r_ar, &r_ecmp] {
        assert_eq!(r.flows_completed, r.flows_total, "{}", r.transport);
        assert_eq!(r.end, "done");
    }
    // ECMP delivers each flow in order; adaptive routing reorders.
    assert_eq!(r_ecmp.ood.nic_max, 0);
    assert!(r_ar.ood.nic_max > 0);
    // Adaptive routing avoids ECMP's collisions: no slower to finish the job.
    let (jct_ar, jct_ecmp) = (r_ar.jct_us.unwrap(), r_ecmp.jct_us.unwrap());
    assert!(
        jct_ar <= jct_ecmp * 1.05,
        "ar {jct_ar} us, ecmp {jct_ecmp} us"
    );
}
