//! `--transport raw-udp` bandwidth runs (without `--verify` or `--lat`) on Rondo's own
//! UDP datapath in raw mode (`rondo_ud::udp`): the same sockets, batching
//! (`sendmmsg`/`recvmmsg`, GSO/GRO) and datagram size as a Rondo queue pair, with no
//! reliability. This is the ceiling Rondo's goodput is measured against.
//!
//! The receiver counts datagrams in bursts (`raw_receive` returns after 1 ms without
//! an arrival), so the run's start and end are known to 1 ms and the peak is the
//! average. Goodput counts message bytes: each message takes as many full-size datagrams
//! as it would Rondo data packets (payload = MTU less a Rondo data header).

use super::exchange::{Control, Done, Hello, Message, Report};
use super::raw_udp::HEADER_LEN;
use super::report::gbps;
use super::Progress;
use anyhow::{bail, ensure, Context as _};
use rondo_ud::udp::{UdpConfig, UdpDatapath};
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

/// Idle time that ends one `raw_receive` burst.
const BURST_IDLE: Duration = Duration::from_millis(1);
/// A receiver told the run is over waits this long for stragglers.
const DRAIN: Duration = Duration::from_millis(200);
/// Datagrams per `raw_blast` call (between checks of the clock).
const CHUNK: u64 = 4096;

/// Whether a raw UDP run goes through the datapath's raw mode (plain bandwidth runs)
/// or through per-datagram sockets (`--verify`, `--lat`: they look inside datagrams).
pub fn applies(h: &Hello) -> bool {
    !h.lat && h.verify_seed.is_none()
}

/// Binds the datapath's sockets on `ip`, one per path, on ephemeral ports.
pub fn bind(ip: IpAddr, h: &Hello) -> anyhow::Result<UdpDatapath> {
    let base = UdpConfig::default();
    UdpDatapath::bind(UdpConfig {
        local_ip: ip,
        base_port: 0,
        paths: h.paths as u16,
        max_datagram: base.max_datagram.max(h.mtu as usize),
        ..base
    })
    .context("open the UDP datapath")
}

/// Datagrams one message takes.
fn datagrams_per_message(h: &Hello) -> u64 {
    h.size.div_ceil(u64::from(h.mtu) - HEADER_LEN as u64)
}

/// The data sender: full-size datagrams, round robin over the paths, as fast as the
/// sockets take them, then `Done`.
pub fn blast(
    dp: &mut UdpDatapath,
    peer: &[SocketAddr],
    ctrl: &mut Control,
    h: &Hello,
    progress: &mut Progress,
) -> anyhow::Result<Done> {
    let per_message = datagrams_per_message(h);
    let chunk = (CHUNK / per_message).max(1);
    let deadline = h
        .duration_s
        .map(|d| Instant::now() + Duration::from_secs_f64(d));
    let (mut messages, mut packets) = (0u64, 0u64);
    loop {
        let n = match h.iterations {
            Some(total) => chunk.min(total - messages),
            None if deadline.is_some_and(|d| Instant::now() >= d) => 0,
            None => chunk,
        };
        if n == 0 {
            break;
        }
        packets += dp
            .raw_blast(peer, h.mtu as usize, n * per_message)
            .context("blast raw datagrams")?;
        messages += n;
        progress.tick(messages, h.iterations);
        super::raw_udp::peer_gone(ctrl)?;
    }
    progress.clear();
    let done = Done {
        messages,
        packets,
        cpu_ns: ctrl.session_cpu_ns(),
    };
    ctrl.send(&Message::Done(done))?;
    Ok(done)
}

/// The data receiver: counts arrivals until the sender's `Done` and its datagrams are
/// in (or nothing more comes for a while).
pub fn receive(
    dp: &mut UdpDatapath,
    ctrl: &mut Control,
    h: &Hello,
) -> anyhow::Result<(Report, Done)> {
    let mut datagrams = 0u64;
    let mut first: Option<Instant> = None;
    let mut last = Instant::now();
    // Last arrival, or the moment `Done` came, whichever is later.
    let mut quiet_since = Instant::now();
    let mut done: Option<Done> = None;
    let stall = ctrl.timeouts().stall;
    loop {
        let call = Instant::now();
        let c = dp
            .raw_receive(BURST_IDLE)
            .context("receive raw datagrams")?;
        if c.datagrams > 0 {
            first.get_or_insert(call);
            last = Instant::now() - BURST_IDLE;
            quiet_since = last;
            datagrams += c.datagrams;
        }
        if done.is_none() {
            match ctrl.try_recv()? {
                Some(Message::Done(d)) => {
                    done = Some(d);
                    quiet_since = quiet_since.max(Instant::now());
                }
                Some(m) => bail!("expected a done message, got {}", m.kind()),
                None => {}
            }
        }
        ensure!(
            done.is_some() || quiet_since.elapsed() < stall,
            "no datagram and no done message for {stall:?} after {datagrams} datagrams: is the sender still running?"
        );
        if let Some(d) = done {
            if datagrams >= d.packets || quiet_since.elapsed() >= DRAIN {
                // Message bytes: a message's last datagram is full here, not in Rondo.
                let per_message = datagrams_per_message(h);
                let payload =
                    (u128::from(datagrams) * u128::from(h.size) / u128::from(per_message)) as u64;
                let active = first.map_or(Duration::ZERO, |f| last.saturating_duration_since(f));
                let report = Report {
                    messages: datagrams / per_message,
                    bytes: payload,
                    packets: datagrams,
                    active_ns: active.as_nanos() as u64,
                    peak_gbps: gbps(payload, active),
                    verified: false,
                    mismatched_bytes: 0,
                    retx_packets: 0,
                    ood_max: 0,
                    ood_avg: 0.0,
                    ood_p99: 0,
                    reorder_buffer_drops: 0,
                    cpu_ns: ctrl.session_cpu_ns(),
                };
                return Ok((report, d));
            }
        }
    }
}
