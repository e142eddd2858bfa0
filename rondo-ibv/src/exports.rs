//! The exported libibverbs functions (plain, unversioned definitions: they bind the
//! programs' versioned imports when preloaded) and the functions of the tables the
//! inline parts of `verbs.h` call through (`context->ops`, `verbs_context`,
//! `ibv_qp_ex`). Every export forwards a device or object that is not ours to the
//! real libibverbs. Every body runs under [`guard`]: a panic becomes an error
//! return, never an unwind into C.
//
// Every export's safety contract is libibverbs' for the function of that name.
#![allow(clippy::missing_safety_doc)]

use crate::abi::*;
use crate::connect::{connect_to, Link};
use crate::objects::*;
use crate::real::next;
use libc::{c_char, c_int, c_void};
use rondo_verbs::{
    AccessFlags, Opcode, QpInitAttr, RecvWr, RemoteAddr, SendWr, Sge, WcOpcode, WcStatus,
    WorkCompletion,
};
use std::net::{Ipv4Addr, SocketAddr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::null_mut;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

/// Runs `f`; a panic is reported and becomes `fallback`.
fn guard<T>(fallback: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| {
        refuse("internal error (a panic, reported above); failing the call");
        fallback
    })
}

fn set_errno(e: c_int) {
    // SAFETY: errno is thread-local.
    unsafe { *libc::__errno_location() = e };
}

/// A NULL handle with `errno` set.
fn fail<T>(e: c_int) -> *mut T {
    set_errno(e);
    null_mut()
}

fn config() -> Result<&'static crate::config::Config, c_int> {
    global().config.as_ref().map_err(|e| {
        refuse(&format!("bad configuration: {e}"));
        libc::EINVAL
    })
}

// ---- devices ----

/// `ibv_get_device_list`: `rondo0` first, then the real devices.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_list(num: *mut c_int) -> *mut *mut ibv_device {
    guard(null_mut(), || {
        let mut n: c_int = 0;
        let real = next!(
            ibv_get_device_list,
            "IBVERBS_1.1",
            fn(*mut c_int) -> *mut *mut ibv_device
        )
        // SAFETY: the real function with its own contract.
        .map_or(null_mut(), |f| unsafe { f(&mut n) });
        let mut v = vec![global().device as *mut ibv_device];
        if !real.is_null() {
            for i in 0..n.max(0) as usize {
                // SAFETY: the real list holds `n` devices.
                v.push(unsafe { *real.add(i) });
            }
        }
        let count = v.len() as c_int;
        v.push(null_mut());
        let len = v.len();
        let ours = Box::into_raw(v.into_boxed_slice()) as *mut *mut ibv_device;
        lock(&global().lists).insert(ours as usize, (real as usize, len));
        if !num.is_null() {
            // SAFETY: the caller's out-parameter.
            unsafe { *num = count };
        }
        ours
    })
}

/// `ibv_free_device_list`.
#[no_mangle]
pub unsafe extern "C" fn ibv_free_device_list(list: *mut *mut ibv_device) {
    guard((), || {
        let entry = lock(&global().lists).remove(&(list as usize));
        match entry {
            Some((real, len)) => {
                if real != 0 {
                    if let Some(f) = next!(
                        ibv_free_device_list,
                        "IBVERBS_1.1",
                        fn(*mut *mut ibv_device)
                    ) {
                        // SAFETY: the list the real ibv_get_device_list returned.
                        unsafe { f(real as *mut *mut ibv_device) };
                    }
                }
                // SAFETY: made by ibv_get_device_list above as a boxed slice of `len`.
                drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(list, len)) });
            }
            None => {
                if let Some(f) = next!(
                    ibv_free_device_list,
                    "IBVERBS_1.1",
                    fn(*mut *mut ibv_device)
                ) {
                    // SAFETY: not ours: the real library's.
                    unsafe { f(list) };
                }
            }
        }
    })
}

/// `ibv_get_device_name`.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_name(dev: *mut ibv_device) -> *const c_char {
    if is_ours(dev) {
        // SAFETY: our device lives forever.
        return unsafe { (*dev).name.as_ptr() };
    }
    next!(
        ibv_get_device_name,
        "IBVERBS_1.1",
        fn(*mut ibv_device) -> *const c_char
    )
    // SAFETY: not ours: the real library's.
    .map_or(std::ptr::null(), |f| unsafe { f(dev) })
}

/// `ibv_get_device_guid` (network order).
#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_guid(dev: *mut ibv_device) -> u64 {
    if is_ours(dev) {
        return config().map_or(0, |c| guid_of(c.ip));
    }
    next!(
        ibv_get_device_guid,
        "IBVERBS_1.1",
        fn(*mut ibv_device) -> u64
    )
    // SAFETY: not ours.
    .map_or(0, |f| unsafe { f(dev) })
}

/// `ibv_get_device_index`: -1 for `rondo0` (it has no kernel index).
#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_index(dev: *mut ibv_device) -> c_int {
    if is_ours(dev) {
        return -1;
    }
    next!(
        ibv_get_device_index,
        "IBVERBS_1.9",
        fn(*mut ibv_device) -> c_int
    )
    // SAFETY: not ours.
    .map_or(-1, |f| unsafe { f(dev) })
}

fn ops_table() -> [usize; ops::COUNT] {
    let mut t = [0usize; ops::COUNT];
    t[ops::POLL_CQ] = poll_cq as *const () as usize;
    t[ops::REQ_NOTIFY_CQ] = req_notify_cq as *const () as usize;
    t[ops::POST_SRQ_RECV] = post_srq_recv as *const () as usize;
    t[ops::POST_SEND] = post_send as *const () as usize;
    t[ops::POST_RECV] = post_recv as *const () as usize;
    t
}

fn vctx_table() -> [usize; vctx::COUNT] {
    let mut t = [0usize; vctx::COUNT];
    t[vctx::QUERY_PORT] = query_port_ex as *const () as usize;
    t[vctx::CREATE_QP_EX] = create_qp_ex as *const () as usize;
    t
}

/// `ibv_open_device`.
#[no_mangle]
pub unsafe extern "C" fn ibv_open_device(dev: *mut ibv_device) -> *mut ibv_context {
    if !is_ours(dev) {
        return next!(
            ibv_open_device,
            "IBVERBS_1.1",
            fn(*mut ibv_device) -> *mut ibv_context
        )
        // SAFETY: not ours.
        .map_or(fail(libc::ENODEV), |f| unsafe { f(dev) });
    }
    guard(fail(libc::EIO), || {
        let cfg = match config() {
            Ok(c) => c,
            Err(e) => return fail(e),
        };
        match Ctx::open(cfg, ops_table(), vctx_table()) {
            Ok(c) => {
                let c = Box::leak(c);
                debug!(
                    "opened {DEVICE_NAME}: {} paths from {}, MTU {}, LID {}",
                    cfg.paths,
                    cfg.ip,
                    cfg.mtu,
                    c.lid()
                );
                c.handle()
            }
            Err(e) => {
                refuse(&format!("cannot open {DEVICE_NAME}: {e}"));
                fail(libc::EIO)
            }
        }
    })
}

/// `ibv_close_device`.
#[no_mangle]
pub unsafe extern "C" fn ibv_close_device(ctx: *mut ibv_context) -> c_int {
    // SAFETY: the caller's live context.
    match unsafe { ctx_of(ctx) } {
        Some(c) => guard(libc::EIO, || {
            let s = c.ctx.stats();
            debug!(
                "closing {DEVICE_NAME}: {} datagrams in, fault injection dropped {} and reordered {}",
                s.datagrams, s.fault_dropped, s.fault_reordered
            );
            // SAFETY: made by ibv_open_device with Box::leak; closed once.
            drop(unsafe { Box::from_raw(c as *mut Ctx) });
            0
        }),
        None => next!(
            ibv_close_device,
            "IBVERBS_1.1",
            fn(*mut ibv_context) -> c_int
        )
        // SAFETY: not ours.
        .map_or(libc::ENODEV, |f| unsafe { f(ctx) }),
    }
}

