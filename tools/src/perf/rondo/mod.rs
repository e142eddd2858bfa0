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

mod requester;
mod responder;
#[cfg(test)]
mod tests;

use super::exchange::{Control, Hello, Message, Op, Region, Report};
use super::pattern::Pattern;
use super::report::Outcome;
use super::Progress;
use anyhow::{bail, ensure, Context as _};
use requester::client_on;
use responder::server_on;
use rondo_verbs::{
    AccessFlags, CompletionQueue, Context, ContextAttr, FlowConfig, MemoryRegion, QpEndpoint,
    QpInitAttr, QueuePair, RecvWr, Sge, UdpAttr, WcStatus, WorkCompletion,
};
use std::time::Duration;

/// Most bytes of message slots per queue pair (fewer slots for large messages).
const SLOT_BYTES: u64 = 64 << 20;
/// A run that completes nothing for this long has failed.
const STALL: Duration = Duration::from_secs(10);
/// Bandwidth runs wait at most this long for a completion in one
/// `CompletionQueue::wait` (unless `--busy-poll`), so that their loops still check
/// the clock and the stall timeout.
const WAIT: Duration = Duration::from_millis(2);

/// Slots per queue pair: as many as `--tx-depth` allows within [`SLOT_BYTES`], at
/// least one; latency mode needs one.
fn slots(h: &Hello) -> usize {
    if h.lat {
        return 1;
    }
    (SLOT_BYTES / h.size).clamp(1, u64::from(h.tx_depth)) as usize
}

/// Engine settings of a run's queue pairs: on UDP the host-stack profile
/// (`rondo_verbs::udp_flow_config`: base RTT and timer floors at the host's
/// timescales, no pacing or probing), on the in-process fabric the paper's.
fn flow_config(ctx: &Context, h: &Hello) -> FlowConfig {
    if ctx.device_name() == "udp" {
        rondo_verbs::udp_flow_config(h.paths as u16)
    } else {
        FlowConfig::default()
    }
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
}

impl Side {
    fn new(ctx: &Context, h: &Hello) -> anyhow::Result<Side> {
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
                flow: flow_config(ctx, h),
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
        })
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

    fn connect(&self, endpoints: &[Vec<u8>]) -> anyhow::Result<()> {
        ensure!(
            endpoints.len() == self.qps.len(),
            "the peer has {} queue pairs, this side {}",
            endpoints.len(),
            self.qps.len()
        );
        for (qp, bytes) in self.qps.iter().zip(endpoints) {
            let remote = QpEndpoint::from_bytes(bytes)?;
            qp.connect(&remote).context("connect a queue pair")?;
        }
        Ok(())
    }

    fn qp_index(&self, wc: &WorkCompletion) -> anyhow::Result<usize> {
        self.qps
            .iter()
            .position(|q| q.qp_num() == wc.qp_num)
            .with_context(|| format!("a completion for unknown QP {:#x}", wc.qp_num))
    }

    fn sge(&self, q: usize, slot: usize) -> Sge {
        Sge::new(&self.mrs[q], slot * self.size, self.size as u32)
    }

    /// Fills `slot` of queue pair `q` with the pattern of message `i` (with `--verify`).
    fn fill(&self, q: usize, slot: usize, i: u64) {
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

    fn post_recv(&self, q: usize, slot: usize, with_buffer: bool) -> anyhow::Result<()> {
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

    /// Polls the CQ (waiting a little when it is empty and the run allows it); a
    /// failed work request ends the run.
    fn poll<'w>(&self, wcs: &'w mut [WorkCompletion]) -> anyhow::Result<&'w [WorkCompletion]> {
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

    /// Counters summed (maximum for OOD) over this side's queue pairs.
    fn transport_stats(&self) -> Counters {
        self.qps
            .iter()
            .map(|q| q.stats())
            .fold(Counters::default(), |c, s| Counters {
                retx_packets: c.retx_packets + s.retx_packets,
                ood_max: c.ood_max.max(s.ood_max),
                data_packets_received: c.data_packets_received + s.data_packets_received,
            })
    }
}

/// What one side reports of its queue pairs.
#[derive(Clone, Copy, Debug, Default)]
struct Counters {
    retx_packets: u64,
    ood_max: u64,
    data_packets_received: u64,
}

/// `side` of [`open`] for the client and the server.
const CLIENT: u64 = 0;
const SERVER: u64 = 1;

/// Whether the server polls its completion queue during the run: it does when
/// receives complete there (SEND, and WRITE with immediates: verified or echoed);
/// otherwise it waits on the control connection and a progress thread serves.
fn server_polls(h: &Hello) -> bool {
    h.op == Op::Send || (h.op == Op::Write && (h.lat || h.verify_seed.is_some()))
}

/// Opens a context for a run over UDP: one socket per path on the interface that
/// reaches the peer, the reorder buffer, line rate and fault injection of the run
/// (`side` keeps the two ends' injected faults apart).
fn open(ctrl: &Control, h: &Hello, side: u64) -> anyhow::Result<Context> {
    let mut udp = UdpAttr::default();
    udp.udp.local_ip = ctrl.local()?.ip();
    udp.udp.base_port = 0;
    udp.udp.paths = h.paths as u16;
    udp.udp.max_datagram = udp.udp.max_datagram.max(h.mtu as usize);
    if h.line_gbps > 0.0 {
        udp.line_rate_bps = (h.line_gbps * 1e9) as u64;
    }
    udp.loss = h.loss;
    udp.progress_thread = h.progress_thread || (side == SERVER && !server_polls(h));
    udp.reorder = h.reorder;
    udp.fault_seed = h
        .verify_seed
        .unwrap_or(1)
        .wrapping_mul(2)
        .wrapping_add(side);
    Context::open_udp(context_attr(h), udp).context("open a Rondo UDP context")
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
    hello: Hello,
    progress: &mut Progress,
) -> anyhow::Result<Outcome> {
    let ctx = open(ctrl, &hello, CLIENT)?;
    client_on(&ctx, ctrl, hello, progress)
}

/// Server side of a Rondo run.
pub fn server(ctrl: &mut Control, hello: &Hello) -> anyhow::Result<Report> {
    let ctx = match open(ctrl, hello, SERVER) {
        Ok(c) => c,
        Err(e) => {
            let _ = ctrl.send(&Message::Reject {
                reason: format!("{e:#}"),
            });
            return Err(e);
        }
    };
    server_on(&ctx, ctrl, hello)
}
