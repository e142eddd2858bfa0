//! The paper's figures that need no baseline, each asserting the paper's result with
//! the tolerance written next to the paper's number. Runs are kept short in
//! simulated time so the suite stays fast; `rondo sim --builtin NAME` runs the full
//! built-ins.

use rondo_proto::time::Instant;
use rondo_sim::scenario::{builtin, run, Override, Report, RunOptions, Scenario};
use rondo_sim::Simulator;

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

fn report(s: &Scenario) -> Report {
    run(s, "figures", RunOptions::default(), &mut |_| {})
        .unwrap_or_else(|e| panic!("{e}"))
        .report
}

/// Full-size data packets per microsecond at `gbps`.
fn packets_per_us(gbps: f64, mtu: u32) -> f64 {
    gbps * 1e3 / (f64::from(mtu) * 8.0)
}

/// Paper §6.1, Fig. 9b: Rondo reaches 68.18 Gb/s (homogeneous delays) and 68.14 Gb/s
/// (path 0 +10 us) of the 70 Gb/s the four paths offer.
#[test]
fn fig9_rondo_fills_the_four_unequal_paths() {
    for (name, paper_gbps) in [("fig9-homo", 68.18), ("fig9-hetero", 68.14)] {
        let r = report(&scenarios(name, &["duration_us=3000"])[0]);
        assert_eq!(r.ideal_gbps, 70.0, "{name}");
        // Paper: 68.18 / 68.14 Gb/s of 70 (utilization 0.974); tolerance 2.5 Gb/s
        // below, and not above the ideal (0.5% for packets on the wire when the
        // measurement window opens).
        assert!(
            r.throughput_gbps >= paper_gbps - 2.5 && r.throughput_gbps <= 70.0 * 1.005,
            "{name}: throughput {:.2} Gb/s, paper {paper_gbps}",
            r.throughput_gbps
        );
        // Utilization about 0.97 (0.974 -/+ 0.035).
        assert!(
            (r.utilization - 0.974).abs() <= 0.035,
            "{name}: utilization {:.3}",
            r.utilization
        );
        assert_eq!(r.retx.packets, 0, "{name}: no loss on these paths");
    }
}

/// Paper §6.1, Fig. 9b: round-robin spraying (RRPS) gives every path the same
/// share, so the 10 Gb/s path caps the flow at 4 x 10 of 70 Gb/s (the paper's
/// RRPS bar: about 40 Gb/s), while Rondo runs the same testbed at full rate.
#[test]
fn fig9_rrps_is_held_to_four_times_its_slowest_path() {
    for name in ["fig9-homo", "fig9-hetero"] {
        let rrps = report(&scenarios(name, &["duration_us=3000", "transport.kind=\"rrps\""])[0]);
        let rondo = report(&scenarios(name, &["duration_us=3000"])[0]);
        assert_eq!(rrps.transport, "rrps");
        // 40 of 70 Gb/s: utilization 0.571, tolerance 0.03.
        assert!(
            (rrps.utilization - 40.0 / 70.0).abs() <= 0.03,
            "{name}: rrps utilization {:.3}",
            rrps.utilization
        );
        assert!(
            rondo.utilization > 0.95,
            "{name}: rondo {:.3}",
            rondo.utilization
        );
        // The slowest path's queue holds back its PSNs: far more reordering.
        assert!(
            rrps.ood.nic_p99 > 10 * rondo.ood.nic_p99.max(1),
            "{name}: OOD p99 rrps {} rondo {}",
            rrps.ood.nic_p99,
            rondo.ood.nic_p99
        );
    }
}

