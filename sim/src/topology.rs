//! Topologies the simulator builds, and the names of their links.
//!
//! Hosts are numbered from 0 in every topology. Each host has one NIC link up to a
//! switch and one or more links down from a switch; every other link joins two
//! switches. [`LinkKind`] and an index name a link (see [`crate::Simulator::link`]).

use crate::error::{topo_err, SimError};
use crate::net::fabric::{Fabric, FabricBuilder};
use rondo_proto::time::Duration;

/// One path of the [`Topology::Parallel`] topology (both directions).
#[derive(Clone, Debug, PartialEq)]
pub struct PathSpec {
    /// Line rate, Gbit/s.
    pub gbps: f64,
    /// One-way propagation delay.
    pub delay: Duration,
}

/// A network to simulate.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Topology {
    /// Two hosts, 0 (sender side) and 1, joined by K parallel paths: the paper's
    /// testbed (Fig. 9a). Host 0's NIC feeds a switch whose output `i` is path `i`
    /// (logical path id `i mod K`, no hashing) to host 1; host 1 answers over
    /// path `i` in the other direction, with the same rate and delay. NIC links
    /// run at `host_gbps` with no delay.
    Parallel {
        /// NIC rate of both hosts, Gbit/s.
        host_gbps: f64,
        /// The paths.
        paths: Vec<PathSpec>,
    },
    /// The paper's Fig. 2 (used again in Fig. 19): 16 senders (hosts 0-15) under
    /// leaf 0, 4 receivers (hosts 16-19) under leaf 1, and four spines; each leaf
    /// has one link to each spine. Every link is 100 Gbit/s with 1 us of
    /// propagation delay, so leaf 0's four uplinks (P1-P4) are the bottleneck.
    Fig2,
    /// The paper's 3-tier Clos (§6.2.1): 320 servers in 5 pods; a pod has 4 ToRs
    /// (16 servers each, 100 Gbit/s) and 4 aggregation switches, each ToR linked to
    /// every aggregation switch of its pod at 400 Gbit/s. With
    /// `oversubscription = 1` there are 16 cores: aggregation switch `j` of every
    /// pod links to cores `4j..4j+3` (16 equal-cost paths across pods). With
    /// `oversubscription = 4` only 4 cores are active: aggregation switch `j` links
    /// to core `j` (the pod uplinks carry a quarter of the pod's host capacity).
    /// Every link has 1 us of propagation delay.
    Clos3 {
        /// 1 (non-blocking) or 4.
        oversubscription: u32,
    },
    /// A k-ary fat tree: k pods of k/2 edge and k/2 aggregation switches, (k/2)^2
    /// cores, k/2 hosts per edge switch (k^3/4 hosts); every link at `gbps` with
    /// `link_delay`.
    FatTree {
        /// Even, 2 to 64.
        k: u32,
        /// Rate of every link, Gbit/s.
        gbps: f64,
        /// Propagation delay of every link.
        link_delay: Duration,
    },
}

/// What kind of link a name refers to; with an index it names one link.
///
/// | kind | topologies | index |
/// |---|---|---|
/// | `HostUp` | all | host: its NIC to its switch |
/// | `HostDown` | fig2, clos3, fattree | host: its switch to it |
/// | `PathForward` | parallel | path: host 0 to host 1 |
/// | `PathReverse` | parallel | path: host 1 to host 0 |
/// | `EdgeUp` | fig2, clos3, fattree | `edge * U + j`: edge (leaf/ToR) switch to its j-th uplink switch (spine/aggregation in its pod) |
/// | `EdgeDown` | fig2, clos3, fattree | `edge * U + j`: the same pair, downwards |
/// | `AggUp` | clos3, fattree | `agg * C + j`: aggregation switch to its j-th core |
/// | `AggDown` | clos3, fattree | `agg * C + j`: the same pair, downwards |
///
/// Edge switches are numbered pod by pod (fig2: leaf 0 then leaf 1), aggregation
/// switches likewise; U is the number of uplinks of an edge switch (4 in fig2 and
/// clos3, k/2 in a fat tree) and C that of an aggregation switch (4 or 1 in clos3,
/// k/2 in a fat tree).
///
/// Scenario files name a kind in snake case (`link = "edge_up"` in `[[events]]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum LinkKind {
    /// Host NIC to its switch.
    HostUp,
    /// Switch to host.
    HostDown,
    /// Parallel topology, host 0 to host 1.
    PathForward,
    /// Parallel topology, host 1 to host 0.
    PathReverse,
    /// Edge switch up to the next tier.
    EdgeUp,
    /// Next tier down to an edge switch.
    EdgeDown,
    /// Aggregation switch up to a core.
    AggUp,
    /// Core down to an aggregation switch.
    AggDown,
}

