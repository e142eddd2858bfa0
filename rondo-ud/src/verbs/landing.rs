//! In-place receive (DESIGN.md, "Receive placement: in order means zero copy"):
//! the engine [`Placement`] whose message buffers the NIC receives payloads into.
//!
//! A [`LandingPlacement`] is installed on a connection; it shares a
//! [`FlowLanding`] with the driver. The driver posts receive WRs in expected
//! order (one packet each) with two scatter entries: GRH and Rondo header into
//! the WR's ring slot, payload straight into a message buffer at that packet's
//! offset: the buffer of the message being placed, and past its end the buffers
//! of the messages expected after it (as long as the last one, allocated ahead
//! and taken over when such a message begins; dropped when one of another length
//! comes). The buffers belong to the datapath, not to the engine, because a
//! posted WR cannot be taken back:
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

use rondo_proto::placement::Placement;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

/// Largest up-front copy buffer for a message received by copy.
const MAX_PREALLOC: u64 = 64 << 20;
/// Buffers allocated ahead for the messages after the one being placed, at most.
const MAX_AHEAD: usize = 16;

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
    /// Buffers allocated ahead that a message of that length took over.
    pub ahead_taken: u64,
    /// Buffers allocated ahead and dropped (the next message had another length).
    pub ahead_dropped: u64,
}

impl LandingCounters {
    /// Adds another flow's counters.
    pub fn add(&mut self, o: &LandingCounters) {
        self.zero_copy_messages += o.zero_copy_messages;
        self.finish_copies += o.finish_copies;
        self.deferred_writes += o.deferred_writes;
        self.copied_messages += o.copied_messages;
        self.ahead_taken += o.ahead_taken;
        self.ahead_dropped += o.ahead_dropped;
    }
}

/// A message buffer: `len` bytes in an allocation of whole packets.
#[derive(Debug)]
pub(crate) struct LandingBuf {
    ptr: *mut u8,
    len: usize,
    cap: usize,
    ppp: usize,
    /// The message; `None` while allocated ahead.
    msg_id: Option<u64>,
    /// Bytes placed in order (the engine's progress).
    placed: u64,
    /// End of the furthest packet of this message seen arriving (the next one
    /// in order starts there).
    seen_end: u64,
    /// Per packet: a WR is posted there (never two: see `FlowLanding::next_post`).
    posted: Vec<bool>,
    posted_count: usize,
    /// Deferred writes: offset -> bytes.
    pending: HashMap<u64, Vec<u8>>,
    /// Delivered or abandoned by the engine.
    finished: bool,
}

// SAFETY: the buffer owns its allocation (a leaked Vec<u8>); it is only reached
// through the mutex of its FlowLanding, or by the NIC through posted WRs.
unsafe impl Send for LandingBuf {}

impl LandingBuf {
    fn new(msg_id: Option<u64>, len: usize, ppp: usize) -> LandingBuf {
        let packets = len.div_ceil(ppp).max(1);
        let mut v = std::mem::ManuallyDrop::new(vec![0u8; packets * ppp]);
        LandingBuf {
            ptr: v.as_mut_ptr(),
            len,
            cap: v.capacity(),
            ppp,
            msg_id,
            placed: 0,
            seen_end: 0,
            posted: vec![false; packets],
            posted_count: 0,
            pending: HashMap::new(),
            finished: false,
        }
    }

    fn packets(&self) -> usize {
        self.posted.len()
    }

    /// Bytes `offset..offset + len` (within the allocation), to write.
    fn bytes_mut(&mut self, offset: u64, len: usize) -> Option<&mut [u8]> {
        let start = usize::try_from(offset).ok()?;
        if start.checked_add(len)? > self.cap {
            return None;
        }
        // SAFETY: in bounds of the allocation (checked); callers check that no
        // WR is posted over these bytes, so nothing else writes them.
        Some(unsafe { std::slice::from_raw_parts_mut(self.ptr.add(start), len) })
    }

    /// True when a WR is posted over any of bytes `offset..offset + len`.
    fn overlaps_posted(&self, offset: u64, len: usize) -> bool {
        let ppp = self.ppp as u64;
        let first = offset / ppp;
        let last = (offset + len.max(1) as u64 - 1) / ppp;
        (first..=last).any(|i| self.posted.get(i as usize).copied().unwrap_or(false))
    }

