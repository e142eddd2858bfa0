//! The figures `rondo reproduce` runs: for each, the paper's claim, the runs, the
//! table columns and the comparison lines.

use super::reasons::{
    buffer_reason, host_bound_reasons, moe_reason, sensitivity_reason, tail_reason,
};
use super::{grid, transports, Column, Figure, Missing, Plot, Point, Source, Variant};

const WEBSEARCH: &str = include_str!("../../../sim/scenarios/websearch-load.toml");
const HADOOP: &str = include_str!("../../../sim/scenarios/hadoop-load.toml");
const FIG22: &str = include_str!("../../../sim/scenarios/fig22-fattree-alltoall.toml");
const FIG27: &str = include_str!("../../../sim/scenarios/fig27-rate-change.toml");

/// The fabric baselines of §6.2 (RRPS is left out there, as in the paper).
const FABRIC: &[&str] = &["rondo", "ecmp", "mprdma", "falcon", "uet", "ar"];
/// The multipath transports with a reorder buffer (Fig. 14).
const MULTIPATH: &[&str] = &["rondo", "mprdma", "falcon", "uet", "swift-rps"];
/// Rondo started at 16 packets per path instead of one (Figs. 11 and 12): what
/// its start costs short flows.
pub(super) const RONDO_W0: &str = "rondo W0=16";
/// Fig. 14's runs measured from 0 us, start-up included, at these buffers.
pub(super) const FROM_ZERO: &str = "from 0 us";

fn all_runs(_: &str) -> bool {
    true
}

/// The point of `series` in `group`.
pub(super) fn at<'a>(pts: &'a [Point], group: &str, series: &str) -> Option<&'a Point> {
    pts.iter().find(|p| p.group == group && p.series == series)
}

/// The cases of a figure, in order.
pub(super) fn groups(pts: &[Point]) -> Vec<&str> {
    let mut g: Vec<&str> = Vec::new();
    for p in pts {
        if !g.contains(&p.group.as_str()) {
            g.push(&p.group);
        }
    }
    g
}

/// The variants of a figure other than `but`, in order.
fn others<'a>(pts: &'a [Point], but: &str) -> Vec<&'a str> {
    let mut s: Vec<&str> = Vec::new();
    for p in pts {
        if p.series != but && !s.contains(&p.series.as_str()) {
            s.push(&p.series);
        }
    }
    s
}

/// The other transports of a figure: the variants but `but` and Rondo's own
/// settings ([`RONDO_W0`]).
pub(super) fn other_transports<'a>(pts: &'a [Point], but: &str) -> Vec<&'a str> {
    others(pts, but)
        .into_iter()
        .filter(|o| *o != RONDO_W0)
        .collect()
}

/// "a-b" of the finite values, or "n/a".
pub(super) fn range(v: &[f64], digits: usize, unit: &str) -> String {
    let v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return "n/a".to_owned();
    }
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if (hi - lo).abs() < 10f64.powi(-(digits as i32)) {
        format!("{lo:.digits$}{unit}")
    } else {
        format!("{lo:.digits$}-{hi:.digits$}{unit}")
    }
}

/// JCT of ECMP in the same case over this point's JCT.
fn speedup(p: &Point, all: &[Point]) -> Option<f64> {
    let ecmp = at(all, &p.group, "ecmp")?.get("jct_us")?;
    Some(ecmp / p.get("jct_us")?)
}

/// Percent by which Rondo's `key` is below `other`'s, per case in `cases`.
fn reductions(pts: &[Point], other: &str, key: &str, cases: &[&str]) -> Vec<f64> {
    cases
        .iter()
        .filter_map(|g| {
            let r = at(pts, g, "rondo")?.get(key)?;
            let o = at(pts, g, other)?.get(key)?;
            (o > 0.0).then(|| 100.0 * (1.0 - r / o))
        })
        .collect()
}

/// The transport-comparison columns of Figs. 10, 11, 13 and 22: JCT, speedup
/// against ECMP, NIC-level p99 and max OOD.
fn jct_columns() -> Vec<Column> {
    vec![
        Column::key("JCT us", "jct_us", 0),
        Column::with("speedup vs ecmp", 2, speedup),
        Column::key("OOD p99", "ood.nic_p99", 0),
        Column::key("OOD max", "ood.nic_max", 0),
    ]
}

/// One variant per transport of `names`, and Rondo started at 16 packets per
/// path ([`RONDO_W0`]).
fn with_rondo_w0(names: &[&str]) -> Vec<Variant> {
    let mut v = transports(names);
    v.push(Variant::new(RONDO_W0, &["transport.initial_window=16"]));
    v
}

/// Rondo's speedup against ECMP in each case that has both.
fn rondo_speedups(pts: &[Point]) -> Vec<(&str, f64)> {
    groups(pts)
        .into_iter()
        .filter_map(|g| Some((g, speedup(at(pts, g, "rondo")?, pts)?)))
        .collect()
}

/// Goodput of a run's first workload table (the incast of Fig. 14).
pub(super) fn first_workload_goodput(p: &Point) -> Option<f64> {
    p.mean(|r| r.get("workloads")?.get(0)?.get("goodput_gbps")?.as_f64())
}

