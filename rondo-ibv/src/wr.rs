//! The `ibv_wr_*` API of `struct ibv_qp_ex` (what perftest uses on a ConnectX): the
//! function pointers `ibv_wr_start`, `ibv_wr_rdma_write`, `ibv_wr_set_sge`, ...,
//! `ibv_wr_complete` call. Requests are collected between `wr_start` and
//! `wr_complete`, then posted in order; an unsupported operation makes
//! `wr_complete` fail.

use crate::abi::*;
use crate::exports::opcode_of;
use crate::objects::{lock, refuse, Building, Qp};
use libc::{c_int, c_void};
use rondo_verbs::{RemoteAddr, SendWr, Sge};
use std::sync::atomic::Ordering;

/// Fills an `ibv_qp_ex`'s function slots.
pub fn fill(t: &mut [usize; wr::COUNT]) {
    t[wr::ATOMIC_CMP_SWP] = unsupported5 as *const () as usize;
    t[wr::ATOMIC_FETCH_ADD] = unsupported4 as *const () as usize;
    t[wr::BIND_MW] = unsupported4 as *const () as usize;
    t[wr::LOCAL_INV] = unsupported2 as *const () as usize;
    t[wr::RDMA_READ] = rdma_read as *const () as usize;
    t[wr::RDMA_WRITE] = rdma_write as *const () as usize;
    t[wr::RDMA_WRITE_IMM] = rdma_write_imm as *const () as usize;
    t[wr::SEND] = send as *const () as usize;
    t[wr::SEND_IMM] = send_imm as *const () as usize;
    t[wr::SEND_INV] = unsupported2 as *const () as usize;
    t[wr::SEND_TSO] = unsupported4 as *const () as usize;
    t[wr::SET_UD_ADDR] = unsupported4 as *const () as usize;
    t[wr::SET_XRC_SRQN] = unsupported2 as *const () as usize;
    t[wr::SET_INLINE_DATA] = set_inline_data as *const () as usize;
    t[wr::SET_INLINE_DATA_LIST] = set_inline_data_list as *const () as usize;
    t[wr::SET_SGE] = set_sge as *const () as usize;
    t[wr::SET_SGE_LIST] = set_sge_list as *const () as usize;
    t[wr::START] = start as *const () as usize;
    t[wr::COMPLETE] = complete as *const () as usize;
    t[wr::ABORT] = abort as *const () as usize;
    t[wr::ATOMIC_WRITE] = unsupported4 as *const () as usize;
}

/// Our QP behind an `ibv_qp_ex` handed out by `create_qp`.
///
/// # Safety
/// `qp` is one of our QPs.
unsafe fn qp<'a>(qp: *mut ibv_qp_ex) -> &'a Qp {
    // SAFETY: our QPs start with their ibv_qp_ex (the caller's contract).
    unsafe { &*(qp as *const Qp) }
}

fn error(q: &Qp, e: c_int) {
    let _ = q
        .build_err
        .compare_exchange(0, e as usize, Ordering::AcqRel, Ordering::Acquire);
}

unsafe extern "C" fn unsupported(qpx: *mut ibv_qp_ex) {
    // SAFETY: reached only through our QPs' tables.
    let q = unsafe { qp(qpx) };
    refuse("ibv_wr_* operation not supported (atomics, memory windows, local invalidate, TSO, UD/XRC addressing)");
    error(q, libc::EOPNOTSUPP);
}
unsafe extern "C" fn unsupported2(qpx: *mut ibv_qp_ex, _: u32) {
    // SAFETY: as `unsupported`.
    unsafe { unsupported(qpx) }
}
unsafe extern "C" fn unsupported4(qpx: *mut ibv_qp_ex, _: usize, _: u64, _: u64) {
    // SAFETY: as `unsupported`.
    unsafe { unsupported(qpx) }
}
unsafe extern "C" fn unsupported5(qpx: *mut ibv_qp_ex, _: u32, _: u64, _: u64, _: u64) {
    // SAFETY: as `unsupported`.
    unsafe { unsupported(qpx) }
}

/// Starts a request of `op` with the QP's `wr_id` and `wr_flags`.
///
/// # Safety
/// `qpx` is one of our QPs.
unsafe fn begin(qpx: *mut ibv_qp_ex, op: u32, remote: Option<RemoteAddr>, imm: Option<u32>) {
    // SAFETY: the caller's contract.
    let q = unsafe { qp(qpx) };
    let Some((opcode, _, _)) = opcode_of(op) else {
        return error(q, libc::EOPNOTSUPP);
    };
    // SAFETY: the application set these fields of its ibv_qp_ex.
    let (wr_id, flags) = unsafe { ((*qpx).wr_id, (*qpx).wr_flags) };
    lock(&q.building).push(Building {
        wr: SendWr {
            wr_id,
            opcode,
            sg_list: Vec::new(),
            remote,
            imm,
            signaled: q.sq_sig_all || flags & IBV_SEND_SIGNALED != 0,
            solicited: flags & IBV_SEND_SOLICITED != 0,
        },
        inline: None,
    });
}

