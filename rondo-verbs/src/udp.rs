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

use crate::host::{Keys, VerbsHost};
use crate::progress::{Driven, Policy, Progress, Routes, Sleep};
use crate::types::ContextStats;
use crate::VerbsError;
use rondo_proto::rng::Rng;
use rondo_proto::{Endpoint, Host, Instant, PayloadRef, Transmit, TxBuffer};
use rondo_ud::auth::Authenticated;
use rondo_ud::udp::{UdpConfig, UdpDatapath, Waiter, Waker};
use std::net::SocketAddr;

/// How long a reordered datagram is held at most before it is delivered anyway.
const HOLD: rondo_proto::Duration = rondo_proto::Duration::from_us(50);
/// Engine timers closer than this are waited for by running rounds, not by sleeping
/// (the kernel's timer slack makes short sleeps long).
const SHORT_WAIT: std::time::Duration = std::time::Duration::from_micros(20);
/// Longest sleep of the progress thread (it checks for shutdown in between).
const MAX_SLEEP: std::time::Duration = std::time::Duration::from_millis(10);

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
    /// The verbs host behind the datagram authentication of its connections.
    pub host: Authenticated<VerbsHost>,
    loss: f64,
    reorder: f64,
    rng: Rng,
    held: Option<(Instant, u16, Vec<u8>, bool)>,
    pub dropped: u64,
    pub reordered: u64,
    /// Flows of destroyed QPs whose connections are gone: the datapath forgets
    /// their routes.
    pub retired: Vec<u32>,
}

impl UdpHost {
    /// `host` behind fault injection: arriving datagrams dropped with probability
    /// `loss`, held back behind the next one with probability `reorder` (both in
    /// [0, 1]), from a generator seeded with `seed`. The `verbs` backend uses it too.
    pub(crate) fn new(mut host: VerbsHost, loss: f64, reorder: f64, seed: u64) -> UdpHost {
        host.report_retired = true;
        UdpHost {
            host: Authenticated::new(host),
            loss,
            reorder,
            rng: Rng::new(seed),
            held: None,
            dropped: 0,
            reordered: 0,
            retired: Vec::new(),
        }
    }

    /// The host's counters and those of the fault injection.
    pub(crate) fn context_stats(&self) -> ContextStats {
        let auth = self.host.stats();
        ContextStats {
            fault_dropped: self.dropped,
            fault_reordered: self.reordered,
            auth_bad_tag: auth.bad_tag,
            auth_replayed: auth.replayed,
            auth_truncated: auth.truncated,
            auth_flows: self.host.flows() as u64,
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
        // Destroyed QPs whose connections are gone: their keys go too, and their
        // routes after this round.
        for flow in self.host.inner_mut().take_retired() {
            self.host.remove_flow(flow);
            self.retired.push(flow);
        }
    }
    fn poll_transmit<B: TxBuffer + ?Sized>(
        &mut self,
        now: Instant,
        tx: &mut B,
    ) -> Option<Transmit> {
        self.host.poll_transmit(now, tx)
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

impl Routes for UdpDatapath {
    fn remove_route(&mut self, flow: u32) {
        self.remove_peer(flow);
    }
    fn route_count(&self) -> usize {
        self.peer_count()
    }
}

/// When the progress thread sleeps.
const POLICY: Policy = Policy {
    short_wait: SHORT_WAIT,
    max_sleep: MAX_SLEEP,
};

/// A UDP context's datapath, state and progress; it tells peers its path
/// sockets' addresses.
pub(crate) type UdpBackend = Progress<UdpDatapath, Waiter, Vec<SocketAddr>>;

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
        let host = UdpHost::new(
            VerbsHost::new(endpoint, Keys::from_os()?, attr.line_rate_bps),
            attr.loss,
            attr.reorder,
            attr.fault_seed,
        );
        let waker =
            Waker::new().map_err(|e| VerbsError::Io(format!("creating the eventfd: {e}")))?;
        let waiter = dp.waiter(waker.clone());
        let thread = attr.progress_thread.then_some("rondo-verbs-udp");
        Progress::start(
            Driven::new(host, dp),
            POLICY,
            waiter,
            Some(waker),
            thread,
            addrs,
        )
    }

    pub(crate) fn addrs(&self) -> &[SocketAddr] {
        &self.local
    }
}
