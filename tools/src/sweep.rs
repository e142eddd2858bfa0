//! `rondo sweep`: one scenario over a list of values of any key, for several
//! transports and seeds, on every core; a table of the means over seeds, one JSON
//! object with every run, and a plot. Sweeps that outgrow one machine run in
//! slices (`--shard K/N --out DIR`, one JSON file per run) that `--merge DIR`
//! puts back together, whichever machines ran them (see `tools/slurm/`).

use crate::chart::{Line, LineChart, LinePanel};
use crate::table::Table;
use anyhow::{bail, Context as _};
use rondo_sim::scenario::{self, Override, RunOptions, Scenario};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// Options of `rondo sweep`.
#[derive(Debug, clap::Args)]
#[command(group = clap::ArgGroup::new("what").required(true).args(["scenario", "builtin", "merge"]))]
pub struct Args {
    /// Scenario file (TOML; see docs/sim.md).
    #[arg(value_name = "SCENARIO.toml")]
    scenario: Option<PathBuf>,
    /// Sweep a built-in scenario instead (`rondo sim --list`); every run of the
    /// built-in is swept.
    #[arg(long, value_name = "NAME")]
    builtin: Option<String>,
    /// The key to sweep, as `--set` writes it: transport.reorder_buffer_kb.
    #[arg(long, value_name = "TABLE.KEY", required_unless_present = "merge")]
    key: Option<String>,
    /// Its values, comma-separated: 32,64,128 (TOML values or bare words).
    #[arg(long, value_name = "V[,V...]", required_unless_present = "merge")]
    values: Option<String>,
    /// Transports, comma-separated (default: the scenario's own).
    #[arg(long, value_name = "NAME[,NAME...]")]
    transports: Option<String>,
    /// Seeds, comma-separated (default: the scenario's own); the table shows the
    /// mean over seeds.
    #[arg(long, value_name = "S[,S...]")]
    seeds: Option<String>,
    /// Further overrides of every run, as `rondo sim --set` (repeatable).
    #[arg(long = "set", value_name = "TABLE.KEY=VALUE")]
    set: Vec<String>,
    /// Report keys shown in the table and plotted, comma-separated dotted names of
    /// `rondo sim --json`.
    #[arg(
        long,
        value_name = "KEY[,KEY...]",
        default_value = "goodput_gbps,utilization,ood.nic_p99,ood.nic_max,jct_us,retx.spurious_ratio"
    )]
    metrics: String,
    /// Runs at once (default: every core).
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
    /// Run only the K-th of N slices of the runs (1-based), and write one JSON
    /// file per run into --out instead of a table.
    #[arg(long, value_name = "K/N", requires = "out")]
    shard: Option<String>,
    /// Directory for the per-run files of --shard.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Build the table, JSON and plot from the per-run files of any set of shards.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["scenario", "builtin", "shard"])]
    merge: Option<PathBuf>,
    /// Print one JSON object with every run instead of the table.
    #[arg(long)]
    json: bool,
    /// Write a plot of every metric against the swept value to this SVG file.
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
}

/// One run of a sweep.
struct Planned {
    index: usize,
    series: String,
    transport: String,
    value: String,
    seed: u64,
    file: String,
    scenario: Scenario,
}

/// Runs `rondo sweep`.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let metrics: Vec<&str> = list(&args.metrics, "--metrics")?;
    let (meta, mut records) = match &args.merge {
        Some(dir) => merged(dir)?,
        None => {
            let (meta, planned) = plan(args)?;
            let shard = args.shard.as_deref().map(parse_shard).transpose()?;
            let mine: Vec<Planned> = planned
                .into_iter()
                .filter(|p| shard.is_none_or(|(k, n)| p.index % n == k - 1))
                .collect();
            let records = execute(&mine, &meta, args.jobs)?;
            if let Some(dir) = &args.out {
                write_shard(dir, &records)?;
                eprintln!("{} runs written to {}", records.len(), dir.display());
                if args.shard.is_some() {
                    return Ok(());
                }
            }
            (meta, records)
        }
    };
    records.sort_by_key(|r| r["index"].as_u64());
    let expected = meta["runs"].as_u64().unwrap_or(0) as usize;
    if records.len() < expected {
        eprintln!(
            "warning: {} of {expected} runs present; the table and plot cover those",
            records.len()
        );
    }
    if args.json {
        let all = json!({ "sweep": meta, "runs": records });
        println!("{}", serde_json::to_string_pretty(&all)?);
    } else {
        print!("{}", table(&meta, &records, &metrics));
    }
    if let Some(file) = &args.svg {
        let svg = chart(&meta, &records, &metrics).to_svg();
        std::fs::write(file, svg).with_context(|| format!("writing {}", file.display()))?;
        if !args.json {
            println!("plot written to {}", file.display());
        }
    }
    Ok(())
}

