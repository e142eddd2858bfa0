//! The `udp` backend: the context's verbs host over `rondo_ud::udp`'s datapath (one
//! socket per path), driven by a progress thread per context, with optional fault
//! injection (loss, reordering) on the receive side.
//!
//! Progress: by default the thread runs the datapath whenever the context's lock
//! is free, spinning while traffic flows and parking for short spells when idle
//! (a post unparks it), so that one-sided WRITE and READ are served without the
//! responder polling (as a NIC does); `poll_cq` on an empty queue only yields the
//! core to it. With [`UdpAttr::progress_thread`] off, progress is explicit: each
//! `poll_cq` runs one datapath round. `docs/verbs.md` has the measurements behind
//! these choices.

use crate::host::{Keys, VerbsHost};
use crate::types::ContextStats;
use crate::VerbsError;
use rondo_ud::mem::rng::Rng;
use rondo_ud::udp::{Clock, UdpConfig, UdpDatapath};
use rondo_ud::{Endpoint, Host, Instant, Transmit};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

/// How long a reordered datagram is held at most before it is delivered anyway.
const HOLD: rondo_ud::Duration = rondo_ud::Duration::from_us(50);
/// Idle rounds spent yielding before the thread starts sleeping.
const SPIN_ROUNDS: u32 = 2_000;
/// Sleep of an idle progress thread.
const IDLE_SLEEP: std::time::Duration = std::time::Duration::from_micros(100);

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

impl UdpState {
    /// One non-blocking round: timers, receive, send. Returns whether anything moved.
    fn round(&mut self) -> bool {
        match self
            .dp
            .poll(&mut self.host, &self.clock, std::time::Duration::ZERO)
        {
            Ok(o) => o.received + o.sent > 0,
            Err(_) => false,
        }
    }
}

struct Shared {
    state: Mutex<UdpState>,
    stop: AtomicBool,
}

/// A UDP context's datapath, state and progress thread.
pub(crate) struct UdpBackend {
    shared: Arc<Shared>,
    addrs: Vec<SocketAddr>,
    thread: Option<JoinHandle<()>>,
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
        let host = UdpHost {
            host: VerbsHost::new(endpoint, Keys::from_os()?, attr.line_rate_bps),
            loss: attr.loss,
            reorder: attr.reorder,
            rng: Rng::new(attr.fault_seed),
            held: None,
            dropped: 0,
            reordered: 0,
        };
        let shared = Arc::new(Shared {
            state: Mutex::new(UdpState { host, dp, clock }),
            stop: AtomicBool::new(false),
        });
        let thread = if attr.progress_thread {
            let s = shared.clone();
            let t = std::thread::Builder::new()
                .name("rondo-verbs-udp".into())
                .spawn(move || progress_loop(&s))
                .map_err(|e| VerbsError::Io(format!("spawning the progress thread: {e}")))?;
            Some(t)
        } else {
            None
        };
        Ok(UdpBackend {
            shared,
            addrs,
            thread,
        })
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, UdpState> {
        self.shared.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` on the host at the current time. What it queued is sent by the
    /// progress thread (woken if parked) or by the next `poll`: a datapath round
    /// per post cost a receive syscall per path and halved the message rate.
    pub(crate) fn with_host<R>(&self, f: impl FnOnce(&mut VerbsHost, Instant) -> R) -> R {
        let r = {
            let mut s = self.lock();
            let now = s.clock.now();
            f(&mut s.host.host, now)
        };
        if let Some(t) = &self.thread {
            t.thread().unpark();
        }
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

    pub(crate) fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    pub(crate) fn stats(&self) -> ContextStats {
        let s = self.lock();
        ContextStats {
            fault_dropped: s.host.dropped,
            fault_reordered: s.host.reordered,
            ..s.host.host.context_stats()
        }
    }
}

impl Drop for UdpBackend {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

fn progress_loop(shared: &Shared) {
    let mut idle = 0u32;
    while !shared.stop.load(Ordering::Relaxed) {
        let moved = shared
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .round();
        if moved {
            idle = 0;
            std::thread::yield_now();
        } else if idle < SPIN_ROUNDS {
            idle += 1;
            std::thread::yield_now();
        } else {
            // A post unparks the thread.
            std::thread::park_timeout(IDLE_SLEEP);
        }
    }
}
