//! Topologies and ECMP routing: every pair reachable over shortest paths, the
//! equal-cost path counts of the paper's Clos, paths spread over next hops, the
//! same hash giving the same route, and clear errors for impossible topologies.

use rondo_proto::time::{Duration, Instant};
use rondo_proto::FlowConfig;
use rondo_sim::{
    FlowSpec, LinkId, LinkKind, PathSpec, Routing, SimConfig, SimError, Simulator, SwitchConfig,
    Topology,
};
use std::collections::BTreeSet;

/// A k-ary fat tree whose switches hash (ECMP), as this file's routes assume
/// (the default steers: `net_routing_modes.rs`).
fn fattree(k: u32, seed: u64) -> Simulator {
    let topo = Topology::FatTree {
        k,
        gbps: 100.0,
        link_delay: Duration::from_us(1),
    };
    Simulator::new(
        &topo,
        SimConfig {
            seed,
            switch: SwitchConfig {
                routing: Routing::Ecmp,
                ..SwitchConfig::default()
            },
            ..SimConfig::default()
        },
    )
    .unwrap()
}

#[test]
fn fattree_routes_every_pair_over_shortest_paths() {
    let sim = fattree(4, 1);
    let n = sim.hosts();
    assert_eq!(n, 16);
    for s in 0..n {
        for d in 0..n {
            if s == d {
                continue;
            }
            let route = sim.route(s, d, 0, 0).unwrap();
            assert_eq!(route[0], sim.link(LinkKind::HostUp, s).unwrap());
            assert_eq!(
                *route.last().unwrap(),
                sim.link(LinkKind::HostDown, d).unwrap()
            );
            let (same_edge, same_pod) = (s / 2 == d / 2, s / 4 == d / 4);
            let (hops, ecmp) = match (same_edge, same_pod) {
                (true, _) => (2, 1),
                (false, true) => (4, 2),
                _ => (6, 4),
            };
            assert_eq!(route.len(), hops, "{s} -> {d}");
            assert_eq!(sim.equal_cost_paths(s, d).unwrap(), ecmp, "{s} -> {d}");
        }
    }
}

#[test]
fn logical_paths_spread_over_next_hops_and_the_same_hash_keeps_its_route() {
    let sim = fattree(4, 1);
    let routes: Vec<Vec<LinkId>> = (0..64).map(|p| sim.route(0, 15, 7, p).unwrap()).collect();
    let distinct: BTreeSet<&Vec<LinkId>> = routes.iter().collect();
    assert_eq!(
        distinct.len(),
        4,
        "64 logical paths cover the 4 equal-cost paths"
    );
    // Both aggregation uplinks of the source edge switch are used.
    let uplinks: BTreeSet<LinkId> = routes.iter().map(|r| r[1]).collect();
    assert_eq!(uplinks.len(), 2);
    // Same packet key, same route: in this simulator and in another one with the seed.
    let again = fattree(4, 1);
    for (p, r) in routes.iter().enumerate() {
        assert_eq!(sim.route(0, 15, 7, p as u16).unwrap(), *r);
        assert_eq!(again.route(0, 15, 7, p as u16).unwrap(), *r);
    }
    // Another seed salts the hashes differently.
    let other = fattree(4, 2);
    let moved = (0..64)
        .filter(|&p| other.route(0, 15, 7, p).unwrap() != routes[p as usize])
        .count();
    assert!(moved > 0);
    // With few logical paths, collisions happen: 4 paths rarely land on 4 routes.
    let collide = (0..32u32)
        .filter(|&f| {
            let r: BTreeSet<Vec<LinkId>> =
                (0..4).map(|p| sim.route(0, 15, f, p).unwrap()).collect();
            r.len() < 4
        })
        .count();
    assert!(collide > 0, "ECMP hashing never collided in 32 flows");
}

#[test]
fn clos3_has_the_papers_equal_cost_paths() {
    let sim = Simulator::new(
        &Topology::Clos3 {
            oversubscription: 1,
        },
        SimConfig::default(),
    )
    .unwrap();
    assert_eq!(sim.hosts(), 320);
    assert_eq!(sim.equal_cost_paths(0, 1).unwrap(), 1); // same ToR
    assert_eq!(sim.equal_cost_paths(0, 16).unwrap(), 4); // same pod
    assert_eq!(sim.equal_cost_paths(0, 64).unwrap(), 16); // across pods
    assert_eq!(sim.route(0, 300, 1, 3).unwrap().len(), 6);
    let over = Simulator::new(
        &Topology::Clos3 {
            oversubscription: 4,
        },
        SimConfig::default(),
    )
    .unwrap();
    assert_eq!(over.equal_cost_paths(0, 16).unwrap(), 4);
    assert_eq!(over.equal_cost_paths(0, 64).unwrap(), 4);
    assert!(
        over.link(LinkKind::AggUp, 5 * 4).is_none(),
        "one core uplink per aggregation switch"
    );
    assert!(sim.link(LinkKind::AggUp, 5 * 4 * 4 - 1).is_some());
}

