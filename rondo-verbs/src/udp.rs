//! The `udp` backend: the context's verbs host over `rondo_ud::udp`'s datapath (one
//! socket per path), driven by a progress thread per context, with optional fault
//! injection (loss, reordering) on the receive side.
//!
//! Progress: by default a thread runs the datapath, so that one-sided WRITE and READ
//! are served without the responder polling (as a NIC does). While traffic flows it
//! runs datapath rounds back to back; after [`IDLE_ROUNDS`](crate::progress::IDLE_ROUNDS) rounds that moved
//! nothing it sleeps in `ppoll` until a path socket is readable, a post wakes it
//! (an eventfd, written only while it sleeps) or the engine's next timer is due,
//! so an idle or window-limited context costs no CPU. `poll_cq` on an empty queue
//! only yields the core; it never runs a second datapath round beside the thread.
//! With [`UdpAttr::progress_thread`] off, progress is explicit: each `poll_cq` runs
//! one datapath round. `docs/verbs.md` has the measurements behind these choices.

use crate::cq::CqShared;
use crate::host::{Keys, VerbsHost};
use crate::progress::{drive_until, progress_loop, Policy, Rounds, Shared, Sleep};
use crate::types::ContextStats;
use crate::VerbsError;
use rondo_proto::rng::Rng;
use rondo_proto::{Endpoint, Host, Instant, PayloadRef, Transmit};
use rondo_ud::udp::{Clock, UdpConfig, UdpDatapath, Waiter, Waker};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

/// How long a reordered datagram is held at most before it is delivered anyway.
const HOLD: rondo_proto::Duration = rondo_proto::Duration::from_us(50);
/// Engine timers closer than this are waited for by running rounds, not by sleeping
/// (the kernel's timer slack makes short sleeps long).
const SHORT_WAIT: std::time::Duration = std::time::Duration::from_micros(20);
/// Longest sleep of the progress thread (it checks for shutdown in between).
const MAX_SLEEP: std::time::Duration = std::time::Duration::from_millis(10);

/// Base RTT given to the engine per path on the `udp` backend (see [`udp_flow_config`]).
pub const HOST_BASE_RTT: rondo_proto::Duration = rondo_proto::Duration::from_us(500);
/// Smallest retransmission timeout on the `udp` backend (see [`udp_flow_config`]).
pub const HOST_RTO_MIN: rondo_proto::Duration = rondo_proto::Duration::from_ms(25);

/// Early-recovery threshold on the `udp` backend: four paths' worth of the
/// datapath's largest receive round (a batch of 64 GRO entries that each hold
/// several datagrams) (see [`udp_flow_config`]).
pub const HOST_REORDER_PACKETS: u32 = 1024;

/// Engine settings for QPs on the `udp` backend ([`crate::QpInitAttr::udp`] uses
/// them): `rondo_ud::udp::flow_config` (no pacing, no capacity probing: the window
/// clocks the flow, and a host has no low-priority queue to drop probes first)
/// with what the paper's timescales mean on a host stack:
///
/// - base RTT [`HOST_BASE_RTT`] (500 us) per path: a packet waits for its batch on
///   the way out and for the peer's next datapath round on the way in, and so does
///   its ACK; at 10-20 Gb/s a round of 16-64 datagrams per path takes tens to a
///   hundred microseconds, and a window must cover about two rounds of batches to
///   keep the pipeline full. This is the host's "serialisation" that DESIGN.md
///   says the base RTT must include. With the measured minimum (5-7 us on
///   loopback) the target queueing delay (0.04 T = 0.2 us) is below the host's
///   timing noise, ARCC cuts every path to one packet and goodput falls to
///   1-3 Gb/s; 250 us gave 4.4-4.9 Gb/s in `rondo perf` where 500 us gave 7.1.
/// - RTO floor [`HOST_RTO_MIN`] (25 ms): on a loaded host a thread waits for a
///   core for several scheduler time slices; a 2 ms floor fired 15-90 spurious RTOs
///   in 3 s on a busy 2-core machine, each resending the whole window and
///   restarting every path from one packet. Losses inside a flow are still
///   repaired within an RTT by early recovery; the RTO only covers tail losses.
/// - early recovery after [`HOST_REORDER_PACKETS`] (1024) later PSNs instead of
///   4: a datapath round hands over one path's batch at a time, so on a lossless
///   host a packet is routinely overtaken by a batch of every other path. With 4,
///   0.2-1% of the packets of the bare engine and 2.5% of `rondo perf`'s were
///   declared lost and resent although loopback lost none (every resend arrived
///   as a duplicate), and the duplicates added reordering; with 64 the bare engine
///   resent almost nothing but `rondo perf` still 1-2%; with 256, 0-0.1% at
///   10-15 Gb/s, but 0.05-0.35% (no datagram dropped by the kernel) once
///   `rondo perf` reached 25 Gb/s with OOD up to 1,000-2,900; with 1024, 0-22
///   packets per 3-second run at the same goodput. A real loss is repaired 1024
///   packets later (about 0.3 ms at 3 Mpps); a loss among the flow's last 1024
///   packets waits for the RTO.
/// - 8 retries: with the doubling backoff, a peer that disappears is reported
///   (`RetryExcErr`) after about 13 s.
///
/// `docs/verbs.md` and `docs/perf.md` have the measurements.
pub fn udp_flow_config(paths: u16) -> rondo_proto::FlowConfig {
    rondo_proto::FlowConfig {
        base_rtt: Some(vec![HOST_BASE_RTT; usize::from(paths)]),
        rto_min: HOST_RTO_MIN,
        early_recovery_threshold: HOST_REORDER_PACKETS,
        retry_limit: 8,
        ..rondo_ud::udp::flow_config(paths)
    }
}

