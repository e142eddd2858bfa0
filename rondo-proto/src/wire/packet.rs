//! [`Packet`]: a read/write view of a Rondo header over a byte buffer.

use crate::Psn;

use super::extension::Extensions;
use super::{
    Flags, WireError, COMMON_HEADER_LEN, DATA_HEADER_LEN, FEEDBACK_HEADER_LEN, PROBE_HEADER_LEN,
    VERSION,
};

/// Byte positions of the header fields (see `docs/wire.md`).
mod field {
    pub type Field = core::ops::Range<usize>;

    pub const VERSION: usize = 0;
    pub const TYPE: usize = 1;
    pub const FLAGS: usize = 2;
    pub const HEADER_WORDS: usize = 3;
    pub const PATH: Field = 4..6;
    pub const RESERVED: Field = 6..8;
    pub const FLOW: Field = 8..12;
    pub const PSN: Field = 12..16;
    pub const TIMESTAMP: Field = 16..24;

    // DATA fixed part.
    pub const MSG_ID: Field = 24..32;
    pub const MSG_LEN: Field = 32..40;
    pub const OFFSET: Field = 40..48;

    // ACK / NAK fixed part.
    pub const ACKED_PSN: Field = 24..28;
    pub const CUM_ACK: Field = 28..32;
    pub const HIGHEST_PSN: Field = 32..36;
    pub const ACKED_PATH: Field = 36..38;
    pub const FEEDBACK_FLAGS: usize = 38;
    pub const NAK_REASON: usize = 39;
    pub const ECHO_TIMESTAMP: Field = 40..48;
    pub const RX_TIMESTAMP: Field = 48..56;
}

/// Packet type, the common header's byte 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketType {
    /// A slice of a message.
    Data = 1,
    /// A capacity probe: no payload, optional padding (paper §4.2.2).
    Probe = 2,
    /// Positive per-packet feedback.
    Ack = 3,
    /// Negative feedback: the packet was dropped by the receiver.
    Nak = 4,
}

impl PacketType {
    /// Length of the common header plus this type's fixed part, in bytes.
    pub const fn fixed_header_len(self) -> usize {
        match self {
            PacketType::Data => DATA_HEADER_LEN,
            PacketType::Probe => PROBE_HEADER_LEN,
            PacketType::Ack | PacketType::Nak => FEEDBACK_HEADER_LEN,
        }
    }
}

impl TryFrom<u8> for PacketType {
    type Error = WireError;

    fn try_from(byte: u8) -> Result<PacketType, WireError> {
        match byte {
            1 => Ok(PacketType::Data),
            2 => Ok(PacketType::Probe),
            3 => Ok(PacketType::Ack),
            4 => Ok(PacketType::Nak),
            other => Err(WireError::UnknownType(other)),
        }
    }
}

/// `ACK`/`NAK` `feedback_flags` bit 0: the acked packet was a probe.
pub const FEEDBACK_OF_PROBE: u8 = 0x01;
/// `ACK`/`NAK` `feedback_flags` bit 1: the acked packet was a duplicate.
pub const FEEDBACK_DUPLICATE: u8 = 0x02;