/// Comma-separated, trimmed, none empty.
fn list<'a>(s: &'a str, what: &str) -> anyhow::Result<Vec<&'a str>> {
    let items: Vec<&str> = s.split(',').map(str::trim).collect();
    if items.iter().any(|i| i.is_empty()) {
        bail!("{what} takes a comma-separated list without empty items, got `{s}`");
    }
    Ok(items)
}

/// `K/N` with 1 <= K <= N.
fn parse_shard(s: &str) -> anyhow::Result<(usize, usize)> {
    let parsed = s
        .split_once('/')
        .and_then(|(k, n)| Some((k.trim().parse().ok()?, n.trim().parse().ok()?)));
    match parsed {
        Some((k, n)) if k >= 1 && k <= n => Ok((k, n)),
        _ => bail!("--shard takes K/N with 1 <= K <= N (the K-th of N slices), got `{s}`"),
    }
}

/// Every run, in a fixed order (transport, value, seed, built-in run): the same
/// list on every machine, so that shards of it never overlap.
fn plan(args: &Args) -> anyhow::Result<(Value, Vec<Planned>)> {
    let (Some(key), Some(values)) = (&args.key, &args.values) else {
        bail!("--key and --values are needed unless --merge is given");
    };
    let values = list(values, "--values")?;
    let transports: Vec<Option<&str>> = match &args.transports {
        Some(t) => list(t, "--transports")?.into_iter().map(Some).collect(),
        None => vec![None],
    };
    let seeds: Vec<Option<u64>> = match &args.seeds {
        Some(s) => list(s, "--seeds")?
            .into_iter()
            .map(|x| {
                x.parse()
                    .map(Some)
                    .with_context(|| format!("--seeds: `{x}` is not a seed (an integer)"))
            })
            .collect::<anyhow::Result<_>>()?,
        None => vec![None],
    };
    let mut planned = Vec::new();
    let mut name = String::new();
    for t in &transports {
        for v in &values {
            for s in &seeds {
                let mut overrides = Vec::new();
                if let Some(t) = t {
                    overrides.push(Override::parse(&format!("transport.kind={t:?}"))?);
                }
                if let Some(s) = s {
                    overrides.push(Override::parse(&format!("seed={s}"))?);
                }
                for o in &args.set {
                    overrides.push(Override::parse(o)?);
                }
                overrides.push(Override::parse(&format!("{key}={v}"))?);
                for (file, label, scenario) in scenarios(args, &overrides)? {
                    scenario.check(&file)?;
                    name = scenario.name.clone().unwrap_or_else(|| file.clone());
                    let transport = scenario.transport.kind.name().to_owned();
                    let series = match label {
                        Some(l) => format!("{transport} {l}"),
                        None => transport.clone(),
                    };
                    planned.push(Planned {
                        index: planned.len(),
                        series,
                        transport,
                        value: (*v).to_owned(),
                        seed: scenario.seed,
                        file,
                        scenario,
                    });
                }
            }
        }
    }
    let what = match (&args.scenario, &args.builtin) {
        (_, Some(b)) => format!("builtin:{b}"),
        (Some(p), None) => p.display().to_string(),
        (None, None) => name,
    };
    let meta = json!({
        "scenario": what,
        "key": key,
        "values": values,
        "runs": planned.len(),
    });
    Ok((meta, planned))
}

/// The scenarios of one point: the file, or every run of the built-in (with its
/// label when it has several).
fn scenarios(
    args: &Args,
    overrides: &[Override],
) -> anyhow::Result<Vec<(String, Option<String>, Scenario)>> {
    match (&args.scenario, &args.builtin) {
        (Some(path), None) => {
            let s = scenario::load(path, overrides)?;
            Ok(vec![(path.display().to_string(), None, s)])
        }
        (None, Some(name)) => {
            let runs = scenario::builtin(name)?.runs(overrides)?;
            let several = runs.len() > 1;
            Ok(runs
                .into_iter()
                .map(|r| {
                    // A run's label, or its scenario's name (fig9's homo / hetero).
                    let label = several.then(|| match r.label.as_str() {
                        "" => r.scenario.name.clone().unwrap_or_default(),
                        l => l.to_owned(),
                    });
                    (format!("builtin:{name}"), label, r.scenario)
                })
                .collect())
        }
        _ => bail!("give either a scenario file or --builtin NAME, not both"),
    }
}