/// Attributes of a UDP context.
#[derive(Clone, Debug, PartialEq)]
pub struct UdpAttr {
    /// Socket configuration: local address, base port (0: ephemeral), paths, DSCP,
    /// batching, GSO/GRO.
    pub udp: UdpConfig,
    /// Host line rate given to the engine (probes fill up to it), bits per second.
    pub line_rate_bps: u64,
    /// Fault injection: probability that an arriving datagram is dropped.
    pub loss: f64,
    /// Fault injection: probability that an arriving datagram is held back and
    /// delivered after the next one (reordering).
    pub reorder: f64,
    /// Seed of the fault injection.
    pub fault_seed: u64,
    /// Run a progress thread (default). Without one, progress is explicit: each
    /// `poll` of any of the context's CQs runs one datapath round, so the
    /// application must keep polling, also on a side that only serves WRITE and
    /// READ (one thread per process instead of two; see `docs/verbs.md`).
    pub progress_thread: bool,
}

impl Default for UdpAttr {
    /// Four paths on ephemeral ports of 127.0.0.1, no faults.
    fn default() -> Self {
        UdpAttr {
            udp: UdpConfig {
                local_ip: std::net::Ipv4Addr::LOCALHOST.into(),
                base_port: 0,
                paths: 4,
                ..UdpConfig::default()
            },
            line_rate_bps: 10_000_000_000,
            loss: 0.0,
            reorder: 0.0,
            fault_seed: 1,
            progress_thread: true,
        }
    }
}

/// The verbs host with receive-side fault injection in front of it.
pub(crate) struct UdpHost {
    pub host: VerbsHost,
    loss: f64,
    reorder: f64,
    rng: Rng,
    held: Option<(Instant, u16, Vec<u8>, bool)>,
    pub dropped: u64,
    pub reordered: u64,
}

impl UdpHost {
    /// `host` behind fault injection: arriving datagrams dropped with probability
    /// `loss`, held back behind the next one with probability `reorder` (both in
    /// [0, 1]), from a generator seeded with `seed`. The `verbs` backend uses it too.
    pub(crate) fn new(host: VerbsHost, loss: f64, reorder: f64, seed: u64) -> UdpHost {
        UdpHost {
            host,
            loss,
            reorder,
            rng: Rng::new(seed),
            held: None,
            dropped: 0,
            reordered: 0,
        }
    }

    /// The host's counters and those of the fault injection.
    pub(crate) fn context_stats(&self) -> ContextStats {
        ContextStats {
            fault_dropped: self.dropped,
            fault_reordered: self.reordered,
            ..self.host.context_stats()
        }
    }
}

impl Host for UdpHost {
    fn handle_datagram(&mut self, now: Instant, path: u16, data: &[u8], ecn_ce: bool) {
        if self.loss > 0.0 && self.rng.gen_f64() < self.loss {
            self.dropped += 1;
            return;
        }
        if self.held.is_none() && self.reorder > 0.0 && self.rng.gen_f64() < self.reorder {
            self.reordered += 1;
            self.held = Some((now, path, data.to_vec(), ecn_ce));
            return;
        }
        self.host.handle_datagram(now, path, data, ecn_ce);
        if let Some((_, p, d, ce)) = self.held.take() {
            self.host.handle_datagram(now, p, &d, ce);
        }
    }
    fn handle_timeout(&mut self, now: Instant) {
        if self.held.as_ref().is_some_and(|h| h.0 + HOLD <= now) {
            if let Some((_, p, d, ce)) = self.held.take() {
                self.host.handle_datagram(now, p, &d, ce);
            }
        }
        self.host.handle_timeout(now);
    }
    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        self.host.poll_transmit(now, buf)
    }
    fn poll_transmit_split(
        &mut self,
        now: Instant,
        buf: &mut [u8],
    ) -> Option<(Transmit, Option<PayloadRef>)> {
        self.host.poll_transmit_split(now, buf)
    }
    fn payload(&self, r: PayloadRef) -> rondo_proto::PayloadBytes<'_> {
        self.host.payload(r)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        let held = self.held.as_ref().map(|h| h.0 + HOLD);
        match (self.host.poll_timeout(), held) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

pub(crate) struct UdpState {
    pub host: UdpHost,
    pub dp: UdpDatapath,
    pub clock: Clock,
}

impl Rounds for UdpState {
    fn round(&mut self) -> bool {
        match self
            .dp
            .poll(&mut self.host, &self.clock, std::time::Duration::ZERO)
        {
            Ok(o) => o.received + o.sent > 0,
            Err(_) => false,
        }
    }

