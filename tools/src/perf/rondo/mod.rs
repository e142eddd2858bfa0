//! `--transport rondo`: Rondo queue pairs from `rondo-verbs`.
//!
//! Each side opens one context with `qps` queue pairs on one completion queue and one
//! memory region per queue pair, cut into `slots` message-sized slots. Message `i` goes
//! on queue pair `i % qps` and uses slot `(i / qps) % slots` on both sides; at most
//! `slots` messages are in flight per queue pair, so with `--verify` no slot is
//! rewritten before its check:
//! - SEND: the server posts one receive per slot, checks a slot when its receive
//!   completes, then posts it again;
//! - WRITE: with `--verify` each write carries an immediate and consumes a receive, and
//!   the server posts a receive again only after checking the slot, so a write can only
//!   land in a slot that was checked (the responder refuses it, RNR, otherwise);
//! - READ: the server fills slot `k` with pattern `k` once; the client checks each slot
//!   it read into before reusing it.
//!
//! Latency mode ping-pongs one message on queue pair 0: a WRITE_WITH_IMM or SEND that
//! the server echoes back the same way, or a READ.

#[cfg(test)]
mod tests;

use super::device::RdmaDevice;
use super::exchange::{Backend, Control, Hello, Message, Op, Region, Report, Transport};
use super::pattern::Pattern;
use super::report::Outcome;
use super::slotted::{self, server_polls, Counters, SlottedSide};
use super::{NetArgs, Progress};
use anyhow::{bail, ensure, Context as _};
use rondo_verbs::{
    AccessFlags, CompletionQueue, Context, ContextAttr, FlowConfig, HostProfile, MemoryRegion,
    PeerAddr, QpEndpoint, QpInitAttr, QueuePair, RecvWr, RemoteAddr, SendWr, Sge, UdpAttr,
    WcOpcode, WcStatus, WorkCompletion,
};
use std::time::Duration;

/// Most bytes of message slots per queue pair (fewer slots for large messages).
const SLOT_BYTES: u64 = 64 << 20;
/// Bandwidth runs wait at most this long for a completion in one
/// `CompletionQueue::wait` (unless `--busy-poll`), so that their loops still check
/// the clock and the stall timeout.
const WAIT: Duration = Duration::from_millis(2);

/// Slots per queue pair: as many as `--tx-depth` allows within [`SLOT_BYTES`], at
/// least one; latency mode needs one.
pub(super) fn slots(h: &Hello) -> usize {
    if h.lat {
        return 1;
    }
    (SLOT_BYTES / h.size).clamp(1, u64::from(h.tx_depth)) as usize
}

/// Engine settings of a run's queue pairs: the backend's host profile
/// (`rondo_ud::profile`: base RTT and timer floors at the host's timescales, no
/// pacing or probing) on UDP and on a NIC, the paper's on the in-process fabric.
/// The QP sets the MTU; the engine transport is the one the hello names.
/// `--engine` settings come last, over the profile.
fn flow_config(ctx: &Context, h: &Hello) -> anyhow::Result<FlowConfig> {
    let cfg = match ctx.device_name() {
        "udp" => HostProfile::HOST_STACK.flow_config(h.paths as u16),
        "verbs" => HostProfile::NIC.flow_config(h.paths as u16),
        _ => FlowConfig::default(),
    };
    let cfg = match h.transport {
        Transport::Engine(transport) => FlowConfig { transport, ..cfg },
        Transport::RawUdp | Transport::Rc => cfg,
    };
    super::engine::apply(cfg, &h.engine, h.paths as u16)
}

/// One side's verbs objects.
struct Side {
    cq: CompletionQueue,
    qps: Vec<QueuePair>,
    mrs: Vec<MemoryRegion>,
    slots: usize,
    size: usize,
    pattern: Option<Pattern>,
    /// Wait for completions this long at most instead of polling (see [`WAIT`]).
    wait: Option<Duration>,
    /// Send every path to this address (`--via`, a fabric) instead of the peer's.
    via: Option<std::net::SocketAddr>,
}

