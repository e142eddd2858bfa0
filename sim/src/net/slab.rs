//! The packets in flight: each datagram's bytes up to its last non-zero byte.
//!
//! A host writes each datagram into one transmit buffer ([`Slab::tx`]); the slab
//! keeps a copy of it without its trailing zeros ([`Slab::store`]) and gives it
//! back whole, zeros and all, when it arrives ([`Slab::datagram`]). A simulated
//! payload is zeros (the engine reads them from `flows::Zeros`), so a data packet
//! keeps only its header: a [`SMALL`]-byte slot instead of an MTU-sized buffer.
//! In the 320-host all-to-all, where a million packets are queued at the hosts'
//! NICs at the start, that is about 1 GB less memory written (a third of the run's
//! page faults) and no cold MTU-sized write per packet. A datagram with more
//! bytes to keep (a real payload, a test's) takes an MTU-sized slot besides.
//!
//! Slots come in chunks of [`CHUNK`] with free lists, so steady state allocates
//! nothing and growth never moves the packets already held.

/// Bytes of a small slot: more than any header of the wire format (with its
/// token and the straddling bytes of a payload read by reference).
const SMALL: usize = 128;

/// Slots per chunk.
const CHUNK: usize = 1024;

/// [`Slab`]'s tag of a slot that holds no tracked data packet.
const NO_DATA: (u32, u32) = (u32::MAX, 0);

/// No large slot.
const NO_LARGE: u32 = u32::MAX;

/// Fixed-size slots in chunks, with a free list.
struct Slots {
    size: usize,
    chunks: Vec<Box<[u8]>>,
    count: u32,
    free: Vec<u32>,
}

impl Slots {
    fn new(size: usize) -> Slots {
        Slots {
            size,
            chunks: Vec::new(),
            count: 0,
            free: Vec::new(),
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
                .push(vec![0u8; CHUNK * self.size].into_boxed_slice());
        }
        (i, true)
    }

    fn free(&mut self, i: u32) {
        self.free.push(i);
    }

    fn get(&self, i: u32) -> &[u8] {
        let i = i as usize;
        let start = i % CHUNK * self.size;
        &self.chunks[i / CHUNK][start..start + self.size]
    }

    fn get_mut(&mut self, i: u32) -> &mut [u8] {
        let i = i as usize;
        let start = i % CHUNK * self.size;
        &mut self.chunks[i / CHUNK][start..start + self.size]
    }

    fn in_use(&self) -> usize {
        self.count as usize - self.free.len()
    }
}

/// What the slab knows of a packet besides its bytes.
#[derive(Clone, Copy)]
struct Held {
    /// Bytes kept (the rest of the datagram, to its length, is zeros).
    kept: u16,
    /// The large slot holding them when more than [`SMALL`], else [`NO_LARGE`].
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
    small: Slots,
    large: Slots,
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
            small: Slots::new(SMALL),
            large: Slots::new(mtu),
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
        let slot = self.slot_for(kept);
        let tx = &self.tx[..kept];
        match self.held[slot as usize].large {
            NO_LARGE => self.small.get_mut(slot)[..kept].copy_from_slice(tx),
            l => self.large.get_mut(l)[..kept].copy_from_slice(tx),
        }
        slot
    }

    /// A new slot holding a copy of `bytes` (at most an MTU of them).
    pub fn store_bytes(&mut self, bytes: &[u8]) -> u32 {
        let len = bytes.len().min(self.mtu);
        self.tx[..len].copy_from_slice(&bytes[..len]);
        self.store(len)
    }

    /// A small slot (and a large one when `kept` needs it), untagged.
    fn slot_for(&mut self, kept: usize) -> u32 {
        let large = if kept > SMALL {
            self.large.alloc().0
        } else {
            NO_LARGE
        };
        let (slot, new) = self.small.alloc();
        let held = Held {
            kept: kept as u16,
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

    /// Byte `at` of the datagram in slot `i` (zero past what it keeps).
    pub fn byte(&self, i: u32, at: usize) -> u8 {
        kept(&self.small, &self.large, &self.held, i)
            .get(at)
            .copied()
            .unwrap_or(0)
    }

    /// The datagram of `len` bytes in slot `i`, whole.
    pub fn datagram(&mut self, i: u32, len: usize) -> &[u8] {
        let len = len.min(self.mtu);
        let src = kept(&self.small, &self.large, &self.held, i);
        let kept = src.len().min(len);
        self.rx[..self.rx_dirty].fill(0);
        self.rx[..kept].copy_from_slice(&src[..kept]);
        self.rx_dirty = kept;
        &self.rx[..len]
    }

    pub fn free(&mut self, i: u32) {
        let large = self.held[i as usize].large;
        if large != NO_LARGE {
            self.large.free(large);
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
        let kept = src.len().min(len);
        self.tx[..kept].copy_from_slice(&src[..kept]);
        self.store(kept)
    }

    /// Packets stored and not freed.
    pub fn in_use(&self) -> usize {
        self.small.in_use()
    }
}

/// The bytes slot `i` keeps (the datagram's, up to its last non-zero one), from
/// the slab's parts, so that a caller can write another part meanwhile.
fn kept<'a>(small: &'a Slots, large: &'a Slots, held: &[Held], i: u32) -> &'a [u8] {
    let h = held[i as usize];
    let bytes = match h.large {
        NO_LARGE => small.get(i),
        l => large.get(l),
    };
    &bytes[..usize::from(h.kept)]
}

/// The length of `b` without its trailing zeros, word by word.
fn kept_len(b: &[u8]) -> usize {
    let mut end = b.len();
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
    }
}
