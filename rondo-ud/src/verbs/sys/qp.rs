//! UD queue pairs, address handles and the post calls.
#![allow(unsafe_code)] // the verbs FFI of this datapath; each block says why it is sound

use super::{AnyCq, Pd, PdInner, VerbsError};
use crate::verbs::address::AhSpec;
use crate::verbs::qp_attr::{QpAttrs, QpState};
use ibverbs_sys as ffi;
use std::ptr;
use std::sync::Arc;

impl Pd {
    /// Creates an address handle.
    pub fn create_ah(&self, spec: &AhSpec) -> Result<Ah, VerbsError> {
        let mut attr = ah_attr(spec);
        // SAFETY: `attr` is fully initialised; the PD is alive.
        let ah = unsafe { ffi::ibv_create_ah(self.inner.pd, &mut attr) };
        if ah.is_null() {
            return Err(VerbsError::last(
                "ibv_create_ah (is the GID index a RoCEv2 GID?)",
            ));
        }
        Ok(Ah {
            ah,
            _pd: self.inner.clone(),
        })
    }

    /// Creates a UD QP in RESET with the given queue sizes.
    pub fn create_ud_qp(
        &self,
        send: &AnyCq,
        recv: &AnyCq,
        max_send_wr: u32,
        max_recv_wr: u32,
        max_inline: u32,
    ) -> Result<UdQp, VerbsError> {
        let cap = ffi::ibv_qp_cap {
            max_send_wr,
            max_recv_wr,
            max_send_sge: 1,
            max_recv_sge: 2,
            max_inline_data: max_inline,
        };
        let (inner, cap) = self.create_qp(send, recv, cap, ffi::ibv_qp_type::IBV_QPT_UD)?;
        Ok(UdQp {
            inner,
            max_inline: cap.max_inline_data,
        })
    }

    /// Creates a QP of `qp_type` in RESET; returns it with the capacities the
    /// device granted.
    pub(super) fn create_qp(
        &self,
        send: &AnyCq,
        recv: &AnyCq,
        cap: ffi::ibv_qp_cap,
        qp_type: ffi::ibv_qp_type::Type,
    ) -> Result<(QpInner, ffi::ibv_qp_cap), VerbsError> {
        let mut init = ffi::ibv_qp_init_attr {
            qp_context: ptr::null_mut(),
            send_cq: send.raw(),
            recv_cq: recv.raw(),
            srq: ptr::null_mut(),
            cap,
            qp_type,
            sq_sig_all: 0,
        };
        // SAFETY: `init` is fully initialised with live CQs; the PD is alive.
        let qp = unsafe { ffi::ibv_create_qp(self.inner.pd, &mut init) };
        if qp.is_null() {
            return Err(VerbsError::last("ibv_create_qp"));
        }
        let inner = QpInner {
            qp,
            _pd: self.inner.clone(),
            _send: send.clone(),
            _recv: recv.clone(),
        };
        Ok((inner, init.cap))
    }
}

/// A queue pair of any type: destroyed before its CQs and PD (it holds them).
#[derive(Debug)]
pub(super) struct QpInner {
    qp: *mut ffi::ibv_qp,
    _pd: Arc<PdInner>,
    _send: AnyCq,
    _recv: AnyCq,
}
// SAFETY: verbs objects may be used from any thread.
unsafe impl Send for QpInner {}
impl Drop for QpInner {
    fn drop(&mut self) {
        // SAFETY: `qp` came from ibv_create_qp and is destroyed once, before its
        // CQs and PD (this struct holds Arcs to them).
        unsafe { ffi::ibv_destroy_qp(self.qp) };
    }
}

impl QpInner {
    /// QP number.
    pub(super) fn qpn(&self) -> u32 {
        // SAFETY: `qp` is valid while self lives.
        unsafe { (*self.qp).qp_num }
    }

