//! The switch itself, sans-IO: datagrams come in with the time and their source
//! address, deliveries go out with their due time. [`crate::run`] drives it over
//! UDP sockets; tests drive it at explicit timestamps.
//!
//! Each path has one egress per destination host with three strict-priority classes
//! (control above data above probes, paper §4.2.2 and §5: the switch serves data
//! before probes and drops probes early through a small per-queue threshold). A
//! packet waits in its class's queue, is serialised at the path's rate when the
//! egress is free, and is delivered after the path's propagation delay.

use crate::counters::Counters;
use crate::topology::{ChangeSpec, Topology};
use rondo_proto::rng::Rng;
use rondo_proto::time::{Duration, Instant};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::net::SocketAddr;

/// Priority class of a packet, highest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    /// ACKs and NAKs.
    Control = 0,
    /// Data packets.
    Data = 1,
    /// Capacity probes (paper §4.2.2).
    Probe = 2,
}

impl Class {
    /// All classes, highest priority first.
    pub const ALL: [Class; 3] = [Class::Control, Class::Data, Class::Probe];

    /// Its name in counters and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Class::Control => "control",
            Class::Data => "data",
            Class::Probe => "probe",
        }
    }
}

/// The class of a datagram from its Rondo header (`docs/wire.md`: version 1, type
/// 1 DATA, 2 PROBE, 3 ACK, 4 NAK), or `None` when it is not Rondo traffic. The
/// sender's DSCP says the same (`UdpConfig::dscp_*`); the P4 program matches that.
pub fn classify(datagram: &[u8]) -> Option<Class> {
    if datagram.len() < rondo_proto::wire::COMMON_HEADER_LEN || datagram[0] != 1 {
        return None;
    }
    match datagram[1] {
        1 => Some(Class::Data),
        2 => Some(Class::Probe),
        3 | 4 => Some(Class::Control),
        _ => None,
    }
}

/// What happened to an arriving datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Queued on `path` in `class`, CE-marked or not.
    Queued {
        /// The path.
        path: usize,
        /// The class.
        class: Class,
        /// Marked CE on arrival.
        marked: bool,
    },
    /// Not a Rondo datagram.
    Malformed,
    /// From an address that is no host's source port.
    UnknownSource,
    /// The class's queue was over its threshold.
    QueueFull,
    /// Dropped at random (the path's loss rate).
    Lost,
    /// The path is down.
    Down,
}

/// A datagram leaving the fabric.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// When it is due at the destination.
    pub due: Instant,
    /// When it arrived at the fabric.
    pub arrived: Instant,
    /// The destination socket.
    pub to: SocketAddr,
    /// Its path.
    pub path: usize,
    /// Its class.
    pub class: Class,
    /// CE-marked.
    pub ce: bool,
    /// The datagram.
    pub data: Vec<u8>,
}

#[derive(Debug)]
struct Queued {
    arrived: Instant,
    to: SocketAddr,
    ce: bool,
    data: Vec<u8>,
}

#[derive(Debug, Default)]
struct Egress {
    queues: [VecDeque<Queued>; 3],
    bytes: [u64; 3],
    /// When the packet being serialised has left.
    busy_until: Instant,
}

#[derive(Clone, Copy, Debug)]
struct PathNow {
    bps: u64,
    delay: Duration,
    down: bool,
    loss: f64,
    ecn_bytes: Option<u64>,
    limits: [u64; 3],
}

/// The emulated switch.
#[derive(Debug)]
pub struct Switch {
    start: Instant,
    table: HashMap<SocketAddr, (usize, usize)>,
    /// Destination socket of (destination host, path).
    dst_addr: Vec<Vec<SocketAddr>>,
    paths: Vec<PathNow>,
    /// Index `dst_host * paths + path`.
    egress: Vec<Egress>,
    schedule: Vec<(Instant, ChangeSpec)>,
    next_change: usize,
    in_flight: BinaryHeap<Reverse<(Instant, u64)>>,
    flying: HashMap<u64, Delivery>,
    seq: u64,
    rng: Rng,
    counters: Counters,
}

