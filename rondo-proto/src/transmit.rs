//! What the engine hands a datapath to send, and the datapath-facing trait.

use crate::message::PayloadBytes;
use crate::time::Instant;

/// Switch priority class of a datagram (paper §4.2.2, Fig. 7): ACK/NAK/control
/// above data above probes, served in strict priority.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Priority {
    /// ACKs, NAKs and other control packets: highest priority.
    Control = 0,
    /// Data packets, including retransmissions.
    Data = 1,
    /// Capacity probes: lowest priority, small drop threshold in switches.
    Probe = 2,
}

impl Priority {
    /// Number of priority classes.
    pub const COUNT: usize = 3;

    /// Index of this class, 0 (highest) to 2 (lowest).
    pub const fn index(self) -> usize {
        self as usize
    }
}

/// One datagram the engine wrote into the caller's buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// Logical path to send it on (a UDP source port, an address handle, a simulator route).
    pub path: u16,
    /// Priority class for the switch queues.
    pub priority: Priority,
    /// Bytes written at the start of the caller's buffer.
    pub len: usize,
    /// Local flow id of the connection that produced it, so that a driver serving
    /// several peers knows where the datagram goes. Hosts that are not connections
    /// (test hosts, raw blasters) may leave it 0.
    pub flow: u32,
}

/// Where the payload of a datagram from [`Host::poll_transmit_split`] lies: in the
/// host's own memory (the message being sent), so that a datapath can send it with
/// a second iovec instead of a copy. Opaque to the datapath except `len`; valid
/// until the host is next called with `&mut self` for anything but
/// `poll_transmit_split`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PayloadRef {
    /// Which of the host's senders (the host's own numbering).
    pub source: u32,
    /// Which message of it (the host's own key).
    pub key: u64,
    /// Byte offset in the message.
    pub offset: u64,
    /// Payload bytes.
    pub len: u32,
}

/// A driver's transmit buffer is shorter than a flow's MTU: that flow could never
/// send. Returned by the drivers when they are set up ([`check_transmit_buffer`]).
#[derive(Clone, Copy, Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
#[error(
    "transmit buffers of {buf} bytes cannot hold a datagram of the flow's mtu of {mtu} bytes: \
     lower FlowConfig::mtu or give the driver larger buffers"
)]
pub struct BufferTooSmall {
    /// Bytes the driver offers [`Host::poll_transmit`].
    pub buf: usize,
    /// The flow's `mtu`.
    pub mtu: usize,
}

/// Checks, when a driver is set up, that its transmit buffers of `buf` bytes can
/// hold a datagram of `mtu` bytes (see [`Host::poll_transmit`]).
pub fn check_transmit_buffer(buf: usize, mtu: usize) -> Result<(), BufferTooSmall> {
    if buf >= mtu {
        Ok(())
    } else {
        Err(BufferTooSmall { buf, mtu })
    }
}

/// A host as a datapath sees it: something that takes datagrams and timeouts and
/// produces datagrams. The in-memory network, the simulator and the socket loops
/// drive any `Host`.
pub trait Host {
    /// A datagram arrived on `path`. `ecn_ce` is true when the network marked it
    /// Congestion Experienced.
    fn handle_datagram(&mut self, now: Instant, path: u16, data: &[u8], ecn_ce: bool);
    /// The time returned by [`Host::poll_timeout`] has been reached (or passed).
    fn handle_timeout(&mut self, now: Instant);
    /// Write the next datagram to send now into `buf`, if any.
    ///
    /// `buf` must hold at least the `mtu` of every flow of the host: a datagram is
    /// written whole or not at all, so a connection offered fewer bytes sends
    /// nothing, counts the refusal in [`SenderStats::short_buffers`] and stalls
    /// until it gets a long enough buffer. Drivers check this when they are set
    /// up, with [`check_transmit_buffer`].
    ///
    /// [`SenderStats::short_buffers`]: crate::SenderStats::short_buffers
    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit>;
    /// The next instant at which the host wants `handle_timeout` or `poll_transmit`
    /// to be called, or `None` when it is idle until a datagram arrives.
    fn poll_timeout(&self) -> Option<Instant>;

    /// Like [`Host::poll_transmit`], but the payload may stay in the host's memory:
    /// `buf[..t.len]` holds the start of the datagram (the header), and the payload,
    /// when a [`PayloadRef`] is returned, follows it; [`Host::payload`] gives its
    /// bytes. The default writes the whole datagram into `buf`.
    fn poll_transmit_split(
        &mut self,
        now: Instant,
        buf: &mut [u8],
    ) -> Option<(Transmit, Option<PayloadRef>)> {
        self.poll_transmit(now, buf).map(|t| (t, None))
    }

    /// The bytes of a payload returned by [`Host::poll_transmit_split`] (empty if
    /// it is no longer there).
    fn payload(&self, r: PayloadRef) -> PayloadBytes<'_> {
        let _ = r;
        PayloadBytes::EMPTY
    }
}
