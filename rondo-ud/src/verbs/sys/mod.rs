//! The one FFI layer over libibverbs, for the UD datapath and for `rondo perf
//! --transport rc`: device context, PD, CQ, MR, UD and RC QPs, AH and the post /
//! poll calls. Objects own their parents through `Arc<Inner>` (a QP keeps its PD
//! and CQs alive, an MR its PD, everything its context); all logic lives in the
//! plain-Rust modules beside this one and in their users.
#![allow(unsafe_code)] // the verbs FFI of this datapath; each block says why it is sound

use super::error::VerbsError;

mod cq_ex;
mod qp;
mod rc;
pub use cq_ex::CqEx;
pub use qp::{Ah, Sge, UdQp, UdSend};
pub use rc::{RcOp, RcQp, RcSend};

use ibverbs_sys as ffi;
use std::ffi::CStr;
use std::ptr;
use std::sync::Arc;

/// `IBV_PORT_ACTIVE`, the `state` of a port that carries traffic.
pub const PORT_ACTIVE: u32 = ffi::ibv_port_state::IBV_PORT_ACTIVE;

/// The 16 bytes of a GID.
pub fn gid_raw(gid: &ffi::ibv_gid) -> [u8; 16] {
    // SAFETY: every variant of the union is 16 bytes of plain data.
    unsafe { gid.raw }
}

/// The name libibverbs gives a work-completion status (`ibv_wc_status_str`).
pub fn wc_status_str(status: u32) -> String {
    // SAFETY: ibv_wc_status_str returns a static C string for any value.
    let s = unsafe { CStr::from_ptr(ffi::ibv_wc_status_str(status)) };
    s.to_string_lossy().into_owned()
}

/// An open device context.
#[derive(Debug)]
struct ContextInner {
    ctx: *mut ffi::ibv_context,
}

// SAFETY: an ibv_context is thread safe (libibverbs serialises its own state).
unsafe impl Send for ContextInner {}
// SAFETY: as above.
unsafe impl Sync for ContextInner {}

impl Drop for ContextInner {
    fn drop(&mut self) {
        // SAFETY: `ctx` came from ibv_open_device and every child holds an Arc to
        // this inner, so none is alive any more.
        unsafe { ffi::ibv_close_device(self.ctx) };
    }
}

/// An open RDMA device.
#[derive(Clone, Debug)]
pub struct Context {
    inner: Arc<ContextInner>,
}

