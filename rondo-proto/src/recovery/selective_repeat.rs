//! Selective repeat: early recovery (a PSN gap plus a per-path ACK deadline, or
//! the gap alone) and a retransmission timeout with exponential backoff and a
//! retry limit.

use super::LossRecovery;
use super::RtoTimer;
use crate::config::{EarlyRecovery, FlowConfig};
use crate::event::Event;
use crate::sender::Core;
use crate::time::{Duration, Instant};
use std::collections::VecDeque;

/// Selective repeat (docs/engine.md, "Loss recovery"): a packet is lost when the
/// receiver has seen a PSN more than `threshold` beyond it **and** its own path's
/// ACK deadline (smoothed RTT plus the larger of four RTT deviations and a quarter
/// RTT) has passed since it was sent. The RTO is max(`rto_min`, 3 x the largest
/// smoothed RTT), doubling per timeout without progress, and the connection fails
/// after `retry_limit` of them.
///
/// With [`EarlyRecovery::Gap`] the PSN gap alone declares a first transmission
/// lost (the paper's ER); a retransmission still waits for its path's deadline,
/// so that the gap that declared it does not declare it again at once.
#[derive(Clone, Debug)]
pub struct SelectiveRepeat {
    threshold: u64,
    rule: EarlyRecovery,
    rto_timer: RtoTimer,
    loss_timer: Option<Instant>,
    /// No table entry below this PSN is a loss candidate (in flight, not acked):
    /// where detection starts. Every transmission lowers it to its PSN.
    loss_scan: u64,
    /// Scratch: each path's ACK deadline during detection (allocated at the
    /// first: a connection that only receives never detects anything).
    deadlines: Vec<Option<Duration>>,
    /// `FlowConfig::path_order_loss`: a packet overtaken on its own path is a
    /// loss candidate too.
    path_order: bool,
}

impl SelectiveRepeat {
    /// The scheme of a flow configured by `cfg`, starting at `now`.
    pub fn new(cfg: &FlowConfig, now: Instant) -> SelectiveRepeat {
        SelectiveRepeat {
            threshold: u64::from(cfg.early_recovery_threshold),
            rule: cfg.early_recovery,
            rto_timer: RtoTimer::new(cfg, now),
            loss_timer: None,
            loss_scan: u64::from(cfg.initial_psn),
            deadlines: Vec::new(),
            path_order: cfg.path_order_loss,
        }
    }
}

impl LossRecovery for SelectiveRepeat {
    fn set_rto_bounds(&mut self, min: Duration, max: Option<Duration>, retry_limit: u32) {
        self.rto_timer.set_bounds(min, max, retry_limit);
    }

    fn on_transmit(&mut self, psn: u64) {
        self.loss_scan = self.loss_scan.min(psn);
    }

    fn on_transmitted(&mut self, now: Instant, in_flight: u32) {
        self.rto_timer.on_transmitted(now, in_flight);
    }

    fn on_progress(&mut self, now: Instant) {
        self.rto_timer.on_progress(now);
    }

    fn detect_losses(&mut self, now: Instant, core: &mut Core) {
        self.loss_timer = None;
        let thr = self.threshold;
        // Entries below `gap_limit` are beyond the PSN threshold; with the path
        // order rule, any entry up to the highest PSN seen may be, if a packet
        // sent after it on its path was acknowledged there.
        let gap_limit = core
            .highest_seen
            .checked_sub(core.base + thr)
            .map_or(0, |n| (n as usize).min(core.table.len()));
        let limit = if self.path_order {
            (core.highest_seen + 1)
                .saturating_sub(core.base)
                .min(core.table.len() as u64) as usize
        } else {
            gap_limit
        };
        if limit == 0 {
            return;
        }
        // Entries below the first candidate stay non-candidates until sent again
        // (which lowers `loss_scan`): skip them for good.
        let mut first = self.loss_scan.saturating_sub(core.base) as usize;
        while first < limit && (!core.table[first].in_flight || core.table[first].acked) {
            first += 1;
        }
        self.loss_scan = core.base + first as u64;
        // A read-only pass first (the common case: nothing is due), with each path's
        // deadline computed once; only when something is due does the loop below
        // run, declaring losses (which can change later entries) as it goes.
        self.deadlines.clear();
        self.deadlines
            .extend(core.paths.iter().map(|p| p.ack_deadline()));
        let path_order = self.path_order;
        // Sent before a packet that its own path acknowledged.
        let overtaken = |core: &Core, e: &crate::sender::SentPacket| {
            path_order
                && core.paths[e.path as usize]
                    .newest_acked_sent
                    .is_some_and(|t| e.sent_at < t)
        };
        let gap_only = self.rule == EarlyRecovery::Gap;
        let mut next_due: Option<Instant> = None;
        let mut any_due = false;
        for (i, e) in core.table.range(first..limit).enumerate() {
            if !e.in_flight || e.acked {
                continue;
            }
            let gap = first + i < gap_limit;
            if !gap && !overtaken(core, e) {
                continue;
            }
            if gap && gap_only && e.tx_count == 1 {
                any_due = true;
                break;
            }
            // A path without an RTT sample has no deadline yet: its first ACK
            // (or the retransmission timer) decides.
            let Some(deadline) = self.deadlines[e.path as usize] else {
                continue;
            };
            let due = e.sent_at + deadline;
            if due <= now {
                any_due = true;
                break;
            }
            next_due = Some(next_due.map_or(due, |t| t.min(due)));
        }
        if !any_due {
            self.loss_timer = next_due;
            return;
        }
        for i in first..limit {
            let e = core.table[i];
            if !e.in_flight || e.acked {
                continue;
            }
            let gap = i < gap_limit;
            if !gap && !overtaken(core, &e) {
                continue;
            }
            let due = if gap && gap_only && e.tx_count == 1 {
                now
            } else {
                // Declaring losses changes no path's RTT: the first pass's
                // deadlines still hold.
                match self.deadlines[e.path as usize] {
                    Some(d) => e.sent_at + d,
                    None => continue,
                }
            };
            if due <= now {
                core.declare_lost(core.base + i as u64, now, false);
            } else {
                self.loss_timer = Some(self.loss_timer.map_or(due, |t| t.min(due)));
            }
        }
    }

