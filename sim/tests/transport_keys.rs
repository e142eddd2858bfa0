//! `transport.base_rtt` and `transport.update_interval_rtts` reach the engine.

use rondo_sim::scenario::{parse, run, Override, Report, RunOptions};

/// The report without its wall-clock figures.
fn report(sets: &[&str]) -> Report {
    let mut r = timed_report(sets);
    r.sim = Default::default();
    r
}

fn timed_report(sets: &[&str]) -> Report {
    let text = "seed = 1\nduration_us = 800\nwarmup_us = 200\n[topology]\nkind = \"parallel\"\n\
                host_gbps = 100\npaths = [{ gbps = 25, delay_us = 2.0 }, { gbps = 10, delay_us = 6.0 }]\n\
                [workload]\nkind = \"long_flows\"\nflows = 1\n";
    let sets: Vec<Override> = sets.iter().map(|s| Override::parse(s).unwrap()).collect();
    let s = parse("keys.toml", text, &sets).unwrap_or_else(|e| panic!("{e}"));
    run(&s, "keys.toml", RunOptions::default(), &mut |_| {})
        .unwrap_or_else(|e| panic!("{e}"))
        .report
}

#[test]
fn topology_base_rtt_and_update_interval_change_the_run_and_bad_values_are_refused() {
    let measured = report(&[]);
    assert_eq!(
        report(&["transport.base_rtt=measured"]),
        measured,
        "the default"
    );
    let topology = report(&["transport.base_rtt=topology"]);
    assert!(
        topology.utilization > 0.9,
        "utilization {}",
        topology.utilization
    );
    let faster = report(&["transport.update_interval_rtts=0.25"]);
    assert_ne!(faster.ood, measured.ood, "Tu reaches ARCC");
    let text = "duration_us = 10\n[topology]\nkind = \"parallel\"\npaths = [{ gbps = 10, delay_us = 1.0 }]\n\
                [workload]\nkind = \"long_flows\"\nflows = 1\n";
    let e = parse(
        "k.toml",
        text,
        &[Override::parse("transport.base_rtt=guess").unwrap()],
    )
    .map(|_| ())
    .unwrap_err()
    .to_string();
    assert!(e.contains("measured") && e.contains("topology"), "{e}");
}