fn device_attr(c: &Ctx) -> ibv_device_attr {
    // SAFETY: plain integers; every field is set below or zero.
    let mut a: ibv_device_attr = unsafe { core::mem::zeroed() };
    for (d, b) in a.fw_ver.iter_mut().zip(b"rondo-ibv 0.1".iter()) {
        *d = *b as c_char;
    }
    let (vendor, part) = c.vendor();
    a.node_guid = c.guid();
    a.sys_image_guid = c.guid();
    a.max_mr_size = u64::MAX >> 1;
    a.page_size_cap = 4096;
    a.vendor_id = vendor;
    a.vendor_part_id = part;
    a.max_qp = 1 << 16;
    a.max_qp_wr = MAX_QP_WR as c_int;
    a.device_cap_flags = 1 << 12; // IBV_DEVICE_RC_RNR_NAK_GEN
    a.max_sge = 32;
    a.max_sge_rd = 32;
    a.max_cq = 1 << 16;
    a.max_cqe = 1 << 22;
    a.max_mr = 1 << 20;
    a.max_pd = 1 << 16;
    a.max_qp_rd_atom = MAX_RD_ATOM;
    a.max_res_rd_atom = MAX_RD_ATOM << 16;
    a.max_qp_init_rd_atom = MAX_RD_ATOM;
    a.atomic_cap = 0; // IBV_ATOMIC_NONE
    a.max_pkeys = 1;
    a.local_ca_ack_delay = 16;
    a.phys_port_cnt = 1;
    a
}

/// `ibv_query_device`.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_device(
    ctx: *mut ibv_context,
    attr: *mut ibv_device_attr,
) -> c_int {
    // SAFETY: the caller's live context.
    match unsafe { ctx_of(ctx) } {
        Some(c) => guard(libc::EIO, || {
            // SAFETY: the caller's out-parameter.
            unsafe { attr.write(device_attr(c)) };
            0
        }),
        None => next!(
            ibv_query_device,
            "IBVERBS_1.1",
            fn(*mut ibv_context, *mut ibv_device_attr) -> c_int
        )
        // SAFETY: not ours.
        .map_or(libc::ENODEV, |f| unsafe { f(ctx, attr) }),
    }
}

fn port_attr(c: &Ctx) -> ibv_port_attr {
    ibv_port_attr {
        state: IBV_PORT_ACTIVE,
        max_mtu: IBV_MTU_4096,
        active_mtu: IBV_MTU_4096,
        gid_tbl_len: 1,
        port_cap_flags: 0,
        max_msg_sz: 1 << 31,
        pkey_tbl_len: 1,
        lid: c.lid(),
        max_vl_num: 1,
        active_width: 2,  // 4x
        active_speed: 32, // EDR
        phys_state: 5,    // LinkUp
        link_layer: IBV_LINK_LAYER_ETHERNET,
        ..ibv_port_attr::default()
    }
}

/// Writes `len` bytes of the port attributes (never more than asked).
///
/// # Safety
/// `out` is valid for `len` bytes.
unsafe fn write_port(c: &Ctx, port: u8, out: *mut u8, len: usize) -> c_int {
    if port != 1 {
        return libc::EINVAL;
    }
    let a = port_attr(c);
    let n = len.min(core::mem::size_of::<ibv_port_attr>());
    // SAFETY: `a` is `n` bytes or more; `out` is valid for `len >= n` bytes.
    unsafe { std::ptr::copy_nonoverlapping((&a as *const ibv_port_attr).cast::<u8>(), out, n) };
    0
}

/// `ibv_query_port` (exported): the 48-byte `struct _compat_ibv_port_attr`.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_port(
    ctx: *mut ibv_context,
    port: u8,
    attr: *mut c_void,
) -> c_int {
    // SAFETY: the caller's live context.
    match unsafe { ctx_of(ctx) } {
        // SAFETY: the compat struct is COMPAT_PORT_ATTR_LEN bytes.
        Some(c) => guard(libc::EIO, || unsafe {
            write_port(c, port, attr.cast(), COMPAT_PORT_ATTR_LEN)
        }),
        None => next!(
            ibv_query_port,
            "IBVERBS_1.1",
            fn(*mut ibv_context, u8, *mut c_void) -> c_int
        )
        // SAFETY: not ours.
        .map_or(libc::ENODEV, |f| unsafe { f(ctx, port, attr) }),
    }
}

/// `verbs_context::query_port`: `len` bytes of `struct ibv_port_attr`.
unsafe extern "C" fn query_port_ex(
    ctx: *mut ibv_context,
    port: u8,
    attr: *mut ibv_port_attr,
    len: usize,
) -> c_int {
    // SAFETY: only our contexts have this table.
    match unsafe { ctx_of(ctx) } {
        // SAFETY: the caller's struct is `len` bytes.
        Some(c) => guard(libc::EIO, || unsafe {
            write_port(c, port, attr.cast(), len)
        }),
        None => libc::ENODEV,
    }
}

/// `ibv_query_gid`: index 0 is `::ffff:<ip>`.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_gid(
    ctx: *mut ibv_context,
    port: u8,
    index: c_int,
    gid: *mut [u8; 16],
) -> c_int {
    // SAFETY: the caller's live context.
    match unsafe { ctx_of(ctx) } {
        Some(c) => {
            if port != 1 || index != 0 {
                return -1;
            }
            // SAFETY: the caller's out-parameter.
            unsafe { gid.write(c.gid()) };
            0
        }
        None => next!(
            ibv_query_gid,
            "IBVERBS_1.1",
            fn(*mut ibv_context, u8, c_int, *mut [u8; 16]) -> c_int
        )
        // SAFETY: not ours.
        .map_or(-1, |f| unsafe { f(ctx, port, index, gid) }),
    }
}

/// `_ibv_query_gid_ex`: a RoCE v2 GID at index 0.
#[no_mangle]
pub unsafe extern "C" fn _ibv_query_gid_ex(
    ctx: *mut ibv_context,
    port: u32,
    index: u32,
    entry: *mut ibv_gid_entry,
    flags: u32,
    size: usize,
) -> c_int {
    // SAFETY: the caller's live context.
    match unsafe { ctx_of(ctx) } {
        Some(c) => {
            if port != 1 || index != 0 || flags != 0 {
                return libc::EINVAL;
            }
            if size < core::mem::size_of::<ibv_gid_entry>() {
                return libc::EINVAL;
            }
            let e = ibv_gid_entry {
                gid: c.gid(),
                gid_index: 0,
                port_num: 1,
                gid_type: IBV_GID_TYPE_ROCE_V2,
                ndev_ifindex: 0,
            };
            // SAFETY: the caller's entry of `size` bytes.
            unsafe { entry.write(e) };
            0
        }
        None => next!(
            _ibv_query_gid_ex,
            "IBVERBS_1.11",
            fn(*mut ibv_context, u32, u32, *mut ibv_gid_entry, u32, usize) -> c_int
        )
        // SAFETY: not ours.
        .map_or(libc::ENODEV, |f| unsafe {
            f(ctx, port, index, entry, flags, size)
        }),
    }
}

/// `ibv_query_gid_type` (private): RoCE v2 in the sysfs enum.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_gid_type(
    ctx: *mut ibv_context,
    port: u8,
    index: u32,
    ty: *mut u32,
) -> c_int {
    // SAFETY: the caller's live context.
    match unsafe { ctx_of(ctx) } {
        Some(_) => {
            if port != 1 || index != 0 {
                return libc::EINVAL;
            }
            // SAFETY: the caller's out-parameter.
            unsafe { ty.write(IBV_GID_TYPE_SYSFS_ROCE_V2) };
            0
        }
        None => next!(
            ibv_query_gid_type,
            "IBVERBS_PRIVATE_34",
            fn(*mut ibv_context, u8, u32, *mut u32) -> c_int
        )
        // SAFETY: not ours.
        .map_or(libc::ENODEV, |f| unsafe { f(ctx, port, index, ty) }),
    }
}

