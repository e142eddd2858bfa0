//! `rondo perf` as a user runs it: a server and a client, two processes on loopback.

mod common;

use common::{client, perf_frame as frame, Server};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;

/// The default datagram size: 4096 bytes of application data plus the engine's data
/// header, token extension and the verbs header.
const DEFAULT_MTU: usize = 4096
    + rondo_proto::wire::DATA_HEADER_LEN
    + rondo_proto::wire::TOKEN_EXT_LEN
    + rondo_verbs::header::HEADER_LEN;
/// Datagrams of a 16 KiB raw-UDP message at the default size (raw datagrams carry
/// the MTU less a data header).
const RAW_PER_16K: u64 =
    16384u64.div_ceil((DEFAULT_MTU - rondo_proto::wire::DATA_HEADER_LEN) as u64);

fn assert_bandwidth_keys(v: &Value) {
    for key in [
        "packets",
        "client_cpu_s",
        "server_cpu_s",
        "packets_per_cpu_s",
        "MsgSize",
        "n_iterations",
        "BW_peak",
        "BW_average",
        "MsgRate",
        "verified",
        "retx_packets",
        "ood_max",
    ] {
        assert!(v.get(key).is_some(), "no {key} in {v}");
    }
    assert!(
        v.as_object()
            .unwrap()
            .values()
            .all(|x| !x.is_object() && !x.is_array()),
        "not flat: {v}"
    );
    assert!(number(v, "BW_peak") >= number(v, "BW_average"), "{v}");
}

/// A bandwidth report of `op` over `transport` that moved data: every perftest
/// key, and a positive average bandwidth.
fn assert_bandwidth_report(v: &Value, transport: &str, op: &str) {
    assert_bandwidth_keys(v);
    assert_eq!(v["transport"], transport, "{v}");
    assert_eq!(v["op"], op, "{v}");
    assert!(number(v, "BW_average") > 0.0, "{transport} {op}: {v}");
}

/// `v[key]` as a number.
fn number(v: &Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("no number {key} in {v}"))
}

#[test]
fn raw_udp_moves_every_operation_and_verifies_what_arrived() {
    let server = Server::start(&[]);
    // Every op with --verify; WRITE and READ also without it, where the datapath's
    // raw mode blasts full-size datagrams.
    let runs = [
        ("write", true),
        ("send", true),
        ("read", true),
        ("write", false),
        ("read", false),
    ];
    for (op, verify) in runs {
        let mut args = vec![
            "--transport",
            "raw-udp",
            "--op",
            op,
            "-s",
            "16384",
            "-n",
            "20",
        ];
        if verify {
            args.push("--verify");
        }
        let v = server.json(&args);
        assert_bandwidth_report(&v, "raw-udp", op);
        assert_eq!(v["MsgSize"], 16384);
        assert_eq!(v["n_iterations"], 20);
        let lost = v["lost_packets"].as_u64().unwrap();
        assert_eq!(
            v["packets"].as_u64().unwrap() + lost,
            20 * RAW_PER_16K,
            "{v}"
        );
        // Raw UDP has no reliability: a run is verified exactly when it was asked to
        // be and nothing was lost.
        assert_eq!(v["verified"], verify && lost == 0, "{op}: {v}");
    }
    server.assert_logged("raw-udp, 4 path(s)", runs.len());
}

#[test]
fn rondo_moves_every_operation_byte_exact() {
    let server = Server::start(&[]);
    for op in ["write", "send", "read"] {
        let v = server.json(&[
            "--op", op, "-s", "20000", "-n", "30", "--qps", "2", "--verify",
        ]);
        assert_bandwidth_report(&v, "rondo", op);
        assert_eq!(v["MsgSize"], 20000);
        assert_eq!(v["n_iterations"], 30);
        assert_eq!(v["verified"], true, "{op}: {v}");
    }
    // Without --verify nothing is claimed.
    let v = server.json(&["-s", "1000", "-n", "10", "--busy-poll"]);
    assert_eq!(v["verified"], false);
    let log = server.assert_logged(", verified", 3);
    assert!(!log.contains("error"), "{log}");
}

#[test]
fn rondo_moves_single_messages_of_boundary_sizes() {
    // Application bytes in one full packet of the default datagram size.
    let payload = DEFAULT_MTU
        - rondo_proto::wire::DATA_HEADER_LEN
        - rondo_proto::wire::token_overhead(Some(0))
        - rondo_verbs::header::HEADER_LEN;
    let server = Server::start(&[]);
    for op in ["write", "send", "read"] {
        for size in [1, payload - 1, payload, payload + 1, 1 << 20] {
            let size = size.to_string();
            let v = server.json(&["--op", op, "-s", &size, "-n", "1", "--verify"]);
            assert_eq!(v["verified"], true, "{op} of {size} B: {v}");
            assert_eq!(v["n_iterations"], 1);
            assert_eq!(v["MsgSize"].to_string(), size);
        }
    }
}

