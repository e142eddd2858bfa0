//! Devices and contexts: the device list, opening and closing, and the queries (device, ports, GIDs, P_Keys).

use super::cq::{poll_cq, req_notify_cq};
use super::post::{post_recv, post_send, post_srq_recv};
use super::qp::create_qp_ex;
use super::*;

/// `ibv_get_device_list`: `rondo0` first, then (with the `verbs` feature) one
/// `rondo_<dev>` per real device, then the real devices.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_list(num: *mut c_int) -> *mut *mut ibv_device {
    guard(null_mut(), || {
        let mut n: c_int = 0;
        // SAFETY: not ours: the real function, under its own contract.
        let real = unsafe { real::ibv_get_device_list(&mut n) };
        let real_devs: Vec<*mut ibv_device> = if real.is_null() {
            Vec::new()
        } else {
            // SAFETY: the real list holds `n` devices.
            (0..n.max(0) as usize)
                .map(|i| unsafe { *real.add(i) })
                .collect()
        };
        // SAFETY: live devices of the real list.
        let names: Vec<String> = real_devs
            .iter()
            .map(|&d| c_name(unsafe { &(*d).name }))
            .collect();
        let mut v: Vec<*mut ibv_device> = Vec::new();
        for e in listing(&names, cfg!(feature = "verbs")) {
            match e {
                Listed::Udp => v.push(devices::udp().handle()),
                Listed::Nic(i) => {
                    // SAFETY: a live device of the real list.
                    let (node, transport) =
                        unsafe { ((*real_devs[i]).node_type, (*real_devs[i]).transport_type) };
                    if let Some(d) = devices::nic(&names[i], node, transport) {
                        v.push(d.handle());
                    }
                }
                Listed::Real(i) => v.push(real_devs[i]),
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
                    // SAFETY: the list the real ibv_get_device_list returned.
                    unsafe { real::ibv_free_device_list(real as *mut *mut ibv_device) };
                }
                // SAFETY: made by ibv_get_device_list above as a boxed slice of `len`.
                drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(list, len)) });
            }
            None => {
                // SAFETY: not ours: the real library's.
                unsafe { real::ibv_free_device_list(list) };
            }
        }
    })
}

/// `ibv_get_device_name`.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_name(dev: *mut ibv_device) -> *const c_char {
    if devices::ours(dev).is_some() {
        // SAFETY: our device lives forever.
        return unsafe { (*dev).name.as_ptr() };
    }
    // SAFETY: not ours: the real function, under its own contract.
    unsafe { real::ibv_get_device_name(dev) }
}

/// `ibv_get_device_guid` (network order).
#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_guid(dev: *mut ibv_device) -> u64 {
    match devices::ours(dev).map(|d| &d.over) {
        Some(Over::Udp) => return config().map_or(0, |c| guid_of(c.ip)),
        #[cfg(feature = "verbs")]
        Some(Over::Nic(real)) => return crate::nic::device_guid(real),
        #[cfg(not(feature = "verbs"))]
        Some(Over::Nic(_)) => return 0,
        None => {}
    }
    // SAFETY: not ours: the real function, under its own contract.
    unsafe { real::ibv_get_device_guid(dev) }
}

/// `ibv_get_device_index`: -1 for our devices (they have no kernel index).
#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_index(dev: *mut ibv_device) -> c_int {
    if devices::ours(dev).is_some() {
        return -1;
    }
    // SAFETY: not ours: the real function, under its own contract.
    unsafe { real::ibv_get_device_index(dev) }
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
    let Some(d) = devices::ours(dev) else {
        // SAFETY: not ours: the real function, under its own contract.
        return unsafe { real::ibv_open_device(dev) };
    };
    guard(fail(libc::EIO), || {
        let cfg = match config() {
            Ok(c) => c,
            Err(e) => return fail(e),
        };
        match Ctx::open(cfg, d, ops_table(), vctx_table()) {
            Ok(c) => Box::leak(c).handle(),
            Err(e) => {
                refuse(&format!("cannot open {}: {e}", d.name()));
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
            let s = c.rondo_if_open().map(|r| r.stats()).unwrap_or_default();
            debug!(
                "closing {}: {} datagrams in, fault injection dropped {} and reordered {}",
                c.name(),
                s.datagrams,
                s.fault_dropped,
                s.fault_reordered
            );
            // SAFETY: made by ibv_open_device with Box::leak; closed once.
            drop(unsafe { Box::from_raw(c as *mut Ctx) });
            0
        }),
        // SAFETY: not ours: the real function, under its own contract.
        None => unsafe { real::ibv_close_device(ctx) },
    }
}

