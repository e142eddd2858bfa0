//! The network machinery: links as output ports, the packet slab, the agenda.

pub(crate) mod fabric;
pub(crate) mod port;
mod slab;

pub(crate) use slab::Slab;

use rondo_proto::time::Instant;

/// SplitMix64's finaliser: the hash behind ECMP and flow seeds.
pub(crate) fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A packet's descriptor: its slab slot and what the network needs to know.
/// Descriptors travel by value through queues and wires (the bytes stay in the
/// slab), so forwarding touches only the link's own memory.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Meta {
    pub slot: u32,
    pub len: u16,
    pub path: u16,
    pub class: u8,
    pub ce: bool,
    pub dst: u32,
    /// The link it last arrived by at a switch (PFC accounting), or `fabric::NONE`.
    pub ingress: u32,
    /// ECMP key: a hash of source, destination, local flow id and path id.
    pub key: u64,
    /// The receiving connection's handle at `dst` (`fabric::NONE` when not
    /// known), in what was padding: the simulator reads ahead of a delivery
    /// with it (`Simulator::read_ahead`) and the endpoint tries it first.
    pub conn: u32,
}

// A descriptor stays 32 bytes: two to a cache line in every queue and wire.
const _: () = assert!(std::mem::size_of::<Meta>() == 32);

/// Something that wakes up at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ev {
    /// A link finished serialising; start the next packet.
    TxDone(u32),
    /// The head packet of a link's wire reached the far end.
    Arrive(u32),
    /// A host's timer; stale unless `gen` is the host's current one.
    Timer { host: u32, gen: u32 },
    /// A flow starts.
    Start(u32),
    /// A long-lived flow stops posting data.
    Stop(u32),
    /// A scheduled link change (index into the change list).
    Change(u32),
    /// Measurement starts.
    Warmup,
    /// A trace sample.
    Sample,
    /// A host stops handling anything (`SimConfig::host_stalls`).
    StallStart(u32),
    /// A stopped host resumes: it handles what arrived meanwhile, then its timer.
    StallEnd(u32),
}

/// Hosts a [`Ev::Timer`] can name: its host and generation share one packed word
/// with the event's kind ([`Ev::pack`]).
pub(crate) const MAX_HOSTS: u32 = 1 << 28;

impl Ev {
    /// The event in one word: its kind in the top 4 bits, then its operand (a
    /// timer's host in the next 28 bits and its generation in the low 32), so
    /// that an agenda entry is 16 bytes instead of 24.
    fn pack(self) -> u64 {
        let (kind, x) = match self {
            Ev::TxDone(p) => (0, u64::from(p)),
            Ev::Arrive(p) => (1, u64::from(p)),
            Ev::Timer { host, gen } => {
                debug_assert!(host < MAX_HOSTS);
                (2, u64::from(host) << 32 | u64::from(gen))
            }
            Ev::Start(f) => (3, u64::from(f)),
            Ev::Stop(f) => (4, u64::from(f)),
            Ev::Change(i) => (5, u64::from(i)),
            Ev::Warmup => (6, 0),
            Ev::Sample => (7, 0),
            Ev::StallStart(h) => (8, u64::from(h)),
            Ev::StallEnd(h) => (9, u64::from(h)),
        };
        kind << 60 | x
    }

    fn unpack(w: u64) -> Ev {
        let x = w as u32;
        match w >> 60 {
            0 => Ev::TxDone(x),
            1 => Ev::Arrive(x),
            2 => Ev::Timer {
                host: (w >> 32) as u32 & (MAX_HOSTS - 1),
                gen: x,
            },
            3 => Ev::Start(x),
            4 => Ev::Stop(x),
            5 => Ev::Change(x),
            6 => Ev::Warmup,
            7 => Ev::Sample,
            8 => Ev::StallStart(x),
            _ => Ev::StallEnd(x),
        }
    }
}

