//! One message buffer of a flow's in-place landing: an allocation of whole
//! packets that the NIC writes into through posted receive WRs, with the
//! bookkeeping of which packets have a WR posted and which bytes wait for one.
#![allow(unsafe_code)] // memory the NIC writes into; each block says why it is sound

use std::collections::HashMap;

/// A message buffer: `len` bytes in an allocation of whole packets.
#[derive(Debug)]
pub(super) struct LandingBuf {
    pub(super) ptr: *mut u8,
    pub(super) len: usize,
    pub(super) cap: usize,
    ppp: usize,
    /// The message; `None` while allocated ahead.
    pub(super) msg_id: Option<u64>,
    /// Bytes placed in order (the engine's progress).
    pub(super) placed: u64,
    /// End of the furthest packet of this message seen arriving (the next one
    /// in order starts there).
    pub(super) seen_end: u64,
    /// Per packet: a WR is posted there (never two: see `FlowLanding::next_post`).
    pub(super) posted: Vec<bool>,
    pub(super) posted_count: usize,
    /// Deferred writes: offset -> bytes.
    pub(super) pending: HashMap<u64, Vec<u8>>,
    /// Delivered or abandoned by the engine.
    pub(super) finished: bool,
}

// SAFETY: the buffer owns its allocation (a leaked Vec<u8>); it is only reached
// through the mutex of its FlowLanding, or by the NIC through posted WRs.
unsafe impl Send for LandingBuf {}

impl LandingBuf {
    pub(super) fn new(msg_id: Option<u64>, len: usize, ppp: usize) -> LandingBuf {
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

    pub(super) fn packets(&self) -> usize {
        self.posted.len()
    }

    /// Bytes `offset..offset + len` (within the allocation), to write.
    pub(super) fn bytes_mut(&mut self, offset: u64, len: usize) -> Option<&mut [u8]> {
        let start = usize::try_from(offset).ok()?;
        if start.checked_add(len)? > self.cap {
            return None;
        }
        // SAFETY: in bounds of the allocation (checked); callers check that no
        // WR is posted over these bytes, so nothing else writes them.
        Some(unsafe { std::slice::from_raw_parts_mut(self.ptr.add(start), len) })
    }

    /// True when a WR is posted over any of bytes `offset..offset + len`.
    pub(super) fn overlaps_posted(&self, offset: u64, len: usize) -> bool {
        let ppp = self.ppp as u64;
        let first = offset / ppp;
        let last = (offset + len.max(1) as u64 - 1) / ppp;
        (first..=last).any(|i| self.posted.get(i as usize).copied().unwrap_or(false))
    }

    pub(super) fn set_posted(&mut self, offset: u64, on: bool) {
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
    pub(super) fn flush_pending(&mut self) {
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
    pub(super) fn take(&mut self) -> (Vec<u8>, bool) {
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
