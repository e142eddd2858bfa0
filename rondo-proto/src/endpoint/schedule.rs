//! Which connections of an endpoint need attention, so that the work per event
//! does not grow with the number of connections: a timer set keyed by each
//! connection's next deadline, a ready set (the connections whose deadline has
//! come: the only ones that can have something to send), and a queue of the
//! connections with application events waiting.
//!
//! The timer set is a `BTreeSet<(deadline, index)>` rather than a binary heap
//! with lazy invalidation: a changed deadline removes its old entry exactly, so
//! the earliest entry is always valid and [`Schedule::earliest`] answers through
//! `&self` (as [`crate::Host::poll_timeout`] must), and the due connections can be
//! read by range without popping them. An endpoint with at most
//! [`SCAN_LIMIT`] connections (a simulated host, a NIC with a few QPs) keeps no
//! timer set: a scan of its deadlines answers the same questions in fewer
//! instructions than the tree's searches (which cost a fifth of a two-host
//! simulation's engine time).

use crate::time::Instant;
use std::collections::{BTreeSet, VecDeque};
use std::ops::Bound;

/// The most connections whose deadlines are scanned instead of kept in a timer set.
const SCAN_LIMIT: usize = 16;

/// The scheduling state of an endpoint's connections, by connection index.
#[derive(Debug, Default)]
pub(super) struct Schedule {
    /// Each connection's deadline as last computed (`None`: idle until a datagram
    /// or a post arrives, or closed).
    deadline: Vec<Option<Instant>>,
    /// `(deadline, index)` of every connection with a deadline; empty (and
    /// unused) while there are at most [`SCAN_LIMIT`] connections.
    timers: BTreeSet<(Instant, u32)>,
    /// Connections whose deadline is at or before `horizon`.
    ready: IndexSet,
    /// The latest `now` that [`Schedule::advance`] has seen.
    horizon: Instant,
    /// Connections that may have events queued, each at most once (`queued`).
    with_events: VecDeque<u32>,
    queued: Vec<bool>,
}

impl Schedule {
    /// Room for one more connection (index `deadline.len()`), idle.
    pub(super) fn push(&mut self) {
        self.deadline.push(None);
        self.queued.push(false);
        self.ready.grow(self.deadline.len());
        if self.deadline.len() == SCAN_LIMIT + 1 {
            // From now on the timer set answers.
            let timers = self.deadline.iter().enumerate();
            self.timers = timers
                .filter_map(|(i, t)| Some(((*t)?, i as u32)))
                .collect();
        }
    }

    /// The deadlines are scanned, not kept in the timer set.
    fn scanned(&self) -> bool {
        self.deadline.len() <= SCAN_LIMIT
    }

    /// Connection `i`'s deadline is now `t`.
    pub(super) fn set(&mut self, i: usize, t: Option<Instant>) {
        let old = self.deadline[i];
        if old == t {
            return;
        }
        let key = i as u32;
        let scanned = self.scanned();
        if let (Some(old), false) = (old, scanned) {
            self.timers.remove(&(old, key));
        }
        self.deadline[i] = t;
        match t {
            Some(t) => {
                if !scanned {
                    self.timers.insert((t, key));
                }
                if t <= self.horizon {
                    self.ready.insert(i);
                } else {
                    self.ready.remove(i);
                }
            }
            None => {
                self.ready.remove(i);
            }
        }
    }

    /// Connection `i`'s deadline as last set.
    pub(super) fn deadline(&self, i: usize) -> Option<Instant> {
        self.deadline[i]
    }

    /// The earliest deadline of any connection.
    pub(super) fn earliest(&self) -> Option<Instant> {
        if self.scanned() {
            return self.deadline.iter().flatten().min().copied();
        }
        self.timers.first().map(|&(t, _)| t)
    }

    /// Moves every connection whose deadline is at or before `now` into the ready
    /// set (each deadline passes the horizon once: O(log n) per connection made
    /// ready).
    pub(super) fn advance(&mut self, now: Instant) {
        if now <= self.horizon {
            return;
        }
        if self.scanned() {
            for (i, t) in self.deadline.iter().enumerate() {
                if t.is_some_and(|t| t > self.horizon && t <= now) {
                    self.ready.insert(i);
                }
            }
            self.horizon = now;
            return;
        }
        let from = Bound::Excluded((self.horizon, u32::MAX));
        let to = Bound::Included((now, u32::MAX));
        for &(_, i) in self.timers.range((from, to)) {
            self.ready.insert(i as usize);
        }
        self.horizon = now;
    }