impl Side {
    fn new(ctx: &Context, h: &Hello, net: NetArgs) -> anyhow::Result<Side> {
        let slots = slots(h);
        let size = h.size as usize;
        let pd = ctx.alloc_pd()?;
        let cq = ctx.create_cq(h.qps as usize * slots * 2 + 16)?;
        let mut qps = Vec::new();
        let mut mrs = Vec::new();
        for _ in 0..h.qps {
            let attr = QpInitAttr {
                // Room for latency mode's echoes, whose ACKs may trail the next ping.
                max_send_wr: slots.max(8),
                max_recv_wr: slots,
                max_sge: 1,
                paths: h.paths as u16,
                mtu: h.mtu as usize,
                flow: flow_config(ctx, h)?,
                auth: h.auth.parse().map_err(anyhow::Error::msg)?,
                ..QpInitAttr::default()
            };
            qps.push(
                ctx.create_qp(&pd, &cq, &cq, attr)
                    .context("create a queue pair")?,
            );
            let mr = pd
                .register(slots * size, AccessFlags::ALL)
                .with_context(|| format!("register {} bytes", slots * size))?;
            mrs.push(mr);
        }
        Ok(Side {
            cq,
            qps,
            mrs,
            slots,
            size,
            pattern: h.verify_seed.map(Pattern::new),
            wait: (!h.busy_poll && !h.lat).then_some(WAIT),
            via: net.via,
        })
    }

    fn sge(&self, q: usize, slot: usize) -> Sge {
        Sge::new(&self.mrs[q], slot * self.size, self.size as u32)
    }
}

impl SlottedSide for Side {
    type Wc = WorkCompletion;
    const NAME: &'static str = "Rondo";

    fn nqp(&self) -> usize {
        self.qps.len()
    }

    fn slots(&self) -> usize {
        self.slots
    }

    fn patterned(&self) -> bool {
        self.pattern.is_some()
    }

    fn endpoints(&self) -> Vec<Vec<u8>> {
        self.qps.iter().map(|q| q.endpoint().to_bytes()).collect()
    }

    fn regions(&self) -> Vec<Region> {
        self.mrs
            .iter()
            .map(|m| Region {
                addr: m.addr(),
                rkey: m.rkey(),
                len: m.len() as u64,
            })
            .collect()
    }

    fn connect(&mut self, endpoints: &[Vec<u8>]) -> anyhow::Result<()> {
        ensure!(
            endpoints.len() == self.qps.len(),
            "the peer has {} queue pairs, this side {}",
            endpoints.len(),
            self.qps.len()
        );
        for (qp, bytes) in self.qps.iter().zip(endpoints) {
            let mut remote = QpEndpoint::from_bytes(bytes)?;
            if let (Some(via), PeerAddr::Udp { paths }) = (self.via, &mut remote.addr) {
                paths.iter_mut().for_each(|p| *p = via);
            }
            qp.connect(&remote).context("connect a queue pair")?;
        }
        Ok(())
    }

    /// Fills `slot` of queue pair `q` with the pattern of message `i` (with `--verify`).
    fn fill(&mut self, q: usize, slot: usize, i: u64) {
        if let Some(p) = self.pattern {
            let at = slot * self.size;
            self.mrs[q].with_slice(|s| p.fill(i, 0, &mut s[at..at + self.size]));
        }
    }

    /// 0 when `slot` of queue pair `q` holds message `i`'s pattern, else the bytes from
    /// the first wrong one to the end of the message.
    fn check(&self, q: usize, slot: usize, i: u64) -> u64 {
        let Some(p) = self.pattern else { return 0 };
        let at = slot * self.size;
        self.mrs[q].with_slice(|s| match p.check(i, 0, &s[at..at + self.size]) {
            Ok(()) => 0,
            Err(m) => self.size as u64 - m.offset,
        })
    }

    fn post_recv(&mut self, q: usize, slot: usize, with_buffer: bool) -> anyhow::Result<()> {
        let sg_list = if with_buffer {
            vec![self.sge(q, slot)]
        } else {
            Vec::new()
        };
        self.qps[q]
            .post_recv(&RecvWr {
                wr_id: slot as u64,
                sg_list,
            })
            .context("post a receive")
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
        let sge = vec![self.sge(q, slot)];
        let remote = RemoteAddr {
            addr: remote.addr + (slot * self.size) as u64,
            rkey: remote.rkey,
        };
        let wr = match (op, imm) {
            (Op::Write, Some(imm)) => SendWr::write(wr_id, sge, remote).with_imm(imm),
            (Op::Write, None) => SendWr::write(wr_id, sge, remote),
            (Op::Send, _) => SendWr::send(wr_id, sge),
            (Op::Read, _) => SendWr::read(wr_id, sge, remote),
        };
        self.qps[q]
            .post_send_owned(wr)
            .context("post a work request")
    }

