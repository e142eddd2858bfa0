//! Protection domains and memory regions.
//!
//! A region's memory is owned by the region: page-aligned anonymous memory mapped at
//! registration, so that the transport can place WRITEs and READ responses into it
//! without the application keeping a buffer alive. The application reads and writes
//! it through [`MemoryRegion::read`], [`MemoryRegion::write`] and
//! [`MemoryRegion::with_slice`]. A program that must keep its own buffer (an
//! unmodified verbs program under the `rondo-ibv` drop-in) registers it with the
//! `unsafe` [`ProtectionDomain::register_external`] instead (`crate::memory`).

use crate::context::Context;
use crate::memory::Memory;
use crate::types::AccessFlags;
use crate::VerbsError;
use std::sync::Arc;

/// A region as the transport sees it: keys, rights, and the memory.
#[derive(Debug)]
pub(crate) struct MrShared {
    pub lkey: u32,
    pub rkey: u32,
    pub pd: u32,
    pub access: AccessFlags,
    pub addr: u64,
    pub len: usize,
    mem: Memory,
}

impl MrShared {
    pub(crate) fn new(len: usize, pd: u32, access: AccessFlags) -> Result<MrShared, VerbsError> {
        if len == 0 {
            return Err(VerbsError::InvalidAttr {
                name: "len",
                reason: "a memory region holds at least one byte".into(),
            });
        }
        Ok(Self::over(Memory::owned(len)?, pd, access))
    }

    /// A region over `mem` (keys are set at registration).
    pub(crate) fn over(mem: Memory, pd: u32, access: AccessFlags) -> MrShared {
        MrShared {
            lkey: 0,
            rkey: 0,
            pd,
            access,
            addr: mem.addr(),
            len: mem.len(),
            mem,
        }
    }

    /// Copies `src` into the region at offset `off` (false: outside the region).
    pub(crate) fn copy_in(&self, off: usize, src: &[u8]) -> bool {
        self.mem.copy_in(off, src)
    }

    /// Copies the region's bytes at offset `off` into `dst` (false: outside).
    pub(crate) fn copy_out(&self, off: usize, dst: &mut [u8]) -> bool {
        self.mem.copy_out(off, dst)
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
        self.register_shared(MrShared::new(len, self.id(), access)?)
    }

    /// Registers the application's `len` bytes at `addr` with `access`
    /// (`ibv_reg_mr` over the caller's buffer). The transport copies bytes in and
    /// out through raw pointers, never through references, so the caller may read
    /// the buffer while requests land in it, as with a NIC.
    ///
    /// # Safety
    /// `addr..addr + len` must be valid for reads and writes, from any thread, until
    /// the returned region and every clone of it are dropped and no posted work
    /// request names it any more (destroy or drain the QPs that use it first); it
    /// must not be freed or unmapped before.
    #[allow(unsafe_code)]
    pub unsafe fn register_external(
        &self,
        addr: *mut u8,
        len: usize,
        access: AccessFlags,
    ) -> Result<MemoryRegion, VerbsError> {
        if len == 0 || addr.is_null() {
            return Err(VerbsError::InvalidAttr {
                name: "len",
                reason: "an external region needs a non-null address and at least one byte".into(),
            });
        }
        if (addr as usize).checked_add(len).is_none() {
            return Err(VerbsError::InvalidAttr {
                name: "len",
                reason: format!("{len} bytes at {addr:p} wrap around the address space"),
            });
        }
        // SAFETY: the caller's contract is `Memory::external`'s.
        let mem = unsafe { Memory::external(addr, len) };
        self.register_shared(MrShared::over(mem, self.id(), access))
    }

    fn register_shared(&self, mr: MrShared) -> Result<MemoryRegion, VerbsError> {
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
        self.inner.shared.copy_in(offset, src);
        Ok(())
    }

    /// Copies bytes at `offset` into `dst`.
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> Result<(), VerbsError> {
        self.check(offset, dst.len())?;
        self.inner.shared.copy_out(offset, dst);
        Ok(())
    }

    /// Whether the region is the application's memory
    /// ([`ProtectionDomain::register_external`]).
    pub fn is_external(&self) -> bool {
        self.inner.shared.mem.is_external()
    }

    /// Runs `f` on the whole region, locked against the transport. Do not call other
    /// verbs from `f` (the transport may be waiting for this lock). An external
    /// region is never viewed as a slice: `f` runs on a copy, written back after it.
    pub fn with_slice<R>(&self, f: impl FnOnce(&mut [u8]) -> R) -> R {
        self.inner.shared.mem.with_bytes(f)
    }
}
