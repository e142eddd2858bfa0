//! `rondo reproduce`: the paper's comparisons as simulator runs, written out as
//! `docs/results.md` (generated, never edited by hand) with the paper's numbers
//! beside ours, and one SVG plot per swept figure beside it.
//!
//! Each figure ([`figures`]) is a set of runs (a built-in or a shipped scenario,
//! one variant per transport or setting, seeds) and a way to read them: table
//! columns, lines comparing our numbers with the paper's, and a plot.

mod figures;
mod per_flow;
mod reasons;

use crate::chart::{Line, LineChart, LinePanel};
use crate::table::Table;
use anyhow::{bail, Context as _};
use rondo_sim::scenario::{self, Override, RunOptions, Scenario, PLANNED_TRANSPORTS};
use serde_json::Value;
use std::fmt::Write as _;
use std::path::PathBuf;

/// Options of `rondo reproduce`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// One seed and fewer sweep points (minutes instead of tens of minutes).
    #[arg(long)]
    quick: bool,
    /// Only these figures, comma-separated paper numbers: 9,10,14.
    #[arg(long, value_name = "N[,N...]")]
    fig: Option<String>,
    /// The Markdown file to write; the plots go beside it.
    #[arg(long, value_name = "FILE", default_value = "docs/results.md")]
    out: PathBuf,
    /// Runs at once (default: every core).
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
    /// Print the figures and their run counts, and run nothing.
    #[arg(long)]
    list: bool,
}

/// One simulator run of a figure.
pub(super) struct Run {
    /// The case: a row group of the table (`incast OS1`, `32 KB`).
    group: String,
    /// The variant: a transport or a setting (`rondo`, `rondo probing=off`).
    series: String,
    /// Position on the figure's swept axis.
    x: Option<f64>,
    file: String,
    scenario: Scenario,
}

/// The runs of one (group, series, x) over every seed.
pub(super) struct Point {
    group: String,
    series: String,
    x: Option<f64>,
    reports: Vec<Value>,
}

impl Point {
    /// The mean over seeds of `f` of each report (`None` when no report has it).
    pub(super) fn mean(&self, f: impl Fn(&Value) -> Option<f64>) -> Option<f64> {
        let v: Vec<f64> = self.reports.iter().filter_map(f).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    }

    /// The mean over seeds of a dotted report key (`ood.nic_p99`).
    pub(super) fn get(&self, key: &str) -> Option<f64> {
        self.mean(|r| metric(r, key))
    }
}

/// A dotted key of a report as a number.
pub(super) fn metric(report: &Value, key: &str) -> Option<f64> {
    key.split('.')
        .try_fold(report, |v, k| v.get(k))
        .and_then(Value::as_f64)
}

/// A column's value of a point, given the figure's other points.
type Cell = Box<dyn Fn(&Point, &[Point]) -> Option<f64>>;

/// One column of a figure's table.
pub(super) struct Column {
    header: &'static str,
    digits: usize,
    value: Cell,
}

impl Column {
    /// The mean of a report key.
    pub(super) fn key(header: &'static str, key: &'static str, digits: usize) -> Column {
        Column {
            header,
            digits,
            value: Box::new(move |p, _| p.get(key)),
        }
    }

    /// Any value of a point, given the figure's other points.
    pub(super) fn with(
        header: &'static str,
        digits: usize,
        f: impl Fn(&Point, &[Point]) -> Option<f64> + 'static,
    ) -> Column {
        Column {
            header,
            digits,
            value: Box::new(f),
        }
    }
}

/// A figure's plot: one line per series against the swept value.
pub(super) struct Plot {
    title: &'static str,
    x_label: &'static str,
    value: fn(&Point) -> Option<f64>,
}

/// One of the paper's figures.
pub(super) struct Figure {
    id: &'static str,
    title: &'static str,
    /// What the paper reports, with its section.
    paper: &'static str,
    /// What we run, where it differs from the paper, and why.
    setup: String,
    runs: Vec<Run>,
    columns: Vec<Column>,
    /// Our numbers against the paper's claims, one line each.
    compare: fn(&[Point]) -> Vec<String>,
    plot: Option<Plot>,
}

/// A figure that is not reproduced, and why.
pub(super) struct Missing {
    id: &'static str,
    title: &'static str,
    why: &'static str,
}

