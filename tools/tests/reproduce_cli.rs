//! `rondo reproduce` end to end on its quickest figures: the Markdown file, its
//! plot beside it, the paper's numbers beside ours, and clear errors.

mod common;

use common::rondo;

#[test]
fn writes_the_figures_with_the_papers_numbers_and_a_plot() {
    let dir = std::env::temp_dir().join(format!("rondo-reproduce-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = dir.join("results.md");
    let o = rondo(&[
        "reproduce",
        "--quick",
        "--fig",
        "9,20",
        "--out",
        out.to_str().unwrap(),
    ]);
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
    let again = dir.join("again.md");
    let o = rondo(&[
        "reproduce",
        "--quick",
        "--fig",
        "9,20",
        "--out",
        again.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    assert_eq!(md, std::fs::read_to_string(&again).unwrap());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_sweep_figure_gets_its_plot() {
    let dir = std::env::temp_dir().join(format!("rondo-reproduce-plot-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = dir.join("r.md");
    let o = rondo(&[
        "reproduce",
        "--quick",
        "--fig",
        "4",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let md = std::fs::read_to_string(&out).unwrap();
    assert!(md.contains("](r-fig4.svg)"), "{md}");
    let svg = std::fs::read_to_string(dir.join("r-fig4.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("polyline"), "{svg}");
    let _ = std::fs::remove_dir_all(&dir);
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
