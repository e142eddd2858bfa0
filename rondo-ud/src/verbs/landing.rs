//! In-place receive (DESIGN.md, "Receive placement: in order means zero copy"):
//! the engine [`Placement`] whose message buffers the NIC receives payloads into.
//!
//! A [`LandingPlacement`] is installed on a connection; it shares a
//! [`FlowLanding`] with the driver. For the message being placed, the driver posts
//! receive WRs in expected order (offset order, one packet each) with two
//! scatter entries: GRH and Rondo header into the WR's ring slot, payload straight
//! into the message buffer at that packet's offset. The buffer belongs to the
//! datapath, not to the engine, because a posted WR cannot be taken back:
//! - bytes the engine places where a WR is still posted are held aside (a
//!   deferred write) and written when that WR completes, so a datagram landing in
//!   that WR can never overwrite them;
//! - a message finished while WRs into its buffer are posted is handed to the
//!   application as a copy, and the buffer is freed when its last WR completes;
//!   otherwise the buffer itself becomes the message (no copy);
//! - what lands in a WR is written by the engine into the place only after the
//!   engine checked it (PSN, flow, token, message, offset): a datagram whose header
//!   names another PSN or flow is copied out of the WR's place and handed over like
//!   any datagram, so it never reaches a place it does not own.
#![allow(unsafe_code)] // message buffers the NIC writes into; each block says why it is sound

use crate::placement::Placement;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// Largest up-front copy buffer for a message received by copy.
const MAX_PREALLOC: u64 = 64 << 20;

/// Counters of a flow's in-place placement.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LandingCounters {
    /// Messages whose buffer became the delivered message (no copy at all).
    pub zero_copy_messages: u64,
    /// Messages delivered as a copy because WRs into their buffer were posted.
    pub finish_copies: u64,
    /// Payloads the engine placed where a WR was posted, written when it completed.
    pub deferred_writes: u64,
    /// Messages received by copy (below the in-place minimum or above the limit).
    pub copied_messages: u64,
}

/// A message buffer: `len` bytes in an allocation of `cap` (whole packets).
#[derive(Debug)]
pub(crate) struct LandingBuf {
    ptr: *mut u8,
    len: usize,
    cap: usize,
    msg_id: u64,
    /// Bytes placed in order (the engine's progress).
    placed: u64,
    /// End of the furthest packet of this message seen arriving (the next one
    /// in order starts there).
    seen_end: u64,
    /// Offsets with a WR posted (never two at one offset: see `next_post`).
    posted: Vec<u64>,
    /// Deferred writes: offset -> bytes.
    pending: HashMap<u64, Vec<u8>>,
    /// Delivered or abandoned by the engine.
    finished: bool,
}

// SAFETY: the buffer owns its allocation (a leaked Vec<u8>); it is only reached
// through the mutex of its FlowLanding, or by the NIC through posted WRs.
unsafe impl Send for LandingBuf {}

impl LandingBuf {
    fn new(msg_id: u64, len: usize, ppp: usize) -> LandingBuf {
        let cap = len.div_ceil(ppp).max(1) * ppp;
        let mut v = std::mem::ManuallyDrop::new(vec![0u8; cap]);
        LandingBuf {
            ptr: v.as_mut_ptr(),
            len,
            cap: v.capacity(),
            msg_id,
            placed: 0,
            seen_end: 0,
            posted: Vec::new(),
            pending: HashMap::new(),
            finished: false,
        }
    }

    /// Bytes `offset..offset + len` (within the allocation), to write.
    fn bytes_mut(&mut self, offset: u64, len: usize) -> Option<&mut [u8]> {
        let start = usize::try_from(offset).ok()?;
        if start.checked_add(len)? > self.cap {
            return None;
        }
        // SAFETY: in bounds of the allocation (checked); no WR is posted over
        // these bytes (callers check `posted`), so nothing else writes them.
        Some(unsafe { std::slice::from_raw_parts_mut(self.ptr.add(start), len) })
    }

    fn is_posted(&self, offset: u64) -> bool {
        self.posted.contains(&offset)
    }

