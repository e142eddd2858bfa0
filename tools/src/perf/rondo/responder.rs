//! The server's side of a Rondo run: it answers, counts and checks what arrives, and
//! echoes pings.

use super::{Side, STALL};
use crate::perf::client::{wait_report, SETUP_TIMEOUT};
use crate::perf::exchange::{Accept, Control, Done, ExchangeError, Hello, Message, Op, Report};
use crate::perf::report::Meter;
use anyhow::{bail, ensure};
use rondo_verbs::{Context, RemoteAddr, SendWr, WcOpcode, WorkCompletion};
use std::time::{Duration, Instant};

/// The server's queue pairs, connected to the client's, with their receives posted;
/// and whether receives are watched (`Some(with_buffer)`).
fn set_up(ctx: &Context, h: &Hello) -> anyhow::Result<(Side, Option<bool>)> {
    let side = Side::new(ctx, h)?;
    side.connect(&h.endpoints)?;
    ensure!(
        !h.lat || h.op != Op::Write || h.regions.len() == side.qps.len(),
        "a latency WRITE run needs the client's buffer of each queue pair: got {} for {}",
        h.regions.len(),
        side.qps.len()
    );
    if h.op == Op::Read {
        for q in 0..side.qps.len() {
            for slot in 0..side.slots {
                side.fill(q, slot, slot as u64);
            }
        }
    }
    // Receives: SENDs land in them; verified or echoed WRITEs carry an immediate.
    let recvs = super::server_polls(h).then_some(h.op == Op::Send);
    if let Some(with_buffer) = recvs {
        for q in 0..side.qps.len() {
            for slot in 0..side.slots {
                side.post_recv(q, slot, with_buffer)?;
            }
        }
    }
    Ok((side, recvs))
}

/// The server's part of a run on an opened context.
pub(super) fn server_on(ctx: &Context, ctrl: &mut Control, h: &Hello) -> anyhow::Result<Report> {
    let (side, recvs) = match set_up(ctx, h) {
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
    let nqp = side.qps.len() as u64;
    let mut received = vec![0u64; side.qps.len()];
    let (mut mismatched, mut done) = (0u64, None::<Done>);
    let mut meter = Meter::start();
    let meter_start = Instant::now();
    let mut wcs = [WorkCompletion::default(); 64];
    let mut polls = 0u64;
    if recvs.is_none() {
        // Nothing will complete here (WRITE without immediates, READ): the backend
        // answers on its own (the UDP progress thread, or the client's polls on the
        // in-process fabric), so wait on the control connection instead of spinning.
        done = Some(wait_done(ctrl)?);
    }
    loop {
        for wc in side.poll(&mut wcs)? {
            if !matches!(wc.opcode, WcOpcode::Recv | WcOpcode::RecvRdmaWithImm) {
                continue; // completions of echoes
            }
            let q = side.qp_index(wc)?;
            let c = received[q];
            received[q] += 1;
            let i = c * nqp + q as u64;
            let slot = if h.op == Op::Send {
                wc.wr_id as usize
            } else {
                (c % side.slots as u64) as usize
            };
            if wc.byte_len != h.size {
                mismatched += h.size;
            }
            mismatched += side.check(q, slot, i);
            meter.record(h.size, 1);
            if h.lat {
                let sge = vec![side.sge(q, slot)];
                let echo = if h.op == Op::Write {
                    let remote = RemoteAddr {
                        addr: h.regions[q].addr,
                        rkey: h.regions[q].rkey,
                    };
                    SendWr::write(i, sge, remote).with_imm(i as u32)
                } else {
                    SendWr::send(i, sge)
                };
                side.qps[q].post_send(&echo.unsignaled())?;
            }
            side.post_recv(q, slot, h.op == Op::Send)?;
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
                let mine = side.transport_stats();
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
