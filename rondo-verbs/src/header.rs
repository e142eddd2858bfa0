//! The verbs header at the start of every engine message (see `docs/verbs.md`).
//!
//! ```text
//!  0      1       2       3       4               8
//! +-------+-------+-------+-------+---------------+
//! |version|opcode |status | flags |      imm      |
//! +-------+-------+-------+-------+---------------+
//! |                  request id (u64)             |  8
//! +-----------------------------------------------+
//! |              remote address (u64)             | 16
//! +---------------+-------------------------------+
//! |  rkey (u32)   |        reserved (u32)         | 24
//! +---------------+-------------------------------+
//! |                 length (u64)                  | 32
//! +-----------------------------------------------+  40, then the payload
//! ```
//! Big-endian. `flags` bit 0: `imm` is present; bit 1: the request is solicited
//! (`IBV_SEND_SOLICITED`: its receive completion fires a solicited-only
//! notification).

use rondo_proto::{ExternalBytes, Message};
use std::sync::Arc;
use thiserror::Error;

/// Bytes of the header.
pub const HEADER_LEN: usize = 40;
/// The only version understood.
pub const VERSION: u8 = 1;

/// Message kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MsgOp {
    Send = 1,
    Write = 2,
    ReadReq = 3,
    ReadResp = 4,
    Ack = 5,
}

/// Status carried by `Ack` and `ReadResp` (the responder's verdict).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AckStatus {
    Ok = 0,
    Rnr = 1,
    RemAccess = 2,
    RemInvReq = 3,
    RemOp = 4,
}

/// A parsed header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    pub op: MsgOp,
    pub status: AckStatus,
    pub imm: Option<u32>,
    /// The requester asked for a solicited event (flags bit 1).
    pub solicited: bool,
    pub req_id: u64,
    pub addr: u64,
    pub rkey: u32,
    /// READ request: bytes asked for.
    pub len: u64,
}

/// Why a message's verbs header was refused.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum HeaderError {
    /// Shorter than the header.
    #[error("message of {0} bytes is shorter than the {HEADER_LEN}-byte verbs header")]
    Truncated(usize),
    /// Unknown version.
    #[error("verbs header version {0}, expected {VERSION}")]
    Version(u8),
    /// Unknown opcode.
    #[error("unknown verbs opcode {0}")]
    Opcode(u8),
    /// Unknown status.
    #[error("unknown verbs status {0}")]
    Status(u8),
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut x = [0; 4];
    x.copy_from_slice(&b[at..at + 4]);
    u32::from_be_bytes(x)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut x = [0; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(x)
}

impl Header {
    pub(crate) fn new(op: MsgOp, req_id: u64) -> Header {
        Header {
            op,
            status: AckStatus::Ok,
            imm: None,
            solicited: false,
            req_id,
            addr: 0,
            rkey: 0,
            len: 0,
        }
    }

    /// The message that answers request `req_id` with `status` (an ACK, or a NAK
    /// when `status` is not `Ok`).
    pub(crate) fn answer_message(req_id: u64, status: AckStatus) -> Message {
        let mut h = Header::new(MsgOp::Ack, req_id);
        h.status = status;
        h.alone()
    }

    /// Parses the header at the start of `msg`; the payload follows it.
    pub(crate) fn parse(msg: &[u8]) -> Result<(Header, &[u8]), HeaderError> {
        if msg.len() < HEADER_LEN {
            return Err(HeaderError::Truncated(msg.len()));
        }
        if msg[0] != VERSION {
            return Err(HeaderError::Version(msg[0]));
        }
        let op = match msg[1] {
            1 => MsgOp::Send,
            2 => MsgOp::Write,
            3 => MsgOp::ReadReq,
            4 => MsgOp::ReadResp,
            5 => MsgOp::Ack,
            x => return Err(HeaderError::Opcode(x)),
        };
        let status = match msg[2] {
            0 => AckStatus::Ok,
            1 => AckStatus::Rnr,
            2 => AckStatus::RemAccess,
            3 => AckStatus::RemInvReq,
            4 => AckStatus::RemOp,
            x => return Err(HeaderError::Status(x)),
        };
        let imm = (msg[3] & 1 != 0).then(|| u32_at(msg, 4));
        let h = Header {
            op,
            status,
            imm,
            solicited: msg[3] & 2 != 0,
            req_id: u64_at(msg, 8),
            addr: u64_at(msg, 16),
            rkey: u32_at(msg, 24),
            len: u64_at(msg, 32),
        };
        Ok((h, &msg[HEADER_LEN..]))
    }

    /// Writes the header into the first [`HEADER_LEN`] bytes of `out`.
    pub(crate) fn emit(&self, out: &mut [u8]) {
        out[0] = VERSION;
        out[1] = self.op as u8;
        out[2] = self.status as u8;
        out[3] = u8::from(self.imm.is_some()) | u8::from(self.solicited) << 1;
        out[4..8].copy_from_slice(&self.imm.unwrap_or(0).to_be_bytes());
        out[8..16].copy_from_slice(&self.req_id.to_be_bytes());
        out[16..24].copy_from_slice(&self.addr.to_be_bytes());
        out[24..28].copy_from_slice(&self.rkey.to_be_bytes());
        out[28..32].fill(0);
        out[32..40].copy_from_slice(&self.len.to_be_bytes());
    }

    /// The header's [`HEADER_LEN`] bytes.
    pub(crate) fn bytes(&self) -> [u8; HEADER_LEN] {
        let mut b = [0; HEADER_LEN];
        self.emit(&mut b);
        b
    }

    /// An engine message of this header followed by `body`, the header kept
    /// inside the message (no allocation per request or answer).
    pub(crate) fn with_body(&self, body: Arc<dyn ExternalBytes>) -> Message {
        Message::with_head(&self.bytes(), body)
    }

    /// An engine message of this header alone, kept inside the message.
    pub(crate) fn alone(&self) -> Message {
        Message::inline(&self.bytes())
    }

    /// A whole message of this header with room for `payload` bytes that the
    /// caller appends (tests build received messages with it).
    #[cfg(test)]
    pub(crate) fn message(&self, payload: usize) -> Vec<u8> {
        let mut m = Vec::with_capacity(HEADER_LEN + payload);
        m.resize(HEADER_LEN, 0);
        self.emit(&mut m);
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_refusals() {
        let h = Header {
            op: MsgOp::Write,
            status: AckStatus::RemAccess,
            imm: Some(0xdead_beef),
            solicited: true,
            req_id: 77,
            addr: 0x1234_5678_9abc,
            rkey: 0xfeed,
            len: 1 << 33,
        };
        let mut m = h.message(3);
        m.extend_from_slice(b"abc");
        let (p, payload) = Header::parse(&m).unwrap();
        assert_eq!(p, h);
        assert_eq!(payload, b"abc");
        for n in 0..HEADER_LEN {
            assert_eq!(Header::parse(&m[..n]), Err(HeaderError::Truncated(n)));
        }
        let mut bad = m.clone();
        bad[0] = 9;
        assert_eq!(Header::parse(&bad), Err(HeaderError::Version(9)));
        let mut bad = m.clone();
        bad[1] = 0;
        assert_eq!(Header::parse(&bad), Err(HeaderError::Opcode(0)));
        bad[1] = 2;
        bad[2] = 200;
        assert_eq!(Header::parse(&bad), Err(HeaderError::Status(200)));
    }
}
