//! Fault injection as middleware (STYLE.md, smoltcp's `FaultInjector`): a [`Host`]
//! wrapper that sits between any datapath and the host it drives, and drops,
//! duplicates or reorders the datagrams handed to the host, from a seeded RNG.
//!
//! ```
//! use rondo_ud::fault::{FaultConfig, FaultInjector};
//! use rondo_proto::{Endpoint, BufferConfig, SharedBuffer};
//!
//! let ep = Endpoint::new(SharedBuffer::new(BufferConfig::default()).unwrap());
//! let mut faulty = FaultInjector::new(ep, FaultConfig { loss: 0.01, reorder: 0.05, ..FaultConfig::default() }, 7);
//! // drive `faulty` instead of the endpoint; `faulty.inner()` is the endpoint.
//! assert_eq!(faulty.stats().dropped, 0);
//! ```

use rondo_proto::rng::Rng;
use rondo_proto::time::Instant;
use rondo_proto::transmit::{Host, PayloadRef, Transmit, TxBuffer};

/// What to inject, per received datagram.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FaultConfig {
    /// Probability that a datagram is dropped.
    pub loss: f64,
    /// Probability that a datagram is delivered twice.
    pub duplicate: f64,
    /// Probability that a datagram is held back and delivered after
    /// 1 to `reorder_depth` later datagrams.
    pub reorder: f64,
    /// Most later datagrams that overtake a held one (at least 1 is used).
    pub reorder_depth: u32,
}

/// Counters of injected faults.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultStats {
    /// Datagrams dropped.
    pub dropped: u64,
    /// Datagrams delivered twice.
    pub duplicated: u64,
    /// Datagrams held back and delivered late.
    pub reordered: u64,
}

#[derive(Debug)]
struct Held {
    /// Deliver after this many more datagrams.
    after: u32,
    path: u16,
    ecn_ce: bool,
    data: Vec<u8>,
}

/// A [`Host`] that injects receive-side faults before the wrapped host.
#[derive(Debug)]
pub struct FaultInjector<H> {
    inner: H,
    cfg: FaultConfig,
    rng: Rng,
    held: Vec<Held>,
    /// Buffers of delivered held datagrams, reused so that the steady state does not
    /// allocate.
    spare: Vec<Vec<u8>>,
    stats: FaultStats,
}

impl<H: Host> FaultInjector<H> {
    /// Wraps `inner`; the same `seed` gives the same faults for the same arrivals.
    pub fn new(inner: H, cfg: FaultConfig, seed: u64) -> FaultInjector<H> {
        FaultInjector {
            inner,
            cfg,
            rng: Rng::new(seed),
            held: Vec::new(),
            spare: Vec::new(),
            stats: FaultStats::default(),
        }
    }

    /// The wrapped host.
    pub fn inner(&self) -> &H {
        &self.inner
    }

    /// The wrapped host, mutable.
    pub fn inner_mut(&mut self) -> &mut H {
        &mut self.inner
    }

    /// Faults injected so far.
    pub fn stats(&self) -> FaultStats {
        self.stats
    }

    /// Changes what is injected from now on.
    pub fn set_config(&mut self, cfg: FaultConfig) {
        self.cfg = cfg;
    }

    /// Delivers every held datagram now.
    pub fn release_all(&mut self, now: Instant) {
        while let Some(h) = self.held.pop() {
            self.inner.handle_datagram(now, h.path, &h.data, h.ecn_ce);
            self.spare.push(h.data);
        }
    }

    fn hold(&mut self, path: u16, data: &[u8], ecn_ce: bool) {
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(data);
        let depth = u64::from(self.cfg.reorder_depth.max(1));
        let after = 1 + self.rng.gen_range(0..depth) as u32;
        self.held.push(Held {
            after,
            path,
            ecn_ce,
            data: buf,
        });
        self.stats.reordered += 1;
    }

    /// Counts one delivered datagram against the held ones and delivers those due.
    fn tick(&mut self, now: Instant) {
        let mut i = 0;
        while i < self.held.len() {
            self.held[i].after -= 1;
            if self.held[i].after == 0 {
                let h = self.held.swap_remove(i);
                self.inner.handle_datagram(now, h.path, &h.data, h.ecn_ce);
                self.spare.push(h.data);
            } else {
                i += 1;
            }
        }
    }
}

impl<H: Host> Host for FaultInjector<H> {
    fn handle_datagram(&mut self, now: Instant, path: u16, data: &[u8], ecn_ce: bool) {
        if self.rng.chance(self.cfg.loss) {
            self.stats.dropped += 1;
            return;
        }
        if self.rng.chance(self.cfg.reorder) {
            self.hold(path, data, ecn_ce);
            return;
        }
        self.inner.handle_datagram(now, path, data, ecn_ce);
        if self.rng.chance(self.cfg.duplicate) {
            self.stats.duplicated += 1;
            self.inner.handle_datagram(now, path, data, ecn_ce);
        }
        self.tick(now);
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.inner.handle_timeout(now);
    }

    fn poll_transmit<B: TxBuffer + ?Sized>(
        &mut self,
        now: Instant,
        tx: &mut B,
    ) -> Option<Transmit> {
        self.inner.poll_transmit(now, tx)
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.inner.poll_timeout()
    }

    fn payload(&self, r: PayloadRef) -> rondo_proto::message::PayloadBytes<'_> {
        self.inner.payload(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records the first byte of every datagram it gets.
    #[derive(Default)]
    struct Log(Vec<u8>);

    impl Host for Log {
        fn handle_datagram(&mut self, _: Instant, _: u16, data: &[u8], _: bool) {
            self.0.push(data[0]);
        }
        fn handle_timeout(&mut self, _: Instant) {}
        fn poll_transmit<B: TxBuffer + ?Sized>(
            &mut self,
            _: Instant,
            _: &mut B,
        ) -> Option<Transmit> {
            None
        }
        fn poll_timeout(&self) -> Option<Instant> {
            None
        }
    }

    fn run(cfg: FaultConfig, seed: u64) -> (Vec<u8>, FaultStats) {
        let mut f = FaultInjector::new(Log::default(), cfg, seed);
        for i in 0..200u8 {
            f.handle_datagram(Instant::ZERO, 0, &[i], false);
        }
        f.release_all(Instant::ZERO);
        (f.inner().0.clone(), f.stats())
    }

    #[test]
    fn reordering_keeps_every_datagram_and_changes_the_order() {
        let cfg = FaultConfig {
            reorder: 0.2,
            reorder_depth: 4,
            ..FaultConfig::default()
        };
        let (got, stats) = run(cfg, 3);
        let mut sorted = got.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..200u8).collect::<Vec<_>>());
        assert!(stats.reordered > 10);
        assert!(got.windows(2).any(|w| w[0] > w[1]));
    }

    #[test]
    fn loss_and_duplicates_are_counted_and_seeded() {
        let cfg = FaultConfig {
            loss: 0.1,
            duplicate: 0.1,
            ..FaultConfig::default()
        };
        let (got, stats) = run(cfg, 9);
        assert_eq!(got.len() as u64, 200 - stats.dropped + stats.duplicated);
        assert!(stats.dropped > 5 && stats.duplicated > 5);
        assert_eq!(run(cfg, 9), (got, stats), "same seed, same faults");
    }
}