    fn set_posted(&mut self, offset: u64, on: bool) {
        if let Some(p) = self.posted.get_mut((offset / self.ppp as u64) as usize) {
            if *p != on {
                *p = on;
                if on {
                    self.posted_count += 1;
                } else {
                    self.posted_count -= 1;
                }
            }
        }
    }

    /// Makes the deferred writes whose bytes no WR covers any more.
    fn flush_pending(&mut self) {
        let ready: Vec<u64> = self
            .pending
            .iter()
            .filter(|(&o, b)| !self.overlaps_posted(o, b.len()))
            .map(|(&o, _)| o)
            .collect();
        for o in ready {
            if let Some(bytes) = self.pending.remove(&o) {
                if let Some(dst) = self.bytes_mut(o, bytes.len()) {
                    dst.copy_from_slice(&bytes);
                }
            }
        }
    }

    /// The message, as a Vec: the buffer itself when no WR is posted into it
    /// (consumes the allocation), a copy otherwise (which never reads bytes a
    /// WR may be writing).
    fn take(&mut self) -> (Vec<u8>, bool) {
        if self.posted_count == 0 {
            let (ptr, len, cap) = (self.ptr, self.len, self.cap);
            self.ptr = std::ptr::null_mut();
            // SAFETY: ptr/cap are the parts of a Vec<u8> leaked in `new`, all
            // initialised (zeroed), and `ptr` is cleared so it is not freed twice.
            return (unsafe { Vec::from_raw_parts(ptr, len, cap) }, true);
        }
        let ppp = self.ppp;
        let mut out = vec![0u8; self.len];
        for (i, chunk) in out.chunks_mut(ppp).enumerate() {
            if !self.posted[i] {
                if let Some(b) = self.bytes_mut((i * ppp) as u64, chunk.len()) {
                    chunk.copy_from_slice(b);
                }
            }
        }
        for (&o, bytes) in &self.pending {
            let o = o as usize;
            let n = bytes.len().min(self.len.saturating_sub(o));
            out[o..o + n].copy_from_slice(&bytes[..n]);
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
    /// Buffers allocated ahead for the next messages, in order, and their length
    /// (the last in-place message's).
    ahead: VecDeque<u64>,
    ahead_len: Option<usize>,
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
            ahead: VecDeque::new(),
            ahead_len: None,
            released: Vec::new(),
            counters: LandingCounters::default(),
        }
    }

