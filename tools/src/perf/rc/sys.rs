//! `--transport rc` on a real device: the [`RcNic`] of an RDMA device, over the one
//! ibverbs FFI layer (`rondo_ud::verbs::sys`, which the UD datapath uses too).
//! Everything is owned by one [`RcDevice`]: its QPs are destroyed before the
//! buffers they may write (field order), and posts check their buffer ranges, so
//! the safe methods cannot make the NIC touch memory outside a registered buffer.
#![allow(unsafe_code)] // the posts, whose buffer contracts RcDevice keeps; each block says why

use super::nic::{Completion, PortInfo, Post, RcError, RcNic, SendOp};
use reorder::HugePages;
use rondo_ud::verbs::qp_attr::{
    mtu_bytes, QpAttrs, ACCESS_LOCAL_WRITE, ACCESS_REMOTE_READ, ACCESS_REMOTE_WRITE,
};
use rondo_ud::verbs::sys::{
    self, AnyCq, Context, Pd, RcOp, RcQp, RcSend, RegisteredArena, Sge, Wc, WcBuf,
};
use rondo_ud::verbs::VerbsError;

/// A verbs error as an RC run's.
fn rc_error(e: VerbsError) -> RcError {
    match e {
        VerbsError::Call { call, source } => RcError::Call { call, source },
        e => RcError::Device(e.to_string()),
    }
}

/// A registered buffer and the bytes the run asked for (the arena is whole pages).
struct Buffer {
    mem: RegisteredArena,
    len: usize,
}

/// An open device with one PD, one CQ, its RC QPs and registered buffers.
pub struct RcDevice {
    /// First: destroyed before the buffers they may write and the CQ they use.
    qps: Vec<RcQp>,
    bufs: Vec<Buffer>,
    cq: AnyCq,
    pd: Pd,
    _ctx: Context,
    raw: WcBuf,
    wc: Vec<Wc>,
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
        let ctx = Context::open(name).map_err(rc_error)?;
        let pattr = ctx.query_port(port).map_err(rc_error)?;
        if pattr.state != sys::PORT_ACTIVE {
            return Err(RcError::Device(format!(
                "port {port} of {name} is not ACTIVE: check the cable and `ip link`; `rondo doctor` lists the ports"
            )));
        }
        let gid = ctx.query_gid(port, gid_index).map_err(|_| {
            RcError::Device(format!(
                "port {port} of {name} has no GID at index {gid_index}: pick one from `rondo doctor`"
            ))
        })?;
        let dattr = ctx.query_device().map_err(rc_error)?;
        let pd = ctx.alloc_pd().map_err(rc_error)?;
        let cq = ctx.create_cq(cqe).map_err(|e| match e {
            VerbsError::Config(what) => RcError::Invalid(what),
            e => rc_error(e),
        })?;
        let clamp = |v: i32| u8::try_from(v.clamp(0, 255)).unwrap_or(0);
        let info = PortInfo {
            lid: pattr.lid,
            gid,
            active_mtu: mtu_bytes(pattr.active_mtu),
            max_rd_atomic: clamp(dattr.max_qp_init_rd_atom),
            max_dest_rd_atomic: clamp(dattr.max_qp_rd_atom),
        };
        let dev = RcDevice {
            qps: Vec::new(),
            bufs: Vec::new(),
            cq: AnyCq::Plain(cq),
            pd,
            _ctx: ctx,
            raw: WcBuf::new(64),
            wc: vec![Wc::default(); 64],
        };
        Ok((dev, info))
    }

    fn sge(&self, buf: usize, offset: usize, len: usize) -> Result<Sge, RcError> {
        let b = self
            .bufs
            .get(buf)
            .ok_or(RcError::Invalid("no such buffer"))?;
        if offset.checked_add(len).is_none_or(|end| end > b.len) {
            return Err(RcError::Invalid("outside the registered buffer"));
        }
        Ok(Sge {
            addr: b.mem.addr() + offset as u64,
            length: u32::try_from(len).map_err(|_| RcError::Invalid("above 4 GiB"))?,
            lkey: b.mem.lkey(),
        })
    }

    fn qp(&self, q: usize) -> Result<&RcQp, RcError> {
        self.qps.get(q).ok_or(RcError::Invalid("no such QP"))
    }
}