/// Runs `runs` on `jobs` threads (default: every core), printing one line per
/// finished run to stderr; the records come back in plan order.
fn execute(runs: &[Planned], meta: &Value, jobs: Option<usize>) -> anyhow::Result<Vec<Value>> {
    let started = std::time::Instant::now();
    crate::parallel::map(
        runs,
        jobs,
        |p| run_one(p, meta),
        |n, p, r| match r {
            Ok(v) => eprintln!(
                "[{n}/{}] {} {}={} seed {}: utilization {:.3}, OOD p99 {}, {:.0} s elapsed",
                runs.len(),
                p.series,
                meta["key"].as_str().unwrap_or(""),
                p.value,
                p.seed,
                v["report"]["utilization"].as_f64().unwrap_or(f64::NAN),
                v["report"]["ood"]["nic_p99"],
                started.elapsed().as_secs_f64()
            ),
            Err(e) => eprintln!("[{n}/{}] {} failed: {e:#}", runs.len(), p.series),
        },
    )
    .into_iter()
    .collect()
}

/// One run and its record.
fn run_one(p: &Planned, meta: &Value) -> anyhow::Result<Value> {
    let outcome = scenario::run(&p.scenario, &p.file, RunOptions::default(), &mut |_| {})
        .with_context(|| format!("{} {}={}", p.series, meta["key"], p.value))?;
    Ok(json!({
        "index": p.index,
        "sweep": meta,
        "series": p.series,
        "transport": p.transport,
        "value": p.value,
        "x": p.value.parse::<f64>().ok(),
        "seed": p.seed,
        "report": serde_json::to_value(&outcome.report)?,
    }))
}

/// One file per run: `run-00042.json`.
fn write_shard(dir: &Path, records: &[Value]) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for r in records {
        let file = dir.join(format!("run-{:05}.json", r["index"].as_u64().unwrap_or(0)));
        std::fs::write(&file, serde_json::to_string_pretty(r)?)
            .with_context(|| format!("writing {}", file.display()))?;
    }
    Ok(())
}

/// The records of every `run-*.json` in `dir`; they must come from one sweep.
fn merged(dir: &Path) -> anyhow::Result<(Value, Vec<Value>)> {
    let entries = std::fs::read_dir(dir)
        .with_context(|| format!("reading the directory {}", dir.display()))?;
    let mut meta: Option<Value> = None;
    let mut records = Vec::new();
    for e in entries {
        let path = e?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if !(name.starts_with("run-") && name.ends_with(".json")) {
            continue;
        }
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let r: Value = serde_json::from_str(&text)
            .with_context(|| format!("{}: not a run of rondo sweep", path.display()))?;
        if r["report"].is_null() || r["index"].as_u64().is_none() {
            bail!(
                "{}: not a run of rondo sweep (no index or report)",
                path.display()
            );
        }
        match &meta {
            None => meta = Some(r["sweep"].clone()),
            Some(m) if *m != r["sweep"] => bail!(
                "{}: from another sweep ({} against {}); merge one sweep at a time",
                path.display(),
                r["sweep"],
                m
            ),
            Some(_) => {}
        }
        records.push(r);
    }
    let Some(meta) = meta else {
        bail!(
            "{}: no run-*.json files of rondo sweep --shard",
            dir.display()
        );
    };
    Ok((meta, records))
}

/// A report value by dotted key (`ood.nic_p99`), as a number.
fn metric(report: &Value, key: &str) -> Option<f64> {
    key.split('.')
        .try_fold(report, |v, part| v.get(part))
        .and_then(Value::as_f64)
}

/// (series, value) groups in first-seen order, with their records.
fn groups(records: &[Value]) -> Vec<((String, String), Vec<&Value>)> {
    let mut out: Vec<((String, String), Vec<&Value>)> = Vec::new();
    for r in records {
        let id = (
            r["series"].as_str().unwrap_or("").to_owned(),
            r["value"].as_str().unwrap_or("").to_owned(),
        );
        match out.iter_mut().find(|(g, _)| *g == id) {
            Some((_, rs)) => rs.push(r),
            None => out.push((id, vec![r])),
        }
    }
    out
}