    fn until_timer(&self) -> Option<std::time::Duration> {
        self.host.poll_timeout().map(|t| self.clock.until(t))
    }
}

/// The progress thread sleeps in `ppoll` until a path socket is readable or a post
/// writes the eventfd (only while the thread sleeps: it is armed first).
impl Sleep for Waiter {
    fn arm(&mut self) {
        Waiter::arm(self);
    }

    fn sleep(&mut self, d: std::time::Duration) -> bool {
        self.wait(d).is_ok_and(|ready| ready)
    }
}

/// When the progress thread sleeps.
const POLICY: Policy = Policy {
    short_wait: SHORT_WAIT,
    max_sleep: MAX_SLEEP,
};

/// A UDP context's datapath, state and progress thread.
pub(crate) struct UdpBackend {
    shared: Arc<Shared<UdpState>>,
    /// Wakes the progress thread from its sleep (posts, shutdown).
    waker: Arc<Waker>,
    addrs: Vec<SocketAddr>,
    thread: Option<JoinHandle<()>>,
    /// Explicit progress: the sleep of [`UdpBackend::wait_progress`] (the progress
    /// thread owns it otherwise).
    waiter: Option<Mutex<Waiter>>,
}

impl UdpBackend {
    pub(crate) fn open(endpoint: Endpoint, attr: &UdpAttr) -> Result<UdpBackend, VerbsError> {
        for (name, p) in [("loss", attr.loss), ("reorder", attr.reorder)] {
            if !(0.0..=1.0).contains(&p) {
                return Err(VerbsError::InvalidAttr {
                    name,
                    reason: format!("{p}; a probability is in [0, 1]"),
                });
            }
        }
        let dp = UdpDatapath::bind(attr.udp.clone())
            .map_err(|e| VerbsError::Io(format!("binding the path sockets: {e}")))?;
        let addrs = dp.local_addrs().to_vec();
        let clock = Clock::new();
        let host = UdpHost::new(
            VerbsHost::new(endpoint, Keys::from_os()?, attr.line_rate_bps),
            attr.loss,
            attr.reorder,
            attr.fault_seed,
        );
        let waker =
            Waker::new().map_err(|e| VerbsError::Io(format!("creating the eventfd: {e}")))?;
        let waiter = dp.waiter(waker.clone());
        let shared = Arc::new(Shared::new(UdpState { host, dp, clock }));
        let (thread, waiter) = if attr.progress_thread {
            let s = shared.clone();
            let t = std::thread::Builder::new()
                .name("rondo-verbs-udp".into())
                .spawn(move || {
                    let mut waiter = waiter;
                    progress_loop(&s, POLICY, &mut waiter)
                })
                .map_err(|e| VerbsError::Io(format!("spawning the progress thread: {e}")))?;
            (Some(t), None)
        } else {
            (None, Some(Mutex::new(waiter)))
        };
        Ok(UdpBackend {
            shared,
            waker,
            addrs,
            thread,
            waiter,
        })
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, UdpState> {
        self.shared.lock()
    }

    /// Runs `f` on the host at the current time. What it queued is sent by the
    /// progress thread (woken if asleep; the wake costs a system call only then) or
    /// by the next `poll`: a datapath round per post cost a receive syscall per path
    /// and halved the message rate.
    pub(crate) fn with_host<R>(&self, f: impl FnOnce(&mut VerbsHost, Instant) -> R) -> R {
        let r = {
            let mut s = self.lock();
            let now = s.clock.now();
            f(&mut s.host.host, now)
        };
        self.waker.wake();
        r
    }

    /// What `poll` does on an empty queue: leave the core to the progress thread,
    /// or, without one, run a datapath round.
    pub(crate) fn idle_poll(&self) {
        if self.thread.is_some() {
            std::thread::yield_now();
        } else {
            self.lock().round();
        }
    }

    /// What `wait` does on an empty queue: with a progress thread, sleep until it
    /// queues a completion in `cq`; without one, the progress thread's loop in the
    /// caller's thread (rounds while they move datagrams, then a sleep in `ppoll`
    /// until a datagram, a post or the engine's next timer), until `cq` has a
    /// completion or `deadline` passes.
    pub(crate) fn wait_progress(&self, cq: &CqShared, deadline: std::time::Instant) {
        let Some(waiter) = &self.waiter else {
            cq.wait(deadline);
            return;
        };
        let mut waiter = waiter.lock().unwrap_or_else(|p| p.into_inner());
        drive_until(&self.shared, POLICY, &mut *waiter, deadline, || {
            !cq.is_empty()
        });
    }

    pub(crate) fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    pub(crate) fn stats(&self) -> ContextStats {
        self.lock().host.context_stats()
    }
}

impl Drop for UdpBackend {
    fn drop(&mut self) {
        self.shared.stop();
        if let Some(t) = self.thread.take() {
            // A thread about to sleep sees `stop` within MAX_SLEEP at worst.
            self.waker.wake();
            let _ = t.join();
        }
    }
}
