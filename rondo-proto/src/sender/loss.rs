//! Loss verdicts and what every transport does with them: requeueing the packet,
//! taking a failing path out of rotation, and holding new data to what the
//! receiver can take after "reorder buffer full" NAKs. Which packets are lost and
//! when the timer fires is the loss-recovery seam's call ([`crate::recovery`]).

use super::Core;
use crate::event::Event;
use crate::time::Instant;

/// Losses in a row on a silent path that take it out of rotation at a
/// retransmission timeout ([`Core::on_rto`]): with one, a flow sending one
/// packet at a time took a path down at every random loss (61 times in 2,000
/// single-packet WRITEs at 1% loss over the verbs layer).
const BLACK_HOLE_LOSSES: u32 = 2;

impl Core {
    /// Declares `psn` lost: it leaves its path's inflight and waits for
    /// retransmission. Losses found by early recovery (`by_timeout` false) count
    /// toward taking the path out of rotation.
    pub(crate) fn declare_lost(&mut self, psn: u64, now: Instant, by_timeout: bool) {
        if let Some(path) = self.requeue_lost(psn, by_timeout) {
            let p = &mut self.paths[path];
            p.consecutive_losses += 1;
            if !by_timeout
                && self.paths.is_up(path)
                && self.paths[path].consecutive_losses >= self.cfg.path_down_losses
            {
                self.take_path_down(path, now);
            }
        }
    }

    /// Declares `psn` lost because the receiver refused it (a "reorder buffer
    /// full" NAK): resent as any loss, and a loss to the congestion controller
    /// (as by timeout), but not a loss of its path, which delivered it. Counted
    /// as one, a small buffer's refusals took healthy paths out of rotation.
    pub(crate) fn declare_refused(&mut self, psn: u64) {
        self.requeue_lost(psn, true);
    }

    /// The bookkeeping of a loss verdict: the path `psn` was sent on, or `None`
    /// if it was not in flight (acknowledged, already queued, or never sent).
    fn requeue_lost(&mut self, psn: u64, by_timeout: bool) -> Option<usize> {
        let idx = (psn - self.base) as usize;
        let e = &mut self.table[idx];
        if e.acked || e.queued || e.tx_count == 0 {
            return None;
        }
        let path = e.path as usize;
        if e.in_flight {
            e.in_flight = false;
            self.paths.remove_in_flight(path);
        }
        e.queued = true;
        self.retx.insert(psn);
        self.stats.lost_declared += 1;
        self.losses.push((path, by_timeout));
        self.paths[path].counters.lost += 1;
        Some(path)
    }

    /// Queues `psn` for retransmission without a loss verdict (a tail loss probe):
    /// it leaves its path's inflight, which its resent copy joins again; neither
    /// its path nor the congestion controller counts a loss.
    pub(crate) fn queue_probe(&mut self, psn: u64) {
        let idx = (psn - self.base) as usize;
        let e = &mut self.table[idx];
        if e.acked || e.queued || e.tx_count == 0 {
            return;
        }
        if e.in_flight {
            e.in_flight = false;
            self.paths.remove_in_flight(e.path as usize);
        }
        e.queued = true;
        self.retx.insert(psn);
    }

    fn take_path_down(&mut self, path: usize, now: Instant) {
        self.paths.take_down(path);
        let p = &mut self.paths[path];
        p.counters.downs += 1;
        p.next_down_probe = now;
        self.downed.push(path);
        self.stats.path_downs += 1;
        self.pending_path_events
            .push_back(Event::PathDown { path: path as u16 });
        for i in 0..self.table.len() {
            let e = self.table[i];
            if e.in_flight && e.path as usize == path {
                self.declare_lost(self.base + i as u64, now, true);
            }
        }
    }

    /// The receiver could not hold `refused - hole` packets beyond its hole: keep
    /// new data within half of that until it drains (the receiver-limited span,
    /// where the flow's transport keeps it: `Transport::receiver_span`), and
    /// resend the hole first if its copy has had time to arrive. (The congestion
    /// controller decides about its windows: `CongestionControl::on_receiver_full`.)
    pub(super) fn on_buffer_full(&mut self, now: Instant, hole: u64, refused: u64) {
        let limit = self
            .cfg
            .receiver_span
            .unwrap_or_else(|| self.cfg.transport.receiver_span());
        if limit {
            let span = (refused.saturating_sub(hole) / 2).max(4);
            self.rx_window = Some(self.rx_window.map_or(span, |w| w.min(span)));
            self.rx_window_grow = 0;
        }
        if hole >= self.base && ((hole - self.base) as usize) < self.table.len() {
            let e = self.table[(hole - self.base) as usize];
            let wait = self.paths[e.path as usize]
                .srtt
                .unwrap_or(self.cfg.initial_rtt);
            if e.in_flight && e.sent_at + wait <= now {
                self.declare_lost(hole, now, true);
            }
        }
    }

    /// The retransmission timer fired: everything in flight is lost (packets known
    /// delivered just leave their path's inflight). A path that lost packets and
    /// has been silent since before the oldest of them was sent, while another path
    /// answered after that, is black-holed and leaves rotation at once (its window
    /// may have shrunk below `path_down_losses` packets, and with a large
    /// early-recovery threshold, as over a host stack, only the timer finds its
    /// losses); its down probes bring it back when it answers again. It takes
    /// [`BLACK_HOLE_LOSSES`] losses in a row on the path: one lost packet alone
    /// on its path (a flow that sends one small message at a time) is no
    /// evidence of a black hole.
    pub(crate) fn on_rto(&mut self, now: Instant) {
        let mut oldest_lost: Vec<Option<Instant>> = vec![None; self.paths.len()];
        for i in 0..self.table.len() {
            let e = self.table[i];
            if e.in_flight && e.acked {
                self.table[i].in_flight = false;
                self.paths.remove_in_flight(e.path as usize);
            } else if e.in_flight {
                let oldest = &mut oldest_lost[e.path as usize];
                *oldest = Some(oldest.map_or(e.sent_at, |t| t.min(e.sent_at)));
                self.declare_lost(self.base + i as u64, now, true);
            }
        }
        for (path, oldest) in oldest_lost.into_iter().enumerate() {
            let Some(since) = oldest else { continue };
            let p = &self.paths[path];
            let silent = p.last_feedback.is_none_or(|t| t < since);
            let others_answer = self.paths.iter().enumerate().any(|(q, o)| {
                q != path && self.paths.is_up(q) && o.last_feedback.is_some_and(|t| t >= since)
            });
            if silent
                && others_answer
                && p.consecutive_losses >= BLACK_HOLE_LOSSES
                && self.paths.is_up(path)
            {
                self.take_path_down(path, now);
            }
        }
    }
}
