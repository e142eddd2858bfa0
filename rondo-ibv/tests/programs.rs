//! Unmodified Debian verbs programs (perftest, ibverbs-utils, qperf) over the
//! drop-in, both ends preloaded on 127.0.0.1: the transfers complete, the tables
//! have every row, the numbers are sane, and what Rondo does not carry fails with a
//! message and a non-zero exit. A quick subset runs by default;
//! `RONDO_IBV_MATRIX=full` runs the whole matrix of issue 14 (docs/ibv.md).

mod common;
use common::*;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(120);
/// `-a` sizes of perftest: 2 B to 8 MiB.
const ALL_SIZES: usize = 23;

fn full() -> bool {
    std::env::var("RONDO_IBV_MATRIX").as_deref() == Ok("full")
}

#[test]
fn ibv_devices_and_devinfo_list_rondo0_active_with_a_roce_v2_gid() {
    if !have("ibv_devinfo") {
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let out = preloaded("ibv_devices", &[], &[])
        .output()
        .expect("ibv_devices");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("rondo0"), "{text}");
    let out = preloaded("ibv_devinfo", &["-v", "-d", "rondo0"], &[])
        .output()
        .expect("ibv_devinfo");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    for want in [
        "hca_id:\trondo0",
        "PORT_ACTIVE (4)",
        "link_layer:\t\tEthernet",
        "::ffff:127.0.0.1, RoCE v2",
    ] {
        assert!(text.contains(want), "missing {want:?}:\n{text}");
    }
}

#[test]
fn perftest_bandwidth_tests_complete_every_size() {
    if !have("ib_write_bw") {
        return;
    }
    let n = if full() { "100" } else { "5" };
    for prog in ["ib_write_bw", "ib_send_bw", "ib_read_bw"] {
        let r = pair(prog, &["-d", "rondo0", "-a", "-n", n], "-p", &[], LIMIT);
        both_ok(prog, &r, Some(ALL_SIZES));
        // Sane numbers: the sizes 2 B to 8 MiB in order, every average bandwidth
        // below 100 GB/s, and the 8 MiB one above 1 MB/s (tiny sizes with 5
        // iterations may round to 0.00 MB/s).
        let rows = rows(&r.1.text);
        for (i, row) in rows.iter().enumerate() {
            assert_eq!(row[0], (2u64 << i) as f64, "{prog}: {row:?}");
            assert!((0.0..100_000.0).contains(&row[3]), "{prog}: {row:?}");
        }
        assert!(
            rows[ALL_SIZES - 1][3] > 1.0,
            "{prog}: {:?}",
            rows[ALL_SIZES - 1]
        );
    }
}

#[test]
fn perftest_bandwidth_variants_of_the_full_matrix() {
    if !full() || !have("ib_write_bw") {
        return;
    }
    for prog in ["ib_write_bw", "ib_send_bw", "ib_read_bw"] {
        // -q 4 and -b (bidirectional) over every size; -D (duration) allows one size.
        let variants: [(&[&str], usize); 3] = [
            (&["-a", "-n", "20", "-q", "4"], ALL_SIZES),
            (&["-s", "65536", "-D", "2"], 1),
            (&["-a", "-n", "20", "-b"], ALL_SIZES),
        ];
        for (extra, n) in variants {
            let mut args = vec!["-d", "rondo0"];
            args.extend_from_slice(extra);
            let what = format!("{prog} {}", extra.join(" "));
            let r = pair(prog, &args, "-p", &[], LIMIT);
            both_ok(&what, &r, Some(n));
        }
    }
}

#[test]
fn perftest_with_connectx_emulation_uses_the_wr_api_and_inline_data() {
    if !have("ib_write_bw") {
        return;
    }
    let env = [("RONDO_IBV_VENDOR", "mlx5")];
    let progs: &[&str] = if full() {
        &["ib_write_bw", "ib_send_bw", "ib_read_bw"]
    } else {
        &["ib_write_bw"]
    };
    for prog in progs {
        let r = pair(prog, &["-d", "rondo0", "-a", "-n", "5"], "-p", &env, LIMIT);
        both_ok(prog, &r, Some(ALL_SIZES));
        assert!(
            r.1.text.contains("ibv_wr* API     : ON"),
            "{prog} did not take the ibv_wr_* path:\n{}",
            r.1.text
        );
    }
    // Inline data: 64-byte WRITEs posted inline.
    let r = pair(
        "ib_write_bw",
        &["-d", "rondo0", "-s", "64", "-I", "64", "-n", "200"],
        "-p",
        &env,
        LIMIT,
    );
    both_ok("ib_write_bw -I 64", &r, Some(1));
    assert!(r.1.text.contains("Max inline data : 64[B]"), "{}", r.1.text);
}

