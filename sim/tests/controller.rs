//! Issue 12: where Rondo's controller (ARCC, `rondo-proto/src/cc/arcc/`) fell
//! short of the paper, one test per row, each citing the paper's number. The
//! numbers before and after each change are in docs/engine.md.

use rondo_sim::scenario::{builtin, load, run, Override, Report, RunOptions, Scenario};

/// The scenarios of built-in `name` with `sets` applied.
fn scenarios(name: &str, sets: &[&str]) -> Vec<Scenario> {
    let sets: Vec<Override> = sets.iter().map(|s| Override::parse(s).unwrap()).collect();
    builtin(name)
        .unwrap()
        .runs(&sets)
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .map(|r| r.scenario)
        .collect()
}

/// Scenario file `sim/scenarios/NAME.toml` with `sets` applied.
fn file(name: &str, sets: &[&str]) -> Scenario {
    let sets: Vec<Override> = sets.iter().map(|s| Override::parse(s).unwrap()).collect();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join(format!("{name}.toml"));
    load(&path, &sets).unwrap_or_else(|e| panic!("{e}"))
}

fn report(s: &Scenario) -> Report {
    run(s, "controller", RunOptions::default(), &mut |_| {})
        .unwrap_or_else(|e| panic!("{e}"))
        .report
}

/// Row 1's target on `clos3-rtt-fairness` with `sets`: Jain >= 0.95 (the paper's
/// curves are equal shares) at utilization >= 0.95; the Jain index.
fn shares_fairly(sets: &[&str]) -> f64 {
    let r = report(&scenarios("clos3-rtt-fairness", sets)[0]);
    let jain = r.fairness_jain.unwrap();
    assert!(
        jain >= 0.95,
        "Jain {jain:.3}: {:?}",
        r.long_flow_goodput_gbps
    );
    assert!(r.utilization >= 0.95, "utilization {:.3}", r.utilization);
    jain
}

/// Row 1, paper App. E / Fig. 25 and Proposition 1 ("for N flows' logical paths
/// passing a single bottleneck, ARCC converges geometrically to equal
/// throughput"): three flows from the receiver's ToR, its pod and another pod
/// (base RTTs about 4, 8 and 13 us), one logical path each, share the link fairly
/// once tau_q is one network-wide value. Before (tau_q from each flow's own
/// largest base RTT) the same run measured Jain 0.80 (10.1 / 49.0 / 37.7 Gbit/s).
#[test]
fn flows_with_different_base_rtts_share_fairly_with_one_network_tau_q() {
    let sets = ["transport.paths=1", "duration_us=5000", "warmup_us=1000"];
    // Measured 0.997.
    let jain = shares_fairly(&sets);
    // The per-flow tau_q (the old behaviour) stays available and is worse.
    let mut flow = sets.to_vec();
    flow.push("transport.tau_q_base=\"flow\"");
    let old = report(&scenarios("clos3-rtt-fairness", &flow)[0]);
    assert!(
        old.fairness_jain.unwrap() + 0.05 < jain,
        "per-flow tau_q: Jain {:?}, network tau_q: {jain:.3}",
        old.fairness_jain
    );
}

/// Row 1 as the issue states it: each flow with as many logical paths as it has
/// equal-cost paths (1, 4 and 16). q0 bounds each path's margin (paper §4.2.1),
/// so a flow's share grows with its path count, and ARCC's rate memory
/// (W = r T + q) moves shares only slowly after start-up probing split the link.
#[test]
#[ignore = "row 1 open: flows of 1 / 4 / 16 logical paths measure Jain 0.67 \
            (8.8 / 25.4 / 62.5 Gbit/s, was 0.47 before the network-wide tau_q); \
            margin_scope = flow gives 0.87 (25 / 50 / 22)"]
fn flows_with_different_path_counts_share_fairly() {
    shares_fairly(&[]);
}

