//! `rondo perf`: a perftest-like bandwidth and latency tool over Rondo queue pairs.
//!
//! `rondo perf server` waits on a TCP port; `rondo perf client HOST` connects, tells
//! the server the run it wants (operation, size, iterations, paths, transport, verify
//! seed) and exchanges the endpoint descriptors over that connection, as perftest
//! does. The data then moves over UDP: Rondo queue pairs (`--transport rondo`), or
//! plain datagrams on as many sockets with no reliability (`--transport raw-udp`, the
//! ceiling). With `--backend verbs` (cargo feature `verbs`) Rondo queue pairs run over
//! UD queue pairs on an RDMA NIC instead, and `--transport rc` runs the same workload
//! over plain RC queue pairs on the same device. The data receiver sends its account
//! back (bytes, verification, retransmits, OOD) and the client prints one row of
//! perftest's table or one JSON object.

mod ceiling;
mod client;
mod device;
mod engine;
mod exchange;
mod limits;
mod pattern;
mod raw_udp;
mod rc;
mod report;
mod rondo;
mod server;
mod slotted;
#[cfg(test)]
mod slotted_checks;

use anyhow::ensure;
use device::DeviceArgs;
use exchange::{Backend, Hello, Op, Transport};
use std::io::{IsTerminal, Write as _};
use std::time::{Duration, Instant};

/// Default TCP port of the control exchange (perftest's).
pub const DEFAULT_PORT: u16 = 18515;
/// Largest message size accepted.
pub const MAX_SIZE: u64 = 1 << 30;
/// Most paths or queue pairs per run.
pub const MAX_PATHS: u32 = 64;
/// Largest UDP payload.
const MAX_DATAGRAM: u32 = 65_507;
/// Default datagram size: a Rondo data packet that carries 4096 bytes of application
/// data after the verbs header, as a RoCE packet at MTU 4096 carries 4096 bytes
/// after its BTH and RETH (engine header, connection token and verbs header
/// included), so that a 4 KiB message is one packet; raw UDP runs send datagrams of
/// the same size.
pub const DEFAULT_MTU: u32 = 4096
    + rondo_proto::wire::DATA_HEADER_LEN as u32
    + rondo_proto::wire::TOKEN_EXT_LEN as u32
    + rondo_verbs::header::HEADER_LEN as u32;
/// Default datagram size on an RDMA device: RoCE's largest MTU (the port's active MTU
/// when that is smaller); Rondo's headers are inside it.
pub const DEFAULT_RDMA_MTU: u32 = 4096;

/// Options of `rondo perf`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    role: Role,
}

#[derive(Debug, clap::Subcommand)]
enum Role {
    /// Serve clients until stopped (Ctrl-C), up to `--max-clients` at once; one line
    /// per client on stderr.
    Server(ServerArgs),
    /// Run one measurement against a server and print it.
    Client(ClientArgs),
}

/// Options of `rondo perf server`.
#[derive(Debug, clap::Args)]
pub struct ServerArgs {
    /// TCP port of the control exchange (0: any free port, printed on stderr).
    #[arg(short, long, default_value_t = DEFAULT_PORT)]
    port: u16,
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0")]
    bind: std::net::IpAddr,
    /// Stop after serving this many clients (default: serve until stopped).
    #[arg(long, value_name = "N")]
    clients: Option<u64>,
    #[command(flatten)]
    device: DeviceArgs,
    #[command(flatten)]
    net: NetArgs,
    /// Datagram authentication this server runs (`auth`, `encrypt`, `none`): a
    /// client asking for another is refused at the exchange.
    #[arg(long, default_value = "auth", value_name = "MODE")]
    auth: rondo_proto::auth::AuthMode,
    /// Runs served at once (1 with --udp-port, whose ports one run takes). A client
    /// beyond that waits for a run to end, at most --control-timeout, then is
    /// refused. Runs at once share this host's CPUs and NIC: measure one at a time.
    #[arg(long, default_value_t = limits::DEFAULT_MAX_CLIENTS, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    max_clients: u32,
    /// Memory one client's run may make this server allocate (message buffers of
    /// every queue pair, the reorder buffer), in bytes or with K, M, G: a hello
    /// asking for more is refused with the numbers [default: 1.5G].
    #[arg(long, default_value_t = limits::DEFAULT_MAX_BYTES, value_name = "BYTES",
          value_parser = limits::parse_bytes, hide_default_value = true)]
    max_bytes_per_client: u64,
    /// Seconds a client has to deliver each control message whole (hello, start,
    /// done, report), however it trickles the bytes; also the longest wait for a
    /// run slot.
    #[arg(long, default_value = "5", value_name = "SECONDS", value_parser = limits::parse_seconds)]
    control_timeout: Duration,
    /// Seconds without progress (no completion, no packet, no control message)
    /// after which a run is dropped, in every phase.
    #[arg(long, default_value = "10", value_name = "SECONDS", value_parser = limits::parse_seconds)]
    stall_timeout: Duration,
}