unsafe extern "C" fn rdma_read(qpx: *mut ibv_qp_ex, rkey: u32, addr: u64) {
    // SAFETY: reached only through our QPs' tables.
    unsafe { begin(qpx, IBV_WR_RDMA_READ, Some(RemoteAddr { addr, rkey }), None) }
}
unsafe extern "C" fn rdma_write(qpx: *mut ibv_qp_ex, rkey: u32, addr: u64) {
    // SAFETY: as above.
    unsafe {
        begin(
            qpx,
            IBV_WR_RDMA_WRITE,
            Some(RemoteAddr { addr, rkey }),
            None,
        )
    }
}
unsafe extern "C" fn rdma_write_imm(qpx: *mut ibv_qp_ex, rkey: u32, addr: u64, imm: u32) {
    // SAFETY: as above.
    unsafe {
        begin(
            qpx,
            IBV_WR_RDMA_WRITE_WITH_IMM,
            Some(RemoteAddr { addr, rkey }),
            Some(imm),
        )
    }
}
unsafe extern "C" fn send(qpx: *mut ibv_qp_ex) {
    // SAFETY: as above.
    unsafe { begin(qpx, IBV_WR_SEND, None, None) }
}
unsafe extern "C" fn send_imm(qpx: *mut ibv_qp_ex, imm: u32) {
    // SAFETY: as above.
    unsafe { begin(qpx, IBV_WR_SEND_WITH_IMM, None, Some(imm)) }
}

/// Runs `f` on the request being built (an error when there is none).
///
/// # Safety
/// `qpx` is one of our QPs.
unsafe fn with_last(qpx: *mut ibv_qp_ex, f: impl FnOnce(&mut Building)) {
    // SAFETY: the caller's contract.
    let q = unsafe { qp(qpx) };
    match lock(&q.building).last_mut() {
        Some(b) => f(b),
        None => error(q, libc::EINVAL),
    }
}

unsafe extern "C" fn set_sge(qpx: *mut ibv_qp_ex, lkey: u32, addr: u64, len: u32) {
    // SAFETY: reached only through our QPs' tables.
    unsafe { with_last(qpx, |b| b.wr.sg_list = vec![Sge { addr, len, lkey }]) }
}

unsafe extern "C" fn set_sge_list(qpx: *mut ibv_qp_ex, n: usize, list: *const ibv_sge) {
    // SAFETY: the application's list of `n` entries.
    let list = unsafe { crate::exports::c_slice(list, n as c_int) };
    // SAFETY: reached only through our QPs' tables.
    unsafe {
        with_last(qpx, |b| {
            b.wr.sg_list = list
                .iter()
                .map(|s| Sge {
                    addr: s.addr,
                    len: s.length,
                    lkey: s.lkey,
                })
                .collect()
        })
    }
}

unsafe extern "C" fn set_inline_data(qpx: *mut ibv_qp_ex, addr: *mut c_void, len: usize) {
    let bytes = if len == 0 || addr.is_null() {
        Vec::new()
    } else {
        // SAFETY: the application's inline buffer, read now (as a NIC would).
        unsafe { std::slice::from_raw_parts(addr as *const u8, len) }.to_vec()
    };
    // SAFETY: reached only through our QPs' tables.
    unsafe { with_last(qpx, |b| b.inline = Some(bytes)) }
}

unsafe extern "C" fn set_inline_data_list(
    qpx: *mut ibv_qp_ex,
    n: usize,
    list: *const ibv_data_buf,
) {
    // SAFETY: the application's list of `n` buffers.
    let list = unsafe { crate::exports::c_slice(list, n as c_int) };
    let mut bytes = Vec::new();
    for d in list {
        if d.length > 0 && !d.addr.is_null() {
            // SAFETY: the application's inline buffers, read now.
            bytes.extend_from_slice(unsafe {
                std::slice::from_raw_parts(d.addr as *const u8, d.length)
            });
        }
    }
    // SAFETY: reached only through our QPs' tables.
    unsafe { with_last(qpx, |b| b.inline = Some(bytes)) }
}

unsafe extern "C" fn start(qpx: *mut ibv_qp_ex) {
    // SAFETY: reached only through our QPs' tables.
    let q = unsafe { qp(qpx) };
    lock(&q.building).clear();
    q.build_err.store(0, Ordering::Release);
}

unsafe extern "C" fn complete(qpx: *mut ibv_qp_ex) -> c_int {
    // SAFETY: reached only through our QPs' tables.
    let q = unsafe { qp(qpx) };
    let list = std::mem::take(&mut *lock(&q.building));
    let err = q.build_err.swap(0, Ordering::AcqRel) as c_int;
    if err != 0 {
        return err;
    }
    for b in list {
        let r = match &b.inline {
            Some(bytes) => q.post(b.wr, Some(&[bytes.as_slice()])),
            None => q.post(b.wr, None),
        };
        if let Err(e) = r {
            return e;
        }
    }
    0
}

unsafe extern "C" fn abort(qpx: *mut ibv_qp_ex) {
    // SAFETY: reached only through our QPs' tables.
    let q = unsafe { qp(qpx) };
    lock(&q.building).clear();
    q.build_err.store(0, Ordering::Release);
}
