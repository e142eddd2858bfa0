//! The UDP datapath (Linux): one UDP socket per path, batched with
//! `sendmmsg` / `recvmmsg`, UDP GSO and GRO where the kernel has them, DSCP per
//! priority class and ECN read back. It drives any [`Host`] (an
//! [`Endpoint`](crate::Endpoint) in practice); `docs/udp.md` has the details and the
//! network-namespace setup.
//!
//! ```no_run
//! use rondo_ud::udp::{Clock, UdpConfig, UdpDatapath};
//! use rondo_ud::{Endpoint, EndpointConfig, FlowConfig};
//! use std::time::Duration;
//!
//! let mut dp = UdpDatapath::bind(UdpConfig { base_port: 0, ..UdpConfig::default() })?;
//! let my_addrs = dp.local_addrs().to_vec(); // goes into the endpoint descriptor
//! # let peer_addrs = my_addrs.clone();
//! let clock = Clock::new();
//! let mut ep = Endpoint::new(EndpointConfig::default()).unwrap();
//! ep.connect(clock.now(), 1, 2, &FlowConfig::default()).unwrap();
//! dp.add_peer(1, peer_addrs)?; // path i of flow 1 goes to the peer's socket i
//! loop {
//!     dp.poll(&mut ep, &clock, Duration::from_millis(1))?;
//!     # break;
//! }
//! # Ok::<(), std::io::Error>(())
//! ```

mod batch;
mod raw;
mod sys;

pub use raw::RawCount;

use crate::time::Instant;
use crate::transmit::{Host, Priority};
use batch::TxQueue;
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;
use sys::{InMsg, MsgArrays};

/// Rondo's default UDP port (`docs/wire.md`): path i binds `DEFAULT_PORT + i`.
pub const DEFAULT_PORT: u16 = 4792;
/// Largest UDP payload in one received buffer when GRO coalesces datagrams.
const GRO_SLOT: usize = 65_536;
/// Largest batch: the kernel's `UIO_MAXIOV`.
const MAX_BATCH: usize = 1024;

/// How a [`UdpDatapath`] binds and sends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UdpConfig {
    /// Address to bind every path socket to (`0.0.0.0` by default; use the address
    /// the peer reaches, or a loopback address, when the addresses go into an
    /// endpoint descriptor).
    pub local_ip: IpAddr,
    /// Port of path 0; path i binds `base_port + i`. 0: an ephemeral port per path.
    pub base_port: u16,
    /// Number of paths, one socket each (1 to 1024).
    pub paths: u16,
    /// DSCP of ACKs and NAKs (0-63). Default 46 (EF).
    pub dscp_control: u8,
    /// DSCP of data packets (0-63). Default 26 (AF31, RoCEv2's usual class).
    pub dscp_data: u8,
    /// DSCP of capacity probes, the lowest priority (0-63). Default 8 (CS1).
    pub dscp_probe: u8,
    /// Mark sent datagrams ECN-capable (ECT(0)), so that switches mark instead of
    /// dropping; CE marks are read back either way.
    pub ecn: bool,
    /// Datagrams per `sendmmsg` / `recvmmsg` batch and per path queue (1 to 1024).
    pub batch: usize,
    /// Use UDP GSO (`UDP_SEGMENT`) when the kernel has it.
    pub gso: bool,
    /// Use UDP GRO (`UDP_GRO`) when the kernel has it.
    pub gro: bool,
    /// Largest datagram sent or received without GRO, bytes (the engine's MTU or more).
    pub max_datagram: usize,
    /// `SO_SNDBUF` / `SO_RCVBUF` asked for each socket, bytes (the kernel may cap it).
    pub socket_buffer: usize,
    /// Waits shorter than this are not slept but polled (the kernel's timer slack
    /// makes short sleeps long).
    pub spin: Duration,
}

impl Default for UdpConfig {
    fn default() -> Self {
        UdpConfig {
            local_ip: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            base_port: DEFAULT_PORT,
            paths: 4,
            dscp_control: 46,
            dscp_data: 26,
            dscp_probe: 8,
            ecn: true,
            batch: 32,
            gso: true,
            gro: true,
            max_datagram: 9_216,
            socket_buffer: 4 << 20,
            spin: Duration::from_micros(20),
        }
    }
}

