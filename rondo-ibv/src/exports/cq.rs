//! Completion channels and queues, the `poll_cq` and `req_notify_cq` ops, and async events.

use super::*;

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
        // SAFETY: not ours: the real function, under its own contract.
        None => unsafe { real::ibv_create_comp_channel(ctx) },
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
    // SAFETY: not ours: the real function, under its own contract.
    unsafe { real::ibv_destroy_comp_channel(ch) }
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
        // SAFETY: not ours: the real function, under its own contract.
        return unsafe { real::ibv_create_cq(ctx, cqe, cq_context, channel, vector) };
    };
    guard(fail(libc::EIO), || {
        if cqe < 1 {
            return fail(libc::EINVAL);
        }
        let inner = match rondo(c).and_then(|r| r.create_cq(cqe as usize).map_err(errno_of)) {
            Ok(q) => q,
            Err(e) => return fail(e),
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
        // SAFETY: just made.
        let handle = unsafe { &*cq }.inner.handle();
        lock(&c.handles).cqs.insert(handle, cq as usize);
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

/// `ibv_resize_cq`: the CQ holds `cqe` entries from now on (EINVAL below the
/// completions it holds).
#[no_mangle]
pub unsafe extern "C" fn ibv_resize_cq(cq: *mut ibv_cq, cqe: c_int) -> c_int {
    // SAFETY: the caller's live CQ.
    if unsafe { owner(cq.cast()) }.is_some() {
        return guard(libc::EIO, || {
            // SAFETY: ours.
            let q = unsafe { &mut *(cq as *mut Cq) };
            if cqe < 1 {
                return libc::EINVAL;
            }
            match q.inner.resize(cqe as usize) {
                Ok(()) => {
                    q.cq.cqe = cqe;
                    0
                }
                Err(e) => {
                    debug!("ibv_resize_cq: {e}");
                    libc::EINVAL
                }
            }
        });
    }
    // SAFETY: not ours: the real function, under its own contract.
    unsafe { real::ibv_resize_cq(cq, cqe) }
}

/// `ibv_destroy_cq`.
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_cq(cq: *mut ibv_cq) -> c_int {
    // SAFETY: the caller's live CQ.
    if let Some(c) = unsafe { owner(cq.cast()) } {
        // SAFETY: made by ibv_create_cq; freed once.
        let b = unsafe { Box::from_raw(cq as *mut Cq) };
        lock(&c.handles).cqs.remove(&b.inner.handle());
        if !b.cq.channel.is_null() {
            // SAFETY: the channel outlives its CQs.
            unsafe { (*(b.cq.channel as *mut Channel)).ch.refcnt -= 1 };
        }
        drop(b);
        return 0;
    }
    // SAFETY: not ours: the real function, under its own contract.
    unsafe { real::ibv_destroy_cq(cq) }
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
        // SAFETY: not ours: the real function, under its own contract.
        return unsafe { real::ibv_get_cq_event(ch, cq, cq_context) };
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
    // SAFETY: not ours.
    unsafe { real::ibv_ack_cq_events(cq, n) }
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
pub(super) unsafe extern "C" fn poll_cq(cq: *mut ibv_cq, n: c_int, wc: *mut ibv_wc) -> c_int {
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

/// `context->ops.req_notify_cq`: the next completion, or with `solicited_only`
/// the next solicited receive or error completion.
pub(super) unsafe extern "C" fn req_notify_cq(cq: *mut ibv_cq, solicited_only: c_int) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: only our CQs are reached through our ops table.
        let q = unsafe { &*(cq as *mut Cq) };
        if q.cq.channel.is_null() {
            return libc::EINVAL;
        }
        if solicited_only != 0 {
            q.inner.arm_notify_solicited();
        } else {
            q.inner.arm_notify();
        }
        0
    })
}

/// The C form of an async event of context `c` (`None` when the object it names
/// is gone).
fn async_event_of(c: &Ctx, ev: AsyncEvent) -> Option<ibv_async_event> {
    let h = lock(&c.handles);
    Some(match ev {
        AsyncEvent::CqError { cq } => ibv_async_event {
            element: *h.cqs.get(&cq)?,
            event_type: IBV_EVENT_CQ_ERR,
        },
        AsyncEvent::QpFatal { qp_num } => ibv_async_event {
            element: *h.qps.get(&qp_num)?,
            event_type: IBV_EVENT_QP_FATAL,
        },
        _ => return None,
    })
}

/// `ibv_get_async_event`: waits on the context's async fd (an eventfd counting
/// rondo-verbs' async events: `IBV_EVENT_CQ_ERR` for a CQ that overran,
/// `IBV_EVENT_QP_FATAL` for its QPs), or fails with EAGAIN when the application
/// made the fd non-blocking and none is queued.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_async_event(
    ctx: *mut ibv_context,
    event: *mut ibv_async_event,
) -> c_int {
    // SAFETY: the caller's live context.
    let Some(c) = (unsafe { ctx_of(ctx) }) else {
        // SAFETY: not ours: the real function, under its own contract.
        return unsafe { real::ibv_get_async_event(ctx, event) };
    };
    loop {
        let mut v: u64 = 0;
        // SAFETY: reading 8 bytes from our eventfd into a local.
        let n = unsafe { libc::read(c.vctx.context.async_fd, (&mut v as *mut u64).cast(), 8) };
        if n != 8 {
            // EAGAIN (non-blocking) and EINTR (a signal), as the real library.
            return -1;
        }
        let found = guard(None, || {
            c.rondo_if_open()?
                .poll_async_event()
                .map(|ev| async_event_of(c, ev))
        });
        if let Some(Some(e)) = found {
            // SAFETY: the caller's out-parameter.
            unsafe { event.write(e) };
            return 0;
        }
        // The event named a CQ or QP destroyed since: wait for the next.
    }
}

/// `ibv_ack_async_event`: counts the event on its CQ or QP.
#[no_mangle]
pub unsafe extern "C" fn ibv_ack_async_event(event: *mut ibv_async_event) {
    // SAFETY: the caller's event, filled by ibv_get_async_event.
    let e = unsafe { &*event };
    // Only CQ and QP events name an object whose first member is its context.
    let object = matches!(e.event_type, IBV_EVENT_CQ_ERR | IBV_EVENT_QP_FATAL);
    // SAFETY: for these event types the element is a live CQ or QP.
    if object && unsafe { owner(e.element as *const c_void) }.is_some() {
        // SAFETY: ours, of the type the event says.
        unsafe {
            if e.event_type == IBV_EVENT_CQ_ERR {
                let cq = e.element as *mut ibv_cq;
                (*cq).async_events_completed = (*cq).async_events_completed.wrapping_add(1);
            } else {
                let qp = e.element as *mut ibv_qp;
                (*qp).events_completed = (*qp).events_completed.wrapping_add(1);
            }
        }
        return;
    }
    // SAFETY: not ours.
    unsafe { real::ibv_ack_async_event(event) }
}

#[cfg(test)]
mod tests {
    use super::*;
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
}