/// What Rondo carries, as `ibv_query_device` reports it (`rondo0`'s whole answer;
/// a `rondo_<dev>`'s capabilities).
fn device_attr(c: &Ctx) -> Result<ibv_device_attr, c_int> {
    // SAFETY: plain integers; every field is set below or zero.
    let mut a: ibv_device_attr = unsafe { core::mem::zeroed() };
    for (d, b) in a.fw_ver.iter_mut().zip(b"rondo-ibv 0.1".iter()) {
        *d = *b as c_char;
    }
    let guid = guid_of(c.cfg.ip);
    a.node_guid = guid;
    a.sys_image_guid = guid;
    a.max_mr_size = u64::MAX >> 1;
    a.page_size_cap = 4096;
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
    #[cfg(feature = "verbs")]
    if let Via::Nic(n) = &c.via {
        a = crate::nic::device_attr(&n.query_device()?, &a);
    }
    (a.vendor_id, a.vendor_part_id) = c.vendor((a.vendor_id, a.vendor_part_id));
    Ok(a)
}

/// `ibv_query_device`.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_device(
    ctx: *mut ibv_context,
    attr: *mut ibv_device_attr,
) -> c_int {
    // SAFETY: the caller's live context.
    match unsafe { ctx_of(ctx) } {
        Some(c) => guard(libc::EIO, || match device_attr(c) {
            Ok(a) => {
                // SAFETY: the caller's out-parameter.
                unsafe { attr.write(a) };
                0
            }
            Err(e) => e,
        }),
        // SAFETY: not ours: the real function, under its own contract.
        None => unsafe { real::ibv_query_device(ctx, attr) },
    }
}

/// The attributes of port `port`: `rondo0`'s one port, a `rondo_<dev>`'s real
/// ports (with the listener's port as LID).
fn port_attr(c: &Ctx, port: u8) -> Result<ibv_port_attr, c_int> {
    #[cfg(feature = "verbs")]
    if let Via::Nic(n) = &c.via {
        return Ok(crate::nic::port_attr(&n.query_port(port)?, c.lid()));
    }
    if port != 1 {
        return Err(libc::EINVAL);
    }
    Ok(ibv_port_attr {
        state: IBV_PORT_ACTIVE,
        max_mtu: IBV_MTU_4096,
        active_mtu: IBV_MTU_4096,
        gid_tbl_len: 1,
        port_cap_flags: 0,
        max_msg_sz: MAX_MSG,
        pkey_tbl_len: 1,
        lid: c.lid(),
        max_vl_num: 1,
        active_width: 2,  // 4x
        active_speed: 32, // EDR
        phys_state: 5,    // LinkUp
        link_layer: IBV_LINK_LAYER_ETHERNET,
        ..ibv_port_attr::default()
    })
}

/// Writes `len` bytes of the port attributes (never more than asked).
///
/// # Safety
/// `out` is valid for `len` bytes.
unsafe fn write_port(c: &Ctx, port: u8, out: *mut u8, len: usize) -> c_int {
    let a = match port_attr(c, port) {
        Ok(a) => a,
        Err(e) => return e,
    };
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
        // SAFETY: not ours: the real function, under its own contract.
        None => unsafe { real::ibv_query_port(ctx, port, attr) },
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
    match unsafe { ctx_of(ctx) }.map(|c| (c.real(), c)) {
        Some((None, c)) => {
            if port != 1 || index != 0 {
                return -1;
            }
            // SAFETY: the caller's out-parameter.
            unsafe { gid.write(c.gid()) };
            0
        }
        // A rondo_<dev>: the real device's table; not ours: the real library.
        // SAFETY: the real function, on the real device's context under a
        // rondo_<dev>, else on the caller's (not ours).
        found => unsafe { real::ibv_query_gid(real_of(found, ctx), port, index, gid) },
    }
}

