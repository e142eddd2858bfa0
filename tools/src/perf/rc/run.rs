//! Client and server of an RC run over any [`RcNic`] (see the module docs of `rc`).

use super::attr::{bring_up, initial_psn, RcEndpoint, RcParams};
use super::nic::{Completion, PortInfo, Post, RcNic, SendOp};
use crate::perf::client::{
    backend_name, op_name, transport_name, wait_accept, wait_report, SETUP_TIMEOUT,
};
use crate::perf::exchange::{
    Accept, Control, Done, ExchangeError, Hello, Message, Op, Region, Report,
};
use crate::perf::pattern::Pattern;
use crate::perf::report::{gbps, LatencyRecorder, Meter, Outcome};
use crate::perf::rondo::{slots, STALL};
use crate::perf::Progress;
use anyhow::{bail, ensure, Context as _};
use std::time::{Duration, Instant};

/// One side's RC objects.
pub struct Side<N> {
    dev: N,
    nqp: usize,
    slots: usize,
    size: usize,
    pattern: Option<Pattern>,
    params: RcParams,
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

    /// A post of one message-sized slot.
    fn post(
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
    fn credit(&mut self, q: usize, wr_id: u64) -> anyhow::Result<()> {
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
    fn recv(&mut self, q: usize, slot: usize, with_buffer: bool) -> anyhow::Result<()> {
        let len = if with_buffer { self.size } else { 0 };
        Ok(self
            .dev
            .post_recv(q, slot as u64, q, slot * self.size, len)?)
    }

    fn qp_index(&self, wc: &Completion) -> anyhow::Result<usize> {
        (0..self.nqp)
            .find(|&q| self.dev.qpn(q) == wc.qp_num)
            .with_context(|| format!("a completion for unknown QP {:#x}", wc.qp_num))
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
}

/// Verified bandwidth WRITEs: the server returns a credit per checked slot.
fn credits(h: &Hello) -> bool {
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

/// The server's QPs, connected, with their receives posted; and whether receives
/// are watched (`Some(with_buffer)`).
fn set_up<N: RcNic>(mut side: Side<N>, h: &Hello) -> anyhow::Result<(Side<N>, Option<bool>)> {
    ensure!(
        side.params.mtu == h.mtu,
        "this server's port carries {} bytes per packet, the client asked for {}: rerun the client with -m {}",
        side.params.mtu,
        h.mtu,
        side.params.mtu
    );
    side.connect(&h.endpoints)?;
    ensure!(
        !h.lat || h.op != Op::Write || h.regions.len() == side.nqp,
        "a latency WRITE run needs the client's buffer of each queue pair"
    );
    if h.op == Op::Read {
        for q in 0..side.nqp {
            for slot in 0..side.slots {
                side.fill(q, slot, slot as u64);
            }
        }
    }
    let recvs = match h.op {
        Op::Send => Some(true),
        Op::Write if h.lat || h.verify_seed.is_some() => Some(false),
        _ => None,
    };
    if let Some(with_buffer) = recvs {
        for q in 0..side.nqp {
            for slot in 0..side.slots {
                side.recv(q, slot, with_buffer)?;
            }
        }
    }
    Ok((side, recvs))
}

/// Server side of an RC run on `side` (`Err`: this side could not be opened; the
/// client is told why, as when its run cannot be set up here).
pub fn server_on<N: RcNic>(
    side: anyhow::Result<Side<N>>,
    ctrl: &mut Control,
    h: &Hello,
) -> anyhow::Result<Report> {
    let (mut side, recvs) = match side.and_then(|s| set_up(s, h)) {
        Ok(s) => s,
        Err(e) => {
            let _ = ctrl.send(&Message::Reject {
                reason: format!("{e:#}"),
            });
            return Err(e);
        }
    };
    ctrl.send(&Message::Accept(Accept {
        endpoints: side.endpoints(),
        regions: side.regions(),
        udp_paths: Vec::new(),
    }))?;
    ctrl.expect(SETUP_TIMEOUT, "start", |m| match m {
        Message::Start => Some(()),
        _ => None,
    })?;
    let nqp = side.nqp as u64;
    let mut received = vec![0u64; side.nqp];
    let (mut mismatched, mut done) = (0u64, None::<Done>);
    let mut meter = Meter::start();
    let meter_start = Instant::now();
    let mut wcs = [Completion::default(); 64];
    let mut polls = 0u64;
    if recvs.is_none() {
        // Nothing completes here (plain WRITE, READ): the NIC answers on its own.
        done = Some(wait_done(ctrl)?);
    }
    loop {
        let got: Vec<Completion> = side.poll(&mut wcs)?.to_vec();
        for wc in got.iter().filter(|wc| wc.receive) {
            let q = side.qp_index(wc)?;
            let c = received[q];
            received[q] += 1;
            let i = c * nqp + q as u64;
            let slot = if h.op == Op::Send {
                wc.wr_id as usize
            } else {
                (c % side.slots as u64) as usize
            };
            if u64::from(wc.byte_len) != h.size && h.op == Op::Send {
                mismatched += h.size;
            }
            mismatched += side.check(q, slot, i);
            meter.record(h.size, 1);
            side.recv(q, slot, h.op == Op::Send)?;
            if h.lat {
                let echo = if h.op == Op::Write {
                    SendOp::WriteImm(i as u32)
                } else {
                    SendOp::Send
                };
                let remote = (h.op == Op::Write).then(|| h.regions[q]);
                side.post(q, i, echo, slot, remote.as_ref())?;
            } else if credits(h) {
                side.credit(q, i)?;
            }
        }
        polls += 1;
        if done.is_none() && polls % 64 == 0 {
            match ctrl.try_recv()? {
                Some(Message::Done(d)) => done = Some(d),
                Some(m) => bail!("expected a done message, got {}", m.kind()),
                None => {}
            }
        }
        if let Some(d) = done {
            ensure!(
                recvs.is_none() || meter.elapsed() + STALL > meter_start.elapsed(),
                "the client sent {} messages, {} arrived, nothing more for {STALL:?}",
                d.messages,
                meter.messages()
            );
            if recvs.is_none() || meter.messages() >= d.messages {
                let checked = recvs.is_some() && h.op != Op::Read;
                let report = Report {
                    messages: if recvs.is_some() {
                        meter.messages()
                    } else {
                        d.messages
                    },
                    bytes: if recvs.is_some() {
                        meter.bytes()
                    } else {
                        d.messages.saturating_mul(h.size)
                    },
                    packets: 0,
                    active_ns: meter.active().as_nanos() as u64,
                    peak_gbps: meter.peak_gbps(),
                    verified: h.verify_seed.is_some() && checked && mismatched == 0,
                    mismatched_bytes: mismatched,
                    retx_packets: 0,
                    ood_max: 0,
                    cpu_ns: ctrl.session_cpu_ns(),
                };
                ctrl.send(&Message::Report(report))?;
                if h.op == Op::Read && !h.lat {
                    let client = wait_report(ctrl)?;
                    return Ok(Report {
                        verified: client.verified,
                        mismatched_bytes: client.mismatched_bytes,
                        active_ns: client.active_ns,
                        bytes: client.bytes,
                        ..report
                    });
                }
                return Ok(report);
            }
        }
    }
}

/// Waits, as long as it takes, for the client's `Done`.
fn wait_done(ctrl: &mut Control) -> anyhow::Result<Done> {
    loop {
        match ctrl.recv(Duration::from_secs(1)) {
            Ok(Message::Done(d)) => return Ok(d),
            Ok(m) => bail!("expected a done message, got {}", m.kind()),
            Err(ExchangeError::Timeout(_)) => {}
            Err(e) => return Err(e.into()),
        }
    }
}