    /// Polls the CQ (waiting a little when it is empty and the run allows it); a
    /// failed work request ends the run.
    fn poll<'w>(&mut self, wcs: &'w mut [WorkCompletion]) -> anyhow::Result<&'w [WorkCompletion]> {
        let n = match self.wait {
            Some(w) => self.cq.wait(wcs, w)?,
            None => self.cq.poll(wcs)?,
        };
        for wc in &wcs[..n] {
            if wc.status != WcStatus::Success {
                bail!(
                    "work request {} on QP {:#x} ({:?}) completed with {:?}",
                    wc.wr_id,
                    wc.qp_num,
                    wc.opcode,
                    wc.status
                );
            }
        }
        Ok(&wcs[..n])
    }

    fn qp_index(&self, wc: &WorkCompletion) -> anyhow::Result<usize> {
        self.qps
            .iter()
            .position(|q| q.qp_num() == wc.qp_num)
            .with_context(|| format!("a completion for unknown QP {:#x}", wc.qp_num))
    }

    fn wr_id(wc: &WorkCompletion) -> u64 {
        wc.wr_id
    }

    fn is_receive(wc: &WorkCompletion) -> bool {
        matches!(wc.opcode, WcOpcode::Recv | WcOpcode::RecvRdmaWithImm)
    }

    fn length_ok(h: &Hello, wc: &WorkCompletion) -> bool {
        wc.byte_len == h.size
    }

    /// Echoes a ping (unsignaled: its completion is not waited for).
    fn answer(&mut self, h: &Hello, q: usize, slot: usize, i: u64) -> anyhow::Result<()> {
        if !h.lat {
            return Ok(());
        }
        let sge = vec![self.sge(q, slot)];
        let echo = if h.op == Op::Write {
            let remote = RemoteAddr {
                addr: h.regions[q].addr,
                rkey: h.regions[q].rkey,
            };
            SendWr::write(i, sge, remote).with_imm(i as u32)
        } else {
            SendWr::send(i, sge)
        };
        self.qps[q].post_send(&echo.unsignaled())?;
        Ok(())
    }

    /// Counters summed (maximum for OOD) over this side's queue pairs.
    fn counters(&self) -> Counters {
        self.qps
            .iter()
            .map(|q| q.stats())
            .fold(Counters::default(), |c, s| Counters {
                retx_packets: c.retx_packets + s.retx_packets,
                ood_max: c.ood_max.max(s.ood_max),
                ood_p99: c.ood_p99.max(s.ood_p99),
                ood_sum: c.ood_sum + s.ood_avg * s.data_packets_received as f64,
                data_packets_received: c.data_packets_received + s.data_packets_received,
                reorder_buffer_drops: c.reorder_buffer_drops + s.dropped_buffer_full,
            })
    }

    /// New data packets sent and packets received over this side's queue pairs.
    fn activity(&self) -> Option<u64> {
        Some(self.qps.iter().map(|q| q.stats()).fold(0, |n, s| {
            n + s.data_packets_sent.saturating_sub(s.retx_packets)
                + s.data_packets_received
                + s.acks_sent
        }))
    }

    fn paths(h: &Hello) -> u32 {
        h.paths
    }
}

/// `side` of [`open`] for the client and the server.
const CLIENT: u64 = 0;
const SERVER: u64 = 1;

/// Opens a context for a run on its backend: UDP sockets, or the RDMA device.
fn open(
    ctrl: &Control,
    h: &Hello,
    side: u64,
    rdma: Option<&RdmaDevice>,
    net: NetArgs,
) -> anyhow::Result<Context> {
    match h.backend {
        Backend::Udp => open_udp(ctrl, h, side, net),
        Backend::Verbs => {
            let dev = rdma.context(
                "this server has no RDMA device: start it with `rondo perf server --backend verbs --device NAME --gid-index N`",
            )?;
            open_verbs(h, side, dev)
        }
    }
}

/// Opens a context on the RDMA device: one UD queue pair with `paths` address
/// handles per peer, datagrams of at most `h.mtu` bytes (fewer when the port's
/// MTU is smaller), the run's reorder buffer, line rate and fault injection. The
/// progress thread spins in latency and `--busy-poll` runs, and naps briefly when
/// idle otherwise.
#[cfg(all(feature = "verbs", target_os = "linux"))]
fn open_verbs(h: &Hello, side: u64, dev: &RdmaDevice) -> anyhow::Result<Context> {
    let base = rondo_verbs::VerbsAttr::default();
    let attr = rondo_verbs::VerbsAttr {
        device: dev.name.clone(),
        port: dev.port,
        gid_index: dev.gid_index,
        paths: h.paths as u16,
        mtu: Some(h.mtu),
        line_rate_bps: if h.line_gbps > 0.0 {
            (h.line_gbps * 1e9) as u64
        } else {
            base.line_rate_bps
        },
        progress_thread: true,
        idle_sleep: if h.lat || h.busy_poll {
            Duration::ZERO
        } else {
            rondo_verbs::IDLE_SLEEP
        },
        loss: h.loss,
        reorder: h.reorder,
        fault_seed: fault_seed(h, side),
    };
    Context::open_verbs(context_attr(h), attr).with_context(|| {
        format!(
            "open a Rondo verbs context on {} port {} GID index {}",
            dev.name, dev.port, dev.gid_index
        )
    })
}

