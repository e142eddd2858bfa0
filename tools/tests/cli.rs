//! Runs the `rondo` binary as a user would.

mod common;

use common::rondo;
use serde_json::Value;

/// 8 MB: long enough for the scheduler to settle, short enough for a debug build.
const BYTES: &str = "8000000";

fn demo_json(extra: &[&str]) -> (String, Value) {
    let mut args = vec!["demo", "--bytes", BYTES, "--json"];
    args.extend_from_slice(extra);
    let out = rondo(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "rondo demo failed: {stderr}");
    let text = String::from_utf8(out.stdout).expect("UTF-8 output");
    let json = serde_json::from_str(&text).expect("stdout is one JSON object");
    (text, json)
}

fn run<'a>(json: &'a Value, scenario: &str, scheduler: bool) -> &'a Value {
    json["runs"]
        .as_array()
        .expect("`runs` is an array")
        .iter()
        .find(|r| r["scenario"] == scenario && r["scheduler"] == scheduler)
        .unwrap_or_else(|| panic!("no run for {scenario}, scheduler {scheduler}"))
}

#[test]
fn demo_json_shows_the_scheduler_at_work_and_is_reproducible() {
    let svg = std::env::temp_dir().join(format!("rondo-cli-test-{}.svg", std::process::id()));
    let (first, json) = demo_json(&["--seed", "7"]);
    let (second, _) = demo_json(&["--seed", "7", "--svg", svg.to_str().unwrap()]);
    assert_eq!(first, second, "the same seed must give the same JSON");

    assert_eq!(json["bytes"], 8_000_000);
    assert_eq!(json["ideal_gbps"], 70.0);
    for scenario in ["hetero", "homo"] {
        let on = run(&json, scenario, true);
        let util = on["utilization"].as_f64().unwrap();
        assert!(
            util > 0.85,
            "{scenario}: utilization {util} with the scheduler"
        );
        assert!(on["goodput_gbps"].as_f64().unwrap() <= on["throughput_gbps"].as_f64().unwrap());
        assert!(on["ood"]["samples"].as_u64().unwrap() > 0);
    }
    let with = run(&json, "hetero", true)["ood"]["p99"].as_u64().unwrap();
    let without = run(&json, "hetero", false)["ood"]["p99"].as_u64().unwrap();
    assert!(
        with < without,
        "hetero OOD p99: {with} with the scheduler, {without} without"
    );

    let chart = std::fs::read_to_string(&svg).expect("--svg writes the chart");
    let _ = std::fs::remove_file(&svg);
    assert!(chart.starts_with("<svg") && chart.contains("OOD p99"));
}

#[test]
fn bad_arguments_fail_with_a_message() {
    let out = rondo(&["demo", "--bytes", "0"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--bytes must be at least 1"), "{stderr}");

    let out = rondo(&["demo", "--bytes", "100000"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--warmup-us"), "{stderr}");

    let out = rondo(&["no-such-command"]);
    assert!(!out.status.success());
}
