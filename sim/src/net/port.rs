//! One link as an output port: three strict-priority FIFO classes, a serialiser
//! and a wire (packets in propagation, in order). A packet leaves the queue when
//! its serialisation starts.

use super::Meta;
use rondo_proto::time::{Duration, Instant};
use std::collections::VecDeque;

/// A FIFO whose first element lives inline, so that the common short queue
/// (one element) and the next element to pop sit in the port's own memory: a pop
/// refills the head from the adjacent, just-touched storage.
pub(crate) struct Fifo<T> {
    head: Option<T>,
    rest: VecDeque<T>,
}

impl<T> Default for Fifo<T> {
    fn default() -> Self {
        Fifo {
            head: None,
            rest: VecDeque::new(),
        }
    }
}

impl<T> Fifo<T> {
    pub fn push_back(&mut self, x: T) {
        if self.head.is_none() {
            self.head = Some(x);
        } else {
            self.rest.push_back(x);
        }
    }

    pub fn pop_front(&mut self) -> Option<T> {
        let x = self.head.take()?;
        self.head = self.rest.pop_front();
        self.prefetch_next();
        Some(x)
    }

    /// Asks for the cache line of the entry that the next pop moves into the
    /// head (see [`reorder::prefetch`]): in a large run a link's queue is cold
    /// between two of its packets, and that read was the network model's
    /// costliest miss.
    pub fn prefetch_next(&self) {
        if let Some(x) = self.rest.front() {
            reorder::prefetch(x);
        }
    }

    pub fn front(&self) -> Option<&T> {
        self.head.as_ref()
    }

    pub fn is_empty(&self) -> bool {
        self.head.is_none()
    }
}

/// Serialisation and propagation state plus queue statistics of one link. `M` is
/// the packet descriptor that travels through its queues and wire: [`Meta`] in the
/// [`Simulator`](crate::Simulator), a route-following one in
/// [`crate::pair::Network`].
pub(crate) struct Port<M = Meta> {
    pub to: u32,
    /// Switch index owning the queue, or `fabric::NONE` for a host NIC.
    pub owner: u32,
    pub bps: u64,
    /// Picoseconds per byte when exact, else 0 (then computed per packet).
    ps_per_byte: u64,
    pub delay: Duration,
    pub queues: [Fifo<M>; 3],
    pub class_bytes: [u64; 3],
    pub busy_until: Instant,
    pub tx_pending: bool,
    pub wire: Fifo<(Instant, M)>,
    /// Arrival time of the last packet put on the wire.
    pub wire_tail: Instant,
    pub wire_pending: bool,
    pub data_paused: bool,
    pub failed: bool,
    pub in_path_group: bool,
    pub stats: PortCounters,
}

/// Counters of one port since the start of measurement.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PortCounters {
    pub sent_packets: u64,
    pub sent_bytes: u64,
    pub max_queue_bytes: u64,
    /// Integral of queued bytes over time, byte-picoseconds.
    pub area: u128,
    pub last_change: Instant,
    pub since: Instant,
    pub ce_marked: u64,
    pub pauses: u64,
}

impl<M: Copy> Port<M> {
    pub fn new(to: u32, owner: u32, bps: u64, delay: Duration) -> Port<M> {
        let mut p = Port {
            to,
            owner,
            bps: 0,
            ps_per_byte: 0,
            delay,
            queues: Default::default(),
            class_bytes: [0; 3],
            busy_until: Instant::ZERO,
            tx_pending: false,
            wire: Fifo::default(),
            wire_tail: Instant::ZERO,
            wire_pending: false,
            data_paused: false,
            failed: false,
            in_path_group: false,
            stats: PortCounters::default(),
        };
        p.set_rate(bps);
        p
    }

    pub fn set_rate(&mut self, bps: u64) {
        self.bps = bps;
        self.ps_per_byte = if bps > 0 && 8_000_000_000_000 % bps == 0 {
            8_000_000_000_000 / bps
        } else {
            0
        };
    }

    pub fn serialisation(&self, bytes: u64) -> Duration {
        if self.ps_per_byte != 0 {
            Duration::from_ps(bytes * self.ps_per_byte)
        } else {
            Duration::serialisation(bytes, self.bps)
        }
    }

    pub fn queued_bytes(&self) -> u64 {
        self.class_bytes[0] + self.class_bytes[1] + self.class_bytes[2]
    }

    /// Call before the queue changes.
    pub fn account(&mut self, now: Instant) {
        let q = self.queued_bytes();
        let dt = now.saturating_since(self.stats.last_change).as_ps();
        self.stats.area += u128::from(q) * u128::from(dt);
        self.stats.last_change = now;
    }

    /// Call after the queue grew.
    pub fn note_max(&mut self) {
        self.stats.max_queue_bytes = self.stats.max_queue_bytes.max(self.queued_bytes());
    }

    /// Queues packet `m` of `len` bytes in `class` (accounting first, then the
    /// queue maximum).
    #[inline]
    pub fn push(&mut self, now: Instant, class: usize, m: M, len: u64) {
        self.account(now);
        self.queues[class].push_back(m);
        self.class_bytes[class] += len;
        self.note_max();
    }

    /// Starts serialising the head packet of the highest class that may start,
    /// if any: it leaves its queue, the serialiser is busy until `busy_until`, and
    /// the packet goes on the wire, arriving at the far end at the new `wire_tail`
    /// (never before a packet already on the wire). The caller checked that the
    /// serialiser is free (`busy_until <= now`) and the link up with a rate, and
    /// schedules the events. Returns its class and the packet; `len_of` gives a
    /// packet's bytes.
    #[inline]
    pub fn serialise_next(
        &mut self,
        now: Instant,
        len_of: impl Fn(&M) -> u64,
    ) -> Option<(usize, M)> {
        let class = self.next_class()?;
        self.account(now);
        let pkt = self.queues[class].pop_front()?;
        let len = len_of(&pkt);
        self.class_bytes[class] -= len;
        self.stats.sent_packets += 1;
        self.stats.sent_bytes += len;
        let ser = self.serialisation(len);
        self.busy_until = now + ser;
        let arrival = (now + ser + self.delay).max(self.wire_tail);
        self.wire_tail = arrival;
        self.wire.push_back((arrival, pkt));
        Some((class, pkt))
    }

    /// The class to serialise next, if any may start.
    pub fn next_class(&self) -> Option<usize> {
        if !self.queues[0].is_empty() {
            Some(0)
        } else if !self.queues[1].is_empty() && !self.data_paused {
            Some(1)
        } else if !self.queues[2].is_empty() {
            Some(2)
        } else {
            None
        }
    }

    /// Restarts the statistics at `now` (start of measurement).
    pub fn reset_stats(&mut self, now: Instant) {
        self.stats = PortCounters {
            max_queue_bytes: self.queued_bytes(),
            last_change: now,
            since: now,
            ..PortCounters::default()
        };
    }

    /// Mean queued bytes from the start of measurement to `now`.
    pub fn mean_queue_bytes(&self, now: Instant) -> f64 {
        let span = now.saturating_since(self.stats.since).as_ps();
        if span == 0 {
            return self.queued_bytes() as f64;
        }
        let tail = u128::from(self.queued_bytes())
            * u128::from(now.saturating_since(self.stats.last_change).as_ps());
        (self.stats.area + tail) as f64 / span as f64
    }
}
