//! The client's side of a Rondo run: it posts every request (bandwidth or ping-pong).

use super::{Side, STALL};
use crate::perf::client::{backend_name, op_name, transport_name, wait_accept, wait_report};
use crate::perf::exchange::{Control, Done, Hello, Message, Op, Region, Report};
use crate::perf::report::{gbps, LatencyRecorder, Meter, Outcome};
use crate::perf::Progress;
use anyhow::{ensure, Context as _};
use rondo_verbs::{Context, RemoteAddr, SendWr, WcOpcode, WorkCompletion};
use std::time::{Duration, Instant};

/// The client's part of a run on an opened context.
pub(super) fn client_on(
    ctx: &Context,
    ctrl: &mut Control,
    mut hello: Hello,
    progress: &mut Progress,
) -> anyhow::Result<Outcome> {
    let side = Side::new(ctx, &hello)?;
    hello.endpoints = side.endpoints();
    hello.regions = side.regions();
    ctrl.send(&Message::Hello(hello.clone()))?;
    let accept = wait_accept(ctrl)?;
    side.connect(&accept.endpoints)?;
    ensure!(
        accept.regions.len() == side.qps.len(),
        "the server sent {} buffers for {} queue pairs",
        accept.regions.len(),
        side.qps.len()
    );
    ctrl.send(&Message::Start)?;
    let (meter, latency, mismatched) = if hello.lat {
        let (meter, lat, mismatched) = ping(&side, &hello, &accept.regions, progress)?;
        (meter, Some(lat.summary()), mismatched)
    } else {
        let (meter, mismatched) = stream(&side, &hello, &accept.regions, progress)?;
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
    let mine = side.transport_stats();
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
        op: op_name(hello.op),
        transport: transport_name(hello.transport),
        backend: backend_name(hello.backend),
        paths: hello.paths,
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
fn stream(
    side: &Side,
    h: &Hello,
    regions: &[Region],
    progress: &mut Progress,
) -> anyhow::Result<(Meter, u64)> {
    let nqp = side.qps.len() as u64;
    let slots = side.slots as u64;
    let mut in_flight = vec![0u64; side.qps.len()];
    let mut wcs = [WorkCompletion::default(); 64];
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
            let remote = RemoteAddr {
                addr: regions[q].addr + (slot * side.size) as u64,
                rkey: regions[q].rkey,
            };
            let sge = vec![side.sge(q, slot)];
            let wr = match h.op {
                Op::Write => {
                    side.fill(q, slot, next);
                    let wr = SendWr::write(next, sge, remote);
                    if side.pattern.is_some() {
                        wr.with_imm(j as u32)
                    } else {
                        wr
                    }
                }
                Op::Send => {
                    side.fill(q, slot, next);
                    SendWr::send(next, sge)
                }
                Op::Read => SendWr::read(next, sge, remote),
            };
            side.qps[q].post_send(&wr).context("post a work request")?;
            in_flight[q] += 1;
            next += 1;
        }
        if total.is_some_and(|n| meter.messages() >= n) {
            break;
        }
        let done = side.poll(&mut wcs)?;
        for wc in done {
            let q = side.qp_index(wc)?;
            in_flight[q] -= 1;
            if h.op == Op::Read {
                let slot = ((wc.wr_id / nqp) % slots) as usize;
                mismatched += side.check(q, slot, slot as u64);
            }
            meter.record(h.size, 1);
        }
        if !done.is_empty() {
            last_progress = Instant::now();
            progress.tick(meter.messages(), total);
        } else {
            ensure!(
                last_progress.elapsed() < STALL,
                "no completion for {STALL:?} with {} messages in flight: is the server still running?",
                in_flight.iter().sum::<u64>()
            );
        }
    }
    progress.clear();
    Ok((meter, mismatched))
}

/// Waits for one completion of `opcode` on the CQ, skipping the others.
fn wait_for(side: &Side, opcode: WcOpcode) -> anyhow::Result<WorkCompletion> {
    let mut wcs = [WorkCompletion::default(); 1];
    let start = Instant::now();
    loop {
        if let Some(wc) = side.poll(&mut wcs)?.first() {
            if wc.opcode == opcode {
                return Ok(*wc);
            }
        }
        ensure!(
            start.elapsed() < STALL,
            "no {opcode:?} completion for {STALL:?}: is the peer still running?"
        );
    }
}

/// Latency run, client side: one message at a time on queue pair 0.
fn ping(
    side: &Side,
    h: &Hello,
    regions: &[Region],
    progress: &mut Progress,
) -> anyhow::Result<(Meter, LatencyRecorder, u64)> {
    let mut lat = LatencyRecorder::new();
    let mut meter = Meter::start();
    let deadline = h
        .duration_s
        .map(|d| Instant::now() + Duration::from_secs_f64(d));
    let remote = RemoteAddr {
        addr: regions[0].addr,
        rkey: regions[0].rkey,
    };
    let mut mismatched = 0;
    let mut i = 0u64;
    while h.iterations.is_none_or(|n| i < n) && deadline.is_none_or(|d| Instant::now() < d) {
        progress.tick(i, h.iterations);
        if h.op != Op::Read {
            side.fill(0, 0, i);
        }
        let t0 = Instant::now();
        let sge = vec![side.sge(0, 0)];
        match h.op {
            Op::Read => {
                side.qps[0].post_send(&SendWr::read(i, sge, remote))?;
                wait_for(side, WcOpcode::RdmaRead)?;
                lat.record(t0.elapsed());
                mismatched += side.check(0, 0, 0);
            }
            Op::Write | Op::Send => {
                side.post_recv(0, 0, h.op == Op::Send)?;
                let (wr, sent, echo) = if h.op == Op::Write {
                    (
                        SendWr::write(i, sge, remote).with_imm(i as u32),
                        WcOpcode::RdmaWrite,
                        WcOpcode::RecvRdmaWithImm,
                    )
                } else {
                    (SendWr::send(i, sge), WcOpcode::Send, WcOpcode::Recv)
                };
                side.qps[0].post_send(&wr)?;
                // The echo can only follow the request's completion at the peer; the
                // request's own completion (its ACK) may come before or after it.
                let mut got_sent = false;
                let mut got_echo = false;
                let mut wcs = [WorkCompletion::default(); 4];
                let start = Instant::now();
                while !(got_sent && got_echo) {
                    for wc in side.poll(&mut wcs)? {
                        if wc.opcode == sent {
                            got_sent = true;
                        } else if wc.opcode == echo {
                            ensure!(!got_echo, "two echoes for one ping");
                            got_echo = true;
                            lat.record(t0.elapsed());
                        }
                    }
                    ensure!(
                        start.elapsed() < STALL,
                        "no echo of ping {i} for {STALL:?}: is the server still running?"
                    );
                }
                mismatched += side.check(0, 0, i);
            }
        }
        meter.record(h.size, 1);
        i += 1;
    }
    progress.clear();
    Ok((meter, lat, mismatched))
}
