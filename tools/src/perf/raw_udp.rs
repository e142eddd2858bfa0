//! `--transport raw-udp` with `--verify` or `--lat`: datagrams that say which message
//! and offset they carry, on one plain socket per path (one datagram per system call),
//! sprayed round robin, with no reliability. The receiver counts what arrives and checks
//! it against the pattern; latency mode echoes whole messages. Plain bandwidth runs use
//! the datapath's raw mode instead (`ceiling.rs`).

use super::exchange::{Control, Done, Message, Report};
use super::pattern::Pattern;
use super::report::{LatencyRecorder, Meter};
use super::slotted::StallTimer;
use super::Progress;
use anyhow::{bail, ensure, Context as _};
use socket2::{Domain, Protocol, Socket, Type};
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

/// Header of a raw datagram, padded to the length of Rondo's data header so that a
/// datagram carries exactly as much payload as a Rondo data packet of the same size.
pub const HEADER_LEN: usize = rondo_proto::wire::DATA_HEADER_LEN;
const MAGIC: [u8; 4] = *b"RAWU";
/// Socket buffer size asked of the kernel (it may grant less).
const SOCKET_BUFFER: usize = 8 << 20;
/// A receiver that was told the run is over waits this long for stragglers.
const DRAIN: Duration = Duration::from_millis(200);
/// A ping that gets no full echo within this time failed (a datagram was lost).
const PING_TIMEOUT: Duration = Duration::from_secs(1);

/// Opens `paths` UDP sockets on `ip`, each on its own ephemeral source port.
pub fn bind(ip: IpAddr, paths: u32) -> io::Result<Vec<UdpSocket>> {
    (0..paths)
        .map(|_| {
            let socket = Socket::new(
                Domain::for_address(SocketAddr::new(ip, 0)),
                Type::DGRAM,
                Some(Protocol::UDP),
            )?;
            // The kernel caps these at net.core.{r,w}mem_max; a smaller buffer only
            // means more drops at the receiver, which the report shows.
            let _ = socket.set_recv_buffer_size(SOCKET_BUFFER);
            let _ = socket.set_send_buffer_size(SOCKET_BUFFER);
            socket.bind(&SocketAddr::new(ip, 0).into())?;
            Ok(socket.into())
        })
        .collect()
}

/// The local address of each socket.
pub fn addresses(sockets: &[UdpSocket]) -> io::Result<Vec<SocketAddr>> {
    sockets.iter().map(UdpSocket::local_addr).collect()
}

/// Connects socket `p` to the peer's socket `p`.
pub fn connect(sockets: &[UdpSocket], peers: &[SocketAddr]) -> anyhow::Result<()> {
    ensure!(
        sockets.len() == peers.len(),
        "the peer has {} UDP paths, this side {}",
        peers.len(),
        sockets.len()
    );
    for (s, p) in sockets.iter().zip(peers) {
        s.connect(p)
            .with_context(|| format!("connect a UDP path to {p}"))?;
    }
    Ok(())
}

/// What one run moves: message size, datagram payload, how many or how long.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    /// Message size, bytes.
    pub size: u64,
    /// Payload bytes per datagram.
    pub payload: usize,
    /// Messages to send, when counted.
    pub count: Option<u64>,
    /// Length of the run, when timed.
    pub duration: Option<Duration>,
    /// Pattern to write, with `--verify`.
    pub pattern: Option<Pattern>,
}

/// Fields of a raw datagram's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Header {
    message: u64,
    offset: u64,
    len: u32,
}

fn emit(h: Header, buf: &mut [u8]) {
    buf[..4].copy_from_slice(&MAGIC);
    buf[4..12].copy_from_slice(&h.message.to_le_bytes());
    buf[12..20].copy_from_slice(&h.offset.to_le_bytes());
    buf[20..24].copy_from_slice(&h.len.to_le_bytes());
}

