//! `rondo demo`: one long message from host A to host B over four parallel paths of
//! 25, 20, 15 and 10 Gbit/s (hosts at 100 Gbit/s, so the ideal is 70 Gbit/s), on the
//! simulator's two-host testbed (`rondo_sim::Testbed`), with Rondo's packet scheduler on and off.
//!
//! Two scenarios:
//! - `hetero`: every path has a one-way delay of 10 us (base RTT about 20 us, as in
//!   the paper's testbed) except path 0, which has 15 us (base RTT about 30 us);
//! - `homo`: every path has a one-way delay of 10 us.

mod measure;

use crate::chart::{Bar, BarChart, Group};
use crate::table::Table;
use anyhow::{ensure, Context};
use measure::{ideal_gbps, measure, Measurement, Run};
use rondo_proto::Duration;
use rondo_sim::pair::PathSpec;
use serde::Serialize;
use std::io::IsTerminal;
use std::path::PathBuf;

/// Host NIC rate of both hosts, Gbit/s.
const HOST_GBPS: f64 = 100.0;
/// Path rates, Gbit/s.
const PATH_GBPS: [f64; 4] = [25.0, 20.0, 15.0, 10.0];
/// One-way propagation delay of every path, us.
const ONE_WAY_US: f64 = 10.0;
/// Extra one-way delay of path 0 in the heterogeneous scenario, us.
const EXTRA_US: f64 = 5.0;

/// Options of `rondo demo`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Seed of the network and the flow; the same seed gives the same numbers.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Length of the message, in bytes.
    #[arg(long, default_value_t = 32 << 20)]
    bytes: u64,
    /// OOD and RBO count only arrivals after this many microseconds of simulated
    /// time (0: from the first packet).
    #[arg(long, default_value_t = 200.0)]
    warmup_us: f64,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
    /// Also write a bar chart of OOD p99 and throughput to this SVG file.
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
}

/// A named set of paths.
#[derive(Serialize)]
struct Scenario {
    name: &'static str,
    paths: Vec<PathJson>,
}

/// One path, as printed in the JSON.
#[derive(Serialize)]
struct PathJson {
    gbps: f64,
    one_way_delay_us: f64,
}

/// The `--json` document.
#[derive(Serialize)]
struct Report<'a> {
    seed: u64,
    bytes: u64,
    warmup_us: f64,
    host_gbps: f64,
    ideal_gbps: f64,
    mtu: usize,
    scenarios: &'a [Scenario],
    runs: &'a [Measurement],
}

fn scenarios() -> Vec<(&'static str, Vec<PathSpec>)> {
    let paths = |extra0: f64| {
        PATH_GBPS
            .iter()
            .enumerate()
            .map(|(i, g)| PathSpec::new(*g, ONE_WAY_US + if i == 0 { extra0 } else { 0.0 }))
            .collect()
    };
    vec![("hetero", paths(EXTRA_US)), ("homo", paths(0.0))]
}

