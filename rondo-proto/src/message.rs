//! What a connection sends: a [`Message`], bytes the engine owns (a head) followed
//! by bytes that stay where the application put them ([`ExternalBytes`], e.g. a
//! registered memory region), so that a datapath can send those straight from
//! there, by address, without a copy (as a NIC sends from registered memory).

use std::fmt;
use std::sync::Arc;

/// Message bytes that live outside the engine.
///
/// The engine reads them with [`ExternalBytes::read`] when it writes a datagram
/// itself, and hands their address ([`ExternalBytes::addr`]) to a datapath that
/// sends by address ([`crate::Transmit::payload`]). They must not change
/// between the post and the message's `SendComplete` (as a verbs send buffer):
/// a retransmission reads them again. Changed anyway, the peer receives some mix
/// of old and new bytes; nothing else breaks.
pub trait ExternalBytes: Send + Sync + fmt::Debug {
    /// Number of bytes.
    fn len(&self) -> usize;

    /// True when there are no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies bytes `offset..offset + dst.len()` into `dst` (the engine only asks
    /// for ranges inside `0..len()`).
    fn read(&self, offset: usize, dst: &mut [u8]);

    /// The address of bytes `offset..offset + len`, when they lie contiguous in
    /// memory that stays mapped while `self` lives and a datapath may hand them to
    /// the kernel or a NIC by address; `None` sends them as a copy. The address is
    /// only ever passed to the system (an iovec), never read through in Rust, so
    /// concurrent writers do not make it unsound; a wrong address makes the
    /// system send other bytes of this process or fail the send.
    fn addr(&self, offset: usize, len: usize) -> Option<usize>;
}

/// Bytes of a head a message keeps inside itself, without an allocation
/// ([`Message::with_head`], [`Message::inline`]): a verbs header fits.
pub const INLINE_HEAD: usize = 48;

/// A message's head: inside the message when short, else on the heap.
#[derive(Clone)]
enum Head {
    Inline { len: u8, bytes: [u8; INLINE_HEAD] },
    Heap(Vec<u8>),
}

impl Head {
    fn from_slice(head: &[u8]) -> Head {
        if head.len() <= INLINE_HEAD {
            let mut bytes = [0; INLINE_HEAD];
            bytes[..head.len()].copy_from_slice(head);
            Head::Inline {
                len: head.len() as u8,
                bytes,
            }
        } else {
            Head::Heap(head.to_vec())
        }
    }

    fn as_slice(&self) -> &[u8] {
        match self {
            Head::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Head::Heap(v) => v,
        }
    }
}

impl Default for Head {
    fn default() -> Head {
        Head::Heap(Vec::new())
    }
}

impl fmt::Debug for Head {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_slice().fmt(f)
    }
}

/// A message for [`crate::Endpoint::post_message`]: a head (owned) then `body`.
#[derive(Clone, Debug, Default)]
pub struct Message {
    /// The first bytes, owned by the engine.
    head: Head,
    /// The bytes after the head, left where they are.
    pub body: Option<Arc<dyn ExternalBytes>>,
}

impl Message {
    /// A message of `head` followed by `body`.
    pub fn new(head: Vec<u8>, body: Arc<dyn ExternalBytes>) -> Message {
        Message {
            head: Head::Heap(head),
            body: Some(body),
        }
    }

    /// A message of a copy of `head` followed by `body`: with a head of at most
    /// [`INLINE_HEAD`] bytes (a verbs header) nothing is allocated for it, as a
    /// small message's header should cost nothing but its bytes.
    pub fn with_head(head: &[u8], body: Arc<dyn ExternalBytes>) -> Message {
        Message {
            head: Head::from_slice(head),
            body: Some(body),
        }
    }

    /// A message of a copy of `bytes` alone, inside the message when at most
    /// [`INLINE_HEAD`] bytes (an acknowledgement of the verbs layer).
    pub fn inline(bytes: &[u8]) -> Message {
        Message {
            head: Head::from_slice(bytes),
            body: None,
        }
    }

    /// The owned bytes before the body.
    pub fn head(&self) -> &[u8] {
        self.head.as_slice()
    }

    /// Total bytes.
    pub fn len(&self) -> usize {
        self.head().len() + self.body.as_ref().map_or(0, |b| b.len())
    }

    /// True when the message has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies bytes `offset..offset + dst.len()` (inside the message) into `dst`.
    pub(crate) fn read(&self, offset: usize, dst: &mut [u8]) {
        let head = self.head();
        let h = head.len();
        let mut done = 0;
        if offset < h {
            done = (h - offset).min(dst.len());
            dst[..done].copy_from_slice(&head[offset..offset + done]);
        }
        if done < dst.len() {
            if let Some(b) = &self.body {
                b.read(offset + done - h, &mut dst[done..]);
            }
        }
    }

    /// For a datagram carrying bytes `offset..offset + len`: how many of its first
    /// bytes must be copied so that the rest can be sent from where it lies
    /// ([`Message::locate`]): 0 when all of it can stay, the owned head's
    /// remaining bytes when the range straddles head and body; `None` when the
    /// rest has no address either (copy it all).
    pub(crate) fn split_point(&self, offset: usize, len: usize) -> Option<usize> {
        if self.locate(offset, len).is_some() {
            return Some(0);
        }
        let h = self.head().len();
        let k = h.checked_sub(offset).filter(|&k| k > 0 && k < len)?;
        self.locate(h, len - k).map(|_| k)
    }

