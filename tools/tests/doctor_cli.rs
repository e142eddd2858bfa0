//! `rondo doctor` as a user runs it: it exits 0 and explains what is there and
//! what is missing (on this CI host: no RDMA device, or no `verbs` feature).

use serde_json::Value;
use std::process::Command;

fn doctor(args: &[&str]) -> (String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rondo"))
        .arg("doctor")
        .args(args)
        .output()
        .expect("run the rondo binary");
    let stdout = String::from_utf8(out.stdout).expect("UTF-8 output");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "rondo doctor failed: {stderr}");
    (stdout, stderr)
}

#[test]
fn doctor_json_reports_the_host_and_what_is_missing() {
    let (stdout, _) = doctor(&["--json"]);
    let json: Value = serde_json::from_str(&stdout).expect("stdout is one JSON object");
    assert_eq!(json["verbs_feature"], cfg!(feature = "verbs"));
    for key in [
        "devices",
        "huge_pages",
        "memlock_unlimited",
        "findings",
        "suggested",
        "ready",
    ] {
        assert!(json.get(key).is_some(), "key {key} missing: {stdout}");
    }
    let findings = json["findings"].as_array().expect("findings is an array");
    assert_eq!(json["ready"], findings.is_empty());
    let problems: Vec<&str> = findings
        .iter()
        .filter_map(|f| f["problem"].as_str())
        .collect();
    if !cfg!(feature = "verbs") {
        assert!(
            problems[0].contains("without the `verbs` feature"),
            "{problems:?}"
        );
        assert!(findings[0]["fix"]
            .as_str()
            .unwrap()
            .contains("--features verbs"));
    } else if json["devices"].as_array().is_some_and(Vec::is_empty) {
        assert!(problems[0].starts_with("no RDMA device"), "{problems:?}");
    }
    assert!(findings
        .iter()
        .all(|f| !f["fix"].as_str().unwrap_or("").is_empty()));
}

#[test]
fn doctor_text_says_what_is_missing_in_plain_words() {
    let (stdout, _) = doctor(&[]);
    assert!(
        stdout.starts_with("rondo doctor: verbs datapath"),
        "{stdout}"
    );
    assert!(stdout.contains("ulimit -l:"), "{stdout}");
    assert!(stdout.contains("huge pages:"), "{stdout}");
    assert!(
        stdout.contains("missing for Rondo over verbs:") || stdout.contains("ready:"),
        "{stdout}"
    );
    if !cfg!(feature = "verbs") {
        assert!(
            stdout.contains("NOT built in")
                && stdout.contains("cargo build --release -p rondo-tools --features verbs"),
            "{stdout}"
        );
    }
}
