//! RC queue pairs and their posts, for `rondo perf --transport rc` (the transport
//! Rondo replaces, measured on the same device).
#![allow(unsafe_code)] // the verbs FFI of RC queue pairs; each block says why it is sound

use super::qp::QpInner;
use super::{AnyCq, Pd, Sge, VerbsError};
use crate::verbs::qp_attr::QpAttrs;
use ibverbs_sys as ffi;
use std::ptr;

impl Pd {
    /// Creates an RC QP in RESET on `send` and `recv`, with one scatter entry per
    /// WR and no inline data.
    pub fn create_rc_qp(
        &self,
        send: &AnyCq,
        recv: &AnyCq,
        max_send_wr: u32,
        max_recv_wr: u32,
    ) -> Result<RcQp, VerbsError> {
        let cap = ffi::ibv_qp_cap {
            max_send_wr,
            max_recv_wr,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        };
        let (inner, _) = self.create_qp(send, recv, cap, ffi::ibv_qp_type::IBV_QPT_RC)?;
        Ok(RcQp { inner })
    }
}

/// A reliable-connected queue pair.
#[derive(Debug)]
pub struct RcQp {
    inner: QpInner,
}

/// Operation of an RC send work request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RcOp {
    /// RDMA WRITE.
    Write,
    /// RDMA WRITE with immediate (consumes a receive at the peer).
    WriteImm(u32),
    /// SEND.
    Send,
    /// RDMA READ.
    Read,
}

/// One RC send work request.
#[derive(Clone, Copy, Debug)]
pub struct RcSend {
    /// Echoed by the completion.
    pub wr_id: u64,
    /// The operation.
    pub op: RcOp,
    /// The local bytes (`None`: a zero-byte operation).
    pub sge: Option<Sge>,
    /// Remote address and key (RDMA operations).
    pub remote: Option<(u64, u32)>,
    /// Ask for a completion.
    pub signaled: bool,
}

impl RcQp {
    /// QP number.
    pub fn qpn(&self) -> u32 {
        self.inner.qpn()
    }

    /// Applies one state transition's attributes.
    pub fn modify(&self, attrs: &QpAttrs) -> Result<(), VerbsError> {
        self.inner.modify(attrs)
    }

    /// Posts one send work request.
    ///
    /// # Safety
    /// The memory of `s.sge` must be registered and stay valid until the WR's
    /// completion (or a later signaled one) is polled, or the QP is destroyed.
    pub unsafe fn post_send(&self, s: &RcSend) -> Result<(), VerbsError> {
        let mut sge = s.sge;
        let mut wr = send_wr(s);
        if let Some(sge) = sge.as_mut() {
            wr.sg_list = sge;
            wr.num_sge = 1;
        }
        // SAFETY: the SGE lives until the call returns; the caller keeps its
        // memory valid.
        unsafe { self.inner.post(std::slice::from_mut(&mut wr)) }
    }

    /// Posts one receive (`sge` `None`: no buffer, for immediates only).
    ///
    /// # Safety
    /// The memory of `sge` must be registered and stay valid until the WR's
    /// completion is polled, or the QP is destroyed.
    pub unsafe fn post_recv(&self, wr_id: u64, sge: Option<Sge>) -> Result<(), VerbsError> {
        let mut sge = sge;
        let mut wr = ffi::ibv_recv_wr {
            wr_id,
            next: ptr::null_mut(),
            sg_list: sge.as_mut().map_or(ptr::null_mut(), |s| s as *mut Sge),
            num_sge: i32::from(sge.is_some()),
        };
        // SAFETY: as in post_send.
        unsafe { self.inner.post(std::slice::from_mut(&mut wr)) }
    }
}

/// The `ibv_send_wr` of an RC send, without its scatter list.
fn send_wr(s: &RcSend) -> ffi::ibv_send_wr {
    use ffi::ibv_wr_opcode as o;
    // SAFETY: ibv_send_wr is plain C data (integers, pointers, unions of them);
    // all-zero is a valid value.
    let mut wr: ffi::ibv_send_wr = unsafe { std::mem::zeroed() };
    wr.wr_id = s.wr_id;
    wr.send_flags = if s.signaled {
        ffi::ibv_send_flags::IBV_SEND_SIGNALED.0
    } else {
        0
    };
    let (opcode, imm) = match s.op {
        RcOp::Write => (o::IBV_WR_RDMA_WRITE, None),
        RcOp::WriteImm(i) => (o::IBV_WR_RDMA_WRITE_WITH_IMM, Some(i)),
        RcOp::Send => (o::IBV_WR_SEND, None),
        RcOp::Read => (o::IBV_WR_RDMA_READ, None),
    };
    wr.opcode = opcode;
    if let Some(i) = imm {
        wr.__bindgen_anon_1.imm_data = i.to_be();
    }
    if let Some((remote_addr, rkey)) = s.remote {
        wr.wr.rdma = ffi::ibv_send_wr__bindgen_ty_2__bindgen_ty_1 { remote_addr, rkey };
    }
    wr
}

#[cfg(test)]
mod tests {
    use super::super::qp::qp_attr;
    use super::*;
    use crate::verbs::qp_attr::{AddressVector, QpState};
    use ffi::ibv_qp_attr_mask as m;

