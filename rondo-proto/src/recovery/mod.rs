//! The loss-recovery seam: which packets are lost, and when the retransmission
//! timer fires.
//!
//! A recovery scheme watches transmissions and progress, decides loss verdicts on
//! the sender's table (the sender requeues the packets, counts them against their
//! paths and tells the congestion controller), and owns the retransmission
//! timeout with its backoff and retry limit. [`SelectiveRepeat`] is the one
//! scheme so far (early recovery with a PSN threshold and a per-path RACK-style
//! deadline, RTO with exponential backoff); [`AnyRecovery`] dispatches statically.

mod selective_repeat;

pub use selective_repeat::SelectiveRepeat;

use crate::event::Event;
use crate::sender::Core;
use crate::time::Instant;
use std::collections::VecDeque;

/// A loss-recovery scheme (crate-internal: it works on the sender's core).
pub(crate) trait LossRecovery {
    /// `psn` is about to be (re)transmitted.
    fn on_transmit(&mut self, psn: u64);
    /// A data packet went out at `now`; `in_flight` packets are in flight now.
    fn on_transmitted(&mut self, now: Instant, in_flight: u32);
    /// An ACK acknowledged something new.
    fn on_progress(&mut self, now: Instant);
    /// Feedback arrived (or a loss timer fired): declare what is lost now.
    fn detect_losses(&mut self, now: Instant, core: &mut Core);
    /// The next time [`LossRecovery::on_timeout`] has something to do.
    fn poll_timeout(&self, core: &Core) -> Option<Instant>;
    /// Runs the timers due at `now`. Returns true when the retransmission timer
    /// fired and the flow goes on (the congestion controller restarts); a timeout
    /// past the retry limit fails the connection instead (`core.failed`, with an
    /// [`Event::Error`] in `events`).
    fn on_timeout(&mut self, now: Instant, core: &mut Core, events: &mut VecDeque<Event>) -> bool;
}

/// Every loss-recovery scheme, dispatched statically.
#[derive(Clone, Debug)]
pub enum AnyRecovery {
    /// Selective repeat with early recovery and an RTO.
    SelectiveRepeat(SelectiveRepeat),
}

macro_rules! dispatch {
    ($self:ident, $r:ident => $e:expr) => {
        match $self {
            AnyRecovery::SelectiveRepeat($r) => $e,
        }
    };
}

impl LossRecovery for AnyRecovery {
    fn on_transmit(&mut self, psn: u64) {
        dispatch!(self, r => r.on_transmit(psn))
    }
    fn on_transmitted(&mut self, now: Instant, in_flight: u32) {
        dispatch!(self, r => r.on_transmitted(now, in_flight))
    }
    fn on_progress(&mut self, now: Instant) {
        dispatch!(self, r => r.on_progress(now))
    }
    fn detect_losses(&mut self, now: Instant, core: &mut Core) {
        dispatch!(self, r => r.detect_losses(now, core))
    }
    fn poll_timeout(&self, core: &Core) -> Option<Instant> {
        dispatch!(self, r => r.poll_timeout(core))
    }
    fn on_timeout(&mut self, now: Instant, core: &mut Core, events: &mut VecDeque<Event>) -> bool {
        dispatch!(self, r => r.on_timeout(now, core, events))
    }
}