/// `ibv_query_pkey`: the default P_Key.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_pkey(
    ctx: *mut ibv_context,
    port: u8,
    index: c_int,
    pkey: *mut u16,
) -> c_int {
    // SAFETY: the caller's live context.
    match unsafe { ctx_of(ctx) } {
        Some(_) => {
            if port != 1 || index != 0 {
                return -1;
            }
            // SAFETY: the caller's out-parameter.
            unsafe { pkey.write(0xffffu16.to_be()) };
            0
        }
        None => next!(
            ibv_query_pkey,
            "IBVERBS_1.1",
            fn(*mut ibv_context, u8, c_int, *mut u16) -> c_int
        )
        // SAFETY: not ours.
        .map_or(-1, |f| unsafe { f(ctx, port, index, pkey) }),
    }
}

// ---- protection domains and memory regions ----

/// `ibv_alloc_pd`.
#[no_mangle]
pub unsafe extern "C" fn ibv_alloc_pd(ctx: *mut ibv_context) -> *mut ibv_pd {
    // SAFETY: the caller's live context.
    match unsafe { ctx_of(ctx) } {
        Some(c) => guard(fail(libc::EIO), || match c.ctx.alloc_pd() {
            Ok(pd) => {
                let b = Box::new(Pd {
                    pd: ibv_pd {
                        context: ctx,
                        handle: 0,
                    },
                    inner: pd,
                });
                Box::into_raw(b).cast()
            }
            Err(e) => fail(errno_of(e)),
        }),
        None => next!(
            ibv_alloc_pd,
            "IBVERBS_1.1",
            fn(*mut ibv_context) -> *mut ibv_pd
        )
        // SAFETY: not ours.
        .map_or(fail(libc::ENODEV), |f| unsafe { f(ctx) }),
    }
}

/// `ibv_dealloc_pd`.
#[no_mangle]
pub unsafe extern "C" fn ibv_dealloc_pd(pd: *mut ibv_pd) -> c_int {
    // SAFETY: the caller's live PD.
    if unsafe { owner(pd.cast()) }.is_some() {
        // SAFETY: made by ibv_alloc_pd; freed once.
        drop(unsafe { Box::from_raw(pd as *mut Pd) });
        return 0;
    }
    next!(ibv_dealloc_pd, "IBVERBS_1.1", fn(*mut ibv_pd) -> c_int)
        // SAFETY: not ours.
        .map_or(libc::ENODEV, |f| unsafe { f(pd) })
}

fn access_of(flags: u32) -> Result<AccessFlags, String> {
    let known = IBV_ACCESS_LOCAL_WRITE
        | IBV_ACCESS_REMOTE_WRITE
        | IBV_ACCESS_REMOTE_READ
        | IBV_ACCESS_REMOTE_ATOMIC
        | IBV_ACCESS_MW_BIND;
    let mandatory = flags & (IBV_ACCESS_OPTIONAL_FIRST - 1);
    if mandatory & !known != 0 {
        return Err(format!(
            "memory registration access flags {:#x} (zero-based, on-demand paging, huge pages, ...) are not supported",
            mandatory & !known
        ));
    }
    let mut a = AccessFlags::NONE;
    for (bit, f) in [
        (IBV_ACCESS_LOCAL_WRITE, AccessFlags::LOCAL_WRITE),
        (IBV_ACCESS_REMOTE_WRITE, AccessFlags::REMOTE_WRITE),
        (IBV_ACCESS_REMOTE_READ, AccessFlags::REMOTE_READ),
    ] {
        if flags & bit != 0 {
            a = a | f;
        }
    }
    Ok(a)
}

/// Registers the application's buffer.
///
/// # Safety
/// `pd` is ours; `addr..addr + len` is the application's memory, valid until
/// `ibv_dereg_mr` (the verbs contract).
unsafe fn reg_mr(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    len: usize,
    iova: u64,
    access: u32,
) -> *mut ibv_mr {
    guard(fail(libc::EIO), || {
        if iova != addr as u64 {
            refuse("memory regions with an I/O virtual address other than the buffer's are not supported");
            return fail(libc::EOPNOTSUPP);
        }
        let flags = match access_of(access) {
            Ok(f) => f,
            Err(e) => {
                refuse(&e);
                return fail(libc::EOPNOTSUPP);
            }
        };
        // SAFETY: the caller says `pd` is ours.
        let p = unsafe { &*(pd as *mut Pd) };
        // SAFETY: the verbs contract: the buffer stays valid until ibv_dereg_mr, which
        // drops the region (and the application drains its QPs first).
        match unsafe { p.inner.register_external(addr.cast(), len, flags) } {
            Ok(mr) => {
                let m = Box::new(Mr {
                    mr: ibv_mr {
                        context: p.pd.context,
                        pd,
                        addr,
                        length: len,
                        handle: 0,
                        lkey: mr.lkey(),
                        rkey: mr.rkey(),
                    },
                    inner: mr,
                });
                debug!("registered {len} bytes at {addr:p}");
                Box::into_raw(m).cast()
            }
            Err(e) => {
                refuse(&format!("memory registration: {e}"));
                fail(errno_of(e))
            }
        }
    })
}

/// `ibv_reg_mr`.
#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    len: usize,
    access: c_int,
) -> *mut ibv_mr {
    // SAFETY: the caller's live PD.
    if unsafe { owner(pd.cast()) }.is_some() {
        // SAFETY: ours; the verbs contract on the buffer.
        return unsafe { reg_mr(pd, addr, len, addr as u64, access as u32) };
    }
    next!(
        ibv_reg_mr,
        "IBVERBS_1.1",
        fn(*mut ibv_pd, *mut c_void, usize, c_int) -> *mut ibv_mr
    )
    // SAFETY: not ours.
    .map_or(fail(libc::ENODEV), |f| unsafe { f(pd, addr, len, access) })
}

/// `ibv_reg_mr_iova`.
#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr_iova(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    len: usize,
    iova: u64,
    access: c_int,
) -> *mut ibv_mr {
    // SAFETY: the caller's live PD.
    if unsafe { owner(pd.cast()) }.is_some() {
        // SAFETY: ours; the verbs contract on the buffer.
        return unsafe { reg_mr(pd, addr, len, iova, access as u32) };
    }
    next!(
        ibv_reg_mr_iova,
        "IBVERBS_1.7",
        fn(*mut ibv_pd, *mut c_void, usize, u64, c_int) -> *mut ibv_mr
    )
    // SAFETY: not ours.
    .map_or(fail(libc::ENODEV), |f| unsafe {
        f(pd, addr, len, iova, access)
    })
}

/// `ibv_reg_mr_iova2`.
#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr_iova2(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    len: usize,
    iova: u64,
    access: u32,
) -> *mut ibv_mr {
    // SAFETY: the caller's live PD.
    if unsafe { owner(pd.cast()) }.is_some() {
        // SAFETY: ours; the verbs contract on the buffer.
        return unsafe { reg_mr(pd, addr, len, iova, access) };
    }
    next!(
        ibv_reg_mr_iova2,
        "IBVERBS_1.8",
        fn(*mut ibv_pd, *mut c_void, usize, u64, u32) -> *mut ibv_mr
    )
    // SAFETY: not ours.
    .map_or(fail(libc::ENODEV), |f| unsafe {
        f(pd, addr, len, iova, access)
    })
}

/// `ibv_dereg_mr`.
#[no_mangle]
pub unsafe extern "C" fn ibv_dereg_mr(mr: *mut ibv_mr) -> c_int {
    // SAFETY: the caller's live MR.
    if unsafe { owner(mr.cast()) }.is_some() {
        // SAFETY: made by reg_mr; freed once.
        drop(unsafe { Box::from_raw(mr as *mut Mr) });
        return 0;
    }
    next!(ibv_dereg_mr, "IBVERBS_1.1", fn(*mut ibv_mr) -> c_int)
        // SAFETY: not ours.
        .map_or(libc::ENODEV, |f| unsafe { f(mr) })
}