impl UdpConfig {
    fn validate(&self) -> io::Result<()> {
        let bad = |what: &str| {
            Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                what.to_string(),
            ))
        };
        if !(1..=1024).contains(&self.paths) {
            return bad("UdpConfig::paths must be 1 to 1024");
        }
        if !(1..=MAX_BATCH).contains(&self.batch) {
            return bad("UdpConfig::batch must be 1 to 1024");
        }
        if !(crate::wire::COMMON_HEADER_LEN..=65_507).contains(&self.max_datagram) {
            return bad("UdpConfig::max_datagram must be 24 to 65507 bytes");
        }
        if self.dscp_control > 63 || self.dscp_data > 63 || self.dscp_probe > 63 {
            return bad("UdpConfig DSCP values are 6 bits: 0 to 63");
        }
        if self.base_port != 0 && u32::from(self.base_port) + u32::from(self.paths) > 65_536 {
            return bad("UdpConfig::base_port + paths runs past port 65535; lower base_port");
        }
        Ok(())
    }

    /// The TOS byte (DSCP and ECN bits) of a priority class.
    pub fn tos(&self, priority: Priority) -> u8 {
        let dscp = match priority {
            Priority::Control => self.dscp_control,
            Priority::Data => self.dscp_data,
            Priority::Probe => self.dscp_probe,
        };
        (dscp << 2) | if self.ecn { ECT0 } else { 0 }
    }
}

/// A [`FlowConfig`](crate::FlowConfig) for flows over this datapath, from
/// `FlowConfig::default()` (the paper's) with what a software datapath needs:
///
/// - `base_rtt` of 1 ms per path: the host's batching and thread wake-ups are part
///   of every round trip (DESIGN.md: the base RTT must include serialisation; here
///   it must include the host). With the measured loopback minimum (tens of
///   microseconds) ARCC reads every batch as queueing and shrinks the windows.
/// - no pacing: the driver polls every few microseconds and sends whole batches,
///   so the window alone clocks the flow (with pacing, see
///   `FlowConfig::pacing_burst`);
/// - no capacity probing: probes sent up to the line rate cost a host as much CPU
///   as data packets, and there is no switch priority queue to drop them first;
/// - a 2 ms RTO floor and 30 retries, for the scheduling stalls of a loaded host.
///
/// Measured on loopback with `examples/udp_perf.rs` (see `docs/udp.md`).
pub fn flow_config(paths: u16) -> crate::FlowConfig {
    crate::FlowConfig {
        paths,
        base_rtt: Some(vec![crate::time::Duration::from_ms(1); usize::from(paths)]),
        pacing: false,
        probing: false,
        rto_min: crate::time::Duration::from_ms(2),
        retry_limit: 30,
        ..crate::FlowConfig::default()
    }
}

/// ECN codepoint ECT(0).
const ECT0: u8 = 0b10;
/// ECN codepoint CE.
const CE: u8 = 0b11;

/// A monotonic clock for the engine: [`Instant`]s counted from its creation.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    origin: std::time::Instant,
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

impl Clock {
    /// A clock whose zero is now.
    pub fn new() -> Clock {
        Clock {
            origin: std::time::Instant::now(),
        }
    }

    /// The engine time now (nanosecond resolution).
    pub fn now(&self) -> Instant {
        Instant::from_ns(self.origin.elapsed().as_nanos() as u64)
    }

    /// The wall-clock wait until `t`, zero when it has passed.
    pub fn until(&self, t: Instant) -> Duration {
        Duration::from_nanos(t.saturating_since(self.now()).as_ns())
    }
}

