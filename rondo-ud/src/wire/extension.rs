//! Header extensions: the TLV area between a type's fixed part and `header_len`.
//!
//! Each extension is `type: u8, len: u8, value: [u8; len]`; type [`EXT_PAD`] is a
//! single pad byte without a length. A type with [`EXT_CRITICAL`] set must be
//! understood: a receiver that does not know it drops the packet. Version 1 defines
//! no extension type, so [`Repr::parse`](super::Repr::parse) skips every
//! non-critical extension and rejects every critical one.

use super::WireError;

/// Extension type 0: one byte of padding, no length byte.
pub const EXT_PAD: u8 = 0;
/// Bit 7 of the extension type: the receiver must understand it or drop the packet.
pub const EXT_CRITICAL: u8 = 0x80;

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
}

impl<'a> Extensions<'a> {
    pub(super) fn new(area: &'a [u8], base: usize) -> Extensions<'a> {
        Extensions { area, pos: 0, base }
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
