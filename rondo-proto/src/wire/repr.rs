//! [`Repr`]: a checked, high-level form of a Rondo packet, with `parse` and `emit`.

use crate::Psn;

use super::ack_block::{AckBlock, EXT_ACK_BLOCK, MAX_HEADER_LEN};
use super::extension::{emit_token, token_overhead, EXT_TOKEN, TOKEN_LEN};
use super::packet::{FEEDBACK_DUPLICATE, FEEDBACK_OF_PROBE};
use super::{Flags, Packet, PacketType, WireError, VERSION};

/// Fields of the common header a sender chooses (version, type and `header_words`
/// follow from the [`Body`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CommonRepr {
    /// Destination flow / QP number.
    pub flow: u32,
    /// DATA: the PSN. PROBE: the probe sequence number (a separate number space,
    /// the paper's "reserved PSN"). ACK/NAK: 0 by convention.
    pub psn: Psn,
    /// Logical path the packet is sent on.
    pub path: u16,
    /// Flags. For DATA, [`Repr::emit`] sets `FIRST` and `LAST` itself.
    pub flags: Flags,
    /// Sender's clock at transmission, ns (ACK/NAK: when the feedback was sent).
    pub timestamp_ns: u64,
}

/// DATA fields: which slice of which message the payload is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataRepr {
    /// Message identifier.
    pub msg_id: u64,
    /// Total message length in bytes (at least 1).
    pub msg_len: u64,
    /// Byte offset of this payload in the message.
    pub offset: u64,
    /// Payload bytes after the header (at least 1; not a header field, the rest of
    /// the datagram).
    pub payload_len: usize,
}

impl DataRepr {
    /// Checks that the payload is non-empty and fits in the message.
    pub fn check(&self) -> Result<(), WireError> {
        self.end().map(|_| ())
    }

    /// True when this packet starts its message.
    pub const fn is_first(&self) -> bool {
        self.offset == 0
    }

    /// True when this packet ends its message (`offset + payload_len == msg_len`).
    pub fn is_last(&self) -> bool {
        self.end() == Ok(self.msg_len)
    }

    /// `offset + payload_len`, after [`DataRepr::check`]'s checks.
    fn end(&self) -> Result<u64, WireError> {
        if self.payload_len == 0 {
            return Err(WireError::EmptyPayload);
        }
        u64::try_from(self.payload_len)
            .ok()
            .and_then(|len| self.offset.checked_add(len))
            .filter(|&end| end <= self.msg_len)
            .ok_or(WireError::InconsistentMessage {
                msg_len: self.msg_len,
                offset: self.offset,
                payload_len: self.payload_len,
            })
    }
}

/// PROBE fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeRepr {
    /// Zero bytes after the header, so a probe can be as large as a data packet.
    pub pad_len: usize,
}

/// ACK and NAK fields ("feedback").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FeedbackRepr {
    /// PSN (or probe number) of the packet this feedback is about.
    pub acked_psn: Psn,
    /// Receiver's next expected PSN: everything before it was received.
    pub cum_ack: Psn,
    /// Highest data PSN the receiver has seen.
    pub highest_psn: Psn,
    /// Path the acked packet arrived on.
    pub acked_path: u16,
    /// The acked packet was a probe (`acked_psn` is a probe number).
    pub of_probe: bool,
    /// The acked packet was a duplicate.
    pub duplicate: bool,
    /// `timestamp_ns` of the acked packet: RTT = now - echo (paper §4.3).
    pub echo_timestamp_ns: u64,
    /// Receiver's clock when the acked packet arrived: forward delay = rx - echo;
    /// the clock offset cancels between paths (paper §4.3).
    pub rx_timestamp_ns: u64,
}

impl FeedbackRepr {
    fn flags_byte(&self) -> u8 {
        let mut byte = 0;
        if self.of_probe {
            byte |= FEEDBACK_OF_PROBE;
        }
        if self.duplicate {
            byte |= FEEDBACK_DUPLICATE;
        }
        byte
    }
}

/// Why a receiver NAKed a data packet (dropped it, or took it out of order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NakReason {
    /// The reorder buffer was full.
    BufferFull = 1,
    /// The PSN was too far ahead of `cum_ack`.
    OutOfWindow = 2,
    /// PSN sequence error (RC go-back-N): the PSN was not the expected one and was
    /// dropped; `cum_ack` is the expected PSN, to resend from.
    SequenceError = 3,
    /// Out of order but kept (RC selective repeat, placed directly): the PSN is
    /// received (selectively acknowledged) and `cum_ack`, the expected PSN, is missing.
    OutOfOrder = 4,
}

