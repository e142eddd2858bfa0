//! The measurement tap (issue 10, "one network model"): what a transport reports
//! so that a driver (the simulator, a datapath's statistics) measures goodput,
//! NIC-level OOD and RBO (paper §3, "out-of-order degree" and "reorder buffer
//! occupancy"), retransmissions and spurious retransmissions without reading the
//! transport's internals (its reorder buffer, its headers, its per-connection
//! statistics).
//!
//! A transport implements [`MetricsTap`]. Recording is off until
//! [`MetricsTap::set_tap`] turns it on, so a datapath that does not measure pays
//! nothing; [`TapLog`] is the queue a transport keeps its events in.
//!
//! ```
//! use rondo_proto::tap::{MetricsTap, TapEvent};
//! use rondo_proto::{BufferConfig, Endpoint, Host, Instant, SharedBuffer};
//!
//! let mut ep = Endpoint::new(SharedBuffer::in_heap(BufferConfig::default()).unwrap());
//! ep.set_tap(true);
//! ep.handle_datagram(Instant::ZERO, 0, b"not a datagram", false);
//! // Every datagram handed in is reported, even one the transport could not use.
//! assert_eq!(
//!     ep.poll_tap(),
//!     Some(TapEvent::Arrival {
//!         flow: None,
//!         nic_ood: 0,
//!         rbo_slots: 0,
//!         new_data: false,
//!         discarded: false,
//!         delivered: 0,
//!     })
//! );
//! assert_eq!(ep.poll_tap(), None);
//! ```

use std::collections::VecDeque;

/// One thing a transport did that a measurement counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TapEvent {
    /// A data packet was written for transmission (by `poll_transmit`).
    DataSent {
        /// Local flow id of the sending connection.
        flow: u32,
        /// Its packet sequence number.
        psn: u32,
        /// It is a retransmission of a PSN sent before.
        retransmission: bool,
    },
    /// A datagram was handed to the transport (by `handle_datagram`).
    Arrival {
        /// Local flow id of the connection that took it; `None` when none did
        /// (malformed, unknown flow, bad token).
        flow: Option<u32>,
        /// NIC-level OOD just before it: out-of-order packets held over all flows
        /// (paper §3).
        nic_ood: u64,
        /// Reorder-buffer occupancy just before it, in slots (RBO, paper §3).
        rbo_slots: u64,
        /// It carried data new to the receiver (delivered in order or buffered),
        /// not a duplicate, a drop or a control packet.
        new_data: bool,
        /// It carried data the transport threw away without keeping it (its
        /// reorder buffer was full, the PSN lay beyond the receive window, or the
        /// receiver policy refused it): the sender has to send it again, so a
        /// driver counts it as a loss, like a drop in the network.
        discarded: bool,
        /// Payload bytes it let the connection deliver in order to the application.
        delivered: u64,
    },
}

/// Totals a transport keeps for its whole lifetime (a driver subtracts two
/// readings to count a window).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TapCounters {
    /// Retransmissions whose original had already arrived.
    pub spurious_retransmissions: u64,
    /// Data packets the receiver dropped because its reorder buffer was full.
    pub reorder_drops: u64,
    /// NIC-level OOD now.
    pub nic_ood: u64,
}

/// A transport that feeds a measurement tap.
pub trait MetricsTap {
    /// Starts (or stops, dropping what is queued) recording [`TapEvent`]s.
    fn set_tap(&mut self, on: bool);
    /// The oldest recorded event not yet taken.
    fn poll_tap(&mut self) -> Option<TapEvent>;
    /// The lifetime totals.
    fn tap_counters(&self) -> TapCounters;
}

/// The event queue behind a [`MetricsTap`]: records only while on.
#[derive(Clone, Debug, Default)]
pub struct TapLog {
    on: bool,
    events: VecDeque<TapEvent>,
}

impl TapLog {
    /// Whether events are being recorded.
    pub fn is_on(&self) -> bool {
        self.on
    }

    /// Turns recording on or off; off drops the queued events.
    pub fn set_on(&mut self, on: bool) {
        self.on = on;
        if !on {
            self.events.clear();
        }
    }

    /// Records `e` when on.
    pub fn record(&mut self, e: TapEvent) {
        if self.on {
            self.events.push_back(e);
        }
    }

    /// The oldest event not yet taken.
    pub fn pop(&mut self) -> Option<TapEvent> {
        self.events.pop_front()
    }
}