/// Parses a datagram; `None` for anything that is not a well-formed raw datagram.
fn parse(datagram: &[u8]) -> Option<Header> {
    if datagram.len() < HEADER_LEN || datagram[..4] != MAGIC {
        return None;
    }
    let u64_at = |i: usize| u64::from_le_bytes(datagram[i..i + 8].try_into().expect("8 bytes"));
    let len = u32::from_le_bytes(datagram[20..24].try_into().expect("4 bytes"));
    (HEADER_LEN + len as usize == datagram.len()).then(|| Header {
        message: u64_at(4),
        offset: u64_at(12),
        len,
    })
}

/// Cuts messages into datagrams and sends them round robin over the paths.
struct Sprayer<'a> {
    sockets: &'a [UdpSocket],
    next: usize,
    buf: Vec<u8>,
    packets: u64,
}

impl<'a> Sprayer<'a> {
    fn new(sockets: &'a [UdpSocket], payload: usize) -> Sprayer<'a> {
        Sprayer {
            sockets,
            next: 0,
            buf: vec![0; HEADER_LEN + payload],
            packets: 0,
        }
    }

    /// Sends message `message` of the plan, cut into datagrams.
    fn message(&mut self, plan: &Plan, message: u64) -> io::Result<()> {
        let mut offset = 0;
        while offset < plan.size {
            let len = (plan.size - offset).min(plan.payload as u64) as usize;
            emit(
                Header {
                    message,
                    offset,
                    len: len as u32,
                },
                &mut self.buf,
            );
            let datagram = &mut self.buf[..HEADER_LEN + len];
            if let Some(p) = plan.pattern {
                p.fill(message, offset, &mut datagram[HEADER_LEN..]);
            }
            loop {
                match self.sockets[self.next].send(datagram) {
                    Ok(_) => break,
                    // A full socket buffer: try again (the ceiling is what the host
                    // can push, not what it refuses).
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                        ) => {}
                    Err(e) if e.raw_os_error() == Some(105) => {} // ENOBUFS
                    Err(e) => return Err(e),
                }
            }
            self.next = (self.next + 1) % self.sockets.len();
            self.packets += 1;
            offset += len as u64;
        }
        Ok(())
    }
}

/// Fails when the peer closed the control connection (or sent something during the
/// run): a sender whose receiver is gone stops.
pub fn peer_gone(ctrl: &mut Control) -> anyhow::Result<()> {
    match ctrl.try_recv()? {
        None => Ok(()),
        Some(m) => bail!("unexpected {} message during the run", m.kind()),
    }
}

/// The data sender of a bandwidth run: sends the plan's messages, then `Done`
/// (stopping early when the peer's control connection closes).
pub fn blast(
    sockets: &[UdpSocket],
    ctrl: &mut Control,
    plan: &Plan,
    progress: &mut Progress,
) -> anyhow::Result<Done> {
    let mut spray = Sprayer::new(sockets, plan.payload);
    let start = Instant::now();
    let mut messages = 0;
    loop {
        if plan.count.is_some_and(|n| messages >= n) {
            break;
        }
        if messages % 64 == 0 {
            if plan.duration.is_some_and(|d| start.elapsed() >= d) {
                break;
            }
            progress.tick(messages, plan.count);
            peer_gone(ctrl)?;
        }
        spray
            .message(plan, messages)
            .context("send a raw UDP datagram")?;
        messages += 1;
    }
    progress.clear();
    let done = Done {
        messages,
        packets: spray.packets,
        cpu_ns: ctrl.session_cpu_ns(),
    };
    ctrl.send(&Message::Done(done))?;
    Ok(done)
}

