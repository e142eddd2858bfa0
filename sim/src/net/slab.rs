//! The packets in flight: each datagram's bytes up to its last non-zero byte.
//!
//! A host writes each datagram into one transmit buffer ([`Slab::tx`]); the slab
//! keeps a copy of it without its trailing zeros ([`Slab::store`]) and gives it
//! back whole, zeros and all, when it arrives ([`Slab::datagram`]). A simulated
//! payload is zeros (the engine reads them from `flows::Zeros`), so a data packet
//! keeps only its header: a slot of one cache line (its kept length and up to
//! [`SMALL`] bytes) instead of an MTU-sized buffer, and an arrival reads that one
//! line (against 128-byte slots with the length in a side table, which missed the
//! cache twice per arrival: `clos320-permutation` about 5% faster).
//! In the 320-host all-to-all, where a million packets are queued at the hosts'
//! NICs at the start, that is about 1 GB less memory written (a third of the run's
//! page faults) and no cold MTU-sized write per packet. A datagram with more
//! bytes to keep (a real payload, a test's) takes an MTU-sized slot besides.
//!
//! Small slots come in chunks of [`CHUNK`], large ones one by one, with free
//! lists, so steady state allocates nothing and growth never moves the packets
//! already held.

/// Bytes of a small slot: one cache line, aligned, holding the datagram's kept
/// length (two bytes) and up to [`SMALL`] bytes of it, which covers every header
/// of the wire format a simulated packet carries (48-byte data, 56-byte feedback
/// headers). An arrival reads that one line: its length and its bytes.
const LINE: usize = 64;

/// Bytes a small slot keeps after its length.
const SMALL: usize = LINE - 2;

/// Slots per chunk.
const CHUNK: usize = 1024;

/// [`Slab`]'s tag of a slot that holds no tracked data packet.
const NO_DATA: (u32, u32) = (u32::MAX, 0);

/// No large slot.
const NO_LARGE: u32 = u32::MAX;

/// One small slot: the kept length (little-endian), then the kept bytes when they
/// fit.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; LINE]);

impl Line {
    fn kept(&self) -> usize {
        usize::from(u16::from_le_bytes([self.0[0], self.0[1]]))
    }
}

/// Fixed-size slots in chunks, with a free list.
struct Slots<T> {
    chunks: Vec<Box<[T]>>,
    count: u32,
    free: Vec<u32>,
    /// A new chunk's slots.
    blank: T,
}

impl<T: Clone> Slots<T> {
    fn new(blank: T) -> Slots<T> {
        Slots {
            chunks: Vec::new(),
            count: 0,
            free: Vec::new(),
            blank,
        }
    }

    /// A free slot; `true` when it is a new one (an index not handed out before).
    fn alloc(&mut self) -> (u32, bool) {
        if let Some(i) = self.free.pop() {
            return (i, false);
        }
        let i = self.count;
        self.count += 1;
        if i as usize / CHUNK == self.chunks.len() {
            self.chunks
                .push(vec![self.blank.clone(); CHUNK].into_boxed_slice());
        }
        (i, true)
    }

    fn free(&mut self, i: u32) {
        self.free.push(i);
    }

    fn get(&self, i: u32) -> &T {
        let i = i as usize;
        &self.chunks[i / CHUNK][i % CHUNK]
    }

    fn get_mut(&mut self, i: u32) -> &mut T {
        let i = i as usize;
        &mut self.chunks[i / CHUNK][i % CHUNK]
    }

    fn in_use(&self) -> usize {
        self.count as usize - self.free.len()
    }
}

/// MTU-sized byte slots, each allocated when it is first handed out (a
/// datagram with a payload is rare in a simulation and common on the verbs
/// layer's in-process fabric, where a few dozen are in flight at most: a chunk
/// of [`CHUNK`] MTU-sized slots at a time was about 9 MB per fabric); [`Slots`]
/// of nothing keeps the indices.
struct ByteSlots {
    slots: Vec<Box<[u8]>>,
    width: usize,
    index: Slots<()>,
}

