//! Workload operations beyond WRITE: READ flows (the request goes to the
//! responder, the data comes back; the RC models hold at most 16 READs
//! outstanding, paper App. A) and the collective workload (phases with
//! dependencies, paper Fig. 11).

use rondo_sim::scenario::{parse, run, Outcome, Override, RunOptions};

fn sim(text: &str, overrides: &[&str]) -> Outcome {
    let o: Vec<Override> = overrides
        .iter()
        .map(|s| Override::parse(s).unwrap())
        .collect();
    let s = parse("t.toml", text, &o).unwrap();
    run(&s, "t.toml", RunOptions::default(), &mut |_| {}).unwrap()
}

/// One 40 Gb/s path with 50 us each way: 16 READs of 16 KiB per ~104 us
/// (2 x 50 us, 3.3 us of response, the request) is about 20 Gb/s.
const LONG_PATH: &str = r#"
    duration_us = 3000
    warmup_us = 1000
    mtu = 4144
    [topology]
    kind = "parallel"
    host_gbps = 40
    paths = [ { gbps = 40, delay_us = 50.0 } ]
    [transport]
    kind = "rc-sr"
    [workload]
    kind = "long_flows"
    op = "read"
    message_bytes = 16384
    tx_depth = 128
"#;

#[test]
fn rc_reads_stop_at_sixteen_outstanding_and_writes_do_not() {
    let read = sim(LONG_PATH, &[]).report;
    let per_read_us = 2.0 * 50.0 + 16384.0 * 8.0 / 40e3;
    let bound = 16.0 * 16384.0 * 8.0 / per_read_us / 1e3;
    assert!(
        read.goodput_gbps > 0.85 * bound && read.goodput_gbps <= 1.02 * bound,
        "rc-sr READ {} Gb/s, 16-READ bound {bound:.1}",
        read.goodput_gbps
    );
    // The same posting as WRITEs: only the 512-PSN window (2 MiB) holds them.
    let write = sim(LONG_PATH, &["workload.op=\"write\""]).report;
    assert!(
        write.goodput_gbps > 36.0,
        "rc-sr WRITE {}",
        write.goodput_gbps
    );
    // A transport without a READ limit keeps all 128 READs outstanding.
    let rondo = sim(LONG_PATH, &["transport.kind=\"rondo\""]).report;
    assert!(
        rondo.goodput_gbps > 36.0,
        "rondo READ {}",
        rondo.goodput_gbps
    );
}

#[test]
fn a_finite_read_delivers_every_byte_at_the_requester() {
    let text = r#"
        duration_us = 5000
        [topology]
        kind = "fattree"
        k = 4
        [workload]
        kind = "long_flows"
        senders = [0]
        receivers = [13]
        bytes = 1000000
        op = "read"
        message_bytes = 65536
    "#;
    for transport in ["rondo", "rc-sr", "rc-gbn", "ecmp"] {
        let o = sim(text, &[&format!("transport.kind={transport:?}")]);
        let f = &o.metrics.flows[0];
        assert_eq!((f.src, f.dst), (0, 13));
        assert_eq!(
            f.delivered, 1_000_000,
            "{transport}: bytes at the requester"
        );
        let fct = f.fct().expect("the READ completed").as_us_f64();
        // The request's trip and the data's: more than the data alone at 100 Gb/s.
        assert!(fct > 80.0, "{transport}: {fct} us");
        assert_eq!(o.report.jct_us.map(|j| j.round()), Some(fct.round()));
    }
}

#[test]
fn collective_phases_wait_for_the_previous_phase_and_ring_steps_for_their_chunk() {
    let text = r#"
        duration_us = 20000
        [topology]
        kind = "fattree"
        k = 4
        [workload]
        kind = "collective"
        ranks = 4
        stride = 3
        phases = [ { op = "all_reduce", bytes = 400000 }, { op = "all_to_all", bytes = 120000 } ]
    "#;
    let o = sim(text, &[]);
    let flows = &o.metrics.flows;
    let (n, ring) = (4, 2 * 3 * 4);
    assert_eq!(flows.len(), ring + n * (n - 1));
    assert_eq!(o.report.flows_completed as usize, flows.len());
    for (i, f) in flows[..ring].iter().enumerate() {
        let (step, r) = (i / n, i % n);
        assert_eq!((f.src, f.dst), (3 * r, 3 * ((r + 1) % n)), "flow {i}");
        assert_eq!(f.bytes, Some(100_000));
        if step > 0 {
            let feeder = &flows[(step - 1) * n + (r + n - 1) % n];
            assert_eq!(feeder.dst, f.src);
            assert!(f.start >= feeder.finish.unwrap(), "step {step} rank {r}");
        }
    }
    let reduce_end = flows[..ring].iter().filter_map(|f| f.finish).max().unwrap();
    for f in &flows[ring..] {
        assert!(
            f.start >= reduce_end,
            "all-to-all before the all-reduce ended"
        );
        assert_eq!(f.bytes, Some(30_000));
    }
    // The communication time is the span from the first start to the last finish.
    let first = flows.iter().map(|f| f.start).min().unwrap();
    let last = flows.iter().filter_map(|f| f.finish).max().unwrap();
    let span = last.saturating_since(first).as_us_f64();
    assert!((o.report.jct_us.unwrap() - span).abs() < 1e-6);
}

#[test]
fn bad_collectives_and_read_postings_are_refused_with_the_key() {
    let base = |workload: &str| {
        format!(
            "duration_us = 100\n[topology]\nkind = \"fattree\"\nk = 4\n[workload]\n{workload}\n"
        )
    };
    for (workload, key) in [
        ("kind = \"collective\"\nranks = 9\nstride = 2\nphases = [ { op = \"all_gather\", bytes = 1000 } ]", "ranks"),
        ("kind = \"collective\"\nranks = 4\nphases = []", "phases"),
        ("kind = \"collective\"\nranks = 4\nphases = [ { op = \"all_gather\", bytes = 3 } ]", "phases[0].bytes"),
        ("kind = \"long_flows\"\nop = \"read\"\nmessage_bytes = 0", "message_bytes"),
        ("kind = \"long_flows\"\ntx_depth = 0", "tx_depth"),
    ] {
        let s = parse("b.toml", &base(workload), &[] as &[Override]).unwrap();
        let e = s.check("b.toml").unwrap_err().to_string();
        assert!(e.contains(&format!("workload.{key}")) || e.contains(key), "{key}: {e}");
    }
    let e = parse(
        "b.toml",
        &base("kind = \"long_flows\"\nop = \"atomic\""),
        &[] as &[Override],
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("atomic") && e.contains("read"), "{e}");
}