    #[test]
    fn rc_attributes_set_exactly_their_mask_bits_and_values() {
        let init = QpAttrs {
            state: Some(QpState::Init),
            pkey_index: Some(0),
            port: Some(1),
            access: Some(7),
            ..QpAttrs::default()
        };
        let (a, mask) = qp_attr(&init);
        assert_eq!(
            mask.0,
            (m::IBV_QP_STATE | m::IBV_QP_PKEY_INDEX | m::IBV_QP_PORT | m::IBV_QP_ACCESS_FLAGS).0
        );
        assert_eq!(a.qp_state, ffi::ibv_qp_state::IBV_QPS_INIT);
        assert_eq!(a.qp_access_flags, 7);
        let rtr = QpAttrs {
            state: Some(QpState::Rtr),
            av: Some(AddressVector {
                dgid: [9; 16],
                dlid: 0,
                sgid_index: 3,
                hop_limit: 64,
                traffic_class: 26 << 2,
                flow_label: 0,
                sl: 3,
                port: 1,
            }),
            path_mtu: Some(ffi::IBV_MTU_1024),
            dest_qpn: Some(0x42),
            rq_psn: Some(0x77),
            max_dest_rd_atomic: Some(16),
            min_rnr_timer: Some(12),
            ..QpAttrs::default()
        };
        let (a, mask) = qp_attr(&rtr);
        assert_eq!(
            mask.0,
            (m::IBV_QP_STATE
                | m::IBV_QP_AV
                | m::IBV_QP_PATH_MTU
                | m::IBV_QP_DEST_QPN
                | m::IBV_QP_RQ_PSN
                | m::IBV_QP_MAX_DEST_RD_ATOMIC
                | m::IBV_QP_MIN_RNR_TIMER)
                .0
        );
        assert_eq!(a.qp_state, ffi::ibv_qp_state::IBV_QPS_RTR);
        assert_eq!(
            (a.dest_qp_num, a.rq_psn, a.path_mtu),
            (0x42, 0x77, ffi::IBV_MTU_1024)
        );
        assert_eq!(a.ah_attr.is_global, 1, "RoCE needs a GRH");
        // SAFETY: reading the raw bytes of a GID union written as raw.
        assert_eq!(unsafe { a.ah_attr.grh.dgid.raw }, [9; 16]);
        assert_eq!((a.ah_attr.grh.sgid_index, a.ah_attr.port_num), (3, 1));
        assert_eq!((a.ah_attr.grh.traffic_class, a.ah_attr.sl), (104, 3));
        assert_eq!(
            (
                a.max_dest_rd_atomic,
                a.min_rnr_timer,
                a.ah_attr.grh.hop_limit
            ),
            (16, 12, 64)
        );
        let rts = QpAttrs {
            state: Some(QpState::Rts),
            sq_psn: Some(0x55),
            timeout: Some(14),
            retry_cnt: Some(7),
            rnr_retry: Some(7),
            max_rd_atomic: Some(16),
            ..QpAttrs::default()
        };
        let (a, mask) = qp_attr(&rts);
        assert_eq!(
            mask.0,
            (m::IBV_QP_STATE
                | m::IBV_QP_SQ_PSN
                | m::IBV_QP_TIMEOUT
                | m::IBV_QP_RETRY_CNT
                | m::IBV_QP_RNR_RETRY
                | m::IBV_QP_MAX_QP_RD_ATOMIC)
                .0
        );
        assert_eq!(
            (
                a.sq_psn,
                a.timeout,
                a.retry_cnt,
                a.rnr_retry,
                a.max_rd_atomic
            ),
            (0x55, 14, 7, 7, 16)
        );
    }

    #[test]
    fn send_wrs_carry_opcode_imm_and_remote() {
        let s = RcSend {
            wr_id: 9,
            op: RcOp::WriteImm(0x0102_0304),
            sge: None,
            remote: Some((0x1000, 0xABCD)),
            signaled: true,
        };
        let wr = send_wr(&s);
        assert_eq!(wr.wr_id, 9);
        assert_eq!(wr.opcode, ffi::ibv_wr_opcode::IBV_WR_RDMA_WRITE_WITH_IMM);
        assert_eq!(wr.send_flags, ffi::ibv_send_flags::IBV_SEND_SIGNALED.0);
        // SAFETY: the members written by send_wr.
        let (imm, rdma) = unsafe { (wr.__bindgen_anon_1.imm_data, wr.wr.rdma) };
        assert_eq!(imm, 0x0102_0304u32.to_be(), "immediates travel big-endian");
        assert_eq!((rdma.remote_addr, rdma.rkey), (0x1000, 0xABCD));
        let read = send_wr(&RcSend {
            op: RcOp::Read,
            signaled: false,
            ..s
        });
        assert_eq!(read.opcode, ffi::ibv_wr_opcode::IBV_WR_RDMA_READ);
        assert_eq!(read.send_flags, 0);
        let send = send_wr(&RcSend {
            op: RcOp::Send,
            remote: None,
            ..s
        });
        assert_eq!(send.opcode, ffi::ibv_wr_opcode::IBV_WR_SEND);
        // SAFETY: as above.
        assert_eq!(
            unsafe { send.wr.rdma.remote_addr },
            0,
            "no remote for a SEND"
        );
    }
}
