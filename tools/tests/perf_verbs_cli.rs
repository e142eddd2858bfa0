//! `rondo perf --backend verbs` and `--transport rc` as a user runs them.
//!
//! A custom harness (`harness = false`): the option and error tests run everywhere;
//! the tests that need an RDMA device run only where `rondo doctor` finds one with a
//! usable port and GID, and otherwise print one line saying they were skipped and
//! why, and count as ignored, never as passed.

mod common;

use common::{rondo, Server};
use serde_json::Value;
use std::process::Output;

/// Whether the binary under test has the `verbs` feature (tests are built with the
/// package's features).
const VERBS: bool = cfg!(feature = "verbs");

/// A client against a port where nothing listens: every test here must fail
/// before it connects (a "connect" error would mean the check came too late).
fn client(extra: &[&str]) -> Output {
    common::client(1, &[&["-n", "10"], extra].concat())
}

/// Asserts a failed run whose stderr says all of `needles`, without a panic.
fn fails_saying(out: &Output, needles: &[&str]) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "expected a failure, got success: {err}"
    );
    assert_eq!(out.status.code(), Some(1), "a clean error exit: {err}");
    assert!(!err.contains("panicked"), "no panic: {err}");
    assert!(
        !err.contains("connect to"),
        "failed before connecting: {err}"
    );
    for n in needles {
        assert!(err.contains(n), "stderr lacks {n:?}: {err}");
    }
    assert_eq!(err.lines().count(), 1, "one line: {err}");
}

fn bad_combinations_are_typed_errors() {
    let cases: [(&[&str], &[&str]); 9] = [
        (
            &["--transport", "rc"],
            &[
                "--transport rc runs plain RC queue pairs",
                "add --backend verbs",
            ],
        ),
        (
            &["--transport", "rc", "--backend", "udp"],
            &["--transport rc", "--backend verbs"],
        ),
        (
            &["--gid-index", "3"],
            &["--gid-index picks the RDMA device of --backend verbs"],
        ),
        (&["--device", "mlx5_0"], &["--device picks the RDMA device"]),
        (&["--ib-port", "1"], &["--ib-port picks the RDMA device"]),
        (
            &["--backend", "verbs", "--transport", "raw-udp"],
            &["raw-udp is the UDP backend's ceiling"],
        ),
        // Settings of Rondo's datapath mean nothing to RC queue pairs.
        (
            &["--backend", "verbs", "--transport", "rc", "--loss", "0.01"],
            &["--loss is a setting of Rondo's datapath"],
        ),
        // Datagram sizes a RoCE port cannot carry.
        (
            &["--backend", "verbs", "-m", "9000"],
            &["--mtu 9000 is out of range on an RDMA device"],
        ),
        (
            &["--backend", "verbs", "--transport", "rc", "-m", "1500"],
            &["--mtu 1500 is no RC path MTU"],
        ),
    ];
    for (args, needles) in cases {
        fails_saying(&client(args), needles);
    }
    // The server checks its own options at start.
    fails_saying(
        &rondo(&["perf", "server", "--port", "0", "--gid-index", "3"]),
        &["--gid-index picks the RDMA device of --backend verbs"],
    );
}

fn without_the_feature_the_message_says_how_to_rebuild() {
    for out in [
        client(&["--backend", "verbs"]),
        client(&["--backend", "verbs", "--transport", "rc"]),
        rondo(&["perf", "server", "--port", "0", "--backend", "verbs"]),
    ] {
        fails_saying(
            &out,
            &["built without", "--features verbs", "libibverbs-dev"],
        );
    }
}

fn without_a_device_the_message_says_so() {
    for out in [
        client(&["--backend", "verbs"]),
        client(&["--backend", "verbs", "--transport", "rc", "--op", "read"]),
        client(&[
            "--backend",
            "verbs",
            "--device",
            "mlx5_0",
            "--gid-index",
            "3",
        ]),
        rondo(&["perf", "server", "--port", "0", "--backend", "verbs"]),
    ] {
        fails_saying(&out, &["no RDMA device", "rondo doctor"]);
    }
}