/// Row 1 with as many logical paths for every flow (16, the cross-pod flow's
/// equal-cost count; the same-ToR flow's 16 all map onto its one physical path):
/// Proposition 1 is per logical path, and the paper's footnote makes a logical path
/// a transport-level identifier that the network maps onto a physical one, so
/// equal counts are equal shares whatever the base RTTs and the physical paths.
/// Measured 0.965 (29.4 / 26.7 / 40.8 Gbit/s), utilization 1.00; with the
/// equal-cost counts (1 / 4 / 16, the ignored test above) 0.67.
#[test]
fn flows_with_equal_logical_path_counts_share_fairly() {
    shares_fairly(&["transport.paths=16"]);
}

/// Row 7, paper §6.1 / Fig. 9 (the testbed's OOD; the throwaway model reached p99
/// 9-11): with one margin per flow (`margin_scope = flow`, q0 shared by the
/// four paths) each path's standing queue is under one packet and the queueing
/// jitter that overtakes packets shrinks: p99 8 (homo) and 4 (hetero), against 17
/// and 18 with q0 per path, at the same utilization.
#[test]
fn one_margin_per_flow_keeps_fig9_ood_p99_at_most_12() {
    for name in ["fig9-homo", "fig9-hetero"] {
        let sets = ["duration_us=3000", "transport.margin_scope=\"flow\""];
        let r = report(&scenarios(name, &sets)[0]);
        assert!(r.ood.nic_p99 <= 12, "{name}: OOD p99 {}", r.ood.nic_p99);
        // Paper: 68.18 / 68.14 of 70 Gbit/s (0.974); tolerance as figures.rs.
        assert!(
            (r.utilization - 0.974).abs() <= 0.035,
            "{name}: utilization {:.3}",
            r.utilization
        );
    }
}

/// Row 7 (paper §6.1 / Fig. 9; the target is p99 <= 12, the throwaway model
/// reached 9-11) with q0 per path, at the defaults: the residual OOD was the scheduler
/// reading each path's delay from samples of packets sent a round trip ago,
/// while the path's queue (the flow's own packets, three to six behind each
/// margin) had moved since. With `scheduler_ahead` (the default) the delay of a
/// transmission now is the estimate corrected by the packets in flight on the
/// path now against those the estimate's packets found ahead of them:
/// measured p99 11 (homo) and 12 (hetero) against 17-18 without, at the same
/// utilization (docs/engine.md "Packets ahead (row 7)").
#[test]
fn packets_ahead_keep_fig9_ood_p99_at_most_12_with_q0_per_path() {
    assert!(rondo_proto::FlowConfig::default().scheduler_ahead);
    for name in ["fig9-homo", "fig9-hetero"] {
        let run = |ahead: bool| {
            let set = format!("transport.scheduler_ahead={ahead}");
            report(&scenarios(name, &["duration_us=3000", &set])[0])
        };
        let (off, on) = (run(false), run(true));
        println!(
            "{name}: OOD p99 {} -> {}, utilization {:.4} -> {:.4}",
            off.ood.nic_p99, on.ood.nic_p99, off.utilization, on.utilization
        );
        assert!(off.ood.nic_p99 > 12, "{name} without: {:?}", off.ood);
        assert!(on.ood.nic_p99 <= 12, "{name} with: {:?}", on.ood);
        assert!(
            on.utilization >= off.utilization - 0.002,
            "{name}: utilization {:.4} against {:.4}",
            on.utilization,
            off.utilization
        );
    }
}

/// Row 5, paper §6.3 / Fig. 20 (a path's one-way delay grows from 10 to 20 us
/// mid-transfer; the paper's flow keeps its rate and OOD returns near 0). The
/// base RTT that never expired sized path 0 for its old RTT and the path starved:
/// utilization 0.758 after the change. It now expires after 10 base RTTs
/// (`base_rtt_window_rtts`, the simulator's default) when probes confirm it: a
/// standing queue at a busy bottleneck (fig18's, row 6) lengthens RTTs as a
/// longer path does, but serves no probe. Measured 0.987 with OOD p99 12.
#[test]
fn a_base_rtt_that_probes_confirm_keeps_fig20_busy_after_the_delay_change() {
    let runs = scenarios("fig20", &[]);
    let on = runs.iter().find(|s| s.transport.scheduler).unwrap();
    let r = report(on);
    // Target >= 0.95 (0.758 before).
    assert!(r.utilization >= 0.95, "utilization {:.3}", r.utilization);
    // "OOD p99 still <= 12" (10 before).
    assert!(r.ood.nic_p99 <= 12, "OOD p99 {}", r.ood.nic_p99);
    let never = scenarios("fig20", &["transport.base_rtt_window_rtts=0"]);
    let old = report(never.iter().find(|s| s.transport.scheduler).unwrap());
    assert!(
        old.utilization < 0.8,
        "without expiry {:.3}",
        old.utilization
    );
    // The topology's base RTT (row 6's option) is where the measurement
    // starts, and probes confirm the longer one as well: 0.988, OOD p99 10.
    let topology = scenarios("fig20", &["transport.base_rtt=topology"]);
    let t = report(topology.iter().find(|s| s.transport.scheduler).unwrap());
    assert!(t.utilization >= 0.95, "topology {:.3}", t.utilization);
    assert!(t.ood.nic_p99 <= 12, "topology OOD p99 {}", t.ood.nic_p99);
}

