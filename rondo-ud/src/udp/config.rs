//! Datapath configuration and counters.

use rondo_proto::transmit::Priority;
use std::io;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

/// Rondo's default UDP port (`docs/wire.md`): path i binds `DEFAULT_PORT + i`.
pub const DEFAULT_PORT: u16 = 4792;
/// Largest batch: the kernel's `UIO_MAXIOV`.
pub(super) const MAX_BATCH: usize = 1024;

/// How a [`UdpDatapath`](super::UdpDatapath) binds and sends.
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
            batch: usize::from(crate::profile::HOST_STACK_BATCH),
            gso: true,
            gro: true,
            max_datagram: 9_216,
            socket_buffer: 4 << 20,
            spin: Duration::from_micros(20),
        }
    }
}

impl UdpConfig {
    pub(super) fn validate(&self) -> io::Result<()> {
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
        if !(rondo_proto::wire::COMMON_HEADER_LEN..=65_507).contains(&self.max_datagram) {
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

/// ECN codepoint ECT(0).
pub(super) const ECT0: u8 = 0b10;
/// ECN codepoint CE.
pub(super) const CE: u8 = 0b11;

/// Counters of a [`UdpDatapath`](super::UdpDatapath).
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
