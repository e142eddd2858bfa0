//! One output-queued link: three strict-priority FIFO classes, a serialiser, a
//! propagation delay and the per-packet faults (loss, duplication, jitter).

use std::collections::VecDeque;

use rondo_proto::rng::Rng;
use rondo_proto::time::{Duration, Instant};
use rondo_proto::transmit::Priority;

/// Configuration of a link. Every field may be changed while the network runs,
/// through [`Network::link_mut`](super::Network::link_mut).
#[derive(Clone, Debug, PartialEq)]
pub struct LinkConfig {
    /// Line rate in Gbit/s. Zero (or negative) pauses the link: packets queue but
    /// none starts serialising until the rate is raised.
    pub gbps: f64,
    /// One-way propagation delay, added after serialisation.
    pub delay: Duration,
    /// Probability, in `[0, 1]`, that a packet of any class is lost as it leaves
    /// the link. `1.0` black-holes the link.
    pub loss: f64,
    /// Probability that a packet leaving the link is delivered twice (the copy
    /// arrives right after the original).
    pub duplicate: f64,
    /// Each packet gets a uniform extra delay in `[0, jitter)`; packets may then
    /// overtake each other on the wire.
    pub jitter: Duration,
    /// Tail-drop threshold of the probe class, in queued bytes.
    pub probe_queue_limit_bytes: usize,
    /// Tail-drop threshold of the control class and of the data class, each, in
    /// queued bytes.
    pub queue_limit_bytes: usize,
    /// Mark data packets Congestion Experienced when, on their arrival, the data
    /// class already holds more than this many bytes. `None`: no marking.
    pub ecn_threshold_bytes: Option<usize>,
}

impl LinkConfig {
    /// Default [`LinkConfig::probe_queue_limit_bytes`]: two MTU-sized probes.
    pub const DEFAULT_PROBE_QUEUE_LIMIT_BYTES: usize = 3000;
    /// Default [`LinkConfig::queue_limit_bytes`]: 16 MiB.
    pub const DEFAULT_QUEUE_LIMIT_BYTES: usize = 16 << 20;

    /// A lossless link of `gbps` Gbit/s and one-way `delay`, with the default queue
    /// limits, no jitter and no ECN marking.
    pub fn new(gbps: f64, delay: Duration) -> LinkConfig {
        LinkConfig {
            gbps,
            delay,
            loss: 0.0,
            duplicate: 0.0,
            jitter: Duration::ZERO,
            probe_queue_limit_bytes: Self::DEFAULT_PROBE_QUEUE_LIMIT_BYTES,
            queue_limit_bytes: Self::DEFAULT_QUEUE_LIMIT_BYTES,
            ecn_threshold_bytes: None,
        }
    }

    /// The line rate in bits per second, rounded; zero for a paused link.
    pub fn bits_per_sec(&self) -> u64 {
        if self.gbps.is_finite() && self.gbps > 0.0 {
            (self.gbps * 1e9).round() as u64
        } else {
            0
        }
    }

    /// Tail-drop threshold of `class`.
    fn limit(&self, class: usize) -> usize {
        if class == Priority::Probe.index() {
            self.probe_queue_limit_bytes
        } else {
            self.queue_limit_bytes
        }
    }
}

/// Counters of one priority class of a link.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassStats {
    /// Packets accepted into the queue.
    pub enqueued: u64,
    /// Bytes accepted into the queue.
    pub enqueued_bytes: u64,
    /// Packets refused on arrival because the class would exceed its limit
    /// (for the probe class: the probe drop threshold).
    pub dropped_tail: u64,
    /// Packets that finished serialisation (including those then lost).
    pub sent: u64,
    /// Bytes that finished serialisation.
    pub sent_bytes: u64,
    /// Serialised packets lost to random loss ([`LinkConfig::loss`]).
    pub lost: u64,
    /// Serialised packets delivered twice ([`LinkConfig::duplicate`]).
    pub duplicated: u64,
    /// Packets this link marked Congestion Experienced.
    pub ce_marked: u64,
    /// Bytes queued now, including the packet being serialised.
    pub queue_bytes: usize,
    /// Largest value `queue_bytes` has taken.
    pub max_queue_bytes: usize,
}

/// A snapshot of a link's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Per class, indexed by [`Priority::index`].
    pub classes: [ClassStats; Priority::COUNT],
    /// Bytes queued now over all classes, including the packet being serialised.
    pub queue_bytes: usize,
    /// Largest value `queue_bytes` has taken.
    pub max_queue_bytes: usize,
}

impl LinkStats {
    /// The counters of one class.
    pub fn class(&self, priority: Priority) -> &ClassStats {
        &self.classes[priority.index()]
    }

    /// Counters summed over the classes; the queue fields are the link's totals.
    pub fn total(&self) -> ClassStats {
        let mut t = ClassStats {
            queue_bytes: self.queue_bytes,
            max_queue_bytes: self.max_queue_bytes,
            ..ClassStats::default()
        };
        for c in &self.classes {
            t.enqueued += c.enqueued;
            t.enqueued_bytes += c.enqueued_bytes;
            t.dropped_tail += c.dropped_tail;
            t.sent += c.sent;
            t.sent_bytes += c.sent_bytes;
            t.lost += c.lost;
            t.duplicated += c.duplicated;
            t.ce_marked += c.ce_marked;
        }
        t
    }
}

