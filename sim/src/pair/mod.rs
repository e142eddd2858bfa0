//! Any set of [`Host`]s on the simulator's links: the small networks of tests, of
//! `rondo demo` and of the verbs API's in-process fabric, built link by link, with
//! a two-host preset ([`Pair`]) and a ready two-endpoint testbed ([`Testbed`]).
//!
//! Every host sends through its own NIC link (rate only); a route then takes a
//! datagram over a list of links to its destination, which sees the same path id.
//! Each link is the simulator's output port (three strict-priority FIFO classes,
//! Control > Data > Probe as in paper §4.2.2, a serialiser, a propagation delay),
//! with per-class tail-drop limits, ECN marking and faults injected per packet as
//! it leaves the wire (loss, duplication, jitter), all changeable while running.
//! Events are ordered by `(time, insertion order)` and all randomness comes from
//! the seed, so the same seed gives the same run, bit for bit.
//!
//! ```
//! use rondo_sim::pair::{LinkConfig, Network};
//! use rondo_proto::{Duration, Host, Instant, Priority, Transmit, TxBuffer};
//!
//! /// Sends one 1500-byte datagram at once; counts what it receives.
//! #[derive(Default)]
//! struct Ping { sent: bool, got: Vec<Instant> }
//! impl Host for Ping {
//!     fn handle_datagram(&mut self, now: Instant, _: u16, _: &[u8], _: bool) { self.got.push(now) }
//!     fn handle_timeout(&mut self, _: Instant) {}
//!     fn poll_transmit<B: TxBuffer + ?Sized>(&mut self, _: Instant, _: &mut B) -> Option<Transmit> {
//!         (!std::mem::replace(&mut self.sent, true))
//!             .then_some(Transmit { path: 0, priority: Priority::Data, len: 1500, flow: 0, payload: None })
//!     }
//!     fn poll_timeout(&self) -> Option<Instant> { None }
//! }
//!
//! let mut net = Network::new(1);
//! let a = net.add_host(Ping::default(), 100.0);
//! let b = net.add_host(Ping { sent: true, ..Ping::default() }, 100.0);
//! let link = net.add_link(LinkConfig::new(10.0, Duration::from_us(5)));
//! net.set_route(a, 0, b, &[link]);
//! net.run_until(Instant::from_us(100));
//! // 120 ns on the 100 Gbps NIC, 1.2 us on the 10 Gbps link, 5 us propagation.
//! assert_eq!(net.host(b).got, [Instant::from_ns(6_320)]);
//! ```

mod link;
mod preset;
mod testbed;

pub use link::{ClassStats, LinkConfig, LinkStats, QueueSample};
pub use preset::{Pair, PathSpec, PROBE_QUEUE_DATAGRAMS};
pub use testbed::{Testbed, TestbedError};

use crate::net::Slab;
use link::{Link, Pkt};
use rondo_proto::rng::Rng;
use rondo_proto::time::{Duration, Instant};
use rondo_proto::transmit::Host;
use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

/// Index of a link in a [`Network`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LinkId(pub usize);

/// Index of a host in a [`Network`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HostId(pub usize);

/// Default bytes of a packet buffer (the buffer each [`Host::poll_transmit`]
/// gets): a jumbo frame. [`Network::with_mtu`] sets another.
pub const DEFAULT_MTU: usize = 9216;

/// Consecutive timeouts of one host at one instant after which it is declared
/// stuck: its timer is then pushed 1 ns on (and counted in
/// [`Network::stuck_timers`]).
const MAX_TIMEOUTS_AT_ONE_INSTANT: u32 = 10_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ev {
    /// Poll a host's transmits and timer (after it was added or mutated).
    Kick(u32),
    /// A host's timer; stale unless `gen` is the host's current generation.
    Timer { host: u32, gen: u64 },
    /// A link finished serialising its packet.
    TxDone(u32),
    /// The head packet of a link's wire reached the far end (one event per
    /// packet, scheduled when it finished serialising).
    Arrive(u32),
    /// A jittered packet (index into the late list) reaches the far end.
    Late(u32),
    /// A link's configuration changed: take its rate and delay, restart it.
    Resume(u32),
}