impl TryFrom<u8> for NakReason {
    type Error = WireError;

    fn try_from(byte: u8) -> Result<NakReason, WireError> {
        match byte {
            1 => Ok(NakReason::BufferFull),
            2 => Ok(NakReason::OutOfWindow),
            3 => Ok(NakReason::SequenceError),
            4 => Ok(NakReason::OutOfOrder),
            other => Err(WireError::BadNakReason(other)),
        }
    }
}

/// The type-specific part of a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Body {
    /// A DATA packet.
    Data(DataRepr),
    /// A PROBE packet.
    Probe(ProbeRepr),
    /// An ACK.
    Ack(FeedbackRepr),
    /// A NAK and its reason.
    Nak(FeedbackRepr, NakReason),
}

/// A whole packet header, checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr {
    /// Common header fields.
    pub common: CommonRepr,
    /// Type-specific fields.
    pub body: Body,
}

impl Repr {
    /// Parses and checks every rule of the format (see [`WireError`] for the list).
    /// Works on unchecked packets too; never panics.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr, WireError> {
        Repr::parse_with_payload(packet, 0)
    }

    /// [`Repr::parse`] for a packet whose payload lies elsewhere: `packet` holds the
    /// header (and possibly the start of the payload) and `elsewhere` more payload
    /// bytes follow in another buffer (a datapath that received the payload in
    /// place, DESIGN.md "Receive placement").
    pub fn parse_with_payload<T: AsRef<[u8]>>(
        packet: &Packet<T>,
        elsewhere: usize,
    ) -> Result<Repr, WireError> {
        packet.check_len()?;
        let packet_type = packet.packet_type()?;
        let flags = packet.flags()?;
        let mut extensions = packet.extensions();
        let mut token_seen = false;
        while let Some(extension) = extensions.next() {
            let extension = extension?;
            if extension.kind == EXT_TOKEN {
                if token_seen || extension.value.len() != TOKEN_LEN {
                    let at = extensions.last_offset();
                    return Err(WireError::BadTokenExtension { at });
                }
                token_seen = true;
            } else if extension.kind == EXT_ACK_BLOCK {
                if packet_type != PacketType::Ack || AckBlock::parse(extension.value).is_none() {
                    let at = extensions.last_offset();
                    return Err(WireError::BadAckBlock { at });
                }
            } else if extension.is_critical() {
                // The token and ACK blocks are the extensions version 1 understands.
                return Err(WireError::UnknownCriticalExtension(extension.kind));
            }
        }
        let common = CommonRepr {
            flow: packet.flow(),
            psn: packet.psn(),
            path: packet.path(),
            flags,
            timestamp_ns: packet.timestamp_ns(),
        };
        // check_len: header_len <= buffer length.
        let after_header = packet.as_bytes().len() - packet.header_len() + elsewhere;
        let body = match packet_type {
            PacketType::Data => {
                let data = DataRepr {
                    msg_id: packet.msg_id(),
                    msg_len: packet.msg_len(),
                    offset: packet.offset(),
                    payload_len: after_header,
                };
                data.check()?;
                if flags.contains(Flags::FIRST) != data.is_first()
                    || flags.contains(Flags::LAST) != data.is_last()
                {
                    return Err(WireError::FirstLastMismatch);
                }
                Body::Data(data)
            }
            PacketType::Probe => Body::Probe(ProbeRepr {
                pad_len: after_header,
            }),
            PacketType::Ack | PacketType::Nak => {
                if after_header != 0 {
                    return Err(WireError::TrailingBytes(after_header));
                }
                let feedback_flags = packet.feedback_flags();
                if feedback_flags & !(FEEDBACK_OF_PROBE | FEEDBACK_DUPLICATE) != 0 {
                    return Err(WireError::ReservedFlags(feedback_flags));
                }
                let feedback = FeedbackRepr {
                    acked_psn: packet.acked_psn(),
                    cum_ack: packet.cum_ack(),
                    highest_psn: packet.highest_psn(),
                    acked_path: packet.acked_path(),
                    of_probe: packet.of_probe(),
                    duplicate: packet.duplicate(),
                    echo_timestamp_ns: packet.echo_timestamp_ns(),
                    rx_timestamp_ns: packet.rx_timestamp_ns(),
                };
                match (packet_type, packet.nak_reason()) {
                    (PacketType::Ack, 0) => Body::Ack(feedback),
                    (PacketType::Ack, reason) => return Err(WireError::BadNakReason(reason)),
                    (_, reason) => Body::Nak(feedback, NakReason::try_from(reason)?),
                }
            }
        };
        Ok(Repr { common, body })
    }

    /// The packet type of the body.
    pub const fn packet_type(&self) -> PacketType {
        match self.body {
            Body::Data(_) => PacketType::Data,
            Body::Probe(_) => PacketType::Probe,
            Body::Ack(_) => PacketType::Ack,
            Body::Nak(..) => PacketType::Nak,
        }
    }

    /// Bytes before the payload as [`Repr::emit`] writes it (no extensions): the
    /// type's fixed header length.
    pub const fn header_len(&self) -> usize {
        self.packet_type().fixed_header_len()
    }

    /// Bytes before the payload as [`Repr::emit_with_token`] writes it with `token`.
    pub const fn header_len_with_token(&self, token: Option<u64>) -> usize {
        self.header_len() + token_overhead(token)
    }

    /// Bytes of the whole datagram [`Repr::emit_with_token`] writes with `token`.
    pub const fn buffer_len_with_token(&self, token: Option<u64>) -> usize {
        self.buffer_len().saturating_add(token_overhead(token))
    }

    /// Bytes of the whole datagram: header plus DATA payload or PROBE padding.
    pub const fn buffer_len(&self) -> usize {
        let after_header = match self.body {
            Body::Data(data) => data.payload_len,
            Body::Probe(probe) => probe.pad_len,
            Body::Ack(_) | Body::Nak(..) => 0,
        };
        self.header_len().saturating_add(after_header)
    }

    /// Writes the header (and the zero padding of a probe) at the start of `buf` and
    /// returns `header_len()`. For DATA the caller then writes `payload_len` bytes at
    /// `buf[header_len..]`; the datagram is `buf[..buffer_len()]`.
    ///
    /// For DATA, `FIRST` and `LAST` are set from `offset`, `payload_len` and
    /// `msg_len` whatever `common.flags` says, so the output always parses back.
    ///
    /// Errors: [`WireError::BufferTooSmall`] when `buf` is shorter than
    /// `buffer_len()`; for DATA, [`WireError::EmptyPayload`] or
    /// [`WireError::InconsistentMessage`] when the payload does not fit the message.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        self.emit_with_token(buf, None)
    }

    /// [`Repr::emit`], with the connection token extension ([`EXT_TOKEN`]) after the
    /// fixed header when `token` is set. Returns `header_len_with_token(token)`; the
    /// DATA payload (or PROBE padding) follows it and the datagram is
    /// `buf[..buffer_len_with_token(token)]`.
    ///
    /// Errors: as [`Repr::emit`], with `buffer_len_with_token(token)` as the needed
    /// length.
    pub fn emit_with_token(&self, buf: &mut [u8], token: Option<u64>) -> Result<usize, WireError> {
        self.emit_into(buf, token, self.buffer_len_with_token(token))
    }

    /// [`Repr::emit_with_token`] into a buffer that need only hold what is written:
    /// the header (`header_len_with_token(token)` bytes; a probe's padding too),
    /// for a DATA payload that follows elsewhere (a second iovec, a gather entry)
    /// or is copied in after it.
    ///
    /// Errors: as [`Repr::emit_with_token`], with the header's length as the needed
    /// length.
    pub fn emit_header_with_token(
        &self,
        buf: &mut [u8],
        token: Option<u64>,
    ) -> Result<usize, WireError> {
        let needed = match self.body {
            Body::Probe(_) => self.buffer_len_with_token(token),
            Body::Data(_) | Body::Ack(_) | Body::Nak(..) => self.header_len_with_token(token),
        };
        self.emit_into(buf, token, needed)
    }

    /// [`Repr::emit_with_token`] of an ACK with `area_len` more header bytes after
    /// the token, filled with pads, for the caller to write extensions into
    /// ([`emit_ack_block`](super::emit_ack_block)): the header is
    /// `buf[..returned length]` and the area its last `area_len` bytes.
    ///
    /// Errors: [`WireError::BadHeaderLength`] when the body is not an ACK, `area_len`
    /// is not a multiple of 4 or the header would be longer than
    /// [`MAX_HEADER_LEN`]; [`WireError::BufferTooSmall`] as [`Repr::emit`].
    pub fn emit_ack_with_area(
        &self,
        buf: &mut [u8],
        token: Option<u64>,
        area_len: usize,
    ) -> Result<usize, WireError> {
        let start = self.header_len_with_token(token);
        let header_len = start + area_len;
        if !matches!(self.body, Body::Ack(_)) || area_len % 4 != 0 || header_len > MAX_HEADER_LEN {
            return Err(WireError::BadHeaderLength {
                words: (header_len / 4).min(255) as u8,
                min: start,
                available: MAX_HEADER_LEN,
            });
        }
        self.emit_into(buf, token, header_len)?;
        let mut packet = Packet::new_unchecked(&mut buf[..header_len]);
        packet.set_header_words((header_len / 4) as u8);
        buf[start..header_len].fill(super::EXT_PAD);
        Ok(header_len)
    }

    fn emit_into(
        &self,
        buf: &mut [u8],
        token: Option<u64>,
        needed: usize,
    ) -> Result<usize, WireError> {
        let got = buf.len();
        if got < needed {
            return Err(WireError::BufferTooSmall { needed, got });
        }
        let mut flags = self.common.flags;
        if let Body::Data(data) = &self.body {
            data.check()?;
            flags = flags
                .with_if(Flags::FIRST, data.is_first())
                .with_if(Flags::LAST, data.is_last());
        }
        let fixed_len = self.header_len();
        let header_len = self.header_len_with_token(token);
        let mut packet = Packet::new_unchecked(&mut buf[..needed]);
        packet.set_version(VERSION);
        packet.set_packet_type(self.packet_type());
        packet.set_flags(flags);
        // Fixed header and token lengths are multiples of 4, at most 68 bytes in all.
        packet.set_header_words((header_len / 4) as u8);
        packet.set_path(self.common.path);
        packet.set_reserved(0);
        packet.set_flow(self.common.flow);
        packet.set_psn(self.common.psn);
        packet.set_timestamp_ns(self.common.timestamp_ns);
        match self.body {
            Body::Data(data) => {
                packet.set_msg_id(data.msg_id);
                packet.set_msg_len(data.msg_len);
                packet.set_offset(data.offset);
            }
            Body::Probe(_) => packet.payload_mut().fill(0),
            Body::Ack(feedback) => emit_feedback(&mut packet, &feedback, 0),
            Body::Nak(feedback, reason) => emit_feedback(&mut packet, &feedback, reason as u8),
        }
        if let Some(token) = token {
            emit_token(&mut buf[fixed_len..header_len], token);
        }
        Ok(header_len)
    }

    /// The whole datagram in a new buffer: the header as [`Repr::emit_with_token`]
    /// writes it with `token`, then `payload`, which must be exactly the DATA payload
    /// (`payload_len` bytes; empty for the other types). For tools and tests that
    /// build, forge or replay packets; the engine writes into the caller's buffer.
    ///
    /// Errors: [`WireError::PayloadLength`] when `payload` has another length; as
    /// [`Repr::emit`] otherwise.
    pub fn to_datagram(&self, payload: &[u8], token: Option<u64>) -> Result<Vec<u8>, WireError> {
        let expected = match self.body {
            Body::Data(data) => data.payload_len,
            Body::Probe(_) | Body::Ack(_) | Body::Nak(..) => 0,
        };
        if payload.len() != expected {
            return Err(WireError::PayloadLength {
                expected,
                got: payload.len(),
            });
        }
        let mut buf = vec![0; self.buffer_len_with_token(token)];
        let header_len = self.emit_with_token(&mut buf, token)?;
        buf[header_len..header_len + payload.len()].copy_from_slice(payload);
        Ok(buf)
    }
}

fn emit_feedback(packet: &mut Packet<&mut [u8]>, feedback: &FeedbackRepr, nak_reason: u8) {
    packet.set_acked_psn(feedback.acked_psn);
    packet.set_cum_ack(feedback.cum_ack);
    packet.set_highest_psn(feedback.highest_psn);
    packet.set_acked_path(feedback.acked_path);
    packet.set_feedback_flags(feedback.flags_byte());
    packet.set_nak_reason(nak_reason);
    packet.set_echo_timestamp_ns(feedback.echo_timestamp_ns);
    packet.set_rx_timestamp_ns(feedback.rx_timestamp_ns);
}
