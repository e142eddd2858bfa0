//! The ideal against which utilization is measured, when link rates change during
//! the measured span: the time-weighted mean of the ideals of the spans between
//! changes (a span across a rate drop once reported a utilization of 2.5).

use rondo_sim::scenario::{parse, run, Report, RunOptions};

fn report(events: &str) -> Report {
    let text = format!(
        "seed = 1\nduration_us = 2000\nwarmup_us = 500\n[topology]\nkind = \"parallel\"\n\
         host_gbps = 100\npaths = [{{ gbps = 25, delay_us = 2.0 }}, {{ gbps = 25, delay_us = 2.0 }}]\n\
         [workload]\nkind = \"long_flows\"\nflows = 1\n{events}"
    );
    let s = parse("ideal.toml", &text, &[]).unwrap_or_else(|e| panic!("{e}"));
    run(&s, "ideal.toml", RunOptions::default(), &mut |_| {})
        .unwrap_or_else(|e| panic!("{e}"))
        .report
}

#[test]
fn a_rate_drop_inside_the_window_weights_the_ideal_by_time() {
    let steady = report("");
    assert!((steady.ideal_gbps - 50.0).abs() < 1e-9);
    // Both paths drop to 5 Gbit/s at 1250 us, halfway through the 1500 us window:
    // the ideal is (50 x 750 + 10 x 750) / 1500 = 30 Gbit/s, not the 10 of the end.
    let mut events = String::new();
    for path in 0..2 {
        events +=
            &format!("[[events]]\nat_us = 1250\npath = {path}\naction = \"rate\"\ngbps = 5.0\n");
    }
    let r = report(&events);
    assert!((r.ideal_gbps - 30.0).abs() < 1e-6, "ideal {}", r.ideal_gbps);
    assert!(
        r.utilization > 0.8 && r.utilization <= 1.01,
        "utilization {} (throughput {} of ideal {})",
        r.utilization,
        r.throughput_gbps,
        r.ideal_gbps
    );
    // A change before the window counts only from the window's start.
    let mut early = String::new();
    for path in 0..2 {
        early +=
            &format!("[[events]]\nat_us = 100\npath = {path}\naction = \"rate\"\ngbps = 5.0\n");
    }
    let r = report(&early);
    assert!((r.ideal_gbps - 10.0).abs() < 1e-6, "ideal {}", r.ideal_gbps);
}