    /// One WR at `offset` is no longer posted.
    fn remove_posted(&mut self, offset: u64) {
        if let Some(i) = self.posted.iter().position(|&o| o == offset) {
            self.posted.swap_remove(i);
        }
    }

    /// The message, as a Vec: the buffer itself when no WR is posted into it
    /// (consumes the allocation), a copy otherwise.
    fn take(&mut self, ppp: usize) -> (Vec<u8>, bool) {
        if self.posted.is_empty() {
            let (ptr, len, cap) = (self.ptr, self.len, self.cap);
            self.ptr = std::ptr::null_mut();
            // SAFETY: ptr/cap are the parts of a Vec<u8> leaked in `new`, all
            // initialised (zeroed), and `ptr` is cleared so it is not freed twice.
            return (unsafe { Vec::from_raw_parts(ptr, len, cap) }, true);
        }
        let mut out = vec![0u8; self.len];
        for (i, chunk) in out.chunks_mut(ppp).enumerate() {
            let offset = (i * ppp) as u64;
            if self.is_posted(offset) {
                if let Some(p) = self.pending.get(&offset) {
                    let n = p.len().min(chunk.len());
                    chunk[..n].copy_from_slice(&p[..n]);
                }
            } else if let Some(b) = self.bytes_mut(offset, chunk.len()) {
                chunk.copy_from_slice(b);
            }
        }
        (out, false)
    }
}

impl Drop for LandingBuf {
    fn drop(&mut self) {
        if !self.ptr.is_null() {
            // SAFETY: the parts of the Vec leaked in `new`, freed once; a buffer is
            // dropped only when no WR is posted into it (FlowLanding::reclaim) or
            // the QP is gone.
            drop(unsafe { Vec::from_raw_parts(self.ptr, self.len, self.cap) });
        }
    }
}

#[derive(Debug)]
enum Current {
    None,
    Copy(Vec<u8>),
    Buf(u64),
}

/// One WR's payload target, for the driver to post.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PostTarget {
    /// The buffer.
    pub buf: u64,
    /// Offset of the packet in the message.
    pub offset: u64,
    /// Where the payload goes (valid while the WR is posted).
    pub ptr: *mut u8,
    /// The whole buffer (for its registration).
    pub base: *mut u8,
    /// Bytes of the whole buffer.
    pub cap: usize,
    /// Bytes (one packet's payload; the last packet's WR has room for a whole one).
    pub len: usize,
}

/// The state a flow's [`LandingPlacement`] shares with the driver.
#[derive(Debug)]
pub(crate) struct FlowLanding {
    /// Payload bytes of a full data packet.
    pub ppp: usize,
    /// Messages of `min_len..=limit` bytes are received in place.
    min_len: u64,
    limit: u64,
    bufs: HashMap<u64, LandingBuf>,
    next_id: u64,
    current: Current,
    /// Buffers no longer used, waiting for the driver to deregister them.
    released: Vec<u64>,
    pub counters: LandingCounters,
}

impl FlowLanding {
    pub fn new(ppp: usize, min_len: u64, limit: u64) -> FlowLanding {
        FlowLanding {
            ppp: ppp.max(1),
            min_len,
            limit,
            bufs: HashMap::new(),
            next_id: 0,
            current: Current::None,
            released: Vec::new(),
            counters: LandingCounters::default(),
        }
    }

    /// The next WR to post for the message being placed, `ahead` WRs behind the
    /// oldest posted one: for the packet that will arrive into it when packets
    /// arrive in order, `ahead` packets after the next one (the furthest seen or
    /// placed, whichever is later), while fewer than `window` WRs are posted into
    /// the buffer. `None` also when that place has a WR already: two WRs must
    /// never share a place (the NIC fills both before the driver sees the first
    /// completion, so the first one's datagram would be lost). That happens when
    /// another datagram took a WR and the WRs behind it receive the packet before
    /// the one they expect; the slot then takes a whole datagram, and the WR
    /// after it is aligned again.
    pub fn next_post(&mut self, window: usize, ahead: usize) -> Option<PostTarget> {
        let Current::Buf(id) = self.current else {
            return None;
        };
        let ppp = self.ppp as u64;
        let b = self.bufs.get_mut(&id)?;
        if b.finished || b.posted.len() >= window {
            return None;
        }
        let next = b.placed.max(b.seen_end);
        let offset = next.saturating_add((ahead as u64).saturating_mul(ppp));
        if offset >= b.len as u64 || b.is_posted(offset) {
            return None;
        }
        b.posted.push(offset);
        // SAFETY: offset + ppp <= cap (cap is whole packets, offset < len).
        let ptr = unsafe { b.ptr.add(offset as usize) };
        Some(PostTarget {
            buf: id,
            offset,
            ptr,
            base: b.ptr,
            cap: b.cap,
            len: self.ppp,
        })
    }

