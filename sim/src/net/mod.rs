//! The network machinery: links as output ports, the packet slab, the agenda.

pub(crate) mod fabric;
pub(crate) mod port;

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

/// Packets in flight: one `mtu`-sized buffer each, in chunks of [`SLAB_CHUNK`]
/// slots, with a free list, so steady state allocates nothing and growth never
/// moves (or transiently doubles) the packets already held: a million packets in
/// flight, as at the start of a 100,000-flow all-to-all, stay a million buffers.
pub(crate) struct Slab {
    mtu: usize,
    chunks: Vec<Box<[u8]>>,
    slots: u32,
    free: Vec<u32>,
    /// (flow index, PSN) of the data packet each slot holds, `NO_DATA` for
    /// anything else: what a drop is recorded against.
    data: Vec<(u32, u32)>,
}

/// [`Slab`]'s tag of a slot that holds no tracked data packet.
const NO_DATA: (u32, u32) = (u32::MAX, 0);

/// Slots per chunk of the [`Slab`].
const SLAB_CHUNK: usize = 1024;

impl Slab {
    pub fn new(mtu: usize) -> Slab {
        Slab {
            mtu,
            chunks: Vec::new(),
            slots: 0,
            free: Vec::new(),
            data: Vec::new(),
        }
    }

    /// Bytes of a slot: the buffer each `poll_transmit` gets.
    pub fn slot_len(&self) -> usize {
        self.mtu
    }

    pub fn alloc(&mut self) -> u32 {
        if let Some(i) = self.free.pop() {
            self.data[i as usize] = NO_DATA;
            return i;
        }
        let i = self.slots;
        self.slots += 1;
        self.data.push(NO_DATA);
        if i as usize / SLAB_CHUNK == self.chunks.len() {
            self.chunks
                .push(vec![0u8; SLAB_CHUNK * self.mtu].into_boxed_slice());
        }
        i
    }

    pub fn free(&mut self, i: u32) {
        self.free.push(i);
    }

    /// Tags slot `i` with the (flow index, PSN) of the data packet it holds.
    pub fn set_data(&mut self, i: u32, data: Option<(u32, u32)>) {
        self.data[i as usize] = data.unwrap_or(NO_DATA);
    }

    /// The (flow index, PSN) slot `i` was tagged with, if any.
    pub fn data(&self, i: u32) -> Option<(u32, u32)> {
        let d = self.data[i as usize];
        (d != NO_DATA).then_some(d)
    }

    /// Chunk and byte offset of slot `i`.
    fn at(&self, i: u32) -> (usize, usize) {
        let i = i as usize;
        (i / SLAB_CHUNK, i % SLAB_CHUNK * self.mtu)
    }

    pub fn buf(&self, i: u32, len: usize) -> &[u8] {
        let (c, start) = self.at(i);
        &self.chunks[c][start..start + len.min(self.mtu)]
    }

    pub fn buf_mut(&mut self, i: u32) -> &mut [u8] {
        let (c, start) = self.at(i);
        &mut self.chunks[c][start..start + self.mtu]
    }

    /// A new slot holding a copy of the first `len` bytes of slot `from`.
    pub fn copy(&mut self, from: u32, len: usize) -> u32 {
        let to = self.alloc();
        let len = len.min(self.mtu);
        let ((fc, fs), (tc, ts)) = (self.at(from), self.at(to));
        if fc == tc {
            self.chunks[fc].copy_within(fs..fs + len, ts);
        } else {
            let (a, b) = self.chunks.split_at_mut(fc.max(tc));
            let (src, dst) = if fc < tc {
                (&a[fc][fs..fs + len], &mut b[0][ts..ts + len])
            } else {
                (&b[0][fs..fs + len], &mut a[tc][ts..ts + len])
            };
            dst.copy_from_slice(src);
        }
        to
    }

    /// Packets allocated and not freed.
    pub fn in_use(&self) -> usize {
        self.slots as usize - self.free.len()
    }
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
