//! `--trace DIR`: CSV time series of the traced ports' queues and the NIC-level OOD,
//! and an SVG plot of both.

use crate::chart::{Line, LineChart, LinePanel};
use rondo_sim::scenario::Outcome;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// A file-name-safe version of a run's name.
fn slug(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    s.trim_matches('_').to_owned()
}

/// Writes `<run>.csv` and `<run>.svg` into `dir` (created if missing); returns the
/// SVG's path.
pub fn write(dir: &Path, outcome: &Outcome) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let name = slug(&outcome.report.scenario);
    let Some(trace) = &outcome.trace else {
        anyhow::bail!("the run recorded no trace");
    };
    let mut csv = String::from("time_us");
    for l in &outcome.trace_links {
        let _ = write!(csv, ",queue_kb_{l}");
    }
    csv.push_str(",nic_ood_sum,nic_ood_max\n");
    let us = |t: rondo_proto::time::Instant| t.as_ps() as f64 / 1e6;
    for s in &trace.samples {
        let _ = write!(csv, "{:.3}", us(s.at));
        for q in &s.queue_bytes {
            let _ = write!(csv, ",{:.3}", *q as f64 / 1024.0);
        }
        let _ = writeln!(csv, ",{},{}", s.nic_ood_sum, s.nic_ood_max);
    }
    std::fs::write(dir.join(format!("{name}.csv")), csv)?;

    let queues = outcome
        .trace_links
        .iter()
        .enumerate()
        .map(|(i, l)| Line {
            name: l.clone(),
            points: trace
                .samples
                .iter()
                .map(|s| {
                    (
                        us(s.at),
                        s.queue_bytes.get(i).copied().unwrap_or(0) as f64 / 1024.0,
                    )
                })
                .collect(),
        })
        .collect();
    let ood = |name: &str, v: fn(&rondo_sim::TraceSample) -> u64| Line {
        name: name.to_owned(),
        points: trace
            .samples
            .iter()
            .map(|s| (us(s.at), v(s) as f64))
            .collect(),
    };
    let chart = LineChart {
        title: format!("rondo sim {}: queues and OOD", outcome.report.scenario),
        x_label: "us".to_owned(),
        panels: vec![
            LinePanel {
                title: "port queues".to_owned(),
                unit: "KB".to_owned(),
                lines: queues,
            },
            LinePanel {
                title: "NIC-level OOD".to_owned(),
                unit: "packets".to_owned(),
                lines: vec![
                    ood("largest NIC", |s| s.nic_ood_max),
                    ood("sum over NICs", |s| s.nic_ood_sum),
                ],
            },
        ],
    };
    let svg = dir.join(format!("{name}.svg"));
    std::fs::write(&svg, chart.to_svg())?;
    Ok(svg)
}
