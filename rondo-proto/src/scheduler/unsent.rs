//! The set of unsent PSNs of a flow, and the k-th smallest of them.

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
