//! The client's side of an RC run over any [`RcNic`], and the per-side objects both
//! ends use (see the module docs of `rc`).

use super::attr::{bring_up, initial_psn, RcEndpoint, RcParams};
use super::nic::{Completion, PortInfo, Post, RcNic, SendOp};
use crate::perf::exchange::{Control, Hello, Op, Region};
use crate::perf::pattern::Pattern;
use crate::perf::report::Outcome;
use crate::perf::rondo::slots;
use crate::perf::slotted::{self, SlottedSide};
use crate::perf::Progress;
use anyhow::{bail, ensure, Context as _};

/// One side's RC objects.
pub struct Side<N> {
    dev: N,
    pub(super) nqp: usize,
    pub(super) slots: usize,
    size: usize,
    pattern: Option<Pattern>,
    pub(super) params: RcParams,
    port: PortInfo,
}

/// Entries of the CQ of a run's side: every QP's send and receive queues.
pub fn cq_entries(h: &Hello) -> usize {
    h.qps as usize * (slots(h) * 4 + 16) + 16
}

impl<N: RcNic> Side<N> {
    /// The side's QPs (in RESET) and buffers on `dev`, whose port `port_num` is
    /// described by `port`, with GID index `gid_index`.
    pub fn new(
        mut dev: N,
        port: PortInfo,
        port_num: u8,
        gid_index: u8,
        h: &Hello,
    ) -> anyhow::Result<Side<N>> {
        let slots = slots(h);
        let nqp = h.qps as usize;
        let depth = u32::try_from(slots * 2 + 8).context("too many slots")?;
        for _ in 0..nqp {
            dev.create_qp(depth, depth)?;
            dev.register(slots * h.size as usize)
                .with_context(|| format!("register {} bytes", slots * h.size as usize))?;
        }
        let params = RcParams {
            port: port_num,
            sgid_index: gid_index,
            mtu: h.mtu.min(port.active_mtu.max(256)),
            rd_atomic: 16
                .min(port.max_rd_atomic)
                .min(port.max_dest_rd_atomic)
                .max(1),
            ..RcParams::default()
        };
        Ok(Side {
            dev,
            nqp,
            slots,
            size: h.size as usize,
            pattern: h.verify_seed.map(Pattern::new),
            params,
            port,
        })
    }

    /// A post of one message-sized slot.
    pub(super) fn post(
        &mut self,
        q: usize,
        wr_id: u64,
        op: SendOp,
        slot: usize,
        remote: Option<&Region>,
    ) -> anyhow::Result<()> {
        let offset = slot * self.size;
        let p = Post {
            wr_id,
            op,
            buf: q,
            offset,
            len: self.size,
            remote: remote.map(|r| (r.addr + offset as u64, r.rkey)),
            signaled: true,
        };
        Ok(self.dev.post_send(q, &p)?)
    }

    /// A zero-byte SEND (a credit) on QP `q`.
    pub(super) fn credit(&mut self, q: usize, wr_id: u64) -> anyhow::Result<()> {
        let p = Post {
            wr_id,
            op: SendOp::Send,
            buf: q,
            offset: 0,
            len: 0,
            remote: None,
            signaled: true,
        };
        Ok(self.dev.post_send(q, &p)?)
    }
}

/// Verified bandwidth WRITEs: the server returns a credit per checked slot.
fn credits(h: &Hello) -> bool {
    h.op == Op::Write && h.verify_seed.is_some() && !h.lat
}

/// Client side of an RC run on `side`.
pub fn client_on<N: RcNic>(
    side: Side<N>,
    ctrl: &mut Control,
    mut hello: Hello,
    progress: &mut Progress,
) -> anyhow::Result<Outcome> {
    hello.mtu = side.params.mtu;
    slotted::client_on(side, ctrl, hello, progress)
}

impl<N: RcNic> SlottedSide for Side<N> {
    type Wc = Completion;
    const NAME: &'static str = "RC";

    fn nqp(&self) -> usize {
        self.nqp
    }

    fn slots(&self) -> usize {
        self.slots
    }

    fn patterned(&self) -> bool {
        self.pattern.is_some()
    }

    fn endpoints(&self) -> Vec<Vec<u8>> {
        (0..self.nqp)
            .map(|q| {
                let qpn = self.dev.qpn(q);
                RcEndpoint {
                    qpn,
                    psn: initial_psn(qpn),
                    lid: self.port.lid,
                    mtu: self.params.mtu,
                    gid: self.port.gid,
                }
                .to_bytes()
            })
            .collect()
    }

    fn regions(&self) -> Vec<Region> {
        (0..self.nqp)
            .map(|q| Region {
                addr: self.dev.addr(q),
                rkey: self.dev.rkey(q),
                len: self.dev.len(q) as u64,
            })
            .collect()
    }