#[test]
fn a_flow_across_pods_of_a_fattree_completes_on_all_equal_cost_paths() {
    let mut sim = fattree(4, 3);
    let f = sim
        .add_flow(FlowSpec {
            src: 0,
            dst: 13,
            start: Instant::ZERO,
            bytes: Some(1 << 20),
            stop: None,
            paths: None,
            cfg: FlowConfig::default(),
            group: 5,
            ..FlowSpec::transfer(0, 13, 1)
        })
        .unwrap();
    sim.run(Instant::from_us(20_000), &mut |_| {});
    let m = sim.metrics();
    let r = &m.flows[f];
    assert_eq!((r.paths, r.group, r.delivered), (4, 5, 1 << 20));
    assert!(r.finish.is_some());
    // Both uplinks of host 0's edge switch carried data.
    for j in 0..2 {
        let up = sim.link(LinkKind::EdgeUp, j).unwrap();
        assert!(
            sim.link_stats(up).unwrap().sent_packets > 0,
            "uplink {j} unused"
        );
    }
}

#[test]
fn impossible_topologies_are_named() {
    let err = |t: Topology| match Simulator::new(&t, SimConfig::default()) {
        Err(e) => e,
        Ok(_) => panic!("{t:?} was accepted"),
    };
    let odd = err(Topology::FatTree {
        k: 3,
        gbps: 100.0,
        link_delay: Duration::ZERO,
    });
    assert!(
        matches!(odd, SimError::Topology { .. }) && odd.to_string().contains("even"),
        "{odd}"
    );
    let none = err(Topology::Parallel {
        host_gbps: 100.0,
        paths: vec![],
    });
    assert!(none.to_string().contains("1 to 1024 paths"), "{none}");
    let zero = err(Topology::Parallel {
        host_gbps: 100.0,
        paths: vec![PathSpec {
            gbps: 0.0,
            delay: Duration::ZERO,
        }],
    });
    assert!(zero.to_string().contains("paths[0].gbps"), "{zero}");
    let nan = err(Topology::Parallel {
        host_gbps: f64::NAN,
        paths: vec![],
    });
    assert!(nan.to_string().contains("host_gbps"), "{nan}");
    assert!(err(Topology::Clos3 {
        oversubscription: 2
    })
    .to_string()
    .contains("1 or 4"));
    let cfg = SimConfig {
        mtu: 10,
        ..SimConfig::default()
    };
    assert!(matches!(
        Simulator::new(&Topology::Fig2, cfg),
        Err(SimError::Config { name: "mtu", .. })
    ));
}

#[test]
fn bad_flows_are_refused() {
    let mut sim = Simulator::new(&Topology::Fig2, SimConfig::default()).unwrap();
    let spec = FlowSpec::transfer(0, 16, 1000);
    assert!(sim
        .add_flow(FlowSpec {
            dst: 0,
            ..spec.clone()
        })
        .is_err());
    assert!(sim
        .add_flow(FlowSpec {
            dst: 20,
            ..spec.clone()
        })
        .is_err());
    assert!(sim
        .add_flow(FlowSpec {
            bytes: Some(0),
            ..spec.clone()
        })
        .is_err());
    assert!(sim
        .add_flow(FlowSpec {
            paths: Some(0),
            ..spec.clone()
        })
        .is_err());
    let bad_cfg = FlowConfig {
        alpha: 2.0,
        ..FlowConfig::default()
    };
    assert!(matches!(
        sim.add_flow(FlowSpec {
            cfg: bad_cfg,
            ..spec.clone()
        }),
        Err(SimError::Endpoint(_))
    ));
    assert_eq!(sim.add_flow(spec).unwrap(), 0);
    assert!(sim
        .schedule_link_change(Instant::ZERO, LinkId(10_000), rondo_sim::LinkChange::Fail)
        .is_err());
}