/// Runs `rondo reproduce`.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let wanted: Option<Vec<String>> = args
        .fig
        .as_deref()
        .map(|s| s.split(',').map(|f| f.trim().to_owned()).collect());
    let (all, missing) = figures::all(args.quick)?;
    if let Some(w) = &wanted {
        for id in w {
            if !all.iter().any(|f| f.id == id) && !missing.iter().any(|m| m.id == id) {
                let known: Vec<&str> = all.iter().map(|f| f.id).collect();
                bail!("--fig: no figure {id} (figures: {})", known.join(", "));
            }
        }
    }
    let chosen: Vec<Figure> = all
        .into_iter()
        .filter(|f| {
            wanted
                .as_ref()
                .is_none_or(|w| w.iter().any(|id| id == f.id))
        })
        .collect();
    if args.list {
        for f in &chosen {
            println!("Fig. {:>2}  {:>3} runs  {}", f.id, f.runs.len(), f.title);
        }
        for m in &missing {
            println!("Fig. {:>2}  not reproduced: {}", m.id, m.why);
        }
        return Ok(());
    }
    let jobs: Vec<(usize, &Run)> = chosen
        .iter()
        .enumerate()
        .flat_map(|(i, f)| f.runs.iter().map(move |r| (i, r)))
        .collect();
    let ids: Vec<&str> = chosen.iter().map(|f| f.id).collect();
    let started = std::time::Instant::now();
    eprintln!(
        "rondo reproduce: {} figures, {} runs{}",
        chosen.len(),
        jobs.len(),
        if args.quick { " (--quick)" } else { "" }
    );
    let reports = crate::parallel::map(
        &jobs,
        args.jobs,
        |(_, r)| {
            scenario::run(&r.scenario, &r.file, RunOptions::default(), &mut |_| {})
                .with_context(|| format!("{} {} {}", r.file, r.group, r.series))
                .and_then(|o| {
                    let mut v = serde_json::to_value(&o.report)?;
                    if let Value::Object(m) = &mut v {
                        m.insert("per_flow".into(), per_flow::summary(&o.metrics.flows));
                    }
                    Ok(v)
                })
        },
        |n, (i, r), res| {
            let state = match res {
                Ok(_) => "done".to_owned(),
                Err(e) => format!("failed: {e:#}"),
            };
            eprintln!(
                "[{n}/{}] Fig. {} {} {}: {state} ({:.0} s)",
                jobs.len(),
                ids[*i],
                r.group,
                r.series,
                started.elapsed().as_secs_f64()
            );
        },
    );
    let mut per_figure: Vec<Vec<(&Run, Value)>> = chosen.iter().map(|_| Vec::new()).collect();
    for ((i, r), rep) in jobs.iter().zip(reports) {
        per_figure[*i].push((r, rep?));
    }
    let dir = args
        .out
        .parent()
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let stem = args
        .out
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("results")
        .to_owned();
    let mut doc = header(args);
    for (f, runs) in chosen.iter().zip(per_figure) {
        let points = points(runs);
        doc.push_str(&section(f, &points, &stem, &dir)?);
    }
    if !missing.is_empty() {
        doc.push_str("## Not reproduced\n\n| figure | what | why |\n| --- | --- | --- |\n");
        for m in &missing {
            let _ = writeln!(doc, "| Fig. {} | {} | {} |", m.id, m.title, m.why);
        }
        doc.push('\n');
    }
    std::fs::write(&args.out, doc).with_context(|| format!("writing {}", args.out.display()))?;
    eprintln!(
        "wrote {} in {:.0} s",
        args.out.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn header(args: &Args) -> String {
    let mut cmd = String::from("rondo reproduce");
    if args.quick {
        cmd.push_str(" --quick");
    }
    if let Some(f) = &args.fig {
        let _ = write!(cmd, " --fig {f}");
    }
    let planned = if PLANNED_TRANSPORTS.is_empty() {
        String::new()
    } else {
        format!(
            " Transports named by the paper but not implemented yet ({}) are left out of every figure.",
            PLANNED_TRANSPORTS.join(", ")
        )
    };
    format!(
        "# Results: the paper's comparisons on our simulator\n\n\
         Generated by `{cmd}`; do not edit by hand, run it again. Every number is a mean \
         over the seeds shown in each figure's setup; the same seeds give the same \
         numbers. \"Paper\" quotes the Rondo paper (section in brackets); \"ours\" is \
         this repository's simulator. Where the two differ, the line says so; a result \
         that contradicts the paper is reported as it is. On the Clos and fat-tree \
         topologies Rondo runs on its own fabric, whose switches steer each logical \
         path onto its own route (`switch.routing = \"steer\"`), the other transports \
         on switches that hash their paths (`ar`: adaptive routing), unless a figure \
         says otherwise; docs/engine.md \"Steered routes\" has both sides on one \
         fabric.{planned}\n\n"
    )
}

/// Groups the runs of a figure by (group, series, x), case by case in the order
/// the cases first came, the variants in their order within each.
fn points(runs: Vec<(&Run, Value)>) -> Vec<Point> {
    let mut out: Vec<Point> = Vec::new();
    for (r, rep) in runs {
        match out
            .iter_mut()
            .find(|p| p.group == r.group && p.series == r.series && p.x == r.x)
        {
            Some(p) => p.reports.push(rep),
            None => out.push(Point {
                group: r.group.clone(),
                series: r.series.clone(),
                x: r.x,
                reports: vec![rep],
            }),
        }
    }
    let first = |key: &dyn Fn(&Point) -> bool| out.iter().position(key).unwrap_or(0);
    let mut order: Vec<(usize, usize, usize)> = (0..out.len())
        .map(|i| {
            let p = &out[i];
            (
                first(&|q| q.group == p.group),
                first(&|q| q.series == p.series),
                i,
            )
        })
        .collect();
    order.sort_unstable();
    let mut slots: Vec<Option<Point>> = out.into_iter().map(Some).collect();
    order
        .into_iter()
        .filter_map(|(_, _, i)| slots[i].take())
        .collect()
}

fn section(
    f: &Figure,
    points: &[Point],
    stem: &str,
    dir: &std::path::Path,
) -> anyhow::Result<String> {
    let mut s = format!("## Fig. {}: {}\n\n", f.id, f.title);
    let _ = writeln!(s, "**Paper.** {}\n", f.paper);
    let _ = writeln!(s, "**Setup.** {}\n", f.setup);
    let mut header = vec!["case", "variant"];
    header.extend(f.columns.iter().map(|c| c.header));
    let mut t = Table::new(&header);
    for p in points {
        let mut row = vec![p.group.clone(), p.series.clone()];
        for c in &f.columns {
            row.push(match (c.value)(p, points) {
                Some(v) if v.is_finite() => format!("{v:.*}", c.digits),
                _ => "-".to_owned(),
            });
        }
        t.row(row);
    }
    s.push_str(&t.to_markdown(2));
    s.push('\n');
    let lines = (f.compare)(points);
    if !lines.is_empty() {
        s.push_str("**Ours against the paper.**\n\n");
        for l in lines {
            let _ = writeln!(s, "- {l}");
        }
        s.push('\n');
    }
    if let Some(plot) = &f.plot {
        let name = format!("{stem}-fig{}.svg", f.id);
        let svg = chart(f, plot, points).to_svg();
        let path = dir.join(&name);
        std::fs::write(&path, svg).with_context(|| format!("writing {}", path.display()))?;
        let _ = writeln!(s, "![Fig. {}: {}]({name})\n", f.id, plot.title);
    }
    Ok(s)
}

/// One line per series against x. (The swept figures name their cases after
/// the swept value, `32 KB`, so a line keyed by case and series had one point.)
fn chart(f: &Figure, plot: &Plot, points: &[Point]) -> LineChart {
    let mut series: Vec<&String> = Vec::new();
    for p in points {
        if p.x.is_some() && !series.contains(&&p.series) {
            series.push(&p.series);
        }
    }
    let lines = series
        .iter()
        .map(|s| {
            let mut pts: Vec<(f64, f64)> = points
                .iter()
                .filter(|p| &&p.series == s)
                .filter_map(|p| Some((p.x?, (plot.value)(p)?)))
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            Line {
                name: (*s).clone(),
                points: pts,
            }
        })
        .collect();
    LineChart {
        title: format!("Fig. {}: {}", f.id, plot.title),
        x_label: plot.x_label.to_owned(),
        panels: vec![LinePanel {
            title: plot.title.to_owned(),
            unit: String::new(),
            lines,
        }],
    }
}

/// A variant of a figure: its name and the overrides that make it.
pub(super) struct Variant {
    series: String,
    overrides: Vec<String>,
}

impl Variant {
    pub(super) fn new(series: &str, overrides: &[&str]) -> Variant {
        Variant {
            series: series.to_owned(),
            overrides: overrides.iter().map(|o| (*o).to_owned()).collect(),
        }
    }
}

/// One variant per transport, leaving out those not implemented yet.
pub(super) fn transports(names: &[&str]) -> Vec<Variant> {
    names
        .iter()
        .filter(|n| !PLANNED_TRANSPORTS.contains(n))
        .map(|n| Variant::new(n, &[&format!("transport.kind={n:?}")]))
        .collect()
}

/// Where a figure's scenarios come from.
pub(super) enum Source {
    /// A built-in, keeping the runs whose label `keep` accepts; the label (or
    /// the scenario's name when empty) names the case.
    Builtin(&'static str, fn(&str) -> bool),
    /// A shipped scenario file (its name and text); the case is `case`.
    File(&'static str, &'static str, &'static str),
}

/// Every run of `source` x `variants` x the swept `key` values x `seeds`.
pub(super) fn grid(
    source: &Source,
    variants: &[Variant],
    sweep: Option<(&str, &str, &[f64])>,
    seeds: &[u64],
) -> anyhow::Result<Vec<Run>> {
    let values: Vec<Option<f64>> = match sweep {
        Some((_, _, v)) => v.iter().copied().map(Some).collect(),
        None => vec![None],
    };
    let mut runs = Vec::new();
    for v in variants {
        for x in &values {
            for &seed in seeds {
                let mut texts = v.overrides.clone();
                texts.push(format!("seed={seed}"));
                if let (Some((key, _, _)), Some(x)) = (sweep, x) {
                    texts.push(format!("{key}={x}"));
                }
                let overrides = texts
                    .iter()
                    .map(|o| Override::parse(o))
                    .collect::<Result<Vec<_>, _>>()?;
                let cases: Vec<(String, String, Scenario)> = match source {
                    Source::Builtin(name, keep) => scenario::builtin(name)?
                        .runs(&overrides)?
                        .into_iter()
                        .filter(|r| keep(&r.label))
                        .map(|r| {
                            let case = if r.label.is_empty() {
                                r.scenario.name.clone().unwrap_or_default()
                            } else {
                                r.label.clone()
                            };
                            (format!("builtin:{name}"), case, r.scenario)
                        })
                        .collect(),
                    Source::File(file, text, case) => {
                        let s = scenario::parse(file, text, &overrides)?;
                        s.check(file)?;
                        vec![((*file).to_owned(), (*case).to_owned(), s)]
                    }
                };
                for (file, case, scenario) in cases {
                    let group = match (sweep, x) {
                        (Some((_, unit, _)), Some(x)) => {
                            format!("{case} {x}{unit}").trim().to_owned()
                        }
                        _ => case,
                    };
                    runs.push(Run {
                        group,
                        series: v.series.clone(),
                        x: *x,
                        file,
                        scenario,
                    });
                }
            }
        }
    }
    Ok(runs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn points_average_over_seeds_and_keys_are_dotted() {
        let run = |seed: u64| {
            Run {
            group: "g".into(),
            series: "s".into(),
            x: None,
            file: "f".into(),
            scenario: scenario::parse(
                "f",
                "duration_us = 10\n[topology]\nkind = \"parallel\"\npaths = [{ gbps = 10, delay_us = 1.0 }]\n[workload]\nkind = \"long_flows\"\n",
                &[Override::parse(&format!("seed={seed}")).unwrap()],
            )
            .unwrap(),
        }
        };
        let (a, b) = (run(1), run(2));
        let p = points(vec![
            (&a, json!({"ood": {"nic_p99": 4}})),
            (&b, json!({"ood": {"nic_p99": 8}})),
        ]);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].get("ood.nic_p99"), Some(6.0));
        assert_eq!(p[0].get("ood.missing"), None);
    }

    #[test]
    fn every_figure_plans_runs_that_parse() {
        let (figs, missing) = figures::all(true).unwrap();
        assert!(figs.len() >= 10, "{} figures", figs.len());
        for f in &figs {
            assert!(!f.runs.is_empty(), "Fig. {} has runs", f.id);
        }
        assert!(missing.iter().all(|m| !figs.iter().any(|f| f.id == m.id)));
    }
}
