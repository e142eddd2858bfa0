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
}

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
}

/// Pending events keyed by (time, insertion sequence): a radix heap over the
/// 128-bit key `time << 64 | seq`. Keys are unique and every key pushed is larger
/// than the last one popped (time never goes back, the sequence only grows), which
/// is all a radix heap needs; ties in time pop in insertion order.
pub(crate) struct Agenda {
    /// Bucket `b` holds keys whose highest bit differing from `last` is bit `b - 1`
    /// (bucket 0: equal to `last`).
    buckets: Vec<Vec<(u128, Ev)>>,
    /// Bit `b` set when bucket `b` is non-empty (buckets 0..=128 in two words).
    occupied: [u64; 3],
    last: u128,
    len: usize,
    seq: u64,
}

impl Default for Agenda {
    fn default() -> Self {
        Agenda {
            buckets: (0..129).map(|_| Vec::new()).collect(),
            occupied: [0; 3],
            last: 0,
            len: 0,
            seq: 0,
        }
    }
}

impl Agenda {
    fn bucket_of(&self, key: u128) -> usize {
        (128 - (key ^ self.last).leading_zeros()) as usize
    }

    fn put(&mut self, key: u128, ev: Ev) {
        let b = self.bucket_of(key);
        self.buckets[b].push((key, ev));
        self.occupied[b / 64] |= 1 << (b % 64);
    }

    /// Schedules `ev` at `at` (not before the last event popped).
    pub fn push(&mut self, at: Instant, ev: Ev) {
        self.seq += 1;
        let key = (u128::from(at.as_ps()) << 64 | u128::from(self.seq)).max(self.last);
        self.put(key, ev);
        self.len += 1;
    }

    fn first_bucket(&self) -> Option<usize> {
        self.occupied
            .iter()
            .enumerate()
            .find(|(_, w)| **w != 0)
            .map(|(i, w)| i * 64 + w.trailing_zeros() as usize)
    }

    /// Makes bucket 0 hold the smallest key (exactly one entry).
    fn settle(&mut self) -> bool {
        let Some(b) = self.first_bucket() else {
            return false;
        };
        if b == 0 {
            return true;
        }
        let items = std::mem::take(&mut self.buckets[b]);
        self.occupied[b / 64] &= !(1 << (b % 64));
        self.last = items.iter().map(|(k, _)| *k).min().unwrap_or(self.last);
        for &(k, ev) in &items {
            self.put(k, ev);
        }
        // Give the emptied vector's capacity back to bucket b.
        let mut items = items;
        items.clear();
        if self.buckets[b].is_empty() {
            self.buckets[b] = items;
        }
        true
    }

    pub fn peek_time(&mut self) -> Option<Instant> {
        if !self.settle() {
            return None;
        }
        self.buckets[0]
            .last()
            .map(|(k, _)| Instant::from_ps((k >> 64) as u64))
    }

    pub fn pop(&mut self) -> Option<(Instant, Ev)> {
        if !self.settle() {
            return None;
        }
        let (k, ev) = self.buckets[0].pop()?;
        if self.buckets[0].is_empty() {
            self.occupied[0] &= !1;
        }
        self.len -= 1;
        Some((Instant::from_ps((k >> 64) as u64), ev))
    }

    pub fn len(&self) -> usize {
        self.len
    }
}