/// Paper §3.3, Fig. 4: OOD grows linearly with the persistent delay difference, as
/// eq. (3) predicts (OOD_max ~ R x dD); Rondo's scheduler keeps it near 0.
#[test]
fn fig4_scheduler_cancels_the_persistent_delay_difference() {
    let runs = scenarios("fig4", &["duration_us=1500", "warmup_us=800"]);
    assert_eq!(runs.len(), 12);
    for s in &runs {
        let r = report(s);
        let extra = match &s.topology {
            rondo_sim::scenario::TopologySpec::Fig2(t) => t.extra_delay_us[3],
            other => panic!("fig2 expected, got {other:?}"),
        };
        // Each of the four receivers gets one flow at a quarter of the throughput.
        let rate = packets_per_us(r.throughput_gbps / 4.0, s.mtu);
        let eq3 = rate * extra;
        assert!(
            r.utilization > 0.95,
            "{}: utilization {:.3}",
            r.scenario,
            r.utilization
        );
        if s.transport.scheduler {
            // "Near 0": at most 20 packets at p99 whatever the difference (eq. (3)
            // gives up to 208 packets at 25 us).
            assert!(
                r.ood.nic_p99 <= 20,
                "{}: OOD p99 {} with the scheduler (eq. (3): {eq3:.0})",
                r.scenario,
                r.ood.nic_p99
            );
        } else if extra >= 5.0 {
            // Eq. (3) is an estimate of the maximum: within 35% of it.
            let max = r.ood.nic_max as f64;
            assert!(
                (max / eq3 - 1.0).abs() <= 0.35,
                "{}: OOD max {max}, eq. (3) {eq3:.1}",
                r.scenario
            );
            // Paper: "a persistent path-delay difference of 15 us can cause a
            // NIC-level OOD of 124-153 packets" (controllers without a scheduler);
            // tolerance 10% either side.
            if extra == 15.0 {
                assert!(
                    (124.0 * 0.9..=153.0 * 1.1).contains(&max),
                    "{}: OOD max {max}",
                    r.scenario
                );
            }
        }
    }
}

/// Runs `sim` to `end_us`, measuring from `from_us`; returns the metrics.
fn phase(sim: &mut Simulator, from_us: u64, end_us: u64) -> rondo_sim::Metrics {
    sim.set_warmup(Instant::from_us(from_us));
    sim.run(Instant::from_us(end_us), &mut |_| {});
    sim.metrics()
}

/// Paper §6.3, Fig. 18: 8 flows share a bottleneck, 32 join, then leave. Joining
/// flows send W0 and probe instead of flooding the queue; ARCC drains the queue
/// without losing utilization; after they leave, probing refills the link at once.
#[test]
fn fig18_flows_join_and_leave_without_losing_the_link() {
    let s = &scenarios("fig18", &[])[0];
    let mut sim = rondo_sim::scenario::build(s, "fig18").unwrap();
    let receiver = sim.link(rondo_sim::LinkKind::HostDown, 0).unwrap();
    sim.enable_trace(
        rondo_proto::time::Duration::from_us(2),
        Some(vec![receiver]),
    )
    .unwrap();
    let before = phase(&mut sim, 200, 500);
    let during = phase(&mut sim, 550, 950);
    let after = phase(&mut sim, 1050, 1500);
    // No loss of utilization in any phase ("without reducing bandwidth utilization",
    // "fully utilizes the bandwidth in one step"): at least 95% of the 100G link.
    for (name, m) in [("before", &before), ("during", &during), ("after", &after)] {
        assert!(
            m.utilization >= 0.95,
            "{name} the join: utilization {:.3}",
            m.utilization
        );
    }
    // The 32 joiners completed before the last phase.
    assert_eq!(after.flows_completed, 32);
    // Fair shares while 40 flows compete (paper Fig. 17: Jain 0.999 under incast).
    assert!(
        during.fairness_jain.unwrap() >= 0.9,
        "Jain {:?}",
        during.fairness_jain
    );
    // The queue drains after the join: 200 us after its peak it is at most half the
    // peak, and after the leave it falls back below 64 KB.
    let trace = sim.trace().unwrap();
    let at = |t: u64| {
        trace
            .samples
            .iter()
            .find(|x| x.at >= Instant::from_us(t))
            .map(|x| x.queue_bytes[0])
            .unwrap()
    };
    let (peak_at, peak) = trace
        .samples
        .iter()
        .filter(|x| x.at >= Instant::from_us(500) && x.at <= Instant::from_us(700))
        .map(|x| (x.at, x.queue_bytes[0]))
        .max_by_key(|x| x.1)
        .unwrap();
    let later = at(peak_at.as_ps() / 1_000_000 + 200);
    assert!(
        later * 2 <= peak,
        "queue {peak} B at its peak, {later} B 200 us later"
    );
    // After the leave the 8 flows' probing phases (about every 80 us) lift the
    // queue in spikes of 40-70 KB for a few us; between them it is 4-30 KB.
    // Their height is chance: the largest 2-us sample was 65.3 / 70.5 / 64.5 /
    // 66.0 KB over seeds 1-4 with the base RTT that never expires, 67.5 / 60.0 /
    // 60.0 / 60.8 KB with the one probes confirm (2026-12-07). So: 95% of the
    // samples below 64 KB, and no spike above 80 KB.
    let mut tail: Vec<u64> = trace
        .samples
        .iter()
        .filter(|x| x.at >= Instant::from_us(1100))
        .map(|x| x.queue_bytes[0])
        .collect();
    tail.sort_unstable();
    let (p95, max) = (tail[tail.len() * 95 / 100], tail[tail.len() - 1]);
    assert!(p95 <= 64 * 1024, "queue after the leave: p95 {p95} B");
    assert!(max <= 80 * 1024, "queue after the leave: max {max} B");
}

