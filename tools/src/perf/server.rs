//! `rondo perf server`: serves clients, each on its own thread; at most
//! `--max-clients` runs go at once, and a client past that waits for one to end for a
//! bounded time. A client that fails (or is not a `rondo perf` client at all, or
//! stops answering) is logged and dropped; the server goes on.
//!
//! Every wait on a client is bounded: a control message must arrive whole within
//! `--control-timeout`, and a run phase in which nothing progresses for
//! `--stall-timeout` fails. A hello whose buffers would take more than
//! `--max-bytes-per-client` is refused with a typed [`Refusal`] before anything is
//! allocated.

use super::client::{op_name, raw_plan, wait_report};
use super::device::{self, RdmaDevice};
use super::exchange::{
    Accept, Backend, Control, ExchangeError, Hello, Message, Op, Refusal, Report, Timeouts,
    Transport,
};
use super::limits::{self, RunSlots, MAX_WAITING};
use super::report::gbps;
use super::{ceiling, check, check_net, raw_udp, rc, rondo, NetArgs, ServerArgs};
use anyhow::Context as _;
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What every client's thread shares.
struct Shared {
    rdma: Option<RdmaDevice>,
    net: NetArgs,
    auth: rondo_proto::auth::AuthMode,
    timeouts: Timeouts,
    max_bytes: u64,
    slots: Arc<RunSlots>,
    /// Connections open now (runs and waiting clients).
    open: AtomicUsize,
    max_open: usize,
}

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
    // Fixed UDP ports fit one run at a time.
    let max_clients = if args.net.udp_port != 0 {
        1
    } else {
        args.max_clients
    };
    let shared = Arc::new(Shared {
        rdma,
        net: args.net,
        auth: args.auth,
        timeouts: Timeouts {
            message: args.control_timeout,
            report: args.control_timeout,
            stall: args.stall_timeout,
        },
        max_bytes: args.max_bytes_per_client,
        slots: RunSlots::new(max_clients),
        open: AtomicUsize::new(0),
        max_open: max_clients as usize + MAX_WAITING,
    });
    let mut clients = Vec::new();
    let mut accepted = 0u64;
    while args.clients.is_none_or(|n| accepted < n) {
        let (stream, peer) = match listener.accept() {
            Ok(s) => s,
            Err(e) => {
                // Out of file descriptors and the like: do not spin on it.
                eprintln!("accept failed: {e}");
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        accepted += 1;
        clients.retain(|c: &std::thread::JoinHandle<()>| !c.is_finished());
        if shared.open.load(Ordering::Acquire) >= shared.max_open {
            eprintln!(
                "client {peer}: error: {} connections open already; closed",
                shared.max_open
            );
            continue;
        }
        shared.open.fetch_add(1, Ordering::AcqRel);
        let shared = Arc::clone(&shared);
        let spawned = std::thread::Builder::new()
            .name(format!("client {peer}"))
            .spawn(move || {
                let line = serve_connection(stream, &shared);
                shared.open.fetch_sub(1, Ordering::AcqRel);
                match line {
                    Ok(line) => eprintln!("client {peer}: {line}"),
                    Err(e) => eprintln!("client {peer}: error: {e:#}"),
                }
            });
        match spawned {
            Ok(handle) => clients.push(handle),
            Err(e) => eprintln!("client {peer}: error: no thread for it: {e}"),
        }
    }
    for c in clients {
        let _ = c.join();
    }
    Ok(())
}

/// Serves one connection from its hello to its report; returns the line to log.
fn serve_connection(stream: TcpStream, shared: &Shared) -> anyhow::Result<String> {
    let mut ctrl = Control::with_timeouts(stream, shared.timeouts)?;
    let hello = read_hello(&mut ctrl, shared)?;
    // The run's slot is held until it ends, the error paths included.
    let _slot = match shared.slots.take(shared.timeouts.message) {
        Ok(slot) => slot,
        Err(refusal) => return Err(refuse(&mut ctrl, refusal)),
    };
    serve(&mut ctrl, &hello, shared.rdma.as_ref(), shared.net)
}

/// Tells the client which limit it ran into; the error to log.
fn refuse(ctrl: &mut Control, refusal: Refusal) -> anyhow::Error {
    let _ = ctrl.send(&Message::refuse(refusal.clone()));
    ExchangeError::Refused(refusal).into()
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

/// Reads the client's hello and checks it against what this server serves and its
/// limits; a client that cannot be served is told why.
fn read_hello(ctrl: &mut Control, shared: &Shared) -> anyhow::Result<Hello> {
    let hello = match ctrl.expect(shared.timeouts.message, "hello", |m| match m {
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
                let _ = ctrl.send(&Message::reject(e.to_string()));
            }
            return Err(e.into());
        }
    };
    let checked = check(&hello)
        .and_then(|()| check_net(&hello, shared.net))
        .and_then(|()| check_auth(&hello, shared.auth))
        .and_then(|()| match (hello.backend, &shared.rdma) {
            (Backend::Verbs, None) => Err(anyhow::anyhow!(
                "this server has no RDMA device: start it with `rondo perf server --backend verbs --device NAME --gid-index N`"
            )),
            _ => Ok(()),
        });
    if let Err(e) = checked {
        let _ = ctrl.send(&Message::reject(format!("{e:#}")));
        return Err(e);
    }
    if let Err(refusal) = limits::check_memory(&hello, shared.max_bytes) {
        return Err(refuse(ctrl, refusal));
    }
    Ok(hello)
}

/// Serves one checked run; returns the line to log.
fn serve(
    ctrl: &mut Control,
    hello: &Hello,
    rdma: Option<&RdmaDevice>,
    net: NetArgs,
) -> anyhow::Result<String> {
    let report = match hello.transport {
        Transport::RawUdp => raw(ctrl, hello)?,
        Transport::Engine(_) => rondo::server(ctrl, hello, rdma, net)?,
        Transport::Rc => rc::server(ctrl, hello, rdma)?,
    };
    Ok(describe(hello, &report))
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
        ctrl.expect(ctrl.timeouts().message, "start", |m| match m {
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
    ctrl.expect(ctrl.timeouts().message, "start", |m| match m {
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
