//! `rondo reproduce` end to end on its quickest figures: the Markdown file, its
//! plot beside it, the paper's numbers beside ours, and clear errors.

mod common;

use common::rondo;
use std::path::PathBuf;
use std::process::Output;

/// An empty directory of this test's own, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("rondo-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Scratch(dir)
    }

    /// `rondo reproduce --quick --fig FIGS --out DIR/FILE`, and that file's path.
    fn reproduce(&self, figs: &str, file: &str) -> (Output, PathBuf) {
        let out = self.0.join(file);
        let o = rondo(&[
            "reproduce",
            "--quick",
            "--fig",
            figs,
            "--out",
            out.to_str().unwrap(),
        ]);
        (o, out)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn writes_the_figures_with_the_papers_numbers_and_a_plot() {
    let dir = Scratch::new("reproduce");
    let (o, out) = dir.reproduce("9,20", "results.md");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let md = std::fs::read_to_string(&out).unwrap();
    assert!(md.starts_with("# Results"), "{md}");
    assert!(
        md.contains("## Fig. 9:") && md.contains("## Fig. 20:"),
        "{md}"
    );
    assert!(!md.contains("## Fig. 10:"), "only the figures asked for");
    // The paper's goodput beside ours, and one row per transport of Fig. 9.
    assert!(md.contains("(paper 68.18)"), "{md}");
    for t in ["rondo", "rrps", "mprdma", "falcon", "uet"] {
        assert!(
            md.contains(&format!("| fig9-homo | {t} |")),
            "row of {t}: {md}"
        );
    }
    assert!(md.contains("## Not reproduced"), "{md}");
    // The same seed gives the same document.
    let (o, again) = dir.reproduce("9,20", "again.md");
    assert!(o.status.success());
    assert_eq!(md, std::fs::read_to_string(&again).unwrap());
}

#[test]
fn a_sweep_figure_gets_its_plot() {
    let dir = Scratch::new("reproduce-plot");
    let (o, out) = dir.reproduce("4", "r.md");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let md = std::fs::read_to_string(&out).unwrap();
    assert!(md.contains("](r-fig4.svg)"), "{md}");
    let svg = std::fs::read_to_string(dir.0.join("r-fig4.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("polyline"), "{svg}");
}

#[test]
fn fig24_plots_one_line_per_operation_over_every_ood_and_names_the_cliffs() {
    let dir = Scratch::new("reproduce-fig24");
    let (o, out) = dir.reproduce("24", "r.md");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let md = std::fs::read_to_string(&out).unwrap();
    for op in ["READ", "WRITE"] {
        assert!(
            md.contains(&format!("- {op}: throughput holds up to an OOD of")),
            "{md}"
        );
        assert!(md.contains(&format!("| ood=800 | {op} |")), "{md}");
    }
    // A line per operation with a point per swept OOD (17), not one per case.
    let svg = std::fs::read_to_string(dir.0.join("r-fig24.svg")).unwrap();
    let lines: Vec<usize> = svg
        .split("<polyline points=\"")
        .skip(1)
        .map(|l| l.split('"').next().unwrap().split(' ').count())
        .filter(|&n| n > 3)
        .collect();
    assert_eq!(lines, [17, 17], "{svg}");
}

#[test]
fn an_unknown_figure_is_a_clear_error() {
    let o = rondo(&["reproduce", "--fig", "99", "--list"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("no figure 99") && err.contains("figures: 4, 9"),
        "{err}"
    );
}
