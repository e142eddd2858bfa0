//! The control connection between `rondo perf client` and `rondo perf server`: a TCP
//! stream of framed messages, as perftest exchanges its QP descriptors.
//!
//! A frame is the magic `RPRF`, the protocol version (u16, big endian), the body length
//! (u32, big endian) and a JSON body: one [`Message`]. Anything else (another program on
//! the port, a different version, an oversized or malformed body) is a typed
//! [`ExchangeError`], never a panic; the server logs it and serves the next client.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// First bytes of every frame.
pub const MAGIC: [u8; 4] = *b"RPRF";
/// Version of the exchange this build speaks.
pub const VERSION: u16 = 2;
/// Largest accepted body.
pub const MAX_BODY: u32 = 1 << 20;
/// Bytes before the body: magic, version, length.
const HEADER_LEN: usize = 10;

/// The operation measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// SEND into receives posted by the server.
    Send,
    /// RDMA WRITE into the server's buffer.
    Write,
    /// RDMA READ from the server's buffer.
    Read,
}

/// What carries the data: `--transport NAME`, written as that name in the hello.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// Rondo queue pairs over the UDP backend (reliable, in order), running one of
    /// the engine's transports (`rondo`, `rrps`, ...: `rondo_proto::Transport`).
    Engine(rondo_proto::Transport),
    /// The same number of UDP sockets and the same datagram size, no reliability:
    /// the ceiling Rondo is measured against.
    RawUdp,
    /// Plain RC queue pairs on the RDMA device (`--backend verbs`): the transport
    /// Rondo replaces, measured by the same tool.
    Rc,
}

impl Transport {
    /// Rondo's own engine transport.
    pub const RONDO: Transport = Transport::Engine(rondo_proto::Transport::RONDO);

    /// The name the CLI and the JSON use.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Engine(t) => t.name(),
            Transport::RawUdp => "raw-udp",
            Transport::Rc => "rc",
        }
    }
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for Transport {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Transport {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

impl std::str::FromStr for Transport {
    type Err = String;

    fn from_str(s: &str) -> Result<Transport, String> {
        match s {
            "raw-udp" => Ok(Transport::RawUdp),
            "rc" => Ok(Transport::Rc),
            _ => rondo_proto::Transport::from_name(s)
                .map(Transport::Engine)
                .map_err(|e| format!("{e}, raw-udp, rc")),
        }
    }
}

/// What carries Rondo's datagrams.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    /// Kernel UDP sockets, one per path.
    #[default]
    Udp,
    /// UD queue pairs on an RDMA NIC (cargo feature `verbs`).
    Verbs,
}

/// Everything the server needs to know about a run (client to server, first).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    /// Operation.
    pub op: Op,
    /// Message size in bytes.
    pub size: u64,
    /// Number of messages, when the run is counted (`-n`).
    pub iterations: Option<u64>,
    /// Length of the run in seconds, when it is timed (`-D`).
    pub duration_s: Option<f64>,
    /// Paths per queue pair (UDP source ports).
    pub paths: u32,
    /// Queue pairs.
    pub qps: u32,
    /// Transport.
    pub transport: Transport,
    /// Datapath of Rondo queue pairs (absent: UDP, as before the field existed).
    #[serde(default)]
    pub backend: Backend,
    /// Full datagram size in bytes, headers included.
    pub mtu: u32,
    /// Messages in flight per queue pair.
    pub tx_depth: u32,
    /// Seed of the verification pattern, when `--verify` is on.
    pub verify_seed: Option<u64>,
    /// Latency (ping-pong) mode.
    pub lat: bool,
    /// Rondo: spin on empty completion queues instead of waiting on them.
    pub busy_poll: bool,
    /// Rondo on UDP: progress threads on both sides instead of explicit progress
    /// from the polling thread (see `--progress-thread`).
    #[serde(default)]
    pub progress_thread: bool,
    /// Rondo: host line rate given to the engine, Gb/s (0: the backend's default).
    pub line_gbps: f64,
    /// Rondo: bytes of each context's reorder buffer (0: the default).
    pub reorder_buffer: u64,
    /// Rondo fault injection at both ends: probability that an arriving datagram is
    /// dropped.
    pub loss: f64,
    /// Rondo fault injection at both ends: probability that an arriving datagram is
    /// held back behind the next one.
    pub reorder: f64,
    /// Rondo: the client's endpoint descriptor of each queue pair.
    pub endpoints: Vec<Vec<u8>>,
    /// Rondo latency mode: the client's buffer of each queue pair (echoes land there).
    pub regions: Vec<Region>,
    /// Raw UDP: the client's socket address of each path.
    pub udp_paths: Vec<SocketAddr>,
    /// Rondo: engine settings of both sides' queue pairs (`--engine KEY=VALUE`).
    #[serde(default)]
    pub engine: Vec<String>,
    /// Rondo: datagram authentication of both sides' queue pairs (`--auth`:
    /// `auth`, `encrypt` or `none`; absent: `auth`).
    #[serde(default = "default_auth")]
    pub auth: String,
}

