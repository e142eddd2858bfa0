//! The packet scheduler (paper §4.3): which PSN a transmission on a given path
//! carries. A transmission on path p sends the (skip_p + 1)-th smallest unsent PSN,
//! skip_p from eq. (7).

use crate::path::{PathState, PathStatus};
use std::collections::VecDeque;

/// The set of unsent PSNs of a flow, over absolute (64-bit, never wrapping) PSNs.
///
/// Every PSN below `low` has been sent at least once; every PSN from `frontier` to
/// `end` is unsent; between them a bitmap says which were sent out of order.
/// Finding the k-th smallest unsent PSN scans only `[low, frontier)`, whose width is
/// bounded by the skips (tens to hundreds of packets), not by how many PSNs are unsent.
#[derive(Clone, Debug, Default)]
pub struct UnsentSet {
    low: u64,
    frontier: u64,
    end: u64,
    /// Bit i of word w covers PSN `base + 64 w + i`; set = sent.
    base: u64,
    words: VecDeque<u64>,
}

impl UnsentSet {
    /// An empty set starting at absolute PSN `start`.
    pub fn new(start: u64) -> UnsentSet {
        UnsentSet {
            low: start,
            frontier: start,
            end: start,
            base: start & !63,
            words: VecDeque::new(),
        }
    }

    /// Makes PSNs up to `end` (exclusive) available.
    pub fn extend_to(&mut self, end: u64) {
        debug_assert!(end >= self.end);
        self.end = end;
    }

    /// One past the last PSN made available.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// Lowest unsent PSN, if any.
    pub fn lowest(&self) -> Option<u64> {
        (self.low < self.end).then_some(self.low)
    }

    /// Number of unsent PSNs.
    pub fn len(&self) -> u64 {
        let holes = (self.frontier - self.low) - self.sent_between(self.low, self.frontier);
        holes + (self.end - self.frontier)
    }

    /// True when every PSN has been sent.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn sent_between(&self, from: u64, to: u64) -> u64 {
        let mut n = 0;
        let mut psn = from;
        while psn < to {
            let w = ((psn - self.base) / 64) as usize;
            let bit = (psn - self.base) % 64;
            let span = (64 - bit).min(to - psn);
            let mask = if span == 64 {
                u64::MAX
            } else {
                ((1u64 << span) - 1) << bit
            };
            n += (self.words[w] & mask).count_ones() as u64;
            psn += span;
        }
        n
    }

    /// The k-th smallest unsent PSN (k >= 1), or the largest unsent one when fewer
    /// than k remain; `None` when nothing is unsent.
    pub fn kth(&self, k: u64) -> Option<u64> {
        if self.low >= self.end {
            return None;
        }
        let k = k.max(1);
        let mut seen = 0u64;
        let mut last_hole = None;
        let mut psn = self.low;
        while psn < self.frontier {
            let w = ((psn - self.base) / 64) as usize;
            let bit = (psn - self.base) % 64;
            let span = (64 - bit).min(self.frontier - psn);
            let mask = if span == 64 {
                u64::MAX
            } else {
                ((1u64 << span) - 1) << bit
            };
            let mut holes = !self.words[w] & mask;
            let count = holes.count_ones() as u64;
            if seen + count >= k {
                for _ in 0..(k - seen - 1) {
                    holes &= holes - 1; // drop the lowest hole
                }
                return Some(self.base + 64 * w as u64 + holes.trailing_zeros() as u64);
            }
            if count > 0 {
                last_hole = Some(self.base + 64 * w as u64 + (63 - holes.leading_zeros() as u64));
            }
            seen += count;
            psn += span;
        }
        let beyond = self.frontier + (k - seen - 1);
        if beyond < self.end {
            Some(beyond)
        } else if self.frontier < self.end {
            Some(self.end - 1)
        } else {
            last_hole
        }
    }

    /// Marks `psn` (which must be unsent and below `end`) as sent.
    pub fn mark_sent(&mut self, psn: u64) {
        debug_assert!(psn >= self.low && psn < self.end);
        if psn >= self.frontier {
            let need_words = ((psn - self.base) / 64 + 1) as usize;
            while self.words.len() < need_words {
                self.words.push_back(0);
            }
            self.frontier = psn + 1;
        }
        let off = psn - self.base;
        self.words[(off / 64) as usize] |= 1 << (off % 64);
        if psn == self.low {
            self.advance_low();
        }
    }

    fn advance_low(&mut self) {
        while self.low < self.frontier {
            let off = self.low - self.base;
            let w = self.words[(off / 64) as usize];
            let bit = off % 64;
            let rest = !w >> bit;
            if rest == 0 {
                self.low += 64 - bit;
            } else {
                self.low += rest.trailing_zeros() as u64;
                break;
            }
        }
        self.low = self.low.min(self.frontier.max(self.low));
        while self.base + 64 <= self.low && !self.words.is_empty() {
            self.words.pop_front();
            self.base += 64;
        }
        if self.words.is_empty() {
            self.base = self.low & !63;
        }
    }
}