/// Names of the RDMA devices the host has (empty without any).
pub fn device_names() -> Result<Vec<String>, VerbsError> {
    let list = ibverbs::devices().map_err(|e| VerbsError::DeviceList(e.to_string()))?;
    Ok(list
        .iter()
        .map(|d| {
            d.name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
        .collect())
}

impl Context {
    /// Opens the device called `name`.
    pub fn open(name: &str) -> Result<Context, VerbsError> {
        let mut n = 0;
        // SAFETY: ibv_get_device_list writes the count to `n` and returns NULL or
        // an array of `n` device pointers, freed below after use.
        let list = unsafe { ffi::ibv_get_device_list(&mut n) };
        if list.is_null() {
            return Err(VerbsError::DeviceList(
                std::io::Error::last_os_error().to_string(),
            ));
        }
        let mut ctx = ptr::null_mut();
        for i in 0..usize::try_from(n).unwrap_or(0) {
            // SAFETY: `i < n`, within the array returned above.
            let dev = unsafe { *list.add(i) };
            // SAFETY: `dev` is a valid device of the list; the name is a C string
            // owned by the device.
            let dev_name = unsafe { CStr::from_ptr(ffi::ibv_get_device_name(dev)) };
            if dev_name.to_bytes() == name.as_bytes() {
                // SAFETY: as above; the context outlives the list (allowed by
                // ibv_free_device_list's contract).
                ctx = unsafe { ffi::ibv_open_device(dev) };
                break;
            }
        }
        // SAFETY: `list` came from ibv_get_device_list and is freed once.
        unsafe { ffi::ibv_free_device_list(list) };
        if ctx.is_null() {
            return Err(VerbsError::Open(name.to_string()));
        }
        Ok(Context {
            inner: Arc::new(ContextInner { ctx }),
        })
    }

    /// Attributes of port `port` (from 1).
    pub fn query_port(&self, port: u8) -> Result<ffi::ibv_port_attr, VerbsError> {
        let mut attr = ffi::ibv_port_attr::default();
        // SAFETY: `attr` is a full, zeroed ibv_port_attr (a superset of the compat
        // layout the exported symbol fills); the context is open.
        let rc =
            unsafe { ffi::ibv_query_port(self.inner.ctx, port, ptr::addr_of_mut!(attr).cast()) };
        if rc != 0 {
            return Err(VerbsError::call("ibv_query_port", rc));
        }
        Ok(attr)
    }

    /// The GID at `index` of port `port`.
    pub fn query_gid(&self, port: u8, index: u8) -> Result<[u8; 16], VerbsError> {
        let mut gid = ffi::ibv_gid::default();
        // SAFETY: `gid` is a valid out-parameter; the context is open.
        let rc = unsafe { ffi::ibv_query_gid(self.inner.ctx, port, i32::from(index), &mut gid) };
        if rc != 0 {
            return Err(VerbsError::call("ibv_query_gid", rc));
        }
        Ok(gid_raw(&gid))
    }

    /// Device attributes (port count, limits).
    pub fn query_device(&self) -> Result<ffi::ibv_device_attr, VerbsError> {
        let mut attr = ffi::ibv_device_attr::default();
        // SAFETY: `attr` is a valid out-parameter; the context is open.
        let rc = unsafe { ffi::ibv_query_device(self.inner.ctx, &mut attr) };
        if rc != 0 {
            return Err(VerbsError::call("ibv_query_device", rc));
        }
        Ok(attr)
    }

    /// The GID tables of all ports, with each entry's type.
    pub fn all_gids(&self) -> Result<Vec<ffi::ibv_gid_entry>, VerbsError> {
        let ports = self.query_device()?.phys_port_cnt;
        let mut total = 0usize;
        for port in 1..=ports {
            total += usize::try_from(self.query_port(port)?.gid_tbl_len).unwrap_or(0);
        }
        self.gid_table(total.max(1))
    }

    /// The GID table of every port, with each entry's type, for at most `max`
    /// entries in all (fewer than the ports have is an error).
    pub fn gid_table(&self, max: usize) -> Result<Vec<ffi::ibv_gid_entry>, VerbsError> {
        let mut entries = vec![ffi::ibv_gid_entry::default(); max];
        // SAFETY: `entries` has room for `max` entries of the size passed.
        let n = unsafe {
            ffi::_ibv_query_gid_table(
                self.inner.ctx,
                entries.as_mut_ptr(),
                entries.len(),
                0,
                std::mem::size_of::<ffi::ibv_gid_entry>(),
            )
        };
        if n < 0 {
            return Err(VerbsError::call("ibv_query_gid_table", n as i32));
        }
        entries.truncate(n as usize);
        Ok(entries)
    }

    /// Allocates a protection domain.
    pub fn alloc_pd(&self) -> Result<Pd, VerbsError> {
        // SAFETY: the context is open.
        let pd = unsafe { ffi::ibv_alloc_pd(self.inner.ctx) };
        if pd.is_null() {
            return Err(VerbsError::last("ibv_alloc_pd"));
        }
        Ok(Pd {
            inner: Arc::new(PdInner {
                pd,
                _ctx: self.inner.clone(),
            }),
        })
    }

    /// Creates a completion queue of at least `entries` entries.
    pub fn create_cq(&self, entries: usize) -> Result<Cq, VerbsError> {
        let cqe = i32::try_from(entries).map_err(|_| VerbsError::Config("CQ size above i32"))?;
        // SAFETY: the context is open; no channel, no context pointer.
        let cq =
            unsafe { ffi::ibv_create_cq(self.inner.ctx, cqe, ptr::null_mut(), ptr::null_mut(), 0) };
        if cq.is_null() {
            return Err(VerbsError::last("ibv_create_cq"));
        }
        Ok(Cq {
            inner: Arc::new(CqInner {
                cq,
                _ctx: self.inner.clone(),
            }),
        })
    }
}

#[derive(Debug)]
struct PdInner {
    pd: *mut ffi::ibv_pd,
    _ctx: Arc<ContextInner>,
}
// SAFETY: verbs objects may be used from any thread.
unsafe impl Send for PdInner {}
// SAFETY: as above.
unsafe impl Sync for PdInner {}
impl Drop for PdInner {
    fn drop(&mut self) {
        // SAFETY: every MR, QP and AH of this PD holds an Arc to it: none is left.
        unsafe { ffi::ibv_dealloc_pd(self.pd) };
    }
}

/// A protection domain.
#[derive(Clone, Debug)]
pub struct Pd {
    inner: Arc<PdInner>,
}

#[derive(Debug)]
struct CqInner {
    cq: *mut ffi::ibv_cq,
    _ctx: Arc<ContextInner>,
}
// SAFETY: verbs objects may be used from any thread.
unsafe impl Send for CqInner {}
// SAFETY: as above.
unsafe impl Sync for CqInner {}
impl Drop for CqInner {
    fn drop(&mut self) {
        // SAFETY: QPs using this CQ hold an Arc to it, so none is left.
        unsafe { ffi::ibv_destroy_cq(self.cq) };
    }
}

/// A completion queue.
#[derive(Clone, Debug)]
pub struct Cq {
    inner: Arc<CqInner>,
}

impl Cq {
    /// Polls up to `wc.len()` completions into `wc`; returns how many.
    fn poll_raw(&self, wc: &mut [ffi::ibv_wc]) -> Result<usize, VerbsError> {
        let n = i32::try_from(wc.len()).unwrap_or(i32::MAX);
        // SAFETY: the CQ is alive; its context's ops table is set by the driver;
        // `wc` has room for `n` entries.
        let rc = unsafe {
            let ctx = (*self.inner.cq).context;
            match (*ctx).ops.poll_cq {
                Some(poll) => poll(self.inner.cq, n, wc.as_mut_ptr()),
                None => return Err(VerbsError::Config("driver has no poll_cq")),
            }
        };
        if rc < 0 {
            return Err(VerbsError::call("ibv_poll_cq", rc));
        }
        Ok(rc as usize)
    }

    /// Polls up to `out.len()` completions (at most `buf`'s size) into `out`;
    /// returns how many.
    pub fn poll(&self, buf: &mut WcBuf, out: &mut [Wc]) -> Result<usize, VerbsError> {
        let max = out.len().min(buf.0.len());
        let n = self.poll_raw(&mut buf.0[..max])?;
        for (o, w) in out.iter_mut().zip(&buf.0[..n]) {
            *o = Wc::from_raw(w);
        }
        Ok(n)
    }
}

/// Room for the raw completions a plain CQ is polled into (kept between polls: a
/// poll allocates nothing).
pub struct WcBuf(Vec<ffi::ibv_wc>);

impl std::fmt::Debug for WcBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("WcBuf").field(&self.0.len()).finish()
    }
}

