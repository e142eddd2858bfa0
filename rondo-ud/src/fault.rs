//! Fault injection as middleware (STYLE.md, smoltcp's `FaultInjector`): a [`Host`]
//! wrapper that sits between any datapath and the host it drives, in both
//! directions. What to do with each datagram is decided by the transport-agnostic
//! core, [`rondo_proto::fault::Faults`] (drop, duplicate, corrupt, delay,
//! reorder, rate-limit, black-hole one path, from a seeded RNG); this wrapper
//! applies the verdicts to the datagrams handed to the host (receive side) and,
//! when asked ([`FaultInjector::with_transmit`]), to those the host sends.
//!
//! ```
//! use rondo_ud::fault::{FaultConfig, FaultInjector};
//! use rondo_proto::{Endpoint, BufferConfig, SharedBuffer};
//!
//! let ep = Endpoint::new(SharedBuffer::new(BufferConfig::default()).unwrap());
//! let mut faulty = FaultInjector::new(ep, FaultConfig { loss: 0.01, reorder: 0.05, ..FaultConfig::default() }, 7)
//!     .with_transmit(FaultConfig { black_hole_path: Some(3), ..FaultConfig::default() }, 8);
//! // drive `faulty` instead of the endpoint; `faulty.inner()` is the endpoint.
//! assert_eq!(faulty.stats().dropped, 0);
//! assert_eq!(faulty.transmit_stats().black_holed, 0);
//! ```

pub use rondo_proto::fault::{DropCause, FaultConfig, FaultStats, Faults, Verdict};

use rondo_proto::fault::corrupt;
use rondo_proto::time::Instant;
use rondo_proto::transmit::{Host, PayloadRef, Transmit, TxBuffer};

/// A datagram the wrapper keeps for later.
#[derive(Debug)]
struct Held {
    /// Due at this time (delay) ...
    at: Instant,
    /// ... and after this many more datagrams in its direction (reorder).
    after: u32,
    path: u16,
    /// Receive side: the ECN mark. Transmit side: unused.
    ecn_ce: bool,
    /// Transmit side: the descriptor to hand out again.
    transmit: Option<Transmit>,
    data: Vec<u8>,
}

/// Held datagrams of one direction, with buffers reused so that the steady state
/// does not allocate.
#[derive(Debug, Default)]
struct Holding {
    held: Vec<Held>,
    spare: Vec<Vec<u8>>,
}

impl Holding {
    fn keep(&mut self, held: Held) {
        self.held.push(held);
    }

    fn buffer(&mut self, data: &[u8]) -> Vec<u8> {
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(data);
        buf
    }

    /// One datagram went by: every count-based hold moves one step.
    fn tick(&mut self) {
        for h in &mut self.held {
            h.after = h.after.saturating_sub(1);
        }
    }

    /// The index of a held datagram due at `now`, if any (the earliest first).
    fn due(&self, now: Instant) -> Option<usize> {
        self.held
            .iter()
            .enumerate()
            .filter(|(_, h)| h.after == 0 && h.at <= now)
            .min_by_key(|(_, h)| h.at)
            .map(|(i, _)| i)
    }

    /// When the next time-held datagram becomes due (count-held ones wait for
    /// traffic, not for time).
    fn next_time(&self) -> Option<Instant> {
        self.held
            .iter()
            .filter(|h| h.after == 0)
            .map(|h| h.at)
            .min()
    }
}

/// A [`Host`] that injects faults into what a datapath hands it and, optionally,
/// into what it sends.
#[derive(Debug)]
pub struct FaultInjector<H> {
    inner: H,
    rx: Faults,
    tx: Option<Faults>,
    rx_held: Holding,
    tx_held: Holding,
    /// Where the host writes a datagram the transmit side judges before it goes
    /// into the datapath's buffer.
    scratch: Vec<u8>,
}

impl<H: Host> FaultInjector<H> {
    /// Wraps `inner`, injecting `cfg` into the datagrams it receives; the same
    /// `seed` gives the same faults for the same arrivals.
    pub fn new(inner: H, cfg: FaultConfig, seed: u64) -> FaultInjector<H> {
        FaultInjector {
            inner,
            rx: Faults::new(cfg, seed),
            tx: None,
            rx_held: Holding::default(),
            tx_held: Holding::default(),
            scratch: Vec::new(),
        }
    }

    /// Also injects `cfg` into the datagrams the host sends (seeded by `seed`).
    /// A transmit-side wrapper sends whole datagrams (no payload by reference).
    pub fn with_transmit(mut self, cfg: FaultConfig, seed: u64) -> FaultInjector<H> {
        self.tx = Some(Faults::new(cfg, seed));
        self
    }

    /// The wrapped host.
    pub fn inner(&self) -> &H {
        &self.inner
    }

    /// The wrapped host, mutable.
    pub fn inner_mut(&mut self) -> &mut H {
        &mut self.inner
    }

    /// Receive-side faults injected so far.
    pub fn stats(&self) -> FaultStats {
        self.rx.stats()
    }

