//! The server's side of an RC run: it answers, counts and checks what arrives,
//! returns credits for verified WRITEs, and echoes pings.

use super::nic::{Completion, RcNic, SendOp};
use super::run::{credits, Side};
use crate::perf::client::{wait_report, SETUP_TIMEOUT};
use crate::perf::exchange::{Accept, Control, Done, ExchangeError, Hello, Message, Op, Report};
use crate::perf::report::Meter;
use crate::perf::rondo::STALL;
use anyhow::{bail, ensure};
use std::time::{Duration, Instant};

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