impl ByteSlots {
    fn new(width: usize) -> ByteSlots {
        ByteSlots {
            slots: Vec::new(),
            width,
            index: Slots::new(()),
        }
    }

    fn alloc(&mut self) -> u32 {
        let (i, new) = self.index.alloc();
        if new {
            self.slots.push(vec![0u8; self.width].into_boxed_slice());
        }
        i
    }

    fn free(&mut self, i: u32) {
        self.index.free(i);
    }

    fn get(&self, i: u32) -> &[u8] {
        &self.slots[i as usize]
    }

    fn get_mut(&mut self, i: u32) -> &mut [u8] {
        &mut self.slots[i as usize]
    }
}

/// What the slab knows of a packet besides its bytes (read only for a datagram
/// too long for its small slot, and for a lost packet's tag).
#[derive(Clone, Copy)]
struct Held {
    /// The large slot holding the kept bytes when more than [`SMALL`], else
    /// [`NO_LARGE`].
    large: u32,
    /// (flow index, PSN) of the data packet, [`NO_DATA`] for anything else: what
    /// a drop is recorded against.
    data: (u32, u32),
}

/// The packets in flight, by slot (see the module's documentation).
pub(crate) struct Slab {
    mtu: usize,
    /// Where a host writes its next datagram.
    tx: Box<[u8]>,
    /// Where an arriving datagram is put back together: zeros beyond `rx_dirty`.
    rx: Box<[u8]>,
    rx_dirty: usize,
    small: Slots<Line>,
    large: ByteSlots,
    /// By small slot index (a packet's slot).
    held: Vec<Held>,
}

impl Slab {
    pub fn new(mtu: usize) -> Slab {
        Slab {
            mtu,
            tx: vec![0u8; mtu].into_boxed_slice(),
            rx: vec![0u8; mtu].into_boxed_slice(),
            rx_dirty: 0,
            small: Slots::new(Line([0; LINE])),
            large: ByteSlots::new(mtu),
            held: Vec::new(),
        }
    }

    /// Bytes of the transmit buffer: the largest datagram.
    pub fn slot_len(&self) -> usize {
        self.mtu
    }

    /// The buffer each `poll_transmit` gets; [`Slab::store`] keeps what was
    /// written into it.
    pub fn tx(&mut self) -> &mut [u8] {
        &mut self.tx
    }

    /// A new slot holding the first `len` bytes of [`Slab::tx`].
    pub fn store(&mut self, len: usize) -> u32 {
        let len = len.min(self.mtu);
        let kept = kept_len(&self.tx[..len]);
        let tx = &self.tx[..kept];
        let (slot, new) = self.small.alloc();
        let large = if kept > SMALL {
            let l = self.large.alloc();
            self.large.get_mut(l)[..kept].copy_from_slice(tx);
            l
        } else {
            NO_LARGE
        };
        let line = &mut self.small.get_mut(slot).0;
        line[..2].copy_from_slice(&(kept as u16).to_le_bytes());
        if large == NO_LARGE {
            line[2..2 + kept].copy_from_slice(tx);
        }
        let held = Held {
            large,
            data: NO_DATA,
        };
        if new {
            self.held.push(held);
        } else {
            self.held[slot as usize] = held;
        }
        slot
    }

    /// A new slot holding a copy of `bytes` (at most an MTU of them).
    pub fn store_bytes(&mut self, bytes: &[u8]) -> u32 {
        let len = bytes.len().min(self.mtu);
        self.tx[..len].copy_from_slice(&bytes[..len]);
        self.store(len)
    }

    /// Byte `at` of the datagram in slot `i` (zero past what it keeps).
    pub fn byte(&self, i: u32, at: usize) -> u8 {
        self.kept(i).get(at).copied().unwrap_or(0)
    }

