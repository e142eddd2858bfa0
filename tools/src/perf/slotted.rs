//! The client and server loops of a run over queue pairs cut into message slots,
//! shared by `--transport rc` (NIC RC queue pairs) and `--transport rondo`
//! (`rondo-verbs` queue pairs); each transport implements [`SlottedSide`].
//!
//! Message `i` goes on queue pair `i % qps` and uses slot `(i / qps) % slots` on both
//! sides; at most `slots` messages are in flight per queue pair (slots awaiting their
//! credit count as in flight where the transport returns credits).

use super::client::{backend_name, op_name, wait_accept, wait_report};
use super::exchange::{Accept, Control, Done, ExchangeError, Hello, Message, Op, Region, Report};
use super::report::{gbps, LatencyRecorder, Meter, Outcome};
use super::Progress;
use anyhow::{bail, ensure, Context as _};
use std::time::{Duration, Instant};

/// What one side reports of its queue pairs.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Counters {
    pub(super) retx_packets: u64,
    pub(super) ood_max: u64,
    pub(super) ood_p99: u64,
    /// Sum of OOD over the data packets (average times packets).
    pub(super) ood_sum: f64,
    pub(super) data_packets_received: u64,
    pub(super) reorder_buffer_drops: u64,
}

impl Counters {
    /// Average OOD over the data packets.
    pub(super) fn ood_avg(&self) -> f64 {
        if self.data_packets_received == 0 {
            0.0
        } else {
            self.ood_sum / self.data_packets_received as f64
        }
    }
}

/// Whether the server polls its completion queue during the run: it does when
/// receives complete there (SEND, and WRITE with immediates: verified or echoed);
/// otherwise it waits on the control connection and the NIC or a progress thread
/// answers.
pub(super) fn server_polls(h: &Hello) -> bool {
    h.op == Op::Send || (h.op == Op::Write && (h.lat || h.verify_seed.is_some()))
}

/// One side of a run: queue pairs, their buffers of `slots` message-sized slots, and
/// the completion queue they share.
pub(super) trait SlottedSide {
    /// A work completion.
    type Wc: Copy + Default;
    /// The transport's name in messages ("RC", "Rondo").
    const NAME: &'static str;

    /// Queue pairs.
    fn nqp(&self) -> usize;
    /// Slots per queue pair.
    fn slots(&self) -> usize;
    /// Whether messages carry a pattern (`--verify`).
    fn patterned(&self) -> bool;
    /// The queue pairs' endpoints, as sent to the peer.
    fn endpoints(&self) -> Vec<Vec<u8>>;
    /// The queue pairs' buffers, as sent to the peer.
    fn regions(&self) -> Vec<Region>;
    /// Connects queue pair `q` to the peer's queue pair `q`, for every `q`.
    fn connect(&mut self, endpoints: &[Vec<u8>]) -> anyhow::Result<()>;
    /// Fills `slot` of queue pair `q` with the pattern of message `i` (with `--verify`).
    fn fill(&mut self, q: usize, slot: usize, i: u64);
    /// 0 when `slot` of queue pair `q` holds message `i`'s pattern, else the bytes
    /// from the first wrong one to the end of the message.
    fn check(&self, q: usize, slot: usize, i: u64) -> u64;
    /// A receive of `slot` of queue pair `q` (or of no bytes: immediates, credits).
    fn post_recv(&mut self, q: usize, slot: usize, with_buffer: bool) -> anyhow::Result<()>;
    /// Posts work request `wr_id` of `op` (a WRITE carrying `imm` when given) from
    /// `slot` of queue pair `q` to the same slot of `remote` (WRITE, READ).
    fn post_op(
        &mut self,
        op: Op,
        q: usize,
        slot: usize,
        wr_id: u64,
        imm: Option<u32>,
        remote: &Region,
    ) -> anyhow::Result<()>;
    /// Polls the completion queue; a failed work request ends the run.
    fn poll<'w>(&mut self, wcs: &'w mut [Self::Wc]) -> anyhow::Result<&'w [Self::Wc]>;
    /// The index of the queue pair `wc` completed on.
    fn qp_index(&self, wc: &Self::Wc) -> anyhow::Result<usize>;
    /// `wc`'s work request id.
    fn wr_id(wc: &Self::Wc) -> u64;
    /// Whether `wc` completes a receive.
    fn is_receive(wc: &Self::Wc) -> bool;
    /// Whether the receive `wc` carried as many bytes as run `h` expects.
    fn length_ok(h: &Hello, wc: &Self::Wc) -> bool;
    /// Server: answers message `i`, received in `slot` of queue pair `q` (an echo in
    /// latency mode, a credit where the transport returns them).
    fn answer(&mut self, h: &Hello, q: usize, slot: usize, i: u64) -> anyhow::Result<()>;
    /// Client: whether a slot stays in flight until the server returns its credit.
    fn credits(&self, _h: &Hello) -> bool {
        false
    }
    /// Client: what to post after connecting, before the run starts.
    fn before_start(&mut self, _h: &Hello) -> anyhow::Result<()> {
        Ok(())
    }
    /// Transport counters of this side.
    fn counters(&self) -> Counters {
        Counters::default()
    }
    /// A count that grows while this side's queue pairs move data (new packets sent
    /// or received), for the stall timer of a side that polls nothing; `None` where
    /// the NIC does the work unseen.
    fn activity(&self) -> Option<u64> {
        None
    }
    /// Paths a run of `h` sprays over.
    fn paths(h: &Hello) -> u32;
}

