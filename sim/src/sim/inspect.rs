//! Read access to the simulator (links, routes, endpoints) and raw injection.

use super::{Delivery, LinkId, LinkStats, Simulator};
use crate::error::{topo_err, SimError};
use crate::net::fabric::NONE;
use crate::net::Meta;
use crate::topology::LinkKind;
use crate::SimConfig;
use rondo_proto::time::{Duration, Instant};
use rondo_proto::{Endpoint, Priority};

impl Simulator {
    /// The configuration.
    pub fn config(&self) -> &SimConfig {
        &self.cfg
    }

    /// Simulated time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Events processed so far (heap entries popped, stale timers included).
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Number of hosts.
    pub fn hosts(&self) -> usize {
        self.fabric.hosts as usize
    }

    /// Packets currently in the network (queued, serialising or propagating).
    pub fn packets_in_flight(&self) -> usize {
        self.slab.in_use()
    }

    /// Pending events in the heap (grows with links and hosts, not packets).
    pub fn pending_events(&self) -> usize {
        self.agenda.len()
    }

    /// The endpoint of a host (read-only: connections, reorder buffer).
    pub fn endpoint(&self, host: usize) -> Option<&Endpoint> {
        self.hosts.get(host).map(|h| &h.ep)
    }

    /// The link named `kind` and `index` (see [`LinkKind`] for the numbering).
    pub fn link(&self, kind: LinkKind, index: usize) -> Option<LinkId> {
        self.fabric.names[kind.index()]
            .get(index)
            .map(|&l| LinkId(l as usize))
    }

    /// The forward link of path `i` of the parallel topology (host 0 to host 1).
    pub fn parallel_path_link(&self, i: usize) -> Option<LinkId> {
        self.link(LinkKind::PathForward, i)
    }

    /// Every link, in id order.
    pub fn links(&self) -> impl Iterator<Item = LinkId> {
        (0..self.ports.len()).map(LinkId)
    }

    /// The links whose queues the inter-path queue difference compares: the
    /// forward paths of `parallel`, leaf 0's uplinks (P1-P4) of `fig2`; none
    /// elsewhere.
    pub fn path_links(&self) -> Vec<LinkId> {
        self.fabric
            .path_links
            .iter()
            .map(|&l| LinkId(l as usize))
            .collect()
    }

    /// Counters of a link.
    pub fn link_stats(&self, id: LinkId) -> Option<LinkStats> {
        let p = self.ports.get(id.0)?;
        let spec = &self.fabric.links[id.0];
        Some(LinkStats {
            kind: spec.kind,
            index: spec.index as usize,
            gbps: p.bps as f64 / 1e9,
            sent_packets: p.stats.sent_packets,
            sent_bytes: p.stats.sent_bytes,
            queue_bytes: p.queued_bytes(),
            max_queue_bytes: p.stats.max_queue_bytes,
            mean_queue_bytes: p.mean_queue_bytes(self.now),
            ce_marked: p.stats.ce_marked,
            pauses: p.stats.pauses,
            failed: p.failed,
        })
    }

    /// Number of equal-cost shortest paths from host `src` to host `dst`.
    pub fn equal_cost_paths(&self, src: usize, dst: usize) -> Result<u64, SimError> {
        self.check_pair(src, dst)?;
        Ok(self.fabric.equal_cost_paths(src as u32, dst as u32))
    }

    pub(super) fn check_pair(&self, src: usize, dst: usize) -> Result<(), SimError> {
        let n = self.hosts();
        if src >= n || dst >= n || src == dst {
            return Err(SimError::Flow {
                what: format!("hosts {src} -> {dst} in a topology of {n} hosts"),
                allowed: "two distinct hosts below the number of hosts",
            });
        }
        Ok(())
    }

    /// The links a packet from `src` to `dst` takes when sent by the connection
    /// with local flow id `flow` on logical path `path`, with every link up: the
    /// ECMP hash, or the steered route, is a pure function of these and the seed.
    pub fn route(
        &self,
        src: usize,
        dst: usize,
        flow: u32,
        path: u16,
    ) -> Result<Vec<LinkId>, SimError> {
        self.check_pair(src, dst)?;
        let mut key = self.packet_key(src as u32, dst as u32, flow, path);
        let mut links = vec![LinkId(self.fabric.nic[src] as usize)];
        let mut node = self.fabric.links[self.fabric.nic[src] as usize].to;
        while node >= self.fabric.hosts {
            let l = self
                .next_hop(node, dst as u32, &mut key, path)
                .ok_or_else(|| {
                    topo_err(
                        format!("no route from {src} to {dst}"),
                        "a connected topology",
                    )
                })?;
            links.push(LinkId(l as usize));
            node = self.fabric.links[l as usize].to;
        }
        Ok(links)
    }

    /// Time a packet of `bytes` takes over `links` with empty queues: each link's
    /// serialisation at its current rate plus its propagation delay.
    pub fn route_delay(&self, links: &[LinkId], bytes: usize) -> Duration {
        links
            .iter()
            .filter_map(|l| self.ports.get(l.0))
            .map(|p| {
                let ser = if p.bps > 0 {
                    Duration::from_ps(
                        (bytes as u128 * 8 * 1_000_000_000_000 / u128::from(p.bps)) as u64,
                    )
                } else {
                    Duration::ZERO
                };
                ser + p.delay
            })
            .fold(Duration::ZERO, |a, b| a + b)
    }

    /// A link's one-way propagation delay now (`None`: no such link).
    pub fn link_delay(&self, id: LinkId) -> Option<Duration> {
        self.ports.get(id.0).map(|p| p.delay)
    }

    /// Flows added so far.
    pub fn flow_count(&self) -> usize {
        self.flows.len()
    }

    /// Starts (or stops) logging every packet delivered to a host.
    pub fn log_deliveries(&mut self, on: bool) {
        self.deliveries = on.then(Vec::new);
    }

    /// The packets delivered since logging started, in delivery order.
    pub fn deliveries(&self) -> &[Delivery] {
        self.deliveries.as_deref().unwrap_or(&[])
    }

    /// Sends a raw datagram from host `src`'s NIC to host `dst` now, on logical
    /// path `path` with priority `priority`, outside any flow (for tests and fault
    /// injection: the receiving endpoint counts it as malformed or unknown unless
    /// it is a valid datagram of one of its flows).
    pub fn send_raw(
        &mut self,
        src: usize,
        dst: usize,
        path: u16,
        priority: Priority,
        datagram: &[u8],
    ) -> Result<(), SimError> {
        self.check_pair(src, dst)?;
        if datagram.is_empty() || datagram.len() > self.cfg.mtu {
            return Err(SimError::Flow {
                what: format!("a raw datagram of {} bytes", datagram.len()),
                allowed: "1 to mtu bytes",
            });
        }
        let slot = self.slab.store_bytes(datagram);
        let m = Meta {
            slot,
            len: datagram.len() as u16,
            path,
            class: priority.index() as u8,
            ce: false,
            dst: dst as u32,
            ingress: NONE,
            key: self.packet_key(src as u32, dst as u32, u32::MAX, path),
            conn: NONE,
        };
        let nic = self.fabric.nic[src];
        if self.ports[nic as usize].failed {
            self.counters.drop_link_down += 1;
            self.slab.free(slot);
        } else {
            self.enqueue(nic, m);
        }
        Ok(())
    }
}