/// Receives datagrams from all paths until the sender's `Done` arrives on the control
/// connection and the datagrams it announced are in (or none came for a while).
pub fn sink(
    sockets: &[UdpSocket],
    ctrl: &mut Control,
    plan: &Plan,
) -> anyhow::Result<(Report, Done)> {
    for s in sockets {
        s.set_nonblocking(true)?;
    }
    let mut buf = vec![0u8; 65536];
    let mut meter = Meter::start();
    let mut partial: HashMap<u64, u64> = HashMap::new();
    let (mut packets, mut mismatched, mut foreign) = (0u64, 0u64, 0u64);
    let mut done: Option<Done> = None;
    let mut last_arrival = Instant::now();
    let mut rounds = 0u64;
    let stall = ctrl.timeouts().stall;
    loop {
        let mut idle = true;
        for s in sockets {
            for _ in 0..64 {
                let n = match s.recv(&mut buf) {
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    // A port-unreachable from an earlier run: not ours to count.
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => continue,
                    Err(e) => return Err(e).context("receive a raw UDP datagram"),
                };
                idle = false;
                let Some(h) = parse(&buf[..n]) else {
                    foreign += 1;
                    continue;
                };
                packets += 1;
                if let Some(p) = plan.pattern {
                    if p.check(h.message, h.offset, &buf[HEADER_LEN..n]).is_err() {
                        mismatched += u64::from(h.len);
                    }
                }
                let got = partial.entry(h.message).or_insert(0);
                *got += u64::from(h.len);
                let whole = *got >= plan.size;
                if whole {
                    partial.remove(&h.message);
                }
                meter.record(u64::from(h.len), u64::from(whole));
            }
        }
        if !idle {
            last_arrival = Instant::now();
        }
        rounds += 1;
        if done.is_none() && (idle || rounds % 256 == 0) {
            match ctrl.try_recv()? {
                Some(Message::Done(d)) => done = Some(d),
                Some(m) => bail!("expected a done message, got {}", m.kind()),
                None => {}
            }
        }
        ensure!(
            done.is_some() || last_arrival.elapsed() < stall,
            "no datagram and no done message for {stall:?} after {packets} datagrams: is the sender still running?"
        );
        if let Some(d) = done {
            if packets >= d.packets || last_arrival.elapsed() >= DRAIN {
                let expected = d.messages.saturating_mul(plan.size);
                let missing = expected.saturating_sub(meter.bytes());
                if foreign > 0 {
                    eprintln!("raw-udp: {foreign} foreign datagram(s) ignored");
                }
                let report = Report {
                    messages: meter.messages(),
                    bytes: meter.bytes(),
                    packets,
                    active_ns: meter.active().as_nanos() as u64,
                    peak_gbps: meter.peak_gbps(),
                    verified: plan.pattern.is_some() && mismatched == 0 && missing == 0,
                    mismatched_bytes: mismatched + missing,
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

/// Puts arriving datagrams back together into messages (checking them with
/// `--verify`).
struct Assembler {
    buf: Vec<u8>,
    partial: HashMap<u64, u64>,
    mismatched: u64,
}

impl Assembler {
    fn new() -> Assembler {
        Assembler {
            buf: vec![0; 65536],
            partial: HashMap::new(),
            mismatched: 0,
        }
    }

    /// Polls every socket once; returns a message that became whole.
    fn poll(&mut self, sockets: &[UdpSocket], plan: &Plan) -> anyhow::Result<Option<u64>> {
        for s in sockets {
            let n = match s.recv(&mut self.buf) {
                Ok(n) => n,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::Interrupted
                            | io::ErrorKind::ConnectionRefused
                    ) =>
                {
                    continue
                }
                Err(e) => return Err(e).context("receive a raw UDP datagram"),
            };
            let Some(h) = parse(&self.buf[..n]) else {
                continue;
            };
            if let Some(p) = plan.pattern {
                if p.check(h.message, h.offset, &self.buf[HEADER_LEN..n])
                    .is_err()
                {
                    self.mismatched += u64::from(h.len);
                }
            }
            let got = self.partial.entry(h.message).or_insert(0);
            *got += u64::from(h.len);
            if *got >= plan.size {
                self.partial.remove(&h.message);
                return Ok(Some(h.message));
            }
        }
        Ok(None)
    }
}

/// Latency mode, client side: sends message `i`, waits for its echo, `count` times
/// (or for the plan's duration). Returns the round trips and whether every echo matched.
pub fn ping(
    sockets: &[UdpSocket],
    ctrl: &mut Control,
    plan: &Plan,
    progress: &mut Progress,
) -> anyhow::Result<(LatencyRecorder, Meter, bool)> {
    for s in sockets {
        s.set_nonblocking(true)?;
    }
    let mut spray = Sprayer::new(sockets, plan.payload);
    let mut rx = Assembler::new();
    let mut lat = LatencyRecorder::new();
    let mut meter = Meter::start();
    let start = Instant::now();
    let mut i = 0u64;
    while plan.count.is_none_or(|n| i < n) && plan.duration.is_none_or(|d| start.elapsed() < d) {
        progress.tick(i, plan.count);
        let t0 = Instant::now();
        spray.message(plan, i)?;
        loop {
            if rx.poll(sockets, plan)? == Some(i) {
                break;
            }
            ensure!(
                t0.elapsed() < PING_TIMEOUT,
                "no full echo of message {i} within {PING_TIMEOUT:?}: raw UDP has no reliability and a datagram was lost; use a smaller -s or --transport rondo"
            );
        }
        lat.record(t0.elapsed());
        meter.record(plan.size, 1);
        i += 1;
    }
    progress.clear();
    ctrl.send(&Message::Done(Done {
        messages: i,
        packets: spray.packets,
        cpu_ns: ctrl.session_cpu_ns(),
    }))?;
    Ok((lat, meter, plan.pattern.is_some() && rx.mismatched == 0))
}

/// Latency mode, server side: echoes every whole message until the client's `Done`.
pub fn echo(sockets: &[UdpSocket], ctrl: &mut Control, plan: &Plan) -> anyhow::Result<Report> {
    for s in sockets {
        s.set_nonblocking(true)?;
    }
    let mut spray = Sprayer::new(sockets, plan.payload);
    let mut rx = Assembler::new();
    let mut meter = Meter::start();
    let mut rounds = 0u64;
    let mut stall = StallTimer::new(ctrl.timeouts().stall);
    loop {
        if let Some(m) = rx.poll(sockets, plan)? {
            spray.message(plan, m)?;
            meter.record(plan.size, 1);
            stall.progressed();
        }
        rounds += 1;
        ensure!(
            !stall.expired(),
            "no ping and no done message for {:?} after {} messages: is the client still running?",
            stall.limit,
            meter.messages()
        );
        if rounds % 1024 == 0 {
            match ctrl.try_recv()? {
                Some(Message::Done(d)) => {
                    return Ok(Report {
                        messages: meter.messages(),
                        bytes: meter.bytes(),
                        packets: spray.packets,
                        active_ns: meter.active().as_nanos() as u64,
                        peak_gbps: meter.peak_gbps(),
                        verified: plan.pattern.is_some()
                            && rx.mismatched == 0
                            && meter.messages() == d.messages,
                        mismatched_bytes: rx.mismatched,
                        retx_packets: 0,
                        ood_max: 0,
                        ood_avg: 0.0,
                        ood_p99: 0,
                        reorder_buffer_drops: 0,
                        cpu_ns: ctrl.session_cpu_ns(),
                    })
                }
                Some(m) => bail!("expected a done message, got {}", m.kind()),
                None => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip_and_foreign_datagrams_are_refused() {
        let mut d = vec![0u8; HEADER_LEN + 10];
        let h = Header {
            message: 7,
            offset: 1452,
            len: 10,
        };
        emit(h, &mut d);
        assert_eq!(parse(&d), Some(h));
        assert_eq!(parse(&d[..HEADER_LEN + 9]), None, "length disagrees");
        assert_eq!(parse(&d[..3]), None, "truncated");
        d[0] = b'X';
        assert_eq!(parse(&d), None, "magic");
    }
}