/// Messages of the loss tests: 100 x 50,000 bytes is 1,300 data packets, so at 1%
/// loss a run without a single drop (and then no retransmission to assert) has a
/// chance of 0.99^1300, about 2e-6. With 30-40 messages (390-520 packets) it was
/// 0.5-2% per operation, and CI met it (rrps, 2026-12-04).
#[test]
fn rondo_stays_byte_exact_under_loss_and_reordering() {
    let server = Server::start(&[]);
    for op in ["write", "send", "read"] {
        let v = server.json(&[
            "--op",
            op,
            "-s",
            "50000",
            "-n",
            "100",
            "--verify",
            "--loss",
            "0.01",
            "--reorder",
            "0.01",
        ]);
        assert_eq!(v["verified"], true, "{op}: {v}");
        assert_eq!(v["n_iterations"], 100);
        assert!(
            v["retx_packets"].as_u64().unwrap() > 0,
            "1% loss costs retransmits: {v}"
        );
    }
}

#[test]
fn rrps_moves_every_operation_byte_exact_under_loss() {
    // The second engine transport (round-robin spraying, AIMD window) over the
    // same queue pairs and sockets: chosen by name, verified byte by byte.
    let server = Server::start(&[]);
    for op in ["write", "send", "read"] {
        let v = server.json(&[
            "--transport",
            "rrps",
            "--op",
            op,
            "-s",
            "50000",
            "-n",
            "100",
            "--verify",
            "--loss",
            "0.01",
        ]);
        assert_bandwidth_report(&v, "rrps", op);
        assert_eq!(v["verified"], true, "{op}: {v}");
        assert_eq!(v["n_iterations"], 100);
        assert!(
            v["retx_packets"].as_u64().unwrap() > 0,
            "1% loss costs retransmits: {v}"
        );
    }
    let log = server.assert_logged("rrps", 3);
    assert!(!log.contains("error"), "{log}");
}

#[test]
fn baselines_move_every_operation_byte_exact_under_loss() {
    // swift-rps and falcon (per-path Swift; random spraying or the largest open
    // window; selective repeat or per-path RACK-TLP), ecmp and ar (DCQCN on one
    // hashed path; ar's adaptive routing is the switches', so over loopback it is
    // ecmp), mprdma (one ECN window, ACK-clocked path choice), rc-gbn and rc-sr
    // (go-back-N and selective NAK with direct placement), uet (NSCC's window, REPS
    // recycled paths, selective repeat) over the same sockets.
    let server = Server::start(&[]);
    for transport in [
        "swift-rps",
        "falcon",
        "ecmp",
        "ar",
        "mprdma",
        "rc-gbn",
        "rc-sr",
        "uet",
    ] {
        for op in ["write", "read"] {
            let v = server.json(&[
                "--transport",
                transport,
                "--op",
                op,
                "-s",
                "50000",
                "-n",
                "20",
                "--verify",
                "--loss",
                "0.01",
            ]);
            assert_bandwidth_report(&v, transport, op);
            assert_eq!(v["verified"], true, "{transport} {op}: {v}");
            assert_eq!(v["n_iterations"], 20);
        }
    }
}

#[test]
fn timed_runs_stop_on_time() {
    let server = Server::start(&[]);
    for transport in ["rondo", "raw-udp"] {
        for op in ["write", "read"] {
            let v = server.json(&[
                "--transport",
                transport,
                "--op",
                op,
                "-s",
                "8192",
                "-D",
                "0.3",
            ]);
            assert_bandwidth_report(&v, transport, op);
            assert!(
                v["n_iterations"].as_u64().unwrap() > 0,
                "{transport} {op}: {v}"
            );
            // A third of a second of traffic costs both ends measurable CPU time.
            for key in ["client_cpu_s", "server_cpu_s", "packets_per_cpu_s"] {
                assert!(number(&v, key) > 0.0, "{transport} {op}: {key} {v}");
            }
        }
    }
    server.assert_logged(" x 0.3 s, ", 4);
}

#[test]
fn rondo_latency_mode_round_trips() {
    let server = Server::start(&[]);
    for op in ["write", "send", "read"] {
        let v = server.json(&["--op", op, "--lat", "-s", "100", "-n", "20", "--verify"]);
        assert_eq!(v["verified"], true, "{op}: {v}");
        assert_eq!(v["n_iterations"], 20);
        let p = |k| number(&v, k);
        assert!(
            p("lat_p50_us") > 0.0 && p("lat_p50_us") <= p("lat_max_us"),
            "{v}"
        );
    }
}

#[test]
fn latency_mode_reports_percentiles() {
    let server = Server::start(&[]);
    let v = server.json(&[
        "--transport",
        "raw-udp",
        "--lat",
        "-s",
        "3000",
        "-n",
        "50",
        "--verify",
        "--paths",
        "2",
    ]);
    assert_bandwidth_keys(&v);
    assert_eq!(v["n_iterations"], 50);
    assert_eq!(v["verified"], true, "{v}");
    let p = |k| number(&v, k);
    assert!(p("lat_p50_us") > 0.0);
    assert!(p("lat_p50_us") <= p("lat_p99_us"));
    assert!(p("lat_p99_us") <= p("lat_p999_us"));
    assert!(p("lat_p999_us") <= p("lat_max_us"));
    let out = server.client(&["--transport", "raw-udp", "--lat", "-s", "100", "-n", "10"]);
    assert!(out.status.success());
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(
        table.contains("t_min[usec]") && table.contains("p99.9[usec]"),
        "{table}"
    );
}

