//! Switch routing modes (`SwitchConfig::routing`), driven with raw datagrams of
//! one packet key over a k=4 fat tree (host 0 -> host 15, two edge uplinks):
//! ECMP keeps the key on one uplink, spray splits it evenly, adaptive prefers the
//! shorter queue; every mode skips failed links; parallel-path switches keep
//! routing by logical path.

use rondo_proto::time::{Duration, Instant};
use rondo_proto::Priority;
use rondo_sim::{
    LinkChange, LinkId, LinkKind, PathSpec, Routing, SimConfig, Simulator, SwitchConfig, Topology,
};

const MTU: usize = 1500;
const PACKETS: usize = 400;

fn fattree(routing: Routing) -> Simulator {
    let topo = Topology::FatTree {
        k: 4,
        gbps: 100.0,
        link_delay: Duration::from_us(1),
    };
    let cfg = SimConfig {
        seed: 5,
        switch: SwitchConfig {
            routing,
            ..SwitchConfig::default()
        },
        ..SimConfig::default()
    };
    Simulator::new(&topo, cfg).unwrap()
}

/// Sends `PACKETS` data datagrams 0 -> 15 on logical path 0, runs 1 ms, and
/// returns the packets each uplink of host 0's edge switch carried.
fn uplink_split(sim: &mut Simulator) -> [u64; 2] {
    for _ in 0..PACKETS {
        sim.send_raw(0, 15, 0, Priority::Data, &[0u8; MTU]).unwrap();
    }
    sim.run(Instant::from_us(1000), &mut |_| {});
    let delivered = sim
        .link_stats(sim.link(LinkKind::HostDown, 15).unwrap())
        .unwrap()
        .sent_packets;
    assert_eq!(delivered, PACKETS as u64, "every packet reaches host 15");
    [0, 1].map(|j| sent(sim, uplink(sim, j)))
}

fn uplink(sim: &Simulator, j: usize) -> LinkId {
    sim.link(LinkKind::EdgeUp, j).unwrap()
}

fn sent(sim: &Simulator, l: LinkId) -> u64 {
    sim.link_stats(l).unwrap().sent_packets
}

#[test]
fn ecmp_keeps_one_key_on_one_uplink_and_spray_splits_it() {
    let split = uplink_split(&mut fattree(Routing::Ecmp));
    assert!(
        split.contains(&0) && split.contains(&(PACKETS as u64)),
        "{split:?}"
    );
    let split = uplink_split(&mut fattree(Routing::Spray));
    assert!(split.iter().all(|&n| (150..=250).contains(&n)), "{split:?}");
    // The same seed sprays the same way.
    assert_eq!(uplink_split(&mut fattree(Routing::Spray)), split);
}

#[test]
fn adaptive_routing_avoids_the_longer_queue() {
    // Uplink 1 runs at 10 Gbit/s: a packet queues there while the 100 Gbit/s
    // uplink 0 drains as fast as the host sends.
    let run = |routing| {
        let mut sim = fattree(routing);
        let slow = uplink(&sim, 1);
        sim.schedule_link_change(Instant::ZERO, slow, LinkChange::Rate(10.0))
            .unwrap();
        uplink_split(&mut sim)
    };
    let adaptive = run(Routing::Adaptive);
    assert!(adaptive[1] < PACKETS as u64 / 8, "{adaptive:?}");
    assert!(
        adaptive[1] > 0,
        "ties at empty queues go either way: {adaptive:?}"
    );
    let spray = run(Routing::Spray);
    assert!(spray[1] > PACKETS as u64 / 3, "{spray:?}");
}

#[test]
fn every_mode_skips_a_failed_uplink() {
    for routing in [Routing::Ecmp, Routing::Spray, Routing::Adaptive] {
        let mut sim = fattree(routing);
        let down = uplink(&sim, 0);
        sim.schedule_link_change(Instant::ZERO, down, LinkChange::Fail)
            .unwrap();
        let split = uplink_split(&mut sim);
        assert_eq!(split, [0, PACKETS as u64], "{routing:?}");
    }
}

#[test]
fn parallel_path_switches_route_by_logical_path_in_every_mode() {
    for routing in [Routing::Spray, Routing::Adaptive] {
        let topo = Topology::Parallel {
            host_gbps: 100.0,
            paths: vec![
                PathSpec {
                    gbps: 100.0,
                    delay: Duration::from_us(1),
                };
                4
            ],
        };
        let cfg = SimConfig {
            switch: SwitchConfig {
                routing,
                ..SwitchConfig::default()
            },
            ..SimConfig::default()
        };
        let mut sim = Simulator::new(&topo, cfg).unwrap();
        for _ in 0..50 {
            sim.send_raw(0, 1, 2, Priority::Data, &[0u8; MTU]).unwrap();
        }
        sim.run(Instant::from_us(1000), &mut |_| {});
        let used: Vec<u64> = (0..4)
            .map(|i| sent(&sim, sim.parallel_path_link(i).unwrap()))
            .collect();
        assert_eq!(used, [0, 0, 50, 0], "{routing:?}");
    }
}