    /// A WR returned by [`FlowLanding::next_post`] was not posted after all.
    pub fn unpost(&mut self, buf: u64, offset: u64) {
        if let Some(b) = self.bufs.get_mut(&buf) {
            b.remove_posted(offset);
        }
    }

    /// A DATA packet of message `msg_id` at `offset` arrived (by any WR).
    pub fn saw(&mut self, msg_id: u64, offset: u64) {
        if let Current::Buf(id) = self.current {
            let ppp = self.ppp as u64;
            if let Some(b) = self.bufs.get_mut(&id).filter(|b| b.msg_id == msg_id) {
                b.seen_end = b.seen_end.max(offset.saturating_add(ppp).min(b.len as u64));
            }
        }
    }

    /// Whether the payload of the completed WR into (`buf`, `offset`) can be
    /// taken in place (before [`FlowLanding::consumed`]): the message being
    /// placed, at its next expected offset, with message id `msg_id`.
    pub fn expects(&self, buf: u64, offset: u64, msg_id: u64) -> bool {
        matches!(self.current, Current::Buf(id) if id == buf)
            && self.bufs.get(&buf).is_some_and(|b| {
                !b.finished && b.placed == offset && b.msg_id == msg_id && b.is_posted(offset)
            })
    }

    /// Bytes `offset..offset + len` that a completed WR left in `buf` (`len` at
    /// most one packet), copied into `out`.
    pub fn read_landed(&mut self, buf: u64, offset: u64, len: usize, out: &mut Vec<u8>) {
        if let Some(b) = self.bufs.get_mut(&buf) {
            if let Some(bytes) = b.bytes_mut(offset, len.min(self.ppp)) {
                out.extend_from_slice(bytes);
            }
        }
    }

    /// The WR into (`buf`, `offset`) completed: the NIC writes there no more. A
    /// deferred write for that place is made now.
    pub fn consumed(&mut self, buf: u64, offset: u64) {
        let Some(b) = self.bufs.get_mut(&buf) else {
            return;
        };
        b.remove_posted(offset);
        if let Some(bytes) = b.pending.remove(&offset) {
            if let Some(dst) = b.bytes_mut(offset, bytes.len()) {
                dst.copy_from_slice(&bytes);
            }
        }
        if b.finished && b.posted.is_empty() {
            self.released.push(buf);
        }
    }

    /// Buffers to deregister and free: the driver deregisters their memory, then
    /// calls [`FlowLanding::reclaim`].
    pub fn released(&self) -> &[u64] {
        &self.released
    }

    /// Frees the released buffers (after their registrations are gone).
    pub fn reclaim(&mut self) {
        for id in self.released.drain(..) {
            self.bufs.remove(&id);
        }
    }

    /// Bytes placed of the message being placed in place.
    #[cfg(test)]
    pub fn placed(&self) -> Option<u64> {
        match self.current {
            Current::Buf(id) => self.bufs.get(&id).map(|b| b.placed),
            _ => None,
        }
    }

    /// WRs posted into buffers of this flow.
    #[cfg(test)]
    pub fn posted(&self) -> usize {
        self.bufs.values().map(|b| b.posted.len()).sum()
    }

    fn abandon_current(&mut self) {
        if let Current::Buf(id) = std::mem::replace(&mut self.current, Current::None) {
            if let Some(b) = self.bufs.get_mut(&id) {
                b.finished = true;
                if b.posted.is_empty() {
                    self.released.push(id);
                }
            }
        }
    }
}

/// The engine-side half: a [`Placement`] over a [`FlowLanding`].
#[derive(Debug)]
pub(crate) struct LandingPlacement {
    pub state: Arc<Mutex<FlowLanding>>,
}