/// Counters of a [`UdpDatapath`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UdpStats {
    /// Datagrams received (after GRO splitting).
    pub datagrams_in: u64,
    /// UDP payload bytes received.
    pub bytes_in: u64,
    /// Datagrams sent (GSO segments counted one by one).
    pub datagrams_out: u64,
    /// UDP payload bytes sent.
    pub bytes_out: u64,
    /// `sendmmsg` calls.
    pub send_batches: u64,
    /// `recvmmsg` calls that returned datagrams.
    pub recv_batches: u64,
    /// Messages sent as a GSO train of two or more datagrams.
    pub gso_sends: u64,
    /// Received buffers that GRO had coalesced from two or more datagrams.
    pub gro_receives: u64,
    /// Times GSO failed at run time and the datapath fell back to one datagram per
    /// message.
    pub gso_fallbacks: u64,
    /// Failed receive calls.
    pub recv_errors: u64,
    /// Failed send calls (their datagrams are dropped, as a network would).
    pub send_errors: u64,
    /// Datagrams dropped because a send failed.
    pub send_dropped: u64,
    /// Datagrams longer than the receive buffer (cut, dropped).
    pub truncated: u64,
    /// Datagrams whose TOS byte the kernel reported.
    pub tos_seen: u64,
    /// Datagrams that arrived CE-marked.
    pub ecn_ce: u64,
    /// Transmits for a flow with no peer, or a path the datapath lacks (dropped).
    pub unroutable: u64,
}

/// What one [`UdpDatapath::poll`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PollOutcome {
    /// Datagrams handed to the host.
    pub received: usize,
    /// Datagrams the host produced and the datapath sent.
    pub sent: usize,
}

/// One UDP socket per path, batched I/O, and a driver loop for a [`Host`].
#[derive(Debug)]
pub struct UdpDatapath {
    cfg: UdpConfig,
    sockets: Vec<UdpSocket>,
    local: Vec<SocketAddr>,
    v6: bool,
    gso: bool,
    gro: bool,
    tos_readback: bool,
    peers: HashMap<u32, Vec<SocketAddr>>,
    tx: Vec<TxQueue>,
    /// Where raw mode builds datagrams.
    scratch: Vec<u8>,
    /// Path of the last transmit, and for each path the one that followed it last:
    /// the guess of which path queue the host writes the next datagram into.
    last_path: usize,
    next_after: Vec<usize>,
    /// Receive buffers: `rx_per_path` slots of `rx_slot` bytes for each path.
    rx_buf: Vec<u8>,
    rx_slot: usize,
    rx_per_path: usize,
    /// What each slot received (same layout as `rx_buf`).
    rx_msgs: Vec<InMsg>,
    /// Messages received per path in the current round.
    rx_got: Vec<usize>,
    arrays: MsgArrays,
    out_msgs: Vec<sys::OutMsg>,
    pollfds: Vec<libc::pollfd>,
    stats: UdpStats,
}

