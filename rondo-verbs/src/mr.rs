//! Protection domains and memory regions.
//!
//! A region's memory is owned by the region: page-aligned anonymous memory mapped at
//! registration, so that the transport can place WRITEs and READ responses into it
//! without the application keeping a buffer alive. The application reads and writes
//! it through [`MemoryRegion::read`], [`MemoryRegion::write`] and
//! [`MemoryRegion::with_slice`].

use crate::context::Context;
use crate::types::AccessFlags;
use crate::VerbsError;
use memmap2::MmapMut;
use std::sync::{Arc, Mutex, MutexGuard};

/// A region as the transport sees it: keys, rights, and the memory.
#[derive(Debug)]
pub(crate) struct MrShared {
    pub lkey: u32,
    pub rkey: u32,
    pub pd: u32,
    pub access: AccessFlags,
    pub addr: u64,
    pub len: usize,
    mem: Mutex<MmapMut>,
}

impl MrShared {
    pub(crate) fn new(len: usize, pd: u32, access: AccessFlags) -> Result<MrShared, VerbsError> {
        if len == 0 {
            return Err(VerbsError::InvalidAttr {
                name: "len",
                reason: "a memory region holds at least one byte".into(),
            });
        }
        let mem = MmapMut::map_anon(len).map_err(|e| VerbsError::Alloc {
            bytes: len,
            reason: e.to_string(),
        })?;
        Ok(MrShared {
            lkey: 0,
            rkey: 0,
            pd,
            access,
            addr: mem.as_ptr() as u64,
            len,
            mem: Mutex::new(mem),
        })
    }

    /// The memory, locked. A panic elsewhere while it was held leaves bytes, not
    /// broken invariants, so a poisoned lock is taken over.
    pub(crate) fn lock(&self) -> MutexGuard<'_, MmapMut> {
        self.mem.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Offset of `[addr, addr + len)` inside the region, if it lies wholly inside.
    pub(crate) fn offset_of(&self, addr: u64, len: u64) -> Option<usize> {
        let off = addr.checked_sub(self.addr)?;
        let end = off.checked_add(len)?;
        (end <= self.len as u64).then_some(off as usize)
    }
}

struct PdInner {
    id: u32,
    ctx: Context,
}

/// A protection domain (`ibv_pd`): regions and QPs of one PD work together only.
#[derive(Clone)]
pub struct ProtectionDomain {
    inner: Arc<PdInner>,
}

impl core::fmt::Debug for ProtectionDomain {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ProtectionDomain")
            .field("id", &self.inner.id)
            .finish()
    }
}

impl ProtectionDomain {
    pub(crate) fn new(ctx: Context, id: u32) -> ProtectionDomain {
        ProtectionDomain {
            inner: Arc::new(PdInner { id, ctx }),
        }
    }

    pub(crate) fn id(&self) -> u32 {
        self.inner.id
    }

    pub(crate) fn context(&self) -> &Context {
        &self.inner.ctx
    }

    /// Registers `len` bytes of new, zeroed, page-aligned memory with `access`
    /// (`ibv_reg_mr`). Keys are random per registration.
    pub fn register(&self, len: usize, access: AccessFlags) -> Result<MemoryRegion, VerbsError> {
        let mr = MrShared::new(len, self.id(), access)?;
        let shared = self.inner.ctx.register(mr)?;
        Ok(MemoryRegion {
            inner: Arc::new(MrInner {
                shared,
                pd: self.clone(),
            }),
        })
    }
}

struct MrInner {
    shared: Arc<MrShared>,
    pd: ProtectionDomain,
}

impl Drop for MrInner {
    fn drop(&mut self) {
        self.pd
            .context()
            .deregister(self.shared.lkey, self.shared.rkey);
    }
}

/// A registered memory region (`ibv_mr`); deregistered when the last clone drops.
#[derive(Clone)]
pub struct MemoryRegion {
    inner: Arc<MrInner>,
}

impl core::fmt::Debug for MemoryRegion {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("MemoryRegion")
            .field("addr", &format_args!("{:#x}", self.addr()))
            .field("len", &self.len())
            .field("access", &self.access())
            .finish()
    }
}

impl MemoryRegion {
    /// Local key: names the region in local scatter/gather entries.
    pub fn lkey(&self) -> u32 {
        self.inner.shared.lkey
    }
    /// Remote key: hand it to a peer for WRITE/READ.
    pub fn rkey(&self) -> u32 {
        self.inner.shared.rkey
    }
    /// Virtual address of the first byte.
    pub fn addr(&self) -> u64 {
        self.inner.shared.addr
    }
    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.inner.shared.len
    }
    /// Always false: regions hold at least one byte.
    pub fn is_empty(&self) -> bool {
        false
    }
    /// Access rights.
    pub fn access(&self) -> AccessFlags {
        self.inner.shared.access
    }
    /// The protection domain.
    pub fn pd(&self) -> &ProtectionDomain {
        &self.inner.pd
    }

    fn check(&self, offset: usize, len: usize) -> Result<(), VerbsError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len() => Ok(()),
            _ => Err(VerbsError::OutOfBounds {
                offset,
                len,
                region: self.len(),
            }),
        }
    }

    /// Copies `src` into the region at `offset`.
    pub fn write(&self, offset: usize, src: &[u8]) -> Result<(), VerbsError> {
        self.check(offset, src.len())?;
        self.inner.shared.lock()[offset..offset + src.len()].copy_from_slice(src);
        Ok(())
    }

    /// Copies bytes at `offset` into `dst`.
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> Result<(), VerbsError> {
        self.check(offset, dst.len())?;
        dst.copy_from_slice(&self.inner.shared.lock()[offset..offset + dst.len()]);
        Ok(())
    }

    /// Runs `f` on the whole region, locked against the transport. Do not call other
    /// verbs from `f` (the transport may be waiting for this lock).
    pub fn with_slice<R>(&self, f: impl FnOnce(&mut [u8]) -> R) -> R {
        f(&mut self.inner.shared.lock()[..])
    }
}