/// Row 2, paper §6.3 / Fig. 17 (Jain 0.999 under 32-to-1 incast) with capacity
/// probing on (§4.2.2): eight long flows into one receiver of a k=4 fat tree.
/// Start-up probing splits the spare capacity unevenly (which probes get through
/// the low-priority queue is luck of arrival order), and the margins must undo
/// that split. A path of one or two packets, whose update intervals often hold
/// no RTT sample, reads its window's rounding as a queue in the inflight-based
/// estimate and loses its margin, so the small flows stay small: Jain 0.831 /
/// 0.900 / 0.867 for seeds 1-3 (0.99 without probing). With one packet of
/// excess taken for rounding (`queue_rounding_packets = 1`, an option: it
/// raises fig18's standing queue, row 6) the flows are fair.
///
/// Measured with the measured base RTT (`base_rtt = "measured"`), the default
/// then; the topology's (Rondo's default since) does most of it alone:
/// `probing_leaves_incast_flows_nearly_fair_with_the_topologys_base_rtt`.
#[test]
fn probing_leaves_incast_flows_fair_with_the_rounding_allowance() {
    for seed in 1..=3 {
        let sets = [format!("seed={seed}")];
        let mut sets: Vec<&str> = sets.iter().map(String::as_str).collect();
        sets.push("transport.base_rtt=measured");
        let before = report(&file("fattree-incast8", &sets));
        sets.push("transport.queue_rounding_packets=1");
        let s = file("fattree-incast8", &sets);
        assert!(s.transport.probing, "the scenario probes");
        let r = report(&s);
        let jain = r.fairness_jain.unwrap();
        // Target Jain >= 0.95 (measured 0.952 / 0.975 / 0.985), utilization >= 0.98.
        assert!(
            jain >= 0.95,
            "seed {seed}: Jain {jain:.3}: {:?}",
            r.long_flow_goodput_gbps
        );
        assert!(
            r.utilization >= 0.98,
            "seed {seed}: utilization {:.3}",
            r.utilization
        );
        // The paper's estimate (without the allowance) is the unfair one.
        assert!(
            before.fairness_jain.unwrap() < 0.92,
            "seed {seed}: Jain without the allowance {:?}",
            before.fairness_jain
        );
    }
}

/// Row 2 at the defaults: with the topology's base RTT (Rondo's default in the
/// simulator) a flow's paths are sized for the path's empty-queue RTT from its
/// first update, not for whatever queue its first samples saw, and
/// fattree-incast8's probing split evens out: Jain 0.956 / 0.960 / 0.953 /
/// 0.928 / 0.926 / 0.958 over seeds 1-6, against 0.840 / 0.789 / 0.820 / 0.788
/// / 0.854 / 0.839 with the measured base RTT, utilization 1.000 either way.
/// The issue's 0.95 holds for four seeds of six: row 2 stays open.
#[test]
fn probing_leaves_incast_flows_nearly_fair_with_the_topologys_base_rtt() {
    let mut sum = 0.0;
    for seed in 1..=6 {
        let sets = [format!("seed={seed}")];
        let mut sets: Vec<&str> = sets.iter().map(String::as_str).collect();
        let r = report(&file("fattree-incast8", &sets));
        sets.push("transport.base_rtt=measured");
        let measured = report(&file("fattree-incast8", &sets));
        let (jain, old) = (r.fairness_jain.unwrap(), measured.fairness_jain.unwrap());
        assert!(
            jain >= 0.92 && jain > old + 0.05,
            "seed {seed}: {jain:.3} against {old:.3}"
        );
        assert!(r.utilization >= 0.98, "seed {seed}: {:.3}", r.utilization);
        sum += jain;
    }
    assert!(sum / 6.0 >= 0.94, "mean Jain {:.3}", sum / 6.0);
}