/// Paper §6.3, Fig. 19 (setup of §3.2): 16 senders to 4 receivers over four parallel
/// paths; "the inter-path queue difference [stays] always below 30 KB".
#[test]
fn fig19_interpath_queue_difference_stays_below_30_kb_after_startup() {
    let s = &scenarios("fig19", &["duration_us=1000", "warmup_us=500"])[0];
    let r = report(s);
    // Paper: < 30 KB (the other schemes reach about 200 KB). Our figure is the
    // largest difference at any queue change, not a sampled series; seeds 1-4
    // measure 17.6, 16.9, 24.9 and 14.6 KB with the topology's base RTT
    // (Rondo's default since 2026-12-07), 33.7, 32.2, 29.3 and 26.4 KB with
    // the measured one, which this test allowed with a tolerance of 20%.
    assert!(
        r.queue.max_interpath_diff_kb < 30.0,
        "max inter-path queue difference {:.1} KB",
        r.queue.max_interpath_diff_kb
    );
    assert!(r.utilization > 0.95, "utilization {:.3}", r.utilization);
}

/// The paper's "always": from the first packet on, start-up included.
#[test]
#[ignore = "start-up transient: seeds 1-4 27.8, 36.6, 45.4 and 41.0 KB with the \
            topology's base RTT (seed 1 70.3 KB with the measured one; paper: always < 30 KB)"]
fn fig19_interpath_queue_difference_stays_below_30_kb_from_the_start() {
    let s = &scenarios("fig19", &["duration_us=1000"])[0];
    let r = report(s);
    assert!(
        r.queue.max_interpath_diff_kb < 30.0,
        "max inter-path queue difference {:.1} KB",
        r.queue.max_interpath_diff_kb
    );
}

/// Paper §6.3, Fig. 20: a link's delay changes during a transfer. With the
/// scheduler OOD returns to near 0 once the new delay is measured; without it OOD
/// stays high, as eq. (3) predicts for the new delay difference.
#[test]
fn fig20_scheduler_brings_ood_back_after_a_delay_change() {
    let runs = scenarios("fig20", &["duration_us=2500"]);
    assert_eq!(runs.len(), 2);
    for s in &runs {
        let r = report(s);
        // Path 0's one-way delay went from 10 to 20 us: dD = 10 us.
        let eq3 = packets_per_us(r.throughput_gbps, s.mtu) * 10.0;
        if s.transport.scheduler {
            // Near 0: p99 at most 15 packets, under a quarter of eq. (3).
            assert!(
                r.ood.nic_p99 <= 15 && (r.ood.nic_p99 as f64) < eq3 / 4.0,
                "with the scheduler: OOD p99 {} (eq. (3): {eq3:.0})",
                r.ood.nic_p99
            );
        } else {
            // High: p99 at least 70% of eq. (3).
            assert!(
                r.ood.nic_p99 as f64 >= 0.7 * eq3,
                "without the scheduler: OOD p99 {} (eq. (3): {eq3:.0})",
                r.ood.nic_p99
            );
        }
    }
}

/// The 320-host run (`rondo sim --builtin clos320-permutation`): every flow
/// completes. Scaled to 200 KB per flow here to keep the suite fast; the full 2 MB
/// run is the built-in.
#[test]
fn clos320_permutation_every_flow_completes() {
    let s = &scenarios("clos320-permutation", &["workload.bytes=200000"])[0];
    let r = report(s);
    assert_eq!(r.flows_total, 320);
    assert_eq!(r.flows_completed, 320);
    assert_eq!(r.end, "done");
    // 200 KB at 100 Gb/s is 17 us on the wire: completion within 5x that is
    // expected on a non-blocking fabric with a permutation.
    let fct = r.fct_us.unwrap();
    assert!(fct.max < 100.0, "FCT max {:.1} us", fct.max);
    assert!(r.fct_slowdown_p99.unwrap() < 5.0);
}