// ---- completion channels and queues ----

/// `ibv_create_comp_channel`: an eventfd in semaphore mode.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_comp_channel(ctx: *mut ibv_context) -> *mut ibv_comp_channel {
    // SAFETY: the caller's live context.
    match unsafe { ctx_of(ctx) } {
        Some(_) => guard(fail(libc::EIO), || {
            // SAFETY: creating an fd.
            let fd = unsafe { libc::eventfd(0, libc::EFD_SEMAPHORE | libc::EFD_CLOEXEC) };
            if fd < 0 {
                return null_mut();
            }
            let ch = Box::new(Channel {
                ch: ibv_comp_channel {
                    context: ctx,
                    fd,
                    refcnt: 0,
                },
                fired: Mutex::default(),
            });
            Box::into_raw(ch).cast()
        }),
        None => next!(
            ibv_create_comp_channel,
            "IBVERBS_1.0",
            fn(*mut ibv_context) -> *mut ibv_comp_channel
        )
        // SAFETY: not ours.
        .map_or(fail(libc::ENODEV), |f| unsafe { f(ctx) }),
    }
}

/// `ibv_destroy_comp_channel`: refused (EBUSY) while a CQ uses it.
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_comp_channel(ch: *mut ibv_comp_channel) -> c_int {
    // SAFETY: the caller's live channel.
    if unsafe { owner(ch.cast()) }.is_some() {
        // SAFETY: ours: a Channel.
        let c = unsafe { &*(ch as *mut Channel) };
        if c.ch.refcnt > 0 {
            return libc::EBUSY;
        }
        // SAFETY: our fd, closed once.
        unsafe { libc::close(c.ch.fd) };
        // SAFETY: made by ibv_create_comp_channel; freed once.
        drop(unsafe { Box::from_raw(ch as *mut Channel) });
        return 0;
    }
    next!(
        ibv_destroy_comp_channel,
        "IBVERBS_1.0",
        fn(*mut ibv_comp_channel) -> c_int
    )
    // SAFETY: not ours.
    .map_or(libc::ENODEV, |f| unsafe { f(ch) })
}

/// `ibv_create_cq`.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_cq(
    ctx: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    vector: c_int,
) -> *mut ibv_cq {
    // SAFETY: the caller's live context.
    let Some(c) = (unsafe { ctx_of(ctx) }) else {
        return next!(
            ibv_create_cq,
            "IBVERBS_1.1",
            fn(*mut ibv_context, c_int, *mut c_void, *mut ibv_comp_channel, c_int) -> *mut ibv_cq
        )
        // SAFETY: not ours.
        .map_or(fail(libc::ENODEV), |f| unsafe {
            f(ctx, cqe, cq_context, channel, vector)
        });
    };
    guard(fail(libc::EIO), || {
        if cqe < 1 {
            return fail(libc::EINVAL);
        }
        let inner = match c.ctx.create_cq(cqe as usize) {
            Ok(q) => q,
            Err(e) => return fail(errno_of(e)),
        };
        let cq = Box::into_raw(Box::new(Cq {
            cq: ibv_cq {
                context: ctx,
                channel,
                cq_context,
                handle: 0,
                cqe,
                // SAFETY: plain bytes, initialised below.
                mutex: unsafe { core::mem::zeroed() },
                // SAFETY: plain bytes, initialised below.
                cond: unsafe { core::mem::zeroed() },
                comp_events_completed: 0,
                async_events_completed: 0,
            },
            inner,
        }));
        // SAFETY: `cq` was just made; initialising its pthread objects.
        unsafe {
            libc::pthread_mutex_init(&mut (*cq).cq.mutex, std::ptr::null());
            libc::pthread_cond_init(&mut (*cq).cq.cond, std::ptr::null());
        }
        if !channel.is_null() {
            // SAFETY: the application's channel of this context (ours).
            let ch = unsafe { &mut *(channel as *mut Channel) };
            ch.ch.refcnt += 1;
            let (ch_addr, cq_addr) = (channel as usize, cq as usize);
            // SAFETY: `cq` is live; the hook is dropped with it.
            unsafe { &*cq }.inner.set_notify(Arc::new(move || {
                // SAFETY: the channel outlives its CQs (destroying it is refused
                // while refcnt > 0).
                unsafe { &*(ch_addr as *const Channel) }.fire(cq_addr);
            }));
        }
        cq.cast()
    })
}

/// `ibv_resize_cq`: Rondo's CQs never drop completions, the new size is recorded.
#[no_mangle]
pub unsafe extern "C" fn ibv_resize_cq(cq: *mut ibv_cq, cqe: c_int) -> c_int {
    // SAFETY: the caller's live CQ.
    if unsafe { owner(cq.cast()) }.is_some() {
        // SAFETY: ours.
        unsafe { (*cq).cqe = cqe };
        return 0;
    }
    next!(
        ibv_resize_cq,
        "IBVERBS_1.1",
        fn(*mut ibv_cq, c_int) -> c_int
    )
    // SAFETY: not ours.
    .map_or(libc::ENODEV, |f| unsafe { f(cq, cqe) })
}

/// `ibv_destroy_cq`.
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_cq(cq: *mut ibv_cq) -> c_int {
    // SAFETY: the caller's live CQ.
    if unsafe { owner(cq.cast()) }.is_some() {
        // SAFETY: made by ibv_create_cq; freed once.
        let b = unsafe { Box::from_raw(cq as *mut Cq) };
        if !b.cq.channel.is_null() {
            // SAFETY: the channel outlives its CQs.
            unsafe { (*(b.cq.channel as *mut Channel)).ch.refcnt -= 1 };
        }
        drop(b);
        return 0;
    }
    next!(ibv_destroy_cq, "IBVERBS_1.1", fn(*mut ibv_cq) -> c_int)
        // SAFETY: not ours.
        .map_or(libc::ENODEV, |f| unsafe { f(cq) })
}

/// `ibv_get_cq_event`: waits on the channel's eventfd (or fails with EAGAIN when the
/// application made it non-blocking and no CQ fired).
#[no_mangle]
pub unsafe extern "C" fn ibv_get_cq_event(
    ch: *mut ibv_comp_channel,
    cq: *mut *mut ibv_cq,
    cq_context: *mut *mut c_void,
) -> c_int {
    // SAFETY: the caller's live channel.
    if unsafe { owner(ch.cast()) }.is_none() {
        return next!(
            ibv_get_cq_event,
            "IBVERBS_1.1",
            fn(*mut ibv_comp_channel, *mut *mut ibv_cq, *mut *mut c_void) -> c_int
        )
        // SAFETY: not ours.
        .map_or(-1, |f| unsafe { f(ch, cq, cq_context) });
    }
    // SAFETY: ours.
    let c = unsafe { &*(ch as *mut Channel) };
    loop {
        let mut v: u64 = 0;
        // SAFETY: reading 8 bytes from our eventfd into a local.
        let n = unsafe { libc::read(c.ch.fd, (&mut v as *mut u64).cast(), 8) };
        if n != 8 {
            // EINTR included, as the real library: a program whose timer signal
            // ends the run (qperf's -t) must get its thread back.
            return -1;
        }
        if let Some(q) = lock(&c.fired).pop_front() {
            let q = q as *mut ibv_cq;
            // SAFETY: out-parameters of the caller; `q` is a live CQ of the channel.
            unsafe {
                *cq = q;
                *cq_context = (*q).cq_context;
            }
            return 0;
        }
    }
}

/// `ibv_ack_cq_events`.
#[no_mangle]
pub unsafe extern "C" fn ibv_ack_cq_events(cq: *mut ibv_cq, n: u32) {
    // SAFETY: the caller's live CQ.
    if unsafe { owner(cq.cast()) }.is_some() {
        // SAFETY: ours.
        unsafe { (*cq).comp_events_completed = (*cq).comp_events_completed.wrapping_add(n) };
        return;
    }
    if let Some(f) = next!(ibv_ack_cq_events, "IBVERBS_1.1", fn(*mut ibv_cq, u32)) {
        // SAFETY: not ours.
        unsafe { f(cq, n) }
    }
}

