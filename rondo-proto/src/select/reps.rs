//! UET's REPS (recycled entropy packet spraying, as htsim's `buffer_reps.cpp`
//! codes it): paths whose packets came back without an ECN mark are remembered
//! in a small circular cache and reused for new packets; with nothing to reuse,
//! a random path is explored.
//!
//! An entropy value (EV) here is a logical path index: the engine's paths are the
//! routes a flow can take (the simulator hashes the path index, UDP uses one
//! source port per path), so recycling an EV recycles its path.
//!
//! - Every data ACK without ECN pushes its path into the cache (8 entries; the
//!   oldest is overwritten when full).
//! - Each transmission: while the explore counter is positive, a random open path
//!   (the counter drops by one); else the oldest fresh cached path, which is used
//!   up; else a random open path.
//! - A retransmission timeout freezes the cache for 10 ms: transmissions cycle
//!   through the cached paths without using them up (a failure leaves the paths
//!   that worked); when the freeze ends, 16 transmissions explore.

use super::PathSelector;
use crate::rng::Rng;
use crate::time::{Duration, Instant};

/// Entries of the EV cache.
pub const CACHE_ENTRIES: usize = 8;

/// How long a retransmission timeout freezes the cache.
pub const FREEZE: Duration = Duration::from_ms(10);

/// Transmissions that explore random paths after a freeze.
pub const EXPLORE_AFTER_FREEZE: u32 = 16;

/// One cache slot.
#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    path: u16,
    fresh: bool,
}

/// REPS path choice of one flow.
#[derive(Clone, Debug)]
pub struct Reps {
    slots: [Slot; CACHE_ENTRIES],
    /// Where the next push goes: the oldest slot.
    head: usize,
    /// Slots written since the start (at most `CACHE_ENTRIES` count).
    written: usize,
    explore: u32,
    /// While frozen: until when, and the next slot to reuse.
    freeze_until: Option<Instant>,
    cursor: usize,
    /// The latest time the selector heard of (feedback or timeouts).
    now: Instant,
    rng: Rng,
    recycled: u64,
    explored: u64,
}

impl Reps {
    /// A selector with an empty cache, drawing from `seed`.
    pub fn new(seed: u64) -> Reps {
        Reps {
            slots: [Slot::default(); CACHE_ENTRIES],
            head: 0,
            written: 0,
            explore: 0,
            freeze_until: None,
            cursor: 0,
            now: Instant::ZERO,
            rng: Rng::new(seed ^ 0x7265_7073),
            recycled: 0,
            explored: 0,
        }
    }

    /// Transmissions that took a cached path.
    pub fn recycled(&self) -> u64 {
        self.recycled
    }

    /// Transmissions that took a random path.
    pub fn explored(&self) -> u64 {
        self.explored
    }

    /// Fresh cached paths, oldest first.
    pub fn fresh(&self) -> Vec<usize> {
        (0..CACHE_ENTRIES)
            .map(|k| self.slots[(self.head + k) % CACHE_ENTRIES])
            .filter(|s| s.fresh)
            .map(|s| usize::from(s.path))
            .collect()
    }

    /// Whether the cache is frozen (after a timeout).
    pub fn frozen(&self) -> bool {
        self.freeze_until.is_some()
    }

    fn heard(&mut self, now: Instant) {
        self.now = self.now.max(now);
        if self.freeze_until.is_some_and(|t| self.now >= t) {
            self.freeze_until = None;
            self.explore = EXPLORE_AFTER_FREEZE;
        }
    }

    fn random(&mut self, open: &[f64]) -> Option<usize> {
        let n = open.iter().filter(|&&o| o > 0.0).count() as u64;
        if n == 0 {
            return None;
        }
        let k = self.rng.gen_range(0..n) as usize;
        self.explored += 1;
        open.iter()
            .enumerate()
            .filter(|(_, &o)| o > 0.0)
            .nth(k)
            .map(|(i, _)| i)
    }

    /// The oldest fresh slot whose path is open, used up.
    fn pop_fresh(&mut self, open: &[f64]) -> Option<usize> {
        for k in 0..CACHE_ENTRIES {
            let i = (self.head + k) % CACHE_ENTRIES;
            let s = &mut self.slots[i];
            if s.fresh && open.get(usize::from(s.path)).is_some_and(|&o| o > 0.0) {
                s.fresh = false;
                return Some(usize::from(s.path));
            }
        }
        None
    }

    /// The next slot ever written, from the cursor on, whose path is open; kept.
    fn reuse(&mut self, open: &[f64]) -> Option<usize> {
        let written = self.written.min(CACHE_ENTRIES);
        for _ in 0..CACHE_ENTRIES {
            let i = self.cursor;
            self.cursor = (self.cursor + 1) % CACHE_ENTRIES;
            let path = usize::from(self.slots[i].path);
            if i < written && open.get(path).is_some_and(|&o| o > 0.0) {
                return Some(path);
            }
        }
        None
    }
}