    /// Where bytes `offset..offset + len` lie without a copy: in the head, or at an
    /// address of the body; `None` when they straddle the two or the body has no
    /// address for them.
    pub(crate) fn locate(&self, offset: usize, len: usize) -> Option<PayloadBytes<'_>> {
        let head = self.head();
        let h = head.len();
        let end = offset.checked_add(len)?;
        if end <= h {
            return Some(PayloadBytes::Slice(&head[offset..end]));
        }
        if offset < h {
            return None;
        }
        let body = self.body.as_ref()?;
        if end - h > body.len() {
            return None;
        }
        let addr = body.addr(offset - h, len)?;
        Some(PayloadBytes::Addr { addr, len })
    }
}

impl From<Vec<u8>> for Message {
    fn from(head: Vec<u8>) -> Message {
        Message {
            head: Head::Heap(head),
            body: None,
        }
    }
}

/// A payload that stays in the host's memory (see [`crate::Host::payload`]): bytes
/// the engine owns, or bytes at an address of external memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PayloadBytes<'a> {
    /// Bytes in the engine's memory.
    Slice(&'a [u8]),
    /// `len` bytes at address `addr` of external memory ([`ExternalBytes::addr`]).
    Addr {
        /// The address.
        addr: usize,
        /// The length.
        len: usize,
    },
}

impl PayloadBytes<'_> {
    /// No bytes.
    pub const EMPTY: PayloadBytes<'static> = PayloadBytes::Slice(&[]);

    /// The address of the first byte, for an iovec.
    pub fn addr(&self) -> usize {
        match self {
            PayloadBytes::Slice(s) => s.as_ptr() as usize,
            PayloadBytes::Addr { addr, .. } => *addr,
        }
    }

    /// Number of bytes.
    pub fn len(&self) -> usize {
        match self {
            PayloadBytes::Slice(s) => s.len(),
            PayloadBytes::Addr { len, .. } => *len,
        }
    }

    /// True when there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes `i as u8` at offset `i`, with an address only for ranges in one half.
    #[derive(Debug)]
    struct Halves(Vec<u8>);

    impl ExternalBytes for Halves {
        fn len(&self) -> usize {
            self.0.len()
        }
        fn read(&self, offset: usize, dst: &mut [u8]) {
            dst.copy_from_slice(&self.0[offset..offset + dst.len()]);
        }
        fn addr(&self, offset: usize, len: usize) -> Option<usize> {
            let half = self.0.len() / 2;
            let same_half = (offset < half) == (offset + len <= half);
            same_half.then(|| self.0.as_ptr() as usize + offset)
        }
    }

    /// A head copied into the message reads, locates and splits as the same
    /// bytes in a vector do, short (inside the message) or long (on the heap).
    #[test]
    fn an_inline_head_is_the_same_message_as_a_vector_head() {
        for len in [0, 3, INLINE_HEAD, INLINE_HEAD + 1, 200] {
            let head: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
            let body = Arc::new(Halves((0..100u8).collect()));
            let (a, b) = (
                Message::new(head.clone(), body.clone()),
                Message::with_head(&head, body),
            );
            assert_eq!((a.len(), a.head()), (b.len(), b.head()));
            let mut da = vec![0u8; a.len()];
            let mut db = vec![0u8; b.len()];
            a.read(0, &mut da);
            b.read(0, &mut db);
            assert_eq!(da, db, "head of {len}");
            for (off, n) in [(0, len.min(5)), (len.saturating_sub(1), 3), (len, 10)] {
                assert_eq!(a.split_point(off, n), b.split_point(off, n));
                assert_eq!(
                    a.locate(off, n).map(|p| p.len()),
                    b.locate(off, n).map(|p| p.len())
                );
            }
            let alone = Message::inline(&head);
            assert_eq!((alone.len(), alone.head()), (len, &head[..]));
            assert!(alone.body.is_none());
        }
    }

    #[test]
    fn reads_and_locates_across_head_and_body() {
        let body: Vec<u8> = (0..100u8).collect();
        let base = body.as_ptr() as usize;
        let m = Message::new(vec![200, 201, 202], Arc::new(Halves(body)));
        assert_eq!(m.len(), 103);
        let mut dst = [0u8; 5];
        m.read(1, &mut dst);
        assert_eq!(dst, [201, 202, 0, 1, 2]);
        m.read(50, &mut dst);
        assert_eq!(dst, [47, 48, 49, 50, 51]);
        assert_eq!(m.locate(0, 3), Some(PayloadBytes::Slice(&[200, 201, 202])));
        assert_eq!(m.locate(2, 2), None, "straddles head and body");
        assert_eq!(m.split_point(2, 2), Some(1), "copy the head's last byte");
        assert_eq!(
            m.split_point(0, 50),
            Some(3),
            "copy the head, reference the rest"
        );
        assert_eq!(m.split_point(3, 50), Some(0));
        assert_eq!(m.split_point(0, 60), None, "the rest has no address");
        assert_eq!(
            m.locate(3, 50),
            Some(PayloadBytes::Addr {
                addr: base,
                len: 50
            })
        );
        assert_eq!(m.locate(40, 20), None, "the body has no address for it");
        assert_eq!(m.locate(100, 4), None, "past the end");
        let owned = Message::from(vec![1, 2, 3]);
        assert_eq!(owned.locate(1, 2), Some(PayloadBytes::Slice(&[2, 3])));
        assert_eq!(owned.locate(2, 2), None);
    }
}
