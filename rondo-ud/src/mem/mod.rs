//! A deterministic in-memory network for tests: a tiny discrete-event simulator
//! that drives any set of [`Host`]s over output-queued links.
//!
//! Every host sends through its own NIC link (rate only); a route then takes a
//! datagram over a list of links to its destination, which sees the same path id.
//! Each link has three strict-priority FIFO classes (Control > Data > Probe, as in
//! paper §4.2.2), a serialiser, a propagation delay, and faults injected per packet
//! as it leaves (loss, duplication, jitter) — all changeable while running.
//! Events are ordered by `(time, insertion order)` and all randomness comes from
//! the seed, so the same seed gives the same run, bit for bit.
//!
//! ```
//! use rondo_ud::mem::{LinkConfig, Network};
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
mod pair;

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

pub use link::{ClassStats, LinkConfig, LinkStats, QueueSample};
pub use pair::{Pair, PathSpec};

use link::{Departure, Link, Packet};
use rondo_proto::rng::Rng;

use rondo_proto::time::{Duration, Instant};
use rondo_proto::transmit::Host;

/// Index of a link in a [`Network`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LinkId(pub usize);

/// Index of a host in a [`Network`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HostId(pub usize);

/// Bytes of the buffer handed to [`Host::poll_transmit`]: enough for any flow.
const SCRATCH_BYTES: usize = 64 * 1024;
// The setup check of this driver, made once for every flow it can be given.
const _: () = assert!(SCRATCH_BYTES >= rondo_proto::config::MAX_MTU);

/// Consecutive timeouts of one host at one instant after which it is declared
/// stuck: it keeps asking for a timeout now without making progress.
const MAX_TIMEOUTS_AT_ONE_INSTANT: u32 = 10_000;

enum Event {
    /// Poll a host's transmits and timer (after it was added or mutated).
    Kick(usize),
    /// A host's timer; stale unless `gen` is the host's current generation.
    Timer { host: usize, gen: u64 },
    /// The packet a link is serialising has left it.
    Depart(usize),
    /// A packet reached the end of the link at `hop` of its route.
    Arrive(Packet),
    /// A link's configuration changed: restart its serialiser if it was paused.
    Resume(usize),
}

