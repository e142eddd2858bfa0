//! Why a datagram was rejected, or why a header could not be written.

/// An error from parsing or emitting a Rondo packet.
///
/// A receiver counts each kind and drops the datagram; none of them is fatal to the
/// connection (see `docs/wire.md`, "Errors").
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum WireError {
    /// The datagram ends before a fixed header does.
    #[error("truncated packet: {got} bytes, the fixed header needs at least {needed}")]
    Truncated {
        /// Bytes the fixed header of this packet type needs.
        needed: usize,
        /// Bytes in the datagram.
        got: usize,
    },
    /// The version byte is not [`VERSION`](super::VERSION).
    #[error("unsupported wire version {0}, expected version 1")]
    BadVersion(u8),
    /// The type byte is not one of DATA (1), PROBE (2), ACK (3), NAK (4).
    #[error("unknown packet type {0}, expected 1 (DATA), 2 (PROBE), 3 (ACK) or 4 (NAK)")]
    UnknownType(u8),
    /// A reserved bit is set in `flags` (bits 4-7) or in `feedback_flags` (bits 2-7).
    /// Holds the whole flags byte.
    #[error("reserved flag bits set in {0:#04x}; only bits defined by version 1 may be set")]
    ReservedFlags(u8),
    /// `header_words * 4` is shorter than the type's fixed header or longer than the
    /// datagram.
    #[error(
        "header_words {words} ({} bytes) out of range: expected between {min} (the fixed header) and {available} (the datagram length) bytes",
        *words as usize * 4
    )]
    BadHeaderLength {
        /// The `header_words` field as received.
        words: u8,
        /// Fixed header length of the packet type, in bytes.
        min: usize,
        /// Bytes in the datagram.
        available: usize,
    },
    /// A DATA packet carries no payload; every DATA packet carries at least one byte.
    #[error("DATA packet with an empty payload; expected at least one payload byte")]
    EmptyPayload,
    /// A DATA packet's payload does not fit in its message:
    /// `offset + payload_len` overflows or exceeds `msg_len`.
    #[error("DATA payload of {payload_len} bytes at offset {offset} does not fit in a message of {msg_len} bytes")]
    InconsistentMessage {
        /// Total message length from the header.
        msg_len: u64,
        /// Offset of the payload in the message.
        offset: u64,
        /// Payload length of the packet.
        payload_len: usize,
    },
    /// A DATA packet's FIRST flag is not set exactly when `offset == 0`, or its LAST
    /// flag not exactly when the payload ends the message.
    #[error("DATA flags disagree with the offset: FIRST must be set iff offset == 0, LAST iff offset + payload_len == msg_len")]
    FirstLastMismatch,
    /// An ACK or NAK has bytes after its header; feedback carries no payload.
    #[error("{0} trailing bytes after an ACK/NAK header; feedback carries no payload")]
    TrailingBytes(usize),
    /// An ACK whose `nak_reason` is not 0, or a NAK whose reason is not 1 or 2.
    #[error(
        "bad nak_reason {0}: expected 0 in an ACK, 1 (BUFFER_FULL) or 2 (OUT_OF_WINDOW) in a NAK"
    )]
    BadNakReason(u8),
    /// A header extension of this type has the must-understand bit (0x80) set and
    /// this receiver does not know it.
    #[error("unknown must-understand header extension type {0:#04x}; upgrade the receiver")]
    UnknownCriticalExtension(u8),
    /// A connection-token extension whose value is not 8 bytes, or a second token
    /// extension in the same header.
    #[error("bad connection-token extension at byte {at}: a header carries at most one token of exactly 8 bytes")]
    BadTokenExtension {
        /// Offset in the datagram of the extension's type byte.
        at: usize,
    },
    /// An ACK block extension (0x83) that is malformed (no PSN, a partial PSN, a
    /// reserved byte set, more CE marks than packets) or not in an ACK.
    #[error("bad ACK block extension at byte {at}: a block belongs in an ACK and holds 1 to 58 whole PSNs, reserved byte 0, at most one CE mark per PSN")]
    BadAckBlock {
        /// Offset in the datagram of the extension's type byte.
        at: usize,
    },
    /// A header extension runs past the end of the header (`header_words * 4`).
    #[error("header extension at byte {at} runs past the end of the header")]
    MalformedExtension {
        /// Offset in the datagram of the extension's type byte.
        at: usize,
    },
    /// The payload given to [`Repr::to_datagram`](super::Repr::to_datagram) is not as
    /// long as the header says.
    #[error("payload of {got} bytes, the header says {expected}: pass exactly the DATA payload, and nothing for other packet types")]
    PayloadLength {
        /// Bytes the header announces: DATA `payload_len`, 0 for the other types.
        expected: usize,
        /// Bytes given.
        got: usize,
    },
    /// The buffer given to [`Repr::emit`](super::Repr::emit) is shorter than
    /// [`Repr::buffer_len`](super::Repr::buffer_len).
    #[error("buffer of {got} bytes too small, the packet needs {needed}")]
    BufferTooSmall {
        /// Bytes the packet needs.
        needed: usize,
        /// Bytes in the buffer.
        got: usize,
    },
}
