//! The one unsafe module of `--transport rc`: libibverbs calls for RC queue pairs
//! (device, PD, CQ, registered buffers, QPs, modify, post, poll). Everything is
//! owned by one [`RcDevice`], which frees it in dependency order on drop, so every
//! pointer a call uses is alive; posts check their buffer ranges, so the safe
//! methods cannot make the NIC touch memory outside a registered buffer.
#![allow(unsafe_code)] // the verbs FFI of `--transport rc`; each block says why it is sound

use super::attr::{RcAttrs, RcState};
use super::nic::{Completion, PortInfo, Post, RcError, RcNic, SendOp};
use ibverbs_sys as ffi;
use std::ffi::CStr;
use std::ptr;

fn call(call: &'static str, rc: i32) -> RcError {
    RcError::Call {
        call,
        source: std::io::Error::from_raw_os_error(rc.abs()),
    }
}

fn last(call: &'static str) -> RcError {
    RcError::Call {
        call,
        source: std::io::Error::last_os_error(),
    }
}

/// `IBV_WC_RECV` and `IBV_WC_RECV_RDMA_WITH_IMM`: receive completions.
fn is_receive(opcode: u32) -> bool {
    opcode == ffi::ibv_wc_opcode::IBV_WC_RECV
        || opcode == ffi::ibv_wc_opcode::IBV_WC_RECV_RDMA_WITH_IMM
}

struct Buffer {
    mr: *mut ffi::ibv_mr,
    mem: Box<[u8]>,
}

/// An open device with one PD, one CQ, its RC QPs and registered buffers. Field
/// order is not drop order: [`Drop`] frees QPs, MRs, the CQ, the PD, then the
/// context.
pub struct RcDevice {
    ctx: *mut ffi::ibv_context,
    pd: *mut ffi::ibv_pd,
    cq: *mut ffi::ibv_cq,
    qps: Vec<*mut ffi::ibv_qp>,
    bufs: Vec<Buffer>,
    wc: Vec<ffi::ibv_wc>,
}

impl Drop for RcDevice {
    fn drop(&mut self) {
        // SAFETY: each pointer came from its create call and is freed once, children
        // (QPs, MRs) before the CQ and PD they use, the context last. The buffers'
        // memory is freed after their MRs (the Box drops after this body).
        unsafe {
            for &qp in &self.qps {
                ffi::ibv_destroy_qp(qp);
            }
            for b in &self.bufs {
                ffi::ibv_dereg_mr(b.mr);
            }
            if !self.cq.is_null() {
                ffi::ibv_destroy_cq(self.cq);
            }
            if !self.pd.is_null() {
                ffi::ibv_dealloc_pd(self.pd);
            }
            ffi::ibv_close_device(self.ctx);
        }
    }
}

