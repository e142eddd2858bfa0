//! Text, progress and chart output of `rondo sim`.

use crate::chart::{Bar, BarChart, Group, Line, LineChart, LinePanel};
use crate::table::Table;
use rondo_sim::scenario::SweepPoint;
use rondo_sim::scenario::{builtins, Report, Scenario};
use std::fmt::Write as _;

/// The `--list` text: every built-in with its number of runs and one line.
pub fn list_text() -> String {
    let all = builtins();
    let width = all.iter().map(|b| b.name.len()).max().unwrap_or(0);
    let mut out = String::new();
    for b in &all {
        let runs = match b.len() {
            1 => String::new(),
            n => format!(" ({n} runs)"),
        };
        let _ = writeln!(out, "{:<width$}  {}{runs}", b.name, b.about);
    }
    out.push_str("\nrun one with: rondo sim --builtin NAME\n");
    out
}

/// Rewrites the progress line on standard error.
pub fn progress_line(
    run: usize,
    runs: usize,
    name: &str,
    p: &rondo_sim::Progress,
    duration_us: f64,
) {
    let now_us = p.now.as_ps() as f64 / 1e6;
    // A finite workload usually ends before `duration_us`: show its flows' progress.
    let share = if p.flows_finite > 0 {
        p.flows_completed as f64 / p.flows_finite as f64
    } else {
        now_us / duration_us
    }
    .clamp(0.0, 1.0);
    let filled = (share * 30.0) as usize;
    let flows = if p.flows_finite > 0 {
        format!(", flows {}/{}", p.flows_completed, p.flows_finite)
    } else {
        String::new()
    };
    eprint!(
        "\r[{run}/{runs}] {name} [{}{}] {now_us:.0}/{duration_us:.0} us, {} events{flows}  ",
        "#".repeat(filled),
        " ".repeat(30 - filled),
        p.events
    );
}

fn opt(x: Option<f64>, digits: usize) -> String {
    x.map_or_else(|| "-".to_owned(), |v| format!("{v:.digits$}"))
}

/// The table of every run, with a heading that says what was run.
pub fn table_text(
    title: &str,
    about: Option<&str>,
    scenarios: &[&Scenario],
    reports: &[&Report],
) -> String {
    let mut out = String::new();
    if let Some(about) = about {
        let _ = writeln!(out, "{title}: {about}");
    }
    if let Some(s) = scenarios.first() {
        let mut transports: Vec<&str> = Vec::new();
        for t in scenarios.iter().map(|s| s.transport.kind.name()) {
            if !transports.contains(&t) {
                transports.push(t);
            }
        }
        let _ = writeln!(
            out,
            "topology {} ({} hosts), transport {}, mtu {} B, seed {}, {} us simulated \
             (measured from {} us)",
            s.topology.kind(),
            s.topology.hosts(),
            transports.join(", "),
            s.mtu,
            s.seed,
            s.duration_us,
            s.warmup_us
        );
        let _ = writeln!(out, "OOD/RBO: NIC level, in packets\n");
    }
    // Completion columns only when some run has finite flows.
    let finite = reports.iter().any(|r| r.flows_total > 0);
    let rows: Vec<Vec<(&str, String)>> = reports
        .iter()
        .map(|r| {
            let mut row = vec![
                ("run", r.scenario.clone()),
                ("goodput", format!("{:.2} Gb/s", r.goodput_gbps)),
                ("throughput", format!("{:.2} Gb/s", r.throughput_gbps)),
                ("ideal", format!("{:.1} Gb/s", r.ideal_gbps)),
                ("util", format!("{:.1}%", r.utilization * 100.0)),
                ("OOD avg", format!("{:.2}", r.ood.nic_avg)),
                ("OOD p99", r.ood.nic_p99.to_string()),
                ("OOD max", r.ood.nic_max.to_string()),
                ("RBO p99", r.rbo.nic_p99.to_string()),
            ];
            if finite {
                row.push((
                    "flows done",
                    format!("{}/{}", r.flows_completed, r.flows_total),
                ));
                row.push((
                    "JCT",
                    r.jct_us
                        .map_or_else(|| "-".to_owned(), |j| format!("{j:.0} us")),
                ));
                row.push(("FCT slowdown p99", opt(r.fct_slowdown_p99, 2)));
            } else {
                row.push(("long flows", r.flows_long.to_string()));
            }
            row.push((
                "retx (spurious)",
                format!("{} ({})", r.retx.packets, r.retx.spurious),
            ));
            row.push((
                "drops rb/sw/probe",
                format!(
                    "{}/{}/{}",
                    r.drops.reorder_buffer, r.drops.switch, r.drops.probe
                ),
            ));
            row.push((
                "max q diff",
                format!("{:.1} KB", r.queue.max_interpath_diff_kb),
            ));
            row
        })
        .collect();
    let header: Vec<&str> = rows
        .first()
        .map(|r| r.iter().map(|c| c.0).collect())
        .unwrap_or_default();
    let mut t = Table::new(&header);
    for row in rows {
        t.row(row.into_iter().map(|c| c.1).collect());
    }
    let _ = write!(out, "{t}");
    if let Some(r) = reports.iter().find(|r| r.fct_us.is_some()) {
        if let Some(f) = r.fct_us {
            let _ = writeln!(
                out,
                "\nFCT of {}: p50 {:.1} us, p99 {:.1} us, max {:.1} us",
                r.scenario, f.p50, f.p99, f.max
            );
        }
    }
    // Goodput per workload table, where a run has several (incast with
    // background flows, say): consecutive tables of one kind are summed.
    for r in reports.iter().filter(|r| r.workloads.len() > 1) {
        let mut w = Table::new(&["workload", "tables", "flows", "completed", "goodput", "JCT"]);
        let mut i = 0;
        while i < r.workloads.len() {
            let kind = &r.workloads[i].kind;
            let run: Vec<_> = r.workloads[i..]
                .iter()
                .take_while(|x| &x.kind == kind)
                .collect();
            let jct = if run.len() == 1 { run[0].jct_us } else { None };
            w.row(vec![
                kind.clone(),
                run.len().to_string(),
                run.iter().map(|x| x.flows).sum::<u64>().to_string(),
                run.iter()
                    .map(|x| x.flows_completed)
                    .sum::<u64>()
                    .to_string(),
                format!(
                    "{:.2} Gb/s",
                    run.iter().map(|x| x.goodput_gbps).sum::<f64>()
                ),
                jct.map_or_else(|| "-".to_owned(), |j| format!("{j:.1} us")),
            ]);
            i += run.len();
        }
        let _ = write!(
            out,
            "
per workload table of {}:
{w}",
            r.scenario
        );
    }
    // Transports side by side may run on different fabrics (Rondo's steers):
    // say so, with the key that puts them on one.
    if reports.iter().any(|r| r.routing != reports[0].routing) {
        let mut each: Vec<String> = Vec::new();
        for r in reports {
            let pair = format!("{} {}", r.transport, r.routing);
            if !each.contains(&pair) {
                each.push(pair);
            }
        }
        let _ = writeln!(
            out,
            "\nswitch routing: {} (each transport's own fabric; --set switch.routing=\"steer\" or \"ecmp\" puts all on one)",
            each.join(", ")
        );
    }
    let events: u64 = reports.iter().map(|r| r.sim.events).sum();
    let wall: f64 = reports.iter().map(|r| r.sim.wall_s).sum();
    let _ = writeln!(
        out,
        "\n{events} events in {wall:.2} s of wall time ({:.2}M events/s)",
        if wall > 0.0 {
            events as f64 / wall / 1e6
        } else {
            0.0
        }
    );
    out
}