pub(crate) fn lock(state: &Mutex<FlowLanding>) -> MutexGuard<'_, FlowLanding> {
    // A panic while holding it leaves plain data behind; keep going.
    state.lock().unwrap_or_else(|e| e.into_inner())
}

impl Drop for LandingPlacement {
    fn drop(&mut self) {
        // Replaced or its connection gone: no more WRs into its message.
        lock(&self.state).abandon_current();
    }
}

impl Placement for LandingPlacement {
    fn begin(&mut self, msg_id: u64, msg_len: u64) -> bool {
        let mut s = lock(&self.state);
        s.abandon_current();
        match usize::try_from(msg_len) {
            Ok(len) if (s.min_len..=s.limit).contains(&msg_len) => {
                let id = s.next_id;
                s.next_id += 1;
                let buf = LandingBuf::new(msg_id, len, s.ppp);
                s.bufs.insert(id, buf);
                s.current = Current::Buf(id);
            }
            _ => {
                s.counters.copied_messages += 1;
                s.current = Current::Copy(Vec::with_capacity(msg_len.min(MAX_PREALLOC) as usize));
            }
        }
        true
    }

    fn target(&mut self, offset: u64, len: usize) -> Option<&mut [u8]> {
        let mut s = lock(&self.state);
        let Current::Buf(id) = s.current else {
            return None;
        };
        let b = s.bufs.get_mut(&id)?;
        if b.is_posted(offset) || offset.checked_add(len as u64)? > b.len as u64 {
            return None; // the NIC may still write there
        }
        let ptr = b.bytes_mut(offset, len)?.as_mut_ptr();
        drop(s);
        // SAFETY: in bounds of the current message's buffer, with no WR posted
        // there. The buffer stays allocated while it is current (only released
        // buffers are freed, and it is released by `finish` or `begin`, which
        // need `&mut self` and so end this borrow first); the driver, which posts
        // WRs, does not run while the engine holds this borrow (it calls the
        // engine and waits for it).
        Some(unsafe { std::slice::from_raw_parts_mut(ptr, len) })
    }

    fn place(&mut self, offset: u64, payload: &[u8]) {
        let mut s = lock(&self.state);
        let s = &mut *s;
        match &mut s.current {
            Current::None => {}
            Current::Copy(v) => v.extend_from_slice(payload),
            Current::Buf(id) => {
                let Some(b) = s.bufs.get_mut(id) else {
                    return;
                };
                if offset + payload.len() as u64 > b.len as u64 {
                    return;
                }
                if b.is_posted(offset) {
                    b.pending.insert(offset, payload.to_vec());
                    s.counters.deferred_writes += 1;
                } else if let Some(dst) = b.bytes_mut(offset, payload.len()) {
                    dst.copy_from_slice(payload);
                }
                b.placed = offset + payload.len() as u64;
            }
        }
    }

    fn commit(&mut self, offset: u64, len: usize) {
        let mut s = lock(&self.state);
        let Current::Buf(id) = s.current else {
            return;
        };
        if let Some(b) = s.bufs.get_mut(&id) {
            b.placed = offset + len as u64;
        }
    }