/// A buffer the peer may WRITE into or READ from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Region {
    /// Address of its first byte, as the peer names it.
    pub addr: u64,
    /// Remote key.
    pub rkey: u32,
    /// Length in bytes.
    pub len: u64,
}

/// The server's answer to a [`Hello`] it can serve.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Accept {
    /// Rondo: the server's endpoint descriptor of each queue pair.
    pub endpoints: Vec<Vec<u8>>,
    /// Rondo: the server's buffer of each queue pair.
    pub regions: Vec<Region>,
    /// Raw UDP: the server's socket address of each path.
    pub udp_paths: Vec<SocketAddr>,
}

/// The sender's account of what it sent (the data sender to the data receiver).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Done {
    /// Messages sent.
    pub messages: u64,
    /// Datagrams sent (raw UDP).
    pub packets: u64,
    /// CPU time of the sending process since the control connection opened, ns (0:
    /// unknown).
    pub cpu_ns: u64,
}

/// The data receiver's account of the run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Whole messages received (and checked, when verifying).
    pub messages: u64,
    /// Payload bytes received.
    pub bytes: u64,
    /// Datagrams received (raw UDP), or data packets received (Rondo, duplicates included).
    pub packets: u64,
    /// Nanoseconds from the first to the last arrival.
    pub active_ns: u64,
    /// Peak goodput seen by the receiver, Gb/s (0 when the receiver does not meter).
    pub peak_gbps: f64,
    /// True when verification was on and every byte of every message matched.
    pub verified: bool,
    /// Bytes that failed the check: from the first wrong byte to the end of each bad
    /// message (or datagram, for raw UDP, where bytes that never arrived count too).
    pub mismatched_bytes: u64,
    /// Retransmitted packets, summed over the receiver's queue pairs.
    pub retx_packets: u64,
    /// Largest OOD of any queue pair at the receiver.
    pub ood_max: u64,
    /// Average OOD at the receiver over its data packets (all queue pairs).
    #[serde(default)]
    pub ood_avg: f64,
    /// Largest 99th percentile of OOD of any queue pair at the receiver.
    #[serde(default)]
    pub ood_p99: u64,
    /// Data packets the receiver dropped because its reorder buffer was full.
    #[serde(default)]
    pub reorder_buffer_drops: u64,
    /// CPU time of the reporting process since the control connection opened, ns (0:
    /// unknown).
    pub cpu_ns: u64,
}

/// One control message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Message {
    /// Client: the run it asks for.
    Hello(Hello),
    /// Server: the run is set up on its side.
    Accept(Accept),
    /// Server: the run cannot be served, and why.
    Reject {
        /// What to change.
        reason: String,
        /// The server's limit the run ran into, when that is why (absent: another
        /// reason, or a server from before the field existed).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        refusal: Option<Refusal>,
    },
    /// Client: both sides are connected, start.
    Start,
    /// Data sender: everything is sent.
    Done(Done),
    /// Data receiver: what arrived.
    Report(Report),
}

