//! Packet movement: serialisation, propagation, forwarding, switch queues (drop
//! thresholds, shared buffer, ECN, PFC) and link changes.

use super::{LinkChange, Simulator};
use crate::config::Routing;
use crate::net::fabric::NONE;
use crate::net::{mix, Ev, Meta};

/// Class indices (as `Priority::index`).
const DATA: usize = 1;
const PROBE: usize = 2;
const CONTROL: usize = 0;

impl Simulator {
    /// The next-hop link of a packet at switch `node` towards host `dst`, by the
    /// switches' routing mode, skipping failed links. With [`Routing::Steer`] the
    /// switch takes the digit of `key` it routes by and leaves the rest in `key`.
    fn route_packet(&mut self, node: u32, dst: u32, key: &mut u64, path: u16) -> Option<u32> {
        let s = self.fabric.switch_index(node);
        let routing = self.cfg.switch.routing;
        if matches!(routing, Routing::Ecmp | Routing::Steer) || self.fabric.by_path[s] {
            return self.next_hop(node, dst, key, path);
        }
        let hops = self.fabric.next_hops(node, dst);
        let mut pick = None;
        let mut best = u64::MAX;
        let mut candidates = 0u64;
        for &l in hops {
            let port = &self.ports[l as usize];
            if port.failed {
                continue;
            }
            let q = match routing {
                Routing::Adaptive => port.class_bytes[DATA],
                Routing::Spray | Routing::Ecmp | Routing::Steer => 0,
            };
            if q < best {
                (best, candidates, pick) = (q, 1, Some(l));
            } else if q == best {
                // Reservoir sampling: each of the `candidates` equal ones alike.
                candidates += 1;
                if self.rng.gen_range(0..candidates) == 0 {
                    pick = Some(l);
                }
            }
        }
        pick
    }

    /// The next-hop link at switch `node` towards host `dst` by ECMP hashing, by
    /// the next digit of `key` ([`Routing::Steer`], which leaves the remaining
    /// digits in `key`) or by logical path on a parallel-path switch, skipping
    /// failed links.
    pub(crate) fn next_hop(&self, node: u32, dst: u32, key: &mut u64, path: u16) -> Option<u32> {
        let hops = self.fabric.next_hops(node, dst);
        let n = hops.len();
        if n == 0 {
            return None;
        }
        let s = self.fabric.switch_index(node);
        let first = if self.fabric.by_path[s] {
            usize::from(path) % n
        } else if n == 1 {
            0
        } else if self.cfg.switch.routing == Routing::Steer {
            let digit = (*key % n as u64) as usize;
            *key /= n as u64;
            digit
        } else {
            (mix(*key ^ self.salts[s]) % n as u64) as usize
        };
        let l = hops[first];
        if !self.ports[l as usize].failed {
            return Some(l);
        }
        if self.fabric.by_path[s] {
            return None; // a parallel path is its own route
        }
        (1..n)
            .map(|k| hops[(first + k) % n])
            .find(|&l| !self.ports[l as usize].failed)
    }

    /// Starts serialising the next packet of link `p` if it is free, and keeps at
    /// most one `TxDone` pending for it.
    pub(crate) fn try_start(&mut self, p: u32) {
        let now = self.now;
        let port = &mut self.ports[p as usize];
        if port.tx_pending || port.failed || port.bps == 0 {
            return;
        }
        if port.busy_until > now {
            if port.next_class().is_some() {
                port.tx_pending = true;
                let at = port.busy_until;
                self.agenda.push(at, Ev::TxDone(p));
            }
            return;
        }
        let Some((class, pkt)) = port.serialise_next(now, |m| u64::from(m.len)) else {
            return;
        };
        let arrival = port.wire_tail;
        if !port.wire_pending {
            port.wire_pending = true;
            self.agenda.push(arrival, Ev::Arrive(p));
        }
        if port.next_class().is_some() {
            port.tx_pending = true;
            let at = port.busy_until;
            self.agenda.push(at, Ev::TxDone(p));
        }
        let owner = port.owner;
        let in_group = port.in_path_group;
        if owner != NONE {
            self.release(owner, pkt, class);
        }
        if in_group {
            self.note_interpath();
        }
    }

    /// A packet left switch `owner`'s buffer: shared-buffer and PFC accounting.
    fn release(&mut self, owner: u32, m: Meta, class: usize) {
        let len = u64::from(m.len);
        self.switch_buffered[owner as usize] -= len;
        if class != DATA || m.ingress == NONE {
            return;
        }
        let Some(pfc) = &self.cfg.switch.pfc else {
            return;
        };
        let xon = pfc.xon_bytes;
        let i = m.ingress as usize;
        self.pfc_ingress[i] -= len;
        if self.ports[i].data_paused && self.pfc_ingress[i] < xon {
            self.ports[i].data_paused = false;
            self.try_start(i as u32);
        }
    }

    /// Everything at the head of link `p`'s wire that has arrived by now.
    pub(crate) fn wire_arrivals(&mut self, p: u32) {
        let now = self.now;
        self.ports[p as usize].wire_pending = false;
        loop {
            let port = &mut self.ports[p as usize];
            match port.wire.front() {
                Some(&(t, pkt)) if t <= now => {
                    port.wire.pop_front();
                    let to = port.to;
                    if to < self.fabric.hosts {
                        self.deliver(to, pkt);
                    } else {
                        self.forward(to, p, pkt);
                    }
                }
                Some(&(t, _)) => {
                    port.wire_pending = true;
                    self.agenda.push(t, Ev::Arrive(p));
                    return;
                }
                None => return,
            }
        }
    }