struct Scheduled {
    at: Instant,
    seq: u64,
    ev: Ev,
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scheduled {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// Pending events, earliest first, ties in insertion order. A binary heap, not
/// the simulator's radix heap: between steps the caller may add work at the
/// current time, before events already looked at.
#[derive(Default)]
struct Agenda {
    heap: BinaryHeap<Reverse<Scheduled>>,
    seq: u64,
}

impl Agenda {
    fn push(&mut self, at: Instant, ev: Ev) {
        self.seq += 1;
        self.heap.push(Reverse(Scheduled {
            at,
            seq: self.seq,
            ev,
        }));
    }

    fn peek(&self) -> Option<(Instant, Ev)> {
        self.heap.peek().map(|Reverse(s)| (s.at, s.ev))
    }

    fn pop(&mut self) -> Option<(Instant, Ev)> {
        self.heap.pop().map(|Reverse(s)| (s.at, s.ev))
    }
}

struct HostSlot<H> {
    host: H,
    nic: LinkId,
    /// Route index per path id.
    routes: Vec<Option<u32>>,
    /// The timeout currently scheduled, as last reported by the host.
    timer: Option<Instant>,
    /// Bumped whenever `timer` changes; older timer events are stale.
    gen: u64,
    kick_pending: bool,
    /// The instant of the last timeout and how many fired there in a row.
    spin: (Instant, u32),
}

struct Route {
    to: HostId,
    path: u16,
    /// The sender's NIC first.
    links: Vec<u32>,
}

/// A deterministic discrete-event network of hosts and links. See the
/// [module documentation](self).
pub struct Network<H: Host> {
    now: Instant,
    hosts: Vec<HostSlot<H>>,
    links: Vec<Link>,
    routes: Vec<Route>,
    agenda: Agenda,
    /// Seeds each link's private stream, in the order links are added.
    rng: Rng,
    slab: Slab,
    /// Jittered packets between the wire and the next hop; `None`: free.
    late: Vec<Option<Pkt>>,
    late_free: Vec<u32>,
    unrouted: u64,
    stuck_timers: u64,
}

impl<H: Host> Network<H> {
    /// An empty network at [`Instant::ZERO`] whose randomness all derives from
    /// `seed`, with packet buffers of [`DEFAULT_MTU`] bytes.
    pub fn new(seed: u64) -> Self {
        Self::with_mtu(seed, DEFAULT_MTU)
    }

    /// As [`Network::new`], with packet buffers of `mtu` bytes (at least 1, at most
    /// 65 535): the buffer each [`Host::poll_transmit`] gets, so at least the
    /// largest `mtu` of the hosts' flows.
    pub fn with_mtu(seed: u64, mtu: usize) -> Self {
        Network {
            now: Instant::ZERO,
            hosts: Vec::new(),
            links: Vec::new(),
            routes: Vec::new(),
            agenda: Agenda::default(),
            rng: Rng::new(seed),
            slab: Slab::new(mtu.clamp(1, usize::from(u16::MAX))),
            late: Vec::new(),
            late_free: Vec::new(),
            unrouted: 0,
            stuck_timers: 0,
        }
    }

    /// Bytes of the buffer handed to [`Host::poll_transmit`].
    pub fn mtu(&self) -> usize {
        self.slab.slot_len()
    }

    /// Adds a host with an egress NIC of `nic_gbps` (no delay, unbounded queues,
    /// strict priority) that all its datagrams cross first. The host is polled at
    /// the current time on the next step.
    pub fn add_host(&mut self, host: H, nic_gbps: f64) -> HostId {
        let mut nic = LinkConfig::new(nic_gbps, Duration::ZERO);
        nic.probe_queue_limit_bytes = usize::MAX;
        nic.queue_limit_bytes = usize::MAX;
        let nic = self.add_link(nic);
        let id = self.hosts.len();
        self.hosts.push(HostSlot {
            host,
            nic,
            routes: Vec::new(),
            timer: None,
            gen: 0,
            kick_pending: false,
            spin: (Instant::ZERO, 0),
        });
        self.kick(id);
        HostId(id)
    }

    /// Adds a link.
    pub fn add_link(&mut self, cfg: LinkConfig) -> LinkId {
        let rng = Rng::new(self.rng.next_u64());
        self.links.push(Link::new(cfg, rng));
        LinkId(self.links.len() - 1)
    }

    /// Routes datagrams that `from` sends on `path`: its NIC, then `links` in
    /// order, then delivery to `to` on the same path id. Replaces an earlier route
    /// for `(from, path)`; packets already in the network keep their old route.
    ///
    /// # Panics
    /// If a host or link id does not exist, or with more than 65 534 links on one route.
    pub fn set_route(&mut self, from: HostId, path: u16, to: HostId, links: &[LinkId]) {
        assert!(to.0 < self.hosts.len(), "set_route: no host {to:?}");
        assert!(
            links.len() < usize::from(u16::MAX),
            "set_route: too many links"
        );
        for l in links {
            assert!(l.0 < self.links.len(), "set_route: no link {l:?}");
        }
        let slot = &mut self.hosts[from.0];
        let mut route = Vec::with_capacity(links.len() + 1);
        route.push(slot.nic.0 as u32);
        route.extend(links.iter().map(|l| l.0 as u32));
        let index = self.routes.len() as u32;
        self.routes.push(Route {
            to,
            path,
            links: route,
        });
        let p = usize::from(path);
        if slot.routes.len() <= p {
            slot.routes.resize(p + 1, None);
        }
        slot.routes[p] = Some(index);
    }

    /// A host.
    pub fn host(&self, id: HostId) -> &H {
        &self.hosts[id.0].host
    }

    /// A host, to change it (e.g. hand it data to send). The host is polled again
    /// (transmits, then its timeout) at the current time on the next step.
    pub fn host_mut(&mut self, id: HostId) -> &mut H {
        self.kick(id.0);
        &mut self.hosts[id.0].host
    }

    /// A host, mutably, for changes that cannot make it send or move its timers
    /// (draining its events, reading counters): unlike [`Self::host_mut`] it is
    /// not polled again.
    pub fn host_mut_quiet(&mut self, id: HostId) -> &mut H {
        &mut self.hosts[id.0].host
    }

    /// The NIC link of a host, for its statistics or to change its rate.
    pub fn nic(&self, id: HostId) -> LinkId {
        self.hosts[id.0].nic
    }

    /// A link's configuration.
    pub fn link(&self, id: LinkId) -> &LinkConfig {
        &self.links[id.0].cfg
    }

    /// A link's configuration, to change while running. A new rate and delay apply
    /// from the next packet to start serialising, new loss, duplication and jitter
    /// from the next packet to leave the wire, new limits from the next arrival.
    pub fn link_mut(&mut self, id: LinkId) -> &mut LinkConfig {
        self.agenda.push(self.now, Ev::Resume(id.0 as u32));
        &mut self.links[id.0].cfg
    }

    /// A snapshot of a link's counters.
    pub fn link_stats(&self, id: LinkId) -> LinkStats {
        self.links[id.0].stats()
    }

    /// Starts recording every change of a link's total queue (see [`Self::queue_trace`]).
    pub fn trace_queue(&mut self, id: LinkId) {
        self.links[id.0].trace();
    }

    /// The queue samples recorded since [`Self::trace_queue`]; empty when not tracing.
    pub fn queue_trace(&self, id: LinkId) -> &[QueueSample] {
        self.links[id.0].samples()
    }

    /// Datagrams dropped because their sender had no route for their path (or
    /// reported an empty datagram, or one longer than its buffer).
    pub fn unrouted(&self) -> u64 {
        self.unrouted
    }

    /// Times a host kept asking for a timeout at one instant without progress and
    /// had its timer pushed 1 ns on.
    pub fn stuck_timers(&self) -> u64 {
        self.stuck_timers
    }

    /// Packets in the network now (queued, serialising, on a wire or jittered).
    pub fn packets_in_flight(&self) -> usize {
        self.slab.in_use()
    }

    /// The current time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// The time of the next pending event, if any.
    pub fn next_event(&mut self) -> Option<Instant> {
        // Drop stale timers so that they never count as pending work.
        while let Some((at, ev)) = self.agenda.peek() {
            match ev {
                Ev::Timer { host, gen } if self.hosts[host as usize].gen != gen => {
                    self.agenda.pop();
                }
                _ => return Some(at),
            }
        }
        None
    }

    /// Jumps the clock to the earliest pending event and processes everything due
    /// then (including what that schedules for the same instant). Returns false,
    /// doing nothing, when no event is pending at all.
    pub fn step(&mut self) -> bool {
        let Some(at) = self.next_event() else {
            return false;
        };
        self.now = self.now.max(at);
        while self.agenda.peek().is_some_and(|(t, _)| t <= at) {
            let Some((_, ev)) = self.agenda.pop() else {
                break;
            };
            self.dispatch(ev);
        }
        true
    }

    /// Processes every event up to and including `deadline`, then sets the clock to
    /// `deadline` (time passes even when idle). `Instant::MAX` runs until idle and
    /// leaves the clock at the last event.
    pub fn run_until(&mut self, deadline: Instant) {
        self.drive_until(deadline, |_| false);
    }

    /// Steps until `done` holds (checked before the first step and after each) or
    /// no event is left at or before `deadline`. Returns whether `done` held; when
    /// it did not, the clock ends at `deadline` as with [`Self::run_until`].
    pub fn drive_until(&mut self, deadline: Instant, mut done: impl FnMut(&Self) -> bool) -> bool {
        loop {
            if done(self) {
                return true;
            }
            match self.next_event() {
                Some(at) if at <= deadline => {
                    self.step();
                }
                _ => {
                    if deadline != Instant::MAX {
                        self.now = self.now.max(deadline);
                    }
                    return false;
                }
            }
        }
    }

    fn kick(&mut self, host: usize) {
        let slot = &mut self.hosts[host];
        if !slot.kick_pending {
            slot.kick_pending = true;
            self.agenda.push(self.now, Ev::Kick(host as u32));
        }
    }

    fn dispatch(&mut self, ev: Ev) {
        let now = self.now;
        match ev {
            Ev::Kick(host) => {
                self.hosts[host as usize].kick_pending = false;
                self.service(host as usize);
            }
            Ev::Timer { host, gen } => {
                let slot = &mut self.hosts[host as usize];
                if slot.gen != gen {
                    return;
                }
                slot.timer = None;
                if slot.spin.0 == now {
                    slot.spin.1 = slot.spin.1.saturating_add(1);
                } else {
                    slot.spin = (now, 1);
                }
                slot.host.handle_timeout(now);
                self.service(host as usize);
            }
            Ev::TxDone(l) => {
                let link = &mut self.links[l as usize];
                link.port.tx_pending = false;
                link.finish(now);
                // The packet just serialised is the last one on the wire.
                let at = link.port.wire_tail;
                self.agenda.push(at, Ev::Arrive(l));
                self.try_start(l);
            }
            Ev::Arrive(l) => self.wire_arrival(l),
            Ev::Late(i) => {
                if let Some(pkt) = self.late[i as usize].take() {
                    self.late_free.push(i);
                    self.onward(pkt);
                }
            }
            Ev::Resume(l) => {
                self.links[l as usize].apply_config();
                self.try_start(l);
            }
        }
    }

    /// Starts serialising the next packet of link `l` if it is free.
    fn try_start(&mut self, l: u32) {
        let link = &mut self.links[l as usize];
        if link.port.tx_pending {
            return;
        }
        if let Some(done) = link.start(self.now) {
            link.port.tx_pending = true;
            self.agenda.push(done, Ev::TxDone(l));
        }
    }

    /// The head packet of link `l`'s wire has arrived: it meets its fate, then
    /// goes on. (Arrival times on a wire never decrease and each packet's event
    /// was scheduled in wire order, so the head is the packet due.)
    fn wire_arrival(&mut self, l: u32) {
        let now = self.now;
        let link = &mut self.links[l as usize];
        let Some((_, pkt)) = link.port.wire.pop_front() else {
            return;
        };
        let fate = link.fate(now, usize::from(pkt.class), usize::from(pkt.len));
        if fate.lost {
            self.slab.free(pkt.slot);
            return;
        }
        let copy = fate.copy.then(|| Pkt {
            slot: self.slab.copy(pkt.slot, usize::from(pkt.len)),
            ..pkt
        });
        for p in std::iter::once(pkt).chain(copy) {
            if fate.jitter == Duration::ZERO {
                self.onward(p);
            } else {
                self.hold(now + fate.jitter, p);
            }
        }
    }

    /// Keeps a jittered packet that left its link until `at`.
    fn hold(&mut self, at: Instant, pkt: Pkt) {
        let i = match self.late_free.pop() {
            Some(i) => {
                self.late[i as usize] = Some(pkt);
                i
            }
            None => {
                self.late.push(Some(pkt));
                self.late.len() as u32 - 1
            }
        };
        self.agenda.push(at, Ev::Late(i));
    }

    /// A packet reached the end of the link at `pkt.hop` of its route: onto the
    /// next link, or to the destination host.
    fn onward(&mut self, mut pkt: Pkt) {
        let now = self.now;
        pkt.hop += 1;
        let route = &self.routes[pkt.route as usize];
        match route.links.get(usize::from(pkt.hop)) {
            Some(&next) => self.enqueue(next, pkt),
            None => {
                let (to, path) = (route.to.0, route.path);
                let data = self.slab.datagram(pkt.slot, usize::from(pkt.len));
                self.hosts[to].host.handle_datagram(now, path, data, pkt.ce);
                self.slab.free(pkt.slot);
                self.service(to);
            }
        }
    }

    /// Sends everything the host has to send now, then reschedules its timer.
    fn service(&mut self, host: usize) {
        let now = self.now;
        loop {
            let h = &mut self.hosts[host];
            let Some(t) = h.host.poll_transmit(now, self.slab.tx()) else {
                break;
            };
            let route = h.routes.get(usize::from(t.path)).copied().flatten();
            let Some(route) = route.filter(|_| t.len > 0 && t.len <= self.slab.slot_len()) else {
                self.unrouted += 1;
                continue;
            };
            let slot = self.slab.store(t.len);
            let pkt = Pkt {
                slot,
                len: t.len as u16,
                route,
                hop: 0,
                class: t.priority.index() as u8,
                ce: false,
            };
            let first = self.routes[route as usize].links[0];
            self.enqueue(first, pkt);
        }
        let slot = &mut self.hosts[host];
        // Compared as the host reported it, so a timeout already due that the host
        // keeps reporting is scheduled once, not at every service.
        let timer = slot.host.poll_timeout();
        if timer != slot.timer {
            slot.gen += 1;
            slot.timer = timer;
            if let Some(t) = timer {
                let at =
                    if t <= now && slot.spin.0 == now && slot.spin.1 >= MAX_TIMEOUTS_AT_ONE_INSTANT
                    {
                        self.stuck_timers += 1;
                        now + Duration::from_ns(1)
                    } else {
                        t.max(now)
                    };
                let gen = slot.gen;
                self.agenda.push(
                    at,
                    Ev::Timer {
                        host: host as u32,
                        gen,
                    },
                );
            }
        }
    }

    fn enqueue(&mut self, l: u32, pkt: Pkt) {
        if self.links[l as usize].enqueue(self.now, pkt) {
            self.try_start(l);
        } else {
            self.slab.free(pkt.slot);
        }
    }
}