/// A run the server could read but will not serve: one of its limits
/// (`rondo perf server --max-bytes-per-client`, `--max-clients`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "limit", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Refusal {
    /// The run's buffers on the server would take more memory than one client may.
    #[error("the run needs {needed} bytes of memory on the server, over its --max-bytes-per-client {cap}; ask for less (-s, --tx-depth, --qps, --reorder-buffer) or start the server with a larger cap")]
    Memory {
        /// Bytes the run's server side would allocate.
        needed: u64,
        /// The server's cap per client.
        cap: u64,
    },
    /// Every run slot stayed taken for as long as the server lets a client wait.
    #[error("the server is running {running} other client(s), its --max-clients, and none finished within {waited_ms} ms; try again later")]
    Busy {
        /// Runs in progress.
        running: u32,
        /// How long this client waited for one of them to end, ms.
        waited_ms: u64,
    },
}

impl Message {
    /// A `Reject` for `reason` (no server limit involved).
    pub fn reject(reason: impl Into<String>) -> Message {
        Message::Reject {
            reason: reason.into(),
            refusal: None,
        }
    }

    /// A `Reject` because of one of the server's limits.
    pub fn refuse(refusal: Refusal) -> Message {
        Message::Reject {
            reason: refusal.to_string(),
            refusal: Some(refusal),
        }
    }

    /// The message's name, for errors.
    pub fn kind(&self) -> &'static str {
        match self {
            Message::Hello(_) => "hello",
            Message::Accept(_) => "accept",
            Message::Reject { .. } => "reject",
            Message::Start => "start",
            Message::Done(_) => "done",
            Message::Report(_) => "report",
        }
    }
}

/// What went wrong on the control connection.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExchangeError {
    /// The peer closed the connection.
    #[error("the peer closed the control connection")]
    Closed,
    /// Reading or writing the socket failed.
    #[error("control connection: {0}")]
    Io(#[from] io::Error),
    /// Nothing arrived in time.
    #[error("no control message within {0:?}; is the peer still running?")]
    Timeout(Duration),
    /// The peer is not `rondo perf`.
    #[error(
        "the peer is not a `rondo perf` endpoint (first bytes {0:02x?}); check the host and --port"
    )]
    BadMagic([u8; 4]),
    /// The peer speaks another version of the exchange.
    #[error("the peer speaks perf exchange version {peer}, this build speaks {VERSION}; run the same rondo version on both sides")]
    Version {
        /// The peer's version.
        peer: u16,
    },
    /// The body is larger than [`MAX_BODY`].
    #[error("control message of {0} bytes is over the {MAX_BODY}-byte limit")]
    TooLarge(u32),
    /// The body is not a valid [`Message`].
    #[error("malformed control message: {0}")]
    Malformed(#[source] serde_json::Error),
    /// A valid message arrived at the wrong moment.
    #[error("expected a {expected} message, got {got}")]
    Unexpected {
        /// What the protocol expects now.
        expected: &'static str,
        /// What arrived.
        got: &'static str,
    },
    /// The server refused the run.
    #[error("the server rejected the run: {0}")]
    Rejected(String),
    /// The run is over one of the server's limits.
    #[error("the server refused the run: {0}")]
    Refused(Refusal),
}

/// How long one end of the control connection waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// For one whole message to arrive (or to be written), from when the wait began:
    /// a peer that trickles bytes is cut off at this deadline too.
    pub message: Duration,
    /// For the data receiver's report after a run.
    pub report: Duration,
    /// A run phase in which nothing progresses (no completion, no packet, no control
    /// message) for this long has failed.
    pub stall: Duration,
}

impl Default for Timeouts {
    /// The client's: 10 s per message, 60 s for the report, 10 s of stall.
    fn default() -> Timeouts {
        Timeouts {
            message: Duration::from_secs(10),
            report: Duration::from_secs(60),
            stall: Duration::from_secs(10),
        }
    }
}

fn default_auth() -> String {
    "auth".into()
}

/// Encodes one frame.
pub fn encode(message: &Message) -> Vec<u8> {
    let body = serde_json::to_vec(message).expect("control messages always serialise");
    let mut frame = Vec::with_capacity(HEADER_LEN + body.len());
    frame.extend_from_slice(&MAGIC);
    frame.extend_from_slice(&VERSION.to_be_bytes());
    frame.extend_from_slice(&(body.len() as u32).to_be_bytes());
    frame.extend_from_slice(&body);
    frame
}