/// Client side of a run on `side`.
pub(super) fn client_on<S: SlottedSide>(
    mut side: S,
    ctrl: &mut Control,
    mut hello: Hello,
    progress: &mut Progress,
) -> anyhow::Result<Outcome> {
    hello.endpoints = side.endpoints();
    hello.regions = side.regions();
    ctrl.send(&Message::Hello(hello.clone()))?;
    let accept = wait_accept(ctrl)?;
    side.connect(&accept.endpoints)?;
    ensure!(
        accept.regions.len() == side.nqp(),
        "the server sent {} buffers for {} queue pairs",
        accept.regions.len(),
        side.nqp()
    );
    side.before_start(&hello)?;
    ctrl.send(&Message::Start)?;
    let stall = ctrl.timeouts().stall;
    let (meter, latency, mismatched) = if hello.lat {
        let (meter, lat, mismatched) = ping(&mut side, &hello, &accept.regions, progress, stall)?;
        (meter, Some(lat.summary()), mismatched)
    } else {
        let (meter, mismatched) = stream(&mut side, &hello, &accept.regions, progress, stall)?;
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
    let mine = side.counters();
    let received_here = hello.op == Op::Read || hello.lat;
    let verified = hello.verify_seed.is_some()
        && match (hello.op, hello.lat) {
            // The client checked every byte it read.
            (Op::Read, _) => mismatched == 0,
            // Both directions were checked.
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
        retx_packets: mine.retx_packets + report.retx_packets,
        ood_max: mine.ood_max.max(report.ood_max),
        // The data receiver's: the client's own on READ and latency runs.
        ood_avg: if received_here {
            mine.ood_avg()
        } else {
            report.ood_avg
        },
        ood_p99: if received_here {
            mine.ood_p99
        } else {
            report.ood_p99
        },
        reorder_buffer_drops: if received_here {
            mine.reorder_buffer_drops
        } else {
            report.reorder_buffer_drops
        },
        op: op_name(hello.op),
        transport: hello.transport.name(),
        backend: backend_name(hello.backend),
        paths: S::paths(&hello),
        qps: hello.qps,
        // Data packets (duplicates included) at the data receiver.
        packets: if hello.op == Op::Read {
            mine.data_packets_received
        } else {
            report.packets
        },
        lost_packets: 0,
        client_cpu_s: 0.0,
        server_cpu_s: report.cpu_ns as f64 / 1e9,
        packets_per_cpu_s: 0.0,
        latency,
    })
}

