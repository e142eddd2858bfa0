//! Timed events and whole-run properties: a link failure during a transfer, a
//! rate change, determinism, warm-up, tracing and long-lived flows on fig2.

use rondo_proto::time::{Duration, Instant};
use rondo_sim::{
    FlowSpec, LinkChange, LinkKind, Metrics, PathSpec, RunEnd, SimConfig, Simulator, Topology,
};

fn four_paths() -> Topology {
    Topology::Parallel {
        host_gbps: 100.0,
        paths: vec![
            PathSpec {
                gbps: 25.0,
                delay: Duration::from_us(5),
            };
            4
        ],
    }
}

fn transfer(bytes: u64) -> FlowSpec {
    FlowSpec::transfer(0, 1, bytes)
}

fn fct(sim: &Simulator) -> Duration {
    sim.metrics().flows[0]
        .fct()
        .expect("the transfer completed")
}

#[test]
fn a_failed_path_is_routed_around_and_the_flow_completes() {
    let mut sim = Simulator::new(&four_paths(), SimConfig::default()).unwrap();
    sim.add_flow(transfer(4 << 20)).unwrap();
    let path = sim.parallel_path_link(1).unwrap();
    sim.schedule_link_change(Instant::from_us(100), path, LinkChange::Fail)
        .unwrap();
    let end = sim.run(Instant::from_us(200_000), &mut |_| {});
    assert_eq!(end, RunEnd::Done);
    let m = sim.metrics();
    assert_eq!(m.flows[0].delivered, 4 << 20);
    assert!(
        m.drops.link_down > 0,
        "packets were lost on the failed path"
    );
    assert!(m.retx.packets > 0, "and retransmitted");
    assert!(m.retx.mean_delay.is_some_and(|d| d > Duration::ZERO));
    let s = sim.link_stats(path).unwrap();
    assert!(s.failed);
    // The ideal counts four paths for the first 100 us, the three left after:
    // weighted by time over the measured span.
    let w = m.window.as_us_f64();
    let expected = (100.0 * 100.0 + 75.0 * (w - 100.0)) / w;
    assert!(
        (m.ideal_gbps - expected).abs() < 1e-6,
        "{} vs {expected}",
        m.ideal_gbps
    );
}

#[test]
fn a_failed_fabric_link_is_hashed_around() {
    let topo = Topology::FatTree {
        k: 4,
        gbps: 100.0,
        link_delay: Duration::from_us(1),
    };
    let mut sim = Simulator::new(&topo, SimConfig::default()).unwrap();
    sim.add_flow(transfer(2 << 20)).unwrap(); // host 0 to host 1: same edge switch
    sim.add_flow(FlowSpec {
        dst: 13,
        ..transfer(2 << 20)
    })
    .unwrap();
    // Aggregation switch 0 (pod 0) loses its first core uplink, and edge switch 0
    // its first uplink, during the transfer.
    let core = sim.link(LinkKind::AggUp, 0).unwrap();
    let edge = sim.link(LinkKind::EdgeUp, 0).unwrap();
    sim.schedule_link_change(Instant::from_us(40), core, LinkChange::Fail)
        .unwrap();
    sim.schedule_link_change(Instant::from_us(40), edge, LinkChange::Fail)
        .unwrap();
    let end = sim.run(Instant::from_us(200_000), &mut |_| {});
    assert_eq!(end, RunEnd::Done);
    let m = sim.metrics();
    assert!(m.flows.iter().all(|f| f.delivered == 2 << 20 && !f.failed));
    let s = sim.link_stats(edge).unwrap();
    assert!(
        s.failed && s.sent_packets > 0,
        "the uplink carried packets before it failed"
    );
}

#[test]
fn a_rate_change_slows_the_transfer_and_the_ideal_follows() {
    let mut base = Simulator::new(&four_paths(), SimConfig::default()).unwrap();
    base.add_flow(transfer(4 << 20)).unwrap();
    base.run(Instant::from_us(100_000), &mut |_| {});

    let mut slow = Simulator::new(&four_paths(), SimConfig::default()).unwrap();
    slow.add_flow(transfer(4 << 20)).unwrap();
    let path = slow.parallel_path_link(0).unwrap();
    slow.schedule_link_change(Instant::from_us(50), path, LinkChange::Rate(5.0))
        .unwrap();
    slow.schedule_link_change(
        Instant::from_us(50),
        path,
        LinkChange::Delay(Duration::from_us(8)),
    )
    .unwrap();
    slow.run(Instant::from_us(100_000), &mut |_| {});
    assert!(
        fct(&slow) > fct(&base),
        "{:?} vs {:?}",
        fct(&slow),
        fct(&base)
    );
    let m = slow.metrics();
    // 100 Gbit/s for 50 us, then 80: weighted by time over the measured span.
    let w = m.window.as_us_f64();
    let expected = (100.0 * 50.0 + 80.0 * (w - 50.0)) / w;
    assert!(
        (m.ideal_gbps - expected).abs() < 1e-6,
        "{} vs {expected}",
        m.ideal_gbps
    );
    assert!(
        m.utilization > 0.7 && m.utilization <= 1.0,
        "{}",
        m.utilization
    );
    assert_eq!(slow.link_stats(path).unwrap().gbps, 5.0);
    assert!(slow.link_stats(path).unwrap().sent_bytes < base.link_stats(path).unwrap().sent_bytes);
}

