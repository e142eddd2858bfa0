//! `rondo perf client`: connects to the server, runs one measurement, prints it.

use super::device;
use super::exchange::{Accept, Backend, Control, Done, Hello, Message, Op, Report, Transport};
use super::pattern::Pattern;
use super::report::{self, gbps, Outcome};
use super::{ceiling, raw_udp, rc};
use super::{check, check_net, rondo, ClientArgs, Progress};
use anyhow::Context as _;
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// How long the client waits for the server's answers during setup.
pub const SETUP_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs the client.
pub fn run(args: &ClientArgs) -> anyhow::Result<()> {
    device::check_combination(args.device.backend, Some(args.transport), &args.device)?;
    let mut hello = args.hello();
    check(&hello)?;
    check_net(&hello, args.net)?;
    // The RDMA device before the server: a host without one says so at once.
    let rdma = match hello.backend {
        Backend::Verbs => Some(device::resolve(&args.device)?),
        Backend::Udp => None,
    };
    let addr = (args.host.as_str(), args.port)
        .to_socket_addrs()
        .with_context(|| format!("resolve {}", args.host))?
        .next()
        .with_context(|| format!("{} has no address", args.host))?;
    if hello.backend == Backend::Udp && args.mtu.is_none() {
        if let Some(fit) = datagram_to_fit(hello.mtu, addr.ip()) {
            eprintln!(
                "note: the route to {} has an MTU of {} bytes: datagrams of {fit} bytes \
                 instead of {}, so that the kernel does not fragment them (--mtu sets them)",
                addr.ip(),
                fit + rondo_ud::udp::ip_udp_header_len(addr.ip()) as u32,
                hello.mtu
            );
            hello.mtu = fit;
            check(&hello)?;
        }
    }
    let stream = TcpStream::connect_timeout(&addr, SETUP_TIMEOUT)
        .with_context(|| format!("connect to {addr}: is `rondo perf server` running there?"))?;
    let mut ctrl = Control::new(stream)?;
    let mut progress = Progress::new(!args.json);
    let mut outcome = match hello.transport {
        Transport::RawUdp => raw(&mut ctrl, hello, &mut progress)?,
        Transport::Engine(_) => {
            rondo::client(&mut ctrl, hello, &mut progress, rdma.as_ref(), args.net)?
        }
        Transport::Rc => rc::client(&mut ctrl, hello, &mut progress, rdma.as_ref())?,
    };
    outcome.client_cpu_s = ctrl.session_cpu_ns() as f64 / 1e9;
    let cpu_s = outcome.client_cpu_s + outcome.server_cpu_s;
    if outcome.client_cpu_s > 0.0 && outcome.server_cpu_s > 0.0 {
        outcome.packets_per_cpu_s = outcome.packets as f64 / cpu_s;
    }
    if args.json {
        println!("{}", report::to_json(&outcome));
    } else {
        print!("{}", report::to_table(&outcome));
    }
    Ok(())
}

/// The datagram size below `mtu` that the route to `peer` carries unfragmented,
/// where `mtu` does not fit (the default datagram is sized for loopback and
/// jumbo frames; a 1500-byte network would fragment each one in three).
fn datagram_to_fit(mtu: u32, peer: std::net::IpAddr) -> Option<u32> {
    let route = rondo_ud::udp::route_mtu(peer).ok()?;
    let fit = route.checked_sub(rondo_ud::udp::ip_udp_header_len(peer))?;
    (fit < mtu as usize).then_some(fit as u32)
}

/// The fields of an outcome that every raw run fills the same way; `sent` and
/// `received` are the data sender's and the data receiver's accounts, one of them the
/// server's.
pub fn outcome(hello: &Hello, sent: Done, received: &Report) -> Outcome {
    let server_cpu_ns = match hello.op {
        Op::Read if !hello.lat => sent.cpu_ns,
        _ => received.cpu_ns,
    };
    let active = Duration::from_nanos(received.active_ns);
    let bw_average = gbps(received.bytes, active);
    let messages = received.bytes as f64 / hello.size as f64;
    Outcome {
        size: hello.size,
        n_iterations: sent.messages,
        bw_peak: received.peak_gbps.max(bw_average),
        bw_average,
        msg_rate: if active.is_zero() {
            0.0
        } else {
            messages / active.as_secs_f64() / 1e6
        },
        verified: received.verified,
        retx_packets: received.retx_packets,
        ood_max: received.ood_max,
        ood_avg: received.ood_avg,
        ood_p99: received.ood_p99,
        reorder_buffer_drops: received.reorder_buffer_drops,
        op: op_name(hello.op),
        transport: hello.transport.name(),
        backend: backend_name(hello.backend),
        paths: hello.paths,
        qps: hello.qps,
        packets: received.packets,
        lost_packets: sent.packets.saturating_sub(received.packets),
        client_cpu_s: 0.0,
        server_cpu_s: server_cpu_ns as f64 / 1e9,
        packets_per_cpu_s: 0.0,
        latency: None,
    }
}

