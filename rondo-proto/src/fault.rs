//! Fault injection without I/O (STYLE.md: "fault injection is middleware", after
//! smoltcp's `FaultInjector` and turmoil): per datagram, from a seeded RNG, the
//! decision to drop it, duplicate it, corrupt it, delay it, hold it back behind
//! later datagrams (reorder), rate-limit the stream or black-hole one path.
//!
//! [`Faults`] only decides; whoever carries the datagrams applies the
//! [`Verdict`]: `rondo_ud::fault::FaultInjector` around any host and datapath, in
//! both directions, and the links of the simulator's networks (`rondo_sim::pair`).
//! The same seed and the same datagrams give the same verdicts.
//!
//! ```
//! use rondo_proto::fault::{DropCause, FaultConfig, Faults, Verdict};
//! use rondo_proto::Instant;
//!
//! let mut f = Faults::new(FaultConfig { black_hole_path: Some(2), ..FaultConfig::default() }, 7);
//! assert_eq!(f.judge(Instant::ZERO, 2, 1500), Verdict::Drop(DropCause::BlackHole));
//! assert!(matches!(f.judge(Instant::ZERO, 1, 1500), Verdict::Pass { duplicate: false, .. }));
//! assert_eq!(f.stats().black_holed, 1);
//! ```

use crate::rng::Rng;
use crate::time::{Duration, Instant};

/// What to inject. The default injects nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FaultConfig {
    /// Probability that a datagram is dropped.
    pub loss: f64,
    /// Probability that a datagram is delivered twice.
    pub duplicate: f64,
    /// Probability that one bit of a datagram is flipped.
    pub corrupt: f64,
    /// Fixed extra delay of every datagram.
    pub delay: Duration,
    /// Uniform extra delay in `[0, jitter)` per datagram, on top of `delay`:
    /// datagrams overtake each other.
    pub jitter: Duration,
    /// Probability that a datagram is held back and delivered after 1 to
    /// `reorder_depth` later datagrams.
    pub reorder: f64,
    /// Most later datagrams that overtake a held one (at least 1 is used).
    pub reorder_depth: u32,
    /// Rate limit in bits per second (0: none): a token bucket of
    /// `rate_burst_bytes`; a datagram that finds too few tokens is dropped.
    pub rate_limit_bps: u64,
    /// Depth of the rate limit's token bucket, bytes (at least one datagram's
    /// worth is needed for anything to pass).
    pub rate_burst_bytes: u64,
    /// Every datagram on this path is dropped.
    pub black_hole_path: Option<u16>,
}

/// Why a datagram was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DropCause {
    /// Random loss ([`FaultConfig::loss`]).
    Loss,
    /// Its path is black-holed ([`FaultConfig::black_hole_path`]).
    BlackHole,
    /// The rate limit's bucket was empty ([`FaultConfig::rate_limit_bps`]).
    RateLimit,
}

/// What to do with one datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Drop it.
    Drop(DropCause),
    /// Deliver it, so changed.
    Pass {
        /// Deliver a second copy right after it.
        duplicate: bool,
        /// Flip bit `bit` (0-7) of byte `byte` first.
        corrupt: Option<(usize, u8)>,
        /// Deliver it this much later.
        delay: Duration,
        /// Deliver it only after this many later datagrams (0: in turn).
        hold: u32,
    },
}

/// Counters of injected faults.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultStats {
    /// Datagrams judged.
    pub judged: u64,
    /// Dropped by random loss.
    pub dropped: u64,
    /// Dropped on the black-holed path.
    pub black_holed: u64,
    /// Dropped by the rate limit.
    pub rate_limited: u64,
    /// Delivered twice.
    pub duplicated: u64,
    /// Corrupted.
    pub corrupted: u64,
    /// Given a non-zero delay.
    pub delayed: u64,
    /// Held back behind later datagrams.
    pub reordered: u64,
}

/// Picoseconds in a second: the token bucket's credit is kept in bit-picoseconds
/// per second so that it stays an integer.
const PS_PER_S: u128 = 1_000_000_000_000;