/// A lone flow over four parallel 25 Gbit/s paths (2 us one-way each): the
/// paper's tau_q = 0.04 x base RTT is 0.16 us here, shorter than one 1500-byte
/// packet at 25 Gbit/s (0.48 us), so every packet waiting at a path read as a
/// queue above target and cut the margin to nothing: utilization 0.69. With
/// tau_q at least one packet at the slowest link (`tau_q_floor = "packet"`, the
/// default) the flow fills the paths. The paper's flows fill their paths (§6.1,
/// Fig. 9: 0.974 of the paths' sum).
#[test]
fn a_lone_flow_fills_four_slow_paths_with_tau_q_of_at_least_one_packet() {
    const FOUR: &str = r#"
name = "four-25g"
seed = 3
duration_us = 3000
warmup_us = 1500
[topology]
kind = "parallel"
host_gbps = 100
paths = [ { gbps = 25, delay_us = 2.0 }, { gbps = 25, delay_us = 2.0 },
          { gbps = 25, delay_us = 2.0 }, { gbps = 25, delay_us = 2.0 } ]
[workload]
kind = "long_flows"
flows = 1
"#;
    let parsed = |sets: &[&str]| {
        let sets: Vec<Override> = sets.iter().map(|s| Override::parse(s).unwrap()).collect();
        rondo_sim::scenario::parse("four-25g.toml", FOUR, &sets).unwrap_or_else(|e| panic!("{e}"))
    };
    let r = report(&parsed(&[]));
    assert!(r.utilization >= 0.95, "utilization {:.3}", r.utilization);
    let none = report(&parsed(&["transport.tau_q_floor=\"none\""]));
    assert!(
        none.utilization + 0.1 < r.utilization,
        "without the floor {:.3}, with it {:.3}",
        none.utilization,
        r.utilization
    );
}

/// Row 8: 20 us of extra one-way delay on 32 fabric uplinks of clos3
/// (`sim/scenarios/clos3-slow-links.toml`). Nothing is dropped, so every
/// retransmission is spurious. Early recovery used a 20 us initial RTT as the
/// ACK deadline of a path without an RTT sample, and declared every first-RTT
/// packet of the slow paths lost: 7,409 spurious retransmissions, JCT 155 us.
/// Now a path's packets wait for its first ACK (or the retransmission timer): no
/// spurious retransmission, JCT 143 us. (Row 8's OOD target, the scheduler
/// halving p99 and max OOD, is not met: p99 319 with the scheduler.)
#[test]
fn slow_fabric_links_cause_no_spurious_retransmissions() {
    let r = report(&file("clos3-slow-links", &[]));
    assert_eq!(r.flows_completed, r.flows_total);
    assert_eq!(r.drops.switch + r.drops.reorder_buffer + r.drops.random, 0);
    assert!(r.retx.spurious <= 10, "{:?}", r.retx);
}

/// Row 8 (link-delay heterogeneity): on `clos3-slow-links` with 5 MB flows, the
/// scheduler may start during a probing phase once its paths' delays span more
/// than 15 us. A probing phase lasts 3 of the flow's largest base RTTs, so the
/// flows with the slowest paths (+42 us one way) waited longest: with the paper's
/// rule, 83% of the arrivals with OOD above 400 after 250 us came from 9 flows
/// still probing. The steady-state (after 250 us) OOD p99 at least halves
/// (measured 449 -> 190; the paper's Fig. 9-10 keep OOD p99 in the tens).
#[test]
fn the_scheduler_starts_during_probing_when_path_delays_differ_widely() {
    let steady = |gap: &str| {
        let r = report(&file(
            "clos3-slow-links",
            &[
                "workload.bytes=5000000",
                "warmup_us=250",
                &format!("transport.scheduler_start_gap_us={gap}"),
            ],
        ));
        assert_eq!(r.flows_completed, r.flows_total);
        (r.ood.nic_p99, r.ood.nic_avg)
    };
    let (p99, avg) = steady("15");
    let (p99_after_probing, avg_after_probing) = steady("0");
    assert!(
        p99 * 2 <= p99_after_probing,
        "OOD p99 {p99} against {p99_after_probing} after probing only"
    );
    assert!(
        avg < avg_after_probing,
        "OOD avg {avg} against {avg_after_probing}"
    );
}