/// Bars of throughput and OOD p99 per run.
pub fn chart(title: &str, reports: &[&Report]) -> BarChart {
    let group = |name: &str, unit: &str, value: fn(&Report) -> f64| Group {
        title: name.to_owned(),
        unit: unit.to_owned(),
        bars: reports
            .iter()
            .enumerate()
            .map(|(i, r)| Bar {
                label: short_label(&r.scenario, title),
                series: i,
                value: value(r),
            })
            .collect(),
    };
    BarChart {
        title: format!("rondo sim {title}"),
        series: reports.iter().map(|r| r.scenario.clone()).collect(),
        groups: vec![
            group("throughput", "Gbit/s", |r| r.throughput_gbps),
            group("OOD avg", "packets", |r| r.ood.nic_avg),
            group("OOD p99", "packets", |r| r.ood.nic_p99 as f64),
        ],
    }
}

/// Lines of OOD (max, avg) and throughput against a sweep's parameter, one line per
/// series (`scheduler on`, `scheduler off`).
pub fn sweep_chart(
    title: &str,
    points: &[&SweepPoint],
    scenarios: &[&Scenario],
    reports: &[&Report],
) -> LineChart {
    let mut series: Vec<&str> = Vec::new();
    for p in points {
        if !series.contains(&p.series.as_str()) {
            series.push(&p.series);
        }
    }
    let panel = |name: &str, unit: &str, value: fn(&Report) -> f64| LinePanel {
        title: name.to_owned(),
        unit: unit.to_owned(),
        lines: series
            .iter()
            .map(|s| {
                let mut pts: Vec<(f64, f64)> = points
                    .iter()
                    .zip(reports)
                    .filter(|(p, _)| p.series == *s)
                    .map(|(p, r)| (p.x, value(r)))
                    .collect();
                pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                Line {
                    name: (*s).to_owned(),
                    points: pts,
                }
            })
            .collect(),
    };
    let mut ood_max = panel("NIC-level OOD max", "packets", |r| r.ood.nic_max as f64);
    if points.iter().all(|p| p.eq3) {
        // Paper eq. (3): OOD_max ~ R x dD, R in full packets per us per receiving NIC.
        let mut eq3: Vec<(f64, f64)> = points
            .iter()
            .zip(scenarios.iter().zip(reports))
            .filter(|(p, _)| Some(p.series.as_str()) == series.first().copied())
            .map(|(p, (s, r))| {
                let mut receivers: Vec<usize> = s.flows().iter().map(|f| f.dst).collect();
                receivers.sort_unstable();
                receivers.dedup();
                let per_nic_gbps = r.throughput_gbps / receivers.len().max(1) as f64;
                let rate = per_nic_gbps * 1e3 / (f64::from(s.mtu) * 8.0);
                (p.x, rate * p.x)
            })
            .collect();
        eq3.sort_by(|a, b| a.0.total_cmp(&b.0));
        ood_max.lines.push(Line {
            name: "eq. (3): R x dD".to_owned(),
            points: eq3,
        });
    }
    LineChart {
        title: format!("rondo sim {title}"),
        x_label: points.first().map_or("", |p| p.axis).to_owned(),
        panels: vec![
            ood_max,
            panel("NIC-level OOD avg", "packets", |r| r.ood.nic_avg),
            panel("throughput", "Gbit/s", |r| r.throughput_gbps),
        ],
    }
}

/// A run's name without the built-in's prefix, for bar labels.
fn short_label(name: &str, title: &str) -> String {
    let short = name.strip_prefix(title).unwrap_or(name).trim();
    let short = short.strip_prefix('-').unwrap_or(short);
    if short.is_empty() {
        name.to_owned()
    } else {
        short.to_owned()
    }
}

/// Writes to standard output; a reader that went away ends the output quietly.
pub fn write_stdout(text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}