    /// The first ready connection with an index in `from..to`.
    pub(super) fn next_ready(&self, from: usize, to: usize) -> Option<usize> {
        self.ready.next_from(from).filter(|&i| i < to)
    }

    /// Appends to `out` every connection whose deadline is at or before `now`, in
    /// index order.
    pub(super) fn due(&self, now: Instant, out: &mut Vec<usize>) {
        if self.scanned() {
            let due = self.deadline.iter().enumerate();
            out.extend(
                due.filter(|(_, t)| t.is_some_and(|t| t <= now))
                    .map(|(i, _)| i),
            );
            return;
        }
        let start = out.len();
        out.extend(
            self.timers
                .range(..=(now, u32::MAX))
                .map(|&(_, i)| i as usize),
        );
        out[start..].sort_unstable();
    }

    /// Connection `i` has events queued: remember it for
    /// [`Schedule::pop_with_events`].
    pub(super) fn note_events(&mut self, i: usize) {
        if !self.queued[i] {
            self.queued[i] = true;
            self.with_events.push_back(i as u32);
        }
    }

    /// The next connection noted by [`Schedule::note_events`], oldest first.
    pub(super) fn pop_with_events(&mut self) -> Option<usize> {
        let i = self.with_events.pop_front()? as usize;
        self.queued[i] = false;
        Some(i)
    }
}

/// A set of connection indices as a two-level bitmap: insertion and removal in
/// O(1), the next member at or after an index in O(n / 4096) at worst (a word
/// of the summary covers 4,096 indices), with no allocation once grown. (A
/// `BTreeSet` range query per transmit cost 2% of a two-host simulation.)
#[derive(Debug, Default)]
struct IndexSet {
    words: Vec<u64>,
    /// Bit `j` set when `words[j]` is not zero.
    summary: Vec<u64>,
}

impl IndexSet {
    /// Room for indices below `n`.
    fn grow(&mut self, n: usize) {
        let words = n.div_ceil(64);
        if words > self.words.len() {
            self.words.resize(words, 0);
            self.summary.resize(words.div_ceil(64), 0);
        }
    }

    fn insert(&mut self, i: usize) {
        self.words[i / 64] |= 1 << (i % 64);
        self.summary[i / 4096] |= 1 << (i / 64 % 64);
    }

    fn remove(&mut self, i: usize) {
        let w = &mut self.words[i / 64];
        *w &= !(1 << (i % 64));
        if *w == 0 {
            self.summary[i / 4096] &= !(1 << (i / 64 % 64));
        }
    }