impl RcDevice {
    /// Opens `name`, checks `port` is active, reads the GID at `gid_index`, and
    /// creates a PD and a CQ of `cqe` entries.
    pub fn open(
        name: &str,
        port: u8,
        gid_index: u8,
        cqe: usize,
    ) -> Result<(RcDevice, PortInfo), RcError> {
        let mut n = 0;
        // SAFETY: writes the count to `n`; returns NULL or an array of `n` devices,
        // freed below.
        let list = unsafe { ffi::ibv_get_device_list(&mut n) };
        if list.is_null() {
            return Err(last("ibv_get_device_list"));
        }
        let mut ctx = ptr::null_mut();
        for i in 0..usize::try_from(n).unwrap_or(0) {
            // SAFETY: `i < n`, a device of the list; its name is a C string.
            let dev = unsafe { *list.add(i) };
            // SAFETY: as above.
            let dev_name = unsafe { CStr::from_ptr(ffi::ibv_get_device_name(dev)) };
            if dev_name.to_bytes() == name.as_bytes() {
                // SAFETY: a device of the list; the context may outlive the list.
                ctx = unsafe { ffi::ibv_open_device(dev) };
                break;
            }
        }
        // SAFETY: freed once.
        unsafe { ffi::ibv_free_device_list(list) };
        if ctx.is_null() {
            return Err(RcError::Device(format!(
                "cannot open RDMA device {name:?}: run `rondo doctor` to list the devices"
            )));
        }
        let mut dev = RcDevice {
            ctx,
            pd: ptr::null_mut(),
            cq: ptr::null_mut(),
            qps: Vec::new(),
            bufs: Vec::new(),
            wc: vec![ffi::ibv_wc::default(); 64],
        };
        let mut pattr = ffi::ibv_port_attr::default();
        // SAFETY: `pattr` is a zeroed ibv_port_attr, a superset of the compat layout
        // the exported symbol fills; the context is open.
        let rc = unsafe { ffi::ibv_query_port(ctx, port, ptr::addr_of_mut!(pattr).cast()) };
        if rc != 0 {
            return Err(call("ibv_query_port", rc));
        }
        if pattr.state != ffi::ibv_port_state::IBV_PORT_ACTIVE {
            return Err(RcError::Device(format!(
                "port {port} of {name} is not ACTIVE: check the cable and `ip link`; `rondo doctor` lists the ports"
            )));
        }
        let mut gid = ffi::ibv_gid::default();
        // SAFETY: `gid` is a valid out-parameter; the context is open.
        let rc = unsafe { ffi::ibv_query_gid(ctx, port, i32::from(gid_index), &mut gid) };
        if rc != 0 {
            return Err(RcError::Device(format!(
                "port {port} of {name} has no GID at index {gid_index}: pick one from `rondo doctor`"
            )));
        }
        let mut dattr = ffi::ibv_device_attr::default();
        // SAFETY: valid out-parameter; the context is open.
        let rc = unsafe { ffi::ibv_query_device(ctx, &mut dattr) };
        if rc != 0 {
            return Err(call("ibv_query_device", rc));
        }
        // SAFETY: the context is open.
        dev.pd = unsafe { ffi::ibv_alloc_pd(ctx) };
        if dev.pd.is_null() {
            return Err(last("ibv_alloc_pd"));
        }
        let cqe = i32::try_from(cqe).map_err(|_| RcError::Invalid("CQ size above i32"))?;
        // SAFETY: the context is open; no channel or context pointer.
        dev.cq = unsafe { ffi::ibv_create_cq(ctx, cqe, ptr::null_mut(), ptr::null_mut(), 0) };
        if dev.cq.is_null() {
            return Err(last("ibv_create_cq"));
        }
        let clamp = |v: i32| u8::try_from(v.clamp(0, 255)).unwrap_or(0);
        let info = PortInfo {
            lid: pattr.lid,
            // SAFETY: every variant of the GID union is 16 bytes of plain data.
            gid: unsafe { gid.raw },
            active_mtu: super::attr::mtu_bytes(pattr.active_mtu),
            max_rd_atomic: clamp(dattr.max_qp_init_rd_atom),
            max_dest_rd_atomic: clamp(dattr.max_qp_rd_atom),
        };
        Ok((dev, info))
    }

    fn sge(&self, buf: usize, offset: usize, len: usize) -> Result<ffi::ibv_sge, RcError> {
        let b = self
            .bufs
            .get(buf)
            .ok_or(RcError::Invalid("no such buffer"))?;
        if offset.checked_add(len).is_none_or(|end| end > b.mem.len()) {
            return Err(RcError::Invalid("outside the registered buffer"));
        }
        Ok(ffi::ibv_sge {
            addr: b.mem.as_ptr() as u64 + offset as u64,
            length: u32::try_from(len).map_err(|_| RcError::Invalid("above 4 GiB"))?,
            // SAFETY: the MR is alive while self is.
            lkey: unsafe { (*b.mr).lkey },
        })
    }
}

impl RcNic for RcDevice {
    /// Maps and registers a zeroed buffer of `len` bytes (local write, remote write
    /// and read); returns its index.
    fn register(&mut self, len: usize) -> Result<usize, RcError> {
        let mut mem = vec![0u8; len.max(1)].into_boxed_slice();
        let access = (ffi::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0
            | ffi::ibv_access_flags::IBV_ACCESS_REMOTE_WRITE.0
            | ffi::ibv_access_flags::IBV_ACCESS_REMOTE_READ.0) as i32;
        // SAFETY: the memory is a live heap allocation that never moves (a boxed
        // slice kept next to its MR) and is freed only after ibv_dereg_mr (Drop).
        let mr = unsafe { ffi::ibv_reg_mr(self.pd, mem.as_mut_ptr().cast(), mem.len(), access) };
        if mr.is_null() {
            return Err(last("ibv_reg_mr (is `ulimit -l` high enough?)"));
        }
        self.bufs.push(Buffer { mr, mem });
        Ok(self.bufs.len() - 1)
    }

    /// Address of buffer `b`'s first byte, as the peer names it.
    fn addr(&self, b: usize) -> u64 {
        self.bufs[b].mem.as_ptr() as u64
    }

