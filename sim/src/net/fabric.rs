//! The built network: links (as output ports), forwarding tables, link names and
//! the cuts used for the ideal aggregate. Pure data; the simulator moves packets.

use crate::error::{topo_err, SimError};
use crate::topology::LinkKind;
use rondo_proto::time::Duration;
use std::ops::Range;

/// No port / no node.
pub(crate) const NONE: u32 = u32::MAX;

/// One directed link.
#[derive(Clone, Debug)]
pub(crate) struct LinkSpec {
    pub from: u32,
    pub to: u32,
    pub bps: u64,
    pub delay: Duration,
    pub kind: LinkKind,
    pub index: u32,
}

/// A set of hosts and the links that leave (`up`) and enter (`down`) it: flows
/// from inside to outside share the capacity of `up`, the others that of `down`.
#[derive(Clone, Debug)]
pub(crate) struct Cut {
    pub hosts: Range<u32>,
    pub up: Vec<u32>,
    pub down: Vec<u32>,
}

/// Links and routes. Nodes `0..hosts` are hosts, `hosts..` switches.
#[derive(Debug)]
pub(crate) struct Fabric {
    pub hosts: u32,
    pub switches: u32,
    pub links: Vec<LinkSpec>,
    /// NIC link of each host.
    pub nic: Vec<u32>,
    /// Switch node above each host (the one its down links leave from).
    pub down_switch: Vec<u32>,
    /// Range in `down_links` of each host's down links.
    pub down_range: Vec<(u32, u32)>,
    pub down_links: Vec<u32>,
    /// Per switch: pick the next hop by path id instead of hashing.
    pub by_path: Vec<bool>,
    /// Per switch: its index among edge switches (those above a host), or NONE.
    pub edge_index: Vec<u32>,
    pub edge_count: u32,
    /// `fib[switch * edge_count + edge]`: range in `fib_links` of the equal-cost
    /// next hops towards that edge switch.
    pub fib: Vec<(u32, u32)>,
    pub fib_links: Vec<u32>,
    pub names: Vec<Vec<u32>>,
    pub cuts: Vec<Cut>,
    /// Links whose queues are compared for the inter-path queue difference.
    pub path_links: Vec<u32>,
}

impl Fabric {
    /// Switch index of a node (which must be a switch).
    pub fn switch_index(&self, node: u32) -> usize {
        (node - self.hosts) as usize
    }

    /// The equal-cost next hops at switch node `node` towards host `dst`.
    pub fn next_hops(&self, node: u32, dst: u32) -> &[u32] {
        let (start, len) = if self.down_switch[dst as usize] == node {
            self.down_range[dst as usize]
        } else {
            let s = self.switch_index(node);
            let e = self.edge_index[self.switch_index(self.down_switch[dst as usize])];
            self.fib[s * self.edge_count as usize + e as usize]
        };
        let list = if self.down_switch[dst as usize] == node {
            &self.down_links
        } else {
            &self.fib_links
        };
        &list[start as usize..(start + len) as usize]
    }

    /// Number of distinct shortest paths from `src` to `dst` (hosts, distinct).
    pub fn equal_cost_paths(&self, src: u32, dst: u32) -> u64 {
        let first = self.links[self.nic[src as usize] as usize].to;
        let mut memo = vec![None; self.switches as usize];
        self.count_paths(first, dst, &mut memo)
    }

    fn count_paths(&self, node: u32, dst: u32, memo: &mut [Option<u64>]) -> u64 {
        if node < self.hosts {
            return u64::from(node == dst);
        }
        let s = self.switch_index(node);
        if let Some(n) = memo[s] {
            return n;
        }
        let mut n = 0u64;
        for &l in self.next_hops(node, dst) {
            n = n.saturating_add(self.count_paths(self.links[l as usize].to, dst, memo));
        }
        memo[s] = Some(n);
        n
    }
}

/// Collects links, then computes the tables.
pub(crate) struct FabricBuilder {
    hosts: u32,
    switches: u32,
    links: Vec<LinkSpec>,
    names: Vec<Vec<u32>>,
    by_path: Vec<bool>,
    cuts: Vec<Cut>,
    path_links: Vec<u32>,
}

impl FabricBuilder {
    pub fn new(hosts: u32, switches: u32) -> FabricBuilder {
        FabricBuilder {
            hosts,
            switches,
            links: Vec::new(),
            names: vec![Vec::new(); LinkKind::COUNT],
            by_path: vec![false; switches as usize],
            cuts: Vec::new(),
            path_links: Vec::new(),
        }
    }

    /// Node id of switch `i`.
    pub fn switch(&self, i: u32) -> u32 {
        self.hosts + i
    }