    fn poll_timeout(&self, core: &Core) -> Option<Instant> {
        match (self.rto_timer.deadline(core), self.loss_timer) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn on_timeout(&mut self, now: Instant, core: &mut Core, events: &mut VecDeque<Event>) -> bool {
        if self.loss_timer.is_some_and(|t| t <= now) {
            self.detect_losses(now, core);
        }
        self.rto_timer.fire(now, core, events)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{feedback, resent, send, sent};
    use crate::config::{EarlyRecovery, FlowConfig};
    use crate::sender::Sender;
    use crate::time::Instant;
    use crate::transport::Transport;

    fn one_path(rule: EarlyRecovery) -> FlowConfig {
        FlowConfig {
            transport: Transport::from_name("rrps").unwrap(),
            paths: 1,
            initial_window: 64.0,
            early_recovery_threshold: 4,
            early_recovery: rule,
            ..FlowConfig::default()
        }
    }

    #[test]
    fn the_gap_alone_declares_a_loss_at_once_the_default_waits_for_the_rtt() {
        for rule in [EarlyRecovery::Gap, EarlyRecovery::GapAndRtt] {
            let mut s = sent(&one_path(rule), 10);
            // PSN 9 arrives 1 us after the burst (0..=8 still missing): the gap
            // exceeds 4 for 0..=4.
            feedback(&mut s, 1, 9, 0, 0, None);
            let now = resent(&mut s, 1);
            match rule {
                EarlyRecovery::Gap => assert_eq!(now, [0, 1, 2, 3, 4]),
                EarlyRecovery::GapAndRtt => assert!(now.is_empty(), "{now:?}"),
            }
            // The gap rule's copies are not declared again by the same gap (only
            // their own path deadline would); past the first copies' deadline
            // (initial RTT 20 us and its margin) the default declares them.
            let at = match rule {
                EarlyRecovery::Gap => 3,
                EarlyRecovery::GapAndRtt => 40,
            };
            feedback(&mut s, at, 8, 0, 0, None);
            let later = resent(&mut s, at);
            match rule {
                EarlyRecovery::Gap => assert!(later.is_empty(), "{later:?}"),
                EarlyRecovery::GapAndRtt => assert_eq!(later, [0, 1, 2, 3, 4]),
            }
        }
    }

    /// With `path_order_loss`, packets overtaken on their own path by a packet
    /// sent later and acknowledged there are lost once their path's ACK deadline
    /// has passed, however far below the PSN threshold the gap is; without it,
    /// a threshold of 1024 sees nothing among ten packets.
    #[test]
    fn a_packet_overtaken_on_its_own_path_is_lost_after_its_deadline() {
        for order in [false, true] {
            let cfg = FlowConfig {
                early_recovery_threshold: 1024,
                path_order_loss: order,
                ..one_path(EarlyRecovery::GapAndRtt)
            };
            let mut s = Sender::new(&cfg, Instant::ZERO);
            s.post(
                Instant::ZERO,
                1,
                vec![7u8; 10 * cfg.payload_per_packet()].into(),
                &mut Default::default(),
            );
            for at in [0, 0, 0, 0, 0, 1, 1, 1, 1, 1] {
                send(&mut s, Instant::from_us(at)).unwrap();
            }
            // PSN 9 (sent at 1 us) is acknowledged at 3 us: 0..=4, sent before it
            // on the same path, were overtaken; 5..=8, sent with it, were not.
            feedback(&mut s, 3, 9, 0, 1, None);
            assert!(resent(&mut s, 3).is_empty(), "before the deadline");
            feedback(&mut s, 40, 8, 0, 1, None);
            let lost = resent(&mut s, 40);
            if order {
                assert_eq!(lost, [0, 1, 2, 3, 4]);
            } else {
                assert!(lost.is_empty(), "{lost:?}");
            }
        }
    }
}