/// Where this side's UDP sockets are and where they send (both roles).
#[derive(Clone, Copy, Debug, Default, clap::Args)]
pub struct NetArgs {
    /// Rondo on UDP: port of this side's path-0 socket; path i binds PORT + i, so a
    /// fabric's topology can name the source ports (0: ephemeral ports).
    #[arg(long, default_value_t = 0, value_name = "PORT")]
    pub udp_port: u16,
    /// Rondo on UDP: send every path's datagrams to this address (a `rondo fabric`)
    /// instead of the peer's sockets; the fabric steers them by source port.
    #[arg(long, value_name = "ADDR")]
    pub via: Option<std::net::SocketAddr>,
}
#[derive(Debug, clap::Args)]
pub struct ClientArgs {
    /// Host running `rondo perf server`.
    host: String,
    /// TCP port of the server's control exchange.
    #[arg(short, long, default_value_t = DEFAULT_PORT)]
    port: u16,
    /// Operation to measure.
    #[arg(long, value_enum, default_value_t = Op::Write)]
    op: Op,
    /// Message size in bytes.
    #[arg(short, long, default_value_t = 65536)]
    size: u64,
    /// Number of messages [default: 1000].
    #[arg(short = 'n', long, conflicts_with = "duration")]
    iters: Option<u64>,
    /// Run for this many seconds instead of a number of messages.
    #[arg(short = 'D', long, value_name = "SECONDS")]
    duration: Option<f64>,
    /// Paths (UDP source ports) per queue pair.
    #[arg(long, default_value_t = 4)]
    paths: u32,
    /// Queue pairs.
    #[arg(short = 'q', long, default_value_t = 1)]
    qps: u32,
    /// What carries the data: Rondo queue pairs running an engine transport
    /// (`rondo`, `rrps`, ...), raw datagrams (`raw-udp`, the UDP ceiling), or plain
    /// RC queue pairs on the RDMA device (`rc`, `--backend verbs`).
    #[arg(long, value_name = "NAME", default_value_t = Transport::RONDO)]
    transport: Transport,
    #[command(flatten)]
    device: DeviceArgs,
    #[command(flatten)]
    net: NetArgs,
    /// Rondo: an engine setting for both sides' queue pairs, KEY=VALUE (repeatable):
    /// scheduler, probing, pacing (true/false), base_rtt_us (one value, or one per
    /// path: 900,1100,...), rto_min_us, early_recovery_threshold, q0,
    /// initial_window, target_queue_rtts, stall_allowance_us, path_selection (deficit/random),
    /// ack_coalesce_packets, ack_coalesce_us (ACKs per data packets and their longest wait).
    #[arg(long = "engine", value_name = "KEY=VALUE")]
    engine: Vec<String>,
    /// Write a seeded pattern and check every byte at the receiver.
    #[arg(long)]
    verify: bool,
    /// Seed of the `--verify` pattern.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Latency mode: ping-pong one message at a time, print percentiles.
    #[arg(long)]
    lat: bool,
    /// Rondo: spin on an empty completion queue (perftest's way) instead of
    /// waiting for a completion with `CompletionQueue::wait` (bandwidth runs).
    #[arg(long)]
    busy_poll: bool,
    /// Rondo on UDP: give each side's context a progress thread (the backend's
    /// default for applications). Without it the thread that polls the completion
    /// queue runs the datapath (explicit progress), as one thread per side does in
    /// raw UDP; a side that has nothing to poll (the server of WRITE without
    /// `--verify`, of READ) always gets a progress thread.
    #[arg(long)]
    progress_thread: bool,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
    /// Rondo on UDP and RDMA devices: datagram authentication of both sides'
    /// queue pairs, `auth` (tag over header and payload), `encrypt` (payload
    /// encrypted too) or `none` (docs/wire.md); the server must allow it.
    #[arg(long, default_value = "auth", value_name = "MODE")]
    auth: rondo_proto::auth::AuthMode,
    /// Datagram size in bytes, headers included (Rondo's MTU). UDP: default 4156,
    /// 4096 bytes of Rondo payload as RoCE's 4096 MTU (4180 with `--auth auth` or
    /// `encrypt`: the 24-byte trailer on top). RDMA device: default 4096,
    /// at most the port's active MTU; `--transport rc`: the path MTU (256, 512,
    /// 1024, 2048 or 4096).
    #[arg(short, long)]
    mtu: Option<u32>,
    /// Messages in flight per queue pair.
    #[arg(short = 't', long, default_value_t = 128)]
    tx_depth: u32,
    /// Rondo: host line rate given to the engine on both sides, Gb/s (0: the UDP
    /// backend's default).
    #[arg(long, default_value_t = 0.0, value_name = "GBPS")]
    line_gbps: f64,
    /// Rondo: bytes of the reorder buffer of each side's context (0: the default).
    #[arg(long, default_value_t = 0, value_name = "BYTES")]
    reorder_buffer: u64,
    /// Rondo fault injection at both ends: drop each arriving datagram with this
    /// probability.
    #[arg(long, default_value_t = 0.0, value_name = "P")]
    loss: f64,
    /// Rondo fault injection at both ends: hold each arriving datagram back behind
    /// the next one with this probability.
    #[arg(long, default_value_t = 0.0, value_name = "P")]
    reorder: f64,
}