    /// A packet arrived at switch `node` over link `ingress`.
    fn forward(&mut self, node: u32, ingress: u32, mut m: Meta) {
        let Some(out) = self.route_packet(node, m.dst, &mut m.key, m.path) else {
            if self.fabric.next_hops(node, m.dst).is_empty() {
                self.counters.drop_no_route += 1;
            } else {
                self.counters.drop_link_down += 1;
            }
            self.lose(m);
            return;
        };
        let s = self.fabric.switch_index(node);
        let class = m.class as usize;
        let len = u64::from(m.len);
        let sw = &self.cfg.switch;
        let port = &self.ports[out as usize];
        let nak =
            || m.len > 1 && self.slab.byte(m.slot, 1) == rondo_proto::wire::PacketType::Nak as u8;
        let drop = if sw.loss > 0.0 && self.loss_rng.chance(sw.loss) {
            Some(&mut self.counters.drop_random)
        } else if sw.drop_naks && class == CONTROL && nak() {
            Some(&mut self.counters.drop_nak)
        } else if class == PROBE {
            let limit = u64::from(sw.probe_queue_limit_packets) * self.cfg.mtu as u64;
            (port.class_bytes[PROBE] + len > limit
                || self.switch_buffered[s] + len > sw.buffer_bytes)
                .then_some(&mut self.counters.drop_probe)
        } else if port.class_bytes[class] + len > sw.data_queue_limit_bytes {
            Some(&mut self.counters.drop_data_threshold)
        } else if self.switch_buffered[s] + len > sw.buffer_bytes {
            Some(&mut self.counters.drop_buffer)
        } else {
            None
        };
        if let Some(counter) = drop {
            *counter += 1;
            self.lose(m);
            return;
        }
        let mut ce = m.ce;
        if class == DATA {
            if let Some(ecn) = &sw.ecn {
                let scale = self.fabric.links[out as usize].bps as f64 / 100e9;
                let q = port.class_bytes[DATA] as f64;
                let (kmin, kmax) = (ecn.kmin_bytes as f64 * scale, ecn.kmax_bytes as f64 * scale);
                if q >= kmax {
                    ce = true;
                } else if q > kmin {
                    let p = ecn.pmax * (q - kmin) / (kmax - kmin);
                    if self.rng.chance(p) {
                        ce = true;
                    }
                }
                if ce && !m.ce {
                    self.ports[out as usize].stats.ce_marked += 1;
                }
            }
            if let Some(pfc) = &self.cfg.switch.pfc {
                let i = ingress as usize;
                self.pfc_ingress[i] += len;
                if self.pfc_ingress[i] > pfc.xoff_bytes && !self.ports[i].data_paused {
                    self.ports[i].data_paused = true;
                    self.ports[i].stats.pauses += 1;
                }
            }
        }
        m.ce = ce;
        m.ingress = ingress;
        self.switch_buffered[s] += len;
        self.enqueue(out, m);
    }

    /// Puts a packet into a link's queue and starts the link if it is idle.
    pub(crate) fn enqueue(&mut self, out: u32, m: Meta) {
        let class = m.class as usize;
        let port = &mut self.ports[out as usize];
        port.push(self.now, class, m, u64::from(m.len));
        let in_group = port.in_path_group;
        self.try_start(out);
        if in_group {
            self.note_interpath();
        }
    }

    /// Largest queue difference among the path-group links, tracked at every change.
    fn note_interpath(&mut self) {
        if !self.measuring {
            return;
        }
        let (mut lo, mut hi) = (u64::MAX, 0);
        for &l in &self.fabric.path_links {
            let q = self.ports[l as usize].queued_bytes();
            lo = lo.min(q);
            hi = hi.max(q);
        }
        self.interpath_max = self.interpath_max.max(hi.saturating_sub(lo));
    }

    pub(crate) fn apply_change(&mut self, link: u32, change: LinkChange) {
        let p = link as usize;
        match change {
            LinkChange::Rate(g) => {
                self.ports[p].set_rate((g * 1e9).round() as u64);
                self.try_start(link);
            }
            LinkChange::Delay(d) => self.ports[p].delay = d,
            LinkChange::Fail => {
                self.ports[p].account(self.now);
                self.ports[p].failed = true;
                let owner = self.ports[p].owner;
                for class in 0..3 {
                    while let Some(pkt) = self.ports[p].queues[class].pop_front() {
                        let len = u64::from(pkt.len);
                        self.ports[p].class_bytes[class] -= len;
                        if owner != NONE {
                            self.release(owner, pkt, class);
                        }
                        self.counters.drop_link_down += 1;
                        self.lose(pkt);
                    }
                }
                while let Some((_, pkt)) = self.ports[p].wire.pop_front() {
                    self.counters.drop_link_down += 1;
                    self.lose(pkt);
                }
                self.ports[p].wire_tail = self.now;
            }
            LinkChange::Restore => {
                self.ports[p].failed = false;
                self.try_start(link);
            }
        }
    }
}