    /// The datagram of `len` bytes in slot `i`, whole.
    pub fn datagram(&mut self, i: u32, len: usize) -> &[u8] {
        let len = len.min(self.mtu);
        let kept = kept(&self.small, &self.large, &self.held, i);
        let n = kept.len().min(len);
        self.rx[n..self.rx_dirty.max(n)].fill(0);
        self.rx[..n].copy_from_slice(&kept[..n]);
        self.rx_dirty = n;
        &self.rx[..len]
    }

    /// Asks for the cache line of datagram `i`'s slot ([`reorder::prefetch`]),
    /// which its arrival reads.
    pub fn prefetch(&self, i: u32) {
        if (i as usize) < self.small.chunks.len() * CHUNK {
            reorder::prefetch(self.small.get(i));
        }
    }

    pub fn free(&mut self, i: u32) {
        if self.small.get(i).kept() > SMALL {
            self.large.free(self.held[i as usize].large);
        }
        self.small.free(i);
    }

    /// Tags slot `i` with the (flow index, PSN) of the data packet it holds.
    pub fn set_data(&mut self, i: u32, data: Option<(u32, u32)>) {
        self.held[i as usize].data = data.unwrap_or(NO_DATA);
    }

    /// The (flow index, PSN) slot `i` was tagged with, if any.
    pub fn data(&self, i: u32) -> Option<(u32, u32)> {
        let d = self.held[i as usize].data;
        (d != NO_DATA).then_some(d)
    }

    /// A new slot holding a copy of the first `len` bytes of slot `from`'s
    /// datagram, untagged.
    pub fn copy(&mut self, from: u32, len: usize) -> u32 {
        let src = kept(&self.small, &self.large, &self.held, from);
        let n = src.len().min(len);
        self.tx[..n].copy_from_slice(&src[..n]);
        self.store(n)
    }

    /// Packets stored and not freed.
    pub fn in_use(&self) -> usize {
        self.small.in_use()
    }

    fn kept(&self, i: u32) -> &[u8] {
        kept(&self.small, &self.large, &self.held, i)
    }

    /// The first `N` bytes of datagram `i`, zeros where it is shorter (what
    /// [`Slab::datagram`] would give, without the copy of the rest).
    pub fn head<const N: usize>(&self, i: u32) -> [u8; N] {
        let mut out = [0u8; N];
        let kept = self.kept(i);
        let n = kept.len().min(N);
        out[..n].copy_from_slice(&kept[..n]);
        out
    }
}

/// The bytes slot `i` keeps (the datagram's, up to its last non-zero one), from
/// the slab's parts, so that a caller can write another part meanwhile. The
/// held entry is read only for a datagram in a large slot.
#[inline]
fn kept<'a>(small: &'a Slots<Line>, large: &'a ByteSlots, held: &[Held], i: u32) -> &'a [u8] {
    let line = small.get(i);
    let kept = line.kept();
    if kept <= SMALL {
        &line.0[2..2 + kept]
    } else {
        &large.get(held[i as usize].large)[..kept]
    }
}