impl ClientArgs {
    /// The hello this client sends, before the transport adds its endpoints.
    fn hello(&self) -> Hello {
        let duration_s = self.duration;
        Hello {
            op: self.op,
            size: self.size,
            iterations: match duration_s {
                Some(_) => None,
                None => Some(self.iters.unwrap_or(1000)),
            },
            duration_s,
            paths: self.paths,
            qps: self.qps,
            transport: self.transport,
            backend: self.device.backend,
            mtu: self.mtu.unwrap_or(match self.device.backend {
                // Room for the authentication trailer, so that a 4 KiB message
                // stays one packet.
                Backend::Udp if matches!(self.transport, Transport::Engine(_)) => {
                    DEFAULT_MTU + self.auth.overhead() as u32
                }
                Backend::Udp => DEFAULT_MTU,
                Backend::Verbs => DEFAULT_RDMA_MTU,
            }),
            tx_depth: self.tx_depth,
            verify_seed: self.verify.then_some(self.seed),
            lat: self.lat,
            busy_poll: self.busy_poll,
            progress_thread: self.progress_thread,
            line_gbps: self.line_gbps,
            reorder_buffer: self.reorder_buffer,
            loss: self.loss,
            reorder: self.reorder,
            endpoints: Vec::new(),
            regions: Vec::new(),
            udp_paths: Vec::new(),
            engine: self.engine.clone(),
            auth: self.auth.name().into(),
        }
    }
}

/// Checks a run's parameters, on the client before it connects and on the server for
/// whatever a client sends.
fn check(h: &Hello) -> anyhow::Result<()> {
    ensure!(
        (1..=MAX_SIZE).contains(&h.size),
        "message size {} is out of range: use -s between 1 and {MAX_SIZE} bytes",
        h.size
    );
    ensure!(
        h.iterations.is_some() != h.duration_s.is_some(),
        "give either -n ITERS or -D SECONDS"
    );
    if let Some(n) = h.iterations {
        ensure!(n >= 1, "-n must be at least 1");
    }
    if let Some(d) = h.duration_s {
        ensure!(
            d.is_finite() && d > 0.0 && d <= 86_400.0,
            "-D {d} is out of range: use a number of seconds above 0, at most a day"
        );
    }
    ensure!(
        (1..=MAX_PATHS).contains(&h.paths),
        "--paths {} is out of range: use 1 to {MAX_PATHS}",
        h.paths
    );
    ensure!(
        (1..=MAX_PATHS).contains(&h.qps),
        "--qps {} is out of range: use 1 to {MAX_PATHS}",
        h.qps
    );
    match (h.backend, h.transport) {
        (Backend::Udp, Transport::Rc) => {
            return Err(device::OptionError::RcNeedsVerbs.into());
        }
        (Backend::Verbs, Transport::RawUdp) => {
            return Err(device::OptionError::RawUdpOnVerbs.into());
        }
        (Backend::Udp, _) => {
            let min_mtu = raw_udp::HEADER_LEN as u32 + 1;
            ensure!(
                (min_mtu..=MAX_DATAGRAM).contains(&h.mtu),
                "--mtu {} is out of range: use {min_mtu} to {MAX_DATAGRAM} bytes",
                h.mtu
            );
        }
        (Backend::Verbs, Transport::Rc) => ensure!(
            rondo_ud::verbs::qp_attr::mtu_code(h.mtu).is_some(),
            "--mtu {} is no RC path MTU: use 256, 512, 1024, 2048 or 4096",
            h.mtu
        ),
        (Backend::Verbs, _) => ensure!(
            (256..=4096).contains(&h.mtu),
            "--mtu {} is out of range on an RDMA device: use 256 to 4096 bytes (RoCE MTUs)",
            h.mtu
        ),
    }
    if h.transport == Transport::Rc {
        for (name, set) in [
            ("--loss", h.loss > 0.0),
            ("--reorder", h.reorder > 0.0),
            ("--line-gbps", h.line_gbps > 0.0),
            ("--reorder-buffer", h.reorder_buffer > 0),
        ] {
            if set {
                return Err(device::OptionError::RondoOnly(name).into());
            }
        }
    }
    ensure!(
        h.line_gbps.is_finite() && (0.0..=10_000.0).contains(&h.line_gbps),
        "--line-gbps {} is out of range: use 0 (default) to 10000",
        h.line_gbps
    );
    for (name, p) in [("--loss", h.loss), ("--reorder", h.reorder)] {
        ensure!(
            (0.0..1.0).contains(&p),
            "{name} {p} is out of range: give a probability from 0 to below 1"
        );
    }
    ensure!(
        h.reorder_buffer <= 1 << 32,
        "--reorder-buffer {} is out of range: use at most 4 GiB",
        h.reorder_buffer
    );
    if !h.engine.is_empty() {
        ensure!(
            matches!(h.transport, Transport::Engine(_)),
            "--engine applies to Rondo queue pairs (--transport rondo, rrps, ...)"
        );
        check_engine(&h.engine, h.paths as u16)?;
    }
    ensure!(
        (1..=4096).contains(&h.tx_depth),
        "--tx-depth {} is out of range: use 1 to 4096",
        h.tx_depth
    );
    Ok(())
}

