//! The UDP datapath (Linux): one UDP socket per path, batched with
//! `sendmmsg` / `recvmmsg`, UDP GSO and GRO where the kernel has them, DSCP per
//! priority class and ECN read back. It drives any [`Host`] (an
//! [`Endpoint`](rondo_proto::Endpoint) in practice); `docs/udp.md` has the details and the
//! network-namespace setup.
//!
//! ```no_run
//! use rondo_ud::udp::{Clock, UdpConfig, UdpDatapath};
//! use rondo_ud::HostProfile;
//! use rondo_proto::{Endpoint, BufferConfig, SharedBuffer};
//! use std::time::Duration;
//!
//! let mut dp = UdpDatapath::bind(UdpConfig { base_port: 0, ..UdpConfig::default() })?;
//! let my_addrs = dp.local_addrs().to_vec(); // goes into the endpoint descriptor
//! # let peer_addrs = my_addrs.clone();
//! let clock = Clock::new();
//! let mut ep = Endpoint::new(SharedBuffer::new(BufferConfig::default()).unwrap());
//! let flow = HostProfile::HOST_STACK.flow_config(4); // UdpDatapath's profile
//! dp.check_flow(&flow).expect("the flow's mtu fits max_datagram");
//! ep.connect(clock.now(), 1, 2, &flow).unwrap();
//! dp.add_peer(1, peer_addrs)?; // path i of flow 1 goes to the peer's socket i
//! loop {
//!     dp.poll(&mut ep, &clock, Duration::from_millis(1))?;
//!     # break;
//! }
//! # Ok::<(), std::io::Error>(())
//! ```

mod batch;
mod config;
mod raw;
mod recv;
mod sys;
mod wait;

pub use crate::datapath::{Clock, PollOutcome};
pub use config::{UdpConfig, UdpStats, DEFAULT_PORT};
pub use raw::RawCount;
pub use wait::{Waiter, Waker};

use config::CE;

use crate::datapath::{ByCopy, Datapath, InPlaceHost};
use crate::HostProfile;
use batch::TxQueue;
use rondo_proto::message::PayloadBytes;
use rondo_proto::transmit::{Host, PayloadRef, Priority, Transmit, TxBuffer};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;
use sys::{InMsg, MsgArrays};

/// Largest UDP payload in one received buffer when GRO coalesces datagrams.
const GRO_SLOT: usize = 65_536;

