//! The loss-recovery seam: which packets are lost, and when the retransmission
//! timer fires.
//!
//! A recovery scheme watches transmissions and progress, decides loss verdicts on
//! the sender's table (the sender requeues the packets, counts them against their
//! paths and tells the congestion controller), and owns the retransmission
//! timeout with its backoff and retry limit. [`SelectiveRepeat`] is Rondo's
//! default (early recovery with a PSN threshold and a per-path RACK-style
//! deadline, RTO with exponential backoff); [`RackTlp`] is RACK-TLP (RFC 8985)
//! per flow or per path. [`AnyRecovery`] dispatches statically.

mod rack;
mod selective_repeat;

pub use rack::{RackScope, RackTlp};
pub use selective_repeat::SelectiveRepeat;

use crate::config::{FlowConfig, LossRecoveryKind};
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
    /// The ACK of `psn`'s copy sent at `sent_at` on `path` arrived (its own ACK,
    /// not a cumulative one). Schemes that order deliveries by send time (RACK)
    /// need it; the default ignores it.
    fn on_delivered(&mut self, _now: Instant, _path: usize, _psn: u64, _sent_at: Instant) {}
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
    /// RACK-TLP per flow or per path.
    RackTlp(RackTlp),
}

impl AnyRecovery {
    /// The scheme `cfg.loss_recovery` names, for transports that let it be chosen.
    pub(crate) fn configured(cfg: &FlowConfig, now: Instant) -> AnyRecovery {
        match cfg.loss_recovery {
            LossRecoveryKind::SelectiveRepeat => {
                AnyRecovery::SelectiveRepeat(SelectiveRepeat::new(cfg, now))
            }
            LossRecoveryKind::RackFlow => {
                AnyRecovery::RackTlp(RackTlp::new(cfg, now, RackScope::Flow))
            }
            LossRecoveryKind::RackPath => {
                AnyRecovery::RackTlp(RackTlp::new(cfg, now, RackScope::Path))
            }
        }
    }
}

macro_rules! dispatch {
    ($self:ident, $r:ident => $e:expr) => {
        match $self {
            AnyRecovery::SelectiveRepeat($r) => $e,
            AnyRecovery::RackTlp($r) => $e,
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
    fn on_delivered(&mut self, now: Instant, path: usize, psn: u64, sent_at: Instant) {
        dispatch!(self, r => r.on_delivered(now, path, psn, sent_at))
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