fn wc_of(w: &WorkCompletion) -> ibv_wc {
    let status = match w.status {
        WcStatus::Success => wc_status::SUCCESS,
        WcStatus::LocLenErr => wc_status::LOC_LEN_ERR,
        WcStatus::LocProtErr => wc_status::LOC_PROT_ERR,
        WcStatus::RemAccessErr => wc_status::REM_ACCESS_ERR,
        WcStatus::RemInvReq => wc_status::REM_INV_REQ_ERR,
        WcStatus::RemOpErr => wc_status::REM_OP_ERR,
        WcStatus::RnrRetryExcErr => wc_status::RNR_RETRY_EXC_ERR,
        WcStatus::RetryExcErr => wc_status::RETRY_EXC_ERR,
        WcStatus::WrFlushErr => wc_status::WR_FLUSH_ERR,
        _ => wc_status::GENERAL_ERR,
    };
    let opcode = match w.opcode {
        WcOpcode::Send => IBV_WC_SEND,
        WcOpcode::RdmaWrite => IBV_WC_RDMA_WRITE,
        WcOpcode::RdmaRead => IBV_WC_RDMA_READ,
        WcOpcode::Recv => IBV_WC_RECV,
        WcOpcode::RecvRdmaWithImm => IBV_WC_RECV_RDMA_WITH_IMM,
        _ => IBV_WC_SEND,
    };
    ibv_wc {
        wr_id: w.wr_id,
        status,
        opcode,
        byte_len: w.byte_len as u32,
        imm_data: w.imm.unwrap_or(0),
        qp_num: w.qp_num,
        wc_flags: if w.imm.is_some() { IBV_WC_WITH_IMM } else { 0 },
        pkey_index: 0,
        ..ibv_wc::default()
    }
}

/// `context->ops.poll_cq`.
unsafe extern "C" fn poll_cq(cq: *mut ibv_cq, n: c_int, wc: *mut ibv_wc) -> c_int {
    guard(-1, || {
        // SAFETY: only our CQs are reached through our ops table.
        let q = unsafe { &*(cq as *mut Cq) };
        let mut buf = [WorkCompletion::default(); 32];
        let mut done = 0usize;
        let want = n.max(0) as usize;
        while done < want {
            let k = (want - done).min(buf.len());
            let got = match q.inner.poll(&mut buf[..k]) {
                Ok(g) => g,
                Err(_) => return -1,
            };
            for (i, w) in buf[..got].iter().enumerate() {
                // SAFETY: the caller's array of `n` entries.
                unsafe { wc.add(done + i).write(wc_of(w)) };
            }
            done += got;
            if got < k {
                break;
            }
        }
        done as c_int
    })
}

/// `context->ops.req_notify_cq` (`solicited_only` is treated as every completion).
unsafe extern "C" fn req_notify_cq(cq: *mut ibv_cq, _solicited_only: c_int) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: only our CQs are reached through our ops table.
        let q = unsafe { &*(cq as *mut Cq) };
        if q.cq.channel.is_null() {
            return libc::EINVAL;
        }
        q.inner.arm_notify();
        0
    })
}

// ---- queue pairs ----

/// What `ibv_create_qp` and `create_qp_ex` both give.
struct QpRequest {
    qp_context: *mut c_void,
    send_cq: *mut ibv_cq,
    recv_cq: *mut ibv_cq,
    srq: *mut c_void,
    qp_type: u32,
    sq_sig_all: bool,
}

/// The checks and the creation shared by `ibv_create_qp` and `create_qp_ex`.
///
/// # Safety
/// `pd` is ours; the CQ pointers are null or live CQs.
unsafe fn create_qp_common(pd: *mut ibv_pd, r: QpRequest, cap: &mut ibv_qp_cap) -> *mut ibv_qp {
    let QpRequest {
        qp_context,
        send_cq,
        recv_cq,
        srq,
        qp_type,
        sq_sig_all,
    } = r;
    if qp_type != IBV_QPT_RC {
        refuse(&format!(
            "QP type {qp_type} is not supported: Rondo carries reliable connected (RC) QPs only (no UD, UC, XRC, DC or raw packet QPs)"
        ));
        return fail(libc::EOPNOTSUPP);
    }
    if !srq.is_null() {
        refuse("shared receive queues (SRQ) are not supported");
        return fail(libc::EOPNOTSUPP);
    }
    // SAFETY: live CQs (the caller's contract), ours if their context is.
    let (Some(_), Some(_)) = (unsafe { owner(send_cq.cast()) }, unsafe {
        owner(recv_cq.cast())
    }) else {
        return fail(libc::EINVAL);
    };
    if cap.max_inline_data > MAX_INLINE
        || cap.max_send_wr > MAX_QP_WR
        || cap.max_recv_wr > MAX_QP_WR
    {
        refuse(&format!(
            "QP capabilities above the device's: max_inline_data {} (at most {MAX_INLINE}), max_send_wr {} / max_recv_wr {} (at most {MAX_QP_WR})",
            cap.max_inline_data, cap.max_send_wr, cap.max_recv_wr
        ));
        return fail(libc::EINVAL);
    }
    // SAFETY: ours (the caller's contract).
    let p = unsafe { &*(pd as *mut Pd) };
    // SAFETY: our PD's context is ours.
    let Some(c) = (unsafe { ctx_of(p.pd.context) }) else {
        return fail(libc::EINVAL);
    };
    let (scq, rcq) = (unsafe { &*(send_cq as *mut Cq) }, unsafe {
        &*(recv_cq as *mut Cq)
    });
    let depth = cap.max_send_wr.max(1);
    let mut attr = QpInitAttr::udp(c.cfg.paths);
    attr.mtu = c.cfg.mtu;
    attr.max_send_wr = depth as usize;
    attr.max_recv_wr = cap.max_recv_wr.max(1) as usize;
    attr.max_sge = cap.max_send_sge.max(cap.max_recv_sge).max(1) as usize;
    let qp = match c.ctx.create_qp(&p.inner, &scq.inner, &rcq.inner, attr) {
        Ok(q) => q,
        Err(e) => {
            refuse(&format!("creating a QP: {e}"));
            return fail(errno_of(e));
        }
    };
    let inline_slot = cap.max_inline_data.max(64) as usize;
    let slots = depth as usize + 1;
    let inline_mr = match p
        .inner
        .register(inline_slot * slots, AccessFlags::LOCAL_WRITE)
    {
        Ok(m) => m,
        Err(e) => return fail(errno_of(e)),
    };
    cap.max_inline_data = inline_slot as u32;
    let qpn = qp.qp_num();
    let link = Arc::new(Link {
        qp,
        peer: Mutex::new(None),
    });
    lock(&c.qps).insert(qpn, link.clone());
    let mut slots_table = [0usize; wr::COUNT];
    crate::wr::fill(&mut slots_table);
    let q = Box::new(Qp {
        ex: ibv_qp_ex {
            qp_base: ibv_qp {
                context: p.pd.context,
                qp_context,
                pd,
                send_cq,
                recv_cq,
                srq: null_mut(),
                handle: 0,
                qp_num: qpn,
                state: IBV_QPS_RESET,
                qp_type,
                // SAFETY: plain bytes, initialised below.
                mutex: unsafe { core::mem::zeroed() },
                // SAFETY: plain bytes, initialised below.
                cond: unsafe { core::mem::zeroed() },
                events_completed: 0,
            },
            comp_mask: 0,
            wr_id: 0,
            wr_flags: 0,
            slots: slots_table,
        },
        link,
        sq_sig_all,
        cap: *cap,
        st: QpState {
            state: IBV_QPS_RESET.into(),
            dest_qpn: 0.into(),
        },
        inline: Inline {
            mr: inline_mr,
            slot: inline_slot,
            slots,
            next: Mutex::new(0),
        },
        building: Mutex::default(),
        build_err: 0.into(),
        ctx: c,
    });
    let q = Box::into_raw(q);
    // SAFETY: just made; initialising its pthread objects.
    unsafe {
        libc::pthread_mutex_init(&mut (*q).ex.qp_base.mutex, std::ptr::null());
        libc::pthread_cond_init(&mut (*q).ex.qp_base.cond, std::ptr::null());
    }
    debug!("created QP {qpn:#x} (send depth {depth}, inline {inline_slot})");
    q.cast()
}

