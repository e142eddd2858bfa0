//! Rondo's wire format, version 1: views over bytes in the smoltcp style.
//!
//! [`Packet`] reads and writes header fields in place; [`Repr`] is the checked,
//! high-level form with [`Repr::parse`] and [`Repr::emit`]; [`parse`] does both
//! steps for a received datagram. The layout, the versioning rules and what a
//! receiver does with each [`WireError`] are in `docs/wire.md`.
//!
//! ```
//! use rondo_proto::wire::{self, Body, CommonRepr, DataRepr, Flags, Repr};
//! use rondo_proto::Psn;
//!
//! let repr = Repr {
//!     common: CommonRepr { flow: 7, psn: Psn(42), path: 3, flags: Flags::empty(), timestamp_ns: 1_000 },
//!     body: Body::Data(DataRepr { msg_id: 1, msg_len: 4, offset: 0, payload_len: 4 }),
//! };
//! let mut buf = [0u8; 1500];
//! let header_len = repr.emit(&mut buf)?;
//! buf[header_len..repr.buffer_len()].copy_from_slice(b"ping");
//!
//! let (parsed, payload) = wire::parse(&buf[..repr.buffer_len()])?;
//! assert_eq!(payload, b"ping");
//! assert!(parsed.common.flags.contains(Flags::FIRST | Flags::LAST)); // set by emit
//! # Ok::<(), wire::WireError>(())
//! ```

mod ack_block;
mod error;
mod extension;
mod flags;
mod packet;
mod repr;
#[cfg(test)]
mod tests;

pub use ack_block::{
    ack_block_len, emit_ack_block, AckBlock, ACK_BLOCK_FIXED_LEN, ACK_BLOCK_MAX_PSNS,
    EXT_ACK_BLOCK, MAX_HEADER_LEN,
};
pub use error::WireError;
pub use extension::{
    token_overhead, Extension, Extensions, EXT_CRITICAL, EXT_PAD, EXT_TOKEN, TOKEN_EXT_LEN,
    TOKEN_LEN,
};
pub use flags::Flags;
pub use packet::{Packet, PacketType, FEEDBACK_DUPLICATE, FEEDBACK_OF_PROBE};
pub use repr::{Body, CommonRepr, DataRepr, FeedbackRepr, NakReason, ProbeRepr, Repr};

/// The version this module speaks; any other version byte is rejected.
pub const VERSION: u8 = 1;
/// Length of the common header, in every packet.
pub const COMMON_HEADER_LEN: usize = 24;
/// Fixed header length of a DATA packet.
pub const DATA_HEADER_LEN: usize = 48;
/// Fixed header length of a PROBE packet (the common header only).
pub const PROBE_HEADER_LEN: usize = 24;
/// Fixed header length of an ACK or NAK.
pub const FEEDBACK_HEADER_LEN: usize = 56;

/// Checks and parses a datagram whose header is `header` (exactly `header_words *
/// 4` bytes) and whose `payload_len` payload bytes were received elsewhere. Never
/// panics.
pub fn parse_split(header: &[u8], payload_len: usize) -> Result<Repr, WireError> {
    let packet = Packet::new_unchecked(header);
    packet.check_len()?;
    if packet.header_len() != header.len() {
        return Err(WireError::BadHeaderLength {
            words: packet.header_words(),
            min: header.len(),
            available: header.len(),
        });
    }
    Repr::parse_with_payload(&packet, payload_len)
}

/// Checks and parses a whole datagram: the [`Repr`] and the payload (empty for all
/// but DATA). Never panics.
pub fn parse(datagram: &[u8]) -> Result<(Repr, &[u8]), WireError> {
    let packet = Packet::new_unchecked(datagram);
    let repr = Repr::parse(&packet)?;
    let payload = match repr.body {
        Body::Data(_) => datagram.get(packet.header_len()..).unwrap_or(&[]),
        Body::Probe(_) | Body::Ack(_) | Body::Nak(..) => &[],
    };
    Ok((repr, payload))
}