/// Runs the demo and prints its table (or JSON), and writes the chart if asked.
pub fn run(args: &Args) -> anyhow::Result<()> {
    ensure!(args.bytes > 0, "--bytes must be at least 1");
    ensure!(
        args.warmup_us.is_finite() && args.warmup_us >= 0.0,
        "--warmup-us must be a non-negative number of microseconds"
    );
    let progress = std::io::stderr().is_terminal();
    let scenarios = scenarios();
    let total = scenarios.len() * 2;
    let mut runs = Vec::with_capacity(total);
    for (name, paths) in &scenarios {
        for scheduler in [true, false] {
            let started = std::time::Instant::now();
            if progress {
                eprint!(
                    "[{}/{total}] {name}, scheduler {} ... ",
                    runs.len() + 1,
                    on_off(scheduler)
                );
            }
            let run = Run {
                seed: args.seed,
                host_gbps: HOST_GBPS,
                paths,
                scheduler,
                bytes: args.bytes,
                warmup: Duration::from_us_f64(args.warmup_us),
            };
            let m = match measure(name, &run) {
                Ok(m) => m,
                Err(e) => {
                    if progress {
                        eprintln!("failed");
                    }
                    return Err(
                        e.context(format!("scenario {name}, scheduler {}", on_off(scheduler)))
                    );
                }
            };
            if progress {
                eprintln!(
                    "{:.0} us simulated in {:.1} s",
                    m.transfer_us,
                    started.elapsed().as_secs_f64()
                );
            }
            runs.push(m);
        }
    }

    let ideal = ideal_gbps(HOST_GBPS, &scenarios[0].1);
    let described: Vec<Scenario> = scenarios
        .iter()
        .map(|(name, paths)| Scenario {
            name,
            paths: paths
                .iter()
                .map(|p| PathJson {
                    gbps: p.gbps,
                    one_way_delay_us: p.delay.as_us_f64(),
                })
                .collect(),
        })
        .collect();
    if args.json {
        let report = Report {
            seed: args.seed,
            bytes: args.bytes,
            warmup_us: args.warmup_us,
            host_gbps: HOST_GBPS,
            ideal_gbps: ideal,
            mtu: rondo_proto::FlowConfig::default().mtu,
            scenarios: &described,
            runs: &runs,
        };
        write_stdout(&format!("{}\n", serde_json::to_string_pretty(&report)?))?;
    } else {
        write_stdout(&table_text(args, ideal, &runs))?;
    }
    if let Some(file) = &args.svg {
        std::fs::write(file, chart(&runs).to_svg())
            .with_context(|| format!("writing {}", file.display()))?;
        if !args.json {
            write_stdout(&format!("chart written to {}\n", file.display()))?;
        }
    }
    Ok(())
}

fn on_off(on: bool) -> &'static str {
    if on {
        "on"
    } else {
        "off"
    }
}

fn table_text(args: &Args, ideal: f64, runs: &[Measurement]) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "rondo demo: {} bytes, host {HOST_GBPS} Gbit/s, paths {} Gbit/s (ideal {ideal} Gbit/s), seed {}",
        args.bytes,
        PATH_GBPS.map(|g| g.to_string()).join("/"),
        args.seed
    );
    let _ = writeln!(
        out,
        "  hetero: one-way delay {ONE_WAY_US} us, path 0 {} us; homo: all {ONE_WAY_US} us",
        ONE_WAY_US + EXTRA_US
    );
    let _ = writeln!(
        out,
        "  OOD/RBO in packets, from {} us of simulated time on\n",
        args.warmup_us
    );
    let mut t = Table::new(&[
        "scenario",
        "scheduler",
        "goodput",
        "throughput",
        "util",
        "OOD avg",
        "OOD p99",
        "OOD max",
        "RBO p99",
        "retx (spurious)",
        "time",
    ]);
    for m in runs {
        t.row(vec![
            m.scenario.clone(),
            on_off(m.scheduler).to_owned(),
            format!("{:.1} Gb/s", m.goodput_gbps),
            format!("{:.1} Gb/s", m.throughput_gbps),
            format!("{:.1}%", m.utilization * 100.0),
            format!("{:.2}", m.ood.avg),
            m.ood.p99.to_string(),
            m.ood.max.to_string(),
            m.rbo.p99.to_string(),
            format!("{} ({})", m.retransmissions, m.spurious_retransmissions),
            format!("{:.0} us", m.transfer_us),
        ]);
    }
    let _ = write!(out, "{t}");
    let _ = writeln!(
        out,
        "\ngoodput: payload delivered in order / transfer time; throughput: unique data \
         packets incl. the {}-byte engine header / transfer time; util: throughput / ideal",
        rondo_proto::wire::DATA_HEADER_LEN
    );
    out
}

/// Writes to standard output; a reader that went away (`rondo demo | head`) ends
/// the output quietly instead of a panic.
fn write_stdout(text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}

fn chart(runs: &[Measurement]) -> BarChart {
    let group = |title: &str, unit: &str, value: fn(&Measurement) -> f64| Group {
        title: title.to_owned(),
        unit: unit.to_owned(),
        bars: runs
            .iter()
            .map(|m| Bar {
                label: m.scenario.clone(),
                series: usize::from(!m.scheduler),
                value: value(m),
            })
            .collect(),
    };
    BarChart {
        title: "rondo demo: packet scheduler on vs off".to_owned(),
        series: vec!["scheduler on".to_owned(), "scheduler off".to_owned()],
        groups: vec![
            group("OOD p99", "packets", |m| m.ood.p99 as f64),
            group("throughput", "Gbit/s", |m| m.throughput_gbps),
        ],
    }
}