/// fig18's phases (as `figures::fig18_flows_join_and_leave_without_losing_the_link`)
/// with `sets`: utilization before, during and after the join, Jain during, and
/// the receiver link's mean queue over 700-950 us (40 flows), in KB.
fn fig18_standing_queue(sets: &[&str]) -> ([f64; 3], f64, f64) {
    use rondo_proto::time::{Duration, Instant};
    let s = &scenarios("fig18", sets)[0];
    let mut sim = rondo_sim::scenario::build(s, "fig18").unwrap();
    let receiver = sim.link(rondo_sim::LinkKind::HostDown, 0).unwrap();
    sim.enable_trace(Duration::from_us(2), Some(vec![receiver]))
        .unwrap();
    let mut phase = |from: u64, end: u64| {
        sim.set_warmup(Instant::from_us(from));
        sim.run(Instant::from_us(end), &mut |_| {});
        sim.metrics()
    };
    let (before, during, after) = (phase(200, 500), phase(550, 950), phase(1050, 1500));
    let queue: Vec<u64> = sim
        .trace()
        .unwrap()
        .samples
        .iter()
        .filter(|x| x.at >= Instant::from_us(700) && x.at < Instant::from_us(950))
        .map(|x| x.queue_bytes[0])
        .collect();
    let mean_kb = queue.iter().sum::<u64>() as f64 / queue.len() as f64 / 1000.0;
    let util = [before.utilization, during.utilization, after.utilization];
    (util, during.fairness_jain.unwrap(), mean_kb)
}

/// Row 6 (an option, not the default): windows below one packet drain fig18's
/// standing queue of 40 flows x 4 paths only together with the topology's base
/// RTT (the joiners' measured one includes the queue they joined). With the
/// measured base RTT 246.5 KB, with the topology's (Rondo's default since)
/// 139.3 KB; min window 0.5 and the topology's base RTT 19.6 KB, near tau_q C
/// (0.49 us at 100 Gbit/s, 6.1 KB) plus nine packets, at utilization 1.000 /
/// 1.000 / 0.986 and Jain 0.999 (docs/engine.md, "Windows below one packet").
/// Before a sub-packet path's ACK clocked its gate (it waited its smoothed RTT
/// / W_p, which lags the queue) the same setting gave 39.5 KB at 0.899
/// utilization during the join and Jain 0.655. Prints every setting of that
/// table (`--nocapture`).
#[test]
fn fractional_windows_drain_fig18s_standing_queue_with_the_topologys_base_rtt() {
    let settings: [&[&str]; 7] = [
        &["transport.base_rtt=measured"],
        &[
            "transport.min_window_packets=0.5",
            "transport.base_rtt=measured",
        ],
        &[
            "transport.min_window_packets=0.25",
            "transport.base_rtt=measured",
        ],
        &["transport.base_rtt=topology"],
        &[
            "transport.min_window_packets=0.5",
            "transport.base_rtt=topology",
        ],
        &[
            "transport.min_window_packets=0.25",
            "transport.base_rtt=topology",
        ],
        &[
            "transport.min_window_packets=0.1",
            "transport.base_rtt=topology",
        ],
    ];
    let rows: Vec<_> = settings.iter().map(|s| fig18_standing_queue(s)).collect();
    for (s, (util, jain, kb)) in settings.iter().zip(&rows) {
        println!("fig18 {s:?}: queue {kb:.1} KB, utilization {util:.3?}, Jain {jain:.3}");
    }
    let default_kb = rows[0].2;
    assert!(default_kb > 200.0, "measured base RTT: {default_kb:.1} KB");
    // Either alone leaves most of the queue.
    for (s, (_, _, kb)) in settings.iter().zip(&rows).take(4).skip(1) {
        assert!(*kb > default_kb / 2.0, "{s:?}: {kb:.1} KB");
    }
    // Both: the standing queue near tau_q C (6.1 KB) plus a few packets, and
    // the link busy and fair before, during and after the join.
    for (util, jain, kb) in &rows[4..] {
        assert!(*kb < 30.0, "{kb:.1} KB against {default_kb:.1}");
        assert!(util.iter().all(|u| *u > 0.95), "{util:?}");
        assert!(*jain > 0.95, "Jain {jain}");
    }
    let (util, jain, kb) = rows[4];
    assert!(
        kb < 25.0 && util[1] > 0.99 && jain > 0.99,
        "{kb} {util:?} {jain}"
    );
}

