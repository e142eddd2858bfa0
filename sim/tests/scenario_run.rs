//! Workloads run end to end through the simulator and the report.

use rondo_sim::scenario::{parse, run, Report, RunOptions};

fn report(text: &str) -> Report {
    let s = parse("run.toml", text, &[]).unwrap_or_else(|e| panic!("{e}"));
    run(&s, "run.toml", RunOptions::default(), &mut |_| {})
        .unwrap_or_else(|e| panic!("{e}"))
        .report
}

const FATTREE: &str = "seed = 2\nduration_us = 3000\n[topology]\nkind = \"fattree\"\nk = 4\n";

#[test]
fn moe_all_to_all_completes_with_a_job_completion_time() {
    let r = report(&format!(
        "{FATTREE}[workload]\nkind = \"all_to_all\"\nbytes = 20000\ngroup_size = 8\nskew = 1.0\n"
    ));
    assert_eq!(r.flows_total, 2 * 8 * 7);
    assert_eq!(r.flows_completed, r.flows_total);
    let jct = r.jct_us.unwrap();
    // Each host sends 7 x 20 KB on average and receives as much: at 100 Gb/s that is
    // at least 11 us; the most popular expert receives more.
    assert!(jct > 11.0 && jct < 1000.0, "JCT {jct} us");
    assert!(r.fct_slowdown_p99.unwrap() >= 1.0);
    assert_eq!(r.end, "done");
}

#[test]
fn poisson_hadoop_flows_complete_with_small_slowdown_at_light_load() {
    let r = report(&format!(
        "{FATTREE}[workload]\nkind = \"poisson\"\ncdf = \"hadoop\"\nload = 0.2\nstop_us = 500\n"
    ));
    // 16 hosts x 20 Gb/s x 500 us over a mean of about 123 KB: some 160 flows.
    assert!(r.flows_total > 50, "{} flows", r.flows_total);
    assert_eq!(r.flows_completed, r.flows_total);
    assert!(r.jct_us.is_some());
    let slowdown = r.fct_slowdown_p99.unwrap();
    assert!((1.0..20.0).contains(&slowdown), "slowdown p99 {slowdown}");
    let same = report(&format!(
        "{FATTREE}[workload]\nkind = \"poisson\"\ncdf = \"hadoop\"\nload = 0.2\nstop_us = 500\n"
    ));
    assert_eq!(same.flows_total, r.flows_total);
    assert_eq!(same.jct_us, r.jct_us, "same seed, same run");
}

/// Paper §6.3, Fig. 17: "a Jain fairness index of 0.999 under 32-to-1 incast".
#[test]
fn incast_shares_the_last_hop_fairly() {
    let r = report(
        "seed = 2\nduration_us = 1500\nwarmup_us = 500\n[topology]\nkind = \"clos3\"\n\
         [workload]\nkind = \"incast\"\nsenders = 32\nreceiver = 0\nfirst_sender = 64\n",
    );
    assert_eq!(r.flows_long, 32);
    assert!((r.ideal_gbps - 100.0).abs() < 1e-9);
    assert!(r.utilization > 0.95, "utilization {}", r.utilization);
    // Paper: 0.999; tolerance 0.009.
    let jain = r.fairness_jain.unwrap();
    assert!(jain >= 0.99, "Jain {jain}");
}