impl RcNic for RcDevice {
    /// Maps and registers a zeroed buffer of `len` bytes (local write, remote write
    /// and read); returns its index.
    fn register(&mut self, len: usize) -> Result<usize, RcError> {
        let access = ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ;
        let mem = self
            .pd
            .register_arena(len.max(1), HugePages::Never, access)
            .map_err(rc_error)?;
        self.bufs.push(Buffer {
            mem,
            len: len.max(1),
        });
        Ok(self.bufs.len() - 1)
    }

    /// Address of buffer `b`'s first byte, as the peer names it.
    fn addr(&self, b: usize) -> u64 {
        self.bufs[b].mem.addr()
    }

    /// Remote key of buffer `b`.
    fn rkey(&self, b: usize) -> u32 {
        self.bufs[b].mem.rkey()
    }

    fn len(&self, b: usize) -> usize {
        self.bufs[b].len
    }

    /// The NIC writes into the buffer on its own: the run reads only what a
    /// completion says has arrived, and writes only slots no request uses.
    fn read(&self, b: usize, at: usize, len: usize, f: &mut dyn FnMut(&[u8])) {
        f(&self.bufs[b].mem.as_slice()[at..at + len]);
    }

    fn write(&mut self, b: usize, at: usize, len: usize, f: &mut dyn FnMut(&mut [u8])) {
        f(&mut self.bufs[b].mem.as_mut_slice()[at..at + len]);
    }

    /// Creates an RC QP in RESET on the CQ; returns its index.
    fn create_qp(&mut self, max_send_wr: u32, max_recv_wr: u32) -> Result<usize, RcError> {
        let qp = self
            .pd
            .create_rc_qp(&self.cq, &self.cq, max_send_wr, max_recv_wr)
            .map_err(rc_error)?;
        self.qps.push(qp);
        Ok(self.qps.len() - 1)
    }

    /// QP number of QP `q`.
    fn qpn(&self, q: usize) -> u32 {
        self.qps[q].qpn()
    }

    /// Applies one transition's attributes to QP `q`.
    fn modify(&mut self, q: usize, attrs: &QpAttrs) -> Result<(), RcError> {
        self.qp(q)?.modify(attrs).map_err(rc_error)
    }

    /// Posts one send work request on QP `q`.
    fn post_send(&mut self, q: usize, p: &Post) -> Result<(), RcError> {
        let qp = self.qp(q)?;
        let sge = self.sge(p.buf, p.offset, p.len)?;
        let op = match p.op {
            SendOp::Write => RcOp::Write,
            SendOp::WriteImm(i) => RcOp::WriteImm(i),
            SendOp::Send => RcOp::Send,
            SendOp::Read => RcOp::Read,
        };
        let send = RcSend {
            wr_id: p.wr_id,
            op,
            sge: (p.len > 0).then_some(sge),
            remote: p.remote,
            signaled: p.signaled,
        };
        // SAFETY: the SGE lies in a registered buffer (checked by `sge`) that lives
        // as long as the QP: both belong to this device, which destroys its QPs
        // before its buffers, so the NIC never touches freed memory.
        unsafe { qp.post_send(&send) }.map_err(rc_error)
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
        let qp = self.qp(q)?;
        let sge = self.sge(buf, offset, len)?;
        // SAFETY: as in post_send: the SGE lies in a registered buffer that
        // outlives the QP.
        unsafe { qp.post_recv(wr_id, (len > 0).then_some(sge)) }.map_err(rc_error)
    }

    /// Polls up to `out.len()` completions into `out`; returns how many.
    fn poll(&mut self, out: &mut [Completion]) -> Result<usize, RcError> {
        let AnyCq::Plain(cq) = &self.cq else {
            return Err(RcError::Invalid("an RC run polls a plain CQ"));
        };
        let max = out.len().min(self.wc.len());
        let n = cq
            .poll(&mut self.raw, &mut self.wc[..max])
            .map_err(rc_error)?;
        for (o, w) in out.iter_mut().zip(&self.wc[..n]) {
            *o = Completion {
                wr_id: w.wr_id,
                status: w.status,
                receive: w.receive,
                byte_len: w.byte_len,
                qp_num: w.qp_num,
            };
        }
        Ok(n)
    }

    fn status_name(&self, status: u32) -> String {
        sys::wc_status_str(status)
    }
}
