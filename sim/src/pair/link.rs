//! One link of a [`Network`](super::Network): the simulator's output port
//! (three strict-priority FIFO classes, a serialiser and an in-order wire, the
//! same [`Port`] as every link of the [`Simulator`](crate::Simulator)) with
//! per-class tail-drop limits, ECN marking and the per-packet faults applied as a
//! packet leaves the wire (loss, duplication, jitter), decided by the one fault
//! injector of the workspace ([`rondo_proto::fault::Faults`]).

use crate::net::port::Port;
use rondo_proto::fault::{FaultConfig, Faults, Verdict};
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
    /// One-way propagation delay, added after serialisation. Packets never
    /// overtake each other on the wire (jitter aside).
    pub delay: Duration,
    /// Probability, in `[0, 1]`, that a packet of any class is lost as it leaves
    /// the link. `1.0` black-holes the link.
    pub loss: f64,
    /// Probability that a packet leaving the link is delivered twice (the copy
    /// arrives right after the original).
    pub duplicate: f64,
    /// Each packet gets a uniform extra delay in `[0, jitter)` as it leaves the
    /// link; packets may then overtake each other.
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
    /// Packets lost to random loss ([`LinkConfig::loss`]) as they left the link.
    pub lost: u64,
    /// Packets delivered twice ([`LinkConfig::duplicate`]).
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

/// A datagram inside the network: its slab slot and where it is on its route.
#[derive(Clone, Copy, Debug)]
pub(super) struct Pkt {
    pub slot: u32,
    pub len: u16,
    /// Index of the route it follows.
    pub route: u32,
    /// Index, in the route, of the link it is on.
    pub hop: u16,
    pub class: u8,
    pub ce: bool,
}

impl Pkt {
    pub fn bytes(&self) -> u64 {
        u64::from(self.len)
    }
}

/// What happens to a packet as it leaves the wire.
pub(super) struct Fate {
    /// Lost: it goes no further.
    pub lost: bool,
    /// Delivered a second time.
    pub copy: bool,
    /// Extra delay before it reaches the next hop.
    pub jitter: Duration,
}

/// A link's live state.
pub(super) struct Link {
    pub cfg: LinkConfig,
    pub port: Port<Pkt>,
    /// The packet being serialised: its class and bytes.
    pub serving: Option<(usize, usize)>,
    stats: LinkStats,
    /// Faults with a private stream, so faults on one link do not shift another's
    /// randomness.
    faults: Faults,
    trace: Option<Vec<QueueSample>>,
}

impl Link {
    pub fn new(cfg: LinkConfig, rng: Rng) -> Link {
        let port = Port::new(
            crate::net::fabric::NONE,
            crate::net::fabric::NONE,
            cfg.bits_per_sec(),
            cfg.delay,
        );
        Link {
            cfg,
            port,
            serving: None,
            stats: LinkStats::default(),
            faults: Faults::with_rng(FaultConfig::default(), rng),
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

    /// Takes the configured rate and delay into the port (from the next packet
    /// to start serialising).
    pub fn apply_config(&mut self) {
        self.port.set_rate(self.cfg.bits_per_sec());
        self.port.delay = self.cfg.delay;
    }

    /// Tail-drops (false) or queues an arriving packet, marking it CE when the data
    /// class is above the ECN threshold.
    pub fn enqueue(&mut self, now: Instant, mut pkt: Pkt) -> bool {
        let class = usize::from(pkt.class);
        let len = usize::from(pkt.len);
        let c = &mut self.stats.classes[class];
        if c.queue_bytes.saturating_add(len) > self.cfg.limit(class) {
            c.dropped_tail += 1;
            return false;
        }
        if class == Priority::Data.index()
            && !pkt.ce
            && self
                .cfg
                .ecn_threshold_bytes
                .is_some_and(|k| c.queue_bytes > k)
        {
            pkt.ce = true;
            c.ce_marked += 1;
        }
        c.enqueued += 1;
        c.enqueued_bytes += len as u64;
        c.queue_bytes += len;
        c.max_queue_bytes = c.max_queue_bytes.max(c.queue_bytes);
        self.stats.queue_bytes += len;
        self.stats.max_queue_bytes = self.stats.max_queue_bytes.max(self.stats.queue_bytes);
        self.port.push(now, class, pkt, pkt.bytes());
        self.sample(now);
        true
    }

    /// If the serialiser is free, the rate non-zero and a packet waiting, starts
    /// serialising the head of the highest non-empty class (it goes on the wire at
    /// once, arriving at `port.wire_tail`). Returns when it will have been
    /// serialised.
    pub fn start(&mut self, now: Instant) -> Option<Instant> {
        if self.serving.is_some() || self.port.bps == 0 {
            return None;
        }
        let (class, pkt) = self.port.serialise_next(now, Pkt::bytes)?;
        self.serving = Some((class, usize::from(pkt.len)));
        Some(self.port.busy_until)
    }

    /// The packet being serialised has been serialised.
    pub fn finish(&mut self, now: Instant) {
        let Some((class, len)) = self.serving.take() else {
            return;
        };
        let c = &mut self.stats.classes[class];
        c.queue_bytes -= len;
        c.sent += 1;
        c.sent_bytes += len as u64;
        self.stats.queue_bytes -= len;
        self.sample(now);
    }

    /// Draws the fate of a packet of `class` and `len` bytes leaving the wire at
    /// `now`: loss, then duplication, then jitter.
    pub fn fate(&mut self, now: Instant, class: usize, len: usize) -> Fate {
        self.faults.set_config(FaultConfig {
            loss: self.cfg.loss,
            duplicate: self.cfg.duplicate,
            jitter: self.cfg.jitter,
            ..FaultConfig::default()
        });
        match self.faults.judge(now, 0, len) {
            Verdict::Drop(_) => {
                self.stats.classes[class].lost += 1;
                Fate {
                    lost: true,
                    copy: false,
                    jitter: Duration::ZERO,
                }
            }
            Verdict::Pass {
                duplicate, delay, ..
            } => {
                if duplicate {
                    self.stats.classes[class].duplicated += 1;
                }
                Fate {
                    lost: false,
                    copy: duplicate,
                    jitter: delay,
                }
            }
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
