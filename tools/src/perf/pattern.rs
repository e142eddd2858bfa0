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

impl Pattern {
    /// The pattern of this seed.
    pub fn new(seed: u64) -> Pattern {
        Pattern { seed }
    }

    /// Key of one message: distinct messages get unrelated words.
    fn message_key(&self, message: u64) -> u64 {
        mix(self.seed ^ mix(message.wrapping_add(0x9e37_79b9_7f4a_7c15)))
    }

    /// Calls `f(i, chunk)` for the pieces of the pattern's 8-byte words that cover
    /// `[offset, offset + len)`, in order: `chunk` is the pattern of bytes
    /// `offset + i ..` (whole words except at the two ends), so callers copy and
    /// compare a word at a time.
    fn chunks(&self, message: u64, offset: u64, len: usize, mut f: impl FnMut(usize, &[u8])) {
        let key = self.message_key(message);
        let mut i = 0;
        while i < len {
            let at = offset + i as u64;
            let word = mix(key ^ (at / 8)).to_le_bytes();
            let first = (at % 8) as usize;
            let n = (8 - first).min(len - i);
            f(i, &word[first..first + n]);
            i += n;
        }
    }

    /// Writes the pattern of `message` from byte `offset` into `buf`.
    pub fn fill(&self, message: u64, offset: u64, buf: &mut [u8]) {
        let len = buf.len();
        self.chunks(message, offset, len, |i, c| match <[u8; 8]>::try_from(c) {
            // A fixed-size copy compiles to one store, not a `memcpy` call.
            Ok(w) => buf[i..i + 8].copy_from_slice(&w),
            Err(_) => buf[i..i + c.len()].copy_from_slice(c),
        });
    }

    /// Checks `buf` against the pattern of `message` from byte `offset`.
    pub fn check(&self, message: u64, offset: u64, buf: &[u8]) -> Result<(), Mismatch> {
        let mut first = None;
        self.chunks(message, offset, buf.len(), |i, c| {
            let got = &buf[i..i + c.len()];
            // Whole words compare as integers (a slice comparison is a `memcmp`
            // call per word).
            let same = match (<[u8; 8]>::try_from(got), <[u8; 8]>::try_from(c)) {
                (Ok(g), Ok(w)) => u64::from_ne_bytes(g) == u64::from_ne_bytes(w),
                _ => got == c,
            };
            if first.is_none() && !same {
                let k = (0..c.len()).find(|&k| got[k] != c[k]).unwrap_or(0);
                first = Some(Mismatch {
                    offset: offset + (i + k) as u64,
                    expected: c[k],
                    found: got[k],
                });
            }
        });
        first.map_or(Ok(()), Err)
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
        for (start, end) in [(0, 1), (5, 13), (8, 16), (999, 1000), (1, 999)] {
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
}
