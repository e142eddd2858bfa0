//! `rondo perf server`: serves clients one after another; a client that fails (or is
//! not a `rondo perf` client at all) is logged and the server goes on.

use super::client::{op_name, raw_plan, wait_report, SETUP_TIMEOUT};
use super::device::{self, RdmaDevice};
use super::exchange::{
    Accept, Backend, Control, ExchangeError, Hello, Message, Op, Report, Transport,
};
use super::report::gbps;
use super::{ceiling, check, check_net, raw_udp, rc, rondo, NetArgs, ServerArgs};
use anyhow::Context as _;
use std::net::TcpListener;
use std::time::Duration;

/// Runs the server until stopped, or until it has served `--clients` clients.
pub fn run(args: &ServerArgs) -> anyhow::Result<()> {
    device::check_combination(args.device.backend, None, &args.device)?;
    // A server meant for an RDMA device that has none stops here, not at the first client.
    let rdma = match args.device.backend {
        Backend::Verbs => Some(device::resolve(&args.device)?),
        Backend::Udp => None,
    };
    let listener = TcpListener::bind((args.bind, args.port)).with_context(|| {
        format!(
            "listen on {}:{} (is another server running there? try --port)",
            args.bind, args.port
        )
    })?;
    eprintln!("rondo perf server listening on {}", listener.local_addr()?);
    if let Some(d) = &rdma {
        eprintln!(
            "RDMA device {} port {} GID index {}: serving --backend verbs and --transport rc too",
            d.name, d.port, d.gid_index
        );
    }
    let mut served = 0u64;
    while args.clients.is_none_or(|n| served < n) {
        let (stream, peer) = match listener.accept() {
            Ok(s) => s,
            Err(e) => {
                // Out of file descriptors and the like: do not spin on it.
                eprintln!("accept failed: {e}");
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        served += 1;
        match Control::new(stream)
            .map_err(anyhow::Error::from)
            .and_then(|mut c| serve(&mut c, rdma.as_ref(), args.net, args.auth))
        {
            Ok(line) => eprintln!("client {peer}: {line}"),
            Err(e) => eprintln!("client {peer}: error: {e:#}"),
        }
    }
    Ok(())
}

/// Refuses a client whose `--auth` is not the server's.
fn check_auth(h: &Hello, server: rondo_proto::auth::AuthMode) -> anyhow::Result<()> {
    let asked: rondo_proto::auth::AuthMode = h.auth.parse().map_err(anyhow::Error::msg)?;
    if h.transport != Transport::RawUdp && asked != server {
        anyhow::bail!(
            "authentication mismatch: the client asks for --auth {}, this server runs --auth {}; give both the same",
            asked.name(),
            server.name()
        );
    }
    Ok(())
}

/// Serves one client; returns the line to log.
fn serve(
    ctrl: &mut Control,
    rdma: Option<&RdmaDevice>,
    net: NetArgs,
    auth: rondo_proto::auth::AuthMode,
) -> anyhow::Result<String> {
    let hello = match ctrl.expect(SETUP_TIMEOUT, "hello", |m| match m {
        Message::Hello(h) => Some(h),
        _ => None,
    }) {
        Ok(h) => h,
        Err(e) => {
            // Tell a `rondo perf` peer why; anything else just gets the connection closed.
            if matches!(
                e,
                ExchangeError::Version { .. }
                    | ExchangeError::Malformed(_)
                    | ExchangeError::Unexpected { .. }
            ) {
                let _ = ctrl.send(&Message::Reject {
                    reason: e.to_string(),
                });
            }
            return Err(e.into());
        }
    };
    let checked = check(&hello)
        .and_then(|()| check_net(&hello, net))
        .and_then(|()| check_auth(&hello, auth))
        .and_then(|()| match (hello.backend, rdma) {
        (Backend::Verbs, None) => Err(anyhow::anyhow!(
            "this server has no RDMA device: start it with `rondo perf server --backend verbs --device NAME --gid-index N`"
        )),
        _ => Ok(()),
    });
    if let Err(e) = checked {
        let _ = ctrl.send(&Message::Reject {
            reason: format!("{e:#}"),
        });
        return Err(e);
    }
    let report = match hello.transport {
        Transport::RawUdp => raw(ctrl, &hello)?,
        Transport::Engine(_) => rondo::server(ctrl, &hello, rdma, net)?,
        Transport::Rc => rc::server(ctrl, &hello, rdma)?,
    };
    Ok(describe(&hello, &report))
}

/// One line about a served run.
fn describe(h: &Hello, r: &Report) -> String {
    // A WRITE target sees no completions, and a ping-pong is timed by its round
    // trips: only the client's numbers count there.
    let rate = match r.active_ns {
        _ if h.lat => String::new(),
        0 => String::new(),
        ns => format!(", {:.2} Gb/s", gbps(r.bytes, Duration::from_nanos(ns))),
    };
    format!(
        "{} {} B x {}, {}, {} path(s) x {} QP(s){}: {} messages{}{}{}",
        op_name(h.op),
        h.size,
        h.iterations.map_or_else(
            || format!("{} s", h.duration_s.unwrap_or(0.0)),
            |n| n.to_string()
        ),
        h.transport.name(),
        h.paths,
        h.qps,
        if h.lat { ", latency" } else { "" },
        r.messages,
        rate,
        match (h.verify_seed.is_some(), r.verified) {
            (false, _) => "",
            (true, true) => ", verified",
            (true, false) => ", VERIFY FAILED",
        },
        if r.retx_packets > 0 || r.ood_max > 0 {
            format!(", retx {} packets, OOD max {}", r.retx_packets, r.ood_max)
        } else {
            String::new()
        }
    )
}

fn raw(ctrl: &mut Control, hello: &Hello) -> anyhow::Result<Report> {
    let ip = ctrl.local()?.ip();
    if ceiling::applies(hello) {
        let mut dp = ceiling::bind(ip, hello)?;
        ctrl.send(&Message::Accept(Accept {
            endpoints: Vec::new(),
            regions: Vec::new(),
            udp_paths: dp.local_addrs().to_vec(),
        }))?;
        ctrl.expect(SETUP_TIMEOUT, "start", |m| match m {
            Message::Start => Some(()),
            _ => None,
        })?;
        return match hello.op {
            Op::Write | Op::Send => {
                let (report, _) = ceiling::receive(&mut dp, ctrl, hello)?;
                ctrl.send(&Message::Report(report))?;
                Ok(report)
            }
            Op::Read => {
                let mut progress = super::Progress::new(false);
                ceiling::blast(&mut dp, &hello.udp_paths, ctrl, hello, &mut progress)?;
                wait_report(ctrl)
            }
        };
    }
    let sockets = raw_udp::bind(ip, hello.paths).context("open the UDP paths")?;
    raw_udp::connect(&sockets, &hello.udp_paths)?;
    ctrl.send(&Message::Accept(Accept {
        endpoints: Vec::new(),
        regions: Vec::new(),
        udp_paths: raw_udp::addresses(&sockets)?,
    }))?;
    ctrl.expect(SETUP_TIMEOUT, "start", |m| match m {
        Message::Start => Some(()),
        _ => None,
    })?;
    let plan = raw_plan(hello);
    let report = if hello.lat {
        raw_udp::echo(&sockets, ctrl, &plan)?
    } else {
        match hello.op {
            Op::Write | Op::Send => raw_udp::sink(&sockets, ctrl, &plan)?.0,
            Op::Read => {
                let mut progress = super::Progress::new(false);
                raw_udp::blast(&sockets, ctrl, &plan, &mut progress)?;
                return wait_report(ctrl);
            }
        }
    };
    ctrl.send(&Message::Report(report))?;
    Ok(report)
}