/// Fig. 20's transfer should keep all four paths busy after the delay change (the
/// paper's point is the OOD; its flow keeps its rate). It did not while the base
/// RTT never expired (0.758: ARCC sized path 0 for its old RTT and the path
/// starved); with the expiry that probes confirm, 0.987 / 0.985 (scheduler on /
/// off) over the built-in's 3 ms (issue 12 row 5, docs/engine.md).
#[test]
fn fig20_keeps_every_path_busy_after_the_delay_change() {
    for s in &scenarios("fig20", &["duration_us=2500"]) {
        let r = report(s);
        assert!(
            r.utilization >= 0.95,
            "{}: utilization {:.3} after the change",
            r.scenario,
            r.utilization
        );
    }
}

/// The issue-10 scale built-in (`rondo sim --builtin clos320-alltoall`: every
/// ordered pair of the 320 hosts, 102,080 flows of 16 KB), here in groups of 16
/// hosts (4,800 flows) to keep the suite fast: every flow completes, and its
/// connections are closed when it is done (only tombstones stay).
#[test]
fn clos320_alltoall_completes_and_closes_every_connection() {
    let s = &scenarios("clos320-alltoall", &["workload.group_size=16"])[0];
    let mut sim = rondo_sim::scenario::build(s, "figures").unwrap();
    let end = sim.run(Instant::from_us(s.duration_us as u64), &mut |_| {});
    let m = sim.metrics();
    assert_eq!(m.flows.len(), 20 * 16 * 15);
    assert!(
        m.flows
            .iter()
            .all(|f| f.finish.is_some() && f.delivered == 16384),
        "{end:?}: {} of {} flows finished",
        m.flows.iter().filter(|f| f.finish.is_some()).count(),
        m.flows.len()
    );
    let open: usize = (0..sim.hosts())
        .map(|h| sim.endpoint(h).unwrap().connections().count())
        .sum();
    // The run ends when the last byte is delivered: the senders still waiting for
    // their last ACKs are open, with their receivers; every other flow is closed.
    eprintln!(
        "{open} of {} connections open at the end",
        2 * m.flows.len()
    );
    assert!(
        open * 20 < 2 * m.flows.len(),
        "{open} of {} connections open after their flows finished",
        2 * m.flows.len()
    );
}

/// Paper App. A, Fig. 24: ConnectX-7 selective repeat's READ throughput drops
/// sharply once the OOD exceeds about 200 packets (16 outstanding READs), its
/// WRITE throughput near 500 (the 512-PSN window). The cliff (the last OOD
/// keeping 97% of the throughput) within one 50-packet sweep step of where the
/// limits put it: READ 16 READs of 16 packets less the 12-packet BDP, 244;
/// WRITE 512 less the BDP, 500.
#[test]
fn fig24_rc_sr_read_and_write_cliffs_sit_where_their_limits_put_them() {
    let runs = builtin("fig24").unwrap().runs(&[]).unwrap();
    for (op, lo, hi) in [("READ", 194.0, 294.0), ("WRITE", 450.0, 550.0)] {
        let mut points: Vec<(f64, f64)> = Vec::new();
        for r in runs
            .iter()
            .filter(|r| r.sweep.as_ref().is_some_and(|p| p.series == op))
        {
            let imposed = r.sweep.as_ref().unwrap().x;
            let rep = report(&r.scenario);
            // The NIC-level OOD is the imposed one (the x axis) until the limit
            // holds it: 512 outstanding PSNs for WRITE, 16 READs of 16 packets.
            // Direct placement keeps it outside the reorder buffer, where the
            // tap did not see it (it read 0 at every point).
            let cap = if op == "READ" { 256.0 } else { 512.0 };
            let p99 = rep.ood.nic_p99 as f64;
            assert!(
                p99 <= cap && p99 >= 0.9 * imposed.min(cap * 0.95),
                "{op} imposed {imposed}: OOD p99 {p99}"
            );
            points.push((imposed, rep.goodput_gbps));
        }
        assert_eq!(points.len(), rondo_sim::scenario::FIG24_OOD.len());
        assert!(points[0].1 > 38.0, "{op} at OOD 0: {points:?}");
        let cliff = rondo_sim::scenario::fig24_cliff(&points);
        assert!(
            cliff.is_some_and(|c| (lo..=hi).contains(&c)),
            "{op}: cliff at {cliff:?}, want {lo}-{hi}: {points:?}"
        );
        // Past the cliff it keeps falling: at 800 under 60% of the top.
        assert!(
            points.last().unwrap().1 < 0.6 * points[0].1,
            "{op}: {points:?}"
        );
    }
}