/// `ibv_create_qp`.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_qp(
    pd: *mut ibv_pd,
    attr: *mut ibv_qp_init_attr,
) -> *mut ibv_qp {
    // SAFETY: the caller's live PD.
    if unsafe { owner(pd.cast()) }.is_none() {
        return next!(
            ibv_create_qp,
            "IBVERBS_1.1",
            fn(*mut ibv_pd, *mut ibv_qp_init_attr) -> *mut ibv_qp
        )
        // SAFETY: not ours.
        .map_or(fail(libc::ENODEV), |f| unsafe { f(pd, attr) });
    }
    guard(fail(libc::EIO), || {
        // SAFETY: the caller's attributes.
        let a = unsafe { &mut *attr };
        // SAFETY: ours; the attributes' CQs are the caller's live CQs.
        unsafe {
            create_qp_common(
                pd,
                QpRequest {
                    qp_context: a.qp_context,
                    send_cq: a.send_cq,
                    recv_cq: a.recv_cq,
                    srq: a.srq,
                    qp_type: a.qp_type,
                    sq_sig_all: a.sq_sig_all != 0,
                },
                &mut a.cap,
            )
        }
    })
}

/// `verbs_context::create_qp_ex` (what `ibv_create_qp_ex` calls): a PD and send
/// operations of RC QPs; anything else is refused.
unsafe extern "C" fn create_qp_ex(
    ctx: *mut ibv_context,
    attr: *mut ibv_qp_init_attr_ex,
) -> *mut ibv_qp {
    guard(fail(libc::EIO), || {
        // SAFETY: the caller's attributes.
        let a = unsafe { &mut *attr };
        let allowed = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
        if a.comp_mask & !allowed != 0 || a.comp_mask & IBV_QP_INIT_ATTR_PD == 0 {
            refuse(&format!(
                "ibv_create_qp_ex with comp_mask {:#x}: only a PD and send_ops_flags are supported",
                a.comp_mask
            ));
            return fail(libc::EOPNOTSUPP);
        }
        if a.comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS != 0
            && a.send_ops_flags & !SUPPORTED_SEND_OPS != 0
        {
            refuse(&format!(
                "send operations {:#x} are not supported (atomics, memory windows, local invalidate, TSO): Rondo carries SEND, WRITE and READ (with immediates)",
                a.send_ops_flags & !SUPPORTED_SEND_OPS
            ));
            return fail(libc::EOPNOTSUPP);
        }
        // SAFETY: the PD given with this context.
        if unsafe { owner(a.pd.cast()) }.map(|c| c as *mut Ctx as usize)
            != unsafe { ctx_of(ctx) }.map(|c| c as *mut Ctx as usize)
        {
            return fail(libc::EINVAL);
        }
        // SAFETY: ours; the attributes' CQs are the caller's live CQs.
        let qp = unsafe {
            create_qp_common(
                a.pd,
                QpRequest {
                    qp_context: a.qp_context,
                    send_cq: a.send_cq,
                    recv_cq: a.recv_cq,
                    srq: a.srq,
                    qp_type: a.qp_type,
                    sq_sig_all: a.sq_sig_all != 0,
                },
                &mut a.cap,
            )
        };
        if !qp.is_null() {
            // SAFETY: just made, an ibv_qp_ex.
            unsafe { (*(qp as *mut ibv_qp_ex)).comp_mask = 0 };
        }
        qp
    })
}

/// `ibv_qp_to_qp_ex`: our QPs are `ibv_qp_ex`s.
#[no_mangle]
pub unsafe extern "C" fn ibv_qp_to_qp_ex(qp: *mut ibv_qp) -> *mut ibv_qp_ex {
    // SAFETY: the caller's live QP.
    if unsafe { owner(qp.cast()) }.is_some() {
        return qp.cast();
    }
    next!(
        ibv_qp_to_qp_ex,
        "IBVERBS_1.6",
        fn(*mut ibv_qp) -> *mut ibv_qp_ex
    )
    // SAFETY: not ours.
    .map_or(null_mut(), |f| unsafe { f(qp) })
}

/// The peer's set-up address from the RTR attributes: the IPv4 address inside an
/// IPv4-mapped destination GID, else the configured fallback peer; the LID as port.
fn peer_addr(a: &ibv_ah_attr, fallback: Ipv4Addr) -> SocketAddr {
    let g = a.grh.dgid;
    let mapped = g[..10].iter().all(|&b| b == 0) && g[10] == 0xff && g[11] == 0xff;
    let ip = if a.is_global != 0 && mapped {
        Ipv4Addr::new(g[12], g[13], g[14], g[15])
    } else {
        fallback
    };
    SocketAddr::new(ip.into(), a.dlid)
}

/// `ibv_modify_qp`: RESET -> INIT -> RTR (connects, see `connect`) -> RTS, and ERR
/// (flushes). `timeout` and `retry_cnt` (`IBV_QP_TIMEOUT`, `IBV_QP_RETRY_CNT`,
/// given on the way to RTS or later) become the rondo-verbs QP's local ACK timeout
/// and retry count; out of range (above 31, above 7), the call fails with EINVAL
/// and changes nothing.
#[no_mangle]
pub unsafe extern "C" fn ibv_modify_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    mask: c_int,
) -> c_int {
    // SAFETY: the caller's live QP.
    if unsafe { owner(qp.cast()) }.is_none() {
        return next!(
            ibv_modify_qp,
            "IBVERBS_1.1",
            fn(*mut ibv_qp, *mut ibv_qp_attr, c_int) -> c_int
        )
        // SAFETY: not ours.
        .map_or(libc::ENODEV, |f| unsafe { f(qp, attr, mask) });
    }
    guard(libc::EIO, || {
        // SAFETY: ours, and the caller's attributes.
        let (q, a) = unsafe { (&mut *(qp as *mut Qp), &*attr) };
        let timeout = (mask & IBV_QP_TIMEOUT != 0).then_some(a.timeout);
        let retry_cnt = (mask & IBV_QP_RETRY_CNT != 0).then_some(a.retry_cnt);
        // Checked before any state change, so that a refused call changes nothing.
        if timeout.is_some_and(|t| t > 31) || retry_cnt.is_some_and(|r| r > 7) {
            refuse(&format!(
                "QP {:#x}: timeout {} / retry_cnt {} out of range (0 to 31, 0 to 7)",
                q.ex.qp_base.qp_num, a.timeout, a.retry_cnt
            ));
            return libc::EINVAL;
        }
        if mask & IBV_QP_STATE == 0 {
            return set_retry(q, timeout, retry_cnt);
        }
        let cur = q.st.state.load(Ordering::Acquire);
        let to = a.qp_state;
        match to {
            IBV_QPS_RESET if cur <= IBV_QPS_INIT => {}
            IBV_QPS_INIT if cur <= IBV_QPS_INIT => {}
            IBV_QPS_RTR if cur == IBV_QPS_INIT => {
                if mask & IBV_QP_AV == 0 || mask & IBV_QP_DEST_QPN == 0 {
                    return libc::EINVAL;
                }
                // SAFETY: our QP's context.
                let c = unsafe { &*q.ctx };
                let at = peer_addr(&a.ah_attr, c.cfg.peer);
                if let Err(e) = connect_to(&q.link, at, a.dest_qp_num) {
                    refuse(&format!("QP {:#x} to RTR: {e}", q.ex.qp_base.qp_num));
                    return libc::ETIMEDOUT;
                }
                q.st.dest_qpn.store(a.dest_qp_num, Ordering::Release);
            }
            IBV_QPS_RTS if cur == IBV_QPS_RTR || cur == IBV_QPS_RTS => {}
            IBV_QPS_ERR => q.qp().set_error(),
            _ => {
                refuse(&format!("QP state change {cur} -> {to} is not supported"));
                return libc::EINVAL;
            }
        }
        let r = set_retry(q, timeout, retry_cnt);
        if r != 0 {
            return r;
        }
        q.st.state.store(to, Ordering::Release);
        q.ex.qp_base.state = to;
        0
    })
}

