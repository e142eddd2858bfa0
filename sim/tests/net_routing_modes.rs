//! Switch routing modes (`SwitchConfig::routing`), driven with raw datagrams of
//! one packet key over a k=4 fat tree (host 0 -> host 15, two edge uplinks):
//! ECMP keeps the key on one uplink, spray splits it evenly, adaptive prefers the
//! shorter queue; every mode skips failed links; parallel-path switches keep
//! routing by logical path. On the 320-host Clos, steering gives a flow's logical
//! paths distinct routes where ECMP hashing lets them share.

use rondo_proto::time::{Duration, Instant};
use rondo_proto::Priority;
use rondo_sim::{
    LinkChange, LinkId, LinkKind, PathSpec, Routing, SimConfig, Simulator, SwitchConfig, Topology,
};

const MTU: usize = 1500;
const PACKETS: usize = 400;

/// `topo` with switches that route by `routing`, seeded with `seed`.
fn with_routing(topo: &Topology, seed: u64, routing: Routing) -> Simulator {
    let cfg = SimConfig {
        seed,
        switch: SwitchConfig {
            routing,
            ..SwitchConfig::default()
        },
        ..SimConfig::default()
    };
    Simulator::new(topo, cfg).unwrap()
}

fn fattree(routing: Routing) -> Simulator {
    let topo = Topology::FatTree {
        k: 4,
        gbps: 100.0,
        link_delay: Duration::from_us(1),
    };
    with_routing(&topo, 5, routing)
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
    for routing in [
        Routing::Ecmp,
        Routing::Spray,
        Routing::Adaptive,
        Routing::Steer,
    ] {
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

fn clos3(routing: Routing) -> Simulator {
    with_routing(
        &Topology::Clos3 {
            oversubscription: 1,
        },
        3,
        routing,
    )
}

/// How many of the logical paths `0..paths` of flow `flow` from `src` to `dst`
/// take each distinct route, largest first.
fn route_counts(sim: &Simulator, src: usize, dst: usize, flow: u32, paths: u16) -> Vec<usize> {
    let mut routes: Vec<Vec<LinkId>> = (0..paths)
        .map(|p| sim.route(src, dst, flow, p).unwrap())
        .collect();
    routes.sort();
    let mut counts: Vec<usize> = routes
        .chunk_by(|a, b| a == b)
        .map(|same| same.len())
        .collect();
    counts.sort_unstable_by(|a, b| b.cmp(a));
    counts
}

/// Host 0 to host 64 crosses pods (16 routes), to host 16 stays in the pod (4).
/// Steered, a flow with as many logical paths as routes uses every route once
/// and one with 16 logical paths in the pod puts 4 on each route, for every
/// flow; hashed, some of a flow's paths share a route and others go unused (the
/// uneven load that reorders: issue 12).
#[test]
fn steering_gives_a_flows_logical_paths_distinct_routes() {
    let steer = clos3(Routing::Steer);
    let ecmp = clos3(Routing::Ecmp);
    let mut hashed_shared = 0;
    for flow in 0..32 {
        assert_eq!(
            route_counts(&steer, 0, 64, flow, 16),
            [1; 16],
            "flow {flow}"
        );
        assert_eq!(route_counts(&steer, 0, 16, flow, 4), [1; 4], "flow {flow}");
        assert_eq!(route_counts(&steer, 0, 16, flow, 16), [4; 4], "flow {flow}");
        // Fewer logical paths than routes: distinct routes still.
        assert_eq!(route_counts(&steer, 0, 64, flow, 5), [1; 5], "flow {flow}");
        if route_counts(&ecmp, 0, 64, flow, 16).len() < 16 {
            hashed_shared += 1;
        }
    }
    // Sixteen hashed paths all on distinct routes: 16!/16^16, about 1 in a million.
    assert_eq!(hashed_shared, 32);
}

/// The per-flow offset spreads flows of one logical path over the routes, as a
/// hash would: 64 flows from host 0 to host 64 use at least 12 of the 16.
#[test]
fn steered_single_path_flows_spread_over_the_routes() {
    let steer = clos3(Routing::Steer);
    let mut routes: Vec<Vec<LinkId>> = (0..64).map(|f| steer.route(0, 64, f, 0).unwrap()).collect();
    routes.sort();
    routes.dedup();
    assert!(routes.len() >= 12, "{} routes", routes.len());
}
