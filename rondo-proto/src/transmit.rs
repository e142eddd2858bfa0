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

/// One datagram the engine wrote into the buffer its [`TxBuffer`] gave it: what a
/// datapath needs to route, queue and batch it (consecutive transmits with the same
/// path, destination, class and length form one GSO train or one WR chain).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// Logical path to send it on (a UDP source port, an address handle, a simulator route).
    pub path: u16,
    /// Priority class for the switch queues.
    pub priority: Priority,
    /// Bytes written at the start of the buffer taken from the [`TxBuffer`].
    pub len: usize,
    /// Local flow id of the connection that produced it, so that a driver serving
    /// several peers knows where the datagram goes. Hosts that are not connections
    /// (test hosts, raw blasters) may leave it 0.
    pub flow: u32,
    /// The rest of the datagram, left in the host's memory (only when the buffer's
    /// [`TxBuffer::payload_by_reference`] allowed it): it follows the `len` bytes
    /// written, and [`Host::payload`] gives its bytes.
    pub payload: Option<PayloadRef>,
}

impl Transmit {
    /// The whole datagram's length: the bytes written plus a payload left in place.
    pub fn datagram_len(&self) -> usize {
        self.len + self.payload.map_or(0, |p| p.len as usize)
    }
}

/// Where the payload of a datagram lies when it stays in the host's own memory
/// (the message being sent), so that a datapath can send it with a second iovec
/// instead of a copy ([`Transmit::payload`]). Opaque to the datapath except `len`;
/// valid until the host is next called with `&mut self` for anything but
/// [`Host::poll_transmit`].
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

/// The transmit buffer a datapath offers for the host's next datagram (in the
/// manner of smoltcp's `TxToken`): the host first chooses the datagram's path,
/// class and length, then takes the buffer, so that a datapath can hand out memory
/// of that path (its socket's batch, its send queue's registered slot, a simulator
/// packet of that size) and never has to guess.
///
/// A host that cannot fit a datagram of its `mtu` in [`TxBuffer::capacity`] sends
/// nothing (see [`Host::poll_transmit`]).
pub trait TxBuffer {
    /// The longest datagram [`TxBuffer::take`] accepts.
    fn capacity(&self) -> usize;

    /// True when a DATA payload may stay in the host's memory
    /// ([`Transmit::payload`]) instead of being copied after its header.
    fn payload_by_reference(&self) -> bool {
        false
    }

    /// The `len` bytes (at most [`TxBuffer::capacity`]) to write a datagram for
    /// `path` of class `priority` into. Called at most once per
    /// [`Host::poll_transmit`], by a host that then returns the datagram's
    /// [`Transmit`] (a buffer taken without a transmit returned is left unused).
    fn take(&mut self, path: u16, priority: Priority, len: usize) -> &mut [u8];
}

/// A borrowed transmit buffer is one.
impl<B: TxBuffer + ?Sized> TxBuffer for &mut B {
    fn capacity(&self) -> usize {
        (**self).capacity()
    }

    fn payload_by_reference(&self) -> bool {
        (**self).payload_by_reference()
    }

    fn take(&mut self, path: u16, priority: Priority, len: usize) -> &mut [u8] {
        (**self).take(path, priority, len)
    }
}

/// A plain byte buffer is a transmit buffer for any path.
impl TxBuffer for [u8] {
    fn capacity(&self) -> usize {
        self.len()
    }

    fn take(&mut self, _: u16, _: Priority, len: usize) -> &mut [u8] {
        &mut self[..len]
    }
}

/// A byte vector is a transmit buffer of its length (not its capacity).
impl TxBuffer for Vec<u8> {
    fn capacity(&self) -> usize {
        self.len()
    }

    fn take(&mut self, _: u16, _: Priority, len: usize) -> &mut [u8] {
        &mut self[..len]
    }
}

/// A byte array is a transmit buffer for any path.
impl<const N: usize> TxBuffer for [u8; N] {
    fn capacity(&self) -> usize {
        N
    }

    fn take(&mut self, _: u16, _: Priority, len: usize) -> &mut [u8] {
        &mut self[..len]
    }
}

/// A plain byte buffer that takes DATA payloads by reference: the host writes the
/// header (and any bytes that cannot stay) into it, and leaves the rest in place
/// ([`Transmit::payload`]).
#[derive(Debug)]
pub struct ByReference<'a>(pub &'a mut [u8]);

impl TxBuffer for ByReference<'_> {
    fn capacity(&self) -> usize {
        self.0.len()
    }

    fn payload_by_reference(&self) -> bool {
        true
    }

    fn take(&mut self, _: u16, _: Priority, len: usize) -> &mut [u8] {
        &mut self.0[..len]
    }
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
    /// Bytes the driver's transmit buffers hold ([`TxBuffer::capacity`]).
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
    /// Writes the next datagram to send now into a buffer taken from `tx`, if any.
    ///
    /// `tx` must hold at least the `mtu` of every flow of the host: a datagram is
    /// written whole or not at all, so a connection offered less sends nothing,
    /// counts the refusal in [`SenderStats::short_buffers`] and stalls until it gets
    /// a large enough buffer. Drivers check this when they are set up, with
    /// [`check_transmit_buffer`].
    ///
    /// [`SenderStats::short_buffers`]: crate::SenderStats::short_buffers
    fn poll_transmit<B: TxBuffer + ?Sized>(&mut self, now: Instant, tx: &mut B)
        -> Option<Transmit>;
    /// The next instant at which the host wants `handle_timeout` or `poll_transmit`
    /// to be called, or `None` when it is idle until a datagram arrives.
    fn poll_timeout(&self) -> Option<Instant>;

    /// The bytes of a payload left in place ([`Transmit::payload`]; empty if it is
    /// no longer there).
    fn payload(&self, r: PayloadRef) -> PayloadBytes<'_> {
        let _ = r;
        PayloadBytes::EMPTY
    }
}