/// The total queue of a link at one instant, recorded after every change when
/// tracing is on ([`Network::trace_queue`](super::Network::trace_queue)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueSample {
    /// When the queue changed.
    pub at: Instant,
    /// Bytes queued over all classes after the change.
    pub bytes: usize,
}

/// A datagram inside the network.
#[derive(Debug)]
pub(super) struct Packet {
    pub data: Vec<u8>,
    /// Index of the route it follows.
    pub route: usize,
    /// Index, in the route, of the link it is on or has just left.
    pub hop: usize,
    pub priority: Priority,
    pub ce: bool,
}

/// What happens to a packet that finished serialisation.
pub(super) enum Departure {
    /// Random loss: the buffer comes back for reuse.
    Lost(Packet),
    /// It reaches the end of the link after `delay`; `copy`: deliver a duplicate too.
    Onward {
        packet: Packet,
        delay: Duration,
        copy: bool,
    },
}

/// A link's live state.
pub(super) struct Link {
    pub cfg: LinkConfig,
    queues: [VecDeque<Packet>; Priority::COUNT],
    /// Class whose head packet is being serialised.
    serving: Option<usize>,
    stats: LinkStats,
    /// Private stream, so faults on one link do not shift another's randomness.
    rng: Rng,
    trace: Option<Vec<QueueSample>>,
}

impl Link {
    pub fn new(cfg: LinkConfig, rng: Rng) -> Link {
        Link {
            cfg,
            queues: Default::default(),
            serving: None,
            stats: LinkStats::default(),
            rng,
            trace: None,
        }
    }

    pub fn stats(&self) -> LinkStats {
        self.stats
    }

    pub fn trace(&mut self) {
        self.trace.get_or_insert_with(Vec::new);
    }

    pub fn samples(&self) -> &[QueueSample] {
        self.trace.as_deref().unwrap_or(&[])
    }

    /// Tail-drops (giving the packet back) or queues an arriving packet.
    pub fn enqueue(&mut self, now: Instant, mut packet: Packet) -> Result<(), Packet> {
        let class = packet.priority.index();
        let len = packet.data.len();
        let c = &mut self.stats.classes[class];
        if c.queue_bytes.saturating_add(len) > self.cfg.limit(class) {
            c.dropped_tail += 1;
            return Err(packet);
        }
        if class == Priority::Data.index()
            && !packet.ce
            && self
                .cfg
                .ecn_threshold_bytes
                .is_some_and(|k| c.queue_bytes > k)
        {
            packet.ce = true;
            c.ce_marked += 1;
        }
        c.enqueued += 1;
        c.enqueued_bytes += len as u64;
        c.queue_bytes += len;
        c.max_queue_bytes = c.max_queue_bytes.max(c.queue_bytes);
        self.stats.queue_bytes += len;
        self.stats.max_queue_bytes = self.stats.max_queue_bytes.max(self.stats.queue_bytes);
        self.queues[class].push_back(packet);
        self.sample(now);
        Ok(())
    }

    /// If the serialiser is free, the rate non-zero and a packet waiting, starts
    /// serialising the head of the highest non-empty class and returns when it
    /// will have left.
    pub fn start(&mut self, now: Instant) -> Option<Instant> {
        if self.serving.is_some() {
            return None;
        }
        let bps = self.cfg.bits_per_sec();
        if bps == 0 {
            return None;
        }
        let class = self.queues.iter().position(|q| !q.is_empty())?;
        let len = self.queues[class][0].data.len();
        self.serving = Some(class);
        Some(now + Duration::serialisation(len as u64, bps))
    }

    /// The packet being serialised has left: dequeues it and draws its fate
    /// (loss, then duplication, then jitter).
    pub fn depart(&mut self, now: Instant) -> Departure {
        let class = self.serving.take().expect("departure from an idle link");
        let packet = self.queues[class]
            .pop_front()
            .expect("serving an empty class");
        let len = packet.data.len();
        let c = &mut self.stats.classes[class];
        c.queue_bytes -= len;
        c.sent += 1;
        c.sent_bytes += len as u64;
        self.stats.queue_bytes -= len;
        self.sample(now);
        if self.rng.chance(self.cfg.loss) {
            self.stats.classes[class].lost += 1;
            return Departure::Lost(packet);
        }
        let copy = self.rng.chance(self.cfg.duplicate);
        if copy {
            self.stats.classes[class].duplicated += 1;
        }
        let mut delay = self.cfg.delay;
        let jitter = self.cfg.jitter.as_ps();
        if jitter > 0 {
            delay += Duration::from_ps(self.rng.gen_range(0..jitter));
        }
        Departure::Onward {
            packet,
            delay,
            copy,
        }
    }

    fn sample(&mut self, at: Instant) {
        if let Some(trace) = &mut self.trace {
            trace.push(QueueSample {
                at,
                bytes: self.stats.queue_bytes,
            });
        }
    }
}
