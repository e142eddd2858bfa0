//! Loss detection and recovery: early recovery, taking a failing path out of
//! rotation, reacting to "reorder buffer full" NAKs, and the retransmission timeout.

use super::Sender;
use crate::event::{ConnectionError, Event};
use crate::path::PathStatus;
use crate::scheduler::compute_skips;
use crate::time::{Duration, Instant};
use std::collections::VecDeque;

impl Sender {
    pub(super) fn declare_lost(&mut self, psn: u64, now: Instant, by_timeout: bool) {
        let idx = (psn - self.base) as usize;
        let e = &mut self.table[idx];
        if e.acked || e.queued || e.tx_count == 0 {
            return;
        }
        let path = e.path as usize;
        if e.in_flight {
            e.in_flight = false;
            self.paths[path].inflight -= 1;
        }
        e.queued = true;
        self.retx.insert(psn);
        self.stats.lost_declared += 1;
        let p = &mut self.paths[path];
        p.counters.lost += 1;
        p.consecutive_losses += 1;
        if !by_timeout
            && p.status == PathStatus::Up
            && p.consecutive_losses >= self.cfg.path_down_losses
        {
            self.take_path_down(path, now);
        }
    }

    fn take_path_down(&mut self, path: usize, now: Instant) {
        let p = &mut self.paths[path];
        p.status = PathStatus::Down;
        p.counters.downs += 1;
        p.next_down_probe = now;
        self.selector.reset(path);
        self.stats.path_downs += 1;
        self.pending_path_events
            .push_back(Event::PathDown { path: path as u16 });
        for i in 0..self.table.len() {
            let e = self.table[i];
            if e.in_flight && e.path as usize == path {
                self.declare_lost(self.base + i as u64, now, true);
            }
        }
        compute_skips(&mut self.paths, &mut self.skip_scratch);
    }

    /// Early recovery: a packet is lost when the receiver has seen a PSN more than
    /// `threshold` beyond it and its own path's RTT has passed since it was sent.
    pub(super) fn detect_losses(&mut self, now: Instant) {
        self.loss_timer = None;
        let thr = self.cfg.early_recovery_threshold as u64;
        if self.highest_seen < self.base + thr + 1 {
            return;
        }
        let limit = ((self.highest_seen - thr - self.base) as usize).min(self.table.len());
        // Entries below the first candidate stay non-candidates until sent again
        // (which lowers `loss_scan`): skip them for good.
        let mut first = self.loss_scan.saturating_sub(self.base) as usize;
        while first < limit && (!self.table[first].in_flight || self.table[first].acked) {
            first += 1;
        }
        self.loss_scan = self.base + first as u64;
        // A read-only pass first (the common case: nothing is due), with each path's
        // deadline computed once; only when something is due does the loop below
        // run, declaring losses (which can change later entries) as it goes.
        let fallback = self.cfg.initial_rtt;
        self.deadlines.clear();
        self.deadlines
            .extend(self.paths.iter().map(|p| p.ack_deadline(fallback)));
        let mut next_due: Option<Instant> = None;
        let mut any_due = false;
        for e in self.table.range(first..limit) {
            if !e.in_flight || e.acked {
                continue;
            }
            let due = e.sent_at + self.deadlines[e.path as usize];
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
            let e = self.table[i];
            if !e.in_flight || e.acked {
                continue;
            }
            let due = e.sent_at + self.paths[e.path as usize].ack_deadline(self.cfg.initial_rtt);
            if due <= now {
                self.declare_lost(self.base + i as u64, now, false);
            } else {
                self.loss_timer = Some(self.loss_timer.map_or(due, |t| t.min(due)));
            }
        }
    }

    pub(super) fn on_buffer_full(&mut self, now: Instant, hole: u64, refused: u64) {
        // The receiver could not hold `refused - hole` packets beyond its hole:
        // keep new data within half of that until it drains.
        let span = (refused.saturating_sub(hole) / 2).max(4);
        self.rx_window = Some(self.rx_window.map_or(span, |w| w.min(span)));
        self.rx_window_grow = 0;
        // Resend the hole first if its copy has had time to arrive.
        if hole >= self.base && ((hole - self.base) as usize) < self.table.len() {
            let e = self.table[(hole - self.base) as usize];
            let wait = self.paths[e.path as usize]
                .srtt
                .unwrap_or(self.cfg.initial_rtt);
            if e.in_flight && e.sent_at + wait <= now {
                self.declare_lost(hole, now, true);
            }
        }
        // Cut the windows toward what the receiver can hold, once per RTT.
        let rtt = self
            .paths
            .iter()
            .filter_map(|p| p.srtt)
            .max()
            .unwrap_or(self.cfg.initial_rtt);
        if self.last_nak_cut.is_none_or(|t| now >= t + rtt) {
            self.last_nak_cut = Some(now);
            let min_w = self.cfg.min_window;
            for p in &mut self.paths {
                p.window = (p.window / 2.0).max(min_w);
                p.margin /= 2.0;
            }
            self.stats.buffer_full_cuts += 1;
        }
    }

    fn rto(&self) -> Duration {
        let srtt = self
            .paths
            .iter()
            .filter_map(|p| p.srtt)
            .max()
            .unwrap_or(self.cfg.initial_rtt);
        let base = srtt.saturating_mul(3).max(self.cfg.rto_min);
        base.saturating_mul(1u64 << self.retries.min(16))
    }

    pub(super) fn rto_deadline(&self) -> Option<Instant> {
        (self.in_flight_count() > 0 || !self.retx.is_empty())
            .then(|| self.last_progress + self.rto())
    }

    pub(super) fn on_rto(&mut self, now: Instant, events: &mut VecDeque<Event>) {
        self.retries += 1;
        self.stats.rto_fired += 1;
        if self.retries > self.cfg.retry_limit {
            let err = ConnectionError::RetryExceeded {
                retries: self.retries - 1,
            };
            self.failed = Some(err);
            events.push_back(Event::Error(err));
            return;
        }
        for i in 0..self.table.len() {
            let e = self.table[i];
            if e.in_flight && e.acked {
                self.table[i].in_flight = false;
                self.paths[e.path as usize].inflight -= 1;
            } else if e.in_flight {
                self.declare_lost(self.base + i as u64, now, true);
            }
        }
        // Everything is silent: every path is suspect; keep them up but restart
        // them from W0 so the resends go out gently.
        let cfg = self.cfg.clone();
        for p in &mut self.paths {
            if p.status == PathStatus::Up {
                p.window = cfg.initial_window;
            }
        }
        self.last_progress = now;
    }
}
