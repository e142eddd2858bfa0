//! The bytes behind a memory region: memory the region owns (anonymous, page-aligned,
//! behind a lock) or memory the application owns and registered with
//! [`ProtectionDomain::register_external`](crate::ProtectionDomain::register_external)
//! (the libibverbs drop-in, `rondo-ibv`, registers the buffers of unmodified verbs
//! programs that way).
//!
//! Every access is a copy of a byte range in or out. External memory is copied
//! through raw pointers and never viewed as a Rust slice: the application may read
//! (or, against the verbs contract, write) its buffer while the transport places
//! bytes into it, as it may with a NIC, and a `&mut [u8]` over memory someone else
//! touches would be undefined behaviour. This module is the only unsafe code of the
//! crate.
#![allow(unsafe_code)]

use crate::VerbsError;
use memmap2::MmapMut;
use std::sync::{Mutex, MutexGuard};

/// Where a region's bytes live.
#[derive(Debug)]
pub(crate) enum Memory {
    /// Owned by the region.
    Owned(Mutex<MmapMut>),
    /// Owned by the application (see [`Memory::external`]'s contract).
    External {
        /// First byte.
        ptr: *mut u8,
        /// Length in bytes.
        len: usize,
    },
}

// SAFETY: `External` is a plain address range that the registrant promised stays
// valid for reads and writes, from any thread, until the region is dropped
// (`Memory::external`); all access goes through `copy_in`/`copy_out`, byte copies
// that create no references.
unsafe impl Send for Memory {}
// SAFETY: as for `Send`: shared access only copies bytes through raw pointers.
unsafe impl Sync for Memory {}

impl Memory {
    /// `len` bytes of new, zeroed, page-aligned memory.
    pub(crate) fn owned(len: usize) -> Result<Memory, VerbsError> {
        let mem = MmapMut::map_anon(len).map_err(|e| VerbsError::Alloc {
            bytes: len,
            reason: e.to_string(),
        })?;
        Ok(Memory::Owned(Mutex::new(mem)))
    }

    /// The application's `len` bytes at `ptr`.
    ///
    /// # Safety
    /// `ptr..ptr + len` must stay valid for reads and writes from any thread for as
    /// long as the returned value lives (the region and every work request that
    /// names it), and must not be unmapped or freed before.
    pub(crate) unsafe fn external(ptr: *mut u8, len: usize) -> Memory {
        Memory::External { ptr, len }
    }

    /// Address of the first byte.
    pub(crate) fn addr(&self) -> u64 {
        match self {
            Memory::Owned(m) => lock(m).as_ptr() as u64,
            Memory::External { ptr, .. } => *ptr as u64,
        }
    }

    /// Length in bytes.
    pub(crate) fn len(&self) -> usize {
        match self {
            Memory::Owned(m) => lock(m).len(),
            Memory::External { len, .. } => *len,
        }
    }

    /// Whether the application owns the bytes.
    pub(crate) fn is_external(&self) -> bool {
        matches!(self, Memory::External { .. })
    }

    /// Copies `src` into the region at `off`; false (nothing copied) when the range
    /// is not wholly inside.
    pub(crate) fn copy_in(&self, off: usize, src: &[u8]) -> bool {
        if !inside(off, src.len(), self.len()) {
            return false;
        }
        match self {
            Memory::Owned(m) => lock(m)[off..off + src.len()].copy_from_slice(src),
            // SAFETY: in bounds (checked above) of a range valid for writes
            // (`Memory::external`'s contract); `src` is a Rust slice, so it is not
            // the application's memory being written and the ranges do not overlap.
            Memory::External { ptr, .. } => unsafe {
                std::ptr::copy_nonoverlapping(src.as_ptr(), ptr.add(off), src.len())
            },
        }
        true
    }

    /// Copies the region's bytes at `off` into `dst`; false (nothing copied) when the
    /// range is not wholly inside.
    pub(crate) fn copy_out(&self, off: usize, dst: &mut [u8]) -> bool {
        if !inside(off, dst.len(), self.len()) {
            return false;
        }
        match self {
            Memory::Owned(m) => dst.copy_from_slice(&lock(m)[off..off + dst.len()]),
            // SAFETY: in bounds (checked above) of a range valid for reads
            // (`Memory::external`'s contract); `dst` is a Rust slice of our own.
            Memory::External { ptr, .. } => unsafe {
                std::ptr::copy_nonoverlapping(ptr.add(off), dst.as_mut_ptr(), dst.len())
            },
        }
        true
    }

    /// Runs `f` on the bytes: owned memory locked in place; external memory on a
    /// copy that is written back after `f` (it is never viewed as a slice).
    pub(crate) fn with_bytes<R>(&self, f: impl FnOnce(&mut [u8]) -> R) -> R {
        match self {
            Memory::Owned(m) => f(&mut lock(m)[..]),
            Memory::External { len, .. } => {
                let mut copy = vec![0; *len];
                self.copy_out(0, &mut copy);
                let r = f(&mut copy);
                self.copy_in(0, &copy);
                r
            }
        }
    }
}

fn inside(off: usize, len: usize, total: usize) -> bool {
    off.checked_add(len).is_some_and(|end| end <= total)
}

/// A panic elsewhere while the lock was held leaves bytes, not broken invariants,
/// so a poisoned lock is taken over.
fn lock(m: &Mutex<MmapMut>) -> MutexGuard<'_, MmapMut> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owned_and_external_memory_copy_in_and_out_and_refuse_out_of_bounds() {
        let owned = Memory::owned(64).unwrap();
        let mut buf = vec![0u8; 64];
        // SAFETY: `buf` outlives `ext` and is not moved while it lives.
        let ext = unsafe { Memory::external(buf.as_mut_ptr(), buf.len()) };
        for m in [&owned, &ext] {
            assert!(m.copy_in(60, b"abcd"));
            assert!(!m.copy_in(61, b"abcd"), "one byte past the end");
            assert!(!m.copy_in(usize::MAX, b"a"), "overflowing offset");
            let mut got = [0u8; 4];
            assert!(m.copy_out(60, &mut got));
            assert_eq!(&got, b"abcd");
            assert!(!m.copy_out(63, &mut got));
            assert_eq!(m.len(), 64);
        }
        assert!(ext.is_external() && !owned.is_external());
        for m in [&owned, &ext] {
            assert_eq!(m.with_bytes(|s| std::mem::replace(&mut s[60], b'z')), b'a');
            let mut got = [0u8; 1];
            assert!(m.copy_out(60, &mut got));
            assert_eq!(got, *b"z", "with_bytes writes back");
        }
        drop(ext);
        assert_eq!(
            &buf[60..],
            b"zbcd",
            "external bytes landed in the caller's buffer"
        );
    }
}
