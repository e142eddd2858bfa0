//! Posting: the `post_send`, `post_recv` and `post_srq_recv` ops.

use super::*;

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
        solicited: w.send_flags & IBV_SEND_SOLICITED != 0,
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
pub(super) unsafe extern "C" fn post_send(
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
pub(super) unsafe extern "C" fn post_recv(
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
pub(super) unsafe extern "C" fn post_srq_recv(
    _srq: *mut c_void,
    _wr: *mut ibv_recv_wr,
    _bad: *mut *mut ibv_recv_wr,
) -> c_int {
    libc::EOPNOTSUPP
}

#[cfg(test)]
mod tests {
    use super::*;
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
