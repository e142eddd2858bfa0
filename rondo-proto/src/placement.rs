//! Receive placement: where the in-order payload of a message lands (DESIGN.md,
//! "Receive placement: in order means zero copy").
//!
//! The receiver hands every payload that is next in PSN order to one
//! [`Placement`], straight from the datagram when it arrived in order and from the
//! reorder buffer when it had to wait ("repaired"). [`CopyPlacement`], the default,
//! copies each payload into a message buffer. An in-place implementation answers
//! [`Placement::target`] with the payload's final place (an application buffer,
//! registered memory), so that a datapath can receive the expected PSN's payload
//! there directly (`recvmmsg` with a header iovec and a payload iovec); when such a
//! payload is then placed, it already lies at its target and is not copied. The
//! engine counts both kinds in [`ReceiverStats`](crate::ReceiverStats)
//! (`placed_in_order`, `placed_in_place`, `placed_repaired`).

use std::fmt;

/// Where the payloads of one connection's messages go, in order.
///
/// The receiver calls, for each message: [`Placement::begin`] when its first
/// packet is next in order, then for each payload in offset order (contiguous, from
/// 0) either [`Placement::place`] (copy it there) or, when a datapath already
/// received it at [`Placement::target`], [`Placement::commit`], and
/// [`Placement::finish`] when the last byte is placed.
pub trait Placement: fmt::Debug + Send {
    /// A message of `msg_len` bytes starts. Returns false when it cannot be placed
    /// (no room, no posted buffer): the receiver then counts the message as
    /// inconsistent and drops its payloads.
    fn begin(&mut self, msg_id: u64, msg_len: u64) -> bool;

    /// The final place of bytes `offset..offset + len` of the current message, when
    /// it has one: where an in-place datapath should receive that payload.
    fn target(&mut self, offset: u64, len: usize) -> Option<&mut [u8]>;

    /// Copies `payload` to `offset` of the current message (the next bytes in order).
    fn place(&mut self, offset: u64, payload: &[u8]);

    /// The `len` bytes at `target(offset, len)` already hold the payload (received
    /// in place): nothing to copy, they now count as placed.
    fn commit(&mut self, offset: u64, len: usize);

    /// The current message is complete: its bytes, for
    /// [`Event::Received`](crate::Event::Received).
    fn finish(&mut self) -> Vec<u8>;
}

/// Largest up-front allocation for a message; bigger messages grow as they arrive.
const MAX_PREALLOC: u64 = 64 << 20;

/// The default [`Placement`]: copies every payload into a buffer per message.
#[derive(Debug, Default)]
pub struct CopyPlacement {
    data: Vec<u8>,
}

impl Placement for CopyPlacement {
    fn begin(&mut self, _msg_id: u64, msg_len: u64) -> bool {
        self.data = Vec::with_capacity(msg_len.min(MAX_PREALLOC) as usize);
        true
    }

    fn target(&mut self, _offset: u64, _len: usize) -> Option<&mut [u8]> {
        None // bytes are appended as they come; nothing has a final place before
    }

    fn place(&mut self, _offset: u64, payload: &[u8]) {
        self.data.extend_from_slice(payload);
    }

    fn commit(&mut self, _offset: u64, _len: usize) {
        // Never handed out a target, so nothing can have been received in place.
    }

    fn finish(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.data)
    }
}

/// A [`Placement`] with a final place for every byte: the message buffer is
/// allocated whole at `begin` and [`Placement::target`] hands out its slices, so
/// that a datapath can receive in-order payloads in place. Messages longer than
/// its limit are refused (`begin` returns false), so that a peer cannot make it
/// allocate `max_message_len` bytes with one packet.
#[derive(Debug)]
pub struct BufferPlacement {
    data: Vec<u8>,
    limit: u64,
}

impl Default for BufferPlacement {
    /// A limit of 64 MiB.
    fn default() -> Self {
        BufferPlacement::with_limit(MAX_PREALLOC)
    }
}

impl BufferPlacement {
    /// Places messages of up to `limit` bytes.
    pub fn with_limit(limit: u64) -> BufferPlacement {
        BufferPlacement {
            data: Vec::new(),
            limit,
        }
    }
}

impl Placement for BufferPlacement {
    fn begin(&mut self, _msg_id: u64, msg_len: u64) -> bool {
        match usize::try_from(msg_len) {
            Ok(len) if msg_len <= self.limit => {
                self.data = vec![0; len];
                true
            }
            _ => false,
        }
    }

    fn target(&mut self, offset: u64, len: usize) -> Option<&mut [u8]> {
        let start = usize::try_from(offset).ok()?;
        self.data.get_mut(start..start.checked_add(len)?)
    }

    fn place(&mut self, offset: u64, payload: &[u8]) {
        if let Some(dst) = self.target(offset, payload.len()) {
            dst.copy_from_slice(payload);
        }
    }

    fn commit(&mut self, _offset: u64, _len: usize) {
        // The bytes are already in the message buffer.
    }

    fn finish(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_placement_appends() {
        let mut p = CopyPlacement::default();
        assert!(p.begin(1, 5));
        assert!(p.target(0, 2).is_none());
        p.place(0, b"ab");
        p.place(2, b"cde");
        assert_eq!(p.finish(), b"abcde");
    }

    #[test]
    fn buffer_placement_receives_in_place() {
        let mut p = BufferPlacement::default();
        assert!(p.begin(1, 6));
        // A datapath receives bytes 0..3 straight into their target.
        p.target(0, 3).unwrap().copy_from_slice(b"xyz");
        p.commit(0, 3);
        p.place(3, b"uvw");
        assert!(p.target(4, 3).is_none(), "past the end");
        assert_eq!(p.finish(), b"xyzuvw");
    }

    #[test]
    fn buffer_placement_refuses_messages_over_its_limit() {
        let mut p = BufferPlacement::with_limit(100);
        assert!(!p.begin(1, 101));
        assert!(p.begin(2, 100));
        assert!(!BufferPlacement::default().begin(3, 1 << 32));
    }
}