/// Gives the QP the `timeout` and `retry_cnt` of an `ibv_modify_qp` (those given).
fn set_retry(q: &Qp, timeout: Option<u8>, retry_cnt: Option<u8>) -> c_int {
    if timeout.or(retry_cnt).is_none() {
        return 0;
    }
    match q.qp().set_retry(timeout, retry_cnt) {
        Ok(()) => 0,
        Err(e) => {
            refuse(&format!("QP {:#x}: {e}", q.ex.qp_base.qp_num));
            errno_of(e)
        }
    }
}

/// `ibv_query_qp`.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    mask: c_int,
    init: *mut ibv_qp_init_attr,
) -> c_int {
    // SAFETY: the caller's live QP.
    if unsafe { owner(qp.cast()) }.is_none() {
        return next!(
            ibv_query_qp,
            "IBVERBS_1.1",
            fn(*mut ibv_qp, *mut ibv_qp_attr, c_int, *mut ibv_qp_init_attr) -> c_int
        )
        // SAFETY: not ours.
        .map_or(libc::ENODEV, |f| unsafe { f(qp, attr, mask, init) });
    }
    guard(libc::EIO, || {
        // SAFETY: ours.
        let q = unsafe { &*(qp as *mut Qp) };
        let state = q.st.state.load(Ordering::Acquire);
        let retry = q.qp().retry();
        let a = ibv_qp_attr {
            qp_state: state,
            cur_qp_state: state,
            path_mtu: IBV_MTU_4096,
            dest_qp_num: q.st.dest_qpn.load(Ordering::Acquire),
            qp_access_flags: IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
            cap: q.cap,
            max_rd_atomic: MAX_RD_ATOM as u8,
            max_dest_rd_atomic: MAX_RD_ATOM as u8,
            port_num: 1,
            timeout: retry.0,
            retry_cnt: retry.1,
            rnr_retry: 7,
            ..ibv_qp_attr::default()
        };
        // SAFETY: the caller's out-parameters.
        unsafe {
            attr.write(a);
            if !init.is_null() {
                init.write(ibv_qp_init_attr {
                    qp_context: q.ex.qp_base.qp_context,
                    send_cq: q.ex.qp_base.send_cq,
                    recv_cq: q.ex.qp_base.recv_cq,
                    srq: null_mut(),
                    cap: q.cap,
                    qp_type: IBV_QPT_RC,
                    sq_sig_all: q.sq_sig_all as c_int,
                });
            }
        }
        0
    })
}

/// `ibv_destroy_qp`: outstanding requests are discarded without completions.
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_qp(qp: *mut ibv_qp) -> c_int {
    // SAFETY: the caller's live QP.
    if unsafe { owner(qp.cast()) }.is_none() {
        return next!(ibv_destroy_qp, "IBVERBS_1.1", fn(*mut ibv_qp) -> c_int)
            // SAFETY: not ours.
            .map_or(libc::ENODEV, |f| unsafe { f(qp) });
    }
    guard(libc::EIO, || {
        // SAFETY: made by create_qp_common; freed once.
        let q = unsafe { Box::from_raw(qp as *mut Qp) };
        // SAFETY: the QP's context outlives it.
        lock(&unsafe { &*q.ctx }.qps).remove(&q.ex.qp_base.qp_num);
        drop(q);
        0
    })
}

/// A slice from a C array (empty for a null pointer or a non-positive count).
///
/// # Safety
/// `p` points to `n` elements when non-null and `n > 0`.
pub(crate) unsafe fn c_slice<'a, T>(p: *const T, n: c_int) -> &'a [T] {
    if p.is_null() || n <= 0 {
        return &[];
    }
    // SAFETY: the caller's contract.
    unsafe { std::slice::from_raw_parts(p, n as usize) }
}

fn sges(list: &[ibv_sge]) -> Vec<Sge> {
    list.iter()
        .map(|s| Sge {
            addr: s.addr,
            len: s.length,
            lkey: s.lkey,
        })
        .collect()
}

/// The opcode of a send work request, if Rondo carries it.
pub(crate) fn opcode_of(op: u32) -> Option<(Opcode, bool, bool)> {
    // (opcode, needs remote, has immediate)
    Some(match op {
        IBV_WR_RDMA_WRITE => (Opcode::RdmaWrite, true, false),
        IBV_WR_RDMA_WRITE_WITH_IMM => (Opcode::RdmaWriteWithImm, true, true),
        IBV_WR_SEND => (Opcode::Send, false, false),
        IBV_WR_SEND_WITH_IMM => (Opcode::SendWithImm, false, true),
        IBV_WR_RDMA_READ => (Opcode::RdmaRead, true, false),
        _ => return None,
    })
}

/// Posts one send work request.
///
/// # Safety
/// `w` and its scatter/gather list are the application's, valid for the call.
unsafe fn post_one(q: &Qp, w: &ibv_send_wr) -> Result<(), c_int> {
    let Some((opcode, remote, imm)) = opcode_of(w.opcode) else {
        refuse(&format!(
            "send opcode {} is not supported (atomics, memory windows, local invalidate, TSO): Rondo carries SEND, WRITE and READ (with immediates)",
            w.opcode
        ));
        return Err(libc::EOPNOTSUPP);
    };
    // SAFETY: the application's list of `num_sge` entries.
    let list = unsafe { c_slice(w.sg_list, w.num_sge) };
    let wr = SendWr {
        wr_id: w.wr_id,
        opcode,
        sg_list: Vec::new(),
        remote: remote.then_some(RemoteAddr {
            addr: w.remote_addr,
            rkey: w.rkey,
        }),
        imm: imm.then_some(w.imm_data),
        signaled: q.sq_sig_all || w.send_flags & IBV_SEND_SIGNALED != 0,
    };
    if w.send_flags & IBV_SEND_INLINE != 0 && opcode != Opcode::RdmaRead {
        let parts: Vec<&[u8]> = list
            .iter()
            .filter(|s| s.length > 0)
            // SAFETY: inline data is read at post time from the application's buffers.
            .map(|s| unsafe { std::slice::from_raw_parts(s.addr as *const u8, s.length as usize) })
            .collect();
        return q.post(wr, Some(&parts));
    }
    q.post(
        SendWr {
            sg_list: sges(list),
            ..wr
        },
        None,
    )
}

/// `context->ops.post_send`.
unsafe extern "C" fn post_send(
    qp: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad: *mut *mut ibv_send_wr,
) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: only our QPs are reached through our ops table.
        let q = unsafe { &*(qp as *mut Qp) };
        let mut w = wr;
        while !w.is_null() {
            // SAFETY: the application's chain of work requests.
            let r = unsafe { post_one(q, &*w) };
            if let Err(e) = r {
                if !bad.is_null() {
                    // SAFETY: the caller's out-parameter.
                    unsafe { *bad = w };
                }
                return e;
            }
            // SAFETY: as above.
            w = unsafe { (*w).next };
        }
        0
    })
}

