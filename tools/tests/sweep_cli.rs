//! Runs `rondo sweep` as a user would: a sweep on one machine, the same sweep in
//! shards merged back, and the errors of bad arguments.

mod common;

use common::{fails, fresh_temp, ok_stdout};
use serde_json::Value;
use std::path::PathBuf;

fn temp(name: &str) -> PathBuf {
    fresh_temp("sweep-cli", name)
}

/// Two unequal paths, a short run: a small reorder buffer costs goodput.
const SCENARIO: &str = "seed = 1\nduration_us = 600\nwarmup_us = 200\n[topology]\n\
    kind = \"parallel\"\nhost_gbps = 100\npaths = [\n{ gbps = 25, delay_us = 2.0 },\n\
    { gbps = 10, delay_us = 8.0 },\n]\n[workload]\nkind = \"long_flows\"\nflows = 1\n";

fn scenario_file(test: &str) -> PathBuf {
    let dir = temp(test);
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("two-paths.toml");
    std::fs::write(&f, SCENARIO).unwrap();
    f
}

const SWEEP: [&str; 6] = [
    "--key",
    "transport.reorder_buffer_kb",
    "--values",
    "8,600",
    "--transports",
    "rondo,rrps",
];

fn runs(v: &Value) -> Vec<(String, String, f64)> {
    v["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|r| {
            (
                r["transport"].as_str().unwrap().to_owned(),
                r["value"].as_str().unwrap().to_owned(),
                r["report"]["goodput_gbps"].as_f64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn a_sweep_covers_every_transport_and_value_and_shards_merge_to_the_same_numbers() {
    let file = scenario_file("sweep");
    let file = file.to_str().unwrap();
    let mut args = vec!["sweep", file];
    args.extend_from_slice(&SWEEP);
    args.extend_from_slice(&["--jobs", "2", "--json"]);
    let whole: Value = serde_json::from_str(&ok_stdout(&args)).expect("one JSON object");
    let all = runs(&whole);
    assert_eq!(all.len(), 4, "2 transports x 2 values");
    let goodput = |t: &str, v: &str| all.iter().find(|r| r.0 == t && r.1 == v).unwrap().2;
    assert!(
        goodput("rondo", "8") < goodput("rondo", "600"),
        "an 8 KB reorder buffer costs goodput: {all:?}"
    );
    assert_eq!(whole["sweep"]["runs"], 4);

    let dir = temp("shards");
    let out = dir.to_str().unwrap();
    for k in ["1/3", "2/3", "3/3"] {
        let mut a = vec!["sweep", file];
        a.extend_from_slice(&SWEEP);
        a.extend_from_slice(&["--shard", k, "--out", out]);
        ok_stdout(&a);
    }
    let files = std::fs::read_dir(&dir).unwrap().count();
    assert_eq!(files, 4, "one file per run");
    let merged: Value = serde_json::from_str(&ok_stdout(&["sweep", "--merge", out, "--json"]))
        .expect("one JSON object");
    assert_eq!(
        runs(&merged),
        all,
        "same runs, same numbers, whatever the slicing"
    );
    // Every report field but wall-clock ones, bit for bit (float text read back exactly).
    let reports = |v: &Value| {
        let mut r: Vec<(String, String, Value)> = v["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let id = |k: &str| r[k].as_str().unwrap().to_owned();
                let mut report = r["report"].clone();
                // Wall-clock figures differ between any two runs.
                let sim = report["sim"].as_object_mut().expect("report.sim");
                sim.remove("wall_s");
                sim.remove("events_per_s");
                (id("transport"), id("value"), report)
            })
            .collect();
        r.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        r
    };
    assert_eq!(reports(&merged), reports(&whole), "whole reports differ");

    let svg = dir.join("plot.svg");
    let table = ok_stdout(&["sweep", "--merge", out, "--svg", svg.to_str().unwrap()]);
    assert!(
        table.contains("rrps") && table.contains("goodput_gbps"),
        "{table}"
    );
    let plot = std::fs::read_to_string(&svg).unwrap();
    assert!(
        plot.starts_with("<svg") && plot.contains("rondo"),
        "an SVG plot"
    );
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(temp("sweep"));
}

#[test]
fn bad_arguments_say_what_is_wrong() {
    let file = scenario_file("bad");
    let file = file.to_str().unwrap();
    let mut a = vec!["sweep", file];
    a.extend_from_slice(&SWEEP);
    let with = |extra: &[&str]| {
        let mut v = a.clone();
        v.extend_from_slice(extra);
        fails(&v)
    };
    assert!(with(&["--shard", "4/3", "--out", "/tmp/x"]).contains("K/N"));
    let key = ["--key", "transport.reorder_buffer_kb", "--values", "8"];
    let mut unknown = vec!["sweep", file, "--transports", "rondo,nosuch"];
    unknown.extend_from_slice(&key);
    let e = fails(&unknown);
    assert!(e.contains("unknown transport \"nosuch\""), "{e}");
    let e = fails(&[
        "sweep",
        file,
        "--key",
        "transport.reorder_buffer_kb",
        "--values",
        "8,,9",
    ]);
    assert!(e.contains("empty"), "{e}");
    let empty = temp("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let e = fails(&["sweep", "--merge", empty.to_str().unwrap()]);
    assert!(e.contains("no run-"), "{e}");
}
