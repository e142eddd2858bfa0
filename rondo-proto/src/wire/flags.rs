//! The common header's `flags` byte.

use core::ops::BitOr;

use super::WireError;

/// Flags of the common header (byte 2). Only the four bits defined by version 1 can
/// be set; [`Flags::from_bits`] rejects the reserved bits 4-7.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Flags(u8);

impl Flags {
    /// The packet is a retransmission.
    pub const RETX: Flags = Flags(0x01);
    /// ACK/NAK: the acked packet arrived marked Congestion Experienced.
    pub const ECN_ECHO: Flags = Flags(0x02);
    /// DATA: first packet of a message (`offset == 0`).
    pub const FIRST: Flags = Flags(0x04);
    /// DATA: last packet of a message (`offset + payload_len == msg_len`).
    pub const LAST: Flags = Flags(0x08);
    /// Every bit version 1 defines.
    const KNOWN: u8 = 0x0f;

    /// No flag set.
    pub const fn empty() -> Flags {
        Flags(0)
    }

    /// The flags byte as sent.
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// Flags from a received byte; `Err(ReservedFlags)` when a reserved bit is set.
    pub const fn from_bits(bits: u8) -> Result<Flags, WireError> {
        if bits & !Self::KNOWN != 0 {
            Err(WireError::ReservedFlags(bits))
        } else {
            Ok(Flags(bits))
        }
    }

    /// True when every flag of `other` is set in `self`.
    pub const fn contains(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }

    /// Sets the flags of `other`.
    pub fn insert(&mut self, other: Flags) {
        self.0 |= other.0;
    }

    /// Clears the flags of `other`.
    pub fn remove(&mut self, other: Flags) {
        self.0 &= !other.0;
    }

    /// `self` with the flags of `other` set too (builder style).
    #[must_use]
    pub const fn with(self, other: Flags) -> Flags {
        Flags(self.0 | other.0)
    }

    /// `self` with `other` set when `on`, cleared otherwise.
    #[must_use]
    pub const fn with_if(self, other: Flags, on: bool) -> Flags {
        if on {
            Flags(self.0 | other.0)
        } else {
            Flags(self.0 & !other.0)
        }
    }
}

impl BitOr for Flags {
    type Output = Flags;

    fn bitor(self, rhs: Flags) -> Flags {
        self.with(rhs)
    }
}
