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

/// `json` without the runs' `sim` objects (wall time and events per second).
fn without_wall_clock(mut json: Value) -> Value {
    for r in json["runs"].as_array_mut().expect("`runs` is an array") {
        r.as_object_mut().expect("a run is an object").remove("sim");
    }
    json
}

#[test]
fn demo_json_shows_the_scheduler_at_work_and_is_reproducible() {
    let svg = std::env::temp_dir().join(format!("rondo-cli-test-{}.svg", std::process::id()));
    let (_, json) = demo_json(&["--seed", "7"]);
    let (_, second) = demo_json(&["--seed", "7", "--svg", svg.to_str().unwrap()]);
    assert_eq!(
        without_wall_clock(json.clone()),
        without_wall_clock(second),
        "the same seed must give the same JSON"
    );

    assert_eq!(json["bytes"], 8_000_000);
    assert_eq!(json["ideal_gbps"], 70.0);
    for scenario in ["fig9-hetero", "fig9-homo"] {
        let on = run(&json, scenario, true);
        let util = on["utilization"].as_f64().unwrap();
        assert!(
            util > 0.85,
            "{scenario}: utilization {util} with the scheduler"
        );
        assert!(on["goodput_gbps"].as_f64().unwrap() <= on["throughput_gbps"].as_f64().unwrap());
        assert_eq!(
            on["flows_completed"], 1,
            "{scenario}: the message is delivered"
        );
        assert_eq!(on["end"], "done");
        assert!(on["ood"]["nic_max"].as_u64().unwrap() > 0);
    }
    let with = run(&json, "fig9-hetero", true)["ood"]["nic_p99"]
        .as_u64()
        .unwrap();
    let without = run(&json, "fig9-hetero", false)["ood"]["nic_p99"]
        .as_u64()
        .unwrap();
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

/// The demo is `rondo sim`'s `fig9` built-ins with the flow made one message: the
/// same scenario gives the same numbers whichever command runs it.
#[test]
fn demo_runs_are_the_fig9_builtins_as_rondo_sim_runs_them() {
    let (_, demo) = demo_json(&["--seed", "3"]);
    for scheduler in [true, false] {
        let mut from_demo = run(&demo, "fig9-hetero", scheduler).clone();
        let out = rondo(&[
            "sim",
            "--builtin",
            "fig9-hetero",
            "--set",
            "seed=3",
            "--set",
            &format!("workload.bytes={BYTES}"),
            "--set",
            "warmup_us=200",
            "--set",
            "duration_us=100000",
            "--set",
            &format!("transport.scheduler={scheduler}"),
            "--json",
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut from_sim: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
        // Wall time and events per second differ from run to run; `scheduler` is the
        // demo's own key.
        for v in [&mut from_demo, &mut from_sim] {
            let o = v.as_object_mut().unwrap();
            o.remove("sim");
            o.remove("scheduler");
        }
        assert_eq!(from_demo, from_sim, "scheduler {scheduler}");
    }
}