/// Decodes the first frame of `buf`: `Ok(None)` when it is not complete yet, else the
/// message and the bytes it took. Header errors show as soon as the header is in.
pub fn decode(buf: &[u8]) -> Result<Option<(Message, usize)>, ExchangeError> {
    let magic_len = buf.len().min(4);
    if buf[..magic_len] != MAGIC[..magic_len] {
        let mut seen = [0u8; 4];
        seen[..magic_len].copy_from_slice(&buf[..magic_len]);
        return Err(ExchangeError::BadMagic(seen));
    }
    if buf.len() < HEADER_LEN {
        return Ok(None);
    }
    let version = u16::from_be_bytes([buf[4], buf[5]]);
    if version != VERSION {
        return Err(ExchangeError::Version { peer: version });
    }
    let len = u32::from_be_bytes([buf[6], buf[7], buf[8], buf[9]]);
    if len > MAX_BODY {
        return Err(ExchangeError::TooLarge(len));
    }
    let end = HEADER_LEN + len as usize;
    if buf.len() < end {
        return Ok(None);
    }
    let message =
        serde_json::from_slice(&buf[HEADER_LEN..end]).map_err(ExchangeError::Malformed)?;
    Ok(Some((message, end)))
}

/// One end of the control connection.
pub struct Control {
    stream: TcpStream,
    inbound: Vec<u8>,
    cpu_at_open: Option<std::time::Duration>,
    timeouts: Timeouts,
}

impl Control {
    /// Wraps a connected stream, with the default [`Timeouts`].
    pub fn new(stream: TcpStream) -> Result<Control, ExchangeError> {
        Control::with_timeouts(stream, Timeouts::default())
    }

    /// Wraps a connected stream that waits as `timeouts` say.
    pub fn with_timeouts(stream: TcpStream, timeouts: Timeouts) -> Result<Control, ExchangeError> {
        stream.set_nodelay(true)?;
        // A peer that stops reading cannot hold a writer either.
        stream.set_write_timeout(Some(timeouts.message))?;
        Ok(Control {
            stream,
            inbound: Vec::new(),
            cpu_at_open: super::report::process_cpu(),
            timeouts,
        })
    }

    /// How long this end waits.
    pub fn timeouts(&self) -> Timeouts {
        self.timeouts
    }

    /// CPU time this process has used since the connection opened, ns (0: unknown).
    pub fn session_cpu_ns(&self) -> u64 {
        match (self.cpu_at_open, super::report::process_cpu()) {
            (Some(a), Some(b)) => b.saturating_sub(a).as_nanos() as u64,
            _ => 0,
        }
    }

    /// The local address of the connection (the interface that reaches the peer).
    pub fn local(&self) -> Result<SocketAddr, ExchangeError> {
        Ok(self.stream.local_addr()?)
    }

