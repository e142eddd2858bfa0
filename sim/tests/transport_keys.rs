//! `transport.base_rtt`, `transport.update_interval_rtts`,
//! `transport.receiver_span` and the baselines' parameters reach the engine.

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
    // Rondo's default is the topology's base RTT; the other transports measure.
    let topology = report(&[]);
    assert_eq!(
        report(&["transport.base_rtt=topology"]),
        topology,
        "Rondo's default"
    );
    let measured = report(&["transport.base_rtt=measured"]);
    assert_ne!(measured, topology, "the source reaches ARCC");
    assert_eq!(
        report(&["transport.kind=swift-rps"]),
        report(&["transport.kind=swift-rps", "transport.base_rtt=measured"]),
        "swift-rps measures"
    );
    assert!(
        topology.utilization > 0.9,
        "utilization {}",
        topology.utilization
    );
    let faster = report(&["transport.update_interval_rtts=0.25"]);
    assert_ne!(faster.ood, topology.ood, "Tu reaches ARCC");
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

#[test]
fn the_receiver_span_can_be_switched_per_run() {
    // A reorder buffer of 8 slots: swift-rps is refused packets.
    let small = [
        "transport.kind=\"swift-rps\"",
        "transport.reorder_buffer_kb=12",
    ];
    let free = report(&small);
    assert!(free.drops.reorder_buffer > 0, "{:?}", free.drops);
    let held = report(&[small[0], small[1], "transport.receiver_span=true"]);
    assert_ne!(held.drops, free.drops, "the span holds swift-rps back");
    assert_eq!(
        report(&[small[0], small[1], "transport.receiver_span=false"]),
        free,
        "the baselines' default"
    );
}

#[test]
fn baseline_parameters_reach_their_controllers_and_bad_values_are_refused() {
    let ecmp = report(&["transport.kind=\"ecmp\""]);
    let slow = report(&["transport.kind=\"ecmp\"", "transport.dcqcn_rai=0.001"]);
    assert_ne!(slow.goodput_gbps, ecmp.goodput_gbps, "R_AI reaches DCQCN");
    let swift = report(&["transport.kind=\"swift-rps\""]);
    let narrow = report(&["transport.kind=\"swift-rps\"", "transport.swift_fs_range=1"]);
    assert_ne!(
        narrow.ood, swift.ood,
        "the flow-scaling range reaches Swift"
    );
    let text = "duration_us = 10\n[topology]\nkind = \"parallel\"\npaths = [{ gbps = 10, delay_us = 1.0 }]\n\
                [workload]\nkind = \"long_flows\"\nflows = 1\n";
    for bad in ["transport.dcqcn_rai=0", "transport.swift_fs_range=-1"] {
        let e = parse("k.toml", text, &[Override::parse(bad).unwrap()])
            .and_then(|s| s.check("k.toml"))
            .map(|_| ())
            .unwrap_err()
            .to_string();
        let key = bad.split('=').next().unwrap();
        assert!(e.contains(key), "{e}");
    }
}

#[test]
fn the_min_window_key_keeps_the_default_at_one_and_refuses_bad_values() {
    assert_eq!(report(&["transport.min_window_packets=1"]), report(&[]));
    let text = "duration_us = 10\n[topology]\nkind = \"parallel\"\npaths = [{ gbps = 10, delay_us = 1.0 }]\n\
                [workload]\nkind = \"long_flows\"\nflows = 1\n";
    // Not positive, or above the initial window (the engine's own check).
    for bad in ["0", "-0.5", "1000"] {
        let set = Override::parse(&format!("transport.min_window_packets={bad}")).unwrap();
        let s = parse("k.toml", text, &[set]).unwrap();
        let e = run(&s, "k.toml", RunOptions::default(), &mut |_| {})
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(e.contains("transport.min_window_packets"), "{e}");
    }
}
