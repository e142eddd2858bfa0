//! Timers: the next wake-up, ARCC window updates, capacity-probing phases and
//! enabling the packet scheduler.

use super::{update_interval, Sender};
use crate::event::Event;
use crate::path::PathStatus;
use crate::scheduler::compute_skips;
use crate::time::Instant;
use std::collections::VecDeque;

impl Sender {
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        if self.failed.is_some() {
            return None;
        }
        let mut t = Instant::MAX;
        for p in &self.paths {
            if let Some(u) = p.next_update {
                t = t.min(u);
            }
            if p.status == PathStatus::Down {
                t = t.min(p.next_down_probe);
            }
        }
        if let Some(d) = self.rto_deadline() {
            t = t.min(d);
        }
        if let Some(l) = self.loss_timer {
            t = t.min(l);
        }
        if self.has_data() {
            let open = self.paths.iter().any(|p| p.open_window() > 0.0);
            if open {
                t = t.min(if self.cfg.pacing {
                    self.pace_next
                } else {
                    Instant::ZERO
                });
            }
            if self.probing_until.is_some_and(|end| self.line_next < end)
                && self.up_paths().next().is_some()
            {
                t = t.min(self.line_next);
            }
        }
        (t != Instant::MAX).then_some(t)
    }

    pub(crate) fn handle_timeout(&mut self, now: Instant, events: &mut VecDeque<Event>) {
        if self.failed.is_some() {
            return;
        }
        if self.probing_until.is_some_and(|end| end <= now) {
            self.probing_until = None;
        }
        self.expire_acked_inflight(now);
        let mut updated = false;
        for i in 0..self.paths.len() {
            let Some(due) = self.paths[i].next_update else {
                continue;
            };
            if due > now {
                continue;
            }
            let base_rtt = self.paths[i].base_rtt_or(self.cfg.initial_rtt);
            if self.paths[i].inflight == 0 && !self.has_data() {
                // Idle: freeze the controller; the next ACK restarts its interval.
                self.paths[i].next_update = None;
                continue;
            }
            let params = self.params;
            self.paths[i].arcc_update(now, base_rtt, &params);
            let tu = update_interval(&self.cfg, base_rtt);
            self.paths[i].next_update = Some(now + tu);
            updated = true;
            self.check_probe_trigger(now);
        }
        if updated {
            self.refresh_tau();
            self.maybe_enable_scheduler(now, events);
            if self.scheduler_on {
                compute_skips(&mut self.paths, &mut self.skip_scratch);
            }
        }
        if self.loss_timer.is_some_and(|t| t <= now) {
            self.detect_losses(now);
        }
        if let Some(d) = self.rto_deadline() {
            if d <= now {
                self.on_rto(now, events);
            }
        }
        events.append(&mut self.pending_path_events);
    }

    pub(super) fn start_probing(&mut self, until: Instant) {
        self.probing_until = Some(until);
        for p in &mut self.paths {
            p.probe_absorbed = false;
        }
    }

    fn check_probe_trigger(&mut self, now: Instant) {
        if !self.cfg.probing || self.probing(now) {
            self.quiet_updates = 0;
            return;
        }
        let t = self.max_base_rtt();
        let all_old_acked = self
            .table
            .iter()
            .all(|e| !e.in_flight || e.sent_at + t > now);
        if all_old_acked && self.has_data() {
            self.quiet_updates += 1;
        } else {
            self.quiet_updates = 0;
        }
        let up = self.up_paths().count().max(1) as u32;
        if self.quiet_updates >= self.cfg.probe_trigger_updates * up {
            self.quiet_updates = 0;
            self.start_probing(now + t.mul_f64(self.cfg.probe_duration_rtts));
            self.stats.probing_phases += 1;
        }
    }

    fn maybe_enable_scheduler(&mut self, now: Instant, events: &mut VecDeque<Event>) {
        if !self.cfg.scheduler || self.scheduler_on {
            return;
        }
        if self.probing(now) {
            // Windows still jump while probing: the delays are not settled yet.
            return;
        }
        let need = self.cfg.scheduler_stable_samples;
        let mut any = false;
        for p in self.paths.iter().filter(|p| p.status == PathStatus::Up) {
            if p.fwd_stable_samples < need || p.srtt.is_none() {
                return;
            }
            any = true;
        }
        if any {
            self.scheduler_on = true;
            self.scheduler_enabled_at = Some(now);
            events.push_back(Event::SchedulerEnabled);
        }
    }
}