/// Bandwidth run, client side: keeps up to `slots` messages in flight per queue pair
/// until the count or the time is reached. Returns the meter and the bytes that
/// failed the check (READ with `--verify`).
fn stream<S: SlottedSide>(
    side: &mut S,
    h: &Hello,
    regions: &[Region],
    progress: &mut Progress,
    stall: Duration,
) -> anyhow::Result<(Meter, u64)> {
    let nqp = side.nqp() as u64;
    let slots = side.slots() as u64;
    let credit_mode = side.credits(h);
    let mut in_flight = vec![0u64; side.nqp()];
    let mut wcs = [S::Wc::default(); 64];
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
            if h.op != Op::Read {
                side.fill(q, slot, next);
            }
            let imm = (h.op == Op::Write && side.patterned()).then_some(j as u32);
            side.post_op(h.op, q, slot, next, imm, &regions[q])
                .context("post a work request")?;
            in_flight[q] += 1;
            next += 1;
        }
        if total.is_some_and(|n| meter.messages() >= n) {
            break;
        }
        let done = side.poll(&mut wcs)?;
        for wc in done {
            let q = side.qp_index(wc)?;
            if S::is_receive(wc) {
                // A credit: the server checked a slot of this queue pair.
                in_flight[q] = in_flight[q].saturating_sub(1);
                side.post_recv(q, S::wr_id(wc) as usize, false)?;
                continue;
            }
            if !credit_mode {
                in_flight[q] -= 1;
            }
            if h.op == Op::Read {
                let slot = ((S::wr_id(wc) / nqp) % slots) as usize;
                mismatched += side.check(q, slot, slot as u64);
            }
            meter.record(h.size, 1);
        }
        if !done.is_empty() {
            last_progress = Instant::now();
            progress.tick(meter.messages(), total);
        } else {
            ensure!(
                last_progress.elapsed() < stall,
                "no {} completion for {stall:?} with {} messages in flight: is the server still running?",
                S::NAME,
                in_flight.iter().sum::<u64>()
            );
        }
    }
    progress.clear();
    Ok((meter, mismatched))
}

