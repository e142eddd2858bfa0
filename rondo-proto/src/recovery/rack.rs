//! RACK-TLP (RFC 8985) over the flow's PSN space, per flow or per path.
//!
//! RACK: a packet is lost when a packet sent after it (later send time, or the
//! same time and a higher PSN) has been delivered, and `rtt + reo_wnd` has
//! passed since it was sent; `rtt` is the RTT of the most recently sent packet
//! delivered, `reo_wnd` a quarter of the minimum RTT (RFC 8985 §6.2, without
//! DSACK-driven adaptation: the receiver reports no duplicates). Per flow, "sent
//! after" ranges over the whole flow; per path, only over the packet's own path,
//! so reordering between paths never looks like loss.
//!
//! TLP: when nothing was sent or acknowledged for two smoothed RTTs while packets
//! are in flight, the highest one in flight is resent as a probe (once, until a
//! delivery), so a lost tail gets an ACK that lets RACK find the losses, instead
//! of waiting for the RTO. Per path, each path has its own probe timer.
//!
//! RTO as [`super::SelectiveRepeat`]: max(`rto_min`, 3 x the largest smoothed
//! RTT), doubling per timeout without progress, the connection failing after
//! `retry_limit` of them.

use super::LossRecovery;
use super::RtoTimer;
use crate::config::FlowConfig;
use crate::event::Event;
use crate::sender::Core;
use crate::time::{Duration, Instant};
use std::collections::VecDeque;

/// What "sent after" ranges over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RackScope {
    /// The whole flow (RFC 8985 as written, over the PSN space).
    Flow,
    /// Each path on its own (Falcon's per-path RACK-TLP).
    Path,
}

/// RACK state of one scope (the flow, or one path).
#[derive(Clone, Copy, Debug, Default)]
struct RackGroup {
    /// Send time and PSN of the most recently sent packet delivered.
    xmit: Option<(Instant, u64)>,
    /// Its RTT.
    rtt: Duration,
    min_rtt: Option<Duration>,
    /// A tail loss probe is out, and nothing was delivered since.
    probe_out: bool,
}

/// RACK-TLP loss detection with an RTO.
#[derive(Clone, Debug)]
pub struct RackTlp {
    scope: RackScope,
    groups: Vec<RackGroup>,
    rto_timer: RtoTimer,
    loss_timer: Option<Instant>,
    /// No table entry below this PSN is in flight and unacknowledged.
    loss_scan: u64,
}

impl RackTlp {
    /// The scheme of a flow configured by `cfg`, starting at `now`.
    pub fn new(cfg: &FlowConfig, now: Instant, scope: RackScope) -> RackTlp {
        let groups = match scope {
            RackScope::Flow => 1,
            RackScope::Path => usize::from(cfg.paths),
        };
        RackTlp {
            scope,
            groups: vec![RackGroup::default(); groups],
            rto_timer: RtoTimer::new(cfg, now),
            loss_timer: None,
            loss_scan: u64::from(cfg.initial_psn),
        }
    }

    /// Its scope.
    pub fn scope(&self) -> RackScope {
        self.scope
    }

    fn group(&self, path: usize) -> usize {
        match self.scope {
            RackScope::Flow => 0,
            RackScope::Path => path,
        }
    }

    /// RACK's reordering window of a group: min RTT / 4 (RFC 8985 §6.2).
    fn reo_wnd(&self, g: usize) -> Duration {
        let min = self.groups[g].min_rtt.unwrap_or(self.rto_timer.initial_rtt);
        Duration::from_ps(min.as_ps() / 4)
    }

    fn srtt(&self, core: &Core, g: usize) -> Duration {
        let srtt = |p: &crate::path::PathState| p.srtt.unwrap_or(self.rto_timer.initial_rtt);
        match self.scope {
            RackScope::Flow => core.paths.iter().map(srtt).max(),
            RackScope::Path => core.paths.get(g).map(srtt),
        }
        .unwrap_or(self.rto_timer.initial_rtt)
    }

    /// When group `g`'s tail loss probe is due: two smoothed RTTs after its last
    /// send or feedback, while it has packets in flight and no probe out.
    fn probe_deadline(&self, core: &Core, g: usize) -> Option<Instant> {
        if self.groups[g].probe_out {
            return None;
        }
        let paths = match self.scope {
            RackScope::Flow => 0..core.paths.len(),
            RackScope::Path => g..g + 1,
        };
        if core.paths.inflights()[paths.clone()]
            .iter()
            .all(|&n| n == 0)
        {
            return None;
        }
        let paths = &core.paths[paths];
        let last = paths
            .iter()
            .flat_map(|p| [p.last_sent, p.last_feedback])
            .flatten()
            .max()?;
        Some(last + self.srtt(core, g).saturating_mul(2))
    }