    fn alloc(&mut self, msg_id: Option<u64>, len: usize) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.bufs.insert(id, LandingBuf::new(msg_id, len, self.ppp));
        id
    }

    /// The next WR to post, `ahead` WRs behind the oldest posted one: for the
    /// packet that will arrive into it when packets arrive in order, `ahead`
    /// packets after the next one of the message being placed (the furthest seen
    /// or placed, whichever is later), and past that message's end in the buffers
    /// of the messages after it. `None` when no such place is known, and when
    /// that place has a WR already: two WRs must never share a place (the NIC
    /// fills both before the driver sees the first completion, so the first one's
    /// datagram would be lost). That happens when another datagram took a WR and
    /// the WRs behind it receive the packet before the one they expect; the slot
    /// then takes a whole datagram, and the WR after it is aligned again.
    pub fn next_post(&mut self, ahead: usize) -> Option<PostTarget> {
        let (current, packets, next) = match self.current {
            Current::Buf(id) => {
                let b = self.bufs.get(&id)?;
                if b.finished {
                    return None;
                }
                let next = b.placed.max(b.seen_end).div_ceil(self.ppp as u64) as usize;
                (Some(id), b.packets(), next)
            }
            Current::None => (None, 0, 0),
            Current::Copy(_) => return None,
        };
        let at = next.saturating_add(ahead);
        let (id, index) = match current {
            Some(id) if at < packets => (id, at),
            _ => {
                let len = self.ahead_len?;
                let per = len.div_ceil(self.ppp).max(1);
                let k = (at - packets.min(at)) / per;
                if k >= MAX_AHEAD {
                    return None;
                }
                while self.ahead.len() <= k {
                    let id = self.alloc(None, len);
                    self.ahead.push_back(id);
                }
                (self.ahead[k], (at - packets.min(at)) % per)
            }
        };
        let ppp = self.ppp;
        let b = self.bufs.get_mut(&id)?;
        let offset = (index * ppp) as u64;
        if b.posted[index] {
            return None;
        }
        b.set_posted(offset, true);
        // SAFETY: index < packets, so offset + ppp <= cap.
        let ptr = unsafe { b.ptr.add(index * ppp) };
        Some(PostTarget {
            buf: id,
            offset,
            ptr,
            base: b.ptr,
            cap: b.cap,
            len: ppp,
        })
    }

    /// A WR returned by [`FlowLanding::next_post`] was not posted after all.
    pub fn unpost(&mut self, buf: u64, offset: u64) {
        if let Some(b) = self.bufs.get_mut(&buf) {
            b.set_posted(offset, false);
        }
    }

    /// A DATA packet of message `msg_id` at `offset` arrived (by any WR).
    pub fn saw(&mut self, msg_id: u64, offset: u64) {
        if let Current::Buf(id) = self.current {
            let ppp = self.ppp as u64;
            if let Some(b) = self.bufs.get_mut(&id).filter(|b| b.msg_id == Some(msg_id)) {
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
                !b.finished
                    && b.placed == offset
                    && b.msg_id == Some(msg_id)
                    && b.overlaps_posted(offset, 1)
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

    /// The WR into (`buf`, `offset`) completed: the NIC writes there no more.
    /// Deferred writes that no WR covers any more are made now.
    pub fn consumed(&mut self, buf: u64, offset: u64) {
        let Some(b) = self.bufs.get_mut(&buf) else {
            return;
        };
        b.set_posted(offset, false);
        if !b.pending.is_empty() {
            b.flush_pending();
        }
        if b.finished && b.posted_count == 0 {
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
        self.bufs.values().map(|b| b.posted_count).sum()
    }

    /// Marks buffer `id` finished; released at once when no WR uses it.
    fn retire(&mut self, id: u64) {
        if let Some(b) = self.bufs.get_mut(&id) {
            b.finished = true;
            if b.posted_count == 0 {
                self.released.push(id);
            }
        }
    }

    fn abandon_current(&mut self) {
        if let Current::Buf(id) = std::mem::replace(&mut self.current, Current::None) {
            self.retire(id);
        }
    }

    fn drop_ahead(&mut self) {
        while let Some(id) = self.ahead.pop_front() {
            self.counters.ahead_dropped += 1;
            self.retire(id);
        }
    }

    /// A message of `len` bytes begins: a buffer allocated ahead for it, or a
    /// new one.
    fn begin_in_place(&mut self, msg_id: u64, len: usize) {
        let id = match self.ahead.front() {
            Some(&id) if self.ahead_len == Some(len) => {
                self.ahead.pop_front();
                self.counters.ahead_taken += 1;
                id
            }
            _ => {
                self.drop_ahead();
                self.alloc(None, len)
            }
        };
        if let Some(b) = self.bufs.get_mut(&id) {
            b.msg_id = Some(msg_id);
        }
        self.ahead_len = Some(len);
        self.current = Current::Buf(id);
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
        // Replaced or its connection gone: no more WRs into its messages.
        let mut s = lock(&self.state);
        s.abandon_current();
        s.drop_ahead();
        s.ahead_len = None;
    }
}

impl Placement for LandingPlacement {
    fn begin(&mut self, msg_id: u64, msg_len: u64) -> bool {
        let mut s = lock(&self.state);
        s.abandon_current();
        match usize::try_from(msg_len) {
            Ok(len) if (s.min_len..=s.limit).contains(&msg_len) => s.begin_in_place(msg_id, len),
            _ => {
                s.drop_ahead();
                s.ahead_len = None;
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
        if b.overlaps_posted(offset, len) || offset.checked_add(len as u64)? > b.len as u64 {
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
                if b.overlaps_posted(offset, payload.len()) {
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
                let Some(b) = s.bufs.get_mut(&id) else {
                    return Vec::new();
                };
                b.finished = true;
                let (v, whole) = b.take();
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
#[path = "landing_tests.rs"]
mod tests;