/// Bits per digit of the agenda's radix heap: an entry moves at most once per
/// digit (16 of them), where a binary radix heap moved it up to once per bit.
const DIGIT_BITS: usize = 4;
const DIGIT_VALUES: usize = 1 << DIGIT_BITS;
/// Bucket 0 and one per (digit, value).
const BUCKETS: usize = 1 + 64 / DIGIT_BITS * DIGIT_VALUES;
/// A bucket of at most this many entries becomes bucket 0 sorted, instead of
/// being redistributed digit by digit.
const RUN: usize = 32;

/// Pending events in time order, events of one time in the order they were
/// pushed: a radix heap over the time in picoseconds, by 4-bit digits (against
/// binary digits: clos320-permutation 8% faster, alternating runs). Every time
/// pushed is at least the last one popped (time never goes back), which is all a
/// radix heap needs. The events of one time are always in one bucket (a bucket is a
/// function of the time and `last`), a bucket only appends, and redistributing
/// one keeps its order, so each bucket holds its ties in push order; bucket 0,
/// the events at `last`, is read from the front. A peek moves `last` to the
/// earliest pending time; an event pushed before that (but not before the last
/// one popped: between two `Simulator::run` calls) moves it back, bucketing
/// every entry again. (Keyed by time and a sequence
/// number, every event of a busy instant was redistributed once per bit of the
/// sequence that told it from its neighbours: 8% of the all-to-all's run.)
///
/// A bucket of at most [`RUN`] entries is not redistributed: it is sorted by time
/// (stably) and becomes bucket 0 whole, a run of several times that pops in
/// order; a push inside the run's span is inserted in place, after the entries
/// of its time. That saves the last digit-by-digit moves of most entries (three
/// moves per event before it in `clos320-permutation`): 2% fewer instructions
/// and about 4% less time.
pub(crate) struct Agenda {
    /// Bucket `1 + d * 16 + v` holds times whose highest 4-bit digit differing
    /// from `last` is digit `d`, with value `v` there (bucket 0: equal to
    /// `last`, or a sorted run from `last`). Bucket order is time order: a lower
    /// differing digit, or the same digit with a lower value, is an earlier time.
    buckets: Box<[Vec<(u64, u64)>; BUCKETS]>,
    /// Bit `b` set when bucket `b` (1..BUCKETS) is non-empty; bucket 0 answers
    /// through `head`.
    occupied: [u64; BUCKETS.div_ceil(64)],
    /// Entries of bucket 0 already popped.
    head: usize,
    last: u64,
    /// The time of the last event popped: nothing is scheduled before it.
    popped: u64,
    len: usize,
}

impl Default for Agenda {
    fn default() -> Self {
        Agenda {
            buckets: Box::new(std::array::from_fn(|_| Vec::new())),
            occupied: [0; BUCKETS.div_ceil(64)],
            head: 0,
            last: 0,
            popped: 0,
            len: 0,
        }
    }
}

impl Agenda {
    fn put(&mut self, t: u64, ev: u64) {
        let b = match t ^ self.last {
            0 => 0,
            x => {
                let digit = (63 - x.leading_zeros()) as usize / DIGIT_BITS;
                let value = (t >> (digit * DIGIT_BITS)) as usize & (DIGIT_VALUES - 1);
                1 + digit * DIGIT_VALUES + value
            }
        };
        self.buckets[b].push((t, ev));
        if b > 0 {
            self.occupied[b / 64] |= 1 << (b % 64);
        }
    }

    /// Schedules `ev` at `at` (not before the last event popped).
    #[inline(always)]
    pub fn push(&mut self, at: Instant, ev: Ev) {
        let t = at.as_ps().max(self.popped);
        if t < self.last {
            self.rewind(t);
        }
        match self.buckets[0].last() {
            Some(&(end, _)) if t < end => self.insert_into_run(t, ev.pack()),
            _ => self.put(t, ev.pack()),
        }
        self.len += 1;
    }

    /// Puts an entry inside bucket 0's sorted run, after every entry at or
    /// before its time.
    #[inline(never)]
    fn insert_into_run(&mut self, t: u64, ev: u64) {
        let run = &mut self.buckets[0];
        let at = self.head + run[self.head..].partition_point(|&(u, _)| u <= t);
        run.insert(at, (t, ev));
    }