    fn finish(&mut self) -> Vec<u8> {
        let mut s = lock(&self.state);
        let s = &mut *s;
        match std::mem::replace(&mut s.current, Current::None) {
            Current::None => Vec::new(),
            Current::Copy(v) => v,
            Current::Buf(id) => {
                let ppp = s.ppp;
                let Some(b) = s.bufs.get_mut(&id) else {
                    return Vec::new();
                };
                b.finished = true;
                let (v, whole) = b.take(ppp);
                if whole {
                    s.counters.zero_copy_messages += 1;
                    s.released.push(id); // the registration goes; the memory is the Vec's now
                } else {
                    s.counters.finish_copies += 1;
                }
                v
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placement(ppp: usize) -> (LandingPlacement, Arc<Mutex<FlowLanding>>) {
        let state = Arc::new(Mutex::new(FlowLanding::new(ppp, 2, 1 << 20)));
        (
            LandingPlacement {
                state: state.clone(),
            },
            state,
        )
    }

    /// The NIC writes `bytes` at a posted target.
    fn nic_write(t: &PostTarget, bytes: &[u8]) {
        assert!(bytes.len() <= t.len);
        // SAFETY: the target is posted, in bounds, and nothing else writes it.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), t.ptr, bytes.len()) };
    }

    #[test]
    fn in_order_message_lands_in_place_and_is_handed_over_without_copy() {
        let (mut p, state) = placement(4);
        assert!(p.begin(7, 10));
        let posts: Vec<PostTarget> = (0..4).map_while(|i| lock(&state).next_post(8, i)).collect();
        assert_eq!(
            posts.iter().map(|t| t.offset).collect::<Vec<_>>(),
            [0, 4, 8]
        );
        assert_eq!(posts[2].len, 4, "the last WR has room for a whole packet");
        for (t, bytes) in posts.iter().zip([&b"abcd"[..], b"efgh", b"ij"]) {
            nic_write(t, bytes);
            let mut s = lock(&state);
            assert!(s.expects(t.buf, t.offset, 7));
            s.consumed(t.buf, t.offset);
            drop(s);
            p.commit(t.offset, bytes.len());
        }
        let addr = posts[0].ptr as usize;
        let v = p.finish();
        assert_eq!(v, b"abcdefghij");
        assert_eq!(v.as_ptr() as usize, addr, "the buffer itself, not a copy");
        let mut s = lock(&state);
        assert_eq!(s.counters.zero_copy_messages, 1);
        assert_eq!(s.released(), &[posts[0].buf]);
        s.reclaim();
        assert!(s.bufs.is_empty());
    }

    #[test]
    fn bytes_placed_over_a_posted_wr_wait_for_it_and_finish_copies() {
        let (mut p, state) = placement(4);
        assert!(p.begin(1, 8));
        let t0 = lock(&state).next_post(8, 0).unwrap();
        let t1 = lock(&state).next_post(8, 1).unwrap();
        // Packet 1 arrives first into WR 0 (copied out by the driver), then the
        // engine places packets 0 and 1 from elsewhere while WR 1 is still posted.
        nic_write(&t0, b"EFGH");
        lock(&state).consumed(t0.buf, t0.offset);
        p.place(0, b"abcd");
        assert!(p.target(4, 4).is_none(), "WR 1 is posted there");
        p.place(4, b"efgh");
        // The message completes with WR 1 posted: a copy, the buffer stays.
        assert_eq!(p.finish(), b"abcdefgh");
        assert_eq!(lock(&state).released(), &[] as &[u64]);
        // A stray datagram lands in WR 1 later: the delivered copy is unaffected,
        // the deferred write is made, and the buffer is released.
        nic_write(&t1, b"XXXX");
        let mut s = lock(&state);
        s.consumed(t1.buf, t1.offset);
        assert_eq!(s.released(), &[t1.buf]);
        assert_eq!(
            (s.counters.deferred_writes, s.counters.finish_copies),
            (1, 1)
        );
        s.reclaim();
        assert_eq!(s.posted(), 0);
    }

    #[test]
    fn small_and_huge_messages_are_copied_and_an_abandoned_buffer_waits_for_its_wrs() {
        let (mut p, state) = placement(4);
        assert!(p.begin(1, 1), "below the in-place minimum");
        assert!(lock(&state).next_post(8, 0).is_none());
        p.place(0, b"z");
        assert_eq!(p.finish(), b"z");
        assert!(p.begin(2, 1 << 30), "above the limit: copied, not refused");
        assert!(lock(&state).next_post(8, 0).is_none());
        assert_eq!(lock(&state).counters.copied_messages, 2);
        assert!(p.begin(3, 12));
        let t = lock(&state).next_post(1, 0).unwrap();
        assert!(lock(&state).next_post(1, 1).is_none(), "window of 1");
        // A new message starts before this one finished: the old buffer is kept
        // while its WR is posted.
        assert!(p.begin(4, 12));
        assert!(!lock(&state).expects(t.buf, t.offset, 3));
        assert!(lock(&state).released().is_empty());
        lock(&state).consumed(t.buf, t.offset);
        assert_eq!(lock(&state).released(), &[t.buf]);
    }
}
