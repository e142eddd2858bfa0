//! The seeded byte pattern that `--verify` writes at the sender and checks at the
//! receiver: byte `o` of message `m` is a pure function of (seed, m, o), so any piece
//! of any message can be generated or checked on its own, at any offset.

/// The pattern of one run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pattern {
    seed: u64,
}

/// The first byte that differs from the pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mismatch {
    /// Offset of the byte within its message.
    pub offset: u64,
    /// The byte the pattern has there.
    pub expected: u8,
    /// The byte that arrived.
    pub found: u8,
}

/// splitmix64's finaliser: a cheap bijective mix of 64 bits.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Bytes per block: one mix per block (so `--verify` costs little beside the
/// transfer), its eight words apart by [`LANE`].
const BLOCK: usize = 64;
/// The step between the words of a block (odd: the eight differ).
const LANE: u64 = 0x9e37_79b9_7f4a_7c15;

/// The eight words of block `b` of the message with key `key`.
fn words(key: u64, b: u64) -> impl Iterator<Item = u64> {
    let h = mix(key ^ b);
    (0..8).map(move |j: u64| h.wrapping_add(j.wrapping_mul(LANE)))
}

/// Writes block `b` of the message with key `key` into `out` (64 bytes).
fn write_block(key: u64, b: u64, out: &mut [u8]) {
    for (w, word) in out.chunks_exact_mut(8).zip(words(key, b)) {
        w.copy_from_slice(&word.to_le_bytes());
    }
}

/// `[offset, offset + len)` split at block boundaries: the bytes before the first
/// whole block, the whole blocks' bytes, the rest.
fn split(offset: u64, len: usize) -> (usize, usize) {
    let head = ((BLOCK as u64 - offset % BLOCK as u64) % BLOCK as u64).min(len as u64) as usize;
    let whole = (len - head) / BLOCK * BLOCK;
    (head, whole)
}

impl Pattern {
    /// The pattern of this seed.
    pub fn new(seed: u64) -> Pattern {
        Pattern { seed }
    }

    /// Key of one message: distinct messages get unrelated blocks.
    fn message_key(&self, message: u64) -> u64 {
        mix(self.seed ^ mix(message.wrapping_add(0x9e37_79b9_7f4a_7c15)))
    }

    /// Calls `f(i, piece)` for the pieces of the pattern's blocks that cover
    /// `[offset, offset + len)`, in order: `piece` is the pattern of bytes
    /// `offset + i ..`. The ends of a buffer, and where a mismatch is, go this
    /// way; the whole blocks between go a word at a time.
    fn pieces(key: u64, offset: u64, len: usize, mut f: impl FnMut(usize, &[u8])) {
        let mut i = 0;
        while i < len {
            let at = offset + i as u64;
            let mut bytes = [0u8; BLOCK];
            write_block(key, at / BLOCK as u64, &mut bytes);
            let first = (at % BLOCK as u64) as usize;
            let n = (BLOCK - first).min(len - i);
            f(i, &bytes[first..first + n]);
            i += n;
        }
    }

    /// Writes the pattern of `message` from byte `offset` into `buf`.
    pub fn fill(&self, message: u64, offset: u64, buf: &mut [u8]) {
        let key = self.message_key(message);
        let (head, whole) = split(offset, buf.len());
        let fill_piece = |buf: &mut [u8], at: u64| {
            Self::pieces(key, at, buf.len(), |i, piece| {
                buf[i..i + piece.len()].copy_from_slice(piece)
            })
        };
        let (first, rest) = buf.split_at_mut(head);
        fill_piece(first, offset);
        let (mid, tail) = rest.split_at_mut(whole);
        let b0 = (offset + head as u64) / BLOCK as u64;
        for (b, block) in (b0..).zip(mid.chunks_exact_mut(BLOCK)) {
            write_block(key, b, block);
        }
        fill_piece(tail, offset + (head + whole) as u64);
    }