/// Latency run, client side: one message at a time on queue pair 0, echoed back the
/// same way (WRITE_WITH_IMM or SEND), or one READ. A ping's latency ends at its echo
/// (at its completion for a READ).
fn ping<S: SlottedSide>(
    side: &mut S,
    h: &Hello,
    regions: &[Region],
    progress: &mut Progress,
    stall: Duration,
) -> anyhow::Result<(Meter, LatencyRecorder, u64)> {
    let mut lat = LatencyRecorder::new();
    let mut meter = Meter::start();
    let deadline = h
        .duration_s
        .map(|d| Instant::now() + Duration::from_secs_f64(d));
    let mut mismatched = 0;
    let mut i = 0u64;
    let mut wcs = [S::Wc::default(); 4];
    while h.iterations.is_none_or(|n| i < n) && deadline.is_none_or(|d| Instant::now() < d) {
        progress.tick(i, h.iterations);
        if h.op != Op::Read {
            side.fill(0, 0, i);
            side.post_recv(0, 0, h.op == Op::Send)?;
        }
        let t0 = Instant::now();
        let imm = (h.op == Op::Write).then_some(i as u32);
        side.post_op(h.op, 0, 0, i, imm, &regions[0])?;
        // The request's own completion (its ACK) and, unless READ, the echo, which
        // may come before or after it.
        let (mut got_sent, mut echo_at) = (false, None);
        let start = Instant::now();
        while !(got_sent && (h.op == Op::Read || echo_at.is_some())) {
            for wc in side.poll(&mut wcs)? {
                if S::is_receive(wc) {
                    ensure!(echo_at.is_none(), "two echoes for one ping");
                    echo_at = Some(t0.elapsed());
                } else {
                    got_sent = true;
                }
            }
            ensure!(
                start.elapsed() < stall,
                "no answer to {} ping {i} for {stall:?}: is the server still running?",
                S::NAME
            );
        }
        lat.record(echo_at.unwrap_or_else(|| t0.elapsed()));
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

/// The server's queue pairs, connected, with their receives posted; and whether
/// receives are watched (`Some(with_buffer)`).
fn set_up<S: SlottedSide>(mut side: S, h: &Hello) -> anyhow::Result<(S, Option<bool>)> {
    side.connect(&h.endpoints)?;
    ensure!(
        !h.lat || h.op != Op::Write || h.regions.len() == side.nqp(),
        "a latency WRITE run needs the client's buffer of each queue pair: got {} for {}",
        h.regions.len(),
        side.nqp()
    );
    if h.op == Op::Read {
        for q in 0..side.nqp() {
            for slot in 0..side.slots() {
                side.fill(q, slot, slot as u64);
            }
        }
    }
    // Receives: SENDs land in them; verified or echoed WRITEs carry an immediate.
    let recvs = server_polls(h).then_some(h.op == Op::Send);
    if let Some(with_buffer) = recvs {
        for q in 0..side.nqp() {
            for slot in 0..side.slots() {
                side.post_recv(q, slot, with_buffer)?;
            }
        }
    }
    Ok((side, recvs))
}

/// Server side of a run on `side` (`Err`: this side could not be opened; the client
/// is told why, as when its run cannot be set up here).
pub(super) fn server_on<S: SlottedSide>(
    side: anyhow::Result<S>,
    ctrl: &mut Control,
    h: &Hello,
) -> anyhow::Result<Report> {
    let (mut side, recvs) = match side.and_then(|s| set_up(s, h)) {
        Ok(s) => s,
        Err(e) => {
            let _ = ctrl.send(&Message::reject(format!("{e:#}")));
            return Err(e);
        }
    };
    ctrl.send(&Message::Accept(Accept {
        endpoints: side.endpoints(),
        regions: side.regions(),
        udp_paths: Vec::new(),
    }))?;
    ctrl.expect(ctrl.timeouts().message, "start", |m| match m {
        Message::Start => Some(()),
        _ => None,
    })?;
    let nqp = side.nqp() as u64;
    let mut received = vec![0u64; side.nqp()];
    let (mut mismatched, mut done) = (0u64, None::<Done>);
    let mut meter = Meter::start();
    let mut wcs = [S::Wc::default(); 64];
    let mut polls = 0u64;
    let mut stall = StallTimer::new(ctrl.timeouts().stall);
    if recvs.is_none() {
        // Nothing will complete here (WRITE without immediates, READ): the NIC or the
        // backend answers on its own (a progress thread, or the client's polls on the
        // in-process fabric), so wait on the control connection instead of spinning.
        done = Some(wait_done(ctrl, &side, h)?);
    }
    loop {
        // Other completions are those of echoes and credits.
        let completed = side.poll(&mut wcs)?;
        if !completed.is_empty() {
            stall.progressed();
        }
        for wc in completed.iter().filter(|wc| S::is_receive(wc)) {
            let q = side.qp_index(wc)?;
            let c = received[q];
            received[q] += 1;
            let i = c * nqp + q as u64;
            let slot = if h.op == Op::Send {
                S::wr_id(wc) as usize
            } else {
                (c % side.slots() as u64) as usize
            };
            if !S::length_ok(h, wc) {
                mismatched += h.size;
            }
            mismatched += side.check(q, slot, i);
            meter.record(h.size, 1);
            side.post_recv(q, slot, h.op == Op::Send)?;
            side.answer(h, q, slot, i)?;
        }
        polls += 1;
        if done.is_none() && polls % 64 == 0 {
            match ctrl.try_recv()? {
                Some(Message::Done(d)) => {
                    done = Some(d);
                    stall.progressed();
                }
                Some(m) => bail!("expected a done message, got {}", m.kind()),
                None => {}
            }
        }
        if stall.expired() {
            match done {
                Some(d) => bail!(
                    "the client sent {} messages, {} arrived, nothing more for {:?}",
                    d.messages,
                    meter.messages(),
                    stall.limit
                ),
                None => bail!(
                    "no completion and no word from the client for {:?} after {} messages: is it still running?",
                    stall.limit,
                    meter.messages()
                ),
            }
        }
        if let Some(d) = done {
            if recvs.is_none() || meter.messages() >= d.messages {
                let mine = side.counters();
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
                    packets: mine.data_packets_received,
                    active_ns: meter.active().as_nanos() as u64,
                    peak_gbps: meter.peak_gbps(),
                    verified: h.verify_seed.is_some() && checked && mismatched == 0,
                    mismatched_bytes: mismatched,
                    retx_packets: mine.retx_packets,
                    ood_max: mine.ood_max,
                    ood_avg: mine.ood_avg(),
                    ood_p99: mine.ood_p99,
                    reorder_buffer_drops: mine.reorder_buffer_drops,
                    cpu_ns: ctrl.session_cpu_ns(),
                };
                ctrl.send(&Message::Report(report))?;
                if h.op == Op::Read && !h.lat {
                    // The client checked what it read; its report says how that went.
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

/// How often a side that polls nothing looks at its queue pairs' activity.
const LOOK: Duration = Duration::from_millis(100);

/// Fails a run phase in which nothing progressed for `limit`.
pub(super) struct StallTimer {
    /// How long nothing may progress.
    pub(super) limit: Duration,
    last: Instant,
}

impl StallTimer {
    /// A timer whose phase starts now.
    pub(super) fn new(limit: Duration) -> StallTimer {
        StallTimer {
            limit,
            last: Instant::now(),
        }
    }

    /// Something progressed: the phase starts over.
    pub(super) fn progressed(&mut self) {
        self.last = Instant::now();
    }

    /// Whether nothing progressed for the limit.
    pub(super) fn expired(&self) -> bool {
        self.last.elapsed() >= self.limit
    }
}

/// Waits for the client's `Done` while the queue pairs move data: a run whose
/// packets stop for the stall timeout (a client stopped, or gone without closing
/// the connection) fails. Where the NIC moves the data unseen, a timed run may take
/// its length plus the stall timeout.
fn wait_done<S: SlottedSide>(ctrl: &mut Control, side: &S, h: &Hello) -> anyhow::Result<Done> {
    let mut stall = StallTimer::new(ctrl.timeouts().stall);
    let unseen_limit = h
        .duration_s
        .map(|d| Duration::from_secs_f64(d) + stall.limit);
    let start = Instant::now();
    let mut seen = side.activity();
    loop {
        match ctrl.recv(LOOK) {
            Ok(Message::Done(d)) => return Ok(d),
            Ok(m) => bail!("expected a done message, got {}", m.kind()),
            Err(ExchangeError::Timeout(_)) => {}
            Err(e) => return Err(e.into()),
        }
        match side.activity() {
            Some(now) => {
                if Some(now) != seen {
                    seen = Some(now);
                    stall.progressed();
                }
                ensure!(
                    !stall.expired(),
                    "no packet of the run and no done message for {:?}: is the client still running?",
                    stall.limit
                );
            }
            None => ensure!(
                unseen_limit.is_none_or(|l| start.elapsed() < l),
                "no done message {:?} after the start of a {} s run: is the client still running?",
                unseen_limit.unwrap_or_default(),
                h.duration_s.unwrap_or_default()
            ),
        }
    }
}