/// The fault decider: a [`FaultConfig`], its RNG stream and the rate limit's bucket.
#[derive(Clone, Debug)]
pub struct Faults {
    cfg: FaultConfig,
    rng: Rng,
    /// Bucket content in bits times 10^12 (bits * ps / s), and when it was filled.
    credit: u128,
    filled_at: Option<Instant>,
    stats: FaultStats,
}

impl Faults {
    /// A decider for `cfg` whose draws come from `seed`.
    pub fn new(cfg: FaultConfig, seed: u64) -> Faults {
        Faults::with_rng(cfg, Rng::new(seed))
    }

    /// A decider drawing from `rng` (a stream the caller split off).
    pub fn with_rng(cfg: FaultConfig, rng: Rng) -> Faults {
        Faults {
            cfg,
            rng,
            credit: 0,
            filled_at: None,
            stats: FaultStats::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &FaultConfig {
        &self.cfg
    }

    /// Changes what is injected from the next datagram on.
    pub fn set_config(&mut self, cfg: FaultConfig) {
        self.cfg = cfg;
    }

    /// Faults injected so far.
    pub fn stats(&self) -> FaultStats {
        self.stats
    }

    /// The verdict on a datagram of `len` bytes on `path` at `now`. Draws, in
    /// order and only for the faults configured: loss, duplication, corruption,
    /// reordering, jitter.
    pub fn judge(&mut self, now: Instant, path: u16, len: usize) -> Verdict {
        self.stats.judged += 1;
        if self.cfg.black_hole_path == Some(path) {
            self.stats.black_holed += 1;
            return Verdict::Drop(DropCause::BlackHole);
        }
        if self.cfg.rate_limit_bps > 0 && !self.take_tokens(now, len) {
            self.stats.rate_limited += 1;
            return Verdict::Drop(DropCause::RateLimit);
        }
        if self.rng.chance(self.cfg.loss) {
            self.stats.dropped += 1;
            return Verdict::Drop(DropCause::Loss);
        }
        let duplicate = self.rng.chance(self.cfg.duplicate);
        self.stats.duplicated += u64::from(duplicate);
        let corrupt = (len > 0 && self.rng.chance(self.cfg.corrupt)).then(|| {
            let byte = self.rng.gen_range(0..len as u64) as usize;
            let bit = self.rng.gen_range(0..8) as u8;
            (byte, bit)
        });
        self.stats.corrupted += u64::from(corrupt.is_some());
        let hold = if self.rng.chance(self.cfg.reorder) {
            self.stats.reordered += 1;
            let depth = u64::from(self.cfg.reorder_depth.max(1));
            1 + self.rng.gen_range(0..depth) as u32
        } else {
            0
        };
        let mut delay = self.cfg.delay;
        let j = self.cfg.jitter.as_ps();
        if j > 0 {
            delay += Duration::from_ps(self.rng.gen_range(0..j));
        }
        self.stats.delayed += u64::from(delay > Duration::ZERO);
        Verdict::Pass {
            duplicate,
            corrupt,
            delay,
            hold,
        }
    }

    /// Refills the bucket up to `now` and takes `len` bytes from it if it holds them.
    fn take_tokens(&mut self, now: Instant, len: usize) -> bool {
        let cap = u128::from(self.cfg.rate_burst_bytes) * 8 * PS_PER_S;
        let rate = u128::from(self.cfg.rate_limit_bps);
        self.credit = match self.filled_at {
            // The bucket starts full.
            None => cap,
            Some(t) => {
                let dt = u128::from(now.saturating_since(t).as_ps());
                self.credit.saturating_add(dt.saturating_mul(rate)).min(cap)
            }
        };
        self.filled_at = Some(now);
        let need = len as u128 * 8 * PS_PER_S;
        if self.credit >= need {
            self.credit -= need;
            true
        } else {
            false
        }
    }
}

/// Flips bit `bit` of `data[byte]` (a [`Verdict::Pass`] corruption); out-of-range
/// positions are ignored.
pub fn corrupt(data: &mut [u8], (byte, bit): (usize, u8)) {
    if let Some(b) = data.get_mut(byte) {
        *b ^= 1 << (bit & 7);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(cfg: FaultConfig, seed: u64, n: u32) -> (Vec<Verdict>, FaultStats) {
        let mut f = Faults::new(cfg, seed);
        let v = (0..n)
            .map(|i| f.judge(Instant::from_us(u64::from(i)), (i % 4) as u16, 1000))
            .collect();
        (v, f.stats())
    }

    #[test]
    fn nothing_configured_passes_everything_unchanged() {
        let (v, s) = run(FaultConfig::default(), 1, 100);
        let clean = Verdict::Pass {
            duplicate: false,
            corrupt: None,
            delay: Duration::ZERO,
            hold: 0,
        };
        assert!(v.iter().all(|x| *x == clean));
        assert_eq!(s.judged, 100);
        assert_eq!(
            s,
            FaultStats {
                judged: 100,
                ..FaultStats::default()
            }
        );
    }

    #[test]
    fn rates_match_and_the_seed_decides() {
        let cfg = FaultConfig {
            loss: 0.1,
            duplicate: 0.05,
            corrupt: 0.02,
            reorder: 0.1,
            reorder_depth: 3,
            jitter: Duration::from_us(2),
            ..FaultConfig::default()
        };
        let (v, s) = run(cfg, 5, 20_000);
        let near = |x: u64, p: f64| ((x as f64 / 20_000.0) - p).abs() < 0.01;
        assert!(near(s.dropped, 0.1), "{s:?}");
        // Duplication and the rest are drawn for the datagrams not lost.
        assert!(near(s.duplicated, 0.9 * 0.05), "{s:?}");
        assert!(near(s.corrupted, 0.9 * 0.02), "{s:?}");
        assert!(near(s.reordered, 0.9 * 0.1), "{s:?}");
        for x in &v {
            if let Verdict::Pass {
                corrupt,
                delay,
                hold,
                ..
            } = *x
            {
                assert!(corrupt.is_none_or(|(byte, bit)| byte < 1000 && bit < 8));
                assert!(delay < Duration::from_us(2));
                assert!(hold <= 3);
            }
        }
        assert_eq!(run(cfg, 5, 20_000).0, v, "same seed, same verdicts");
        assert_ne!(run(cfg, 6, 20_000).0, v);
    }

    #[test]
    fn a_black_holed_path_loses_everything_and_only_it() {
        let cfg = FaultConfig {
            black_hole_path: Some(1),
            ..FaultConfig::default()
        };
        let (v, s) = run(cfg, 1, 400);
        for (i, x) in v.iter().enumerate() {
            assert_eq!(matches!(x, Verdict::Drop(DropCause::BlackHole)), i % 4 == 1);
        }
        assert_eq!(s.black_holed, 100);
    }

    #[test]
    fn the_rate_limit_passes_its_rate_after_the_burst() {
        // 1000-byte datagrams every microsecond (8 Gbit/s) into a 2 Gbit/s limit
        // with a 10-datagram bucket, from 0 to 1009 us: the full bucket, then what
        // 1009 us at 2 Gbit/s refill (252 datagrams of 1000 bytes, one in four).
        let cfg = FaultConfig {
            rate_limit_bps: 2_000_000_000,
            rate_burst_bytes: 10_000,
            ..FaultConfig::default()
        };
        let (v, s) = run(cfg, 1, 1010);
        let passed = v
            .iter()
            .filter(|x| matches!(x, Verdict::Pass { .. }))
            .count();
        assert!(v[..10].iter().all(|x| matches!(x, Verdict::Pass { .. })));
        assert_eq!(passed, 10 + 1009 / 4, "{s:?}");
        assert_eq!(s.rate_limited as usize, 1010 - passed);
    }

    #[test]
    fn corruption_flips_one_bit() {
        let mut d = vec![0u8; 4];
        corrupt(&mut d, (2, 3));
        assert_eq!(d, [0, 0, 8, 0]);
        corrupt(&mut d, (9, 0));
        assert_eq!(d, [0, 0, 8, 0]);
    }
}