    /// Transmit-side faults injected so far (zero without [`Self::with_transmit`]).
    pub fn transmit_stats(&self) -> FaultStats {
        self.tx.as_ref().map(Faults::stats).unwrap_or_default()
    }

    /// Changes what is injected on receive from now on.
    pub fn set_config(&mut self, cfg: FaultConfig) {
        self.rx.set_config(cfg);
    }

    /// Changes what is injected on transmit from now on (starting transmit-side
    /// injection, seeded by `seed`, if it was off).
    pub fn set_transmit_config(&mut self, cfg: FaultConfig, seed: u64) {
        match &mut self.tx {
            Some(tx) => tx.set_config(cfg),
            None => self.tx = Some(Faults::new(cfg, seed)),
        }
    }

    /// Delivers every held received datagram now (those held for a time first, in
    /// time order, then those waiting for traffic).
    pub fn release_all(&mut self, now: Instant) {
        for h in &mut self.rx_held.held {
            h.after = 0;
            h.at = h.at.min(now);
        }
        self.deliver_due(now);
    }

    /// Hands the inner host every held received datagram that is due.
    fn deliver_due(&mut self, now: Instant) {
        while let Some(i) = self.rx_held.due(now) {
            let h = self.rx_held.held.swap_remove(i);
            self.inner.handle_datagram(now, h.path, &h.data, h.ecn_ce);
            self.rx_held.spare.push(h.data);
        }
    }

    /// A transmit-side held datagram that is due, written into `buf`.
    /// The next datagram that goes out now on the transmit side: a held one that
    /// is due, else the host's next that its verdict lets pass at once (written
    /// into `buf` first, copied into `tx` when it goes).
    fn transmit_judged<B: TxBuffer + ?Sized>(
        &mut self,
        now: Instant,
        tx: &mut B,
        buf: &mut [u8],
    ) -> Option<Transmit> {
        loop {
            if let Some(t) = self.send_due(now, tx) {
                return Some(t);
            }
            let t = self.inner.poll_transmit(now, buf)?;
            let Verdict::Pass {
                duplicate,
                corrupt: flip,
                delay,
                hold,
            } = self.tx.as_mut()?.judge(now, t.path, t.len)
            else {
                continue;
            };
            if let Some(f) = flip {
                corrupt(&mut buf[..t.len], f);
            }
            self.tx_held.tick();
            let copies = 1 + usize::from(duplicate);
            let held = delay > rondo_proto::Duration::ZERO || hold > 0;
            // Held: every copy waits; duplicated only: the copy goes next.
            for _ in 0..(if held { copies } else { copies - 1 }) {
                let data = self.tx_held.buffer(&buf[..t.len]);
                self.tx_held.keep(Held {
                    at: now + delay,
                    after: hold,
                    path: t.path,
                    ecn_ce: false,
                    transmit: Some(t),
                    data,
                });
            }
            if !held {
                tx.take(t.path, t.priority, t.len)
                    .copy_from_slice(&buf[..t.len]);
                return Some(t);
            }
        }
    }

    fn send_due<B: TxBuffer + ?Sized>(&mut self, now: Instant, tx: &mut B) -> Option<Transmit> {
        let i = self.tx_held.due(now)?;
        let h = &self.tx_held.held[i];
        if h.data.len() > tx.capacity() {
            return None;
        }
        let h = self.tx_held.held.swap_remove(i);
        let t = h.transmit;
        if let Some(t) = &t {
            tx.take(t.path, t.priority, h.data.len())
                .copy_from_slice(&h.data);
        }
        self.tx_held.spare.push(h.data);
        t
    }
}

impl<H: Host> Host for FaultInjector<H> {
    fn handle_datagram(&mut self, now: Instant, path: u16, data: &[u8], ecn_ce: bool) {
        let Verdict::Pass {
            duplicate,
            corrupt: flip,
            delay,
            hold,
        } = self.rx.judge(now, path, data.len())
        else {
            return;
        };
        let copies = 1 + usize::from(duplicate);
        if flip.is_none() && delay == rondo_proto::Duration::ZERO && hold == 0 {
            for _ in 0..copies {
                self.inner.handle_datagram(now, path, data, ecn_ce);
            }
        } else {
            for _ in 0..copies {
                let mut buf = self.rx_held.buffer(data);
                if let Some(f) = flip {
                    corrupt(&mut buf, f);
                }
                self.rx_held.keep(Held {
                    at: now + delay,
                    after: hold,
                    path,
                    ecn_ce,
                    transmit: None,
                    data: buf,
                });
            }
        }
        self.rx_held.tick();
        self.deliver_due(now);
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.deliver_due(now);
        self.inner.handle_timeout(now);
    }

