//! Switch queue features, driven with raw datagrams over the parallel topology
//! (host 0's NIC -> switch -> path link -> host 1): strict priority, the probe
//! drop threshold, per-queue and shared-buffer drops, ECN marking, PFC.

use rondo_proto::time::{Duration, Instant};
use rondo_proto::Priority;
use rondo_sim::{
    LinkChange, LinkKind, PathSpec, PfcConfig, SimConfig, Simulator, SwitchConfig, Topology,
};

const MTU: usize = 1500;

/// Two hosts with NICs of `host_gbps` and one path of `path_gbps`, 1 us delay.
fn one_path(host_gbps: f64, path_gbps: f64, switch: SwitchConfig) -> Simulator {
    let topo = Topology::Parallel {
        host_gbps,
        paths: vec![PathSpec {
            gbps: path_gbps,
            delay: Duration::from_us(1),
        }],
    };
    let cfg = SimConfig {
        mtu: MTU,
        switch,
        ..SimConfig::default()
    };
    let mut sim = Simulator::new(&topo, cfg).unwrap();
    sim.log_deliveries(true);
    sim
}

fn send(sim: &mut Simulator, priority: Priority, len: usize, count: usize) {
    for _ in 0..count {
        sim.send_raw(0, 1, 0, priority, &vec![0u8; len]).unwrap();
    }
}

fn run_to(sim: &mut Simulator, us: u64) {
    sim.run(Instant::from_us(us), &mut |_| {});
}

fn delivered_to_1(sim: &Simulator) -> Vec<Priority> {
    sim.deliveries()
        .iter()
        .filter(|d| d.host == 1)
        .map(|d| d.priority)
        .collect()
}

#[test]
fn control_overtakes_data_overtakes_probes() {
    // A 1 Gbit/s path serialises a 1500-byte packet in 12 us. Data A starts at
    // once; data B queues behind it, then a probe, then a control packet.
    let mut sim = one_path(100.0, 1.0, SwitchConfig::default());
    send(&mut sim, Priority::Data, MTU, 2);
    run_to(&mut sim, 1);
    send(&mut sim, Priority::Probe, MTU, 1);
    run_to(&mut sim, 2);
    send(&mut sim, Priority::Control, 64, 1);
    run_to(&mut sim, 100);
    assert_eq!(
        delivered_to_1(&sim),
        [
            Priority::Data,
            Priority::Control,
            Priority::Data,
            Priority::Probe
        ]
    );
}

#[test]
fn probes_beyond_the_probe_threshold_are_dropped() {
    // Two probes fit in the probe queue (the default threshold); one is serialising.
    let mut sim = one_path(100.0, 1.0, SwitchConfig::default());
    send(&mut sim, Priority::Probe, MTU, 10);
    run_to(&mut sim, 200);
    assert_eq!(delivered_to_1(&sim).len(), 3);
    let m = sim.metrics();
    assert_eq!(m.drops.probe, 7);
    assert_eq!(m.drops.switch(), 0);
    // Data is not subject to the probe threshold.
    let mut sim = one_path(100.0, 1.0, SwitchConfig::default());
    send(&mut sim, Priority::Data, MTU, 10);
    run_to(&mut sim, 200);
    assert_eq!(delivered_to_1(&sim).len(), 10);
}

#[test]
fn data_threshold_and_shared_buffer_drop_data() {
    let per_queue = SwitchConfig {
        data_queue_limit_bytes: 5 * MTU as u64,
        ..SwitchConfig::default()
    };
    let mut sim = one_path(100.0, 1.0, per_queue);
    send(&mut sim, Priority::Data, MTU, 20);
    run_to(&mut sim, 500);
    assert_eq!(delivered_to_1(&sim).len(), 6);
    let d = sim.metrics().drops;
    assert_eq!((d.switch_threshold, d.switch_buffer), (14, 0));

    let shared = SwitchConfig {
        buffer_bytes: 10 * MTU as u64,
        ..SwitchConfig::default()
    };
    let mut sim = one_path(100.0, 1.0, shared);
    send(&mut sim, Priority::Data, MTU, 20);
    run_to(&mut sim, 500);
    assert_eq!(delivered_to_1(&sim).len(), 11);
    let d = sim.metrics().drops;
    assert_eq!((d.switch_threshold, d.switch_buffer), (0, 9));
}