/// One UDP socket per path, batched I/O, and a driver loop for a [`Host`].
#[derive(Debug)]
pub struct UdpDatapath {
    cfg: UdpConfig,
    sockets: Vec<UdpSocket>,
    local: Vec<SocketAddr>,
    v6: bool,
    /// The largest GSO segment a train may have: 0 without GSO, `u16::MAX` until
    /// a route refused a train as too long for its MTU (then below that train's
    /// segment).
    gso_segment: usize,
    gro: bool,
    tos_readback: bool,
    /// Peer addresses per local flow, sorted by flow (binary search, no hashing
    /// per datagram).
    peers: Vec<(u32, Vec<SocketAddr>)>,
    tx: Vec<TxQueue>,
    /// Where raw mode builds datagrams.
    scratch: Vec<u8>,
    /// Paths whose queue has no room left for a datagram of `max_datagram` bytes:
    /// sent before the next transmit buffer is handed out.
    full: Vec<usize>,
    /// Where a datagram for a path this datapath does not have is written (and
    /// then dropped as unroutable).
    stray: Vec<u8>,
    /// Path whose queue the last flush sent first (rotates).
    flush_start: usize,
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
            full: Vec::with_capacity(paths),
            stray: vec![0; cfg.max_datagram],
            flush_start: 0,
            rx_buf: vec![0; paths * rx_per_path * rx_slot],
            rx_slot,
            rx_per_path,
            rx_msgs: vec![InMsg::default(); paths * rx_per_path],
            rx_got: vec![0; paths],
            arrays: MsgArrays::new(batch),
            out_msgs: Vec::with_capacity(batch),
            pollfds,
            stats: UdpStats::default(),
            peers: Vec::new(),
            sockets,
            local,
            v6,
            gso_segment: if gso { usize::from(u16::MAX) } else { 0 },
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
        self.gso_segment > 0
    }

    /// The largest datagram a GSO train carries: 65,535 until a route's MTU
    /// refused a train (then below that train's datagrams; those go one by one,
    /// as the kernel fragments them), 0 without GSO.
    pub fn gso_segment_limit(&self) -> usize {
        self.gso_segment
    }

    /// True when receives use UDP GRO.
    pub fn gro(&self) -> bool {
        self.gro
    }

    /// True when the kernel reports each datagram's TOS byte (ECN read-back).
    pub fn tos_readback(&self) -> bool {
        self.tos_readback
    }

    /// Checks that datagrams of a flow with configuration `cfg` fit this datapath's
    /// transmit buffers ([`UdpConfig::max_datagram`] bytes). Call it for every flow
    /// of the host before driving it: a flow whose `mtu` is larger would never send
    /// (see [`Host::poll_transmit`]).
    pub fn check_flow(
        &self,
        cfg: &rondo_proto::FlowConfig,
    ) -> Result<(), rondo_proto::BufferTooSmall> {
        rondo_proto::check_transmit_buffer(self.cfg.max_datagram, cfg.mtu)
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
        match self.peers.binary_search_by_key(&local_flow, |p| p.0) {
            Ok(i) => self.peers[i].1 = addrs,
            Err(i) => self.peers.insert(i, (local_flow, addrs)),
        }
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
        self.deliver_ready(deliver)
    }

    /// Forgets the route of `local_flow`; returns whether it had one.
    pub fn remove_peer(&mut self, local_flow: u32) -> bool {
        match self.peers.binary_search_by_key(&local_flow, |p| p.0) {
            Ok(i) => {
                self.peers.remove(i);
                true
            }
            Err(_) => false,
        }
    }

    /// Flows with a route ([`UdpDatapath::add_peer`]).
    pub fn peer_count(&self) -> usize {
        self.peers.len()
    }

    /// One round of the driver loop ([`crate::datapath::poll`]): runs the host's
    /// due timers, sends what it has (in batches), waits up to `max_wait` (less
    /// when the host's next timer is sooner; not at all when it sent something)
    /// for datagrams, hands every datagram that arrived to the host, and runs
    /// timers and sends once more.
    ///
    /// Errors: a failing `ppoll` or `recvmmsg` (not "would block"). Send failures
    /// are counted in [`UdpStats`] and their datagrams dropped, as a network would.
    pub fn poll<H: Host>(
        &mut self,
        host: &mut H,
        clock: &Clock,
        max_wait: Duration,
    ) -> io::Result<PollOutcome> {
        crate::datapath::poll(self, &mut ByCopy(host), clock, max_wait)
    }

    /// The destination of a transmit of `flow` on `path`: the flow's peer, or the
    /// only peer when the flow has none.
    fn route(&self, flow: u32, path: usize) -> Option<SocketAddr> {
        let addrs = match self.peers.as_slice() {
            [(_, only)] => only, // the flow's own, or the only peer
            peers => {
                &peers
                    .binary_search_by_key(&flow, |p| p.0)
                    .ok()
                    .map(|i| &peers[i])?
                    .1
            }
        };
        addrs.get(path).copied()
    }

    /// Sends everything queued on `path`; payloads that stayed in the host are
    /// read from `host`.
    fn send_path<H: Host>(&mut self, path: usize, host: &H) {
        self.send_queued(path, &|r| host.payload(r));
    }

    /// Sends everything queued on `path`; `payload` reads the payloads that are
    /// not in the queue.
    fn send_queued<'p>(&mut self, path: usize, payload: &dyn Fn(PayloadRef) -> PayloadBytes<'p>) {
        if self.tx[path].is_empty() {
            return;
        }
        let fd = self.sockets[path].as_raw_fd();
        send_queue(
            fd,
            &self.tx[path],
            &|r| payload(r),
            &mut self.arrays,
            &mut self.out_msgs,
            &mut self.gso_segment,
            self.v6,
            &mut self.stats,
        );
        self.tx[path].clear();
    }
}

/// A transmit buffer of the UDP datapath: the free tail of the queue of the path
/// the host chooses (every queue has room for a datagram of `max_datagram` bytes
/// when it is handed out). DATA payloads may stay in the host's memory: they go out
/// as a second iovec.
#[derive(Debug)]
pub struct UdpTx<'a> {
    max: usize,
    queues: &'a mut [TxQueue],
    stray: &'a mut [u8],
}

impl TxBuffer for UdpTx<'_> {
    fn capacity(&self) -> usize {
        self.max
    }

    fn payload_by_reference(&self) -> bool {
        true
    }

    fn take(&mut self, path: u16, _: Priority, len: usize) -> &mut [u8] {
        match self.queues.get_mut(usize::from(path)) {
            Some(q) => q.tail_mut(len),
            None => &mut self.stray[..len],
        }
    }
}

