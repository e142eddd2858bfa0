//! Queue pairs: creation (`ibv_create_qp`, the `create_qp_ex` op), the state changes (connection set-up at RTR), queries and destruction.

use super::*;

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
    let mut attr = c.qp_attr();
    attr.max_send_wr = depth as usize;
    attr.max_recv_wr = cap.max_recv_wr.max(1) as usize;
    attr.max_sge = cap.max_send_sge.max(cap.max_recv_sge).max(1) as usize;
    let r = match rondo(c) {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    let qp = match r.create_qp(&p.inner, &scq.inner, &rcq.inner, attr) {
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
    lock(&c.handles).qps.insert(qpn, q as usize);
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
        // SAFETY: not ours: the real function, under its own contract.
        return unsafe { real::ibv_create_qp(pd, attr) };
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
pub(super) unsafe extern "C" fn create_qp_ex(
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
    // SAFETY: not ours: the real function, under its own contract.
    unsafe { real::ibv_qp_to_qp_ex(qp) }
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
        // SAFETY: not ours: the real function, under its own contract.
        return unsafe { real::ibv_modify_qp(qp, attr, mask) };
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
            IBV_QPS_INIT if cur <= IBV_QPS_INIT => {
                // SAFETY: our QP's context.
                if let Err(e) = check_port(unsafe { &*q.ctx }, mask, a.port_num) {
                    refuse(&format!("QP {:#x} to INIT: {e}", q.ex.qp_base.qp_num));
                    return libc::EINVAL;
                }
            }
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

/// Whether the port an `ibv_modify_qp` to INIT names (if any) is the one the
/// context's QPs run on: a `rondo_<dev>`'s UD QP runs on one port of the device.
#[cfg_attr(not(feature = "verbs"), allow(unused_variables))]
fn check_port(c: &Ctx, mask: c_int, port: u8) -> Result<(), String> {
    if mask & IBV_QP_PORT == 0 {
        return Ok(());
    }
    match &c.via {
        Via::Udp => Ok(()),
        #[cfg(feature = "verbs")]
        Via::Nic(n) => match n.data() {
            Some(d) if d.port != port => Err(format!(
                "port {port} asked for, but {} runs over port {} of {} (set RONDO_IBV_PORT={port} to use that one)",
                c.name(),
                d.port,
                n.name
            )),
            _ => Ok(()),
        },
    }
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
        // SAFETY: not ours: the real function, under its own contract.
        return unsafe { real::ibv_query_qp(qp, attr, mask, init) };
    }
    guard(libc::EIO, || {
        // SAFETY: ours.
        let q = unsafe { &*(qp as *mut Qp) };
        let state = q.st.state.load(Ordering::Acquire);
        let retry = q.qp().retry();
        let a = ibv_qp_attr {
            qp_state: state,
            cur_qp_state: state,
            // SAFETY: our QP's context.
            path_mtu: unsafe { &*q.ctx }.path_mtu(),
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
        // SAFETY: not ours: the real function, under its own contract.
        return unsafe { real::ibv_destroy_qp(qp) };
    }
    guard(libc::EIO, || {
        // SAFETY: made by create_qp_common; freed once.
        let q = unsafe { Box::from_raw(qp as *mut Qp) };
        // SAFETY: the QP's context outlives it.
        let c = unsafe { &*q.ctx };
        lock(&c.qps).remove(&q.ex.qp_base.qp_num);
        lock(&c.handles).qps.remove(&q.ex.qp_base.qp_num);
        drop(q);
        0
    })
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
}