    /// Sends one message (within the message timeout: a peer that does not read
    /// gets [`ExchangeError::Timeout`]).
    pub fn send(&mut self, message: &Message) -> Result<(), ExchangeError> {
        self.stream.set_nonblocking(false)?;
        match self.stream.write_all(&encode(message)) {
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                Err(ExchangeError::Timeout(self.timeouts.message))
            }
            r => Ok(r?),
        }
    }

    fn take(&mut self) -> Result<Option<Message>, ExchangeError> {
        if self.inbound.is_empty() {
            return Ok(None);
        }
        match decode(&self.inbound)? {
            Some((message, used)) => {
                self.inbound.drain(..used);
                Ok(Some(message))
            }
            None => Ok(None),
        }
    }

    /// Waits up to `timeout` for the next message to arrive whole: the deadline
    /// holds however the bytes trickle in.
    pub fn recv(&mut self, timeout: Duration) -> Result<Message, ExchangeError> {
        if let Some(m) = self.take()? {
            return Ok(m);
        }
        let deadline = Instant::now() + timeout;
        self.stream.set_nonblocking(false)?;
        let mut chunk = [0u8; 4096];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(ExchangeError::Timeout(timeout));
            }
            self.stream.set_read_timeout(Some(left))?;
            match self.stream.read(&mut chunk) {
                Ok(0) => return Err(ExchangeError::Closed),
                Ok(n) => self.inbound.extend_from_slice(&chunk[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Err(ExchangeError::Timeout(timeout))
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
            if let Some(m) = self.take()? {
                return Ok(m);
            }
        }
    }

    /// The next message if one has fully arrived, without waiting.
    pub fn try_recv(&mut self) -> Result<Option<Message>, ExchangeError> {
        if let Some(m) = self.take()? {
            return Ok(Some(m));
        }
        self.stream.set_nonblocking(true)?;
        let mut chunk = [0u8; 4096];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => return Err(ExchangeError::Closed),
                Ok(n) => self.inbound.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
        self.take()
    }

    /// Waits for a message of one kind (`pick` returns `None` for the others); a
    /// `Reject` becomes [`ExchangeError::Rejected`].
    pub fn expect<T>(
        &mut self,
        timeout: Duration,
        expected: &'static str,
        pick: impl FnOnce(Message) -> Option<T>,
    ) -> Result<T, ExchangeError> {
        let m = self.recv(timeout)?;
        let got = m.kind();
        match m {
            Message::Reject {
                refusal: Some(r), ..
            } => Err(ExchangeError::Refused(r)),
            Message::Reject { reason, .. } => Err(ExchangeError::Rejected(reason)),
            m => pick(m).ok_or(ExchangeError::Unexpected { expected, got }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello() -> Hello {
        Hello {
            op: Op::Write,
            size: 65536,
            iterations: Some(1000),
            duration_s: None,
            paths: 4,
            qps: 1,
            transport: Transport::RawUdp,
            backend: Backend::Udp,
            mtu: 1500,
            tx_depth: 64,
            verify_seed: Some(9),
            lat: false,
            busy_poll: false,
            progress_thread: false,
            line_gbps: 0.0,
            reorder_buffer: 0,
            loss: 0.0,
            reorder: 0.0,
            endpoints: vec![vec![1, 2, 3]],
            regions: Vec::new(),
            udp_paths: vec!["127.0.0.1:4000".parse().unwrap()],
            engine: vec!["scheduler=false".into()],
            auth: "encrypt".into(),
        }
    }

    #[test]
    fn frames_round_trip_byte_by_byte() {
        let m = Message::Hello(hello());
        let frame = encode(&m);
        for cut in 0..frame.len() {
            assert!(decode(&frame[..cut]).unwrap().is_none(), "cut at {cut}");
        }
        let mut two = frame.clone();
        two.extend_from_slice(&encode(&Message::Start));
        let (first, used) = decode(&two).unwrap().unwrap();
        assert_eq!(first, m);
        assert_eq!(used, frame.len());
        assert_eq!(decode(&two[used..]).unwrap().unwrap().0, Message::Start);
    }

    #[test]
    fn foreign_input_is_a_typed_error() {
        assert!(matches!(
            decode(b"GET / HTTP/1.1\r\n"),
            Err(ExchangeError::BadMagic(m)) if &m == b"GET "
        ));
        assert!(matches!(decode(b"RPX"), Err(ExchangeError::BadMagic(_))));
        let mut frame = encode(&Message::Start);
        frame[5] = 9;
        assert!(matches!(
            decode(&frame),
            Err(ExchangeError::Version { peer: 9 })
        ));
        let mut big = MAGIC.to_vec();
        big.extend_from_slice(&VERSION.to_be_bytes());
        big.extend_from_slice(&(MAX_BODY + 1).to_be_bytes());
        assert!(matches!(decode(&big), Err(ExchangeError::TooLarge(_))));
        let mut junk = MAGIC.to_vec();
        junk.extend_from_slice(&VERSION.to_be_bytes());
        junk.extend_from_slice(&5u32.to_be_bytes());
        junk.extend_from_slice(b"{\"ty");
        junk.push(b'}');
        assert!(matches!(decode(&junk), Err(ExchangeError::Malformed(_))));
    }
}