impl UdpDatapath {
    /// Binds one socket per path and sets their options. GSO, GRO and TOS
    /// read-back are switched on where the kernel accepts them (see
    /// [`UdpDatapath::gso`], [`UdpDatapath::gro`], [`UdpDatapath::tos_readback`]).
    pub fn bind(cfg: UdpConfig) -> io::Result<UdpDatapath> {
        cfg.validate()?;
        let v6 = cfg.local_ip.is_ipv6();
        let mut sockets = Vec::with_capacity(usize::from(cfg.paths));
        for i in 0..cfg.paths {
            let port = if cfg.base_port == 0 {
                0
            } else {
                cfg.base_port + i
            };
            sockets.push(UdpSocket::bind((cfg.local_ip, port))?);
        }
        let local = sockets
            .iter()
            .map(UdpSocket::local_addr)
            .collect::<io::Result<Vec<_>>>()?;
        let (ip_level, tos_opt, recv_tos_opt) = if v6 {
            (libc::IPPROTO_IPV6, libc::IPV6_TCLASS, libc::IPV6_RECVTCLASS)
        } else {
            (libc::IPPROTO_IP, libc::IP_TOS, libc::IP_RECVTOS)
        };
        let mut gso = cfg.gso;
        let mut gro = cfg.gro;
        let mut tos_readback = true;
        for s in &sockets {
            let fd = s.as_raw_fd();
            let size = cfg.socket_buffer.min(i32::MAX as usize) as i32;
            // Best effort: the *FORCE options pass net.core.{w,r}mem_max with
            // CAP_NET_ADMIN; without it the kernel caps the plain ones there.
            for (force, plain) in [
                (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
                (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
            ] {
                if sys::set_int(fd, libc::SOL_SOCKET, force, size).is_err() {
                    let _ = sys::set_int(fd, libc::SOL_SOCKET, plain, size);
                }
            }
            sys::set_int(fd, ip_level, tos_opt, i32::from(cfg.tos(Priority::Data)))?;
            tos_readback &= sys::set_int(fd, ip_level, recv_tos_opt, 1).is_ok();
            gso &= sys::get_int(fd, libc::SOL_UDP, libc::UDP_SEGMENT).is_ok();
            if gro {
                gro = sys::set_int(fd, libc::SOL_UDP, libc::UDP_GRO, 1).is_ok();
            }
        }
        if !gro {
            for s in &sockets {
                // Some sockets may have accepted it before one refused.
                let _ = sys::set_int(s.as_raw_fd(), libc::SOL_UDP, libc::UDP_GRO, 0);
            }
        }
        let batch = cfg.batch;
        let rx_slot = if gro { GRO_SLOT } else { cfg.max_datagram };
        let paths = usize::from(cfg.paths);
        // The batch is shared out among the paths (at least two slots each), so
        // that memory does not grow with the path count times the batch.
        let rx_per_path = (batch / paths).max(2);
        let pollfds = sockets.iter().map(|s| sys::pollfd(s.as_raw_fd())).collect();
        Ok(UdpDatapath {
            tx: (0..cfg.paths)
                .map(|_| TxQueue::new(batch, cfg.max_datagram))
                .collect(),
            scratch: vec![0; cfg.max_datagram],
            last_path: 0,
            next_after: (1..=paths).map(|p| p % paths).collect(),
            rx_buf: vec![0; paths * rx_per_path * rx_slot],
            rx_slot,
            rx_per_path,
            rx_msgs: vec![InMsg::default(); paths * rx_per_path],
            rx_got: vec![0; paths],
            arrays: MsgArrays::new(batch),
            out_msgs: Vec::with_capacity(batch),
            pollfds,
            stats: UdpStats::default(),
            peers: HashMap::new(),
            sockets,
            local,
            v6,
            gso,
            gro,
            tos_readback,
            cfg,
        })
    }

    /// The address of each path's socket, path 0 first (for the endpoint descriptor).
    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.local
    }

    /// The configuration it was bound with.
    pub fn config(&self) -> &UdpConfig {
        &self.cfg
    }

    /// Counters so far.
    pub fn stats(&self) -> UdpStats {
        self.stats
    }

    /// True when sends use UDP GSO (the kernel has it, it was asked for, and it has
    /// not failed at run time).
    pub fn gso(&self) -> bool {
        self.gso
    }

    /// True when receives use UDP GRO.
    pub fn gro(&self) -> bool {
        self.gro
    }

    /// True when the kernel reports each datagram's TOS byte (ECN read-back).
    pub fn tos_readback(&self) -> bool {
        self.tos_readback
    }

    /// Routes the transmits of local flow `local_flow`: path i goes to `addrs[i]`,
    /// the peer's socket i. Replaces an earlier route of the same flow.
    ///
    /// Errors (`InvalidInput`): `addrs` does not have one address per path, or an
    /// address of another family than the local sockets.
    pub fn add_peer(&mut self, local_flow: u32, addrs: Vec<SocketAddr>) -> io::Result<()> {
        if addrs.len() != self.sockets.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "peer of flow {local_flow} has {} addresses, this datapath has {} paths: exchange one address per path",
                    addrs.len(),
                    self.sockets.len()
                ),
            ));
        }
        if addrs.iter().any(|a| a.is_ipv6() != self.v6) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "peer address family differs from the local sockets': bind local_ip in the peer's family",
            ));
        }
        self.peers.insert(local_flow, addrs);
        Ok(())
    }

    /// Waits up to `max_wait` for datagrams and hands each one that is waiting to
    /// `deliver(path, datagram, tos)` (`tos`: the TOS / traffic-class byte, when the
    /// kernel reports it), without a host: for custom drivers and diagnostics.
    /// Returns the datagrams delivered.
    pub fn receive_with(
        &mut self,
        max_wait: Duration,
        deliver: impl FnMut(u16, &[u8], Option<u8>),
    ) -> io::Result<usize> {
        if sys::wait_readable(&mut self.pollfds, max_wait)? == 0 {
            return Ok(0);
        }
        self.receive(deliver)
    }

    /// Forgets the route of `local_flow`; returns whether it had one.
    pub fn remove_peer(&mut self, local_flow: u32) -> bool {
        self.peers.remove(&local_flow).is_some()
    }

    /// One round of the driver loop: runs the host's due timers, sends what it has
    /// (in batches), waits up to `max_wait` (less when the host's next timer is
    /// sooner; not at all when it sent something) for datagrams, hands every
    /// datagram that arrived to the host, and runs timers and sends once more.
    ///
    /// Errors: a failing `ppoll` or `recvmmsg` (not "would block"). Send failures
    /// are counted in [`UdpStats`] and their datagrams dropped, as a network would.
    pub fn poll<H: Host>(
        &mut self,
        host: &mut H,
        clock: &Clock,
        max_wait: Duration,
    ) -> io::Result<PollOutcome> {
        let mut out = PollOutcome::default();
        let now = clock.now();
        run_timers(host, now);
        out.sent += self.flush(host, now);
        let mut wait = match host.poll_timeout() {
            Some(t) => clock.until(t).min(max_wait),
            None => max_wait,
        };
        if out.sent > 0 || wait < self.cfg.spin {
            wait = Duration::ZERO;
        }
        // One ppoll says which sockets have datagrams (cheaper than a recvmmsg that
        // finds nothing on each of them).
        if sys::wait_readable(&mut self.pollfds, wait)? > 0 {
            out.received += self.receive(|path, data, tos| {
                host.handle_datagram(clock.now(), path, data, is_ce(tos));
            })?;
        }
        let now = clock.now();
        run_timers(host, now);
        out.sent += self.flush(host, now);
        Ok(out)
    }

    /// Polls the host for transmits at `now` and sends them, at most one batch per
    /// path before returning (so that receiving is not starved).
    fn flush<H: Host>(&mut self, host: &mut H, now: Instant) -> usize {
        let limit = self.cfg.batch * self.sockets.len();
        let max = self.cfg.max_datagram;
        let mut n = 0;
        while n < limit {
            // The host writes straight into the tail of the queue of the path it will
            // most likely pick (the one that followed the last path last time); a
            // wrong guess costs one copy.
            let guess = self.next_after[self.last_path];
            if !self.tx[guess].has_room(max) {
                self.send_path(guess);
            }
            let Some(t) = host.poll_transmit(now, self.tx[guess].tail_mut(max)) else {
                break;
            };
            n += 1;
            let path = usize::from(t.path);
            let dest = match self.peers.get(&t.flow) {
                Some(addrs) => addrs.get(path).copied(),
                None if self.peers.len() == 1 => self
                    .peers
                    .values()
                    .next()
                    .and_then(|a| a.get(path).copied()),
                None => None,
            };
            let (Some(dest), true) = (dest, t.len <= max) else {
                self.stats.unroutable += 1;
                continue;
            };
            self.next_after[self.last_path] = path;
            self.last_path = path;
            let tos = self.cfg.tos(t.priority);
            let tos = (tos != self.cfg.tos(Priority::Data)).then_some(tos);
            if path == guess {
                self.tx[path].commit_tail(dest, tos, t.len);
                continue;
            }
            if !self.tx[path].has_room(t.len) {
                self.send_path(path);
            }
            let (from, to) = if guess < path {
                let (a, b) = self.tx.split_at_mut(path);
                (&a[guess], &mut b[0])
            } else {
                let (a, b) = self.tx.split_at_mut(guess);
                (&b[0], &mut a[path])
            };
            to.push(dest, tos, from.tail(t.len));
        }
        for path in 0..self.tx.len() {
            self.send_path(path);
        }
        n
    }

    /// Sends everything queued on `path`.
    fn send_path(&mut self, path: usize) {
        if self.tx[path].is_empty() {
            return;
        }
        let fd = self.sockets[path].as_raw_fd();
        send_queue(
            fd,
            &mut self.tx[path],
            &mut self.arrays,
            &mut self.out_msgs,
            &mut self.gso,
            self.v6,
            &mut self.stats,
        );
        self.tx[path].clear();
    }

    /// Receives the datagrams waiting on the path sockets that the last
    /// `wait_readable` found readable and hands each to `deliver(path, datagram,
    /// tos)`. Each round takes one `recvmmsg` batch from every readable socket and
    /// delivers the datagrams interleaved across paths, one per path in turn: the
    /// sender sprays consecutive PSNs over the paths, so this keeps the arrival
    /// order close to PSN order instead of handing over one path's batch at a time.
    fn receive(&mut self, mut deliver: impl FnMut(u16, &[u8], Option<u8>)) -> io::Result<usize> {
        let mut total = 0;
        for round in 0..4 {
            let mut more = false;
            for path in 0..self.sockets.len() {
                self.rx_got[path] = 0;
                // The first round tries every socket, not only those ppoll found
                // readable: datagrams of the other paths that arrived since would
                // otherwise wait a whole poll and come out far behind their PSNs.
                if round > 0 && self.pollfds[path].revents == 0 {
                    continue;
                }
                let got = self.recv_path(path)?;
                if got < self.rx_per_path {
                    self.pollfds[path].revents = 0; // drained
                } else {
                    more = true;
                }
            }
            total += self.deliver_interleaved(&mut deliver);
            if !more {
                break;
            }
        }
        Ok(total)
    }

    /// One `recvmmsg` on `path`'s socket into its slots; returns the messages.
    fn recv_path(&mut self, path: usize) -> io::Result<usize> {
        let (pp, slot) = (self.rx_per_path, self.rx_slot);
        let buf = &mut self.rx_buf[path * pp * slot..(path + 1) * pp * slot];
        let msgs = &mut self.rx_msgs[path * pp..(path + 1) * pp];
        let fd = self.sockets[path].as_raw_fd();
        let got = match sys::recv(fd, &mut self.arrays, buf, slot, msgs) {
            Ok(got) => got,
            Err(e) => {
                self.stats.recv_errors += 1;
                return Err(e);
            }
        };
        if got > 0 {
            self.stats.recv_batches += 1;
        }
        for m in &msgs[..got] {
            if m.truncated {
                self.stats.truncated += 1;
            } else if m.segment > 0 && m.segment < m.len {
                self.stats.gro_receives += 1;
            }
        }
        self.rx_got[path] = got;
        Ok(got)
    }

    /// Hands the datagrams of this round to `deliver` in PSN order across paths: a
    /// merge of the per-path queues (each in sending order) by the PSN of DATA
    /// packets; other packets go first. The round arrived at one instant, so the
    /// order within it is the datapath's to choose, and PSN order spares the
    /// engine reorder-buffer copies (`placed_repaired`).
    fn deliver_interleaved(&mut self, deliver: &mut impl FnMut(u16, &[u8], Option<u8>)) -> usize {
        let (pp, slot) = (self.rx_per_path, self.rx_slot);
        let n = self.sockets.len();
        let stats = &mut self.stats;
        let mut delivered = 0;
        // Per path: (message index, byte offset in it).
        let mut cursor = [(0usize, 0usize); 64];
        for group in (0..n).step_by(cursor.len()) {
            let paths = group..(group + cursor.len()).min(n);
            cursor.fill((0, 0));
            loop {
                // The path whose next datagram sorts first.
                let mut best: Option<(usize, Option<u32>)> = None;
                for path in paths.clone() {
                    let (msg, off) = &mut cursor[path - group];
                    while *msg < self.rx_got[path] && self.rx_msgs[path * pp + *msg].truncated {
                        *msg += 1;
                    }
                    if *msg >= self.rx_got[path] {
                        continue;
                    }
                    let base = (path * pp + *msg) * slot + *off;
                    let key = data_psn(&self.rx_buf[base..base + 16.min(slot - *off)]);
                    let first = match (best, key) {
                        (None, _) => true,
                        (Some((_, Some(_))), None) => true,
                        (Some((_, Some(b))), Some(k)) => (k.wrapping_sub(b) as i32) < 0,
                        (Some((_, None)), _) => false,
                    };
                    if first {
                        best = Some((path, key));
                    }
                }
                let Some((path, _)) = best else {
                    break;
                };
                let (msg, off) = &mut cursor[path - group];
                let m = self.rx_msgs[path * pp + *msg];
                let base = (path * pp + *msg) * slot;
                let stride = if m.segment > 0 { m.segment } else { m.len };
                let end = (*off + stride.max(1)).min(m.len);
                let datagram = &self.rx_buf[base + *off..base + end];
                if end >= m.len {
                    (*msg, *off) = (*msg + 1, 0);
                } else {
                    *off = end;
                }
                stats.datagrams_in += 1;
                stats.bytes_in += datagram.len() as u64;
                if m.tos.is_some() {
                    stats.tos_seen += 1;
                }
                if is_ce(m.tos) {
                    stats.ecn_ce += 1;
                }
                delivered += 1;
                deliver(path as u16, datagram, m.tos);
            }
        }
        delivered
    }
}