/// The UDP datapath under the driver loop: the host writes each datagram straight
/// into the tail of the queue of the path it chose ([`UdpTx`]); each path's queue
/// goes out in one `sendmmsg` (GSO trains where the kernel has them).
impl Datapath for UdpDatapath {
    type Error = io::Error;
    const PROFILE: HostProfile = HostProfile::HOST_STACK;
    type Tx<'a> = UdpTx<'a>;

    /// One batch per path, so that receiving is not starved.
    fn tx_limit(&self) -> usize {
        self.cfg.batch * self.sockets.len()
    }

    /// Sends the queues that cannot take another datagram of the largest size, so
    /// that whichever path the host picks has room.
    fn tx_buffer<H: Host>(&mut self, host: &H) -> Option<UdpTx<'_>> {
        while let Some(path) = self.full.pop() {
            self.send_path(path, host);
        }
        Some(UdpTx {
            max: self.cfg.max_datagram,
            queues: &mut self.tx,
            stray: &mut self.stray,
        })
    }

    fn tx_queue(&mut self, t: Transmit) {
        let path = usize::from(t.path);
        let dest = self.route(t.flow, path);
        let (Some(dest), true) = (dest, t.datagram_len() <= self.cfg.max_datagram) else {
            self.stats.unroutable += 1;
            return;
        };
        let tos = self.cfg.tos(t.priority);
        let tos = (tos != self.cfg.tos(Priority::Data)).then_some(tos);
        let q = &mut self.tx[path];
        q.commit_tail(dest, tos, t.len, t.payload);
        if !q.has_room(self.cfg.max_datagram) {
            self.full.push(path);
        }
    }

    fn tx_flush<H: Host>(&mut self, host: &H) -> io::Result<()> {
        let paths = self.tx.len();
        self.flush_start = (self.flush_start + 1) % paths;
        for k in 0..paths {
            self.send_path((self.flush_start + k) % paths, host);
        }
        self.full.clear();
        Ok(())
    }

    fn spin(&self) -> Duration {
        self.cfg.spin
    }

    /// One `ppoll` says which sockets have datagrams (cheaper than a `recvmmsg`
    /// that finds nothing on each of them); what one poll receives arrived
    /// together and gets one arrival time.
    fn receive<H: InPlaceHost>(
        &mut self,
        host: &mut H,
        clock: &Clock,
        wait: Duration,
    ) -> io::Result<usize> {
        if sys::wait_readable(&mut self.pollfds, wait)? == 0 {
            return Ok(0);
        }
        let rx_now = clock.now();
        self.deliver_ready(|path, data, tos| {
            host.handle_datagram(rx_now, path, data, is_ce(tos));
        })
    }
}

/// Bytes of IP and UDP header in front of each datagram: 28 over IPv4, 48 over IPv6.
pub fn ip_udp_header_len(ip: IpAddr) -> usize {
    match ip {
        IpAddr::V4(_) => 20 + 8,
        IpAddr::V6(_) => 40 + 8,
    }
}

