//! What the engine hands a datapath to send, and the datapath-facing trait.

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
    /// several peers knows where the datagram goes (0 for hosts with one peer).
    pub flow: u32,
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
    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit>;
    /// The next instant at which the host wants `handle_timeout` or `poll_transmit`
    /// to be called, or `None` when it is idle until a datagram arrives.
    fn poll_timeout(&self) -> Option<Instant>;
}