/// Fig. 2: 16 long-lived flows, sender i to receiver 16 + i mod 4.
fn fig2_run(seed: u64, warmup_us: u64) -> (Simulator, Metrics) {
    let cfg = SimConfig {
        seed,
        ..SimConfig::default()
    };
    let mut sim = Simulator::new(&Topology::Fig2, cfg).unwrap();
    for i in 0..16 {
        sim.add_flow(FlowSpec {
            src: i,
            dst: 16 + i % 4,
            bytes: None,
            ..transfer(0)
        })
        .unwrap();
    }
    sim.set_warmup(Instant::from_us(warmup_us));
    sim.enable_trace(Duration::from_us(10), None).unwrap();
    let end = sim.run(Instant::from_us(400), &mut |_| {});
    assert_eq!(end, RunEnd::Deadline);
    let m = sim.metrics();
    (sim, m)
}

#[test]
fn same_seed_same_numbers_other_seed_other_numbers() {
    let (_, a) = fig2_run(7, 0);
    let (_, b) = fig2_run(7, 0);
    assert_eq!(a, b);
    let (_, c) = fig2_run(8, 0);
    assert_ne!((a.events, a.nic_ood.clone()), (c.events, c.nic_ood.clone()));
}

#[test]
fn fig2_long_flows_fill_the_spine_after_warmup() {
    let (sim, m) = fig2_run(1, 150);
    assert_eq!(m.window, Duration::from_us(250));
    let (_, whole) = fig2_run(1, 0);
    assert!(
        m.nic_ood.count() < whole.nic_ood.count(),
        "warm-up samples dropped"
    );
    assert_eq!(
        m.events,
        whole.events + 1,
        "the warm-up changes what is measured, not the run (one event: the warm-up)"
    );
    assert_eq!(m.ideal_gbps, 400.0, "four 100G spine paths");
    assert!(m.goodput_gbps <= m.throughput_gbps);
    assert!(
        m.utilization > 0.8 && m.utilization < 1.01,
        "{}",
        m.utilization
    );
    let jain = m.fairness_jain.unwrap();
    assert!(jain > 0.8 && jain <= 1.0, "{jain}");
    // Per-flow goodputs: one per long flow, summing to the aggregate (every flow
    // runs through the whole window).
    assert_eq!(m.long_flow_gbps.len(), m.flows.len());
    let sum: f64 = m.long_flow_gbps.iter().sum();
    assert!(
        (sum - m.goodput_gbps).abs() < 0.01 * m.goodput_gbps,
        "{sum} vs {}",
        m.goodput_gbps
    );
    assert!(m.nic_ood.count() > 0);
    assert!(m.max_interpath_queue_diff_bytes > 0);
    assert_eq!(sim.path_links().len(), 4);
    assert_eq!(sim.path_links()[0], sim.link(LinkKind::EdgeUp, 0).unwrap());
    let tr = sim.trace().unwrap();
    assert_eq!(tr.links.len(), 4);
    assert!(
        (40..=42).contains(&tr.samples.len()),
        "{}",
        tr.samples.len()
    );
    assert!(tr
        .samples
        .iter()
        .any(|s| s.queue_bytes.iter().any(|&q| q > 0)));
    assert!(m
        .flows
        .iter()
        .all(|f| f.delivered_in_window > 0 && f.finish.is_none()));
}

#[test]
fn long_lived_flows_stop_and_the_run_ends() {
    let mut sim = Simulator::new(&four_paths(), SimConfig::default()).unwrap();
    sim.add_flow(FlowSpec {
        bytes: None,
        stop: Some(Instant::from_us(300)),
        ..transfer(0)
    })
    .unwrap();
    let end = sim.run(Instant::from_us(10_000), &mut |_| {});
    assert_eq!(end, RunEnd::Done);
    assert_eq!(sim.now(), Instant::from_us(300));
    let m = sim.metrics();
    assert_eq!(m.flows[0].stop, Some(Instant::from_us(300)));
    assert!(m.goodput_gbps > 50.0, "{}", m.goodput_gbps);
    assert_eq!(m.fairness_jain, Some(1.0));
}

#[test]
fn single_path_flows_are_never_reordered() {
    // An 8-to-1 incast on a fat tree where each flow uses one logical path: every
    // packet of a flow takes the same FIFO route, so nothing arrives out of order.
    let topo = Topology::FatTree {
        k: 4,
        gbps: 100.0,
        link_delay: Duration::from_us(1),
    };
    let mut sim = Simulator::new(&topo, SimConfig::default()).unwrap();
    for src in 4..12 {
        sim.add_flow(FlowSpec {
            src,
            dst: 0,
            paths: Some(1),
            ..transfer(256 * 1024)
        })
        .unwrap();
    }
    assert_eq!(
        sim.run(Instant::from_us(100_000), &mut |_| {}),
        RunEnd::Done
    );
    let m = sim.metrics();
    assert_eq!(m.flows_completed, 8);
    assert!(m.nic_ood.count() > 1000);
    assert_eq!(m.nic_ood.max(), 0);
    assert_eq!(m.nic_rbo.max(), 0);
    assert!((m.ideal_gbps - 100.0).abs() < 1e-6, "the receiver's link");
}