struct Scheduled {
    at: Instant,
    seq: u64,
    event: Event,
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

/// Pending events, earliest first, ties in insertion order.
#[derive(Default)]
struct Agenda {
    heap: BinaryHeap<Reverse<Scheduled>>,
    seq: u64,
}

impl Agenda {
    fn push(&mut self, at: Instant, event: Event) {
        self.seq += 1;
        self.heap.push(Reverse(Scheduled {
            at,
            seq: self.seq,
            event,
        }));
    }
}

struct HostSlot<H> {
    host: H,
    nic: LinkId,
    /// Route index per path id.
    routes: Vec<Option<usize>>,
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
    links: Vec<LinkId>,
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
    /// Free packet buffers.
    pool: Vec<Vec<u8>>,
    scratch: Vec<u8>,
    unrouted: u64,
}

impl<H: Host> Network<H> {
    /// An empty network at [`Instant::ZERO`] whose randomness all derives from `seed`.
    pub fn new(seed: u64) -> Self {
        Network {
            now: Instant::ZERO,
            hosts: Vec::new(),
            links: Vec::new(),
            routes: Vec::new(),
            agenda: Agenda::default(),
            rng: Rng::new(seed),
            pool: Vec::new(),
            scratch: vec![0; SCRATCH_BYTES],
            unrouted: 0,
        }
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
    /// If a host or link id does not exist.
    pub fn set_route(&mut self, from: HostId, path: u16, to: HostId, links: &[LinkId]) {
        assert!(to.0 < self.hosts.len(), "set_route: no host {to:?}");
        for l in links {
            assert!(l.0 < self.links.len(), "set_route: no link {l:?}");
        }
        let slot = &mut self.hosts[from.0];
        let mut route = Vec::with_capacity(links.len() + 1);
        route.push(slot.nic);
        route.extend_from_slice(links);
        let index = self.routes.len();
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

    /// A link's configuration, to change while running. A new rate applies from the
    /// next packet to start serialising, new delay, jitter, loss and duplication
    /// from the next packet to finish, new limits from the next arrival.
    pub fn link_mut(&mut self, id: LinkId) -> &mut LinkConfig {
        // A paused link (rate zero) has no pending departure: look again once the
        // caller has changed the rate.
        self.agenda.push(self.now, Event::Resume(id.0));
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

    /// Datagrams dropped because their sender had no route for their path.
    pub fn unrouted(&self) -> u64 {
        self.unrouted
    }

    /// The current time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// The time of the next pending event, if any.
    pub fn next_event(&mut self) -> Option<Instant> {
        // Drop stale timers so that they never count as pending work.
        while let Some(Reverse(s)) = self.agenda.heap.peek() {
            match s.event {
                Event::Timer { host, gen } if self.hosts[host].gen != gen => {
                    self.agenda.heap.pop();
                }
                _ => return Some(s.at),
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
        while self.agenda.heap.peek().is_some_and(|Reverse(s)| s.at <= at) {
            let Some(Reverse(s)) = self.agenda.heap.pop() else {
                break;
            };
            self.dispatch(s.event);
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
            self.agenda.push(self.now, Event::Kick(host));
        }
    }

    fn dispatch(&mut self, event: Event) {
        let now = self.now;
        match event {
            Event::Kick(host) => {
                self.hosts[host].kick_pending = false;
                self.service(host);
            }
            Event::Timer { host, gen } => {
                let slot = &mut self.hosts[host];
                if slot.gen != gen {
                    return;
                }
                slot.timer = None;
                if slot.spin.0 == now {
                    slot.spin.1 += 1;
                    assert!(
                        slot.spin.1 <= MAX_TIMEOUTS_AT_ONE_INSTANT,
                        "host {host} keeps asking for a timeout at {now:?} without progress"
                    );
                } else {
                    slot.spin = (now, 1);
                }
                slot.host.handle_timeout(now);
                self.service(host);
            }
            Event::Depart(link) => {
                let l = &mut self.links[link];
                let departure = l.depart(now);
                if let Some(at) = l.start(now) {
                    self.agenda.push(at, Event::Depart(link));
                }
                match departure {
                    Departure::Lost(packet) => self.pool.push(packet.data),
                    Departure::Onward {
                        packet,
                        delay,
                        copy,
                    } => {
                        let copy = copy.then(|| Packet {
                            data: pooled(&mut self.pool, &packet.data),
                            ..packet
                        });
                        self.agenda.push(now + delay, Event::Arrive(packet));
                        if let Some(copy) = copy {
                            self.agenda.push(now + delay, Event::Arrive(copy));
                        }
                    }
                }
            }
            Event::Arrive(mut packet) => {
                packet.hop += 1;
                let route = &self.routes[packet.route];
                match route.links.get(packet.hop) {
                    Some(&next) => self.enqueue(next, packet),
                    None => {
                        let (to, path) = (route.to.0, route.path);
                        let host = &mut self.hosts[to].host;
                        host.handle_datagram(now, path, &packet.data, packet.ce);
                        self.pool.push(packet.data);
                        self.service(to);
                    }
                }
            }
            Event::Resume(link) => {
                if let Some(at) = self.links[link].start(now) {
                    self.agenda.push(at, Event::Depart(link));
                }
            }
        }
    }

    /// Sends everything the host has to send now, then reschedules its timer.
    fn service(&mut self, host: usize) {
        let now = self.now;
        loop {
            let slot = &mut self.hosts[host];
            let Some(t) = slot.host.poll_transmit(now, &mut self.scratch) else {
                break;
            };
            assert!(
                t.len <= SCRATCH_BYTES,
                "host {host} transmitted {} bytes",
                t.len
            );
            let Some(route) = slot.routes.get(usize::from(t.path)).copied().flatten() else {
                self.unrouted += 1;
                continue;
            };
            let packet = Packet {
                data: pooled(&mut self.pool, &self.scratch[..t.len]),
                route,
                hop: 0,
                priority: t.priority,
                ce: false,
            };
            self.enqueue(self.routes[route].links[0], packet);
        }
        let slot = &mut self.hosts[host];
        let timer = slot.host.poll_timeout();
        if timer != slot.timer {
            slot.gen += 1;
            slot.timer = timer;
            if let Some(at) = timer {
                let gen = slot.gen;
                self.agenda.push(at.max(now), Event::Timer { host, gen });
            }
        }
    }

    fn enqueue(&mut self, link: LinkId, packet: Packet) {
        let l = &mut self.links[link.0];
        match l.enqueue(self.now, packet) {
            Err(dropped) => self.pool.push(dropped.data),
            Ok(()) => {
                if let Some(at) = l.start(self.now) {
                    self.agenda.push(at, Event::Depart(link.0));
                }
            }
        }
    }
}

/// A buffer from `pool` (or a new one) holding a copy of `data`.
fn pooled(pool: &mut Vec<Vec<u8>>, data: &[u8]) -> Vec<u8> {
    let mut buf = pool.pop().unwrap_or_default();
    buf.clear();
    buf.extend_from_slice(data);
    buf
}
