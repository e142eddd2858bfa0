//! `rondo demo`: one long message from host A to host B on the paper's Fig. 9
//! testbed, with Rondo's packet scheduler on and off.
//!
//! The demo runs the simulator's `fig9-hetero` and `fig9-homo` built-ins, the very
//! scenarios `rondo sim --builtin fig9` runs, with one change: the long flow becomes
//! a message of `--bytes` bytes, so the run ends when it is delivered. Two hosts with
//! 100 Gbit/s NICs, four paths of 25, 20, 15 and 10 Gbit/s (ideal 70 Gbit/s), 10 us of
//! one-way delay on every path, and in `fig9-hetero` 10 us more on path 0.

use crate::chart::{Bar, BarChart, Group};
use crate::table::Table;
use anyhow::{ensure, Context};
use rondo_sim::scenario::{self, Override, Report, RunOptions};
use serde::Serialize;
use std::io::IsTerminal;
use std::path::PathBuf;

/// The built-ins the demo runs, in the order it prints them.
const BUILTINS: [&str; 2] = ["fig9-hetero", "fig9-homo"];

/// Options of `rondo demo`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Seed of the network and the flow; the same seed gives the same numbers.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Length of the message, in bytes.
    #[arg(long, default_value_t = 32 << 20)]
    bytes: u64,
    /// Goodput, OOD and RBO count only what happens after this many microseconds of
    /// simulated time (0: from the first packet).
    #[arg(long, default_value_t = 200.0)]
    warmup_us: f64,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
    /// Also write a bar chart of OOD p99 and throughput to this SVG file.
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
}

/// One run: the built-in's report, and whether the scheduler was on.
#[derive(Serialize)]
struct Run {
    /// Packet scheduler on or off.
    scheduler: bool,
    /// The simulator's report, with the keys of `rondo sim --json`.
    #[serde(flatten)]
    report: Report,
}

/// The `--json` document.
#[derive(Serialize)]
struct Document<'a> {
    seed: u64,
    bytes: u64,
    warmup_us: f64,
    ideal_gbps: f64,
    builtins: [&'static str; 2],
    runs: &'a [Run],
}

/// Simulated time allowed for the transfer: twenty times what the ideal rate needs,
/// plus 10 ms, so a run that stalls still ends (as `end = "time"`, reported as an
/// error) instead of running forever.
fn time_limit_us(bytes: u64) -> f64 {
    bytes as f64 * 8.0 / 70e3 * 20.0 + 10_000.0
}