    /// Adds a link, named `kind` with the next index of that kind.
    pub fn link(&mut self, from: u32, to: u32, gbps: f64, delay: Duration, kind: LinkKind) -> u32 {
        let id = self.links.len() as u32;
        let names = &mut self.names[kind.index()];
        self.links.push(LinkSpec {
            from,
            to,
            bps: (gbps * 1e9).round() as u64,
            delay,
            kind,
            index: names.len() as u32,
        });
        names.push(id);
        id
    }

    pub fn by_path(&mut self, node: u32) {
        let s = (node - self.hosts) as usize;
        self.by_path[s] = true;
    }

    pub fn cut(&mut self, hosts: Range<u32>, up: Vec<u32>, down: Vec<u32>) {
        self.cuts.push(Cut { hosts, up, down });
    }

    pub fn path_ports(&mut self, links: Vec<u32>) {
        self.path_links = links;
    }

    pub fn finish(self) -> Result<Fabric, SimError> {
        let h = self.hosts as usize;
        let n_sw = self.switches as usize;
        let mut nic = vec![NONE; h];
        let mut down_switch = vec![NONE; h];
        let mut down_of: Vec<Vec<u32>> = vec![Vec::new(); h];
        let mut out: Vec<Vec<u32>> = vec![Vec::new(); n_sw];
        let mut inn: Vec<Vec<u32>> = vec![Vec::new(); n_sw];
        for (id, l) in self.links.iter().enumerate() {
            let id = id as u32;
            if l.from < self.hosts {
                if nic[l.from as usize] != NONE || l.to < self.hosts {
                    return Err(topo_err(
                        format!("host {} has a second NIC link", l.from),
                        "one NIC link per host, to a switch",
                    ));
                }
                nic[l.from as usize] = id;
            } else if l.to < self.hosts {
                let d = &mut down_switch[l.to as usize];
                if *d != NONE && *d != l.from {
                    return Err(topo_err(
                        format!("host {} hangs below two switches", l.to),
                        "all links into a host from one switch",
                    ));
                }
                *d = l.from;
                down_of[l.to as usize].push(id);
            } else {
                out[(l.from - self.hosts) as usize].push(id);
                inn[(l.to - self.hosts) as usize].push(id);
            }
        }
        if let Some(hh) = (0..h).find(|&i| nic[i] == NONE || down_switch[i] == NONE) {
            return Err(topo_err(
                format!("host {hh} is not attached in both directions"),
                "every host needs a NIC link and a link down to it",
            ));
        }
        let mut down_range = Vec::with_capacity(h);
        let mut down_links = Vec::new();
        for d in &down_of {
            down_range.push((down_links.len() as u32, d.len() as u32));
            down_links.extend_from_slice(d);
        }
        let mut edge_index = vec![NONE; n_sw];
        let mut edges = Vec::new();
        for &d in &down_switch {
            let s = (d - self.hosts) as usize;
            if edge_index[s] == NONE {
                edge_index[s] = edges.len() as u32;
                edges.push(s);
            }
        }
        let e_count = edges.len();
        let mut fib = vec![(0u32, 0u32); n_sw * e_count];
        let mut fib_links = Vec::new();
        let mut dist = vec![u32::MAX; n_sw];
        let mut queue = std::collections::VecDeque::new();
        for (ei, &e) in edges.iter().enumerate() {
            dist.fill(u32::MAX);
            dist[e] = 0;
            queue.clear();
            queue.push_back(e);
            while let Some(b) = queue.pop_front() {
                for &l in &inn[b] {
                    let a = (self.links[l as usize].from - self.hosts) as usize;
                    if dist[a] == u32::MAX {
                        dist[a] = dist[b] + 1;
                        queue.push_back(a);
                    }
                }
            }
            for a in 0..n_sw {
                if a == e || dist[a] == u32::MAX {
                    continue;
                }
                let start = fib_links.len() as u32;
                for &l in &out[a] {
                    let b = (self.links[l as usize].to - self.hosts) as usize;
                    if dist[b] != u32::MAX && dist[b] + 1 == dist[a] {
                        fib_links.push(l);
                    }
                }
                fib[a * e_count + ei] = (start, fib_links.len() as u32 - start);
            }
        }
        Ok(Fabric {
            hosts: self.hosts,
            switches: self.switches,
            links: self.links,
            nic,
            down_switch,
            down_range,
            down_links,
            by_path: self.by_path,
            edge_index,
            edge_count: e_count as u32,
            fib,
            fib_links,
            names: self.names,
            cuts: self.cuts,
            path_links: self.path_links,
        })
    }
}
