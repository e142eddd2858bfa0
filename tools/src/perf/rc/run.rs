//! The client's side of an RC run over any [`RcNic`], and the per-side objects both
//! ends use (see the module docs of `rc`).

use super::attr::{bring_up, initial_psn, RcEndpoint, RcParams};
use super::nic::{Completion, PortInfo, Post, RcNic, SendOp};
use crate::perf::client::{backend_name, op_name, transport_name, wait_accept, wait_report};
use crate::perf::exchange::{Control, Done, Hello, Message, Op, Region, Report};
use crate::perf::pattern::Pattern;
use crate::perf::report::{gbps, LatencyRecorder, Meter, Outcome};
use crate::perf::rondo::{slots, STALL};
use crate::perf::Progress;
use anyhow::{bail, ensure, Context as _};
use std::time::{Duration, Instant};

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

    pub(super) fn endpoints(&self) -> Vec<Vec<u8>> {
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

    pub(super) fn regions(&self) -> Vec<Region> {
        (0..self.nqp)
            .map(|q| Region {
                addr: self.dev.addr(q),
                rkey: self.dev.rkey(q),
                len: self.dev.len(q) as u64,
            })
            .collect()
    }

    /// Brings every QP to RTS towards the peer's QP of the same index.
    pub(super) fn connect(&mut self, endpoints: &[Vec<u8>]) -> anyhow::Result<()> {
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

    pub(super) fn fill(&mut self, q: usize, slot: usize, i: u64) {
        if let Some(p) = self.pattern {
            self.dev
                .write(q, slot * self.size, self.size, &mut |s| p.fill(i, 0, s));
        }
    }

    /// 0 when slot `slot` of QP `q` holds message `i`'s pattern, else the bytes from
    /// the first wrong one to the end of the message.
    pub(super) fn check(&self, q: usize, slot: usize, i: u64) -> u64 {
        let Some(p) = self.pattern else { return 0 };
        let mut bad = 0;
        self.dev.read(q, slot * self.size, self.size, &mut |s| {
            if let Err(m) = p.check(i, 0, s) {
                bad = s.len() as u64 - m.offset;
            }
        });
        bad
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

    /// A receive of slot `slot` (or of no bytes: immediates and credits).
    pub(super) fn recv(&mut self, q: usize, slot: usize, with_buffer: bool) -> anyhow::Result<()> {
        let len = if with_buffer { self.size } else { 0 };
        Ok(self
            .dev
            .post_recv(q, slot as u64, q, slot * self.size, len)?)
    }

    pub(super) fn qp_index(&self, wc: &Completion) -> anyhow::Result<usize> {
        (0..self.nqp)
            .find(|&q| self.dev.qpn(q) == wc.qp_num)
            .with_context(|| format!("a completion for unknown QP {:#x}", wc.qp_num))
    }

    /// Polls the CQ; a failed work request ends the run.
    pub(super) fn poll<'w>(
        &mut self,
        wcs: &'w mut [Completion],
    ) -> anyhow::Result<&'w [Completion]> {
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
}

/// Verified bandwidth WRITEs: the server returns a credit per checked slot.
pub(super) fn credits(h: &Hello) -> bool {
    h.op == Op::Write && h.verify_seed.is_some() && !h.lat
}

/// Client side of an RC run on `side`.
pub fn client_on<N: RcNic>(
    mut side: Side<N>,
    ctrl: &mut Control,
    mut hello: Hello,
    progress: &mut Progress,
) -> anyhow::Result<Outcome> {
    hello.mtu = side.params.mtu;
    hello.endpoints = side.endpoints();
    hello.regions = side.regions();
    ctrl.send(&Message::Hello(hello.clone()))?;
    let accept = wait_accept(ctrl)?;
    side.connect(&accept.endpoints)?;
    ensure!(
        accept.regions.len() == side.nqp,
        "the server sent {} buffers for {} queue pairs",
        accept.regions.len(),
        side.nqp
    );
    if credits(&hello) {
        for q in 0..side.nqp {
            for slot in 0..side.slots {
                side.recv(q, slot, false)?;
            }
        }
    }
    ctrl.send(&Message::Start)?;
    let (meter, latency, mismatched) = if hello.lat {
        let (meter, lat, mismatched) = ping(&mut side, &hello, &accept.regions, progress)?;
        (meter, Some(lat.summary()), mismatched)
    } else {
        let (meter, mismatched) = stream(&mut side, &hello, &accept.regions, progress)?;
        (meter, None, mismatched)
    };
    ctrl.send(&Message::Done(Done {
        messages: meter.messages(),
        packets: 0,
        cpu_ns: ctrl.session_cpu_ns(),
    }))?;
    let report = wait_report(ctrl)?;
    if hello.op == Op::Read && !hello.lat {
        ctrl.send(&Message::Report(Report {
            messages: meter.messages(),
            bytes: meter.bytes(),
            active_ns: meter.elapsed().as_nanos() as u64,
            peak_gbps: meter.peak_gbps(),
            verified: hello.verify_seed.is_some() && mismatched == 0,
            mismatched_bytes: mismatched,
            cpu_ns: ctrl.session_cpu_ns(),
            ..Report::default()
        }))?;
    }
    let received_here = hello.op == Op::Read || hello.lat;
    let verified = hello.verify_seed.is_some()
        && match (hello.op, hello.lat) {
            (Op::Read, _) => mismatched == 0,
            (_, true) => mismatched == 0 && report.verified,
            _ => report.verified,
        };
    let elapsed = meter.elapsed();
    Ok(Outcome {
        size: hello.size,
        n_iterations: meter.messages(),
        bw_peak: meter.peak_gbps(),
        bw_average: gbps(meter.bytes(), elapsed),
        msg_rate: if elapsed.is_zero() {
            0.0
        } else {
            meter.messages() as f64 / elapsed.as_secs_f64() / 1e6
        },
        verified: verified && (received_here || report.messages == meter.messages()),
        retx_packets: 0,
        ood_max: 0,
        op: op_name(hello.op),
        transport: transport_name(hello.transport),
        backend: backend_name(hello.backend),
        paths: 1,
        qps: hello.qps,
        packets: 0,
        lost_packets: 0,
        client_cpu_s: 0.0,
        server_cpu_s: report.cpu_ns as f64 / 1e9,
        packets_per_cpu_s: 0.0,
        latency,
    })
}

/// Bandwidth run, client side: up to `slots` messages in flight per QP (slots
/// awaiting their credit count as in flight) until the count or the time is reached.
fn stream<N: RcNic>(
    side: &mut Side<N>,
    h: &Hello,
    regions: &[Region],
    progress: &mut Progress,
) -> anyhow::Result<(Meter, u64)> {
    let nqp = side.nqp as u64;
    let slots = side.slots as u64;
    let credit_mode = credits(h);
    let mut in_flight = vec![0u64; side.nqp];
    let mut wcs = [Completion::default(); 64];
    let mut meter = Meter::start();
    let deadline = h
        .duration_s
        .map(|d| Instant::now() + Duration::from_secs_f64(d));
    let mut total = h.iterations;
    let (mut next, mut mismatched) = (0u64, 0u64);
    let mut last_progress = Instant::now();
    loop {
        if total.is_none() && deadline.is_some_and(|d| Instant::now() >= d) {
            total = Some(next);
        }
        while total.is_none_or(|n| next < n) {
            let q = (next % nqp) as usize;
            if in_flight[q] >= slots {
                break;
            }
            let j = next / nqp;
            let slot = (j % slots) as usize;
            let (op, remote) = match h.op {
                Op::Write => {
                    side.fill(q, slot, next);
                    let op = if side.pattern.is_some() {
                        SendOp::WriteImm(j as u32)
                    } else {
                        SendOp::Write
                    };
                    (op, Some(&regions[q]))
                }
                Op::Send => {
                    side.fill(q, slot, next);
                    (SendOp::Send, None)
                }
                Op::Read => (SendOp::Read, Some(&regions[q])),
            };
            side.post(q, next, op, slot, remote)
                .context("post an RC work request")?;
            in_flight[q] += 1;
            next += 1;
        }
        if total.is_some_and(|n| meter.messages() >= n) {
            break;
        }
        let done = side.poll(&mut wcs)?;
        let mut any = false;
        for wc in done {
            let q = side.qp_index(wc)?;
            any = true;
            if wc.receive {
                // A credit: the server checked a slot of this QP.
                in_flight[q] = in_flight[q].saturating_sub(1);
                side.recv(q, wc.wr_id as usize, false)?;
                continue;
            }
            if !credit_mode {
                in_flight[q] -= 1;
            }
            if h.op == Op::Read {
                let slot = ((wc.wr_id / nqp) % slots) as usize;
                mismatched += side.check(q, slot, slot as u64);
            }
            meter.record(h.size, 1);
        }
        if any {
            last_progress = Instant::now();
            progress.tick(meter.messages(), total);
        } else {
            ensure!(
                last_progress.elapsed() < STALL,
                "no RC completion for {STALL:?} with {} messages in flight: is the server still running?",
                in_flight.iter().sum::<u64>()
            );
        }
    }
    progress.clear();
    Ok((meter, mismatched))
}

/// Latency run, client side: one message at a time on QP 0, echoed back the same
/// way (WRITE_WITH_IMM or SEND), or one READ.
fn ping<N: RcNic>(
    side: &mut Side<N>,
    h: &Hello,
    regions: &[Region],
    progress: &mut Progress,
) -> anyhow::Result<(Meter, LatencyRecorder, u64)> {
    let mut lat = LatencyRecorder::new();
    let mut meter = Meter::start();
    let deadline = h
        .duration_s
        .map(|d| Instant::now() + Duration::from_secs_f64(d));
    let mut mismatched = 0;
    let mut i = 0u64;
    let mut wcs = [Completion::default(); 4];
    while h.iterations.is_none_or(|n| i < n) && deadline.is_none_or(|d| Instant::now() < d) {
        progress.tick(i, h.iterations);
        if h.op != Op::Read {
            side.fill(0, 0, i);
            side.recv(0, 0, h.op == Op::Send)?;
        }
        let t0 = Instant::now();
        let (op, remote) = match h.op {
            Op::Read => (SendOp::Read, Some(&regions[0])),
            Op::Write => (SendOp::WriteImm(i as u32), Some(&regions[0])),
            Op::Send => (SendOp::Send, None),
        };
        side.post(0, i, op, 0, remote)?;
        // The request's own completion and, unless READ, the echo (in either order).
        let (mut got_sent, mut got_echo) = (false, h.op == Op::Read);
        let start = Instant::now();
        while !(got_sent && got_echo) {
            for wc in side.poll(&mut wcs)? {
                if wc.receive {
                    ensure!(!got_echo, "two echoes for one ping");
                    got_echo = true;
                } else {
                    got_sent = true;
                }
            }
            ensure!(
                start.elapsed() < STALL,
                "no answer to RC ping {i} for {STALL:?}: is the server still running?"
            );
        }
        lat.record(t0.elapsed());
        mismatched += if h.op == Op::Read {
            side.check(0, 0, 0)
        } else {
            side.check(0, 0, i)
        };
        meter.record(h.size, 1);
        i += 1;
    }
    progress.clear();
    Ok((meter, lat, mismatched))
}
