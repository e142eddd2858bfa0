//! The UET baseline (`transport.kind = "uet"`): NSCC's window from ECN and delay,
//! REPS reusing the paths whose ACKs came back unmarked, selective repeat. On the
//! Fig. 9 testbed it sprays over all four paths, fills them, and reorders more
//! than Rondo (paper Fig. 10: Rondo's maximum OOD 76-97% below UET's).

use rondo_sim::scenario::{builtin, parse, run, Outcome, Override, RunOptions, Scenario};
use rondo_sim::LinkKind;

fn fig9(name: &str, transport: &str) -> Scenario {
    let sets: Vec<Override> = ["duration_us=2000", &format!("transport.kind={transport:?}")]
        .iter()
        .map(|s| Override::parse(s).unwrap())
        .collect();
    builtin(name)
        .unwrap()
        .runs(&sets)
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .find(|r| r.scenario.name.as_deref() == Some(name))
        .unwrap()
        .scenario
}

fn outcome(s: &Scenario) -> Outcome {
    run(s, "baseline_uet", RunOptions::default(), &mut |_| {}).unwrap_or_else(|e| panic!("{e}"))
}

/// Gbit/s each forward path carried over the measured window, in path order.
fn path_gbps(o: &Outcome) -> Vec<f64> {
    let window = o.metrics.window.as_secs_f64();
    let mut paths: Vec<(usize, f64)> = o
        .metrics
        .queues
        .iter()
        .filter(|(_, s)| s.kind == LinkKind::PathForward)
        .map(|(_, s)| (s.index, s.sent_bytes as f64 * 8.0 / window / 1e9))
        .collect();
    paths.sort_by_key(|p| p.0);
    paths.into_iter().map(|p| p.1).collect()
}

/// Seed 1 (the built-in's), 2 ms with the first 1 ms as warm-up. Measured:
/// homo 67.8 Gb/s, OOD avg 90 (rondo 5); hetero 67.2 Gb/s, OOD avg 318 (rondo 7).
/// Other seeds give hetero 55 Gb/s (docs/baselines.md, "uet"), hence the band.
#[test]
fn uet_sprays_over_every_fig9_path_and_reorders_more_than_rondo() {
    let capacity = [25.0, 20.0, 15.0, 10.0];
    for (name, low) in [("fig9-homo", 63.0), ("fig9-hetero", 50.0)] {
        let o = outcome(&fig9(name, "uet"));
        let r = &o.report;
        assert_eq!(r.transport, "uet");
        assert!(
            (low..=70.0).contains(&r.goodput_gbps),
            "{name}: goodput {} outside {low}-70 Gb/s",
            r.goodput_gbps
        );
        let per_path = path_gbps(&o);
        assert_eq!(per_path.len(), 4, "{per_path:?}");
        for (p, (&got, &cap)) in per_path.iter().zip(&capacity).enumerate() {
            assert!(
                got > 0.5 * cap,
                "{name}: path {p} carried {got:.1} of {cap} Gb/s: {per_path:?}"
            );
        }
        assert_eq!(r.flows_long, 1);
        assert_eq!(r.drops.reorder_buffer, 0);
        assert_eq!(r.sim.stuck_timers, 0);
        let rondo = outcome(&fig9(name, "rondo")).report;
        assert!(
            r.ood.nic_avg > 4.0 * rondo.ood.nic_avg,
            "{name}: OOD avg {} vs rondo {}",
            r.ood.nic_avg,
            rondo.ood.nic_avg
        );
    }
}

const LINK_FAILURE: &str = include_str!("../scenarios/link-failure.toml");

/// A path fails at 200 us and comes back at 1200 us: REPS stops recycling the
/// failed path once its packets are declared lost, the transfer completes, and
/// only the packets lost on the failed link are resent.
#[test]
fn uet_rides_out_a_link_failure() {
    let sets = [Override::parse("transport.kind=\"uet\"").unwrap()];
    let s = parse("link-failure.toml", LINK_FAILURE, &sets).unwrap_or_else(|e| panic!("{e}"));
    let r = outcome(&s).report;
    assert_eq!(r.flows_completed, r.flows_total);
    assert!(r.retx.packets > 0 && r.retx.packets < 100, "{:?}", r.retx);
    assert_eq!(r.retx.spurious, 0);
    assert!(r.utilization > 0.9, "{}", r.utilization);
}