/// The PSN of a Rondo DATA packet (version 1, type 1) from its first bytes, the
/// sort key of receive merging; `None` for anything else.
fn data_psn(head: &[u8]) -> Option<u32> {
    match head {
        [1, 1, _, _, _, _, _, _, _, _, _, _, a, b, c, d, ..] => {
            Some(u32::from_be_bytes([*a, *b, *c, *d]))
        }
        _ => None,
    }
}

/// True for the CE codepoint in a reported TOS byte.
fn is_ce(tos: Option<u8>) -> bool {
    tos.is_some_and(|t| t & CE == CE)
}

/// Sets the TOS byte (DSCP and ECN bits; the traffic class for IPv6) of every
/// datagram `socket` sends, for tools and tests that need traffic with given marks.
pub fn set_socket_tos(socket: &UdpSocket, tos: u8) -> io::Result<()> {
    let (level, name) = match socket.local_addr()? {
        SocketAddr::V4(_) => (libc::IPPROTO_IP, libc::IP_TOS),
        SocketAddr::V6(_) => (libc::IPPROTO_IPV6, libc::IPV6_TCLASS),
    };
    sys::set_int(socket.as_raw_fd(), level, name, i32::from(tos))
}

fn run_timers<H: Host>(host: &mut H, now: Instant) {
    if host.poll_timeout().is_some_and(|t| t <= now) {
        host.handle_timeout(now);
    }
}