/// The name the CLI and the JSON use for an operation.
pub fn op_name(op: Op) -> &'static str {
    match op {
        Op::Send => "send",
        Op::Write => "write",
        Op::Read => "read",
    }
}

/// The name the CLI and the JSON use for a backend.
pub fn backend_name(b: Backend) -> &'static str {
    match b {
        Backend::Udp => "udp",
        Backend::Verbs => "verbs",
    }
}

/// The plan of a raw UDP run.
pub fn raw_plan(h: &Hello) -> raw_udp::Plan {
    raw_udp::Plan {
        size: h.size,
        payload: h.mtu as usize - raw_udp::HEADER_LEN,
        count: h.iterations,
        duration: h.duration_s.map(Duration::from_secs_f64),
        pattern: h.verify_seed.map(Pattern::new),
    }
}

fn raw(ctrl: &mut Control, mut hello: Hello, progress: &mut Progress) -> anyhow::Result<Outcome> {
    let ip = ctrl.local()?.ip();
    if ceiling::applies(&hello) {
        let mut dp = ceiling::bind(ip, &hello)?;
        hello.udp_paths = dp.local_addrs().to_vec();
        ctrl.send(&Message::Hello(hello.clone()))?;
        let accept = wait_accept(ctrl)?;
        ctrl.send(&Message::Start)?;
        return match hello.op {
            Op::Write | Op::Send => {
                let done = ceiling::blast(&mut dp, &accept.udp_paths, ctrl, &hello, progress)?;
                let report = wait_report(ctrl)?;
                Ok(outcome(&hello, done, &report))
            }
            Op::Read => {
                let (report, done) = ceiling::receive(&mut dp, ctrl, &hello)?;
                ctrl.send(&Message::Report(report))?;
                Ok(outcome(&hello, done, &report))
            }
        };
    }
    let sockets = raw_udp::bind(ip, hello.paths).context("open the UDP paths")?;
    hello.udp_paths = raw_udp::addresses(&sockets)?;
    ctrl.send(&Message::Hello(hello.clone()))?;
    let accept = wait_accept(ctrl)?;
    raw_udp::connect(&sockets, &accept.udp_paths)?;
    ctrl.send(&Message::Start)?;
    let plan = raw_plan(&hello);
    if hello.lat {
        let (lat, meter, verified) = raw_udp::ping(&sockets, ctrl, &plan, progress)?;
        let report = wait_report(ctrl)?;
        let mut o = outcome(
            &hello,
            Done {
                messages: meter.messages(),
                ..Done::default()
            },
            &Report {
                bytes: meter.bytes(),
                cpu_ns: report.cpu_ns,
                active_ns: meter.elapsed().as_nanos() as u64,
                verified: verified && report.verified,
                ..Report::default()
            },
        );
        o.latency = Some(lat.summary());
        return Ok(o);
    }
    match hello.op {
        Op::Write | Op::Send => {
            let done = raw_udp::blast(&sockets, ctrl, &plan, progress)?;
            let report = wait_report(ctrl)?;
            Ok(outcome(&hello, done, &report))
        }
        Op::Read => {
            let (report, done) = raw_udp::sink(&sockets, ctrl, &plan)?;
            ctrl.send(&Message::Report(report))?;
            Ok(outcome(&hello, done, &report))
        }
    }
}

/// Waits for the server to accept the run.
pub fn wait_accept(ctrl: &mut Control) -> anyhow::Result<Accept> {
    ctrl.expect(ctrl.timeouts().message, "accept", |m| match m {
        Message::Accept(a) => Some(a),
        _ => None,
    })
    .context("wait for the server to accept the run")
}

/// Waits for the data receiver's report (the connection's report timeout).
pub fn wait_report(ctrl: &mut Control) -> anyhow::Result<Report> {
    Ok(ctrl.expect(ctrl.timeouts().report, "report", |m| match m {
        Message::Report(r) => Some(r),
        _ => None,
    })?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_datagram_shrinks_only_where_the_route_cannot_carry_it() {
        let lo = "127.0.0.1".parse().unwrap();
        assert_eq!(datagram_to_fit(super::super::DEFAULT_MTU, lo), None);
        // Loopback carries IPv4 packets of up to 65,535 bytes.
        assert_eq!(datagram_to_fit(70_000, lo), Some(65_535 - 28));
    }
}
