//! Which connections of an endpoint need attention, so that the work per event
//! does not grow with the number of connections: a timer heap keyed by each
//! connection's next deadline, a ready set (the connections whose deadline has
//! come: the only ones that can have something to send), and a queue of the
//! connections with application events waiting.
//!
//! A deadline is in exactly one of the two: the heap holds the deadlines after
//! the horizon (the latest `now` seen), the ready set the connections whose
//! deadline is at or before it. A deadline set in the past goes straight to the
//! ready set, and one that passes the horizon is popped from the heap once. The
//! heap is 4-ary and knows each connection's position, so a changed deadline
//! moves its own entry: one sift instead of the removal and insertion a
//! `BTreeSet<(deadline, index)>` needed (its node searches were a tenth of the
//! all-to-all's run, mostly cache misses). An endpoint with at most
//! [`SCAN_LIMIT`] connections (a simulated host, a NIC with a few QPs) keeps no
//! heap: a scan of its deadlines answers the same questions in fewer
//! instructions.

use crate::time::Instant;
use std::collections::VecDeque;

/// The most connections whose deadlines are scanned instead of kept in a heap.
const SCAN_LIMIT: usize = 16;

/// The scheduling state of an endpoint's connections, by connection index.
#[derive(Debug, Default)]
pub(super) struct Schedule {
    /// Each connection's deadline as last computed (`None`: idle until a datagram
    /// or a post arrives, or closed).
    deadline: Vec<Option<Instant>>,
    /// The deadlines after `horizon`; empty (and unused) while there are at most
    /// [`SCAN_LIMIT`] connections.
    timers: TimerHeap,
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
        self.timers.grow(self.deadline.len());
        if self.deadline.len() == SCAN_LIMIT + 1 {
            // From now on the heap answers.
            for (i, t) in self.deadline.iter().enumerate() {
                if let Some(t) = t.filter(|&t| t > self.horizon) {
                    self.timers.set(i, t);
                }
            }
        }
    }

    /// The deadlines are scanned, not kept in the heap.
    fn scanned(&self) -> bool {
        self.deadline.len() <= SCAN_LIMIT
    }

    /// Connection `i`'s deadline is now `t`.
    pub(super) fn set(&mut self, i: usize, t: Option<Instant>) {
        if self.deadline[i] == t {
            return;
        }
        self.deadline[i] = t;
        let scanned = self.scanned();
        match t {
            Some(t) if t > self.horizon => {
                if !scanned {
                    self.timers.set(i, t);
                }
                self.ready.remove(i);
            }
            _ => {
                if !scanned {
                    self.timers.remove(i);
                }
                if t.is_some() {
                    self.ready.insert(i);
                } else {
                    self.ready.remove(i);
                }
            }
        }
    }

    /// Connection `i`'s deadline as last set.
    pub(super) fn deadline(&self, i: usize) -> Option<Instant> {
        self.deadline[i]
    }

    /// The earliest deadline of any connection, but not before the horizon: a
    /// connection whose deadline is at or before the horizon (the latest `now`
    /// seen) is due already, and the horizon says so without a search of the
    /// ready set.
    pub(super) fn earliest(&self) -> Option<Instant> {
        if self.scanned() {
            let earliest = self.deadline.iter().flatten().min().copied();
            return earliest.map(|t| t.max(self.horizon));
        }
        if !self.ready.is_empty() {
            return Some(self.horizon);
        }
        self.timers.first().map(|(t, _)| t)
    }

    /// Moves every connection whose deadline is at or before `now` into the ready
    /// set (each deadline passes the horizon once: one heap pop per connection
    /// made ready).
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
        } else {
            while let Some((_, i)) = self.timers.pop_until(now) {
                self.ready.insert(i);
            }
        }
        self.horizon = now;
    }

    /// No connection's deadline has come.
    pub(super) fn none_ready(&self) -> bool {
        self.ready.is_empty()
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
        let mut from = 0;
        while let Some(i) = self.ready.next_from(from) {
            if self.deadline[i].is_some_and(|t| t <= now) {
                out.push(i);
            }
            from = i + 1;
        }
        let ready = out.len();
        self.timers.until(0, now, out);
        if out.len() > ready {
            out[start..].sort_unstable();
        }
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

/// A connection's position in the heap: none.
const NOT_QUEUED: u32 = u32::MAX;

/// Children per heap node: four 16-byte entries, one cache line.
const ARITY: usize = 4;

/// A min-heap of `(deadline, connection)` that knows where each connection's
/// entry is, so that a deadline changes, or leaves, in one sift.
#[derive(Debug, Default)]
struct TimerHeap {
    entries: Vec<(Instant, u32)>,
    /// By connection: the index of its entry, or [`NOT_QUEUED`].
    pos: Vec<u32>,
}

impl TimerHeap {
    /// Room for connections below `n`.
    fn grow(&mut self, n: usize) {
        if n > self.pos.len() {
            self.pos.resize(n, NOT_QUEUED);
        }
    }

    fn first(&self) -> Option<(Instant, usize)> {
        self.entries.first().map(|&(t, i)| (t, i as usize))
    }

    /// Connection `i`'s deadline is `t` (inserted, or moved).
    fn set(&mut self, i: usize, t: Instant) {
        let k = self.pos[i];
        if k == NOT_QUEUED {
            self.entries.push((t, i as u32));
            self.sift_up(self.entries.len() - 1);
            return;
        }
        let k = k as usize;
        let old = self.entries[k].0;
        self.entries[k].0 = t;
        if t < old {
            self.sift_up(k);
        } else {
            self.sift_down(k);
        }
    }

    /// Connection `i` leaves the heap (if it is in it).
    fn remove(&mut self, i: usize) {
        let k = std::mem::replace(&mut self.pos[i], NOT_QUEUED);
        if k != NOT_QUEUED {
            self.take(k as usize);
        }
    }

    /// The earliest entry, removed, if it is at or before `now`.
    fn pop_until(&mut self, now: Instant) -> Option<(Instant, usize)> {
        let (t, i) = self.first().filter(|&(t, _)| t <= now)?;
        self.pos[i] = NOT_QUEUED;
        self.take(0);
        Some((t, i))
    }

    /// Appends the connections of the entries at or before `now` in the subtree
    /// at `k`.
    fn until(&self, k: usize, now: Instant, out: &mut Vec<usize>) {
        let Some(&(t, i)) = self.entries.get(k) else {
            return;
        };
        if t > now {
            return;
        }
        out.push(i as usize);
        for c in ARITY * k + 1..=ARITY * k + ARITY {
            self.until(c, now, out);
        }
    }

    /// Removes the entry at `k` (its connection's position already cleared).
    fn take(&mut self, k: usize) {
        let last = self.entries.pop().expect("an entry at k");
        if k < self.entries.len() {
            self.place(k, last);
            self.sift_up(k);
            let k = self.pos[last.1 as usize] as usize;
            self.sift_down(k);
        }
    }

    fn sift_up(&mut self, mut k: usize) {
        let e = self.entries[k];
        while k > 0 {
            let parent = (k - 1) / ARITY;
            if self.entries[parent] <= e {
                break;
            }
            self.place(k, self.entries[parent]);
            k = parent;
        }
        self.place(k, e);
    }

    fn sift_down(&mut self, mut k: usize) {
        let e = self.entries[k];
        let n = self.entries.len();
        loop {
            let first = ARITY * k + 1;
            if first >= n {
                break;
            }
            let children = first..(first + ARITY).min(n);
            let c = children
                .min_by_key(|&c| self.entries[c])
                .expect("at least one child");
            if self.entries[c] >= e {
                break;
            }
            self.place(k, self.entries[c]);
            k = c;
        }
        self.place(k, e);
    }

    /// Puts entry `e` at index `k` and records its connection's position.
    fn place(&mut self, k: usize, e: (Instant, u32)) {
        self.entries[k] = e;
        self.pos[e.1 as usize] = k as u32;
    }
}

/// A set of connection indices as a two-level bitmap: insertion and removal in
/// O(1), the next member at or after an index in O(n / 4096) at worst (a word
/// of the summary covers 4,096 indices), with no allocation once grown. (A
/// `BTreeSet` range query per transmit cost 2% of a two-host simulation.)
#[derive(Debug, Default)]
pub(super) struct IndexSet {
    words: Vec<u64>,
    /// Members.
    len: usize,
    /// Bit `j` set when `words[j]` is not zero.
    summary: Vec<u64>,
}

impl IndexSet {
    /// Room for indices below `n`.
    pub(super) fn grow(&mut self, n: usize) {
        let words = n.div_ceil(64);
        if words > self.words.len() {
            self.words.resize(words, 0);
            self.summary.resize(words.div_ceil(64), 0);
        }
    }

    pub(super) fn insert(&mut self, i: usize) {
        let w = &mut self.words[i / 64];
        if *w & 1 << (i % 64) == 0 {
            *w |= 1 << (i % 64);
            self.summary[i / 4096] |= 1 << (i / 64 % 64);
            self.len += 1;
        }
    }

    pub(super) fn remove(&mut self, i: usize) {
        let w = &mut self.words[i / 64];
        if *w & 1 << (i % 64) != 0 {
            *w &= !(1 << (i % 64));
            if *w == 0 {
                self.summary[i / 4096] &= !(1 << (i / 64 % 64));
            }
            self.len -= 1;
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The smallest member at or after `from`.
    pub(super) fn next_from(&self, from: usize) -> Option<usize> {
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
    use std::collections::BTreeSet;

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
        for target in [5, SCAN_LIMIT, SCAN_LIMIT + 1, 40, 700] {
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
                let horizon = s.horizon;
                let earliest = model.iter().flatten().min().map(|&t| t.max(horizon));
                assert_eq!(s.earliest(), earliest);
                let from = rand(model.len() as u64) as usize;
                let ready = (from..model.len())
                    .find(|&j| model[j].is_some_and(|t| t <= Instant::from_ns(now)));
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