/// Issue 12, row 4: one flow over 40/25/10 Gb/s paths with one-way delays of
/// 1/3/15 us, against the shared reorder buffer. The slow path's packets must go
/// about 80 PSNs ahead of the fast paths', more than a small buffer holds. The
/// scheduler's steady-state OOD (p99 about 15 packets, 23 KB) fits every size
/// from 32 KB (21 slots), so the target is at least 90% of the paths' 75
/// Gb/s there: measured 0.968 at every size (it was 12%, then 73-79% at 32-128 KB:
/// docs/engine.md, "Small reorder buffers on unequal paths"). No smaller buffer
/// does more than 5% better than a larger one, and from 300 KB on the flow fills
/// the paths.
#[test]
fn hetero_buffer_goodput_falls_smoothly_with_the_reorder_buffer() {
    let runs = scenarios("hetero-buffer", &["duration_us=3000", "warmup_us=1000"]);
    assert_eq!(runs.len(), rondo_sim::scenario::HETERO_BUFFER_KB.len());
    let mut last: Option<(f64, f64)> = None;
    for s in &runs {
        let r = report(s);
        let kb = s.transport.reorder_buffer_kb;
        let share = r.goodput_gbps / r.ideal_gbps;
        assert!(
            share >= 0.9,
            "{kb} KB: goodput {:.1} of {:.1}",
            r.goodput_gbps,
            r.ideal_gbps
        );
        if kb >= 300.0 {
            assert!(
                r.utilization > 0.95,
                "{kb} KB: utilization {:.3}",
                r.utilization
            );
        }
        if let Some((smaller_kb, smaller)) = last {
            assert!(
                r.goodput_gbps >= 0.95 * smaller,
                "{kb} KB: {:.1} Gb/s, {smaller_kb} KB: {smaller:.1}",
                r.goodput_gbps
            );
        }
        last = Some((kb, r.goodput_gbps));
    }
}

/// Hosts that stall (`host-stalls`: the real-datapath testbed, stalls every 20 ms
/// on average, each from half to 1.5 times the mean): Rondo as the paper sets it
/// loses the link in every stall, more the longer they are (its margins of q0
/// packets hold well under a millisecond of queue, and the delayed ACKs read as a
/// queue above tau_q and cut the windows); with a stall allowance S it keeps the
/// link full through stalls of up to S / 2 on average, above rrps (held to four
/// times its slowest path) through stalls of up to S, with OOD far below rrps's; a
/// larger allowance rides longer stalls.
#[test]
fn host_stalls_rondo_rides_through_them_with_a_stall_allowance() {
    let runs = scenarios("host-stalls", &["duration_us=1500000", "warmup_us=500000"]);
    let (stalls, series) = (
        rondo_sim::scenario::HOST_STALL_MS,
        rondo_sim::scenario::HOST_STALL_SERIES,
    );
    assert_eq!(runs.len(), series.len() * stalls.len());
    let reports: Vec<Report> = runs.iter().map(report).collect();
    let of = |name: &str| {
        let k = series.iter().position(|(n, _)| *n == name).unwrap();
        &reports[k * stalls.len()..(k + 1) * stalls.len()]
    };
    let (paper, rrps) = (of("rondo"), of("rrps"));
    let (a4, a8) = (
        of("rondo, stall allowance 4 ms"),
        of("rondo, stall allowance 8 ms"),
    );
    for (i, &ms) in stalls.iter().enumerate() {
        for (allowance_ms, a) in [(4, &a4[i]), (8, &a8[i])] {
            if 2 * ms <= allowance_ms {
                assert!(
                    a.utilization >= 0.97,
                    "{allowance_ms} ms allowance, {ms} ms stalls: {:.3}",
                    a.utilization
                );
            }
            if ms <= allowance_ms {
                assert!(a.utilization > rrps[i].utilization + 0.1, "{ms} ms");
            }
            assert!(
                a.ood.nic_p99 * 3 < rrps[i].ood.nic_p99,
                "{ms} ms: {:?} {:?}",
                a.ood,
                rrps[i].ood
            );
        }
        assert!(a8[i].utilization >= a4[i].utilization - 0.005, "{ms} ms");
        if ms == 0 {
            assert!(
                paper[i].utilization > 0.99,
                "no stalls: {:.3}",
                paper[i].utilization
            );
        } else {
            assert!(paper[i].utilization < paper[i - 1].utilization, "{ms} ms");
        }
    }
    assert!(
        paper[2].utilization < 0.8,
        "2 ms: {:.3}",
        paper[2].utilization
    );
}