    fn poll_transmit<B: TxBuffer + ?Sized>(
        &mut self,
        now: Instant,
        tx: &mut B,
    ) -> Option<Transmit> {
        if self.tx.is_none() {
            return self.inner.poll_transmit(now, tx);
        }
        // The wrapper must see (and may keep) the whole datagram: the host writes
        // it here, never by reference, and it is copied out when it goes.
        let mut buf = std::mem::take(&mut self.scratch);
        buf.resize(tx.capacity(), 0);
        let t = self.transmit_judged(now, tx, &mut buf);
        self.scratch = buf;
        t
    }

    fn poll_timeout(&self) -> Option<Instant> {
        [
            self.inner.poll_timeout(),
            self.rx_held.next_time(),
            self.tx_held.next_time(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn payload(&self, r: PayloadRef) -> rondo_proto::message::PayloadBytes<'_> {
        self.inner.payload(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rondo_proto::{Duration, Priority};

    /// Records the first byte of every datagram it gets; sends `to_send` datagrams
    /// of 8 bytes (first byte: their number) on path `number % 4`.
    #[derive(Default)]
    struct Log {
        got: Vec<u8>,
        to_send: u8,
        sent: u8,
    }

    impl Host for Log {
        fn handle_datagram(&mut self, _: Instant, _: u16, data: &[u8], _: bool) {
            self.got.push(data[0]);
        }
        fn handle_timeout(&mut self, _: Instant) {}
        fn poll_transmit<B: TxBuffer + ?Sized>(
            &mut self,
            _: Instant,
            tx: &mut B,
        ) -> Option<Transmit> {
            if self.sent == self.to_send {
                return None;
            }
            let path = u16::from(self.sent % 4);
            let buf = tx.take(path, Priority::Data, 8);
            buf.fill(0);
            buf[0] = self.sent;
            self.sent += 1;
            Some(Transmit {
                path,
                priority: Priority::Data,
                len: 8,
                flow: 0,
                payload: None,
            })
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
        (f.inner().got.clone(), f.stats())
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

    #[test]
    fn delayed_arrivals_wait_for_their_time() {
        let cfg = FaultConfig {
            delay: Duration::from_us(10),
            ..FaultConfig::default()
        };
        let mut f = FaultInjector::new(Log::default(), cfg, 1);
        f.handle_datagram(Instant::ZERO, 0, &[7], false);
        assert!(f.inner().got.is_empty());
        assert_eq!(f.poll_timeout(), Some(Instant::from_us(10)));
        f.handle_timeout(Instant::from_us(9));
        assert!(f.inner().got.is_empty());
        f.handle_timeout(Instant::from_us(10));
        assert_eq!(f.inner().got, [7]);
        assert_eq!(f.poll_timeout(), None);
    }

    #[test]
    fn corrupted_arrivals_differ_in_one_bit() {
        let cfg = FaultConfig {
            corrupt: 1.0,
            ..FaultConfig::default()
        };
        let mut f = FaultInjector::new(Log::default(), cfg, 1);
        for i in 0..50u8 {
            f.handle_datagram(Instant::ZERO, 0, &[i], false);
        }
        let got = &f.inner().got;
        assert_eq!(got.len(), 50);
        for (i, &b) in got.iter().enumerate() {
            assert_eq!((b ^ i as u8).count_ones(), 1, "datagram {i}: {b:#x}");
        }
    }

    /// Everything the wrapped `Log` sends through a transmit-side injector of
    /// `cfg`, polled at 1 us steps until nothing is left.
    fn sent(cfg: FaultConfig) -> (Vec<(u16, u8)>, FaultStats) {
        let log = Log {
            to_send: 100,
            ..Log::default()
        };
        let mut f = FaultInjector::new(log, FaultConfig::default(), 1).with_transmit(cfg, 2);
        let mut out = Vec::new();
        let mut buf = [0u8; 64];
        for us in 0..1000 {
            let now = Instant::from_us(us);
            while let Some(t) = f.poll_transmit(now, &mut buf) {
                assert_eq!(t.len, 8);
                out.push((t.path, buf[0]));
            }
        }
        (out, f.transmit_stats())
    }

    #[test]
    fn transmit_side_black_hole_duplicates_and_delay() {
        let (out, s) = sent(FaultConfig {
            black_hole_path: Some(2),
            ..FaultConfig::default()
        });
        assert_eq!(out.len(), 75);
        assert!(out.iter().all(|&(p, n)| p != 2 && u16::from(n % 4) == p));
        assert_eq!(s.black_holed, 25);

        let (out, s) = sent(FaultConfig {
            duplicate: 0.2,
            ..FaultConfig::default()
        });
        assert_eq!(out.len() as u64, 100 + s.duplicated);
        assert!(s.duplicated > 5);

        let (out, s) = sent(FaultConfig {
            jitter: Duration::from_us(20),
            ..FaultConfig::default()
        });
        let mut numbers: Vec<u8> = out.iter().map(|&(_, n)| n).collect();
        assert!(numbers.windows(2).any(|w| w[0] > w[1]), "jitter reorders");
        numbers.sort_unstable();
        assert_eq!(numbers, (0..100).collect::<Vec<u8>>());
        assert!(s.delayed > 90);
    }
}