    /// Brings every QP to RTS towards the peer's QP of the same index.
    fn connect(&mut self, endpoints: &[Vec<u8>]) -> anyhow::Result<()> {
        ensure!(
            endpoints.len() == self.nqp,
            "the peer has {} queue pairs, this side {}",
            endpoints.len(),
            self.nqp
        );
        for (q, bytes) in endpoints.iter().enumerate() {
            let remote = RcEndpoint::from_bytes(bytes)?;
            let psn = initial_psn(self.dev.qpn(q));
            for attrs in bring_up(&self.params, psn, &remote) {
                self.dev
                    .modify(q, &attrs)
                    .with_context(|| format!("bring RC QP {q} to {:?}", attrs.state))?;
            }
        }
        Ok(())
    }

    fn fill(&mut self, q: usize, slot: usize, i: u64) {
        if let Some(p) = self.pattern {
            self.dev
                .write(q, slot * self.size, self.size, &mut |s| p.fill(i, 0, s));
        }
    }

    /// 0 when slot `slot` of QP `q` holds message `i`'s pattern, else the bytes from
    /// the first wrong one to the end of the message.
    fn check(&self, q: usize, slot: usize, i: u64) -> u64 {
        let Some(p) = self.pattern else { return 0 };
        let mut bad = 0;
        self.dev.read(q, slot * self.size, self.size, &mut |s| {
            if let Err(m) = p.check(i, 0, s) {
                bad = s.len() as u64 - m.offset;
            }
        });
        bad
    }

    /// A receive of slot `slot` (or of no bytes: immediates and credits).
    fn post_recv(&mut self, q: usize, slot: usize, with_buffer: bool) -> anyhow::Result<()> {
        let len = if with_buffer { self.size } else { 0 };
        Ok(self
            .dev
            .post_recv(q, slot as u64, q, slot * self.size, len)?)
    }

    fn post_op(
        &mut self,
        op: Op,
        q: usize,
        slot: usize,
        wr_id: u64,
        imm: Option<u32>,
        remote: &Region,
    ) -> anyhow::Result<()> {
        let (op, remote) = match (op, imm) {
            (Op::Write, Some(imm)) => (SendOp::WriteImm(imm), Some(remote)),
            (Op::Write, None) => (SendOp::Write, Some(remote)),
            (Op::Send, _) => (SendOp::Send, None),
            (Op::Read, _) => (SendOp::Read, Some(remote)),
        };
        self.post(q, wr_id, op, slot, remote)
            .context("post an RC work request")
    }

    /// Polls the CQ; a failed work request ends the run.
    fn poll<'w>(&mut self, wcs: &'w mut [Completion]) -> anyhow::Result<&'w [Completion]> {
        let n = self.dev.poll(wcs)?;
        for wc in &wcs[..n] {
            if wc.status != 0 {
                bail!(
                    "RC work request {} on QP {:#x} completed with {} ({})",
                    wc.wr_id,
                    wc.qp_num,
                    self.dev.status_name(wc.status),
                    wc.status
                );
            }
        }
        Ok(&wcs[..n])
    }

    fn qp_index(&self, wc: &Completion) -> anyhow::Result<usize> {
        (0..self.nqp)
            .find(|&q| self.dev.qpn(q) == wc.qp_num)
            .with_context(|| format!("a completion for unknown QP {:#x}", wc.qp_num))
    }

    fn wr_id(wc: &Completion) -> u64 {
        wc.wr_id
    }

    fn is_receive(wc: &Completion) -> bool {
        wc.receive
    }

    fn length_ok(h: &Hello, wc: &Completion) -> bool {
        // Only a SEND's receive counts bytes; a WRITE's immediate carries none.
        h.op != Op::Send || u64::from(wc.byte_len) == h.size
    }

    fn answer(&mut self, h: &Hello, q: usize, slot: usize, i: u64) -> anyhow::Result<()> {
        if h.lat {
            let echo = if h.op == Op::Write {
                SendOp::WriteImm(i as u32)
            } else {
                SendOp::Send
            };
            let remote = (h.op == Op::Write).then(|| h.regions[q]);
            self.post(q, i, echo, slot, remote.as_ref())
        } else if credits(h) {
            self.credit(q, i)
        } else {
            Ok(())
        }
    }

    fn credits(&self, h: &Hello) -> bool {
        credits(h)
    }

    fn before_start(&mut self, h: &Hello) -> anyhow::Result<()> {
        if credits(h) {
            for q in 0..self.nqp {
                for slot in 0..self.slots {
                    self.post_recv(q, slot, false)?;
                }
            }
        }
        Ok(())
    }

    fn paths(_: &Hello) -> u32 {
        1
    }
}