impl WcBuf {
    /// Room for `entries` completions per poll.
    pub fn new(entries: usize) -> WcBuf {
        WcBuf(vec![ffi::ibv_wc::default(); entries.max(1)])
    }
}

/// One work completion of a plain CQ, as plain data.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wc {
    /// The work request's id.
    pub wr_id: u64,
    /// 0 (`IBV_WC_SUCCESS`) or the error status ([`wc_status_str`] names it).
    pub status: u32,
    /// A receive completion (`IBV_WC_RECV` or `IBV_WC_RECV_RDMA_WITH_IMM`).
    pub receive: bool,
    /// Bytes received (a GRH included on UD).
    pub byte_len: u32,
    /// The local QP it belongs to.
    pub qp_num: u32,
    /// The GRH was on the wire (UD receives).
    pub grh: bool,
}

impl Wc {
    fn from_raw(w: &ffi::ibv_wc) -> Wc {
        let status = w.error().map_or(0, |(s, _)| s);
        Wc::from_parts(
            w.wr_id(),
            status,
            w.opcode(),
            w.len() as u32,
            w.qp_num,
            w.wc_flags.0,
        )
    }

    /// A completion from its `ibv_wc` fields.
    fn from_parts(
        wr_id: u64,
        status: u32,
        opcode: u32,
        byte_len: u32,
        qp_num: u32,
        flags: u32,
    ) -> Wc {
        Wc {
            wr_id,
            status,
            receive: opcode == ffi::ibv_wc_opcode::IBV_WC_RECV
                || opcode == ffi::ibv_wc_opcode::IBV_WC_RECV_RDMA_WITH_IMM,
            byte_len,
            qp_num,
            grh: flags & ffi::ibv_wc_flags::IBV_WC_GRH.0 != 0,
        }
    }
}