/// `context->ops.post_recv`.
unsafe extern "C" fn post_recv(
    qp: *mut ibv_qp,
    wr: *mut ibv_recv_wr,
    bad: *mut *mut ibv_recv_wr,
) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: only our QPs are reached through our ops table.
        let q = unsafe { &*(qp as *mut Qp) };
        let mut w = wr;
        while !w.is_null() {
            // SAFETY: the application's chain of receive requests.
            let r = unsafe { &*w };
            // SAFETY: its list of `num_sge` entries.
            let list = unsafe { c_slice(r.sg_list, r.num_sge) };
            if let Err(e) = q.qp().post_recv_owned(RecvWr {
                wr_id: r.wr_id,
                sg_list: sges(list),
            }) {
                if !bad.is_null() {
                    // SAFETY: the caller's out-parameter.
                    unsafe { *bad = w };
                }
                return errno_of(e);
            }
            w = r.next;
        }
        0
    })
}

/// `context->ops.post_srq_recv`: no SRQs.
unsafe extern "C" fn post_srq_recv(
    _srq: *mut c_void,
    _wr: *mut ibv_recv_wr,
    _bad: *mut *mut ibv_recv_wr,
) -> c_int {
    libc::EOPNOTSUPP
}

// ---- what Rondo does not carry ----

/// `ibv_create_srq`: refused for `rondo0`.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_srq(pd: *mut ibv_pd, attr: *mut c_void) -> *mut c_void {
    // SAFETY: the caller's live PD.
    if unsafe { owner(pd.cast()) }.is_some() {
        refuse("shared receive queues (SRQ) are not supported");
        return fail(libc::EOPNOTSUPP);
    }
    next!(
        ibv_create_srq,
        "IBVERBS_1.1",
        fn(*mut ibv_pd, *mut c_void) -> *mut c_void
    )
    // SAFETY: not ours.
    .map_or(fail(libc::ENODEV), |f| unsafe { f(pd, attr) })
}

/// `ibv_create_ah`: refused for `rondo0` (address handles serve UD QPs).
#[no_mangle]
pub unsafe extern "C" fn ibv_create_ah(pd: *mut ibv_pd, attr: *mut ibv_ah_attr) -> *mut c_void {
    // SAFETY: the caller's live PD.
    if unsafe { owner(pd.cast()) }.is_some() {
        refuse("address handles (UD QPs) are not supported");
        return fail(libc::EOPNOTSUPP);
    }
    next!(
        ibv_create_ah,
        "IBVERBS_1.1",
        fn(*mut ibv_pd, *mut ibv_ah_attr) -> *mut c_void
    )
    // SAFETY: not ours.
    .map_or(fail(libc::ENODEV), |f| unsafe { f(pd, attr) })
}

/// `ibv_create_ah_from_wc`: refused for `rondo0`.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_ah_from_wc(
    pd: *mut ibv_pd,
    wc: *mut ibv_wc,
    grh: *mut c_void,
    port: u8,
) -> *mut c_void {
    // SAFETY: the caller's live PD.
    if unsafe { owner(pd.cast()) }.is_some() {
        refuse("address handles (UD QPs) are not supported");
        return fail(libc::EOPNOTSUPP);
    }
    next!(
        ibv_create_ah_from_wc,
        "IBVERBS_1.1",
        fn(*mut ibv_pd, *mut ibv_wc, *mut c_void, u8) -> *mut c_void
    )
    // SAFETY: not ours.
    .map_or(fail(libc::ENODEV), |f| unsafe { f(pd, wc, grh, port) })
}

/// `ibv_attach_mcast`: refused for `rondo0`.
#[no_mangle]
pub unsafe extern "C" fn ibv_attach_mcast(qp: *mut ibv_qp, gid: *const c_void, lid: u16) -> c_int {
    // SAFETY: the caller's live QP.
    if unsafe { owner(qp.cast()) }.is_some() {
        refuse("multicast is not supported");
        return libc::EOPNOTSUPP;
    }
    next!(
        ibv_attach_mcast,
        "IBVERBS_1.1",
        fn(*mut ibv_qp, *const c_void, u16) -> c_int
    )
    // SAFETY: not ours.
    .map_or(libc::ENODEV, |f| unsafe { f(qp, gid, lid) })
}

/// `ibv_detach_mcast`: refused for `rondo0`.
#[no_mangle]
pub unsafe extern "C" fn ibv_detach_mcast(qp: *mut ibv_qp, gid: *const c_void, lid: u16) -> c_int {
    // SAFETY: the caller's live QP.
    if unsafe { owner(qp.cast()) }.is_some() {
        return libc::EOPNOTSUPP;
    }
    next!(
        ibv_detach_mcast,
        "IBVERBS_1.1",
        fn(*mut ibv_qp, *const c_void, u16) -> c_int
    )
    // SAFETY: not ours.
    .map_or(libc::ENODEV, |f| unsafe { f(qp, gid, lid) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peer_is_the_ipv4_address_of_a_mapped_gid_else_the_fallback() {
        let fallback = Ipv4Addr::new(10, 0, 0, 9);
        let mut a = ibv_ah_attr {
            dlid: 4242,
            is_global: 1,
            ..ibv_ah_attr::default()
        };
        a.grh.dgid = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 168, 1, 7];
        assert_eq!(peer_addr(&a, fallback), "192.168.1.7:4242".parse().unwrap());
        // Not global (ibv_rc_pingpong without -g, qperf): the fallback.
        a.is_global = 0;
        assert_eq!(peer_addr(&a, fallback), "10.0.0.9:4242".parse().unwrap());
        // A global GID that is not IPv4-mapped (a real RoCE or IB GID): the fallback.
        a.is_global = 1;
        a.grh.dgid = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8];
        assert_eq!(peer_addr(&a, fallback), "10.0.0.9:4242".parse().unwrap());
    }

    #[test]
    fn access_flags_map_and_unsupported_mandatory_flags_are_refused() {
        let all = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
        assert_eq!(access_of(all).unwrap(), AccessFlags::ALL);
        assert_eq!(
            access_of(IBV_ACCESS_REMOTE_READ).unwrap(),
            AccessFlags::REMOTE_READ
        );
        // Optional flags (relaxed ordering, perftest's default) are ignored.
        assert_eq!(
            access_of(all | IBV_ACCESS_OPTIONAL_FIRST).unwrap(),
            AccessFlags::ALL
        );
        // Zero-based (32) and on-demand paging (64) are not.
        for bad in [32, 64] {
            let e = access_of(all | bad).unwrap_err();
            assert!(e.contains(&format!("{bad:#x}")), "{e}");
        }
    }

    #[test]
    fn completions_convert_with_their_status_opcode_and_immediate() {
        let w = WorkCompletion {
            wr_id: 7,
            status: WcStatus::RemAccessErr,
            opcode: WcOpcode::RdmaWrite,
            byte_len: 16,
            imm: None,
            qp_num: 0x1234,
        };
        let c = wc_of(&w);
        assert_eq!(
            (c.wr_id, c.status, c.opcode, c.byte_len, c.qp_num, c.wc_flags),
            (7, 10, 1, 16, 0x1234, 0)
        );
        let r = wc_of(&WorkCompletion {
            status: WcStatus::Success,
            opcode: WcOpcode::RecvRdmaWithImm,
            imm: Some(0xdead_beef),
            ..w
        });
        assert_eq!(
            (r.status, r.opcode, r.imm_data, r.wc_flags),
            (0, 129, 0xdead_beef, IBV_WC_WITH_IMM)
        );
        assert_eq!(
            wc_of(&WorkCompletion {
                status: WcStatus::WrFlushErr,
                ..w
            })
            .status,
            5
        );
        assert_eq!(
            wc_of(&WorkCompletion {
                status: WcStatus::RetryExcErr,
                ..w
            })
            .status,
            12
        );
    }

    #[test]
    fn only_the_opcodes_rondo_carries_are_accepted() {
        for (op, want) in [
            (0, Opcode::RdmaWrite),
            (1, Opcode::RdmaWriteWithImm),
            (2, Opcode::Send),
            (3, Opcode::SendWithImm),
            (4, Opcode::RdmaRead),
        ] {
            assert_eq!(opcode_of(op).map(|o| o.0), Some(want));
        }
        // Atomics, local invalidate, bind MW, send with invalidate, TSO.
        for op in 5..=10 {
            assert!(opcode_of(op).is_none(), "{op}");
        }
    }
}
