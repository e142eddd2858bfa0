//! Timers: the next wake-up, and running what is due (the congestion controller's
//! tick, the scheduler's refresh after it, loss recovery's timers).

use super::Sender;
use crate::cc::CongestionControl;
use crate::event::Event;
use crate::path::PathStatus;
use crate::recovery::LossRecovery;
use crate::scheduler::PacketSelector;
use crate::select::PathSelector;
use crate::time::Instant;
use std::collections::VecDeque;

impl Sender {
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        let c = &self.core;
        if c.failed.is_some() {
            return None;
        }
        let mut t = self.cc.poll_timeout().unwrap_or(Instant::MAX);
        if c.probes_down_paths() {
            for (p, status) in c.paths.iter().zip(c.paths.statuses()) {
                if *status == PathStatus::Down {
                    t = t.min(p.next_down_probe);
                }
            }
        }
        if let Some(d) = self.recovery.poll_timeout(c) {
            t = t.min(d);
        }
        if let Some(d) = c.inflight_expiry {
            t = t.min(d);
        }
        // Capacity probes wait for the endpoint's line clock, not for a timer here.
        // The open windows (a pass over the paths) are read only when the send
        // time would come before the other deadlines.
        if c.has_data() && !self.select_blocked {
            let send = if self.cc.paced() {
                c.pace_next
            } else {
                Instant::ZERO
            };
            if send < t && self.cc.any_open(&c.paths) {
                t = send;
            }
        }
        (t != Instant::MAX).then_some(t)
    }

    pub(crate) fn handle_timeout(&mut self, now: Instant, events: &mut VecDeque<Event>) {
        if self.core.failed.is_some() {
            return;
        }
        if self.core.expire_acked_inflight(now) {
            // A window that selection found shut has room again: with nothing
            // else in flight no feedback would come to say so, and the flow
            // would wait for ever (UET at 10% loss over the verbs layer did).
            self.select_blocked = false;
        }
        let tick = self.cc.on_tick(now, &self.core.paths, &self.core);
        if tick.probing_phases > 0 {
            // Written only when it moves: the counters' line is cold otherwise.
            self.core.stats.probing_phases += u64::from(tick.probing_phases);
        }
        if tick.opened {
            self.select_blocked = false;
        }
        if tick.updated {
            self.select_blocked = false;
            self.scheduler
                .on_update(now, &self.core.paths, &self.cc, events);
        }
        if self.recovery.on_timeout(now, &mut self.core, events) {
            self.select_blocked = false;
            self.cc.on_rto(now, &self.core.paths);
            self.selector.on_rto(now);
        }
        self.settle(now);
        self.core.flush_path_events(events);
    }
}
