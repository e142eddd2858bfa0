//! Extended completion queues with NIC completion timestamps.
//!
//! `ibv_query_device_ex`, `ibv_create_cq_ex` and the `ibv_start_poll` family are
//! `static inline` in `verbs.h`, so bindgen does not bind them. The poll calls are
//! plain function pointers of `struct ibv_cq_ex`, which bindgen does generate. The
//! two others go through the provider's `struct verbs_context`, which bindgen does
//! not generate (the crate allowlists `ibv_*` types): it is the ops table that
//! `verbs.h` places right before `struct ibv_context` (its last member), reached
//! the way `verbs_get_ctx_op` reaches it. [`VerbsContextOps`] mirrors the members
//! used here, at their distances from `struct ibv_context` in rdma-core 55's
//! `verbs.h` (checked with `offsetof` against that header: `query_rt_values` 128,
//! `create_cq_ex` 120, `query_device_ex` 104, `sz` 8 bytes before the context);
//! those members have not moved since they were added (the struct grows at its
//! start). No C shim is needed, so the crate's build stays cargo-only.
#![allow(unsafe_code)] // the verbs FFI of this datapath; each block says why it is sound

use super::{Context, ContextInner, VerbsError};
use crate::verbs::driver::Completion;
use crate::verbs::timestamp::NicClock;
use ibverbs_sys as ffi;
use std::ptr;
use std::sync::Arc;

/// Bytes from a member of `struct verbs_context` to its `struct ibv_context`.
mod offset {
    pub const QUERY_DEVICE_EX: usize = 104;
    pub const CREATE_CQ_EX: usize = 120;
    pub const SZ: usize = 8;
}

type QueryDeviceEx = unsafe extern "C" fn(
    *mut ffi::ibv_context,
    *const ffi::ibv_query_device_ex_input,
    *mut ffi::ibv_device_attr_ex,
    usize,
) -> i32;
type CreateCqEx = unsafe extern "C" fn(
    *mut ffi::ibv_context,
    *mut ffi::ibv_cq_init_attr_ex,
) -> *mut ffi::ibv_cq_ex;

/// The ops of a context's `struct verbs_context` used here.
struct VerbsContextOps {
    query_device_ex: Option<QueryDeviceEx>,
    create_cq_ex: Option<CreateCqEx>,
}

impl VerbsContextOps {
    /// `verbs_get_ctx_op` for both ops: `None` where the provider's context is not
    /// extended or too small to hold the op.
    ///
    /// # Safety
    /// `ctx` must be an open device context.
    unsafe fn of(ctx: *mut ffi::ibv_context) -> VerbsContextOps {
        let none = VerbsContextOps {
            query_device_ex: None,
            create_cq_ex: None,
        };
        // SAFETY: `ctx` is open; `abi_compat` is a plain field of it.
        if unsafe { (*ctx).abi_compat } as usize != usize::MAX {
            return none; // not a verbs_context (__VERBS_ABI_IS_EXTENDED)
        }
        let base = ctx.cast::<u8>();
        // SAFETY: an extended context lies at the end of a verbs_context, whose
        // `sz` member is the size_t right before it.
        let sz = unsafe { ptr::read_unaligned(base.sub(offset::SZ).cast::<usize>()) };
        let ctx_len = std::mem::size_of::<ffi::ibv_context>();
        // verbs_get_ctx_op: the op is there when sz covers it (sz counts from the
        // op's offset to the end of the struct, context included).
        let read = |off: usize| -> Option<usize> {
            if sz < off + ctx_len {
                return None;
            }
            // SAFETY: `off` bytes before the context lie inside the verbs_context
            // (checked against `sz` above); the member is a function pointer.
            let f = unsafe { ptr::read_unaligned(base.sub(off).cast::<usize>()) };
            (f != 0).then_some(f)
        };
        VerbsContextOps {
            // SAFETY: a non-null member at these offsets has these signatures
            // (verbs.h of rdma-core 55).
            query_device_ex: read(offset::QUERY_DEVICE_EX)
                .map(|f| unsafe { std::mem::transmute::<usize, QueryDeviceEx>(f) }),
            // SAFETY: as above.
            create_cq_ex: read(offset::CREATE_CQ_EX)
                .map(|f| unsafe { std::mem::transmute::<usize, CreateCqEx>(f) }),
        }
    }
}