    /// Moves `last` back to `t`, bucketing every pending entry again (the
    /// entries of one time come out of one bucket in order, so they keep it).
    #[cold]
    #[inline(never)]
    fn rewind(&mut self, t: u64) {
        let mut pending = Vec::with_capacity(self.len);
        pending.extend_from_slice(&self.buckets[0][self.head..]);
        self.buckets[0].clear();
        self.head = 0;
        for b in 1..self.buckets.len() {
            pending.append(&mut self.buckets[b]);
        }
        self.occupied = [0; BUCKETS.div_ceil(64)];
        self.last = t;
        for (t, ev) in pending {
            self.put(t, ev);
        }
    }

    fn first_bucket(&self) -> Option<usize> {
        self.occupied
            .iter()
            .enumerate()
            .find(|(_, w)| **w != 0)
            .map(|(i, w)| i * 64 + w.trailing_zeros() as usize)
    }

    /// Makes bucket 0 hold an unpopped entry, the earliest; false when none is left.
    #[inline(always)]
    fn settle(&mut self) -> bool {
        self.head < self.buckets[0].len() || self.refill()
    }

    /// [`Agenda::settle`] once bucket 0 is used up: redistributes the earliest
    /// non-empty bucket (out of line, so that the common case is two loads and a
    /// compare without a call).
    #[inline(never)]
    fn refill(&mut self) -> bool {
        self.buckets[0].clear();
        self.head = 0;
        let Some(b) = self.first_bucket() else {
            return false;
        };
        self.occupied[b / 64] &= !(1 << (b % 64));
        if self.buckets[b].len() <= RUN {
            // Few entries: sorted in place (stably, so ties keep push order) and
            // swapped in as bucket 0, a run that pops in order.
            let (zero, rest) = self.buckets.split_at_mut(1);
            std::mem::swap(&mut zero[0], &mut rest[b - 1]);
            let run = &mut self.buckets[0];
            run.sort_by_key(|&(t, _)| t);
            self.last = run[0].0;
            return true;
        }
        let items = std::mem::take(&mut self.buckets[b]);
        self.last = items.iter().map(|&(t, _)| t).min().unwrap_or(self.last);
        for &(t, ev) in &items {
            self.put(t, ev);
        }
        // Give the emptied vector's capacity back to bucket b.
        let mut items = items;
        items.clear();
        if self.buckets[b].is_empty() {
            self.buckets[b] = items;
        }
        true
    }

    #[inline]
    pub fn peek_time(&mut self) -> Option<Instant> {
        if !self.settle() {
            return None;
        }
        Some(Instant::from_ps(self.buckets[0][self.head].0))
    }

