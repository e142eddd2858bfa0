//! `transport.intervals_run_on` (`rondo_proto::FlowConfig::intervals_run_on`):
//! an ARCC update interval without an ACK runs on, with no timer, until an ACK
//! falls into it. Where round trips span many update intervals (an incast's
//! standing queue) the hosts are woken far less often; the flows finish as
//! they did. Off by default (docs/engine.md, "Intervals that run on").

use rondo_sim::scenario::{load, run, Override, Report, RunOptions};

fn report(name: &str, sets: &[&str]) -> Report {
    let sets: Vec<Override> = sets.iter().map(|s| Override::parse(s).unwrap()).collect();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join(format!("{name}.toml"));
    let s = load(&path, &sets).unwrap_or_else(|e| panic!("{e}"));
    run(&s, name, RunOptions::default(), &mut |_| {})
        .unwrap_or_else(|e| panic!("{e}"))
        .report
}

/// fig10's 4:1 incast and its all-to-all of 8 receivers: measured 553,142 ->
/// 478,193 events (JCT 1,328.6 -> 1,328.6 us) and 4,091,861 -> 3,899,148
/// (194.0 -> 188.6 us).
#[test]
fn intervals_that_run_on_wake_the_hosts_less_for_the_same_jct() {
    for name in ["fig10-incast", "fig10-alltoall"] {
        let off = report(name, &[]);
        let on = report(name, &["transport.intervals_run_on=true"]);
        println!(
            "{name}: events {} -> {}, JCT {:.1} -> {:.1} us",
            off.sim.events,
            on.sim.events,
            off.jct_us.unwrap(),
            on.jct_us.unwrap()
        );
        assert_eq!(on.flows_completed, on.flows_total, "{name}");
        assert!(
            on.sim.events * 100 < off.sim.events * 96,
            "{name}: events {} with, {} without",
            on.sim.events,
            off.sim.events
        );
        let (jct_off, jct_on) = (off.jct_us.unwrap(), on.jct_us.unwrap());
        assert!(
            jct_on <= jct_off * 1.01,
            "{name}: JCT {jct_on} against {jct_off}"
        );
    }
}
