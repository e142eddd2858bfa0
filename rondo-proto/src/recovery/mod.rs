//! The loss-recovery seam: which packets are lost, and when the retransmission
//! timer fires.
//!
//! A recovery scheme watches transmissions and progress, decides loss verdicts on
//! the sender's table (the sender requeues the packets, counts them against their
//! paths and tells the congestion controller), and owns the retransmission
//! timeout with its backoff and retry limit. [`SelectiveRepeat`] is Rondo's
//! default (early recovery with a PSN threshold and a per-path RACK-style
//! deadline, RTO with exponential backoff); [`RackTlp`] is RACK-TLP (RFC 8985)
//! per flow or per path; [`GoBackN`] is an RC NIC's (NAK-driven, go-back-N or
//! selective, with an outstanding-PSN limit). [`AnyRecovery`] dispatches
//! statically.

mod go_back_n;
mod rack;
mod selective_repeat;

pub use go_back_n::{GoBackN, NakRecovery};
pub use rack::{RackScope, RackTlp};
pub use selective_repeat::SelectiveRepeat;

use crate::config::{FlowConfig, LossRecoveryKind};
use crate::event::ConnectionError;
use crate::event::Event;
use crate::sender::Core;
use crate::time::{Duration, Instant};
use std::collections::VecDeque;

/// A loss-recovery scheme (crate-internal: it works on the sender's core).
pub(crate) trait LossRecovery {
    /// `psn` is about to be (re)transmitted.
    fn on_transmit(&mut self, psn: u64);
    /// A data packet went out at `now`; `in_flight` packets are in flight now.
    fn on_transmitted(&mut self, now: Instant, in_flight: u32);
    /// The retransmission timeout's new bounds and retry limit
    /// (`FlowConfig::rto_min`, `rto_max`, `retry_limit`).
    fn set_rto_bounds(&mut self, min: Duration, max: Option<Duration>, retry_limit: u32);
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
    /// A NAK said the receiver's next expected PSN is `expected`; the NAKed
    /// packet was sent at `naked_sent` (its echoed timestamp). Schemes that recover
    /// from NAKs act on it (after the NAKed packet itself is handled).
    fn on_nak(&mut self, _now: Instant, _expected: u64, _naked_sent: Instant, _core: &mut Core) {}
    /// The most PSNs outstanding from the lowest unacknowledged one (an RC NIC's
    /// PSN window): new PSNs beyond it wait. `None`: no limit.
    fn psn_window(&self) -> Option<u64> {
        None
    }
}

/// The retransmission timer every scheme shares: max(`rto_min`, 3 x the largest
/// smoothed RTT of any path, the initial RTT before a sample), doubled by each
/// timeout without progress, running from the last progress (or the first packet
/// of a busy period) while anything is in flight or waits for retransmission;
/// past `retry_limit` timeouts in a row the connection fails.
#[derive(Clone, Debug)]
pub(crate) struct RtoTimer {
    /// RTT assumed before any sample (also the schemes' own fallback).
    pub(crate) initial_rtt: Duration,
    rto_min: Duration,
    rto_max: Option<Duration>,
    retry_limit: u32,
    retries: u32,
    last_progress: Instant,
}

impl RtoTimer {
    pub(crate) fn new(cfg: &FlowConfig, now: Instant) -> RtoTimer {
        RtoTimer {
            initial_rtt: cfg.initial_rtt,
            rto_min: cfg.rto_min,
            rto_max: cfg.rto_max,
            retry_limit: cfg.retry_limit,
            retries: 0,
            last_progress: now,
        }
    }

    fn rto(&self, core: &Core) -> Duration {
        let srtt = core.max_srtt.unwrap_or(self.initial_rtt);
        let base = srtt.saturating_mul(3).max(self.rto_min);
        let rto = base.saturating_mul(1u64 << self.retries.min(16));
        self.rto_max.map_or(rto, |max| rto.min(max))
    }

    /// New bounds of the timeout and retry limit (checked by
    /// `FlowConfig::validate`).
    pub(crate) fn set_bounds(&mut self, min: Duration, max: Option<Duration>, retry_limit: u32) {
        self.rto_min = min;
        self.rto_max = max;
        self.retry_limit = retry_limit;
    }

    /// When the timer fires, if it runs.
    pub(crate) fn deadline(&self, core: &Core) -> Option<Instant> {
        (core.retx_pending() || core.in_flight_count() > 0)
            .then(|| self.last_progress + self.rto(core))
    }

    /// A data packet went out; `in_flight` packets are in flight now.
    pub(crate) fn on_transmitted(&mut self, now: Instant, in_flight: u32) {
        if self.last_progress < now && in_flight == 1 {
            self.last_progress = now; // the RTO runs from the first packet of a busy period
        }
    }