/// A Rondo header over a buffer, smoltcp style.
///
/// Getters read the field straight from the buffer. After [`Packet::new_checked`]
/// the common accessors, the accessors of the packet's own type, [`Packet::payload`]
/// and [`Packet::extensions`] never panic. On a [`Packet::new_unchecked`] view, or
/// when reading a field of another packet type, a getter or setter panics if its
/// field lies past the end of the buffer. Semantic checks (flags, DATA consistency,
/// NAK reasons, extensions) belong to [`Repr::parse`](super::Repr::parse).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps `buffer` without any check.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps `buffer` after [`Packet::check_len`].
    pub fn new_checked(buffer: T) -> Result<Packet<T>, WireError> {
        let packet = Packet::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Checks that every fixed field of the packet's type lies in the buffer and that
    /// `header_words` is in range. Since the fixed length depends on the type, and
    /// the type's meaning on the version, this also checks both.
    ///
    /// Errors, in the order they are checked: [`WireError::Truncated`] (shorter than
    /// the common header), [`WireError::BadVersion`], [`WireError::UnknownType`],
    /// [`WireError::Truncated`] (shorter than the type's fixed header),
    /// [`WireError::BadHeaderLength`].
    pub fn check_len(&self) -> Result<(), WireError> {
        let len = self.buffer.as_ref().len();
        if len < COMMON_HEADER_LEN {
            return Err(WireError::Truncated {
                needed: COMMON_HEADER_LEN,
                got: len,
            });
        }
        if self.version() != VERSION {
            return Err(WireError::BadVersion(self.version()));
        }
        let fixed = self.packet_type()?.fixed_header_len();
        if len < fixed {
            return Err(WireError::Truncated {
                needed: fixed,
                got: len,
            });
        }
        let header_len = self.header_len();
        if header_len < fixed || header_len > len {
            return Err(WireError::BadHeaderLength {
                words: self.header_words(),
                min: fixed,
                available: len,
            });
        }
        Ok(())
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The whole wrapped buffer.
    pub fn as_bytes(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// `version` (byte 0).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION]
    }

    /// The raw `type` byte (byte 1).
    pub fn type_byte(&self) -> u8 {
        self.buffer.as_ref()[field::TYPE]
    }

    /// The packet type; `Err(UnknownType)` for an undefined type byte.
    pub fn packet_type(&self) -> Result<PacketType, WireError> {
        PacketType::try_from(self.type_byte())
    }

    /// The raw `flags` byte (byte 2), reserved bits included.
    pub fn flags_byte(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }

    /// The flags; `Err(ReservedFlags)` when a reserved bit is set.
    pub fn flags(&self) -> Result<Flags, WireError> {
        Flags::from_bits(self.flags_byte())
    }

    /// `header_words` (byte 3): header length in 4-byte words.
    pub fn header_words(&self) -> u8 {
        self.buffer.as_ref()[field::HEADER_WORDS]
    }

    /// Header length in bytes (`header_words * 4`), extensions included.
    pub fn header_len(&self) -> usize {
        usize::from(self.header_words()) * 4
    }

    /// `path`: logical path the packet was sent on.
    pub fn path(&self) -> u16 {
        be_u16(self.buffer.as_ref(), field::PATH)
    }

    /// The reserved 16 bits after `path` (zero from version-1 senders).
    pub fn reserved(&self) -> u16 {
        be_u16(self.buffer.as_ref(), field::RESERVED)
    }

    /// `flow`: destination flow / QP number.
    pub fn flow(&self) -> u32 {
        be_u32(self.buffer.as_ref(), field::FLOW)
    }

    /// `psn`: DATA PSN, or PROBE sequence number; 0 in ACK/NAK.
    pub fn psn(&self) -> Psn {
        Psn(be_u32(self.buffer.as_ref(), field::PSN))
    }

    /// `timestamp_ns`: sender's clock at transmission.
    pub fn timestamp_ns(&self) -> u64 {
        be_u64(self.buffer.as_ref(), field::TIMESTAMP)
    }

    /// DATA `msg_id`.
    pub fn msg_id(&self) -> u64 {
        be_u64(self.buffer.as_ref(), field::MSG_ID)
    }

    /// DATA `msg_len`: total message length in bytes.
    pub fn msg_len(&self) -> u64 {
        be_u64(self.buffer.as_ref(), field::MSG_LEN)
    }

    /// DATA `offset`: byte offset of the payload in the message.
    pub fn offset(&self) -> u64 {
        be_u64(self.buffer.as_ref(), field::OFFSET)
    }

    /// ACK/NAK `acked_psn`: PSN (or probe number) of the packet this is about.
    pub fn acked_psn(&self) -> Psn {
        Psn(be_u32(self.buffer.as_ref(), field::ACKED_PSN))
    }

    /// ACK/NAK `cum_ack`: the receiver's next expected PSN.
    pub fn cum_ack(&self) -> Psn {
        Psn(be_u32(self.buffer.as_ref(), field::CUM_ACK))
    }

    /// ACK/NAK `highest_psn`: highest data PSN the receiver has seen.
    pub fn highest_psn(&self) -> Psn {
        Psn(be_u32(self.buffer.as_ref(), field::HIGHEST_PSN))
    }

    /// ACK/NAK `acked_path`: path the acked packet arrived on.
    pub fn acked_path(&self) -> u16 {
        be_u16(self.buffer.as_ref(), field::ACKED_PATH)
    }

    /// ACK/NAK raw `feedback_flags` byte, reserved bits included.
    pub fn feedback_flags(&self) -> u8 {
        self.buffer.as_ref()[field::FEEDBACK_FLAGS]
    }

    /// ACK/NAK: the acked packet was a probe.
    pub fn of_probe(&self) -> bool {
        self.feedback_flags() & FEEDBACK_OF_PROBE != 0
    }

    /// ACK/NAK: the acked packet was a duplicate.
    pub fn duplicate(&self) -> bool {
        self.feedback_flags() & FEEDBACK_DUPLICATE != 0
    }

    /// ACK/NAK raw `nak_reason` byte (0 in an ACK).
    pub fn nak_reason(&self) -> u8 {
        self.buffer.as_ref()[field::NAK_REASON]
    }

    /// ACK/NAK `echo_timestamp_ns`: the acked packet's `timestamp_ns`.
    pub fn echo_timestamp_ns(&self) -> u64 {
        be_u64(self.buffer.as_ref(), field::ECHO_TIMESTAMP)
    }

    /// ACK/NAK `rx_timestamp_ns`: receiver's clock when the acked packet arrived.
    pub fn rx_timestamp_ns(&self) -> u64 {
        be_u64(self.buffer.as_ref(), field::RX_TIMESTAMP)
    }

    /// The bytes after the header: DATA payload, PROBE padding, nothing for a
    /// well-formed ACK/NAK. Empty when `header_words` points past the buffer.
    pub fn payload(&self) -> &[u8] {
        let data = self.buffer.as_ref();
        data.get(self.header_len()..).unwrap_or(&[])
    }

    /// The TLV extensions between the type's fixed part and `header_len()`, pads
    /// skipped. Empty for an unknown type or an out-of-range `header_words`.
    pub fn extensions(&self) -> Extensions<'_> {
        let data = self.buffer.as_ref();
        let area = self
            .packet_type()
            .ok()
            .map(PacketType::fixed_header_len)
            .and_then(|start| Some((start, data.get(start..self.header_len())?)));
        match area {
            Some((start, area)) => Extensions::new(area, start),
            None => Extensions::new(&[], 0),
        }
    }
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// The ACK blocks of a coalesced ACK ([`EXT_ACK_BLOCK`](super::EXT_ACK_BLOCK)), in
    /// header order. Malformed blocks are skipped: after a successful
    /// [`Repr::parse`](super::Repr::parse) there are none.
    pub fn ack_blocks(&self) -> impl Iterator<Item = super::AckBlock<'_>> {
        self.extensions().filter_map(|e| {
            let e = e.ok()?;
            if e.kind == super::EXT_ACK_BLOCK {
                super::AckBlock::parse(e.value)
            } else {
                None
            }
        })
    }

    /// The connection token, from the first well-formed [`EXT_TOKEN`](super::EXT_TOKEN)
    /// extension (8 value bytes), or `None` when the header has none.
    /// [`Repr::parse`](super::Repr::parse) rejects headers with a malformed or second
    /// token, so after a successful parse this is the one token.
    pub fn token(&self) -> Option<u64> {
        self.extensions().find_map(|e| {
            let e = e.ok()?;
            let value: [u8; super::TOKEN_LEN] = e.value.try_into().ok()?;
            (e.kind == super::EXT_TOKEN).then(|| u64::from_be_bytes(value))
        })
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets `version`.
    pub fn set_version(&mut self, version: u8) {
        self.buffer.as_mut()[field::VERSION] = version;
    }

    /// Sets the `type` byte.
    pub fn set_packet_type(&mut self, packet_type: PacketType) {
        self.set_type_byte(packet_type as u8);
    }

    /// Sets the raw `type` byte (tests and fuzzing use undefined values).
    pub fn set_type_byte(&mut self, byte: u8) {
        self.buffer.as_mut()[field::TYPE] = byte;
    }

    /// Sets `flags`.
    pub fn set_flags(&mut self, flags: Flags) {
        self.set_flags_byte(flags.bits());
    }

    /// Sets the raw `flags` byte, reserved bits included.
    pub fn set_flags_byte(&mut self, byte: u8) {
        self.buffer.as_mut()[field::FLAGS] = byte;
    }

    /// Sets `header_words`.
    pub fn set_header_words(&mut self, words: u8) {
        self.buffer.as_mut()[field::HEADER_WORDS] = words;
    }

    /// Sets `path`.
    pub fn set_path(&mut self, path: u16) {
        put(self.buffer.as_mut(), field::PATH, &path.to_be_bytes());
    }

    /// Sets the reserved 16 bits (version-1 senders write 0).
    pub fn set_reserved(&mut self, reserved: u16) {
        put(
            self.buffer.as_mut(),
            field::RESERVED,
            &reserved.to_be_bytes(),
        );
    }

    /// Sets `flow`.
    pub fn set_flow(&mut self, flow: u32) {
        put(self.buffer.as_mut(), field::FLOW, &flow.to_be_bytes());
    }

    /// Sets `psn`.
    pub fn set_psn(&mut self, psn: Psn) {
        put(self.buffer.as_mut(), field::PSN, &psn.0.to_be_bytes());
    }

    /// Sets `timestamp_ns`.
    pub fn set_timestamp_ns(&mut self, ns: u64) {
        put(self.buffer.as_mut(), field::TIMESTAMP, &ns.to_be_bytes());
    }

    /// Sets DATA `msg_id`.
    pub fn set_msg_id(&mut self, msg_id: u64) {
        put(self.buffer.as_mut(), field::MSG_ID, &msg_id.to_be_bytes());
    }

    /// Sets DATA `msg_len`.
    pub fn set_msg_len(&mut self, msg_len: u64) {
        put(self.buffer.as_mut(), field::MSG_LEN, &msg_len.to_be_bytes());
    }

    /// Sets DATA `offset`.
    pub fn set_offset(&mut self, offset: u64) {
        put(self.buffer.as_mut(), field::OFFSET, &offset.to_be_bytes());
    }

    /// Sets ACK/NAK `acked_psn`.
    pub fn set_acked_psn(&mut self, psn: Psn) {
        put(self.buffer.as_mut(), field::ACKED_PSN, &psn.0.to_be_bytes());
    }

    /// Sets ACK/NAK `cum_ack`.
    pub fn set_cum_ack(&mut self, psn: Psn) {
        put(self.buffer.as_mut(), field::CUM_ACK, &psn.0.to_be_bytes());
    }

    /// Sets ACK/NAK `highest_psn`.
    pub fn set_highest_psn(&mut self, psn: Psn) {
        put(
            self.buffer.as_mut(),
            field::HIGHEST_PSN,
            &psn.0.to_be_bytes(),
        );
    }

    /// Sets ACK/NAK `acked_path`.
    pub fn set_acked_path(&mut self, path: u16) {
        put(self.buffer.as_mut(), field::ACKED_PATH, &path.to_be_bytes());
    }

    /// Sets the raw ACK/NAK `feedback_flags` byte ([`FEEDBACK_OF_PROBE`],
    /// [`FEEDBACK_DUPLICATE`]).
    pub fn set_feedback_flags(&mut self, byte: u8) {
        self.buffer.as_mut()[field::FEEDBACK_FLAGS] = byte;
    }

    /// Sets the raw ACK/NAK `nak_reason` byte.
    pub fn set_nak_reason(&mut self, byte: u8) {
        self.buffer.as_mut()[field::NAK_REASON] = byte;
    }

    /// Sets ACK/NAK `echo_timestamp_ns`.
    pub fn set_echo_timestamp_ns(&mut self, ns: u64) {
        put(
            self.buffer.as_mut(),
            field::ECHO_TIMESTAMP,
            &ns.to_be_bytes(),
        );
    }

    /// Sets ACK/NAK `rx_timestamp_ns`.
    pub fn set_rx_timestamp_ns(&mut self, ns: u64) {
        put(self.buffer.as_mut(), field::RX_TIMESTAMP, &ns.to_be_bytes());
    }

    /// The bytes after the header, to write a DATA payload into. Empty when
    /// `header_words` points past the buffer.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let start = self.header_len();
        self.buffer.as_mut().get_mut(start..).unwrap_or(&mut [])
    }
}

#[inline]
fn be_u16(data: &[u8], f: field::Field) -> u16 {
    let mut bytes = [0; 2];
    bytes.copy_from_slice(&data[f]);
    u16::from_be_bytes(bytes)
}

#[inline]
fn be_u32(data: &[u8], f: field::Field) -> u32 {
    let mut bytes = [0; 4];
    bytes.copy_from_slice(&data[f]);
    u32::from_be_bytes(bytes)
}

#[inline]
fn be_u64(data: &[u8], f: field::Field) -> u64 {
    let mut bytes = [0; 8];
    bytes.copy_from_slice(&data[f]);
    u64::from_be_bytes(bytes)
}

#[inline]
fn put(data: &mut [u8], f: field::Field, bytes: &[u8]) {
    data[f].copy_from_slice(bytes);
}