/// Runs the demo and prints its table (or JSON), and writes the chart if asked.
pub fn run(args: &Args) -> anyhow::Result<()> {
    ensure!(args.bytes > 0, "--bytes must be at least 1");
    ensure!(
        args.warmup_us.is_finite() && args.warmup_us >= 0.0,
        "--warmup-us must be a non-negative number of microseconds"
    );
    let progress = std::io::stderr().is_terminal();
    let overrides = |scheduler: bool| -> anyhow::Result<Vec<Override>> {
        [
            format!("seed={}", args.seed),
            format!("workload.bytes={}", args.bytes),
            format!("warmup_us={}", args.warmup_us),
            format!("duration_us={}", time_limit_us(args.bytes)),
            format!("transport.scheduler={scheduler}"),
        ]
        .iter()
        .map(|o| Override::parse(o).map_err(anyhow::Error::from))
        .collect()
    };
    let total = BUILTINS.len() * 2;
    let mut runs = Vec::with_capacity(total);
    for name in BUILTINS {
        for scheduler in [true, false] {
            let case = format!("{name}, scheduler {}", on_off(scheduler));
            let started = std::time::Instant::now();
            if progress {
                eprint!("[{}/{total}] {case} ... ", runs.len() + 1);
            }
            let report =
                one(name, &overrides(scheduler)?, args).with_context(|| format!("scenario {case}"));
            let report = match report {
                Ok(r) => r,
                Err(e) => {
                    if progress {
                        eprintln!("failed");
                    }
                    return Err(e);
                }
            };
            if progress {
                eprintln!(
                    "{:.0} us simulated in {:.1} s",
                    report.simulated_us,
                    started.elapsed().as_secs_f64()
                );
            }
            runs.push(Run { scheduler, report });
        }
    }

    let ideal = runs[0].report.ideal_gbps;
    if args.json {
        let doc = Document {
            seed: args.seed,
            bytes: args.bytes,
            warmup_us: args.warmup_us,
            ideal_gbps: ideal,
            builtins: BUILTINS,
            runs: &runs,
        };
        write_stdout(&format!("{}\n", serde_json::to_string_pretty(&doc)?))?;
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

/// One run of the built-in `name` with `overrides`, checked: the message was
/// delivered, after the warm-up.
fn one(name: &str, overrides: &[Override], args: &Args) -> anyhow::Result<Report> {
    let runs = scenario::builtin(name)?.runs(overrides)?;
    let run = runs.into_iter().next().context("the built-in has no run")?;
    let outcome = scenario::run(
        &run.scenario,
        &format!("builtin:{name}"),
        RunOptions::default(),
        &mut |_| {},
    )?;
    let report = outcome.report;
    ensure!(
        report.flows_completed == 1,
        "the message was not delivered within {:.0} us of simulated time (end: {})",
        time_limit_us(args.bytes),
        report.end
    );
    ensure!(
        report.simulated_us > args.warmup_us,
        "the transfer took {:.0} us, no longer than --warmup-us {}: nothing was measured; \
         send more --bytes or lower --warmup-us",
        report.simulated_us,
        args.warmup_us
    );
    Ok(report)
}

fn on_off(on: bool) -> &'static str {
    if on {
        "on"
    } else {
        "off"
    }
}

fn table_text(args: &Args, ideal: f64, runs: &[Run]) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "rondo demo: {} bytes over the Fig. 9 testbed (built-ins {}; ideal {ideal} Gbit/s), seed {}",
        args.bytes,
        BUILTINS.join(", "),
        args.seed
    );
    let _ = writeln!(
        out,
        "  goodput, OOD and RBO from {} us of simulated time on; OOD/RBO in packets, at the NIC\n",
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
    for r in runs {
        let m = &r.report;
        t.row(vec![
            m.scenario.clone(),
            on_off(r.scheduler).to_owned(),
            format!("{:.1} Gb/s", m.goodput_gbps),
            format!("{:.1} Gb/s", m.throughput_gbps),
            format!("{:.1}%", m.utilization * 100.0),
            format!("{:.2}", m.ood.nic_avg),
            m.ood.nic_p99.to_string(),
            m.ood.nic_max.to_string(),
            m.rbo.nic_p99.to_string(),
            format!("{} ({})", m.retx.packets, m.retx.spurious),
            format!("{:.0} us", m.simulated_us),
        ]);
    }
    let _ = write!(out, "{t}");
    let _ = writeln!(
        out,
        "\ntime: from posting the message to its in-order delivery; the other columns are \
         `rondo sim`'s (same keys in --json)"
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

fn chart(runs: &[Run]) -> BarChart {
    let group = |title: &str, unit: &str, value: fn(&Report) -> f64| Group {
        title: title.to_owned(),
        unit: unit.to_owned(),
        bars: runs
            .iter()
            .map(|r| Bar {
                label: r.report.scenario.clone(),
                series: usize::from(!r.scheduler),
                value: value(&r.report),
            })
            .collect(),
    };
    BarChart {
        title: "rondo demo: packet scheduler on vs off".to_owned(),
        series: vec!["scheduler on".to_owned(), "scheduler off".to_owned()],
        groups: vec![
            group("OOD p99", "packets", |m| m.ood.nic_p99 as f64),
            group("throughput", "Gbit/s", |m| m.throughput_gbps),
        ],
    }
}