impl PathSelector for Reps {
    fn select(&mut self, open: &[f64]) -> Option<usize> {
        if !open.iter().any(|&o| o > 0.0) {
            return None;
        }
        if self.freeze_until.is_some() {
            if let Some(p) = self.reuse(open) {
                self.recycled += 1;
                return Some(p);
            }
            return self.random(open);
        }
        if self.explore > 0 {
            self.explore -= 1;
            return self.random(open);
        }
        if let Some(p) = self.pop_fresh(open) {
            self.recycled += 1;
            return Some(p);
        }
        self.random(open)
    }

    fn reset(&mut self, path: usize) {
        for s in &mut self.slots {
            if usize::from(s.path) == path {
                s.fresh = false;
            }
        }
    }

    fn on_ack(&mut self, now: Instant, path: usize, ecn: bool) {
        self.heard(now);
        if ecn {
            return;
        }
        self.slots[self.head] = Slot {
            path: path as u16,
            fresh: true,
        };
        self.head = (self.head + 1) % CACHE_ENTRIES;
        self.written += 1;
    }

    fn on_rto(&mut self, now: Instant) {
        self.heard(now);
        self.freeze_until = Some(now + FREEZE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPEN: [f64; 4] = [1.0; 4];

    fn picks(s: &mut Reps, open: &[f64], n: usize) -> Vec<usize> {
        (0..n).map(|_| s.select(open).unwrap()).collect()
    }

    #[test]
    fn unmarked_acks_are_reused_oldest_first_and_once() {
        let mut s = Reps::new(1);
        let t = Instant::from_us(5);
        for (path, ecn) in [(2, false), (1, true), (3, false), (0, false)] {
            s.on_ack(t, path, ecn);
        }
        assert_eq!(s.fresh(), [2, 3, 0], "the marked ACK is not cached");
        assert_eq!(picks(&mut s, &OPEN, 3), [2, 3, 0]);
        assert_eq!(s.recycled(), 3);
        assert!(s.fresh().is_empty());
        // Nothing fresh: random, counted as exploration.
        s.select(&OPEN).unwrap();
        assert_eq!((s.recycled(), s.explored()), (3, 1));
        assert_eq!(s.select(&[0.0; 4]), None);
    }

    #[test]
    fn the_cache_keeps_the_last_eight() {
        let mut s = Reps::new(1);
        for i in 0..11 {
            s.on_ack(Instant::from_us(i), (i % 4) as usize, false);
        }
        assert_eq!(s.fresh(), [3, 0, 1, 2, 3, 0, 1, 2]);
        assert_eq!(picks(&mut s, &OPEN, 2), [3, 0]);
    }

    #[test]
    fn closed_or_removed_paths_are_skipped() {
        let mut s = Reps::new(1);
        for p in [1, 2, 1, 3] {
            s.on_ack(Instant::ZERO, p, false);
        }
        // Path 1 cannot send: the oldest fresh open one is 2; 1 stays fresh.
        assert_eq!(s.select(&[1.0, 0.0, 1.0, 1.0]), Some(2));
        assert_eq!(s.fresh(), [1, 1, 3]);
        // Path 1 left rotation: forgotten.
        s.reset(1);
        assert_eq!(s.fresh(), [3]);
        assert_eq!(s.select(&OPEN), Some(3));
    }

    #[test]
    fn random_choices_cover_the_open_paths_only() {
        let mut s = Reps::new(7);
        let mut seen = [0u32; 4];
        for _ in 0..400 {
            seen[s.select(&[1.0, 1.0, 0.0, 1.0]).unwrap()] += 1;
        }
        assert_eq!(seen[2], 0);
        assert!(
            seen.iter().enumerate().all(|(i, &n)| i == 2 || n > 80),
            "{seen:?}"
        );
    }

    #[test]
    fn a_timeout_freezes_the_cache_for_10_ms_then_16_packets_explore() {
        let mut s = Reps::new(3);
        for p in [0, 1] {
            s.on_ack(Instant::ZERO, p, false);
        }
        let t = Instant::from_us(100);
        s.on_rto(t);
        assert!(s.frozen());
        // Frozen: the cached paths in turn, not used up.
        assert_eq!(picks(&mut s, &OPEN, 5), [0, 1, 0, 1, 0]);
        assert_eq!(s.fresh(), [0, 1]);
        // Marked or not, ACKs before the end keep it frozen (and fill the cache).
        s.on_ack(t + Duration::from_us(9_999), 3, false);
        assert!(s.frozen());
        s.on_ack(t + FREEZE, 2, true);
        assert!(!s.frozen());
        // 16 explorations, then the cache again, oldest first.
        let before = s.explored();
        picks(&mut s, &OPEN, 16);
        assert_eq!(s.explored() - before, 16);
        assert_eq!(picks(&mut s, &OPEN, 3), [0, 1, 3]);
    }

    #[test]
    fn a_frozen_empty_cache_sprays_at_random() {
        let mut s = Reps::new(3);
        s.on_rto(Instant::ZERO);
        assert!(s.select(&OPEN).is_some());
        assert_eq!(s.explored(), 1);
    }
}
