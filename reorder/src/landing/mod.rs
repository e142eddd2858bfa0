//! In-place landing (DESIGN.md, "Receive placement: in order means zero copy"):
//! the message buffers a NIC receives payloads into, one [`FlowLanding`] per flow.
//!
//! A datapath posts receive WRs in expected order (one packet each) with two
//! scatter entries: its headers into the WR's ring slot, the payload straight into
//! a message buffer at that packet's offset ([`FlowLanding::next_post`]): the
//! buffer of the message being placed, and past its end the buffers of the
//! messages expected after it (as long as the last one, allocated ahead and taken
//! over when such a message begins; dropped when one of another length comes).
//! The engine side places the flow's messages through the same state
//! ([`FlowLanding::begin`], [`FlowLanding::target`], [`FlowLanding::place`],
//! [`FlowLanding::commit`], [`FlowLanding::finish`]: what an engine placement
//! forwards). The buffers belong to the landing, not to the engine, because a
//! posted WR cannot be taken back:
//! - bytes the engine places where a WR is still posted are held aside (a
//!   deferred write) and written when that WR completes, so a datagram landing in
//!   that WR can never overwrite them;
//! - a message finished while WRs into its buffer are posted is handed to the
//!   application as a copy, and the buffer is freed when its last WR completes;
//!   otherwise the buffer itself becomes the message (no copy);
//! - what lands in a WR is written by the engine into the place only after the
//!   engine checked it (PSN, flow, token, message, offset): a datagram whose header
//!   names another PSN or flow is copied out of the WR's place
//!   ([`FlowLanding::read_landed`]) and handed over like any datagram, so it never
//!   reaches a place it does not own.

mod buf;

use buf::LandingBuf;
use std::collections::{HashMap, VecDeque};

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

#[derive(Debug)]
enum Current {
    None,
    Copy(Vec<u8>),
    Buf(u64),
}

/// One WR's payload target, for the datapath to post.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PostTarget {
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

/// The landing of one flow: its message buffers, which WRs are posted into them,
/// and the message the engine is placing. A datapath shares it (behind a lock)
/// between its engine placement and its receive path.
#[derive(Debug)]
pub struct FlowLanding {
    /// Payload bytes of a full data packet.
    ppp: usize,
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
    /// Buffers no longer used, waiting for the datapath to deregister them.
    released: Vec<u64>,
    /// What happened to the flow's messages so far.
    pub counters: LandingCounters,
}

impl FlowLanding {
    /// The landing of a flow whose full data packets carry `ppp` payload bytes;
    /// messages of `min_len..=limit` bytes are received in place, others by copy.
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
        // index < packets, so offset + ppp <= cap: inside the allocation.
        let ptr = b.ptr.wrapping_add(index * ppp);
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
    pub fn placed(&self) -> Option<u64> {
        match self.current {
            Current::Buf(id) => self.bufs.get(&id).map(|b| b.placed),
            _ => None,
        }
    }

    /// WRs posted into buffers of this flow.
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

/// The engine's side: what a placement of the flow's messages forwards (the
/// engine's `Placement` trait, method for method).
impl FlowLanding {
    /// A message of `msg_len` bytes begins (the one before it, unfinished, is
    /// abandoned): in place when its length is in range, by copy otherwise.
    /// Always accepts it.
    pub fn begin(&mut self, msg_id: u64, msg_len: u64) -> bool {
        self.abandon_current();
        match usize::try_from(msg_len) {
            Ok(len) if (self.min_len..=self.limit).contains(&msg_len) => {
                self.begin_in_place(msg_id, len)
            }
            _ => {
                self.drop_ahead();
                self.ahead_len = None;
                self.counters.copied_messages += 1;
                self.current =
                    Current::Copy(Vec::with_capacity(msg_len.min(MAX_PREALLOC) as usize));
            }
        }
        true
    }

    /// Where bytes `offset..offset + len` of the message being placed in place go,
    /// for the engine to write them itself; `None` where a WR is posted over them
    /// (the NIC may still write there), past the message's end, or for a message
    /// received by copy. The pointer is valid for `len` bytes of writes until the
    /// next call of `begin`, `finish` or `close`, while no WR is posted over them.
    pub fn target(&mut self, offset: u64, len: usize) -> Option<*mut u8> {
        let Current::Buf(id) = self.current else {
            return None;
        };
        let b = self.bufs.get_mut(&id)?;
        if b.overlaps_posted(offset, len) || offset.checked_add(len as u64)? > b.len as u64 {
            return None;
        }
        Some(b.bytes_mut(offset, len)?.as_mut_ptr())
    }

    /// Copies `payload`, the message's bytes at `offset` in order, to its place
    /// (held aside until the WR posted there completes, if there is one).
    pub fn place(&mut self, offset: u64, payload: &[u8]) {
        match &mut self.current {
            Current::None => {}
            Current::Copy(v) => v.extend_from_slice(payload),
            Current::Buf(id) => {
                let Some(b) = self.bufs.get_mut(id) else {
                    return;
                };
                if offset + payload.len() as u64 > b.len as u64 {
                    return;
                }
                if b.overlaps_posted(offset, payload.len()) {
                    b.pending.insert(offset, payload.to_vec());
                    self.counters.deferred_writes += 1;
                } else if let Some(dst) = b.bytes_mut(offset, payload.len()) {
                    dst.copy_from_slice(payload);
                }
                b.placed = offset + payload.len() as u64;
            }
        }
    }

    /// `len` bytes at `offset` are at their place already (received there, or
    /// written through [`FlowLanding::target`]).
    pub fn commit(&mut self, offset: u64, len: usize) {
        let Current::Buf(id) = self.current else {
            return;
        };
        if let Some(b) = self.bufs.get_mut(&id) {
            b.placed = offset + len as u64;
        }
    }

    /// The message is complete: its bytes, the buffer itself when no WR is posted
    /// into it (no copy; its registration is released), a copy otherwise.
    pub fn finish(&mut self) -> Vec<u8> {
        match std::mem::replace(&mut self.current, Current::None) {
            Current::None => Vec::new(),
            Current::Copy(v) => v,
            Current::Buf(id) => {
                let Some(b) = self.bufs.get_mut(&id) else {
                    return Vec::new();
                };
                b.finished = true;
                let (v, whole) = b.take();
                if whole {
                    self.counters.zero_copy_messages += 1;
                    self.released.push(id); // the registration goes; the memory is the Vec's now
                } else {
                    self.counters.finish_copies += 1;
                }
                v
            }
        }
    }

    /// The flow's placement is gone (replaced, or its connection closed): no more
    /// WRs into its messages; buffers are released as their WRs complete.
    pub fn close(&mut self) {
        self.abandon_current();
        self.drop_ahead();
        self.ahead_len = None;
    }
}

#[cfg(test)]
mod tests;