    /// Resends the highest packet in flight of group `g` as a tail loss probe.
    fn send_probe(&mut self, core: &mut Core, g: usize) {
        let highest = (0..core.table.len()).rev().find(|&i| {
            let e = core.table[i];
            e.in_flight && !e.acked && self.group(e.path as usize) == g
        });
        if let Some(i) = highest {
            let psn = core.base + i as u64;
            core.queue_probe(psn);
            self.loss_scan = self.loss_scan.min(psn);
        }
        // Out even when nothing was left to resend (only packets known delivered
        // in flight): the next delivery re-arms it.
        self.groups[g].probe_out = true;
    }
}

impl LossRecovery for RackTlp {
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

    fn on_delivered(&mut self, now: Instant, path: usize, psn: u64, sent_at: Instant) {
        let g = self.group(path);
        let group = &mut self.groups[g];
        group.probe_out = false;
        let Some(rtt) = now.checked_since(sent_at) else {
            return;
        };
        group.min_rtt = Some(group.min_rtt.map_or(rtt, |m| m.min(rtt)));
        if group.xmit.is_none_or(|x| (sent_at, psn) > x) {
            group.xmit = Some((sent_at, psn));
            group.rtt = rtt;
        }
    }

    fn detect_losses(&mut self, now: Instant, core: &mut Core) {
        self.loss_timer = None;
        let mut first = self.loss_scan.saturating_sub(core.base) as usize;
        while first < core.table.len() && (!core.table[first].in_flight || core.table[first].acked)
        {
            first += 1;
        }
        self.loss_scan = core.base + first as u64;
        for i in first..core.table.len() {
            let e = core.table[i];
            if !e.in_flight || e.acked {
                continue;
            }
            let psn = core.base + i as u64;
            let g = self.group(e.path as usize);
            let Some(latest) = self.groups[g].xmit else {
                continue;
            };
            if (e.sent_at, psn) >= latest {
                continue; // not sent before the latest delivered packet
            }
            let due = e.sent_at + self.groups[g].rtt + self.reo_wnd(g);
            if due <= now {
                core.declare_lost(psn, now, false);
            } else {
                self.loss_timer = Some(self.loss_timer.map_or(due, |t| t.min(due)));
            }
        }
    }

    fn poll_timeout(&self, core: &Core) -> Option<Instant> {
        (0..self.groups.len())
            .filter_map(|g| self.probe_deadline(core, g))
            .chain(self.rto_timer.deadline(core))
            .chain(self.loss_timer)
            .min()
    }