    /// Checks `buf` against the pattern of `message` from byte `offset`.
    pub fn check(&self, message: u64, offset: u64, buf: &[u8]) -> Result<(), Mismatch> {
        let key = self.message_key(message);
        // The first difference within `got`, which starts at message byte `at`.
        let find = |got: &[u8], at: u64| {
            let mut first = None;
            Self::pieces(key, at, got.len(), |i, piece| {
                let k = (0..piece.len()).find(|&k| got[i + k] != piece[k]);
                if let (None, Some(k)) = (first, k) {
                    first = Some(Mismatch {
                        offset: at + (i + k) as u64,
                        expected: piece[k],
                        found: got[i + k],
                    });
                }
            });
            first.map_or(Ok(()), Err)
        };
        let (head, whole) = split(offset, buf.len());
        find(&buf[..head], offset)?;
        let b0 = (offset + head as u64) / BLOCK as u64;
        let mid = &buf[head..head + whole];
        for (n, (b, block)) in (b0..).zip(mid.chunks_exact(BLOCK)).enumerate() {
            // XORs of whole words, no branch per word.
            let diff = block
                .chunks_exact(8)
                .zip(words(key, b))
                .fold(0, |d, (w, word)| {
                    d | (u64::from_le_bytes(w.try_into().expect("8 bytes")) ^ word)
                });
            if diff != 0 {
                let at = head + n * BLOCK;
                return find(&buf[at..at + BLOCK], offset + at as u64);
            }
        }
        find(&buf[head + whole..], offset + (head + whole) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_at_any_offset_match_the_whole() {
        let p = Pattern::new(7);
        let mut whole = vec![0u8; 1000];
        p.fill(3, 0, &mut whole);
        for (start, end) in [
            (0, 1),
            (5, 13),
            (8, 16),
            (60, 200),
            (64, 128),
            (999, 1000),
            (1, 999),
        ] {
            let mut piece = vec![0u8; end - start];
            p.fill(3, start as u64, &mut piece);
            assert_eq!(piece, whole[start..end], "piece {start}..{end}");
            assert_eq!(p.check(3, start as u64, &whole[start..end]), Ok(()));
        }
    }

    #[test]
    fn messages_and_seeds_differ_and_a_flipped_byte_is_found() {
        let mut a = vec![0u8; 64];
        let mut b = vec![0u8; 64];
        Pattern::new(1).fill(0, 0, &mut a);
        Pattern::new(1).fill(1, 0, &mut b);
        assert_ne!(a, b);
        Pattern::new(2).fill(0, 0, &mut b);
        assert_ne!(a, b);
        a[17] ^= 0x40;
        let m = Pattern::new(1).check(0, 100, &a).map(|_| ());
        assert!(m.is_err(), "the checked offset differs from the filled one");
        let m = Pattern::new(1).check(0, 0, &a).unwrap_err();
        assert_eq!(m.offset, 17);
        assert_eq!(m.found ^ m.expected, 0x40);
    }

    #[test]
    fn words_moved_within_a_block_or_between_messages_are_found() {
        let p = Pattern::new(5);
        let mut a = vec![0u8; 256];
        p.fill(9, 0, &mut a);
        // The eight words of every block differ from each other.
        for block in a.chunks_exact(64) {
            let words: std::collections::BTreeSet<&[u8]> = block.chunks_exact(8).collect();
            assert_eq!(words.len(), 8);
        }
        // Two words of one block swapped: found at the first of them.
        let mut swapped = a.clone();
        swapped[72..80].copy_from_slice(&a[88..96]);
        swapped[88..96].copy_from_slice(&a[72..80]);
        assert_eq!(p.check(9, 0, &swapped).unwrap_err().offset / 8, 9);
        // A block of the next message in its place.
        let mut other = vec![0u8; 64];
        p.fill(10, 128, &mut other);
        let mut mixed = a.clone();
        mixed[128..192].copy_from_slice(&other);
        assert!(p.check(9, 0, &mixed).unwrap_err().offset >= 128);
    }
}