impl Context {
    /// The device's completion clock (`ibv_query_device_ex`:
    /// `completion_timestamp_mask`, `hca_core_clock`), or `None` when the device
    /// or its provider offers no completion timestamps.
    pub fn completion_clock(&self) -> Option<NicClock> {
        // SAFETY: the context is open.
        let ops = unsafe { VerbsContextOps::of(self.inner.ctx) };
        let query = ops.query_device_ex?;
        ops.create_cq_ex?;
        // SAFETY: ibv_device_attr_ex is plain C data; all-zero is valid.
        let mut attr: ffi::ibv_device_attr_ex = unsafe { std::mem::zeroed() };
        // SAFETY: the op of this context, with no input and an out-parameter of
        // the size passed (what ibv_query_device_ex does).
        let rc = unsafe {
            query(
                self.inner.ctx,
                ptr::null(),
                &mut attr,
                std::mem::size_of::<ffi::ibv_device_attr_ex>(),
            )
        };
        if rc != 0 {
            return None;
        }
        NicClock::new(attr.completion_timestamp_mask, attr.hca_core_clock)
    }

    /// Creates an extended CQ of at least `entries` entries whose completions
    /// carry the NIC completion timestamp.
    pub fn create_cq_ex(&self, entries: usize) -> Result<CqEx, VerbsError> {
        // SAFETY: the context is open.
        let ops = unsafe { VerbsContextOps::of(self.inner.ctx) };
        let create = ops
            .create_cq_ex
            .ok_or(VerbsError::Config("this device has no ibv_create_cq_ex"))?;
        let cqe = u32::try_from(entries).map_err(|_| VerbsError::Config("CQ size above u32"))?;
        let flags = ffi::IBV_WC_EX_WITH_BYTE_LEN | ffi::IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;
        let mut attr = ffi::ibv_cq_init_attr_ex {
            cqe,
            cq_context: ptr::null_mut(),
            channel: ptr::null_mut(),
            comp_vector: 0,
            wc_flags: u64::from(flags),
            comp_mask: 0,
            flags: 0,
            parent_domain: ptr::null_mut(),
        };
        // SAFETY: the op of this open context, with a fully initialised attribute.
        let cq = unsafe { create(self.inner.ctx, &mut attr) };
        if cq.is_null() {
            return Err(VerbsError::last("ibv_create_cq_ex"));
        }
        Ok(CqEx {
            inner: Arc::new(CqExInner {
                cq,
                _ctx: self.inner.clone(),
            }),
        })
    }
}

#[derive(Debug)]
pub(super) struct CqExInner {
    cq: *mut ffi::ibv_cq_ex,
    _ctx: Arc<ContextInner>,
}
// SAFETY: verbs objects may be used from any thread.
unsafe impl Send for CqExInner {}
// SAFETY: as above.
unsafe impl Sync for CqExInner {}
impl Drop for CqExInner {
    fn drop(&mut self) {
        // SAFETY: an ibv_cq_ex starts with the members of an ibv_cq
        // (ibv_cq_ex_to_cq is a cast); QPs using it hold an Arc to this inner.
        unsafe { ffi::ibv_destroy_cq(self.cq.cast()) };
    }
}

/// An extended completion queue (completion timestamps).
#[derive(Clone, Debug)]
pub struct CqEx {
    pub(super) inner: Arc<CqExInner>,
}

impl CqEx {
    /// The CQ as a plain `ibv_cq`, for QP creation.
    pub(super) fn as_cq(&self) -> *mut ffi::ibv_cq {
        self.inner.cq.cast()
    }

    /// Polls up to `out.len()` completions, each with its raw NIC timestamp.
    pub(crate) fn poll(&self, out: &mut [Completion]) -> Result<usize, VerbsError> {
        if out.is_empty() {
            return Ok(0);
        }
        let cq = self.inner.cq;
        // SAFETY: the CQ is alive; the provider set these function pointers when
        // it created the CQ with the wc_flags above.
        let (start, next, end) = unsafe { ((*cq).start_poll, (*cq).next_poll, (*cq).end_poll) };
        let (Some(start), Some(next), Some(end)) = (start, next, end) else {
            return Err(VerbsError::Config("provider's extended CQ has no poll ops"));
        };
        let mut attr = ffi::ibv_poll_cq_attr { comp_mask: 0 };
        // SAFETY: as above; ENOENT means an empty CQ, and then end_poll must not
        // be called.
        let rc = unsafe { start(cq, &mut attr) };
        if rc == libc::ENOENT {
            return Ok(0);
        }
        if rc != 0 {
            return Err(VerbsError::call("ibv_start_poll", rc));
        }
        let mut n = 0;
        loop {
            // SAFETY: between a successful start/next_poll and end_poll the
            // current completion's fields may be read.
            out[n] = unsafe { read_current(cq) };
            n += 1;
            if n == out.len() {
                break;
            }
            // SAFETY: as above.
            let rc = unsafe { next(cq) };
            if rc == libc::ENOENT {
                break;
            }
            if rc != 0 {
                // SAFETY: a poll was started.
                unsafe { end(cq) };
                return Err(VerbsError::call("ibv_next_poll", rc));
            }
        }
        // SAFETY: a poll was started and not yet ended.
        unsafe { end(cq) };
        Ok(n)
    }
}