/// Row 3, paper §6.5 / Fig. 21 ("capacity probing then significantly reduces the
/// maximum and p99 OOD by avoiding queue overshoot during flow startup"): on
/// fig9-hetero (path 0 is 10 us longer one way) the first update that folds
/// probe ACKs into path 0's window opens it from 31 to 85 packets, which the
/// flow pacer sent at the rate of all four paths: 25 KB queued at path 0 and the
/// whole run's maximum OOD was 89 against a steady-state p99 of 18 (4.9x; the
/// issue asks at most 3x). With what probe ACKs buy paced at 1.25 W / T per path
/// (`probe_pacing_burst_packets = 2`), measured 49 (2.7x) at the same
/// utilization. Not the default: on the 320-host Clos permutation (fig10) it costs
/// 0.611 -> 0.604 utilization, and the long-delay single flow of `hetero-buffer`
/// still peaks at 128 (199 before) against a p99 of 17, because the scheduler
/// starts only after probing (docs/engine.md, "Start-up reordering"). Measured
/// with the scheduler reading the delay estimate as it is: with packets ahead
/// (`scheduler_ahead`, the default since) the start-up is the same (49 paced),
/// but the steady p99 falls to 12, so the bar is 36 (docs/engine.md "Packets
/// ahead (row 7)").
#[test]
fn paced_probe_conversion_keeps_fig9_hetero_start_up_ood_within_three_steady_p99() {
    let paced = "transport.probe_pacing_burst_packets=2";
    // Calibrated with the measured base RTT (with the topology's, Rondo's
    // default since, the paced maximum is 57 against a p99 of 17).
    let measured = "transport.base_rtt=measured";
    let whole = |sets: &[&str]| {
        let mut sets = sets.to_vec();
        sets.extend(["warmup_us=0", "transport.scheduler_ahead=false", measured]);
        report(&file("fig9-hetero", &sets))
    };
    let steady = report(&file(
        "fig9-hetero",
        &[paced, "transport.scheduler_ahead=false", measured],
    ));
    let (before, after) = (whole(&[]), whole(&[paced]));
    let p99 = steady.ood.nic_p99;
    println!(
        "fig9-hetero: steady p99 {p99}, whole-run max {} before, {} paced; utilization {:.3} / {:.3}",
        before.ood.nic_max, after.ood.nic_max, before.utilization, after.utilization
    );
    assert!(before.ood.nic_max > 3 * p99, "before: {:?}", before.ood);
    assert!(
        after.ood.nic_max <= 3 * p99,
        "paced: {:?}, p99 {p99}",
        after.ood
    );
    assert!(
        after.utilization >= before.utilization - 0.005,
        "{:.3} against {:.3}",
        after.utilization,
        before.utilization
    );
    // The long-delay flow of hetero-buffer: lower, not yet within 3x.
    let buffer = |sets: &[&str]| {
        let mut sets = sets.to_vec();
        sets.extend(["warmup_us=0", "transport.scheduler_ahead=false"]);
        report(&file("hetero-buffer", &sets)).ood.nic_max
    };
    let (b0, b1) = (buffer(&[]), buffer(&[paced]));
    println!("hetero-buffer (1.2 MB): whole-run max {b0} before, {b1} paced");
    assert!(b1 < b0, "{b1} against {b0}");
}