/// The skips of eq. (7) from per-path transmission rates (packets per ns) and
/// forward delays (ns, any common offset; `None` for a path without an estimate or
/// out of rotation): skip_p = round( sum_{p' != p} rate_p' * max(D_p - D_p', 0) ).
pub fn skips(rates_per_ns: &[f64], delays_ns: &[Option<f64>], out: &mut [u32]) {
    for (p, slot) in out.iter_mut().enumerate() {
        let Some(dp) = delays_ns[p] else {
            *slot = 0;
            continue;
        };
        let mut sum = 0.0;
        for (q, (&rate, dq)) in rates_per_ns.iter().zip(delays_ns).enumerate() {
            if let (true, Some(dq)) = (q != p, dq) {
                sum += rate * (dp - dq).max(0.0);
            }
        }
        *slot = sum.round().min(u32::MAX as f64) as u32;
    }
}

/// The skip of a transmission on path `p` at `now_ns`, counting the other paths'
/// actual upcoming opportunities rather than their fluid rate: path q, whose next
/// transmission is expected at `next_ns[q]` and then every `1 / rates_per_ns[q]`,
/// contributes the opportunities it has before `now + D_p - D_q` (App. C.4, eq. (55)
/// without the fluid rounding). A path already past its expected next transmission
/// contributes the rounded expected count instead. Paths without a delay estimate
/// contribute nothing.
pub fn phase_skip(
    p: usize,
    now_ns: f64,
    rates_per_ns: &[f64],
    delays_ns: &[Option<f64>],
    next_ns: &[f64],
) -> u64 {
    let Some(dp) = delays_ns[p] else { return 0 };
    let mut skip = 0u64;
    for q in 0..rates_per_ns.len() {
        let (Some(dq), rate) = (delays_ns[q], rates_per_ns[q]) else {
            continue;
        };
        if q == p || rate <= 0.0 || dp <= dq {
            continue;
        }
        let horizon = now_ns + (dp - dq);
        if next_ns[q] >= now_ns {
            // On schedule: its opportunities at next, next + 1/r, ... before the horizon.
            if next_ns[q] < horizon {
                skip += ((horizon - next_ns[q]) * rate).ceil() as u64;
            }
        } else {
            // Overdue (held by its window or the pacer): its phase is unknown, so count
            // the expected number of opportunities in the window, rounded. Counting
            // it as due now would add one skip per overdue path for any delay
            // difference, however small, and reorder equal-delay paths.
            skip += ((horizon - now_ns) * rate).round() as u64;
        }
    }
    skip
}

/// Recomputes every path's skip (eq. (7)) from its measured transmission rate and
/// forward delay. The paper estimates a path's transmission rate as W_p / RTT_p; we
/// use the measured data transmission rate of the path (EWMA over update
/// intervals), which is the quantity eq. (7) multiplies and does not overestimate
/// when the flow's pacer, not its window, limits the path. See docs/engine.md.
pub(crate) fn compute_skips(paths: &mut [PathState], scratch: &mut SkipScratch) {
    scratch.rates.clear();
    scratch.delays.clear();
    for p in paths.iter() {
        let usable = p.status == PathStatus::Up && p.srtt.is_some();
        scratch
            .rates
            .push(if usable { p.send_rate / 1e3 } else { 0.0 });
        scratch
            .delays
            .push(if usable { p.fwd_delay_ns } else { None });
    }
    scratch.out.resize(paths.len(), 0);
    skips(&scratch.rates, &scratch.delays, &mut scratch.out);
    for (p, &k) in paths.iter_mut().zip(&scratch.out) {
        p.skip = k;
    }
}

/// Reusable buffers for [`compute_skips`] (no allocation per update).
#[derive(Clone, Debug, Default)]
pub(crate) struct SkipScratch {
    pub(crate) rates: Vec<f64>,
    pub(crate) delays: Vec<Option<f64>>,
    pub(crate) next: Vec<f64>,
    out: Vec<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    #[test]
    fn kth_on_a_fresh_range() {
        let mut s = UnsentSet::new(100);
        s.extend_to(110);
        assert_eq!(s.kth(1), Some(100));
        assert_eq!(s.kth(4), Some(103));
        assert_eq!(s.kth(20), Some(109)); // fewer remain: the largest
        s.mark_sent(103);
        assert_eq!(s.kth(4), Some(104));
        assert_eq!(s.len(), 9);
        s.mark_sent(100);
        s.mark_sent(101);
        s.mark_sent(102);
        assert_eq!(s.lowest(), Some(104));
        assert_eq!(s.kth(1), Some(104));
    }

    proptest! {
        #[test]
        fn matches_a_sorted_set(start in 0u64..1000, n in 1u64..400, picks in prop::collection::vec(1u64..80, 0..400)) {
            let mut s = UnsentSet::new(start);
            s.extend_to(start + n);
            let mut model: BTreeSet<u64> = (start..start + n).collect();
            for k in picks {
                let want = if model.is_empty() { None } else {
                    Some(model.iter().nth((k - 1) as usize).copied().unwrap_or(*model.iter().next_back().unwrap()))
                };
                prop_assert_eq!(s.kth(k), want);
                prop_assert_eq!(s.len(), model.len() as u64);
                if let Some(psn) = want {
                    s.mark_sent(psn);
                    model.remove(&psn);
                }
                prop_assert_eq!(s.lowest(), model.iter().next().copied());
            }
        }
    }
}
