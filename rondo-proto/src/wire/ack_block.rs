//! ACK blocks (extension [`EXT_ACK_BLOCK`]): the further packets a coalesced ACK
//! acknowledges, one block per path (docs/wire.md, "ACK blocks").
//!
//! The ACK's fixed part acknowledges one packet as always; each block adds data
//! packets that arrived on one path, with the echoed send time and the arrival
//! time of the block's newest packet (for one RTT and forward-delay sample) and
//! how many of them arrived CE-marked. The receiver puts only first
//! transmissions that it accepted into blocks, so every block PSN counts as
//! delivered by its own ACK; retransmissions, duplicates, probes and refusals get
//! an ACK or NAK of their own.

use super::extension::{EXT_CRITICAL, EXT_PAD};
use super::WireError;
use crate::Psn;

/// Extension type 0x83 (critical): an ACK block. A receiver that does not know it
/// would count one packet where the ACK acknowledges several, so it must drop
/// the ACK instead.
pub const EXT_ACK_BLOCK: u8 = EXT_CRITICAL | 0x03;
/// Value bytes of a block before its PSNs: path (2), CE count (1), reserved (1),
/// echoed send time (8) and arrival time (8) of the newest packet.
pub const ACK_BLOCK_FIXED_LEN: usize = 20;
/// The most PSNs one block holds (its value is at most 255 bytes).
pub const ACK_BLOCK_MAX_PSNS: usize = (255 - ACK_BLOCK_FIXED_LEN) / 4;
/// The longest header `header_words` can describe, in bytes.
pub const MAX_HEADER_LEN: usize = 255 * 4;

/// Header bytes a block of `psns` PSNs takes: type, length, fixed part and PSNs.
pub const fn ack_block_len(psns: usize) -> usize {
    2 + ACK_BLOCK_FIXED_LEN + 4 * psns
}

/// One ACK block, read from a header ([`Packet::ack_blocks`](super::Packet::ack_blocks)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckBlock<'a> {
    /// Path the block's packets arrived on.
    pub path: u16,
    /// How many of them arrived CE-marked (at most [`AckBlock::len`]).
    pub ce_count: u8,
    /// `timestamp_ns` of the newest packet (the first PSN), echoed.
    pub echo_timestamp_ns: u64,
    /// Receiver's clock when the newest packet arrived.
    pub rx_timestamp_ns: u64,
    psns: &'a [u8],
}

impl<'a> AckBlock<'a> {
    /// Checks an extension value: at least one PSN, whole PSNs, the reserved byte
    /// 0, no more CE marks than packets. Never panics.
    pub(super) fn parse(value: &'a [u8]) -> Option<AckBlock<'a>> {
        let psns = value.get(ACK_BLOCK_FIXED_LEN..)?;
        if psns.is_empty() || psns.len() % 4 != 0 || value[3] != 0 {
            return None;
        }
        let block = AckBlock {
            path: u16::from_be_bytes([value[0], value[1]]),
            ce_count: value[2],
            echo_timestamp_ns: u64::from_be_bytes(value[4..12].try_into().ok()?),
            rx_timestamp_ns: u64::from_be_bytes(value[12..20].try_into().ok()?),
            psns,
        };
        (usize::from(block.ce_count) <= block.len()).then_some(block)
    }

    /// Number of packets the block acknowledges (at least 1).
    pub fn len(&self) -> usize {
        self.psns.len() / 4
    }

    /// Always false: a block acknowledges at least one packet.
    pub fn is_empty(&self) -> bool {
        self.psns.is_empty()
    }

    /// The acknowledged PSNs; the first is the newest packet, the one the
    /// timestamps belong to.
    pub fn psns(&self) -> impl ExactSizeIterator<Item = Psn> + 'a {
        self.psns
            .chunks_exact(4)
            .map(|b| Psn(u32::from_be_bytes([b[0], b[1], b[2], b[3]])))
    }
}

/// Writes one block into the start of `area` (at least [`ack_block_len`] of the
/// PSNs' count bytes) and returns the bytes written. `psns` starts with the
/// newest packet's PSN and holds 1 to [`ACK_BLOCK_MAX_PSNS`] PSNs.
pub fn emit_ack_block(
    area: &mut [u8],
    path: u16,
    ce_count: u8,
    echo_timestamp_ns: u64,
    rx_timestamp_ns: u64,
    psns: impl ExactSizeIterator<Item = Psn>,
) -> Result<usize, WireError> {
    let n = psns.len();
    let len = ack_block_len(n);
    if n == 0 || n > ACK_BLOCK_MAX_PSNS || usize::from(ce_count) > n {
        return Err(WireError::BadAckBlock { at: 0 });
    }
    let got = area.len();
    let area = area
        .get_mut(..len)
        .ok_or(WireError::BufferTooSmall { needed: len, got })?;
    area[0] = EXT_ACK_BLOCK;
    area[1] = (len - 2) as u8;
    area[2..4].copy_from_slice(&path.to_be_bytes());
    area[4] = ce_count;
    area[5] = EXT_PAD;
    area[6..14].copy_from_slice(&echo_timestamp_ns.to_be_bytes());
    area[14..22].copy_from_slice(&rx_timestamp_ns.to_be_bytes());
    for (slot, psn) in area[22..].chunks_exact_mut(4).zip(psns) {
        slot.copy_from_slice(&psn.0.to_be_bytes());
    }
    Ok(len)
}