    /// Applies one state transition's attributes.
    pub(super) fn modify(&self, attrs: &QpAttrs) -> Result<(), VerbsError> {
        let (mut attr, mask) = qp_attr(attrs);
        // SAFETY: `attr` is initialised for every bit of `mask`; the QP is alive.
        let rc = unsafe { ffi::ibv_modify_qp(self.qp, &mut attr, mask.0 as i32) };
        if rc != 0 {
            return Err(VerbsError::call("ibv_modify_qp", rc));
        }
        Ok(())
    }

    /// Posts `wrs`, send or receive WRs, as one chain (linked here, one doorbell).
    ///
    /// # Safety
    /// The scatter lists the WRs point to must live until this call returns, and
    /// the memory they name must stay valid as the WRs' contracts say.
    pub(super) unsafe fn post<T: Chain>(&self, wrs: &mut [T]) -> Result<(), VerbsError> {
        let n = wrs.len();
        if n == 0 {
            return Ok(());
        }
        let base = wrs.as_mut_ptr();
        for i in 1..n {
            // SAFETY: `i < n`: both pointers are inside `wrs`, which is not moved
            // before the post.
            unsafe { T::set_next(base.add(i - 1), base.add(i)) };
        }
        // SAFETY: the chain lives until the call returns; the caller keeps its
        // scatter lists and buffers valid; the QP is alive.
        let rc = unsafe { T::post(self.qp, base) }.ok_or(VerbsError::Config(T::MISSING))?;
        if rc != 0 {
            return Err(VerbsError::call(T::CALL, rc));
        }
        Ok(())
    }
}

/// A work request, linked to the next one of its chain and posted through its
/// queue's op of the provider.
pub(super) trait Chain: Sized {
    /// The verbs call, for errors.
    const CALL: &'static str;
    /// What a provider without the op says.
    const MISSING: &'static str;

    /// Sets `this`' next WR.
    ///
    /// # Safety
    /// `this` must point to a live WR.
    unsafe fn set_next(this: *mut Self, next: *mut Self);

    /// Posts the chain at `wr` on `qp` (`None`: the provider has no such op).
    ///
    /// # Safety
    /// `qp` must be alive and the chain as [`QpInner::post`] requires.
    unsafe fn post(qp: *mut ffi::ibv_qp, wr: *mut Self) -> Option<i32>;
}

impl Chain for ffi::ibv_send_wr {
    const CALL: &'static str = "ibv_post_send";
    const MISSING: &'static str = "driver has no post_send";

    unsafe fn set_next(this: *mut Self, next: *mut Self) {
        // SAFETY: the caller passes a live WR.
        unsafe { (*this).next = next };
    }

    unsafe fn post(qp: *mut ffi::ibv_qp, wr: *mut Self) -> Option<i32> {
        let mut bad = ptr::null_mut();
        // SAFETY: the caller passes a live QP, whose context's ops table the
        // provider set, and a valid chain.
        unsafe {
            (*(*qp).context)
                .ops
                .post_send
                .map(|post| post(qp, wr, &mut bad))
        }
    }
}

impl Chain for ffi::ibv_recv_wr {
    const CALL: &'static str = "ibv_post_recv";
    const MISSING: &'static str = "driver has no post_recv";

    unsafe fn set_next(this: *mut Self, next: *mut Self) {
        // SAFETY: the caller passes a live WR.
        unsafe { (*this).next = next };
    }

    unsafe fn post(qp: *mut ffi::ibv_qp, wr: *mut Self) -> Option<i32> {
        let mut bad = ptr::null_mut();
        // SAFETY: as for send WRs.
        unsafe {
            (*(*qp).context)
                .ops
                .post_recv
                .map(|post| post(qp, wr, &mut bad))
        }
    }
}

/// An address handle.
#[derive(Debug)]
pub struct Ah {
    ah: *mut ffi::ibv_ah,
    _pd: Arc<PdInner>,
}
// SAFETY: verbs objects may be used from any thread.
unsafe impl Send for Ah {}
impl Drop for Ah {
    fn drop(&mut self) {
        // SAFETY: `ah` came from ibv_create_ah and is destroyed once.
        unsafe { ffi::ibv_destroy_ah(self.ah) };
    }
}