/// The length of `b` without its trailing zeros: 256-byte, then 64-byte blocks
/// while they are all zeros (a simulated payload: one OR-reduction per block,
/// which the compiler vectorises), then word by word, then byte by byte.
fn kept_len(b: &[u8]) -> usize {
    let zeros = |block: &[u8]| block.iter().fold(0, |acc, &x| acc | x) == 0;
    let mut end = b.len();
    for block in [256, 64] {
        while end >= block && zeros(&b[end - block..end]) {
            end -= block;
        }
    }
    while end >= 8 {
        let word = u64::from_ne_bytes(b[end - 8..end].try_into().expect("8 bytes"));
        if word != 0 {
            break;
        }
        end -= 8;
    }
    while end > 0 && b[end - 1] == 0 {
        end -= 1;
    }
    end
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every datagram comes back as it was written, whatever its length and
    /// wherever its last non-zero byte, while slots are reused and copied.
    #[test]
    fn datagrams_come_back_whole() {
        let mtu = 1500;
        let mut slab = Slab::new(mtu);
        let mut rng = rondo_proto::rng::Rng::new(7);
        let mut next = move |m: u64| rng.gen_range(0..m);
        let mut live: Vec<(u32, Vec<u8>)> = Vec::new();
        for step in 0..5_000 {
            let len = 1 + next(mtu as u64) as usize;
            // Headers of a few dozen bytes, some with a payload, some with zeros
            // inside and at the end.
            let body = next(4);
            let dgram: Vec<u8> = (0..len)
                .map(|j| match body {
                    0 if j >= 60 => 0,
                    1 if j >= SMALL => 0,
                    _ if next(5) == 0 => 0,
                    _ => next(256) as u8,
                })
                .collect();
            slab.tx()[..len].copy_from_slice(&dgram);
            let slot = if step % 7 == 0 {
                slab.store_bytes(&dgram)
            } else {
                slab.store(len)
            };
            slab.set_data(slot, Some((step, 0)));
            live.push((slot, dgram));
            if step % 11 == 0 {
                let (from, d) = live[next(live.len() as u64) as usize].clone();
                let copy = slab.copy(from, d.len());
                assert_eq!(slab.data(copy), None);
                live.push((copy, d));
            }
            while live.len() > 40 || (next(3) == 0 && !live.is_empty()) {
                let (slot, d) = live.swap_remove(next(live.len() as u64) as usize);
                assert_eq!(slab.byte(slot, 1), d.get(1).copied().unwrap_or(0));
                assert_eq!(slab.datagram(slot, d.len()), &d[..]);
                slab.free(slot);
            }
            assert_eq!(slab.in_use(), live.len());
        }
    }

    /// Thousands of datagrams with a payload held at once come back whole, each
    /// in its own slot, before and after slots are reused.
    #[test]
    fn many_large_datagrams_come_back_whole() {
        let mtu = 300;
        let mut slab = Slab::new(mtu);
        let dgram = |k: usize| -> Vec<u8> { (0..mtu).map(|j| (k * 7 + j) as u8 | 1).collect() };
        let n = 2 * CHUNK + 5;
        let mut slots: Vec<u32> = (0..n).map(|k| slab.store_bytes(&dgram(k))).collect();
        for (k, &slot) in slots.iter().enumerate() {
            assert_eq!(slab.datagram(slot, mtu), &dgram(k)[..], "datagram {k}");
        }
        for &slot in slots.iter().step_by(2) {
            slab.free(slot);
        }
        for k in (0..n).step_by(2) {
            slots[k] = slab.store_bytes(&dgram(n + k));
        }
        for (k, &slot) in slots.iter().enumerate() {
            let want = if k % 2 == 0 { dgram(n + k) } else { dgram(k) };
            assert_eq!(
                slab.datagram(slot, mtu),
                &want[..],
                "datagram {k} after reuse"
            );
        }
        assert_eq!(slab.in_use(), n);
    }

    #[test]
    fn trailing_zeros_are_not_kept() {
        assert_eq!(kept_len(&[]), 0);
        assert_eq!(kept_len(&[0; 20]), 0);
        assert_eq!(kept_len(&[1, 0, 0]), 1);
        let mut b = [0u8; 100];
        b[40] = 9;
        assert_eq!(kept_len(&b), 41);
        b[99] = 1;
        assert_eq!(kept_len(&b), 100);
        // Across the 256- and 64-byte blocks: every position of the last
        // non-zero byte.
        for len in [63, 64, 65, 127, 128, 129, 255, 256, 257, 511, 513, 1000] {
            for last in 0..len {
                let mut b = vec![0u8; len];
                b[last] = 1;
                assert_eq!(kept_len(&b), last + 1, "len {len}, last {last}");
            }
            assert_eq!(kept_len(&vec![0u8; len]), 0);
        }
    }
}