/// Lowest (or highest) long-flow goodput over the mean.
fn spread(p: &Point, highest: bool) -> Option<f64> {
    p.mean(|r| {
        let v: Vec<f64> = r
            .get("long_flow_goodput_gbps")?
            .as_array()?
            .iter()
            .filter_map(|x| x.as_f64())
            .collect();
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        let pick = if highest {
            v.iter().copied().fold(f64::NEG_INFINITY, f64::max)
        } else {
            v.iter().copied().fold(f64::INFINITY, f64::min)
        };
        (!v.is_empty() && mean > 0.0).then(|| pick / mean)
    })
}

fn seeds_text(seeds: &[u64]) -> String {
    let s: Vec<String> = seeds.iter().map(u64::to_string).collect();
    format!("seeds {}", s.join(", "))
}

/// Every figure, and those not reproduced.
pub(super) fn all(quick: bool) -> anyhow::Result<(Vec<Figure>, Vec<Missing>)> {
    let seeds: &[u64] = if quick { &[1] } else { &[1, 2, 3] };
    let st = seeds_text(seeds);
    let mut figs = Vec::new();

    // Fig. 4: OOD against a persistent delay difference.
    let keep4: fn(&str) -> bool = if quick {
        |l| {
            l.starts_with("scheduler=on")
                && [" extra=0us", " extra=15us", " extra=25us"]
                    .iter()
                    .any(|e| l.ends_with(e))
        }
    } else {
        |l| l.starts_with("scheduler=on")
    };
    let mut v4 = transports(&["rondo"]);
    v4.push(Variant::new(
        "rondo scheduler=off",
        &["transport.scheduler=false"],
    ));
    v4.extend(transports(&["mprdma", "falcon", "uet"]));
    figs.push(Figure {
        id: "4",
        title: "OOD under a persistent delay difference",
        paper: "A persistent path-delay difference of 15 us causes a NIC-level OOD of 124-153 packets under MP-RDMA, Falcon and even the ideal controller; OOD grows linearly with the difference, as eq. (3) predicts (§3.3).",
        setup: format!("Built-in `fig4`: the Fig. 2 topology, 4 senders to 4 receivers, one spine path's extra one-way delay swept; Rondo with its scheduler off stands for a controller without scheduling (we have no ideal controller); {st}."),
        runs: grid(&Source::Builtin("fig4", keep4), &v4, None, seeds)?,
        columns: vec![
            Column::key("goodput Gb/s", "goodput_gbps", 1),
            Column::key("OOD p99", "ood.nic_p99", 0),
            Column::key("OOD max", "ood.nic_max", 0),
        ],
        compare: |pts| {
            let at15: Vec<String> = pts
                .iter()
                .filter(|p| p.group.ends_with("extra=15us"))
                .filter_map(|p| Some(format!("{} {:.0}", p.series, p.get("ood.nic_max")?)))
                .collect();
            vec![format!("NIC-level max OOD at 15 us: {} (paper: 124-153 for MP-RDMA, Falcon and the ideal controller).", at15.join(", "))]
        },
        plot: Some(Plot {
            title: "NIC-level max OOD (packets)",
            x_label: "extra one-way delay of spine path 3 (us)",
            value: |p| p.get("ood.nic_max"),
        }),
    });
    // The fig4 built-in's runs carry their delay as the case; give them x.
    if let Some(f) = figs.last_mut() {
        for r in &mut f.runs {
            r.x = r
                .group
                .rsplit("extra=")
                .next()
                .and_then(|s| s.trim_end_matches("us").parse().ok());
            r.group = r.group.replace("scheduler=on ", "");
        }
    }

    // Fig. 9: the testbed.
    figs.push(Figure {
        id: "9",
        title: "Testbed: four paths of 25/20/15/10 Gb/s",
        paper: "Rondo reaches 68.18 Gb/s (homogeneous delays) and 68.14 Gb/s (10 us extra on path 0) of 70; RRPS is held to 4x the slowest path; Rondo reduces average OOD by 82-92% against RRPS, 64-88% against Falcon and 72-81% against MP-RDMA (§6.1).",
        setup: format!("Built-in `fig9` (homo and hetero) on the simulator, not the testbed; {st}."),
        runs: grid(&Source::Builtin("fig9", all_runs), &transports(&["rondo", "rrps", "mprdma", "falcon", "uet"]), None, seeds)?,
        columns: vec![
            Column::key("goodput Gb/s", "goodput_gbps", 2),
            Column::key("OOD avg", "ood.nic_avg", 2),
            Column::key("OOD p99", "ood.nic_p99", 0),
            Column::key("OOD max", "ood.nic_max", 0),
        ],
        compare: |pts| {
            let mut l = Vec::new();
            for (g, paper) in [("fig9-homo", 68.18), ("fig9-hetero", 68.14)] {
                if let Some(v) = at(pts, g, "rondo").and_then(|p| p.get("goodput_gbps")) {
                    l.push(format!("{g}: Rondo {v:.2} Gb/s (paper {paper})."));
                }
            }
            let cases = groups(pts);
            for (o, paper) in [("rrps", "82-92%"), ("falcon", "64-88%"), ("mprdma", "72-81%"), ("uet", "not reported")] {
                let r = reductions(pts, o, "ood.nic_avg", &cases);
                if !r.is_empty() {
                    l.push(format!("Average OOD reduction against {o}: {} (paper {paper}).", range(&r, 0, "%")));
                }
            }
            l
        },
        plot: None,
    });

    // Fig. 10: typical traffic patterns.
    figs.push(Figure {
        id: "10",
        title: "Incast, permutation and all-to-all on the 320-host Clos, 1:1 and 4:1",
        paper: "Rondo's JCT speedup against ECMP is 1.12-3.26x, the lowest JCT in 4 of 6 cases (Falcon and UET comparable). In all-to-all and permutation Rondo cuts the maximum NIC-level OOD by 28.6-91.5% against MP-RDMA, 77.3-92.7% against Falcon, 76.3-97.0% against UET and 43.8-97.5% against AR; in incast Rondo has no out-of-order arrival while the others reach 338-1348 packets (§6.2.2).",
        setup: format!("Built-in `fig10`: 32-to-1 incast of 500 KB, a permutation of 1 MB, all-to-all of 100 KB to 8 random receivers per host; MTU 1500, 1.2 MB shared reorder buffer per NIC; {st}."),
        runs: grid(&Source::Builtin("fig10", all_runs), &transports(FABRIC), None, seeds)?,
        columns: jct_columns(),
        compare: |pts| {
            let cases = groups(pts);
            let sp: Vec<f64> = rondo_speedups(pts).into_iter().map(|(_, s)| s).collect();
            let best = cases
                .iter()
                .filter(|g| {
                    let jct = |s: &str| at(pts, g, s).and_then(|p| p.get("jct_us"));
                    jct("rondo").is_some_and(|r| others(pts, "rondo").iter().all(|o| jct(o).is_none_or(|x| r <= x)))
                })
                .count();
            let mut l = vec![
                format!("Rondo's speedup against ECMP: {} (paper 1.12-3.26x).", range(&sp, 2, "x")),
                format!("Rondo has the lowest JCT in {best} of {} cases (paper: 4 of 6).", cases.len()),
            ];
            let fabric: Vec<&str> = cases.iter().copied().filter(|g| !g.starts_with("incast")).collect();
            for (o, paper) in [("mprdma", "28.6-91.5%"), ("falcon", "77.3-92.7%"), ("uet", "76.3-97.0%"), ("ar", "43.8-97.5%")] {
                let r = reductions(pts, o, "ood.nic_max", &fabric);
                if !r.is_empty() {
                    l.push(format!("Max OOD reduction against {o} (permutation, all-to-all): {} (paper {paper}).", range(&r, 1, "%")));
                }
            }
            let incast: Vec<&str> = cases.iter().copied().filter(|g| g.starts_with("incast")).collect();
            let rondo: Vec<f64> = incast.iter().filter_map(|g| at(pts, g, "rondo")?.get("ood.nic_max")).collect();
            let rest: Vec<f64> = incast
                .iter()
                .flat_map(|g| ["mprdma", "falcon", "uet", "ar"].iter().filter_map(move |o| at(pts, g, o)?.get("ood.nic_max")))
                .collect();
            l.push(format!("Incast max OOD: Rondo {} (paper 0), the other multipath schemes {} (paper 338-1348).", range(&rondo, 0, ""), range(&rest, 0, "")));
            l.extend(host_bound_reasons(pts));
            l
        },
        plot: None,
    });

    // Fig. 11: a MoE training step's collectives.
    figs.push(Figure {
        id: "11",
        title: "Communication time of a MoE training step",
        paper: "Over an AstraSim trace of a 7B MoE Transformer's training (all-reduce, all-to-all, all-gather, reduce-scatter, point-to-point), Rondo speeds communication up 1.48x against ECMP, matching Falcon and ahead of the other schemes (§6.2.3).",
        setup: format!("Built-in `fig11` (`sim/scenarios/fig11-moe-step.toml`): the trace is not public; our stand-in is one layer's step of a 7B MoE (hidden 4096, top-2, bf16) scaled by 1/16 on 16 ranks spread over the 320-host Clos (1:1): an 8 MiB all-gather, four 4 MiB all-to-alls, an 8 MiB reduce-scatter and a 4 MiB all-reduce, ring algorithms, each phase after the last on every rank, each ring step and all-to-all pair a flow of its own; JCT is the communication time; `rondo W0=16` is Rondo started at 16 packets per path instead of one (`transport.initial_window=16`), to show what its start costs; {st}."),
        runs: grid(&Source::Builtin("fig11", all_runs), &with_rondo_w0(FABRIC), None, seeds)?,
        columns: jct_columns(),
        compare: |pts| {
            let sp = |s: &str| speedup(pts.iter().find(|p| p.series == s)?, pts);
            let mut l = Vec::new();
            if let Some(r) = sp("rondo") {
                l.push(format!("Rondo's communication-time speedup against ECMP: {r:.2}x (paper 1.48x){}.", if r >= 1.0 { "" } else { "; slower than ECMP, unlike the paper" }));
            }
            let each: Vec<String> = other_transports(pts, "rondo").iter().filter(|o| **o != "ecmp").filter_map(|o| Some(format!("{o} {:.2}x", sp(o)?))).collect();
            if !each.is_empty() {
                l.push(format!("The others against ECMP: {} (paper: Falcon as Rondo, the rest below).", each.join(", ")));
            }
            l.extend(moe_reason(pts));
            l
        },
        plot: None,
    });

    // Fig. 12: realistic workloads.
    let loads: &[f64] = &[0.5, 0.8];
    let mut runs12 = grid(
        &Source::File("websearch-load.toml", WEBSEARCH, "websearch"),
        &with_rondo_w0(FABRIC),
        Some(("workload.load", " load", loads)),
        seeds,
    )?;
    runs12.extend(grid(
        &Source::File("hadoop-load.toml", HADOOP, "hadoop"),
        &with_rondo_w0(FABRIC),
        Some(("workload.load", " load", loads)),
        seeds,
    )?);
    figs.push(Figure {
        id: "12",
        title: "Tail FCT under realistic workloads",
        paper: "Rondo significantly reduces the tail FCT slowdown under Web Search and Cache Follower at different loads while keeping OOD low (§6.2.3).",
        setup: format!("`sim/scenarios/websearch-load.toml` and `hadoop-load.toml` (k=8 fat tree, Poisson arrivals for 1 ms) at loads 0.5 and 0.8. The paper's Cache Follower trace is not public: Facebook Hadoop stands in for it; `rondo W0=16` as in Fig. 11; {st}."),
        runs: runs12,
        columns: vec![
            Column::key("FCT slowdown p99", "fct_slowdown_p99", 2),
            Column::key("FCT p99 us", "fct_us.p99", 0),
            Column::key("OOD p99", "ood.nic_p99", 0),
            Column::key("OOD max", "ood.nic_max", 0),
        ],
        compare: |pts| {
            let mut l = Vec::new();
            let mut reasons = Vec::new();
            for g in groups(pts) {
                let Some(r) = at(pts, g, "rondo").and_then(|p| p.get("fct_slowdown_p99")) else {
                    continue;
                };
                let Some(best) = other_transports(pts, "rondo")
                    .iter()
                    .filter_map(|o| Some((at(pts, g, o)?.get("fct_slowdown_p99")?, *o)))
                    .min_by(|a, b| a.0.total_cmp(&b.0))
                else {
                    continue;
                };
                l.push(format!("{g}: Rondo's p99 slowdown {r:.2}, the best other {} {:.2} ({}).", best.1, best.0, if r <= best.0 { "Rondo lowest, as the paper" } else { "Rondo not lowest, unlike the paper" }));
                if r > best.0 {
                    reasons.extend(tail_reason(pts, g, best.1));
                }
            }
            l.extend(reasons);
            l
        },
        plot: None,
    });

    // Fig. 13: heterogeneity.
    figs.push(Figure {
        id: "13",
        title: "Heterogeneous fabrics",
        paper: "With 10% of the links cut to a quarter of their bandwidth 50 us after the start, 20 us added to random links, or single-path background flows, Rondo has the best speedup and the lowest OOD in every case (§6.2.4).",
        setup: format!("Built-in `fig13`: the Fig. 10 permutation (1:1) with 10% of each kind of fabric link at 100 Gb/s from 50 us, 10% of each kind with 20 us more delay, or 16 single-path background flows (our placement; the paper gives none); {st}."),
        runs: grid(&Source::Builtin("fig13", all_runs), &transports(FABRIC), None, seeds)?,
        columns: jct_columns(),
        compare: |pts| {
            groups(pts)
                .iter()
                .filter_map(|g| {
                    let r = at(pts, g, "rondo")?;
                    let (rs, ro) = (speedup(r, pts)?, r.get("ood.nic_p99")?);
                    let best_sp = others(pts, "rondo").iter().filter_map(|o| speedup(at(pts, g, o)?, pts)).fold(f64::NEG_INFINITY, f64::max);
                    let best_ood = others(pts, "rondo").iter().filter(|o| **o != "ecmp").filter_map(|o| at(pts, g, o)?.get("ood.nic_p99")).fold(f64::INFINITY, f64::min);
                    Some(format!("{g}: Rondo speedup {rs:.2}x (best other {best_sp:.2}x), OOD p99 {ro:.0} (lowest other multipath {best_ood:.0}); paper: Rondo best in both."))
                })
                .collect()
        },
        plot: None,
    });

    // Fig. 14: goodput against the reorder-buffer size.
    let buffers: &[f64] = if quick {
        &[32.0, 128.0, 1200.0]
    } else {
        &[32.0, 64.0, 128.0, 256.0, 512.0, 1200.0]
    };
    figs.push(Figure {
        id: "14",
        title: "Goodput against the shared reorder-buffer size",
        paper: "Under a 4-to-1 incast with background flows, Rondo sustains 94.8 Gb/s even with a 32 KB buffer; at about one BDP it has 1.15-3.60x the goodput of the other multipath transports, at 32 KB 1.38-8.51x (§6.2.5).",
        setup: format!("Built-in `fig14`: 4-to-1 incast of long flows with 16 single-path background flows on the 4:1 Clos (our choice of background: the paper leaves it open); goodput is the incast's (its four flows), measured from 1 ms, and at 128 and 32 KB also from 0 us (the rows `, from 0 us`); about one BDP taken as 128 KB; {st}."),
        runs: {
            let mut runs = grid(&Source::Builtin("fig14", all_runs), &transports(MULTIPATH), Some(("transport.reorder_buffer_kb", " KB", buffers)), seeds)?;
            // The same at 128 and 32 KB measured from 0 us: off the plot (no x).
            let zero: Vec<Variant> = MULTIPATH.iter().map(|t| Variant::new(t, &[&format!("transport.kind={t:?}"), "warmup_us=0"])).collect();
            for mut r in grid(&Source::Builtin("fig14", all_runs), &zero, Some(("transport.reorder_buffer_kb", " KB", &[128.0, 32.0])), seeds)? {
                r.group = format!("{}, {FROM_ZERO}", r.group);
                r.x = None;
                runs.push(r);
            }
            runs
        },
        columns: vec![
            Column::with("incast goodput Gb/s", 1, |p, _| first_workload_goodput(p)),
            Column::key("reorder-buffer drops", "drops.reorder_buffer", 0),
            Column::key("OOD p99", "ood.nic_p99", 0),
            Column::key("OOD max", "ood.nic_max", 0),
        ],
        compare: |pts| {
            let mut l = Vec::new();
            let g = |kb: f64, s: &str| pts.iter().find(|p| p.x == Some(kb) && p.series == s).and_then(first_workload_goodput);
            if let Some(r) = g(32.0, "rondo") {
                l.push(format!("Rondo at 32 KB: {r:.1} Gb/s (paper 94.8)."));
            }
            for (kb, paper) in [(128.0, "1.15-3.60x"), (32.0, "1.38-8.51x")] {
                let ratios: Vec<f64> = others(pts, "rondo").iter().filter_map(|o| Some(g(kb, "rondo")? / g(kb, o)?)).collect();
                let each: Vec<String> = others(pts, "rondo").iter().filter_map(|o| Some(format!("{o} {:.2}x", g(kb, "rondo")? / g(kb, o)?))).collect();
                l.push(format!("Rondo's goodput over the others at {kb:.0} KB: {} ({}; paper {paper}).", range(&ratios, 2, "x"), each.join(", ")));
            }
            l.extend(buffer_reason(pts));
            l
        },
        plot: Some(Plot {
            title: "incast goodput (Gb/s)",
            x_label: "shared reorder buffer (KB)",
            value: first_workload_goodput,
        }),
    });

    // Fig. 15: loss recovery per transport.
    figs.push(Figure {
        id: "15",
        title: "Loss recovery under 0.1% random loss",
        paper: "Rondo with early recovery, ECMP, and Falcon with per-path RACK-TLP incur few spurious retransmissions; the other schemes have substantial spurious ratios; Rondo's retransmission delay is lower, its bounded OOD allowing prompt early retransmission (§6.2.5).",
        setup: format!("Built-in `fig15`: the Fig. 10 permutation (1:1) with `switch.loss = 0.001`; spurious = retransmissions of packets that were not lost (the simulator knows), over data packets sent; {st}."),
        runs: grid(&Source::Builtin("fig15", all_runs), &transports(&["rondo", "ecmp", "mprdma", "falcon", "uet", "ar", "rc-sr"]), None, seeds)?,
        columns: vec![
            Column::with("spurious %", 3, |p, _| p.get("retx.spurious_ratio").map(|r| 100.0 * r)),
            Column::key("mean retx delay us", "retx.mean_delay_us", 1),
            Column::key("retx packets", "retx.packets", 0),
            Column::key("JCT us", "jct_us", 0),
        ],
        compare: |pts| {
            pts.iter()
                .filter_map(|p| Some(format!("{}: {:.3}% spurious, {:.1} us to retransmit.", p.series, 100.0 * p.get("retx.spurious_ratio")?, p.get("retx.mean_delay_us")?)))
                .collect()
        },
        plot: None,
    });

    // Fig. 16: Rondo's recovery schemes.
    figs.push(Figure {
        id: "16",
        title: "Rondo's loss-recovery schemes under 0.1% loss",
        paper: "Early recovery with a four-packet threshold recovers losses in 19.2 us with 0.05% spurious retransmissions; flow-level RACK-TLP recovers in 18.2 us with 1.2% (§6.2.5).",
        setup: format!("Built-in `fig15` under Rondo: the paper's ER (PSN gap alone) at thresholds 4 and 8, today's default (gap and an RTT), RACK-TLP per flow and per path; {st}."),
        runs: grid(
            &Source::Builtin("fig15", all_runs),
            &[
                Variant::new("ER gap 4", &["transport.early_recovery=\"gap\"", "transport.early_recovery_threshold=4"]),
                Variant::new("ER gap 8", &["transport.early_recovery=\"gap\"", "transport.early_recovery_threshold=8"]),
                Variant::new("gap and RTT (default)", &[]),
                Variant::new("RACK-TLP per flow", &["transport.loss_recovery=\"rack-flow\""]),
                Variant::new("RACK-TLP per path", &["transport.loss_recovery=\"rack-path\""]),
            ],
            None,
            seeds,
        )?,
        columns: vec![
            Column::with("spurious %", 3, |p, _| p.get("retx.spurious_ratio").map(|r| 100.0 * r)),
            Column::key("mean retx delay us", "retx.mean_delay_us", 1),
            Column::key("JCT us", "jct_us", 0),
        ],
        compare: |pts| {
            let one = |s: &str, paper: &str| {
                let p = pts.iter().find(|p| p.series == s)?;
                Some(format!("{s}: {:.1} us, {:.3}% spurious (paper {paper}).", p.get("retx.mean_delay_us")?, 100.0 * p.get("retx.spurious_ratio")?))
            };
            [one("ER gap 4", "19.2 us, 0.05%"), one("RACK-TLP per flow", "18.2 us, 1.2%")].into_iter().flatten().collect()
        },
        plot: None,
    });

    // Fig. 17: fairness under incast.
    figs.push(Figure {
        id: "17",
        title: "Per-flow throughput under 32-to-1 incast",
        paper: "Rondo gives similar per-flow throughput, Jain's index 0.999 under 32-to-1 incast; under ECMP, flow collisions create other bottlenecks (§6.3).",
        setup: format!("Built-in `fig17` (`sim/scenarios/incast32.toml`): 32 long flows into one host of the 320-host Clos; {st}."),
        runs: grid(&Source::Builtin("fig17", all_runs), &transports(FABRIC), None, seeds)?,
        columns: vec![
            Column::key("Jain", "fairness_jain", 3),
            Column::with("min / mean", 2, |p, _| spread(p, false)),
            Column::with("max / mean", 2, |p, _| spread(p, true)),
            Column::key("utilization", "utilization", 3),
        ],
        compare: |pts| {
            pts.iter()
                .filter(|p| p.series == "rondo")
                .filter_map(|p| Some(format!("Rondo's Jain index {:.3} (paper 0.999).", p.get("fairness_jain")?)))
                .collect()
        },
        plot: None,
    });

    // Figs. 18-20: Rondo's own dynamics.
    figs.push(Figure {
        id: "19",
        title: "Inter-path queue difference",
        paper: "Rondo keeps the inter-path queue difference below 30 KB; under the other schemes it reaches about 200 KB (§6.3, the setup of §3.2).",
        setup: format!("Built-in `fig19`: 16 senders to 4 receivers on the Fig. 2 topology; {st}."),
        runs: grid(&Source::Builtin("fig19", all_runs), &transports(&["rondo", "mprdma", "falcon", "uet", "swift-rps"]), None, seeds)?,
        columns: vec![
            Column::key("max inter-path diff KB", "queue.max_interpath_diff_kb", 1),
            Column::key("max port queue KB", "queue.max_port_kb", 1),
            Column::key("utilization", "utilization", 3),
            Column::key("OOD p99", "ood.nic_p99", 0),
        ],
        compare: |pts| {
            pts.iter()
                .filter_map(|p| Some(format!("{}: {:.1} KB (paper: Rondo < 30 KB, others about 200 KB).", p.series, p.get("queue.max_interpath_diff_kb")?)))
                .collect()
        },
        plot: None,
    });
    figs.push(Figure {
        id: "20",
        title: "Packet scheduling under a growing path delay",
        paper: "Without the scheduler Rondo keeps a stable queue but cannot handle the persistent delay difference and OOD grows; with it, OOD stays low after the delay changes (§6.3).",
        setup: format!("Built-in `fig20`, scheduler on and off; {st}."),
        runs: grid(&Source::Builtin("fig20", all_runs), &transports(&["rondo"]), None, seeds)?,
        columns: vec![
            Column::key("utilization", "utilization", 3),
            Column::key("OOD avg", "ood.nic_avg", 2),
            Column::key("OOD p99", "ood.nic_p99", 0),
            Column::key("OOD max", "ood.nic_max", 0),
        ],
        compare: |pts| {
            let g = |s: &str| pts.iter().find(|p| p.group.contains(s)).and_then(|p| p.get("ood.nic_p99"));
            match (g("scheduler=on"), g("scheduler=off")) {
                (Some(on), Some(off)) => vec![format!("OOD p99 {on:.0} with the scheduler, {off:.0} without ({}).", if on < off { "lower with it, as the paper" } else { "not lower, unlike the paper" })],
                _ => Vec::new(),
            }
        },
        plot: None,
    });

    // Fig. 21: ablation.
    let perm_os1: fn(&str) -> bool = |l| l == "permutation OS1";
    figs.push(Figure {
        id: "21",
        title: "Ablation under permutation traffic",
        paper: "Replacing per-path Swift with ARCC cuts the average OOD by 87.3% and the p99 by 53.3%; deficit-based path selection cuts it further against random spraying; capacity probing lowers the maximum and p99 OOD (§6.3).",
        setup: format!("The Fig. 10 permutation (1:1), adding one component at a time; the packet scheduler on throughout; every variant on Rondo's steered fabric (`switch.routing = \"steer\"`, the Swift one included), so that only the end host changes; {st}."),
        runs: grid(
            &Source::Builtin("fig10", perm_os1),
            &[
                Variant::new("Swift + RPS", &["transport.kind=\"swift-rps\"", "switch.routing=\"steer\""]),
                Variant::new("ARCC + RPS", &["transport.path_selection=\"random\"", "transport.probing=false"]),
                Variant::new("ARCC + deficit", &["transport.probing=false"]),
                Variant::new("+ probing (Rondo)", &[]),
            ],
            None,
            seeds,
        )?,
        columns: vec![
            Column::key("OOD avg", "ood.nic_avg", 2),
            Column::key("OOD p99", "ood.nic_p99", 0),
            Column::key("OOD max", "ood.nic_max", 0),
            Column::key("JCT us", "jct_us", 0),
        ],
        compare: |pts| {
            let g = |s: &str, k: &str| pts.iter().find(|p| p.series == s).and_then(|p| p.get(k));
            let cut = |k: &str| Some(100.0 * (1.0 - g("ARCC + RPS", k)? / g("Swift + RPS", k)?));
            let mut l = Vec::new();
            if let (Some(a), Some(p)) = (cut("ood.nic_avg"), cut("ood.nic_p99")) {
                l.push(format!("ARCC against Swift (both RPS): average OOD {a:.1}% lower, p99 {p:.1}% lower (paper 87.3% and 53.3%)."));
            }
            if let (Some(d), Some(r)) = (g("ARCC + deficit", "ood.nic_avg"), g("ARCC + RPS", "ood.nic_avg")) {
                l.push(format!("Deficit selection against RPS: average OOD {d:.2} against {r:.2} (paper: lower)."));
            }
            if let (Some(p), Some(n)) = (g("+ probing (Rondo)", "ood.nic_max"), g("ARCC + deficit", "ood.nic_max")) {
                l.push(format!("Probing: max OOD {p:.0} against {n:.0} without (paper: lower with probing)."));
            }
            l
        },
        plot: None,
    });

    // Fig. 22: scalability.
    let ks: &[f64] = if quick {
        &[8.0, 10.0]
    } else {
        &[10.0, 12.0, 14.0, 16.0]
    };
    figs.push(Figure {
        id: "22",
        title: "Scalability: all-to-all on k-ary fat trees",
        paper: "Rondo's speedup against ECMP for all-to-all rises from 3.31x to 3.81x as k grows from 10 to 16, its p99 OOD staying at 0 (§6.3).",
        setup: format!("`sim/scenarios/fig22-fattree-alltoall.toml`: every host sends 100 KB to 8 receivers drawn at random (the paper does not give its all-to-all's size), k swept; {st}."),
        runs: grid(&Source::File("fig22-fattree-alltoall.toml", FIG22, "k"), &transports(&["rondo", "ecmp"]), Some(("topology.k", "", ks)), seeds)?
            .into_iter()
            .map(|mut r| {
                r.group = format!("k={}", r.x.unwrap_or(0.0));
                r
            })
            .collect(),
        columns: jct_columns(),
        compare: |pts| {
            let sp: Vec<String> = rondo_speedups(pts).iter().map(|(g, s)| format!("{g} {s:.2}x")).collect();
            let p99: Vec<f64> = pts.iter().filter(|p| p.series == "rondo").filter_map(|p| p.get("ood.nic_p99")).collect();
            let mut l = vec![format!("Rondo's speedup against ECMP: {} (paper 3.31-3.81x); its OOD p99 {} (paper 0).", sp.join(", "), range(&p99, 0, ""))];
            l.extend(host_bound_reasons(pts));
            l
        },
        plot: Some(Plot {
            title: "JCT (us)",
            x_label: "fat-tree k",
            value: |p| p.get("jct_us"),
        }),
    });

    // Fig. 23: parameter sweep.
    let (tus, taus): (&[f64], &[f64]) = if quick {
        (&[0.25, 1.0], &[0.01, 0.5])
    } else {
        (&[0.25, 0.5, 1.0], &[0.01, 0.04, 0.1, 0.5])
    };
    let mut v23 = Vec::new();
    for tu in tus {
        v23.push(Variant::new(
            &format!("Tu={tu}"),
            &[&format!("transport.update_interval_rtts={tu}")],
        ));
    }
    figs.push(Figure {
        id: "23",
        title: "Sensitivity to Tu and tau_q",
        paper: "Over Tu of 0.25-1 base RTT and tau_q of 0.01-0.5 max base RTT, Rondo keeps 0.92-1.00 of the best throughput and a maximum OOD of 18-36 packets under permutation (§6.3).",
        setup: format!("The Fig. 10 permutation (1:1); normalized throughput is goodput over the best goodput of the grid; {st}."),
        runs: grid(&Source::Builtin("fig10", perm_os1), &v23, Some(("transport.target_queue_rtts", "", taus)), seeds)?
            .into_iter()
            .map(|mut r| {
                r.group = format!("tau_q={}", r.x.unwrap_or(0.0));
                r
            })
            .collect(),
        columns: vec![
            Column::with("normalized throughput", 3, |p, all| {
                let best = all.iter().filter_map(|q| q.get("goodput_gbps")).fold(0.0, f64::max);
                Some(p.get("goodput_gbps")? / best)
            }),
            Column::key("OOD max", "ood.nic_max", 0),
            Column::key("JCT us", "jct_us", 0),
        ],
        compare: |pts| {
            let best = pts.iter().filter_map(|q| q.get("goodput_gbps")).fold(0.0, f64::max);
            let norm: Vec<f64> = pts.iter().filter_map(|p| Some(p.get("goodput_gbps")? / best)).collect();
            let max: Vec<f64> = pts.iter().filter_map(|p| p.get("ood.nic_max")).collect();
            let mut l = vec![format!("Normalized throughput {} (paper 0.92-1.00), max OOD {} (paper 18-36).", range(&norm, 2, ""), range(&max, 0, ""))];
            l.extend(sensitivity_reason(pts));
            l
        },
        plot: Some(Plot {
            title: "NIC-level max OOD (packets)",
            x_label: "tau_q (x max base RTT)",
            value: |p| p.get("ood.nic_max"),
        }),
    });

    // Fig. 24: ConnectX-7 selective repeat under reordering.
    let mut runs24 = grid(
        &Source::Builtin("fig24", all_runs),
        &[Variant::new("rc-sr", &[])],
        None,
        seeds,
    )?;
    for r in &mut runs24 {
        // The built-in's labels are `write ood=300`: the operation is the line.
        let (op, ood) = r.group.split_once(" ood=").unwrap_or(("", ""));
        r.series = op.to_uppercase();
        r.x = ood.parse().ok();
        r.group = format!("ood={ood}");
    }
    figs.push(Figure {
        id: "24",
        title: "ConnectX-7 selective repeat: READ and WRITE throughput against OOD",
        paper: "On ConnectX-7 over 40 Gb/s and a 10 us RTT, with selective repeat and the NAKs dropped at the switch, READ throughput drops sharply once the OOD exceeds about 200 packets (16 outstanding READs per QP) and WRITE near 500 (the 512-PSN window) (App. A).",
        setup: format!("Built-in `fig24` (`sim/scenarios/fig24-rc-reorder.toml`): `rc-sr` between two hosts at 40 Gb/s, 10 us base RTT, every packet sprayed over two 40 Gb/s paths, path 1 delayed in the data's direction by the imposed OOD in packet times (ACKs and READ requests are not delayed), NAKs dropped at the switches, 64 KiB messages with 128 posted (perftest's defaults), 4096-byte payloads; the cliff is the last OOD that keeps 97% of the throughput at OOD 0; {st}."),
        runs: runs24,
        columns: vec![
            Column::key("goodput Gb/s", "goodput_gbps", 2),
            Column::key("NIC OOD p99", "ood.nic_p99", 0),
            Column::key("retx packets", "retx.packets", 0),
        ],
        compare: |pts| {
            [("READ", "about 200"), ("WRITE", "near 500")]
                .iter()
                .map(|(op, paper)| {
                    let mut curve: Vec<(f64, f64)> = pts.iter().filter(|p| p.series == *op).filter_map(|p| Some((p.x?, p.get("goodput_gbps")?))).collect();
                    curve.sort_by(|a, b| a.0.total_cmp(&b.0));
                    match rondo_sim::scenario::fig24_cliff(&curve) {
                        Some(c) => format!("{op}: throughput holds up to an OOD of {c:.0} packets and drops beyond (paper: drops beyond {paper})."),
                        None => format!("{op}: no cliff up to an OOD of 800 packets (paper {paper})."),
                    }
                })
                .collect()
        },
        plot: Some(Plot {
            title: "goodput (Gb/s)",
            x_label: "imposed OOD (packets)",
            value: |p| p.get("goodput_gbps"),
        }),
    });

    // Fig. 25: flows with different base RTTs.
    figs.push(Figure {
        id: "25",
        title: "Fairness among flows with different base RTTs",
        paper: "Three flows into one receiver from the same rack, the same pod and another pod share it fairly, as Proposition 1 says (App. E).",
        setup: format!("Built-in `clos3-rtt-fairness`: long flows from hosts 1, 16 and 64 into host 0 of the 320-host Clos, all at once (the paper steps them in and out); {st}."),
        runs: grid(&Source::Builtin("clos3-rtt-fairness", all_runs), &transports(&["rondo", "falcon", "uet", "swift-rps"]), None, seeds)?,
        columns: vec![
            Column::key("Jain", "fairness_jain", 3),
            Column::with("same ToR Gb/s", 1, |p, _| p.mean(|r| r.get("long_flow_goodput_gbps")?.get(0)?.as_f64())),
            Column::with("same pod Gb/s", 1, |p, _| p.mean(|r| r.get("long_flow_goodput_gbps")?.get(1)?.as_f64())),
            Column::with("other pod Gb/s", 1, |p, _| p.mean(|r| r.get("long_flow_goodput_gbps")?.get(2)?.as_f64())),
            Column::key("utilization", "utilization", 3),
        ],
        compare: |pts| {
            pts.iter()
                .filter(|p| p.series == "rondo")
                .filter_map(|p| {
                    let j = p.get("fairness_jain")?;
                    Some(format!("Rondo's Jain index {j:.3} ({}; paper: fair).", if j >= 0.95 { "fair, as the paper" } else { "unfair, unlike the paper: issue 12 row 1" }))
                })
                .collect()
        },
        plot: None,
    });

    // Fig. 27: a bandwidth drop and recovery.
    figs.push(Figure {
        id: "27",
        title: "A bottleneck's rate drops to a quarter and recovers",
        paper: "With 4 long flows, a queue builds when the bandwidth drops, ARCC estimates the new capacity and drains it without underusing the link; when the bandwidth recovers, capacity probing ramps up at once without overshoot (App. F).",
        setup: format!("`sim/scenarios/fig27-rate-change.toml`: four long flows from another pod into host 0 of the 320-host Clos, whose downlink goes from 100 to 25 Gb/s at 500 us and back at 1000 us; utilization against the time-weighted ideal; {st}."),
        runs: grid(&Source::File("fig27-rate-change.toml", FIG27, "drop and recovery"), &transports(FABRIC), None, seeds)?,
        columns: vec![
            Column::key("utilization", "utilization", 3),
            Column::key("max queue KB", "queue.max_port_kb", 0),
            Column::key("Jain", "fairness_jain", 3),
            Column::key("OOD max", "ood.nic_max", 0),
        ],
        compare: |pts| {
            pts.iter()
                .filter(|p| p.series == "rondo")
                .filter_map(|p| Some(format!("Rondo: utilization {:.3} over the drop and the recovery, largest queue {:.0} KB (paper: no underuse, no overshoot).", p.get("utilization")?, p.get("queue.max_port_kb")?)))
                .collect()
        },
        plot: None,
    });

    let missing = vec![
        Missing { id: "18", title: "convergence as flows join and leave", why: "a time series: run `rondo sim --builtin fig18 --trace` (Rondo only; its figure test is sim/tests/figures.rs)" },
        Missing { id: "26", title: "comparison with EQDS", why: "EQDS is not implemented" },
    ];
    Ok((figs, missing))
}