fn kb(x: f64) -> u64 {
    (x * 1024.0).round() as u64
}

fn bps(mbps: f64) -> u64 {
    (mbps * 1e6).round().max(1.0) as u64
}

impl Switch {
    /// A switch for `topo`, started at `start` (the schedule counts from it).
    pub fn new(topo: &Topology, start: Instant) -> Switch {
        let mut table = HashMap::new();
        for r in topo.route_table() {
            let h = &topo.hosts[r.src_host];
            table.insert(SocketAddr::new(h.ip, r.src_port), (r.dst_host, r.path));
        }
        let npaths = topo.paths.len();
        let dst_addr = topo
            .hosts
            .iter()
            .map(|h| (0..npaths).map(|p| h.addr(p as u16)).collect())
            .collect();
        let paths = topo
            .paths
            .iter()
            .map(|p| PathNow {
                bps: bps(p.rate_mbps),
                delay: Duration::from_us_f64(p.delay_us),
                down: false,
                loss: p.loss,
                ecn_bytes: p.ecn_kb.map(kb),
                limits: [
                    kb(p.queue_kb.control),
                    kb(p.queue_kb.data),
                    kb(p.queue_kb.probe),
                ],
            })
            .collect();
        let mut schedule: Vec<_> = topo
            .changes
            .iter()
            .map(|c| (start + Duration::from_us_f64(c.at_ms * 1000.0), c.clone()))
            .collect();
        schedule.sort_by_key(|c| c.0);
        Switch {
            start,
            table,
            dst_addr,
            paths,
            egress: (0..topo.hosts.len() * npaths)
                .map(|_| Egress {
                    busy_until: start,
                    ..Egress::default()
                })
                .collect(),
            schedule,
            next_change: 0,
            in_flight: BinaryHeap::new(),
            flying: HashMap::new(),
            seq: 0,
            rng: Rng::new(topo.seed),
            counters: Counters::new(topo),
        }
    }

    /// The path and destination of a source address, as the forwarding table has it.
    pub fn route(&self, from: SocketAddr) -> Option<(usize, usize)> {
        self.table.get(&from).map(|&(d, p)| (p, d))
    }

    /// A datagram from `from` arrives at `now`.
    pub fn arrive(&mut self, now: Instant, from: SocketAddr, data: &[u8]) -> Verdict {
        self.advance(now);
        self.counters.datagrams_in += 1;
        let Some(class) = classify(data) else {
            self.counters.malformed += 1;
            return Verdict::Malformed;
        };
        let Some(&(dst, path)) = self.table.get(&from) else {
            self.counters.unknown_source += 1;
            return Verdict::UnknownSource;
        };
        let npaths = self.paths.len();
        let p = self.paths[path];
        let c = class as usize;
        let counters = self.counters.class_mut(dst, path, class);
        if p.down {
            counters.dropped_down += 1;
            return Verdict::Down;
        }
        let eg = &mut self.egress[dst * npaths + path];
        let len = data.len() as u64;
        if eg.bytes[c] + len > p.limits[c] {
            counters.dropped_queue += 1;
            counters.oversize += u64::from(len > p.limits[c]);
            return Verdict::QueueFull;
        }
        if p.loss > 0.0 && self.rng.chance(p.loss) {
            counters.lost += 1;
            return Verdict::Lost;
        }
        let marked = class == Class::Data && p.ecn_bytes.is_some_and(|t| eg.bytes[c] > t);
        counters.enqueued += 1;
        counters.marked += u64::from(marked);
        eg.bytes[c] += len;
        counters.max_queue_bytes = counters.max_queue_bytes.max(eg.bytes[c]);
        eg.queues[c].push_back(Queued {
            arrived: now,
            to: self.dst_addr[dst][path],
            ce: marked,
            data: data.to_vec(),
        });
        self.advance(now);
        Verdict::Queued {
            path,
            class,
            marked,
        }
    }