/// A completion queue a QP can use: plain, or extended with completion
/// timestamps.
#[derive(Clone, Debug)]
pub enum AnyCq {
    /// `ibv_create_cq`, polled with `ibv_poll_cq`.
    Plain(Cq),
    /// `ibv_create_cq_ex`, polled with `ibv_start_poll` / `ibv_next_poll`.
    Ex(CqEx),
}

impl AnyCq {
    /// The CQ as QP creation takes it.
    fn raw(&self) -> *mut ffi::ibv_cq {
        match self {
            AnyCq::Plain(c) => c.inner.cq,
            AnyCq::Ex(c) => c.as_cq(),
        }
    }

    /// Polls up to `out.len()` completions (at most `wc.len()` from a plain CQ,
    /// which polls into `wc` first).
    pub(crate) fn poll(
        &self,
        buf: &mut WcBuf,
        out: &mut [crate::verbs::driver::Completion],
    ) -> Result<usize, VerbsError> {
        let cq = match self {
            AnyCq::Ex(c) => return c.poll(out),
            AnyCq::Plain(c) => c,
        };
        let max = out.len().min(buf.0.len());
        let n = cq.poll_raw(&mut buf.0[..max])?;
        for (o, w) in out.iter_mut().zip(&buf.0[..n]) {
            let w = Wc::from_raw(w);
            *o = crate::verbs::driver::Completion {
                wr_id: w.wr_id,
                ok: w.status == 0,
                byte_len: w.byte_len as usize,
                grh: w.grh,
                ts: None,
            };
        }
        Ok(n)
    }
}

/// An arena registered with the NIC (the MR is dropped before the memory).
#[derive(Debug)]
pub struct RegisteredArena {
    mr: Mr,
    arena: reorder::Arena,
}

impl RegisteredArena {
    /// Local key.
    pub fn lkey(&self) -> u32 {
        self.mr.lkey()
    }

    /// Remote key (for a registration with remote access).
    pub fn rkey(&self) -> u32 {
        self.mr.rkey()
    }

    /// Address of the first byte, as WRs name it.
    pub fn addr(&self) -> u64 {
        self.arena.as_ptr() as u64
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        self.arena.as_slice()
    }

    /// The bytes, to write datagrams into.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        self.arena.as_mut_slice()
    }

    /// True when huge pages back it.
    pub fn is_huge(&self) -> bool {
        self.arena.is_huge()
    }
}

/// A registered memory region.
#[derive(Debug)]
pub struct Mr {
    mr: *mut ffi::ibv_mr,
    _pd: Arc<PdInner>,
}
// SAFETY: verbs objects may be used from any thread.
unsafe impl Send for Mr {}
impl Drop for Mr {
    fn drop(&mut self) {
        // SAFETY: `mr` came from ibv_reg_mr / ibv_reg_dmabuf_mr and is deregistered once.
        unsafe { ffi::ibv_dereg_mr(self.mr) };
    }
}

impl Mr {
    /// Local key, for scatter/gather entries.
    pub fn lkey(&self) -> u32 {
        // SAFETY: `mr` is valid while self lives.
        unsafe { (*self.mr).lkey }
    }

    /// Remote key, for the peer's RDMA WRITEs and READs.
    pub fn rkey(&self) -> u32 {
        // SAFETY: `mr` is valid while self lives.
        unsafe { (*self.mr).rkey }
    }
}

