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
        let mut t = Instant::MAX;
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
        // With nothing to send, the controller's deadlines wake nobody, and
        // with every window shut those before its horizon (asked only when
        // its next tick comes before the other deadlines): they run later,
        // each at its own time (`catch_up`).
        if !c.ticks_deferred() {
            if let Some(tick) = self.cc.poll_timeout().filter(|&tick| tick < t) {
                t = t.min(self.ticks_idle_until().unwrap_or(tick));
            }
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

    /// Whether [`Sender::handle_timeout`] at `now` has anything to do: a timer
    /// of the controller or of the recovery is due, or state that it settles is
    /// waiting. False when the only deadline that came is the send time, which
    /// `poll_transmit` serves: a paced sender is woken for each packet, and the
    /// wake-up then skips the timers' pass and the deadline's recomputation
    /// (nothing they read has changed). Exact: every part of `handle_timeout`
    /// acts only on these (the controllers' ticks and the recoveries' timeouts
    /// do nothing before their `poll_timeout`, but for the end of a probing
    /// phase; a scan for acknowledged packets still in flight runs whenever
    /// there is one, since it also refreshes its own deadline).
    pub(crate) fn timers_due(&self, now: Instant) -> bool {
        let c = &self.core;
        if c.failed.is_some() {
            return false;
        }
        c.inflight_expiry.is_some()
            || !c.losses.is_empty()
            || !c.downed.is_empty()
            || !c.pending_path_events.is_empty()
            || self.cc.poll_timeout().is_some_and(|t| t <= now)
            // A probing phase that has ended is cleared at the tick: whether
            // one is under way at all puts the connection in the probing set.
            || self.cc.probing_until().is_some_and(|end| end <= now)
            || self.recovery.poll_timeout(c).is_some_and(|t| t <= now)
    }

    pub(crate) fn handle_timeout(&mut self, now: Instant, events: &mut VecDeque<Event>) {
        self.catch_up(now, events);
        self.run_timers(now, events);
    }

    /// Runs the controller's ticks that `poll_timeout` left for later, each at
    /// its own time and in order, before anything at `now` reads or changes
    /// the sender. Only where `FlowConfig::timers_on_time` says the driver is
    /// punctual; two kinds of tick wait for the flow's next feedback, post or
    /// timer:
    /// - With nothing to send, what the ticks decide (windows, rates, the
    ///   scheduler's inputs) matters only to a later send. A flow whose last
    ///   packets wait for their ACKs no longer wakes its host for each
    ///   per-path update: in the 320-host all-to-all (102,080 flows) 2.9 M of
    ///   4.0 M timer runs were such wake-ups (issue 10).
    /// - With data waiting and every window shut, the ticks before the
    ///   controller's horizon ([`CongestionControl::ticks_idle_until`]): none
    ///   of them opens a window or starts a probing phase.
    ///
    /// The same ticks at the same times, only later: nothing that they read
    /// moves meanwhile, since whatever would move it (a datagram, a post,
    /// another timer) calls this first.
    pub(crate) fn catch_up(&mut self, now: Instant, events: &mut VecDeque<Event>) {
        // With data waiting, the ticks before the horizon `poll_timeout` left
        // for later (the state is as it was then: nothing has run since).
        let horizon = if self.core.ticks_deferred() {
            None
        } else {
            self.ticks_idle_until()
        };
        // Otherwise `poll_timeout` had them: nothing was left for later. A
        // timer's verdict that queues a retransmission ends the deferral too.
        while self.core.ticks_deferred() || horizon.is_some() {
            // A tick due exactly at `now` runs before what arrives then when
            // the flow had nothing to send, after it when its windows were
            // shut (each the order that gave identical reports).
            let due = |t: Instant| match horizon {
                None => t <= now,
                Some(h) => t < now && t < h,
            };
            let Some(t) = self.cc.poll_timeout().filter(|&t| due(t)) else {
                break;
            };
            self.run_timers(t, events);
            if self.cc.poll_timeout().is_some_and(|next| next <= t) {
                // A controller that keeps asking for the same moment: the
                // timer at `now` runs it (as a wake-up at `t` would have).
                break;
            }
        }
    }

    /// With data waiting and every window shut (`FlowConfig::timers_on_time`):
    /// the controller's horizon before which its ticks wait for the flow's
    /// next event ([`CongestionControl::ticks_idle_until`]). In the 320-host
    /// all-to-all, 5.65 M wake-ups found every window of their flow shut, and
    /// 5.48 M of them left it so (issue 10). Asked only where the ticks are
    /// not deferred already (`Core::ticks_deferred`): with data waiting.
    fn ticks_idle_until(&self) -> Option<Instant> {
        let c = &self.core;
        if !c.cfg.timers_on_time || c.failed.is_some() {
            return None;
        }
        self.cc.ticks_idle_until(&c.paths, c)
    }

    /// What a wake-up at `now` runs.
    fn run_timers(&mut self, now: Instant, events: &mut VecDeque<Event>) {
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