/// A UD queue pair.
#[derive(Debug)]
pub struct UdQp {
    inner: QpInner,
    max_inline: u32,
}

/// One scatter/gather entry.
pub type Sge = ffi::ibv_sge;

/// One UD send: buffer, AH and remote QP, flags.
#[derive(Clone, Copy, Debug)]
pub struct UdSend<'a> {
    /// WR id echoed by its completion.
    pub wr_id: u64,
    /// The datagram.
    pub sge: Sge,
    /// Address handle.
    pub ah: &'a Ah,
    /// Remote QP number.
    pub remote_qpn: u32,
    /// Remote qkey.
    pub remote_qkey: u32,
    /// Ask for a completion.
    pub signaled: bool,
    /// Send inline.
    pub inline: bool,
}

impl UdQp {
    /// QP number.
    pub fn qpn(&self) -> u32 {
        self.inner.qpn()
    }

    /// Inline bytes the device granted.
    pub fn max_inline(&self) -> u32 {
        self.max_inline
    }

    /// Applies one state transition's attributes.
    pub fn modify(&self, attrs: &QpAttrs) -> Result<(), VerbsError> {
        self.inner.modify(attrs)
    }

    /// Posts `sends` as one chain (one doorbell).
    ///
    /// # Safety
    /// Each send's buffer must stay valid and unchanged until its completion, or
    /// a later signaled one, is polled (inline sends: until this call returns).
    pub unsafe fn post_send(&self, sends: &[UdSend<'_>]) -> Result<(), VerbsError> {
        let mut sges: Vec<Sge> = sends.iter().map(|s| s.sge).collect();
        let mut wrs: Vec<ffi::ibv_send_wr> = Vec::with_capacity(sends.len());
        for (s, sge) in sends.iter().zip(sges.iter_mut()) {
            let mut wr = send_wr(
                s.wr_id,
                s.ah.ah,
                s.remote_qpn,
                s.remote_qkey,
                s.signaled,
                s.inline,
            );
            wr.sg_list = sge;
            wr.num_sge = 1;
            wrs.push(wr);
        }
        // SAFETY: the SGEs live until the call returns; the caller keeps the
        // buffers valid.
        unsafe { self.inner.post(&mut wrs) }
    }

    /// Posts receives, one WR per `(wr_id, sges)` entry, as one chain.
    ///
    /// # Safety
    /// Every SGE's memory must be registered and stay valid until its completion
    /// is polled (or the QP is destroyed).
    pub unsafe fn post_recv(&self, recvs: &mut [(u64, [Sge; 2], usize)]) -> Result<(), VerbsError> {
        let mut wrs: Vec<ffi::ibv_recv_wr> = recvs
            .iter_mut()
            .map(|(wr_id, sges, n)| ffi::ibv_recv_wr {
                wr_id: *wr_id,
                next: ptr::null_mut(),
                sg_list: sges.as_mut_ptr(),
                num_sge: (*n).min(2) as i32,
            })
            .collect();
        // SAFETY: the SGE arrays (in `recvs`) live until the call returns; the
        // caller keeps the memory valid.
        unsafe { self.inner.post(&mut wrs) }
    }
}

/// The `ibv_ah_attr` of an AH: always with a GRH (RoCE needs one), whose flow
/// label picks the UDP source port and traffic class the switch queue.
fn ah_attr(spec: &AhSpec) -> ffi::ibv_ah_attr {
    let mut attr = ffi::ibv_ah_attr {
        dlid: spec.dlid,
        sl: spec.sl,
        is_global: 1,
        port_num: spec.port,
        ..Default::default()
    };
    attr.grh.dgid.raw = spec.dgid;
    attr.grh.flow_label = spec.flow_label;
    attr.grh.sgid_index = spec.sgid_index;
    attr.grh.hop_limit = spec.hop_limit;
    attr.grh.traffic_class = spec.traffic_class;
    attr
}

/// The `ibv_qp_attr` and attribute mask of one transition: exactly the fields
/// that are `Some`.
pub(super) fn qp_attr(a: &QpAttrs) -> (ffi::ibv_qp_attr, ffi::ibv_qp_attr_mask) {
    use ffi::ibv_qp_attr_mask as m;
    let mut attr = ffi::ibv_qp_attr::default();
    let mut mask = m(0);
    let mut set = |bit: m| mask |= bit;
    if let Some(s) = a.state {
        attr.qp_state = match s {
            QpState::Reset => ffi::ibv_qp_state::IBV_QPS_RESET,
            QpState::Init => ffi::ibv_qp_state::IBV_QPS_INIT,
            QpState::Rtr => ffi::ibv_qp_state::IBV_QPS_RTR,
            QpState::Rts => ffi::ibv_qp_state::IBV_QPS_RTS,
        };
        set(m::IBV_QP_STATE);
    }
    if let Some(v) = a.pkey_index {
        attr.pkey_index = v;
        set(m::IBV_QP_PKEY_INDEX);
    }
    if let Some(v) = a.port {
        attr.port_num = v;
        set(m::IBV_QP_PORT);
    }
    if let Some(v) = a.qkey {
        attr.qkey = v;
        set(m::IBV_QP_QKEY);
    }
    if let Some(v) = a.access {
        attr.qp_access_flags = v;
        set(m::IBV_QP_ACCESS_FLAGS);
    }
    if let Some(av) = a.av {
        attr.ah_attr.is_global = 1;
        attr.ah_attr.dlid = av.dlid;
        attr.ah_attr.sl = av.sl;
        attr.ah_attr.port_num = av.port;
        attr.ah_attr.grh.dgid.raw = av.dgid;
        attr.ah_attr.grh.sgid_index = av.sgid_index;
        attr.ah_attr.grh.hop_limit = av.hop_limit;
        attr.ah_attr.grh.traffic_class = av.traffic_class;
        attr.ah_attr.grh.flow_label = av.flow_label;
        set(m::IBV_QP_AV);
    }
    if let Some(v) = a.path_mtu {
        attr.path_mtu = v;
        set(m::IBV_QP_PATH_MTU);
    }
    if let Some(v) = a.dest_qpn {
        attr.dest_qp_num = v;
        set(m::IBV_QP_DEST_QPN);
    }
    if let Some(v) = a.rq_psn {
        attr.rq_psn = v;
        set(m::IBV_QP_RQ_PSN);
    }
    if let Some(v) = a.max_dest_rd_atomic {
        attr.max_dest_rd_atomic = v;
        set(m::IBV_QP_MAX_DEST_RD_ATOMIC);
    }
    if let Some(v) = a.min_rnr_timer {
        attr.min_rnr_timer = v;
        set(m::IBV_QP_MIN_RNR_TIMER);
    }
    if let Some(v) = a.sq_psn {
        attr.sq_psn = v;
        set(m::IBV_QP_SQ_PSN);
    }
    if let Some(v) = a.timeout {
        attr.timeout = v;
        set(m::IBV_QP_TIMEOUT);
    }
    if let Some(v) = a.retry_cnt {
        attr.retry_cnt = v;
        set(m::IBV_QP_RETRY_CNT);
    }
    if let Some(v) = a.rnr_retry {
        attr.rnr_retry = v;
        set(m::IBV_QP_RNR_RETRY);
    }
    if let Some(v) = a.max_rd_atomic {
        attr.max_rd_atomic = v;
        set(m::IBV_QP_MAX_QP_RD_ATOMIC);
    }
    (attr, mask)
}

/// A UD SEND work request without its scatter list.
fn send_wr(
    wr_id: u64,
    ah: *mut ffi::ibv_ah,
    remote_qpn: u32,
    remote_qkey: u32,
    signaled: bool,
    inline: bool,
) -> ffi::ibv_send_wr {
    let mut flags = 0;
    if signaled {
        flags |= ffi::ibv_send_flags::IBV_SEND_SIGNALED.0;
    }
    if inline {
        flags |= ffi::ibv_send_flags::IBV_SEND_INLINE.0;
    }
    // SAFETY: ibv_send_wr is plain C data (integers, pointers, unions of them);
    // all-zero is a valid value.
    let mut wr: ffi::ibv_send_wr = unsafe { std::mem::zeroed() };
    wr.wr_id = wr_id;
    wr.opcode = ffi::ibv_wr_opcode::IBV_WR_SEND;
    wr.send_flags = flags;
    wr.wr.ud = ffi::ibv_send_wr__bindgen_ty_2__bindgen_ty_3 {
        ah,
        remote_qpn,
        remote_qkey,
    };
    wr
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verbs::qp_attr::UdTransition;
    use ffi::ibv_qp_attr_mask as m;
    use rondo_proto::transmit::Priority;

    #[test]
    fn transitions_set_exactly_their_mask_bits() {
        let [init, rtr, rts] = UdTransition::bring_up(1, 0x1111_2222, 77);
        let (a, mask) = qp_attr(&init.attrs());
        assert_eq!(
            mask.0,
            (m::IBV_QP_STATE | m::IBV_QP_PKEY_INDEX | m::IBV_QP_PORT | m::IBV_QP_QKEY).0
        );
        assert_eq!(a.qp_state, ffi::ibv_qp_state::IBV_QPS_INIT);
        assert_eq!((a.pkey_index, a.port_num, a.qkey), (0, 1, 0x1111_2222));
        let (a, mask) = qp_attr(&rtr.attrs());
        assert_eq!(mask.0, m::IBV_QP_STATE.0);
        assert_eq!(a.qp_state, ffi::ibv_qp_state::IBV_QPS_RTR);
        let (a, mask) = qp_attr(&rts.attrs());
        assert_eq!(mask.0, (m::IBV_QP_STATE | m::IBV_QP_SQ_PSN).0);
        assert_eq!((a.qp_state, a.sq_psn), (ffi::ibv_qp_state::IBV_QPS_RTS, 77));
    }

    #[test]
    fn ah_attr_carries_the_grh_of_the_spec() {
        let spec = AhSpec {
            path: 2,
            priority: Priority::Probe,
            dgid: [7; 16],
            dlid: 0,
            flow_label: 0xC002 & 0x3FFF,
            traffic_class: 8 << 2,
            sl: 1,
            sgid_index: 3,
            hop_limit: 64,
            port: 1,
        };
        let a = ah_attr(&spec);
        assert_eq!(a.is_global, 1, "RoCE needs a GRH");
        // SAFETY: reading the raw bytes of a GID union written as raw.
        assert_eq!(unsafe { a.grh.dgid.raw }, [7; 16]);
        assert_eq!(
            (
                a.grh.flow_label,
                a.grh.traffic_class,
                a.grh.sgid_index,
                a.grh.hop_limit
            ),
            (2, 32, 3, 64)
        );
        assert_eq!((a.sl, a.port_num, a.dlid), (1, 1, 0));
    }

    #[test]
    fn send_wr_is_a_ud_send_with_its_flags() {
        let ah = 0x1000 as *mut ffi::ibv_ah; // never dereferenced here
        let wr = send_wr(42, ah, 0x12_3456, 0x5247_0001, true, false);
        assert_eq!(wr.wr_id, 42);
        assert_eq!(wr.opcode, ffi::ibv_wr_opcode::IBV_WR_SEND);
        assert_eq!(wr.send_flags, ffi::ibv_send_flags::IBV_SEND_SIGNALED.0);
        // SAFETY: the `ud` member was the one written.
        let ud = unsafe { wr.wr.ud };
        assert_eq!(
            (ud.ah, ud.remote_qpn, ud.remote_qkey),
            (ah, 0x12_3456, 0x5247_0001)
        );
        assert!(wr.next.is_null() && wr.sg_list.is_null());
        let wr = send_wr(43, ah, 1, 1, false, true);
        assert_eq!(wr.send_flags, ffi::ibv_send_flags::IBV_SEND_INLINE.0);
    }
}