/// Sends one path queue: groups runs of equal-sized datagrams to one destination
/// with one TOS into GSO trains (when `gso`), then `sendmmsg`s them, falling back
/// to single datagrams if the kernel refuses GSO at run time.
fn send_queue(
    fd: RawFd,
    q: &mut TxQueue,
    arrays: &mut MsgArrays,
    out: &mut Vec<sys::OutMsg>,
    gso: &mut bool,
    v6: bool,
    stats: &mut UdpStats,
) {
    q.build(out, *gso);
    let mut done = 0;
    while done < out.len() {
        match sys::send(fd, arrays, q.bytes(), &out[done..], v6) {
            Ok(0) => break,
            Ok(k) => {
                stats.send_batches += 1;
                for m in &out[done..done + k] {
                    if m.segment > 0 {
                        stats.gso_sends += 1;
                    }
                    stats.datagrams_out += m.datagrams() as u64;
                    stats.bytes_out += m.len as u64;
                }
                done += k;
            }
            Err(e) if *gso && out[done..].iter().any(|m| m.segment > 0) && gso_refused(&e) => {
                *gso = false;
                stats.gso_fallbacks += 1;
                // Rebuild what is left without GSO.
                let skip: usize = out[..done].iter().map(|m| m.len).sum();
                q.build_from(out, false, skip);
                done = 0;
            }
            Err(_) => {
                stats.send_errors += 1;
                stats.send_dropped += out[done..]
                    .iter()
                    .map(|m| m.datagrams() as u64)
                    .sum::<u64>();
                break;
            }
        }
    }
}

/// Errors with which a kernel or device refuses UDP GSO.
fn gso_refused(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EIO) | Some(libc::EINVAL) | Some(libc::EOPNOTSUPP) | Some(libc::ENOPROTOOPT)
    )
}