#[test]
fn ecn_marking_follows_kmin_kmax_pmax() {
    // Hold the path (rate 0) so that packet k meets a queue of exactly k * MTU
    // bytes, then release it and read the marks in FIFO order.
    let mut sim = one_path(400.0, 100.0, SwitchConfig::default());
    let path = sim.parallel_path_link(0).unwrap();
    sim.schedule_link_change(Instant::ZERO, path, LinkChange::Rate(0.0))
        .unwrap();
    run_to(&mut sim, 1);
    let n = 400;
    send(&mut sim, Priority::Data, MTU, n);
    run_to(&mut sim, 50);
    sim.schedule_link_change(sim.now(), path, LinkChange::Rate(100.0))
        .unwrap();
    run_to(&mut sim, 200);
    let marks: Vec<bool> = sim
        .deliveries()
        .iter()
        .filter(|d| d.host == 1)
        .map(|d| d.ce)
        .collect();
    assert_eq!(marks.len(), n);
    let (kmin, kmax, pmax) = (100.0 * 1024.0, 400.0 * 1024.0, 0.2);
    let (mut expected, mut var, mut observed) = (0.0, 0.0, 0);
    for (k, &ce) in marks.iter().enumerate() {
        let q = (k * MTU) as f64;
        if q <= kmin {
            assert!(!ce, "packet {k} marked below Kmin");
        } else if q >= kmax {
            assert!(ce, "packet {k} not marked above Kmax");
        } else {
            let p = pmax * (q - kmin) / (kmax - kmin);
            expected += p;
            var += p * (1.0 - p);
            observed += usize::from(ce);
        }
    }
    let sd = var.sqrt();
    assert!(
        (observed as f64 - expected).abs() < 4.0 * sd,
        "{observed} marks between Kmin and Kmax, expected {expected:.1} +- {sd:.1}"
    );
    assert!(observed > 0);
    let stats = sim.link_stats(path).unwrap();
    assert_eq!(
        stats.ce_marked as usize,
        marks.iter().filter(|&&c| c).count()
    );
}

#[test]
fn pfc_pauses_and_resumes_without_drops() {
    let xoff = 64 * 1024;
    let lossy = SwitchConfig {
        data_queue_limit_bytes: 200 * 1024,
        ..SwitchConfig::default()
    };
    let lossless = SwitchConfig {
        pfc: Some(PfcConfig {
            xoff_bytes: xoff,
            xon_bytes: 32 * 1024,
        }),
        ..lossy.clone()
    };
    let n = 1000;
    // Without PFC a 400G NIC overruns the 100G path's queue.
    let mut sim = one_path(400.0, 100.0, lossy);
    send(&mut sim, Priority::Data, MTU, n);
    run_to(&mut sim, 1000);
    assert!(sim.metrics().drops.switch_threshold > 0);
    assert!(delivered_to_1(&sim).len() < n);

    let mut sim = one_path(400.0, 100.0, lossless);
    send(&mut sim, Priority::Data, MTU, n);
    run_to(&mut sim, 1000);
    let m = sim.metrics();
    assert_eq!(m.drops.switch(), 0);
    assert_eq!(delivered_to_1(&sim).len(), n);
    let nic = sim.link(LinkKind::HostUp, 0).unwrap();
    assert!(
        sim.link_stats(nic).unwrap().pauses > 1,
        "paused and resumed repeatedly"
    );
    let q = sim.link_stats(sim.parallel_path_link(0).unwrap()).unwrap();
    assert!(
        q.max_queue_bytes <= xoff + MTU as u64,
        "queue {} above Xoff",
        q.max_queue_bytes
    );
}

#[test]
fn rate_and_delay_changes_apply_from_the_next_packet() {
    let mut sim = one_path(100.0, 10.0, SwitchConfig::default());
    send(&mut sim, Priority::Data, MTU, 1);
    let path = sim.parallel_path_link(0).unwrap();
    sim.schedule_link_change(Instant::from_us(10), path, LinkChange::Rate(1.0))
        .unwrap();
    sim.schedule_link_change(
        Instant::from_us(10),
        path,
        LinkChange::Delay(Duration::from_us(5)),
    )
    .unwrap();
    run_to(&mut sim, 10);
    send(&mut sim, Priority::Data, MTU, 1);
    run_to(&mut sim, 100);
    let at: Vec<Instant> = sim.deliveries().iter().map(|d| d.at).collect();
    // 120 ns on the NIC, 1.2 us on the 10G path, 1 us of propagation...
    // ...then 120 ns, 12 us on the 1G path and 5 us.
    assert_eq!(at, [Instant::from_ns(2_320), Instant::from_ns(27_120)]);
}

#[test]
fn the_event_heap_holds_links_not_packets() {
    let mut sim = one_path(100.0, 1.0, SwitchConfig::default());
    send(&mut sim, Priority::Data, MTU, 1000);
    run_to(&mut sim, 50);
    assert_eq!(sim.packets_in_flight(), 1000 - delivered_to_1(&sim).len());
    assert!(sim.packets_in_flight() > 900);
    // At most a serialisation and an arrival event per link.
    let links = sim.links().count();
    assert!(
        sim.pending_events() <= 2 * links,
        "{} events",
        sim.pending_events()
    );
    run_to(&mut sim, 20_000);
    assert_eq!(delivered_to_1(&sim).len(), 1000);
    assert_eq!(sim.packets_in_flight(), 0, "every slab slot came back");
}