    /// The smallest member at or after `from`.
    fn next_from(&self, from: usize) -> Option<usize> {
        let w = from / 64;
        let here = *self.words.get(w)? & (u64::MAX << (from % 64));
        if here != 0 {
            return Some(w * 64 + here.trailing_zeros() as usize);
        }
        // The next non-zero word after `w`, through the summary.
        let next = w + 1;
        let mut s = next / 64;
        let mut bits = self.summary.get(s).map_or(0, |b| {
            if next % 64 == 0 {
                *b
            } else {
                b & (u64::MAX << (next % 64))
            }
        });
        loop {
            if bits != 0 {
                let word = s * 64 + bits.trailing_zeros() as usize;
                return Some(word * 64 + self.words[word].trailing_zeros() as usize);
            }
            s += 1;
            bits = *self.summary.get(s)?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bitmap answers `next_from` as a sorted set does, over inserts and
    /// removes spread across several summary words.
    #[test]
    fn index_set_matches_a_sorted_set() {
        let n = 20_000;
        let mut set = IndexSet::default();
        set.grow(n);
        let mut model = BTreeSet::new();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for step in 0..60_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let i = (x % n as u64) as usize;
            if step % 3 == 0 {
                set.remove(i);
                model.remove(&i);
            } else {
                set.insert(i);
                model.insert(i);
            }
            let from = ((x >> 20) % (n as u64 + 10)) as usize;
            assert_eq!(set.next_from(from), model.range(from..).next().copied());
        }
        for i in model.clone() {
            set.remove(i);
        }
        assert_eq!(set.next_from(0), None);
    }

    /// With few connections (deadlines scanned) and many (the timer set), and
    /// across the switch from one to the other, the schedule answers as a model
    /// computed from the deadlines alone.
    #[test]
    fn scanned_and_timer_set_answer_as_the_deadlines_say() {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut rand = move |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        for target in [5, SCAN_LIMIT, SCAN_LIMIT + 1, 40] {
            let mut s = Schedule::default();
            let mut model: Vec<Option<Instant>> = Vec::new();
            let mut now = 0;
            for step in 0..4_000 {
                if model.len() < target && step % 50 == 0 {
                    s.push();
                    model.push(None);
                }
                if model.is_empty() {
                    continue;
                }
                let i = rand(model.len() as u64) as usize;
                let t = (rand(5) > 0).then(|| Instant::from_ns(now + rand(200)));
                s.set(i, t);
                model[i] = t;
                if rand(4) == 0 {
                    now += rand(30);
                    s.advance(Instant::from_ns(now));
                }
                let due_at = Instant::from_ns(now + rand(100));
                let mut due = Vec::new();
                s.due(due_at, &mut due);
                let want: Vec<usize> = (0..model.len())
                    .filter(|&j| model[j].is_some_and(|t| t <= due_at))
                    .collect();
                assert_eq!(due, want);
                assert_eq!(s.earliest(), model.iter().flatten().min().copied());
                let from = rand(model.len() as u64) as usize;
                let ready = (from..model.len())
                    .find(|&j| model[j].is_some_and(|t| t <= Instant::from_ns(now)));
                let horizon = s.horizon;
                assert!(horizon <= Instant::from_ns(now));
                if horizon == Instant::from_ns(now) {
                    assert_eq!(s.next_ready(from, model.len()), ready);
                }
            }
        }
    }

    fn at(ns: u64) -> Option<Instant> {
        Some(Instant::from_ns(ns))
    }

    #[test]
    fn earliest_follows_changed_deadlines() {
        let mut s = Schedule::default();
        for _ in 0..3 {
            s.push();
        }
        s.set(0, at(30));
        s.set(1, at(10));
        s.set(2, at(20));
        assert_eq!(s.earliest(), at(10));
        s.set(1, at(40));
        assert_eq!(s.earliest(), at(20));
        s.set(2, None);
        s.set(0, None);
        assert_eq!(s.earliest(), at(40));
        s.set(1, None);
        assert_eq!(s.earliest(), None);
    }

    #[test]
    fn ready_holds_exactly_the_due_connections_in_index_order() {
        let mut s = Schedule::default();
        for _ in 0..4 {
            s.push();
        }
        s.set(3, at(5));
        s.set(1, at(5));
        s.set(0, at(50));
        s.set(2, None);
        s.advance(Instant::from_ns(10));
        assert_eq!(s.next_ready(0, 4), Some(1));
        assert_eq!(s.next_ready(2, 4), Some(3));
        assert_eq!(s.next_ready(0, 1), None);
        // A deadline moved past the horizon leaves the ready set; one moved
        // before it joins at once.
        s.set(1, at(60));
        s.set(2, at(1));
        assert_eq!(s.next_ready(0, 4), Some(2));
        let mut due = Vec::new();
        s.due(Instant::from_ns(50), &mut due);
        assert_eq!(due, vec![0, 2, 3]);
        s.advance(Instant::from_ns(60));
        assert_eq!(s.next_ready(0, 2), Some(0));
        assert_eq!(s.next_ready(1, 2), Some(1));
    }

    #[test]
    fn connections_with_events_come_out_once_each() {
        let mut s = Schedule::default();
        for _ in 0..3 {
            s.push();
        }
        s.note_events(2);
        s.note_events(0);
        s.note_events(2);
        assert_eq!(s.pop_with_events(), Some(2));
        assert_eq!(s.pop_with_events(), Some(0));
        assert_eq!(s.pop_with_events(), None);
        s.note_events(2);
        assert_eq!(s.pop_with_events(), Some(2));
    }
}