    fn on_timeout(&mut self, now: Instant, core: &mut Core, events: &mut VecDeque<Event>) -> bool {
        if self.loss_timer.is_some_and(|t| t <= now) {
            self.detect_losses(now, core);
        }
        for g in 0..self.groups.len() {
            if self.probe_deadline(core, g).is_some_and(|d| d <= now) {
                self.send_probe(core, g);
            }
        }
        self.rto_timer.fire(now, core, events)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sender::{Sender, SentPacket};

    fn core(paths: u16) -> Core {
        let cfg = FlowConfig {
            paths,
            ..FlowConfig::default()
        };
        Sender::new(&cfg, Instant::ZERO).core
    }

    /// A first transmission of the next PSN on `path` at `at_us`.
    fn send(core: &mut Core, rack: &mut RackTlp, path: u16, at_us: u64) -> u64 {
        let psn = core.base + core.table.len() as u64;
        let at = Instant::from_us(at_us);
        core.table.push_back(SentPacket {
            in_flight: true,
            path,
            tx_count: 1,
            sent_at: at,
            ..SentPacket::default()
        });
        core.paths.add_in_flight(usize::from(path));
        core.paths[usize::from(path)].last_sent = Some(at);
        rack.on_transmit(psn);
        psn
    }

    fn deliver(core: &mut Core, rack: &mut RackTlp, psn: u64, now_us: u64) {
        let i = (psn - core.base) as usize;
        let e = &mut core.table[i];
        e.acked = true;
        e.in_flight = false;
        let (path, sent_at) = (e.path, e.sent_at);
        core.paths.remove_in_flight(usize::from(path));
        core.paths[usize::from(path)].last_feedback = Some(Instant::from_us(now_us));
        rack.on_delivered(Instant::from_us(now_us), usize::from(path), psn, sent_at);
    }

    fn lost(core: &Core, psn: u64) -> bool {
        core.table[(psn - core.base) as usize].queued
    }

    #[test]
    fn per_flow_a_later_send_delivered_marks_the_earlier_one_lost_after_reo_wnd() {
        let mut c = core(2);
        let mut r = RackTlp::new(&c.cfg.clone(), Instant::ZERO, RackScope::Flow);
        let slow = send(&mut c, &mut r, 0, 0);
        let fast = send(&mut c, &mut r, 1, 1);
        deliver(&mut c, &mut r, fast, 11); // RTT 10 us, reo_wnd 2.5 us
        r.detect_losses(Instant::from_us(11), &mut c);
        assert!(!lost(&c, slow));
        // Due at 0 + 10 + 2.5 us: the reordering timer says so.
        assert_eq!(r.loss_timer, Some(Instant::from_ps(12_500_000)));
        r.detect_losses(Instant::from_ps(12_500_000), &mut c);
        assert!(lost(&c, slow));
        assert_eq!(c.stats.lost_declared, 1);
    }

    #[test]
    fn per_path_reordering_across_paths_is_not_loss() {
        let mut c = core(2);
        let mut r = RackTlp::new(&c.cfg.clone(), Instant::ZERO, RackScope::Path);
        let slow = send(&mut c, &mut r, 0, 0);
        let fast = send(&mut c, &mut r, 1, 1);
        deliver(&mut c, &mut r, fast, 11);
        r.detect_losses(Instant::from_us(100), &mut c);
        assert!(!lost(&c, slow), "path 0 delivered nothing sent after it");
        assert_eq!(r.loss_timer, None);
        // A later send on its own path delivered: now it is lost (after reo_wnd).
        let next = send(&mut c, &mut r, 0, 2);
        deliver(&mut c, &mut r, next, 30); // RTT 28 us, reo_wnd 7 us: due at 35
        r.detect_losses(Instant::from_us(34), &mut c);
        assert!(!lost(&c, slow));
        r.detect_losses(Instant::from_us(35), &mut c);
        assert!(lost(&c, slow));
    }

    #[test]
    fn a_silent_tail_is_probed_after_two_srtt_once() {
        let mut c = core(2);
        let mut r = RackTlp::new(&c.cfg.clone(), Instant::ZERO, RackScope::Path);
        send(&mut c, &mut r, 0, 0);
        let tail = send(&mut c, &mut r, 0, 1);
        send(&mut c, &mut r, 1, 5);
        // Path 0: last send at 1 us, no RTT yet (20 us assumed): probe at 41 us.
        assert_eq!(r.poll_timeout(&c), Some(Instant::from_us(41)));
        let mut events = VecDeque::new();
        assert!(!r.on_timeout(Instant::from_us(41), &mut c, &mut events));
        assert!(lost(&c, tail), "the highest in flight on path 0 is resent");
        assert_eq!(c.stats.lost_declared, 0, "a probe is no loss verdict");
        assert_eq!(c.paths.inflight(0), 1);
        // Path 1's probe is next (5 + 40 us); path 0 has its probe out.
        assert_eq!(r.poll_timeout(&c), Some(Instant::from_us(45)));
    }

    #[test]
    fn rto_max_caps_the_backoff() {
        let mut c = core(1);
        c.cfg.rto_max = Some(Duration::from_us(1500));
        let mut r = RackTlp::new(&c.cfg.clone(), Instant::ZERO, RackScope::Flow);
        r.groups[0].probe_out = true; // no probes: the RTO alone
        send(&mut c, &mut r, 0, 0);
        let mut events = VecDeque::new();
        assert!(r.on_timeout(Instant::from_us(500), &mut c, &mut events));
        assert_eq!(r.rto_timer.rto(&c), Duration::from_us(1000));
        assert!(r.on_timeout(Instant::from_us(1500), &mut c, &mut events));
        assert_eq!(r.rto_timer.rto(&c), Duration::from_us(1500), "not 2000");
        // Bounds given later apply to the next timeout.
        LossRecovery::set_rto_bounds(
            &mut r,
            Duration::from_us(500),
            Some(Duration::from_us(700)),
            8,
        );
        assert_eq!(r.rto_timer.rto(&c), Duration::from_us(700));
        LossRecovery::set_rto_bounds(&mut r, Duration::from_us(500), None, 8);
        assert_eq!(r.rto_timer.rto(&c), Duration::from_us(2000));
    }

    #[test]
    fn the_rto_backs_off_and_fails_past_the_retry_limit() {
        let mut c = core(1);
        c.cfg.retry_limit = 2;
        let mut r = RackTlp::new(&c.cfg.clone(), Instant::ZERO, RackScope::Flow);
        r.groups[0].probe_out = true; // no probes: the RTO alone
        send(&mut c, &mut r, 0, 0);
        let mut events = VecDeque::new();
        assert_eq!(r.rto_timer.deadline(&c), Some(Instant::from_us(500)));
        assert!(r.on_timeout(Instant::from_us(500), &mut c, &mut events));
        assert_eq!(r.rto_timer.rto(&c), Duration::from_us(1000));
        // Its packet waits for retransmission: the timer runs on, doubled.
        assert!(r.on_timeout(Instant::from_us(1500), &mut c, &mut events));
        assert!(!r.on_timeout(Instant::from_us(3500), &mut c, &mut events));
        assert!(c.failed.is_some() && matches!(events.back(), Some(Event::Error(_))));
    }
}