/// The one entry of `rondo0`'s GID table: a RoCE v2 GID at port 1, index 0.
fn gid_entry(c: &Ctx) -> ibv_gid_entry {
    ibv_gid_entry {
        gid: c.gid(),
        gid_index: 0,
        port_num: 1,
        gid_type: IBV_GID_TYPE_ROCE_V2,
        ndev_ifindex: 0,
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
    match unsafe { ctx_of(ctx) }.map(|c| (c.real(), c)) {
        Some((None, c)) => {
            if port != 1 || index != 0 || flags != 0 {
                return libc::EINVAL;
            }
            if size < core::mem::size_of::<ibv_gid_entry>() {
                return libc::EINVAL;
            }
            let e = gid_entry(c);
            // SAFETY: the caller's entry of `size` bytes.
            unsafe { entry.write(e) };
            0
        }
        // SAFETY: the real function, on the real device's context under a
        // rondo_<dev>, else on the caller's (not ours).
        found => unsafe {
            real::_ibv_query_gid_ex(real_of(found, ctx), port, index, entry, flags, size)
        },
    }
}

/// `_ibv_query_gid_table` (what `ibv_query_gid_table` calls): the one entry of
/// `rondo0`, a RoCE v2 GID at port 1, index 0. Returns the entries written, or a
/// negative errno.
#[no_mangle]
pub unsafe extern "C" fn _ibv_query_gid_table(
    ctx: *mut ibv_context,
    entries: *mut ibv_gid_entry,
    max_entries: usize,
    flags: u32,
    entry_size: usize,
) -> isize {
    // SAFETY: the caller's live context.
    match unsafe { ctx_of(ctx) }.map(|c| (c.real(), c)) {
        Some((None, c)) => {
            if flags != 0 || entry_size < core::mem::size_of::<ibv_gid_entry>() {
                return -(libc::EINVAL as isize);
            }
            if max_entries < 1 || entries.is_null() {
                return -(libc::EINVAL as isize);
            }
            let e = gid_entry(c);
            // SAFETY: the caller's array of `max_entries` entries of
            // `entry_size` bytes: the first is at least an `ibv_gid_entry`.
            unsafe { entries.write(e) };
            1
        }
        // SAFETY: the real function, on the real device's context under a
        // rondo_<dev>, else on the caller's (not ours).
        found => unsafe {
            real::_ibv_query_gid_table(real_of(found, ctx), entries, max_entries, flags, entry_size)
        },
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
    match unsafe { ctx_of(ctx) }.map(|c| (c.real(), c)) {
        Some((None, _)) => {
            if port != 1 || index != 0 {
                return libc::EINVAL;
            }
            // SAFETY: the caller's out-parameter.
            unsafe { ty.write(IBV_GID_TYPE_SYSFS_ROCE_V2) };
            0
        }
        // SAFETY: the real function, on the real device's context under a
        // rondo_<dev>, else on the caller's (not ours).
        found => unsafe { real::ibv_query_gid_type(real_of(found, ctx), port, index, ty) },
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
    match unsafe { ctx_of(ctx) }.map(|c| (c.real(), c)) {
        Some((None, _)) => {
            if port != 1 || index != 0 {
                return -1;
            }
            // SAFETY: the caller's out-parameter.
            unsafe { pkey.write(0xffffu16.to_be()) };
            0
        }
        // SAFETY: the real function, on the real device's context under a
        // rondo_<dev>, else on the caller's (not ours).
        found => unsafe { real::ibv_query_pkey(real_of(found, ctx), port, index, pkey) },
    }
}