    /// An ACK acknowledged something new.
    pub(crate) fn on_progress(&mut self, now: Instant) {
        self.retries = 0;
        self.last_progress = now;
    }

    /// Fires the timer if it is due at `now`: true when it fired and the flow goes
    /// on (`core.on_rto` has run); past the retry limit it fails the connection
    /// (`core.failed`, an [`Event::Error`]) and answers false, as when not due.
    pub(crate) fn fire(
        &mut self,
        now: Instant,
        core: &mut Core,
        events: &mut VecDeque<Event>,
    ) -> bool {
        // The timeout is at least `rto_min` after the last progress: before that
        // the per-path scans of `deadline` cannot make it due.
        if now < self.last_progress + self.rto_min || self.deadline(core).is_none_or(|d| d > now) {
            return false;
        }
        self.retries += 1;
        core.stats.rto_fired += 1;
        if self.retries > self.retry_limit {
            let err = ConnectionError::RetryExceeded {
                retries: self.retries - 1,
            };
            core.failed = Some(err);
            events.push_back(Event::Error(err));
            return false;
        }
        core.on_rto(now);
        self.last_progress = now;
        true
    }
}

/// Every loss-recovery scheme, dispatched statically.
#[derive(Clone, Debug)]
pub enum AnyRecovery {
    /// Selective repeat with early recovery and an RTO.
    SelectiveRepeat(SelectiveRepeat),
    /// RACK-TLP per flow or per path.
    RackTlp(RackTlp),
    /// RC NIC recovery: NAKs (go-back-N or selective), an RTO, a PSN window.
    GoBackN(GoBackN),
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
            AnyRecovery::GoBackN($r) => $e,
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
    fn set_rto_bounds(&mut self, min: Duration, max: Option<Duration>, retry_limit: u32) {
        dispatch!(self, r => r.set_rto_bounds(min, max, retry_limit))
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
    fn on_nak(&mut self, now: Instant, expected: u64, naked_sent: Instant, core: &mut Core) {
        dispatch!(self, r => r.on_nak(now, expected, naked_sent, core))
    }
    fn psn_window(&self) -> Option<u64> {
        dispatch!(self, r => r.psn_window())
    }
}

/// A sender driven packet by packet, for the recovery schemes' rule tests.
#[cfg(test)]
mod testing {
    use crate::config::FlowConfig;
    use crate::sender::Sender;
    use crate::time::Instant;
    use crate::wire::{CommonRepr, FeedbackRepr, Flags, NakReason};
    use crate::Psn;
    use std::collections::VecDeque;

    /// A sender configured by `cfg` with `packets` packets posted and sent at 0.
    pub(super) fn sent(cfg: &FlowConfig, packets: usize) -> Sender {
        let mut s = Sender::new(cfg, Instant::ZERO);
        s.post(
            Instant::ZERO,
            1,
            vec![7u8; packets * cfg.payload_per_packet()].into(),
            &mut Default::default(),
        );
        for _ in 0..packets {
            send(&mut s, Instant::ZERO);
        }
        s
    }

    /// The (PSN, retransmission) of the next DATA packet sent at `now`.
    pub(super) fn send(s: &mut Sender, now: Instant) -> Option<(u32, bool)> {
        let mut buf = vec![0u8; 1500];
        s.core.last_data = None;
        s.poll_transmit(now, &mut buf, 2)?;
        s.core.last_data
    }

    /// Feedback for `psn` (sent at `sent_us`) with cumulative ACK `cum`, at `now_us`.
    pub(super) fn feedback(
        s: &mut Sender,
        now_us: u64,
        psn: u32,
        cum: u32,
        sent_us: u64,
        nak: Option<NakReason>,
    ) {
        let common = CommonRepr {
            flow: 1,
            psn: Psn::ZERO,
            path: 0,
            flags: Flags::empty(),
            timestamp_ns: now_us * 1000,
        };
        let fb = FeedbackRepr {
            acked_psn: Psn(psn),
            cum_ack: Psn(cum),
            highest_psn: Psn(psn),
            acked_path: 0,
            of_probe: false,
            duplicate: false,
            echo_timestamp_ns: sent_us * 1000,
            rx_timestamp_ns: now_us * 1000,
        };
        let now = Instant::from_us(now_us);
        assert!(s.on_feedback(
            now,
            &common,
            &fb,
            nak,
            std::iter::empty(),
            &mut VecDeque::new()
        ));
    }

    pub(super) fn resent(s: &mut Sender, now_us: u64) -> Vec<u32> {
        let now = Instant::from_us(now_us);
        std::iter::from_fn(|| send(s, now))
            .take_while(|&(_, retx)| retx)
            .map(|(psn, _)| psn)
            .collect()
    }
}