/// Rondo over UD and plain RC on the device, every operation, every byte checked.
fn rondo_and_rc_move_verified_bytes_on_the_device() {
    let server = Server::start(&["--backend", "verbs"]);
    for transport in ["rondo", "rc"] {
        for op in ["write", "send", "read"] {
            let v = server.json(&[
                "--backend",
                "verbs",
                "--transport",
                transport,
                "--op",
                op,
                "-s",
                "65536",
                "-n",
                "200",
                "--verify",
            ]);
            assert_eq!(v["n_iterations"], 200, "{transport} {op}: {v}");
            assert_eq!(v["verified"], true, "{transport} {op}: {v}");
            assert_eq!(v["transport"], transport);
            assert_eq!(v["backend"], "verbs");
            assert!(v["BW_average"].as_f64().unwrap() > 0.0, "{v}");
        }
        let lat = server.json(&[
            "--backend",
            "verbs",
            "--transport",
            transport,
            "--op",
            "send",
            "-s",
            "64",
            "-n",
            "100",
            "--lat",
            "--verify",
        ]);
        assert_eq!(lat["verified"], true, "{transport} latency: {lat}");
        assert!(lat["lat_p50_us"].as_f64().unwrap() > 0.0, "{lat}");
    }
}

/// Why the device tests cannot run here, if they cannot.
fn no_device_reason() -> Option<String> {
    if !VERBS {
        return Some("rondo was built without the `verbs` feature".into());
    }
    let out = rondo(&["doctor", "--json"]);
    let v: Value = match serde_json::from_slice(&out.stdout) {
        Ok(v) => v,
        Err(e) => return Some(format!("`rondo doctor --json` gave no report: {e}")),
    };
    if v["suggested"].is_null() {
        let why = v["device_error"]
            .as_str()
            .map_or("ibverbs' device list is empty".to_string(), str::to_string);
        return Some(format!(
            "no RDMA device with an active port and a RoCE v2 or IB GID ({why})"
        ));
    }
    None
}

type Test = fn();

fn main() {
    let mut tests: Vec<(&str, Test)> = vec![(
        "bad_combinations_are_typed_errors",
        bad_combinations_are_typed_errors,
    )];
    if VERBS {
        if no_device_reason().is_some() {
            tests.push((
                "without_a_device_the_message_says_so",
                without_a_device_the_message_says_so,
            ));
        }
    } else {
        tests.push((
            "without_the_feature_the_message_says_how_to_rebuild",
            without_the_feature_the_message_says_how_to_rebuild,
        ));
    }
    let device_tests: [(&str, Test); 1] = [(
        "rondo_and_rc_move_verified_bytes_on_the_device",
        rondo_and_rc_move_verified_bytes_on_the_device,
    )];
    let skip = no_device_reason();
    let (mut passed, mut failed, mut ignored) = (0, 0, 0);
    let mut run = |name: &str, test: &Test| {
        if std::panic::catch_unwind(test).is_ok() {
            println!("test {name} ... ok");
            passed += 1;
        } else {
            println!("test {name} ... FAILED");
            failed += 1;
        }
    };
    for (name, test) in &tests {
        run(name, test);
    }
    match &skip {
        Some(why) => {
            println!(
                "perf_verbs_cli: skipped {} device test(s): {why}",
                device_tests.len()
            );
            ignored += device_tests.len();
        }
        None => {
            for (name, test) in &device_tests {
                run(name, test);
            }
        }
    }
    println!(
        "test result: {}. {passed} passed; {failed} failed; {ignored} ignored; 0 measured; 0 filtered out",
        if failed == 0 { "ok" } else { "FAILED" }
    );
    if failed > 0 {
        std::process::exit(101);
    }
}