#[test]
fn table_output_has_perftest_columns() {
    let server = Server::start(&[]);
    let out = server.client(&["--transport", "raw-udp", "-s", "1000", "-n", "10"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(
        table.contains(
            "#bytes     #iterations   BW peak[Gb/sec]    BW average[Gb/sec]    MsgRate[Mpps]"
        ),
        "{table}"
    );
    assert!(table.contains("\n 1000       10 "), "{table}");
}

#[test]
fn bad_arguments_are_refused_with_a_hint() {
    let server = Server::start(&[]);
    for (args, hint) in [
        (&["-s", "0"][..], "use -s between 1 and"),
        (&["--paths", "0"][..], "--paths 0 is out of range"),
        (&["--qps", "65"][..], "--qps 65 is out of range"),
        (&["-D", "0"][..], "-D 0 is out of range"),
        (&["--mtu", "40"][..], "--mtu 40 is out of range"),
        (&["--loss", "1.5"][..], "--loss 1.5 is out of range"),
        (&["-n", "5", "-D", "1"][..], "cannot be used with"),
        (&["--op", "atomic"][..], "invalid value 'atomic'"),
        (&["--transport", "tcp"][..], "invalid value 'tcp'"),
    ] {
        let out = server.client(args);
        assert!(!out.status.success(), "{args:?} was accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(hint), "{args:?}: {err}");
    }
    // Nobody listens on port 1.
    let out = client(1, &["--transport", "raw-udp"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("is `rondo perf server` running there?"));
}

fn exchange(port: u16, bytes: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(bytes).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    answer
}

#[test]
fn the_server_survives_foreign_and_bad_input() {
    let server = Server::start(&[]);
    // Not `rondo perf` at all.
    let answer = exchange(server.port, b"GET / HTTP/1.0\r\n\r\n");
    assert!(answer.is_empty(), "a foreign peer gets no reply");
    // Another version of the exchange: told why.
    let mut old = frame("{\"type\":\"start\"}");
    old[5] = 7;
    let answer = String::from_utf8_lossy(&exchange(server.port, &old)).into_owned();
    assert!(
        answer.contains("reject") && answer.contains("version 7"),
        "{answer}"
    );
    // A well-formed hello asking for something impossible: told why.
    let hello = r#"{"type":"hello","op":"write","size":0,"iterations":10,"duration_s":null,"paths":4,"qps":1,"transport":"raw-udp","mtu":1500,"tx_depth":8,"verify_seed":null,"lat":false,"busy_poll":false,"line_gbps":0.0,"reorder_buffer":0,"loss":0.0,"reorder":0.0,"endpoints":[],"regions":[],"udp_paths":[]}"#;
    let answer = String::from_utf8_lossy(&exchange(server.port, &frame(hello))).into_owned();
    assert!(
        answer.contains("reject") && answer.contains("message size 0"),
        "{answer}"
    );
    // A Rondo hello whose queue-pair descriptor is garbage: told why.
    let rondo = hello
        .replace("\"size\":0", "\"size\":100")
        .replace("raw-udp", "rondo")
        .replace("\"endpoints\":[]", "\"endpoints\":[[1,2,3]]")
        .replace("\"paths\":4", "\"paths\":1");
    let answer = String::from_utf8_lossy(&exchange(server.port, &frame(&rondo))).into_owned();
    assert!(
        answer.contains("reject") && answer.contains("endpoint descriptor"),
        "{answer}"
    );
    // Garbage JSON, and a connection that closes early.
    let answer = String::from_utf8_lossy(&exchange(server.port, &frame("{\"type\":"))).into_owned();
    assert!(answer.contains("malformed"), "{answer}");
    exchange(server.port, b"RPRF\x00");

    // And it still serves a real client.
    let v = server.json(&["--transport", "raw-udp", "-s", "100", "-n", "5"]);
    assert_eq!(v["n_iterations"], 5);
    let log = server.assert_logged("error:", 6);
    assert!(log.contains("not a `rondo perf` endpoint"), "{log}");
    assert!(log.contains("message size 0 is out of range"), "{log}");
    assert!(log.contains("closed the control connection"), "{log}");
}

#[test]
fn a_client_with_another_auth_mode_is_refused_at_the_exchange() {
    // The server runs the default (`auth`); a client asking for `none` is refused
    // with the reason, and the next client (the default) runs.
    let server = Server::start(&[]);
    let out = server.client(&["-n", "5", "--auth", "none"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("authentication mismatch"), "{err}");
    let v = server.json(&["-s", "8192", "-n", "20", "--verify"]);
    assert_eq!(v["verified"], true, "{v}");
}