/// Mean of `key` over the records that have it (`None` when none has).
fn mean(records: &[&Value], key: &str) -> Option<f64> {
    let xs: Vec<f64> = records
        .iter()
        .filter_map(|r| metric(&r["report"], key))
        .collect();
    (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
}

fn table(meta: &Value, records: &[Value], metrics: &[&str]) -> String {
    let key = meta["key"].as_str().unwrap_or("value");
    let mut header = vec!["run", key, "seeds"];
    header.extend_from_slice(metrics);
    let mut t = Table::new(&header);
    for ((series, value), rs) in groups(records) {
        let mut row = vec![series, value, rs.len().to_string()];
        for m in metrics {
            row.push(match mean(&rs, m) {
                Some(x) if x.abs() >= 100.0 || x == x.trunc() => format!("{x:.0}"),
                Some(x) => format!("{x:.3}"),
                None => "-".to_owned(),
            });
        }
        t.row(row);
    }
    format!(
        "sweep of {} over {key} (mean over seeds)\n\n{t}",
        meta["scenario"].as_str().unwrap_or("")
    )
}

/// One panel per metric, one line per series, against the swept value (its
/// position in --values when the values are not numbers).
fn chart(meta: &Value, records: &[Value], metrics: &[&str]) -> LineChart {
    let values: Vec<&str> = meta["values"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let numeric = values.iter().all(|v| v.parse::<f64>().is_ok());
    let x_of = |v: &str| {
        if numeric {
            v.parse::<f64>().unwrap_or(0.0)
        } else {
            values.iter().position(|x| *x == v).unwrap_or(0) as f64
        }
    };
    let gs = groups(records);
    let mut series: Vec<&str> = Vec::new();
    for ((s, _), _) in &gs {
        if !series.contains(&s.as_str()) {
            series.push(s);
        }
    }
    let panels = metrics
        .iter()
        .map(|m| LinePanel {
            title: (*m).to_owned(),
            unit: String::new(),
            lines: series
                .iter()
                .map(|s| {
                    let mut points: Vec<(f64, f64)> = gs
                        .iter()
                        .filter(|((gs, _), _)| gs == s)
                        .filter_map(|((_, v), rs)| Some((x_of(v), mean(rs, m)?)))
                        .collect();
                    points.sort_by(|a, b| a.0.total_cmp(&b.0));
                    Line {
                        name: (*s).to_owned(),
                        points,
                    }
                })
                .collect(),
        })
        .collect();
    let key = meta["key"].as_str().unwrap_or("value");
    LineChart {
        title: format!("{} over {key}", meta["scenario"].as_str().unwrap_or("")),
        x_label: if numeric {
            key.to_owned()
        } else {
            format!("{key}: {}", values.join(", "))
        },
        panels,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_are_checked_and_partition_the_runs() {
        assert_eq!(parse_shard("2/3").unwrap(), (2, 3));
        for bad in ["0/3", "4/3", "x/3", "3", "1/0"] {
            let e = parse_shard(bad).unwrap_err().to_string();
            assert!(e.contains("K/N"), "{bad}: {e}");
        }
        // Every run lands in exactly one slice.
        let n = 3;
        for i in 0..10usize {
            let owners = (1..=n).filter(|k| i % n == k - 1).count();
            assert_eq!(owners, 1);
        }
    }

    #[test]
    fn metrics_are_read_by_dotted_key_and_averaged_over_seeds() {
        let r = |series: &str, value: &str, u: f64| json!({"series": series, "value": value, "report": {"utilization": u, "ood": {"nic_p99": 4}}});
        let records = vec![r("a", "1", 0.5), r("a", "1", 0.7), r("b", "1", 0.9)];
        let gs = groups(&records);
        assert_eq!(gs.len(), 2);
        assert!((mean(&gs[0].1, "utilization").unwrap() - 0.6).abs() < 1e-12);
        assert_eq!(mean(&gs[0].1, "ood.nic_p99"), Some(4.0));
        assert_eq!(mean(&gs[0].1, "no.such"), None);
        let meta = json!({"scenario": "s", "key": "k", "values": ["1"], "runs": 3});
        let text = table(&meta, &records, &["utilization", "jct_us"]);
        assert!(text.contains("0.600") && text.contains('-'), "{text}");
    }

    #[test]
    fn a_shard_written_and_merged_keeps_every_float_bit_for_bit() {
        // The CI's Slurm check once failed on 2.3644444444444446 read back as
        // 2.364444444444445: serde_json's default float parser is not exact.
        let dir = std::env::temp_dir().join(format!("rondo-sweep-shard-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let values: [f64; 5] = [
            2.3644444444444446,
            0.1 + 0.2,
            1.0 / 3.0,
            6.02214076e23,
            5e-324,
        ];
        let records: Vec<Value> = values
            .iter()
            .enumerate()
            .map(|(i, v)| json!({"index": i, "sweep": {"key": "k"}, "report": {"nic_avg": v}}))
            .collect();
        write_shard(&dir, &records).unwrap();
        let (_, mut back) = merged(&dir).unwrap();
        back.sort_by_key(|r| r["index"].as_u64());
        let _ = std::fs::remove_dir_all(&dir);
        let read: Vec<u64> = back
            .iter()
            .map(|r| r["report"]["nic_avg"].as_f64().unwrap().to_bits())
            .collect();
        let want: Vec<u64> = values.iter().map(|v| v.to_bits()).collect();
        assert_eq!(read, want);
    }
}
