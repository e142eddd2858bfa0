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

/// `SELECT_IN_BYTE[v][r]`: the position of the `r`-th lowest set bit of byte `v`
/// (0 where `v` has no such bit).
const SELECT_IN_BYTE: [[u8; 8]; 256] = {
    let mut t = [[0u8; 8]; 256];
    let mut v = 0;
    while v < 256 {
        let (mut r, mut bit) = (0, 0);
        while bit < 8 {
            if v & (1 << bit) != 0 {
                t[v][r] = bit as u8;
                r += 1;
            }
            bit += 1;
        }
        v += 1;
    }
    t
};

/// The position of the `n`-th lowest set bit of `x` (`n` from 0, below
/// `x.count_ones()`), in the same few steps for any `n` (the skip scheduler asks
/// for the (skip + 1)-th unsent PSN, skips of tens of packets): the bytes' bit
/// counts, summed by one multiplication, find the byte; a table the bit in it.
fn nth_set_bit(x: u64, n: u32) -> u32 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    debug_assert!(n < x.count_ones());
    let c = x - ((x >> 1) & 0x5555_5555_5555_5555);
    let c = (c & 0x3333_3333_3333_3333) + ((c >> 2) & 0x3333_3333_3333_3333);
    let c = (c + (c >> 4)) & 0x0f0f_0f0f_0f0f_0f0f;
    // Byte i: the set bits of bytes 0..=i (at most 64, so no carry between bytes).
    let upto = c.wrapping_mul(ONES);
    // Bit 7 of byte i is set where `upto` exceeds n (each byte, 0x80 plus at most
    // 64, stays above n + 1: no borrow between bytes).
    let above = ((upto | HIGH) - u64::from(n + 1) * ONES) & HIGH;
    let byte = above.trailing_zeros() / 8;
    let before = ((upto << 8) >> (8 * byte)) & 0xff;
    let v = (x >> (8 * byte)) & 0xff;
    8 * byte + u32::from(SELECT_IN_BYTE[v as usize][(u64::from(n) - before) as usize])
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
            let holes = !self.words[w] & mask;
            let count = holes.count_ones() as u64;
            if seen + count >= k {
                let bit = nth_set_bit(holes, (k - seen - 1) as u32);
                return Some(self.base + 64 * w as u64 + u64::from(bit));
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
        if psn == self.low && psn == self.frontier {
            // In order, nothing sent beyond it: everything below the new lowest is
            // sent, and no bit below the lowest unsent PSN is ever read.
            self.words.clear();
            self.low = psn + 1;
            self.frontier = psn + 1;
            self.base = self.low & !63;
            return;
        }
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

    #[test]
    fn nth_set_bit_agrees_with_dropping_the_lowest_bits() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let words = (0..2000).map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        });
        for w in words.chain([u64::MAX, 1, 1 << 63, 0x8000_0000_0000_0001, 0xff00]) {
            let mut rest = w;
            for n in 0..w.count_ones() {
                assert_eq!(nth_set_bit(w, n), rest.trailing_zeros(), "{w:#x} n {n}");
                rest &= rest - 1;
            }
        }
    }
}
