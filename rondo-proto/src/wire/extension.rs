//! Header extensions: the TLV area between a type's fixed part and `header_len`.
//!
//! Each extension is `type: u8, len: u8, value: [u8; len]`; type [`EXT_PAD`] is a
//! single pad byte without a length. A type with [`EXT_CRITICAL`] set must be
//! understood: a receiver that does not know it drops the packet. Version 1 defines
//! one extension type, [`EXT_TOKEN`] (the connection token); [`Repr::parse`](super::Repr::parse)
//! checks it, skips every other non-critical extension and rejects every other
//! critical one.

use super::WireError;

/// Extension type 0: one byte of padding, no length byte.
pub const EXT_PAD: u8 = 0;
/// Bit 7 of the extension type: the receiver must understand it or drop the packet.
pub const EXT_CRITICAL: u8 = 0x80;
/// Extension type 0x82 (critical): the connection token, an 8-byte big-endian value
/// agreed at connect time. A receiver that does not know tokens must drop the
/// packet rather than accept it without the check.
pub const EXT_TOKEN: u8 = EXT_CRITICAL | 0x02;
/// Value bytes of a token extension.
pub const TOKEN_LEN: usize = 8;
/// Header bytes a token adds: type, length, the 8 value bytes and 2 pad bytes, so the
/// header stays a multiple of 4 bytes.
pub const TOKEN_EXT_LEN: usize = 12;

/// Header bytes the extensions for `token` add: [`TOKEN_EXT_LEN`] with a token, 0 without.
pub const fn token_overhead(token: Option<u64>) -> usize {
    match token {
        Some(_) => TOKEN_EXT_LEN,
        None => 0,
    }
}

/// Writes the token extension (type, length, value, two pads) into `area`, which is
/// exactly [`TOKEN_EXT_LEN`] bytes.
pub(super) fn emit_token(area: &mut [u8], token: u64) {
    area[0] = EXT_TOKEN;
    area[1] = TOKEN_LEN as u8;
    area[2..2 + TOKEN_LEN].copy_from_slice(&token.to_be_bytes());
    area[2 + TOKEN_LEN..].fill(EXT_PAD);
}

/// One raw header extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extension<'a> {
    /// Extension type byte.
    pub kind: u8,
    /// The value bytes (`len` of them).
    pub value: &'a [u8],
}

impl Extension<'_> {
    /// True when the must-understand bit is set.
    pub const fn is_critical(&self) -> bool {
        self.kind & EXT_CRITICAL != 0
    }
}

/// Iterator over the extensions of a header, from [`Packet::extensions`](super::Packet::extensions).
///
/// Pads are skipped. An extension that overruns the area yields one
/// `Err(MalformedExtension)` and ends the iteration.
#[derive(Clone, Debug)]
pub struct Extensions<'a> {
    area: &'a [u8],
    /// Position in `area` of the next extension.
    pos: usize,
    /// Offset of `area` in the datagram, for error positions.
    base: usize,
    /// Position in `area` of the extension yielded last.
    last: usize,
}

impl<'a> Extensions<'a> {
    pub(super) fn new(area: &'a [u8], base: usize) -> Extensions<'a> {
        Extensions {
            area,
            pos: 0,
            base,
            last: 0,
        }
    }
}

impl Extensions<'_> {
    /// Offset in the datagram of the type byte of the extension yielded last.
    pub(super) fn last_offset(&self) -> usize {
        self.base + self.last
    }
}

impl<'a> Iterator for Extensions<'a> {
    type Item = Result<Extension<'a>, WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let at = self.pos;
            let kind = *self.area.get(at)?;
            if kind == EXT_PAD {
                self.pos += 1;
                continue;
            }
            let value = self.area.get(at + 1).and_then(|&len| {
                let start = at + 2;
                self.area.get(start..start + usize::from(len))
            });
            return match value {
                Some(value) => {
                    self.last = at;
                    self.pos = at + 2 + value.len();
                    Some(Ok(Extension { kind, value }))
                }
                None => {
                    self.pos = self.area.len();
                    Some(Err(WireError::MalformedExtension { at: self.base + at }))
                }
            };
        }
    }
}