/// The current completion of a started poll.
///
/// # Safety
/// A poll of `cq` must be started and not ended.
unsafe fn read_current(cq: *mut ffi::ibv_cq_ex) -> Completion {
    // SAFETY: the caller started a poll; status and wr_id are plain fields.
    let (status, wr_id) = unsafe { ((*cq).status, (*cq).wr_id) };
    if status != ffi::ibv_wc_status::IBV_WC_SUCCESS {
        // Only the id and the status of an error completion are meaningful.
        return Completion {
            wr_id,
            ..Completion::default()
        };
    }
    // SAFETY: the read ops belong to this CQ, which was created with the byte
    // length and the completion timestamp in its wc_flags (`read_wc_flags` is
    // always set), and may be called during a poll.
    let (byte_len, flags, ts) = unsafe {
        (
            (*cq).read_byte_len.map_or(0, |f| f(cq)),
            (*cq).read_wc_flags.map_or(0, |f| f(cq)),
            (*cq).read_completion_ts.map(|f| f(cq)),
        )
    };
    Completion {
        wr_id,
        ok: true,
        byte_len: byte_len as usize,
        grh: flags & ffi::ibv_wc_flags::IBV_WC_GRH.0 != 0,
        ts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake provider context: a verbs_context tail with the two ops at their
    /// offsets, an `sz` and the ibv_context.
    #[repr(C)]
    struct FakeVerbsContext {
        head: [usize; 14], // query_device_ex at 104 bytes before the context
        sz: usize,
        context: ffi::ibv_context,
    }

    unsafe extern "C" fn fake_query(
        _: *mut ffi::ibv_context,
        _: *const ffi::ibv_query_device_ex_input,
        attr: *mut ffi::ibv_device_attr_ex,
        _: usize,
    ) -> i32 {
        // SAFETY: the caller passes a valid out-parameter.
        unsafe {
            (*attr).completion_timestamp_mask = 0xFFFF_FFFF;
            (*attr).hca_core_clock = 156_250;
        }
        0
    }

    #[test]
    fn verbs_context_ops_are_found_at_their_offsets() {
        let mut f = FakeVerbsContext {
            head: [0; 14],
            sz: 0,
            context: ffi::ibv_context::default(),
        };
        let words = |off: usize| 14 + 1 - off / 8; // index into head of `off` bytes before context
        f.head[words(offset::QUERY_DEVICE_EX)] = fake_query as *const () as usize;
        f.head[words(offset::CREATE_CQ_EX)] = 0x1234;
        let ctx = ptr::addr_of_mut!(f.context);
        // Not extended: no ops.
        // SAFETY: a valid (fake) context.
        assert!(unsafe { VerbsContextOps::of(ctx) }
            .query_device_ex
            .is_none());
        f.context.abi_compat = usize::MAX as *mut _;
        // Extended but `sz` too small to hold the ops.
        f.sz = offset::QUERY_DEVICE_EX - 8 + std::mem::size_of::<ffi::ibv_context>();
        // SAFETY: as above.
        let ops = unsafe { VerbsContextOps::of(ptr::addr_of_mut!(f.context)) };
        assert!(ops.query_device_ex.is_none() && ops.create_cq_ex.is_none());
        f.sz = std::mem::size_of::<FakeVerbsContext>();
        // SAFETY: as above.
        let ops = unsafe { VerbsContextOps::of(ptr::addr_of_mut!(f.context)) };
        assert_eq!(ops.create_cq_ex.map(|p| p as usize), Some(0x1234));
        let q = ops.query_device_ex.unwrap();
        // SAFETY: the fake op only writes the out-parameter.
        let mut attr: ffi::ibv_device_attr_ex = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        assert_eq!(unsafe { q(ptr::null_mut(), ptr::null(), &mut attr, 0) }, 0);
        assert_eq!(attr.hca_core_clock, 156_250);
    }
}