/// Row 4 (the same 40/25/10 Gbit/s flow with 1/3/15 us one-way delays, against
/// the shared reorder buffer, 32 KB-1.2 MB): the scheduler's steady-state OOD
/// (p99 about 15 packets, 23 KB) fits every size, so goodput should stay within
/// 90% of ideal. It fell to 73-79% at 32-128 KB (3 ms runs from 1 ms): the
/// start-up overshoot overran the buffer, the "buffer full" NAK halved the
/// receiver-limited span, and the span, regrown by one packet per span
/// delivered, stayed below the slow path's skip (about 80) for milliseconds, so
/// the slow path rested; each probing phase overran the buffer again. Now a flow
/// the receiver has refused paces what probe ACKs buy
/// (`probe_pacing_after_refusal`) and regrows the span by one packet per 4
/// delivered (`receiver_span_step`, default 4): every size moves 0.968 of the
/// paths' 75 Gbit/s (the goodput of the largest buffer) with OOD p99 14-17. Both
/// off, the old numbers come back exactly (0.734 at 32 KB). Neither alone does
/// it: the faster regrowth alone cycles through refusals at 32 KB (0.42), the
/// pacing alone leaves four sizes at 0.85-0.87 (docs/engine.md, "Small reorder
/// buffers on unequal paths").
#[test]
fn a_flow_the_receiver_refused_keeps_hetero_buffer_above_ninety_percent() {
    let options = [
        "duration_us=3000",
        "warmup_us=1000",
        "transport.probe_pacing_after_refusal=false",
        "transport.receiver_span_step=0",
    ];
    let runs = scenarios("hetero-buffer", &options[..2]);
    let before = scenarios("hetero-buffer", &options);
    assert_eq!(runs.len(), rondo_sim::scenario::HETERO_BUFFER_KB.len());
    let mut worst_before = f64::MAX;
    for (s, b) in runs.iter().zip(&before) {
        let (r, old) = (report(s), report(b));
        let kb = s.transport.reorder_buffer_kb;
        let share = r.goodput_gbps / r.ideal_gbps;
        let was = old.goodput_gbps / old.ideal_gbps;
        println!(
            "{kb} KB: {was:.3} -> {share:.3} of ideal, OOD p99 {}",
            r.ood.nic_p99
        );
        assert!(share >= 0.9, "{kb} KB: {share:.3} of ideal");
        assert!(r.ood.nic_p99 <= 20, "{kb} KB: OOD {:?}", r.ood);
        worst_before = worst_before.min(was);
    }
    assert!(worst_before < 0.8, "without them, worst {worst_before:.3}");
}

/// Issue 12's Clos rows rest on how logical paths meet physical ones (the
/// paper's footnote to Proposition 1: the network maps a logical path onto a
/// physical one). On the steered fabric, the default, as Rondo's switch program
/// steers by UDP source port, a flow's logical paths take distinct routes;
/// hashed (`switch.routing = "ecmp"`) several share one, which then holds their
/// margins' queue, and the flow reorders: fig10's permutation measured OOD p99 3
/// steered against 18 hashed, and moe-alltoall with 16 logical paths per flow 12
/// against 142 (docs/engine.md "Steered routes"). The paper's Fig. 22 reports a
/// p99 of 0 for Rondo's all-to-all.
#[test]
fn steered_logical_paths_reorder_less_than_hashed_ones() {
    let p99 = |name: &str, sets: &[&str]| report(&file(name, sets)).ood.nic_p99;
    let ecmp = "switch.routing=\"ecmp\"";
    let (steered, hashed) = (
        p99("fig10-permutation", &[]),
        p99("fig10-permutation", &[ecmp]),
    );
    assert!(
        steered <= 6 && hashed >= 2 * steered + 6,
        "fig10 permutation OOD p99: {steered} steered, {hashed} hashed"
    );
    let paths = "transport.paths=16";
    let (steered, hashed) = (
        p99("moe-alltoall", &[paths]),
        p99("moe-alltoall", &[paths, ecmp]),
    );
    assert!(
        steered <= 25 && hashed >= 4 * steered,
        "moe-alltoall, 16 logical paths: OOD p99 {steered} steered, {hashed} hashed"
    );
}