#[test]
fn perftest_latency_tests_complete_every_size() {
    if !have("ib_send_lat") {
        return;
    }
    let progs: &[&str] = if full() {
        &["ib_send_lat", "ib_write_lat", "ib_read_lat"]
    } else {
        &["ib_send_lat"]
    };
    for prog in progs {
        let r = pair(prog, &["-d", "rondo0", "-a", "-n", "5"], "-p", &[], LIMIT);
        both_ok(prog, &r, None);
        let rows = rows(&r.1.text);
        assert_eq!(rows.len(), ALL_SIZES, "{prog}:\n{}", r.1.text);
        // t_min is positive and below a second.
        for row in rows {
            assert!(row[2] > 0.0 && row[2] < 1e6, "{prog}: {row:?}");
        }
    }
}

#[test]
fn ibv_rc_pingpong_passes_its_own_data_check() {
    if !have("ibv_rc_pingpong") {
        return;
    }
    let mut cases: Vec<Vec<&str>> = vec![vec!["-g", "0", "-n", "100"], vec!["-n", "100"]];
    if full() {
        cases.push(vec!["-g", "0", "-e", "-n", "500"]);
        cases.push(vec!["-g", "0", "-s", "1048576", "-n", "50"]);
    } else {
        cases.push(vec!["-g", "0", "-e", "-n", "50"]);
    }
    for args in cases {
        let mut a = vec!["-d", "rondo0", "-c"]; // -c: check the received data
        a.extend(&args);
        let r = pair("ibv_rc_pingpong", &a, "-p", &[], LIMIT);
        both_ok(&format!("ibv_rc_pingpong {}", args.join(" ")), &r, None);
        assert!(r.1.text.contains("iters in"), "{}", r.1.text);
    }
}

#[test]
fn qperf_rc_tests_print_results() {
    if !have("qperf") {
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let port = free_port().to_string();
    let server = preloaded("qperf", &["-lp", &port], &[])
        .spawn()
        .expect("qperf server");
    std::thread::sleep(Duration::from_millis(500));
    let tests: &[&str] = if full() {
        &[
            "rc_bw",
            "rc_lat",
            "rc_rdma_write_bw",
            "rc_rdma_read_bw",
            "rc_rdma_write_lat",
            "rc_rdma_read_lat",
        ]
    } else {
        &["rc_bw", "rc_lat"]
    };
    let secs = if full() { "2" } else { "1" };
    // A 30 s message timeout instead of qperf's 5 s: on a loaded host one test's
    // teardown and the next one's set-up can take longer than that.
    let mut args = vec!["-lp", port.as_str(), "-to", "30", "-t", secs, "127.0.0.1"];
    args.extend_from_slice(tests);
    let (out, timed_out) = finish(
        preloaded("qperf", &args, &[]).spawn().expect("qperf"),
        LIMIT,
    );
    let mut server = server;
    let _ = server.kill();
    let _ = server.wait();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && !timed_out,
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for t in tests {
        assert!(text.contains(&format!("{t}:")), "{t} missing:\n{text}");
    }
    assert_eq!(
        text.matches("bw  =").count() + text.matches("latency  =").count(),
        tests.len(),
        "{text}"
    );
}

#[test]
fn what_rondo_does_not_carry_fails_with_a_message_and_a_nonzero_exit() {
    if !have("ib_send_bw") {
        return;
    }
    let cases: &[(&str, &[&str], &str)] = &[
        ("ib_send_bw", &["-c", "UD"], "QP type 4 is not supported"),
        (
            "ib_send_bw",
            &["--use-srq"],
            "shared receive queues (SRQ) are not supported",
        ),
        ("ib_atomic_bw", &[], "not supported"),
        ("ib_write_bw", &["-R"], "rdma"),
    ];
    for (prog, extra, message) in cases {
        let mut args = vec!["-d", "rondo0", "-n", "5"];
        args.extend_from_slice(extra);
        let (s, c) = pair(prog, &args, "-p", &[], Duration::from_secs(60));
        let what = format!("{prog} {}", extra.join(" "));
        for (side, e) in [("server", &s), ("client", &c)] {
            assert!(!e.timed_out, "{what}: {side} hung:\n{}", e.text);
            assert!(
                matches!(e.code, Some(c) if c != 0),
                "{what}: {side} exited {:?} (a signal is a crash):\n{}",
                e.code,
                e.text
            );
        }
        let both = format!("{}{}", s.text, c.text);
        assert!(
            both.contains(message),
            "{what}: no message {message:?}:\n{both}"
        );
    }
}

#[test]
fn a_bad_configuration_fails_the_open_with_the_variable_named() {
    if !have("ibv_devinfo") {
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let out = preloaded(
        "ibv_devinfo",
        &["-d", "rondo0"],
        &[("RONDO_IBV_PATHS", "0")],
    )
    .output()
    .expect("ibv_devinfo");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "opened with 0 paths");
    assert!(out.status.code().is_some(), "killed by a signal:\n{err}");
    assert!(
        err.contains("RONDO_IBV_PATHS=0: give 1 to 64 paths"),
        "{err}"
    );
}