    /// Remote key of buffer `b`.
    fn rkey(&self, b: usize) -> u32 {
        // SAFETY: the MR is alive while self is.
        unsafe { (*self.bufs[b].mr).rkey }
    }

    fn len(&self, b: usize) -> usize {
        self.bufs[b].mem.len()
    }

    /// The NIC writes into the buffer on its own: the run reads only what a
    /// completion says has arrived, and writes only slots no request uses.
    fn read(&self, b: usize, at: usize, len: usize, f: &mut dyn FnMut(&[u8])) {
        f(&self.bufs[b].mem[at..at + len]);
    }

    fn write(&mut self, b: usize, at: usize, len: usize, f: &mut dyn FnMut(&mut [u8])) {
        f(&mut self.bufs[b].mem[at..at + len]);
    }

    /// Creates an RC QP in RESET on the CQ; returns its index.
    fn create_qp(&mut self, max_send_wr: u32, max_recv_wr: u32) -> Result<usize, RcError> {
        let mut init = ffi::ibv_qp_init_attr {
            qp_context: ptr::null_mut(),
            send_cq: self.cq,
            recv_cq: self.cq,
            srq: ptr::null_mut(),
            cap: ffi::ibv_qp_cap {
                max_send_wr,
                max_recv_wr,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
            qp_type: ffi::ibv_qp_type::IBV_QPT_RC,
            sq_sig_all: 0,
        };
        // SAFETY: `init` is fully initialised with the live CQ; the PD is alive.
        let qp = unsafe { ffi::ibv_create_qp(self.pd, &mut init) };
        if qp.is_null() {
            return Err(last("ibv_create_qp (RC)"));
        }
        self.qps.push(qp);
        Ok(self.qps.len() - 1)
    }

    /// QP number of QP `q`.
    fn qpn(&self, q: usize) -> u32 {
        // SAFETY: the QP is alive while self is.
        unsafe { (*self.qps[q]).qp_num }
    }

    /// Applies one transition's attributes to QP `q`.
    fn modify(&mut self, q: usize, attrs: &RcAttrs) -> Result<(), RcError> {
        let (mut attr, mask) = qp_attr(attrs);
        // SAFETY: `attr` is initialised for every bit of `mask`; the QP is alive.
        let rc = unsafe { ffi::ibv_modify_qp(self.qps[q], &mut attr, mask.0 as i32) };
        if rc != 0 {
            return Err(call("ibv_modify_qp (RC)", rc));
        }
        Ok(())
    }

    /// Posts one send work request on QP `q`.
    fn post_send(&mut self, q: usize, p: &Post) -> Result<(), RcError> {
        let qp = *self.qps.get(q).ok_or(RcError::Invalid("no such QP"))?;
        let mut sge = self.sge(p.buf, p.offset, p.len)?;
        let mut wr = send_wr(p);
        if p.len > 0 {
            wr.sg_list = &mut sge;
            wr.num_sge = 1;
        }
        let mut bad = ptr::null_mut();
        // SAFETY: the WR and its SGE live until the call returns; the SGE lies in a
        // registered buffer that lives as long as the QP (both freed in Drop, the QP
        // first), so the NIC never touches freed memory; the QP is alive.
        let rc = unsafe {
            match (*(*qp).context).ops.post_send {
                Some(post) => post(qp, &mut wr, &mut bad),
                None => return Err(RcError::Invalid("the driver has no post_send")),
            }
        };
        if rc != 0 {
            return Err(call("ibv_post_send (RC)", rc));
        }
        Ok(())
    }

    /// Posts one receive on QP `q` (`len` 0: no buffer, for immediates only).
    fn post_recv(
        &mut self,
        q: usize,
        wr_id: u64,
        buf: usize,
        offset: usize,
        len: usize,
    ) -> Result<(), RcError> {
        let qp = *self.qps.get(q).ok_or(RcError::Invalid("no such QP"))?;
        let mut sge = self.sge(buf, offset, len)?;
        let mut wr = ffi::ibv_recv_wr {
            wr_id,
            next: ptr::null_mut(),
            sg_list: if len > 0 { &mut sge } else { ptr::null_mut() },
            num_sge: i32::from(len > 0),
        };
        let mut bad = ptr::null_mut();
        // SAFETY: as in post_send: the WR lives through the call, the SGE lies in a
        // registered buffer that outlives the QP.
        let rc = unsafe {
            match (*(*qp).context).ops.post_recv {
                Some(post) => post(qp, &mut wr, &mut bad),
                None => return Err(RcError::Invalid("the driver has no post_recv")),
            }
        };
        if rc != 0 {
            return Err(call("ibv_post_recv (RC)", rc));
        }
        Ok(())
    }

    /// Polls up to `out.len()` completions into `out`; returns how many.
    fn poll(&mut self, out: &mut [Completion]) -> Result<usize, RcError> {
        let max = out.len().min(self.wc.len());
        // SAFETY: the CQ is alive; its context's ops table is set by the driver;
        // `wc` has room for `max` entries.
        let n = unsafe {
            match (*(*self.cq).context).ops.poll_cq {
                Some(poll) => poll(self.cq, max as i32, self.wc.as_mut_ptr()),
                None => return Err(RcError::Invalid("the driver has no poll_cq")),
            }
        };
        if n < 0 {
            return Err(call("ibv_poll_cq", n));
        }
        let n = n as usize;
        for (o, w) in out.iter_mut().zip(&self.wc[..n]) {
            *o = Completion {
                wr_id: w.wr_id(),
                status: w.error().map_or(0, |(s, _)| s),
                receive: is_receive(w.opcode()),
                byte_len: w.len() as u32,
                qp_num: w.qp_num,
            };
        }
        Ok(n)
    }

    fn status_name(&self, status: u32) -> String {
        // SAFETY: ibv_wc_status_str returns a static C string for any value.
        let s = unsafe { CStr::from_ptr(ffi::ibv_wc_status_str(status)) };
        s.to_string_lossy().into_owned()
    }
}

/// The `ibv_send_wr` of a post, without its scatter list.
fn send_wr(p: &Post) -> ffi::ibv_send_wr {
    use ffi::ibv_wr_opcode as o;
    // SAFETY: ibv_send_wr is plain C data (integers, pointers, unions of them);
    // all-zero is a valid value.
    let mut wr: ffi::ibv_send_wr = unsafe { std::mem::zeroed() };
    wr.wr_id = p.wr_id;
    wr.send_flags = if p.signaled {
        ffi::ibv_send_flags::IBV_SEND_SIGNALED.0
    } else {
        0
    };
    let (opcode, imm) = match p.op {
        SendOp::Write => (o::IBV_WR_RDMA_WRITE, None),
        SendOp::WriteImm(i) => (o::IBV_WR_RDMA_WRITE_WITH_IMM, Some(i)),
        SendOp::Send => (o::IBV_WR_SEND, None),
        SendOp::Read => (o::IBV_WR_RDMA_READ, None),
    };
    wr.opcode = opcode;
    if let Some(i) = imm {
        wr.__bindgen_anon_1.imm_data = i.to_be();
    }
    if let Some((remote_addr, rkey)) = p.remote {
        wr.wr.rdma = ffi::ibv_send_wr__bindgen_ty_2__bindgen_ty_1 { remote_addr, rkey };
    }
    wr
}

/// The `ibv_qp_attr` and mask of one transition: exactly the fields that are `Some`.
fn qp_attr(a: &RcAttrs) -> (ffi::ibv_qp_attr, ffi::ibv_qp_attr_mask) {
    use ffi::ibv_qp_attr_mask as m;
    let mut attr = ffi::ibv_qp_attr::default();
    let mut mask = m(0);
    if let Some(s) = a.state {
        attr.qp_state = match s {
            RcState::Init => ffi::ibv_qp_state::IBV_QPS_INIT,
            RcState::Rtr => ffi::ibv_qp_state::IBV_QPS_RTR,
            RcState::Rts => ffi::ibv_qp_state::IBV_QPS_RTS,
        };
        mask |= m::IBV_QP_STATE;
    }
    if let Some(v) = a.pkey_index {
        attr.pkey_index = v;
        mask |= m::IBV_QP_PKEY_INDEX;
    }
    if let Some(v) = a.port {
        attr.port_num = v;
        mask |= m::IBV_QP_PORT;
    }
    if let Some(v) = a.access {
        attr.qp_access_flags = v;
        mask |= m::IBV_QP_ACCESS_FLAGS;
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
        mask |= m::IBV_QP_AV;
    }
    if let Some(v) = a.path_mtu {
        attr.path_mtu = v;
        mask |= m::IBV_QP_PATH_MTU;
    }
    if let Some(v) = a.dest_qpn {
        attr.dest_qp_num = v;
        mask |= m::IBV_QP_DEST_QPN;
    }
    if let Some(v) = a.rq_psn {
        attr.rq_psn = v;
        mask |= m::IBV_QP_RQ_PSN;
    }
    if let Some(v) = a.max_dest_rd_atomic {
        attr.max_dest_rd_atomic = v;
        mask |= m::IBV_QP_MAX_DEST_RD_ATOMIC;
    }
    if let Some(v) = a.min_rnr_timer {
        attr.min_rnr_timer = v;
        mask |= m::IBV_QP_MIN_RNR_TIMER;
    }
    if let Some(v) = a.sq_psn {
        attr.sq_psn = v;
        mask |= m::IBV_QP_SQ_PSN;
    }
    if let Some(v) = a.timeout {
        attr.timeout = v;
        mask |= m::IBV_QP_TIMEOUT;
    }
    if let Some(v) = a.retry_cnt {
        attr.retry_cnt = v;
        mask |= m::IBV_QP_RETRY_CNT;
    }
    if let Some(v) = a.rnr_retry {
        attr.rnr_retry = v;
        mask |= m::IBV_QP_RNR_RETRY;
    }
    if let Some(v) = a.max_rd_atomic {
        attr.max_rd_atomic = v;
        mask |= m::IBV_QP_MAX_QP_RD_ATOMIC;
    }
    (attr, mask)
}

#[cfg(test)]
mod tests {
    use super::super::attr::{
        bring_up, RcEndpoint, RcParams, LOCAL_WRITE, REMOTE_READ, REMOTE_WRITE,
    };
    use super::*;
    use ffi::ibv_qp_attr_mask as m;