impl Pd {
    /// Maps an arena of at least `bytes` bytes (huge pages as asked) and
    /// registers it with `access` (`qp_attr::ACCESS_*` flags; local write at
    /// least): registered memory from the `reorder` arena.
    pub fn register_arena(
        &self,
        bytes: usize,
        huge: reorder::HugePages,
        access: u32,
    ) -> Result<RegisteredArena, VerbsError> {
        let mut arena = reorder::Arena::new(bytes, huge)?;
        // SAFETY: the arena is moved into the result next to the MR, which is
        // dropped first (field order), so the memory outlives the registration.
        let mr = unsafe { self.register(arena.as_mut_ptr(), arena.len(), access)? };
        Ok(RegisteredArena { mr, arena })
    }

    /// Registers `len` bytes at `addr` with `access` (`qp_attr::ACCESS_*` flags;
    /// local write at least, for receives).
    ///
    /// # Safety
    /// The memory must stay mapped until the returned [`Mr`] is dropped.
    pub unsafe fn register(
        &self,
        addr: *mut u8,
        len: usize,
        access: u32,
    ) -> Result<Mr, VerbsError> {
        let access = (access | ffi::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0) as i32;
        // SAFETY: the caller keeps the memory mapped; the PD is alive.
        let mr = unsafe { ffi::ibv_reg_mr(self.inner.pd, addr.cast(), len, access) };
        if mr.is_null() {
            return Err(VerbsError::last("ibv_reg_mr (is `ulimit -l` high enough?)"));
        }
        Ok(Mr {
            mr,
            _pd: self.inner.clone(),
        })
    }

    /// Registers `len` bytes at `offset` of a dma-buf (GPU memory exported by its
    /// driver); `iova` is the address WRs use for it.
    ///
    /// # Safety
    /// `fd` must be a dma-buf that stays open until the returned [`Mr`] is dropped.
    pub unsafe fn register_dmabuf(
        &self,
        fd: i32,
        offset: u64,
        len: usize,
        iova: u64,
    ) -> Result<Mr, VerbsError> {
        let access = ffi::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0 as i32;
        // SAFETY: the caller keeps the dma-buf open; the PD is alive.
        let mr = unsafe { ffi::ibv_reg_dmabuf_mr(self.inner.pd, offset, len, iova, fd, access) };
        if mr.is_null() {
            return Err(VerbsError::last("ibv_reg_dmabuf_mr"));
        }
        Ok(Mr {
            mr,
            _pd: self.inner.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verbs::qp_attr::{
        mtu_code, ACCESS_LOCAL_WRITE, ACCESS_REMOTE_READ, ACCESS_REMOTE_WRITE,
    };

    #[test]
    fn plain_constants_are_ibverbs_values() {
        use ffi::ibv_access_flags as a;
        assert_eq!(ACCESS_LOCAL_WRITE, a::IBV_ACCESS_LOCAL_WRITE.0);
        assert_eq!(ACCESS_REMOTE_WRITE, a::IBV_ACCESS_REMOTE_WRITE.0);
        assert_eq!(ACCESS_REMOTE_READ, a::IBV_ACCESS_REMOTE_READ.0);
        assert_eq!(mtu_code(4096), Some(ffi::IBV_MTU_4096));
        assert_eq!(mtu_code(256), Some(ffi::IBV_MTU_256));
        assert_eq!(PORT_ACTIVE, 4);
    }

    #[test]
    fn completions_read_as_plain_data() {
        use ffi::ibv_wc_opcode as op;
        let grh = ffi::ibv_wc_flags::IBV_WC_GRH.0;
        let c = Wc::from_parts(77, 0, op::IBV_WC_RECV_RDMA_WITH_IMM, 1040, 0x12, grh);
        assert_eq!(
            (c.wr_id, c.status, c.byte_len, c.qp_num),
            (77, 0, 1040, 0x12)
        );
        assert!(c.receive && c.grh);
        assert!(Wc::from_parts(1, 0, op::IBV_WC_RECV, 0, 0, 0).receive);
        let err = ffi::ibv_wc_status::IBV_WC_REM_ACCESS_ERR;
        let c = Wc::from_parts(2, err, op::IBV_WC_RDMA_WRITE, 0, 0, 0);
        assert!(!c.receive && !c.grh);
        assert_eq!(c.status, err);
        assert_eq!(wc_status_str(0), "success");
    }
}