impl LinkKind {
    pub(crate) const COUNT: usize = 8;
    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

fn check_gbps(name: &str, gbps: f64) -> Result<(), SimError> {
    if gbps.is_finite() && gbps > 0.0 && gbps <= 100_000.0 {
        Ok(())
    } else {
        Err(topo_err(
            format!("{name} = {gbps} Gbit/s"),
            "a rate above 0 and at most 100000 Gbit/s",
        ))
    }
}

impl Topology {
    /// Builds the links and the forwarding tables.
    pub(crate) fn build(&self) -> Result<Fabric, SimError> {
        match self {
            Topology::Parallel { host_gbps, paths } => parallel(*host_gbps, paths),
            Topology::Fig2 => fig2(),
            Topology::Clos3 { oversubscription } => {
                let core_uplinks = match oversubscription {
                    1 => 4,
                    4 => 1,
                    o => return Err(topo_err(format!("clos3 oversubscription = {o}"), "1 or 4")),
                };
                three_tier(&Tiers {
                    pods: 5,
                    edges: 4,
                    aggs: 4,
                    hosts_per_edge: 16,
                    core_uplinks,
                    host_gbps: 100.0,
                    fabric_gbps: 400.0,
                    delay: Duration::from_us(1),
                })
            }
            Topology::FatTree {
                k,
                gbps,
                link_delay,
            } => {
                if *k < 2 || *k > 64 || k % 2 != 0 {
                    return Err(topo_err(
                        format!("fattree k = {k}"),
                        "an even k from 2 to 64",
                    ));
                }
                check_gbps("fattree gbps", *gbps)?;
                let h = k / 2;
                three_tier(&Tiers {
                    pods: *k,
                    edges: h,
                    aggs: h,
                    hosts_per_edge: h,
                    core_uplinks: h,
                    host_gbps: *gbps,
                    fabric_gbps: *gbps,
                    delay: *link_delay,
                })
            }
        }
    }
}

fn parallel(host_gbps: f64, paths: &[PathSpec]) -> Result<Fabric, SimError> {
    check_gbps("parallel host_gbps", host_gbps)?;
    if paths.is_empty() || paths.len() > 1024 {
        return Err(topo_err(
            format!("parallel with {} paths", paths.len()),
            "1 to 1024 paths",
        ));
    }
    for (i, p) in paths.iter().enumerate() {
        check_gbps(&format!("parallel paths[{i}].gbps"), p.gbps)?;
    }
    let mut b = FabricBuilder::new(2, 2);
    let (s0, s1) = (b.switch(0), b.switch(1));
    let a_up = b.link(0, s0, host_gbps, Duration::ZERO, LinkKind::HostUp);
    let b_up = b.link(1, s1, host_gbps, Duration::ZERO, LinkKind::HostUp);
    let mut fwd = Vec::new();
    let mut rev = Vec::new();
    for p in paths {
        fwd.push(b.link(s0, 1, p.gbps, p.delay, LinkKind::PathForward));
        rev.push(b.link(s1, 0, p.gbps, p.delay, LinkKind::PathReverse));
    }
    b.by_path(s0);
    b.by_path(s1);
    b.cut(0..1, vec![a_up], rev);
    b.cut(1..2, vec![b_up], fwd.clone());
    b.path_ports(fwd);
    b.finish()
}

fn fig2() -> Result<Fabric, SimError> {
    const SPINES: u32 = 4;
    let gbps = 100.0;
    let d = Duration::from_us(1);
    let mut b = FabricBuilder::new(20, 2 + SPINES);
    let leaves = [b.switch(0), b.switch(1)];
    for h in 0..20 {
        let leaf = leaves[usize::from(h >= 16)];
        let up = b.link(h, leaf, gbps, d, LinkKind::HostUp);
        let down = b.link(leaf, h, gbps, d, LinkKind::HostDown);
        b.cut(h..h + 1, vec![up], vec![down]);
    }
    let mut ups = [Vec::new(), Vec::new()];
    let mut downs = [Vec::new(), Vec::new()];
    for (l, &leaf) in leaves.iter().enumerate() {
        for s in 0..SPINES {
            let spine = b.switch(2 + s);
            ups[l].push(b.link(leaf, spine, gbps, d, LinkKind::EdgeUp));
            downs[l].push(b.link(spine, leaf, gbps, d, LinkKind::EdgeDown));
        }
    }
    let [up0, up1] = ups;
    let [down0, down1] = downs;
    b.cut(0..16, up0.clone(), down0);
    b.cut(16..20, up1, down1);
    b.path_ports(up0);
    b.finish()
}

struct Tiers {
    pods: u32,
    edges: u32,
    aggs: u32,
    hosts_per_edge: u32,
    core_uplinks: u32,
    host_gbps: f64,
    fabric_gbps: f64,
    delay: Duration,
}

fn three_tier(t: &Tiers) -> Result<Fabric, SimError> {
    let edges = t.pods * t.edges;
    let aggs = t.pods * t.aggs;
    let cores = t.aggs * t.core_uplinks;
    let hosts = edges * t.hosts_per_edge;
    let mut b = FabricBuilder::new(hosts, edges + aggs + cores);
    let d = t.delay;
    for h in 0..hosts {
        let edge = b.switch(h / t.hosts_per_edge);
        let up = b.link(h, edge, t.host_gbps, d, LinkKind::HostUp);
        let down = b.link(edge, h, t.host_gbps, d, LinkKind::HostDown);
        b.cut(h..h + 1, vec![up], vec![down]);
    }
    for e in 0..edges {
        let pod = e / t.edges;
        let (mut up, mut down) = (Vec::new(), Vec::new());
        for j in 0..t.aggs {
            let agg = b.switch(edges + pod * t.aggs + j);
            let edge = b.switch(e);
            up.push(b.link(edge, agg, t.fabric_gbps, d, LinkKind::EdgeUp));
            down.push(b.link(agg, edge, t.fabric_gbps, d, LinkKind::EdgeDown));
        }
        let first = e * t.hosts_per_edge;
        b.cut(first..first + t.hosts_per_edge, up, down);
    }
    for pod in 0..t.pods {
        let (mut up, mut down) = (Vec::new(), Vec::new());
        for j in 0..t.aggs {
            let agg = b.switch(edges + pod * t.aggs + j);
            for c in 0..t.core_uplinks {
                let core = b.switch(edges + aggs + j * t.core_uplinks + c);
                up.push(b.link(agg, core, t.fabric_gbps, d, LinkKind::AggUp));
                down.push(b.link(core, agg, t.fabric_gbps, d, LinkKind::AggDown));
            }
        }
        let per_pod = t.edges * t.hosts_per_edge;
        b.cut(pod * per_pod..(pod + 1) * per_pod, up, down);
    }
    b.finish()
}