    #[test]
    fn access_constants_are_ibverbs_values() {
        use ffi::ibv_access_flags as a;
        assert_eq!(LOCAL_WRITE, a::IBV_ACCESS_LOCAL_WRITE.0);
        assert_eq!(REMOTE_WRITE, a::IBV_ACCESS_REMOTE_WRITE.0);
        assert_eq!(REMOTE_READ, a::IBV_ACCESS_REMOTE_READ.0);
        assert_eq!(super::super::attr::mtu_code(4096), Some(ffi::IBV_MTU_4096));
        assert_eq!(super::super::attr::mtu_code(256), Some(ffi::IBV_MTU_256));
    }

    #[test]
    fn each_transition_sets_exactly_its_mask_bits() {
        let remote = RcEndpoint {
            qpn: 0x42,
            psn: 0x77,
            lid: 0,
            mtu: 1024,
            gid: [9; 16],
        };
        let [init, rtr, rts] = bring_up(&RcParams::default(), 0x55, &remote);
        let (a, mask) = qp_attr(&init);
        assert_eq!(
            mask.0,
            (m::IBV_QP_STATE | m::IBV_QP_PKEY_INDEX | m::IBV_QP_PORT | m::IBV_QP_ACCESS_FLAGS).0
        );
        assert_eq!(a.qp_state, ffi::ibv_qp_state::IBV_QPS_INIT);
        assert_eq!(a.qp_access_flags, 7);
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
        let p = Post {
            wr_id: 9,
            op: SendOp::WriteImm(0x0102_0304),
            buf: 0,
            offset: 0,
            len: 64,
            remote: Some((0x1000, 0xABCD)),
            signaled: true,
        };
        let wr = send_wr(&p);
        assert_eq!(wr.wr_id, 9);
        assert_eq!(wr.opcode, ffi::ibv_wr_opcode::IBV_WR_RDMA_WRITE_WITH_IMM);
        assert_eq!(wr.send_flags, ffi::ibv_send_flags::IBV_SEND_SIGNALED.0);
        // SAFETY: the members written by send_wr.
        let (imm, rdma) = unsafe { (wr.__bindgen_anon_1.imm_data, wr.wr.rdma) };
        assert_eq!(imm, 0x0102_0304u32.to_be(), "immediates travel big-endian");
        assert_eq!((rdma.remote_addr, rdma.rkey), (0x1000, 0xABCD));
        let read = send_wr(&Post {
            op: SendOp::Read,
            signaled: false,
            ..p
        });
        assert_eq!(read.opcode, ffi::ibv_wr_opcode::IBV_WR_RDMA_READ);
        assert_eq!(read.send_flags, 0);
        let send = send_wr(&Post {
            op: SendOp::Send,
            remote: None,
            ..p
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