    #[inline]
    pub fn pop(&mut self) -> Option<(Instant, Ev)> {
        if !self.settle() {
            return None;
        }
        let (t, ev) = self.buckets[0][self.head];
        self.head += 1;
        self.len -= 1;
        self.popped = t;
        Some((Instant::from_ps(t), Ev::unpack(ev)))
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// The event `k` places after the next (`0`: the next), when it is already
    /// in the sorted run that pops next (no bucket is redistributed to find
    /// it): what the simulator reads ahead of. A later push may still come
    /// before it.
    #[inline]
    pub fn upcoming(&self, k: usize) -> Option<Ev> {
        self.buckets[0]
            .get(self.head + k)
            .map(|&(_, ev)| Ev::unpack(ev))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rondo_proto::rng::Rng;
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    /// Every kind of event, with operands at their limits, comes back from its
    /// packed word unchanged.
    #[test]
    fn events_pack_into_one_word() {
        let top = u32::MAX;
        let events = [
            Ev::TxDone(0),
            Ev::TxDone(top),
            Ev::Arrive(top),
            Ev::Timer { host: 0, gen: 0 },
            Ev::Timer {
                host: MAX_HOSTS - 1,
                gen: top,
            },
            Ev::Timer { host: 5, gen: 1 },
            Ev::Start(top),
            Ev::Stop(7),
            Ev::Change(top),
            Ev::Warmup,
            Ev::Sample,
            Ev::StallStart(top),
            Ev::StallEnd(3),
        ];
        for ev in events {
            assert_eq!(Ev::unpack(ev.pack()), ev);
        }
    }

    /// A small bucket becomes a sorted run: pushes inside its span (before,
    /// between and at the times of its entries) pop in time order, each after
    /// the entries of its time pushed before it.
    #[test]
    fn pushes_into_a_run_keep_time_then_push_order() {
        let mut agenda = Agenda::default();
        let at = |t: u64| Instant::from_ps(t);
        // Far from 0, so that they share one bucket (not bucket 0).
        for (i, t) in [1_000_050u64, 1_000_010, 1_000_030, 1_000_010]
            .into_iter()
            .enumerate()
        {
            agenda.push(at(t), Ev::Arrive(i as u32));
        }
        assert_eq!(agenda.pop(), Some((at(1_000_010), Ev::Arrive(1))));
        agenda.push(at(1_000_010), Ev::Arrive(10)); // at the head's time
        agenda.push(at(1_000_030), Ev::Arrive(11)); // at an entry's time
        agenda.push(at(1_000_020), Ev::Arrive(12)); // between two entries
        agenda.push(at(1_000_050), Ev::Arrive(13)); // at the run's end
        agenda.push(at(1_000_040), Ev::Arrive(14));
        let order: Vec<(u64, u32)> = std::iter::from_fn(|| agenda.pop())
            .map(|(t, ev)| match ev {
                Ev::Arrive(i) => (t.as_ps(), i),
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert_eq!(
            order,
            [
                (1_000_010, 3),
                (1_000_010, 10),
                (1_000_020, 12),
                (1_000_030, 2),
                (1_000_030, 11),
                (1_000_040, 14),
                (1_000_050, 0),
                (1_000_050, 13),
            ]
        );
    }

    /// Against a binary heap of (time, push order): the agenda pops the same
    /// events in the same order, ties in push order, over bursts of one instant
    /// and times spread across many bits, with pushes between pops, and after a
    /// peek, pushes earlier than the peeked time.
    #[test]
    fn pops_in_time_then_push_order() {
        let mut rng = Rng::new(7);
        let mut agenda = Agenda::default();
        let mut model = BinaryHeap::new();
        let mut seq = 0u32;
        let mut now = 0u64;
        for step in 0..200_000 {
            if rng.chance(0.05) {
                // A peek alone (as at the end of a run), before more pushes.
                let want = model.peek().map(|&Reverse((at, _))| Instant::from_ps(at));
                assert_eq!(agenda.peek_time(), want, "step {step}");
            } else if rng.chance(0.55) || model.is_empty() {
                let at = match rng.gen_range(0..4) {
                    0 => now,
                    1 => now + rng.gen_range(0..8),
                    2 => now + rng.gen_range(0..1_000_000),
                    _ => now + (1u64 << rng.gen_range(0..40)),
                };
                seq += 1;
                agenda.push(Instant::from_ps(at), Ev::Arrive(seq));
                model.push(Reverse((at, seq)));
            } else {
                let Reverse((at, id)) = model.pop().unwrap();
                assert_eq!(
                    agenda.peek_time(),
                    Some(Instant::from_ps(at)),
                    "step {step}"
                );
                assert_eq!(
                    agenda.pop(),
                    Some((Instant::from_ps(at), Ev::Arrive(id))),
                    "step {step}"
                );
                now = at;
            }
            assert_eq!(agenda.len(), model.len());
        }
        while let Some(Reverse((at, id))) = model.pop() {
            assert_eq!(agenda.pop(), Some((Instant::from_ps(at), Ev::Arrive(id))));
        }
        assert_eq!(agenda.pop(), None);
        assert_eq!(agenda.peek_time(), None);
    }
}