/// Checks `--udp-port` and `--via` against a run: they place Rondo's UDP sockets.
fn check_net(h: &Hello, net: NetArgs) -> anyhow::Result<()> {
    let placed = net.udp_port != 0 || net.via.is_some();
    if placed {
        ensure!(
            h.backend == Backend::Udp && matches!(h.transport, Transport::Engine(_)),
            "--udp-port and --via place Rondo's UDP sockets: use them with --backend udp and a Rondo transport (rondo, rrps, ...)"
        );
    }
    ensure!(
        net.udp_port == 0 || u32::from(net.udp_port) + h.paths <= 65_536,
        "--udp-port {} + {} paths runs past port 65535",
        net.udp_port,
        h.paths
    );
    Ok(())
}

/// Checks `--engine` settings for a flow of `paths` paths (for `rondo testbed`,
/// before it starts anything).
pub fn check_engine(settings: &[String], paths: u16) -> anyhow::Result<()> {
    let cfg = rondo_verbs::FlowConfig {
        paths,
        ..rondo_verbs::FlowConfig::default()
    };
    engine::apply(cfg, settings, paths).map(|_| ())
}

/// Runs `rondo perf`.
pub fn run(args: &Args) -> anyhow::Result<()> {
    match &args.role {
        Role::Server(s) => server::run(s),
        Role::Client(c) => client::run(c),
    }
}

/// A progress line on stderr, when stderr is a terminal, at most twice a second.
pub struct Progress {
    enabled: bool,
    start: Instant,
    last: Option<Instant>,
}

impl Progress {
    /// Progress for a run starting now; silent unless `wanted` and stderr is a TTY.
    pub fn new(wanted: bool) -> Progress {
        Progress {
            enabled: wanted && std::io::stderr().is_terminal(),
            start: Instant::now(),
            last: None,
        }
    }

    /// Shows `done` of `total` messages (or of the run's time when untotalled).
    pub fn tick(&mut self, done: u64, total: Option<u64>) {
        if !self.enabled
            || self
                .last
                .is_some_and(|t| t.elapsed() < Duration::from_millis(500))
        {
            return;
        }
        if self.last.is_none() && self.start.elapsed() < Duration::from_secs(1) {
            return;
        }
        self.last = Some(Instant::now());
        let secs = self.start.elapsed().as_secs_f64();
        match total {
            Some(n) => eprint!("\r{done}/{n} messages, {secs:.1} s   "),
            None => eprint!("\r{done} messages, {secs:.1} s   "),
        }
        let _ = std::io::stderr().flush();
    }

    /// Erases the progress line, if one was drawn.
    pub fn clear(&mut self) {
        if self.last.take().is_some() {
            eprint!("\r\x1b[K");
        }
    }
}
