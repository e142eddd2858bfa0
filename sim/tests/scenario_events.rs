//! Timed events of scenario files reach the simulator's links.

use rondo_sim::scenario::{parse, run, Override, Report, RunOptions};

const BASE: &str = r#"
seed = 5
duration_us = 3000
mtu = 1500
[topology]
kind = "parallel"
host_gbps = 100
paths = [
    { gbps = 25, delay_us = 5.0 },
    { gbps = 25, delay_us = 5.0 },
    { gbps = 25, delay_us = 5.0 },
    { gbps = 25, delay_us = 5.0 },
]
[workload]
kind = "long_flows"
bytes = 3000000
"#;

fn report(extra: &str, sets: &[&str]) -> Report {
    let sets: Vec<Override> = sets.iter().map(|s| Override::parse(s).unwrap()).collect();
    let s = parse("events.toml", &format!("{BASE}{extra}"), &sets).unwrap();
    run(&s, "events.toml", RunOptions::default(), &mut |_| {})
        .unwrap_or_else(|e| panic!("{e}"))
        .report
}

#[test]
fn a_failed_path_loses_packets_and_the_flow_still_completes() {
    let calm = report("", &[]);
    assert_eq!(calm.flows_completed, 1);
    assert_eq!(calm.drops.switch, 0);
    let fail = "[[events]]\nat_us = 100\npath = 2\naction = \"fail\"\n";
    let failed = report(fail, &[]);
    assert_eq!(
        failed.flows_completed, 1,
        "the flow routes around the dead path"
    );
    assert!(
        failed.drops.switch > 0,
        "packets on the failed link are lost"
    );
    assert!(failed.retx.packets > 0);
    assert!(failed.jct_us.unwrap() > calm.jct_us.unwrap());
    // Naming the same link by kind and index does the same.
    let by_name = fail.replace("path = 2", "link = \"path_forward\"\nindex = 2");
    let named = report(&by_name, &[]);
    assert_eq!(named.drops.switch, failed.drops.switch);
    assert_eq!(named.jct_us, failed.jct_us);
}

#[test]
fn a_rate_change_moves_the_ideal_and_the_throughput() {
    let slow = "[[events]]\nat_us = 0\npath = 0\naction = \"rate\"\ngbps = 5\n";
    let r = report(slow, &["workload.bytes=100000000", "warmup_us=500"]);
    assert!((r.ideal_gbps - 80.0).abs() < 1e-9, "ideal {}", r.ideal_gbps);
    assert!(
        r.throughput_gbps > 0.9 * 80.0 && r.throughput_gbps < 80.0 * 1.01,
        "throughput {}",
        r.throughput_gbps
    );
}

#[test]
fn a_missing_link_is_named() {
    let bad = "[[events]]\nat_us = 0\nlink = \"agg_up\"\nindex = 0\naction = \"fail\"\n";
    let s = parse("events.toml", &format!("{BASE}{bad}"), &[]).unwrap();
    let e = run(&s, "events.toml", RunOptions::default(), &mut |_| {})
        .expect_err("the parallel topology has no aggregation links")
        .to_string();
    assert!(
        e.contains("events[0].index") && e.contains("parallel"),
        "{e}"
    );
}

#[test]
fn every_link_kind_is_named_in_scenario_files_as_the_reports_name_it() {
    use rondo_sim::LinkKind;
    for kind in [
        LinkKind::HostUp,
        LinkKind::HostDown,
        LinkKind::PathForward,
        LinkKind::PathReverse,
        LinkKind::EdgeUp,
        LinkKind::EdgeDown,
        LinkKind::AggUp,
        LinkKind::AggDown,
    ] {
        let name = rondo_sim::scenario::link_name(kind);
        let event =
            format!("[[events]]\nat_us = 0\nlink = \"{name}\"\nindex = 0\naction = \"fail\"\n");
        let s = parse("events.toml", &format!("{BASE}{event}"), &[]).unwrap();
        assert_eq!(s.events[0].link, Some(kind), "{name}");
    }
    let bad = "[[events]]\nat_us = 0\nlink = \"core_up\"\nindex = 0\naction = \"fail\"\n";
    let e = parse("events.toml", &format!("{BASE}{bad}"), &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("core_up") && e.contains("agg_down"), "{e}");
}

/// Fig. 13's "N% of the links at random": `link` with `percent` picks that share of
/// the links of the kind, seeded, so a `fail` and its `restore` name the same links.
#[test]
fn a_percentage_of_links_is_drawn_at_random_and_seeded() {
    use rondo_sim::scenario::{build, parse};
    use rondo_sim::LinkKind;
    let base = "seed = 4\nduration_us = 100\n[topology]\nkind = \"clos3\"\n\
                [workload]\nkind = \"long_flows\"\nflows = 1\n";
    let event = |percent: f64, action: &str| {
        format!(
            "[[events]]\nat_us = 50\nlink = \"agg_up\"\npercent = {percent}\naction = \"{action}\"\n"
        )
    };
    let pending = |text: &str| {
        let s = parse("e.toml", text, &[]).unwrap_or_else(|e| panic!("{e}"));
        build(&s, "e.toml")
            .unwrap_or_else(|e| panic!("{e}"))
            .pending_events()
    };
    let sim = build(&parse("e.toml", base, &[]).unwrap(), "e.toml").unwrap();
    let agg_up = (0..)
        .take_while(|&i| sim.link(LinkKind::AggUp, i).is_some())
        .count();
    assert!(agg_up >= 8, "{agg_up} agg_up links");
    let none = pending(base);
    let quarter = pending(&format!("{base}{}", event(25.0, "fail")));
    assert_eq!(
        quarter - none,
        (agg_up as f64 * 0.25).round() as usize,
        "one change per link"
    );
    let all = pending(&format!("{base}{}", event(100.0, "fail")));
    assert_eq!(all - none, agg_up);
    // Failing a quarter and restoring the same quarter leaves a run that completes.
    let text = format!(
        "{base}{}{}",
        event(25.0, "fail"),
        event(25.0, "restore").replace("at_us = 50", "at_us = 80")
    );
    let s = parse("e.toml", &text, &[]).unwrap();
    let a = rondo_sim::scenario::run(&s, "e.toml", Default::default(), &mut |_| {}).unwrap();
    let b = rondo_sim::scenario::run(&s, "e.toml", Default::default(), &mut |_| {}).unwrap();
    assert_eq!(
        a.report.goodput_gbps, b.report.goodput_gbps,
        "same seed, same links"
    );
    for bad in ["0", "150", "-1"] {
        let t = format!(
            "{base}{}",
            event(0.0, "fail").replace("percent = 0", &format!("percent = {bad}"))
        );
        let e = parse("e.toml", &t, &[])
            .unwrap()
            .check("e.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("percent"), "{bad}: {e}");
    }
}
