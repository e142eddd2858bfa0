//! `rondo sim`: run a scenario file or a built-in on the packet-level simulator and
//! print a table (or one JSON object), with optional time-series traces and a chart.

mod output;
mod trace;

use anyhow::{bail, Context as _};
use rondo_sim::scenario::{self, Outcome, Override, RunOptions, Scenario};
use std::io::IsTerminal;
use std::path::PathBuf;

/// Options of `rondo sim`.
#[derive(Debug, clap::Args)]
#[command(group = clap::ArgGroup::new("what").required(true).args(["scenario", "builtin", "list"]))]
pub struct Args {
    /// Scenario file (TOML; see docs/sim.md).
    #[arg(value_name = "SCENARIO.toml")]
    scenario: Option<PathBuf>,
    /// Run a built-in scenario instead (see --list).
    #[arg(long, value_name = "NAME")]
    builtin: Option<String>,
    /// List the built-in scenarios.
    #[arg(long)]
    list: bool,
    /// Transport of every flow (overrides transport.kind); a comma-separated list
    /// runs the scenario once per transport, side by side: --transport rondo,rrps.
    #[arg(long, value_name = "NAME[,NAME...]")]
    transport: Option<String>,
    /// Override a scenario key, typed by the schema: --set transport.reorder_buffer_kb=32
    /// (repeatable; applied in order, after the built-in's own settings).
    #[arg(long = "set", value_name = "TABLE.KEY=VALUE")]
    set: Vec<String>,
    /// Seed (overrides `seed`).
    #[arg(long)]
    seed: Option<u64>,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
    /// Write CSV time series of queues and OOD, and an SVG plot of them, per run
    /// into this directory.
    #[arg(long, value_name = "DIR")]
    trace: Option<PathBuf>,
    /// Write a bar chart of throughput and OOD of every run to this SVG file.
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
}

/// One run to do: a label, the scenario, and the name used in messages.
struct Planned {
    file: String,
    scenario: Scenario,
    sweep: Option<scenario::SweepPoint>,
}

/// Runs `rondo sim`.
pub fn run(args: &Args) -> anyhow::Result<()> {
    if args.list {
        return output::write_stdout(&output::list_text());
    }
    let mut overrides = Vec::new();
    if let Some(seed) = args.seed {
        overrides.push(Override::parse(&format!("seed={seed}"))?);
    }
    for s in &args.set {
        overrides.push(Override::parse(s)?);
    }
    let transports: Vec<&str> = match &args.transport {
        Some(list) => list.split(',').map(str::trim).collect(),
        None => Vec::new(),
    };
    if transports.iter().any(|t| t.is_empty()) {
        bail!("--transport takes transport names separated by commas, for example rondo,rrps");
    }
    let (title, planned) = match transports.as_slice() {
        [] => plan(args, &overrides)?,
        [one] => plan(args, &with_transport(one, &overrides)?)?,
        several => {
            // Every run once per transport, each labelled with its transport.
            let mut all = Vec::new();
            let mut title = String::new();
            for t in several {
                let (name, runs) = plan(args, &with_transport(t, &overrides)?)?;
                title = name;
                for mut p in runs {
                    let label = p.scenario.name.take().unwrap_or_else(|| title.clone());
                    p.scenario.name = Some(format!("{label} [{t}]"));
                    all.push(p);
                }
            }
            (title, all)
        }
    };
    let about = match &args.builtin {
        Some(name) => Some(scenario::builtin(name)?.about),
        None => None,
    };
    let progress = std::io::stderr().is_terminal();
    let total = planned.len();
    let mut outcomes = Vec::with_capacity(total);
    for (i, p) in planned.iter().enumerate() {
        let name = p.scenario.name.clone().unwrap_or_default();
        let duration = p.scenario.duration_us;
        let mut bar = |pr: &rondo_sim::Progress| {
            if progress {
                output::progress_line(i + 1, total, &name, pr, duration);
            }
        };
        let opts = RunOptions {
            trace: args.trace.is_some(),
        };
        let outcome = scenario::run(&p.scenario, &p.file, opts, &mut bar)?;
        if progress {
            eprintln!();
        }
        if let Some(dir) = &args.trace {
            let written = trace::write(dir, &outcome)
                .with_context(|| format!("writing the trace of {name} to {}", dir.display()))?;
            if !args.json {
                eprintln!("trace of {name}: {}", written.display());
            }
        }
        outcomes.push(outcome);
    }
    let reports: Vec<&scenario::Report> = outcomes.iter().map(|o: &Outcome| &o.report).collect();
    if args.json {
        let text = if reports.len() == 1 {
            serde_json::to_string_pretty(reports[0])?
        } else {
            serde_json::to_string_pretty(&serde_json::json!({
                "scenario": title,
                "runs": reports,
            }))?
        };
        output::write_stdout(&format!("{text}\n"))?;
    } else {
        output::write_stdout(&output::table_text(
            &title,
            about,
            &planned_scenarios(&planned),
            &reports,
        ))?;
    }
    if let Some(file) = &args.svg {
        let sweep: Option<Vec<&scenario::SweepPoint>> =
            planned.iter().map(|p| p.sweep.as_ref()).collect();
        let svg = match sweep {
            Some(points) => {
                output::sweep_chart(&title, &points, &planned_scenarios(&planned), &reports)
                    .to_svg()
            }
            None => output::chart(&title, &reports).to_svg(),
        };
        std::fs::write(file, svg).with_context(|| format!("writing {}", file.display()))?;
        if !args.json {
            output::write_stdout(&format!("chart written to {}\n", file.display()))?;
        }
    }
    Ok(())
}

/// `overrides` with the transport set first (the scenario's own keys still apply).
fn with_transport(name: &str, overrides: &[Override]) -> anyhow::Result<Vec<Override>> {
    let mut all = vec![Override::parse(&format!("transport.kind={name:?}"))?];
    all.extend_from_slice(overrides);
    Ok(all)
}

fn planned_scenarios(planned: &[Planned]) -> Vec<&Scenario> {
    planned.iter().map(|p| &p.scenario).collect()
}

/// The runs asked for: one scenario file, or every run of a built-in.
fn plan(args: &Args, overrides: &[Override]) -> anyhow::Result<(String, Vec<Planned>)> {
    match (&args.scenario, &args.builtin) {
        (Some(path), None) => {
            let file = path.display().to_string();
            let scenario = scenario::load(path, overrides)?;
            scenario.check(&file)?;
            let title = scenario.name.clone().unwrap_or_else(|| file.clone());
            Ok((
                title,
                vec![Planned {
                    file,
                    scenario,
                    sweep: None,
                }],
            ))
        }
        (None, Some(name)) => {
            let b = scenario::builtin(name)?;
            let runs = b.runs(overrides)?;
            let planned = runs
                .into_iter()
                .map(|r| Planned {
                    file: format!("builtin:{name}"),
                    scenario: r.scenario,
                    sweep: r.sweep,
                })
                .collect();
            Ok((name.clone(), planned))
        }
        _ => bail!("give either a scenario file or --builtin NAME, not both"),
    }
}