/// The MTU of the route this host takes to `peer` (the outgoing interface's, or
/// a smaller path MTU the kernel learnt), from a connected socket's `IP_MTU` /
/// `IPV6_MTU`. A datagram longer than this minus [`ip_udp_header_len`] is
/// fragmented by the kernel (a GSO train of them is refused): size the flow's
/// `mtu` to fit where the route allows.
pub fn route_mtu(peer: IpAddr) -> io::Result<usize> {
    let (any, level, name): (IpAddr, _, _) = match peer {
        IpAddr::V4(_) => (Ipv4Addr::UNSPECIFIED.into(), libc::IPPROTO_IP, libc::IP_MTU),
        IpAddr::V6(_) => (
            Ipv6Addr::UNSPECIFIED.into(),
            libc::IPPROTO_IPV6,
            libc::IPV6_MTU,
        ),
    };
    let socket = UdpSocket::bind((any, 0))?;
    // Connecting a UDP socket sends nothing: it only picks the route.
    socket.connect((peer, DEFAULT_PORT))?;
    let mtu = sys::get_int(socket.as_raw_fd(), level, name)?;
    usize::try_from(mtu).map_err(|_| io::Error::other(format!("the kernel reported MTU {mtu}")))
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

/// Sends one path queue: groups runs of equal-sized datagrams to one destination
/// with one TOS into GSO trains (of segments up to `gso_segment`, 0: none), then
/// `sendmmsg`s them. If the kernel refuses GSO at run time, the rest goes as single
/// datagrams and GSO stays off; if it refuses a train as longer than the route's
/// MTU (a GSO segment cannot be fragmented, a single datagram can), the rest goes
/// again with trains of shorter segments only.
#[allow(clippy::too_many_arguments)]
fn send_queue<'a>(
    fd: RawFd,
    q: &'a TxQueue,
    payload: &dyn Fn(PayloadRef) -> PayloadBytes<'a>,
    arrays: &mut MsgArrays,
    out: &mut Vec<sys::OutMsg>,
    gso_segment: &mut usize,
    v6: bool,
    stats: &mut UdpStats,
) {
    let slice = |j| q.slice(j, payload);
    q.build_from(out, *gso_segment, 0);
    let mut done = 0;
    while done < out.len() {
        match sys::send(fd, arrays, &slice, &out[done..], v6) {
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
            // sendmmsg fails only when its first message does: `out[done]`.
            Err(e) if out[done].segment > 0 && (gso_refused(&e) || too_long(&e)) => {
                *gso_segment = if too_long(&e) {
                    usize::from(out[done].segment) - 1
                } else {
                    0
                };
                stats.gso_fallbacks += 1;
                // Rebuild what is left with the new limit.
                let sent = out[done].iov_start / batch::IOVS_PER_DATAGRAM;
                q.build_from(out, *gso_segment, sent);
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

/// The error with which the kernel refuses a datagram or a GSO segment longer than
/// the route allows.
fn too_long(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EMSGSIZE)
}

/// Errors with which a kernel or device refuses UDP GSO.
fn gso_refused(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EIO) | Some(libc::EINVAL) | Some(libc::EOPNOTSUPP) | Some(libc::ENOPROTOOPT)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loopback() -> UdpConfig {
        UdpConfig {
            local_ip: "127.0.0.1".parse().unwrap(),
            base_port: 0,
            paths: 2,
            ..UdpConfig::default()
        }
    }

    /// The kernel refuses GSO on a socket without UDP checksums (`SO_NO_CHECK`):
    /// the send falls back to one datagram per message and loses nothing.
    #[test]
    fn gso_refused_at_run_time_falls_back() {
        let mut tx = UdpDatapath::bind(loopback()).unwrap();
        let mut rx = UdpDatapath::bind(loopback()).unwrap();
        if !tx.gso() {
            println!("skipped: this kernel has no UDP GSO");
            return;
        }
        for s in &tx.sockets {
            if sys::set_int(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_NO_CHECK, 1).is_err() {
                println!("skipped: SO_NO_CHECK refused");
                return;
            }
        }
        let peer = rx.local_addrs().to_vec();
        assert_eq!(tx.raw_blast(&peer, 1000, 40).unwrap(), 40);
        let got = rx.raw_receive(Duration::from_millis(200)).unwrap();
        assert_eq!(got.datagrams, 40, "nothing lost in the fallback");
        let s = tx.stats();
        if s.gso_fallbacks == 0 {
            println!("not exercised: this kernel sent GSO without UDP checksums");
            return;
        }
        assert_eq!(s.gso_fallbacks, 1);
        assert!(!tx.gso(), "GSO stays off after a refusal");
        assert_eq!((s.gso_sends, s.send_errors, s.datagrams_out), (0, 0, 40));
    }

    #[test]
    fn the_route_mtu_to_loopback_is_the_loopback_interfaces() {
        let lo: usize = std::fs::read_to_string("/sys/class/net/lo/mtu")
            .map(|s| s.trim().parse().unwrap())
            .unwrap_or(65_536);
        // An IPv4 packet is at most 65,535 bytes, whatever the interface allows.
        assert_eq!(
            route_mtu("127.0.0.1".parse().unwrap()).unwrap(),
            lo.min(65_535)
        );
        assert_eq!(ip_udp_header_len("::1".parse().unwrap()), 48);
    }

    #[test]
    fn bad_configs_are_refused_with_a_reason() {
        for cfg in [
            UdpConfig {
                paths: 0,
                ..loopback()
            },
            UdpConfig {
                batch: 0,
                ..loopback()
            },
            UdpConfig {
                dscp_probe: 64,
                ..loopback()
            },
            UdpConfig {
                base_port: 65_535,
                ..loopback()
            },
            UdpConfig {
                max_datagram: 10,
                ..loopback()
            },
        ] {
            let e = UdpDatapath::bind(cfg).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
            assert!(e.to_string().contains("UdpConfig"), "{e}");
        }
    }

    #[test]
    fn merge_key_is_the_psn_of_data_packets_only() {
        let mut d = [0u8; 16];
        d[0] = 1;
        d[1] = 1;
        d[12..16].copy_from_slice(&7u32.to_be_bytes());
        assert_eq!(recv::data_psn(&d), Some(7));
        d[1] = 3; // an ACK
        assert_eq!(recv::data_psn(&d), None);
        assert_eq!(recv::data_psn(&d[..10]), None);
    }
}