    /// Applies due schedule changes and starts every transmission whose start time
    /// is not after `now`.
    fn advance(&mut self, now: Instant) {
        let npaths = self.paths.len();
        loop {
            // The earliest event not after now: a change or a transmission start.
            let change = self
                .schedule
                .get(self.next_change)
                .map(|c| c.0)
                .filter(|&t| t <= now);
            let start = (0..self.egress.len())
                .filter_map(|i| next_start(&self.egress[i]).map(|t| (t, i)))
                .filter(|&(t, _)| t <= now)
                .min();
            match (change, start) {
                (Some(tc), Some((ts, _))) if tc <= ts => self.apply_change(),
                (Some(_), None) => self.apply_change(),
                (_, Some((ts, i))) => self.transmit(i, ts, i % npaths),
                (None, None) => return,
            }
        }
    }

    fn apply_change(&mut self) {
        let c = self.schedule[self.next_change].1.clone();
        self.next_change += 1;
        let p = &mut self.paths[c.path];
        if let Some(r) = c.rate_mbps {
            p.bps = bps(r);
        }
        if let Some(d) = c.delay_us {
            p.delay = Duration::from_us_f64(d);
        }
        if let Some(d) = c.down {
            p.down = d;
        }
        self.counters.changes_applied += 1;
    }

    /// Egress `i` starts sending its highest-priority packet that had arrived by
    /// `at` (strict priority).
    fn transmit(&mut self, i: usize, at: Instant, path: usize) {
        let eg = &mut self.egress[i];
        let Some(c) = (0..3).find(|&c| eg.queues[c].front().is_some_and(|q| q.arrived <= at))
        else {
            return;
        };
        let Some(q) = eg.queues[c].pop_front() else {
            return;
        };
        let len = q.data.len() as u64;
        eg.bytes[c] -= len;
        let p = self.paths[path];
        let done = at + Duration::serialisation(len, p.bps);
        eg.busy_until = done;
        let due = done + p.delay;
        self.seq += 1;
        self.in_flight.push(Reverse((due, self.seq)));
        self.flying.insert(
            self.seq,
            Delivery {
                due,
                arrived: q.arrived,
                to: q.to,
                path,
                class: Class::ALL[c],
                ce: q.ce,
                data: q.data,
            },
        );
    }

    /// The next delivery due by `now`, in due order.
    pub fn poll_delivery(&mut self, now: Instant) -> Option<Delivery> {
        self.advance(now);
        let &Reverse((due, seq)) = self.in_flight.peek()?;
        if due > now {
            return None;
        }
        self.in_flight.pop();
        let d = self.flying.remove(&seq)?;
        let dst = self.dst_of(&d);
        let c = self.counters.class_mut(dst, d.path, d.class);
        c.delivered += 1;
        c.bytes_delivered += d.data.len() as u64;
        Some(d)
    }

    fn dst_of(&self, d: &Delivery) -> usize {
        self.dst_addr
            .iter()
            .position(|a| a.get(d.path) == Some(&d.to))
            .unwrap_or(0)
    }

    /// When the switch next has something to do (a delivery, a transmission start,
    /// a scheduled change), if ever.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let due = self.in_flight.peek().map(|r| r.0 .0);
        let start = self.egress.iter().filter_map(next_start).min();
        let change = self.schedule.get(self.next_change).map(|c| c.0);
        [due, start, change].into_iter().flatten().min()
    }

    /// Counters so far.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Counters so far, to add the driver's own (send errors).
    pub fn counters_mut(&mut self) -> &mut Counters {
        &mut self.counters
    }

    /// When it started.
    pub fn start(&self) -> Instant {
        self.start
    }

    /// Packets queued or in flight.
    pub fn backlog(&self) -> usize {
        self.flying.len()
            + self
                .egress
                .iter()
                .map(|e| e.queues.iter().map(VecDeque::len).sum::<usize>())
                .sum::<usize>()
    }
}

/// When an egress starts its next transmission: when it is free, or when the
/// earliest waiting packet arrived, whichever is later.
fn next_start(eg: &Egress) -> Option<Instant> {
    let first = eg
        .queues
        .iter()
        .filter_map(|q| q.front())
        .map(|q| q.arrived)
        .min()?;
    Some(first.max(eg.busy_until))
}