/// Without the `verbs` feature there is no RDMA device to open.
#[cfg(not(all(feature = "verbs", target_os = "linux")))]
fn open_verbs(_: &Hello, _: u64, _: &RdmaDevice) -> anyhow::Result<Context> {
    Err(super::device::OptionError::NotBuilt.into())
}

/// The largest datagram of a context (the RDMA port's MTU on `verbs`).
fn datagram_limit(ctx: &Context) -> Option<u32> {
    #[cfg(all(feature = "verbs", target_os = "linux"))]
    if let Some(s) = ctx.verbs_stats() {
        return u32::try_from(s.mtu).ok();
    }
    let _ = ctx;
    None
}

/// Seed of a side's fault injection (`side` keeps the two ends apart).
fn fault_seed(h: &Hello, side: u64) -> u64 {
    h.verify_seed
        .unwrap_or(1)
        .wrapping_mul(2)
        .wrapping_add(side)
}

/// Opens a context for a run over UDP: one socket per path on the interface that
/// reaches the peer, the reorder buffer, line rate and fault injection of the run
/// (`side` keeps the two ends' injected faults apart).
fn open_udp(ctrl: &Control, h: &Hello, side: u64, net: NetArgs) -> anyhow::Result<Context> {
    let mut udp = UdpAttr::default();
    udp.udp.local_ip = ctrl.local()?.ip();
    udp.udp.base_port = net.udp_port;
    udp.udp.paths = h.paths as u16;
    udp.udp.max_datagram = udp.udp.max_datagram.max(h.mtu as usize);
    if h.line_gbps > 0.0 {
        udp.line_rate_bps = (h.line_gbps * 1e9) as u64;
    }
    udp.loss = h.loss;
    udp.progress_thread = h.progress_thread || (side == SERVER && !server_polls(h));
    udp.reorder = h.reorder;
    udp.fault_seed = fault_seed(h, side);
    Context::open_udp(context_attr(h), udp).with_context(|| match net.udp_port {
        0 => "open a Rondo UDP context".to_string(),
        p => format!("open a Rondo UDP context on ports {p}.. (--udp-port; in use?)"),
    })
}

/// Context attributes of a run: reorder buffer slots as large as the run's datagrams.
fn context_attr(h: &Hello) -> ContextAttr {
    let base = ContextAttr::default();
    ContextAttr {
        max_mtu: h.mtu as usize,
        reorder_buffer_bytes: if h.reorder_buffer > 0 {
            h.reorder_buffer as usize
        } else {
            base.reorder_buffer_bytes
        },
        ..base
    }
}

/// Client side of a Rondo run.
pub fn client(
    ctrl: &mut Control,
    mut hello: Hello,
    progress: &mut Progress,
    rdma: Option<&RdmaDevice>,
    net: NetArgs,
) -> anyhow::Result<Outcome> {
    let ctx = open(ctrl, &hello, CLIENT, rdma, net)?;
    // On an RDMA port with a smaller MTU, datagrams are that large (as perftest's -m).
    if let Some(limit) = datagram_limit(&ctx) {
        hello.mtu = hello.mtu.min(limit);
    }
    client_on(&ctx, ctrl, hello, progress, net)
}

/// The client's part of a run on an opened context.
fn client_on(
    ctx: &Context,
    ctrl: &mut Control,
    hello: Hello,
    progress: &mut Progress,
    net: NetArgs,
) -> anyhow::Result<Outcome> {
    slotted::client_on(Side::new(ctx, &hello, net)?, ctrl, hello, progress)
}

/// The server's part of a run on an opened context.
fn server_on(ctx: &Context, ctrl: &mut Control, h: &Hello, net: NetArgs) -> anyhow::Result<Report> {
    slotted::server_on(Side::new(ctx, h, net), ctrl, h)
}

/// Server side of a Rondo run.
pub fn server(
    ctrl: &mut Control,
    hello: &Hello,
    rdma: Option<&RdmaDevice>,
    net: NetArgs,
) -> anyhow::Result<Report> {
    let ctx = match open(ctrl, hello, SERVER, rdma, net) {
        Ok(c) => c,
        Err(e) => {
            let _ = ctrl.send(&Message::reject(format!("{e:#}")));
            return Err(e);
        }
    };
    server_on(&ctx, ctrl, hello, net)
}
