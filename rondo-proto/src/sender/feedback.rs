//! ACK and NAK handling: RTT and forward-delay samples, what the congestion
//! controller hears, acknowledgement bookkeeping and message completion.

use super::{Core, Sender};
use crate::cc::{AckSample, CongestionControl};
use crate::event::Event;
use crate::path::PathStatus;
use crate::recovery::LossRecovery;
use crate::select::PathSelector;
use crate::time::{Duration, Instant};
use crate::wire::{CommonRepr, FeedbackRepr, Flags, NakReason};
use crate::Psn;
use std::collections::VecDeque;

impl Sender {
    /// An ACK or NAK arrived. Returns false when it made no sense (counted).
    pub(crate) fn on_feedback(
        &mut self,
        now: Instant,
        common: &CommonRepr,
        fb: &FeedbackRepr,
        nak: Option<NakReason>,
        events: &mut VecDeque<Event>,
    ) -> bool {
        self.select_blocked = false;
        let c = &mut self.core;
        let path = fb.acked_path as usize;
        if path >= c.paths.len() {
            c.stats.bad_feedback += 1;
            return false;
        }
        if fb.of_probe {
            // Only the ACK of a probe outstanding on this path is believed (a
            // forged one would bring a dead path back or open its window). Probes
            // on one path are served in order, so the ones before it were lost.
            let out = &mut c.paths[path].probes_outstanding;
            let Some(i) = out.iter().position(|&seq| seq == fb.acked_psn.0) else {
                c.stats.unexpected_probe_acks += 1;
                return false;
            };
            out.drain(..=i);
            c.paths[path].last_feedback = Some(now);
            self.on_probe_ack(now, path, events);
            return true;
        }
        let (Some(acked), Some(cum), Some(highest)) = (
            c.expand(fb.acked_psn),
            c.expand(fb.cum_ack),
            c.expand(fb.highest_psn),
        ) else {
            c.stats.bad_feedback += 1;
            return false;
        };
        // Everything below `sent_end` has a table entry; PSNs never sent have tx_count 0.
        let sent_end = c.base + c.table.len() as u64;
        // The acknowledged packet's entry as it was when the feedback arrived
        // (`None` below `base`: delivered and forgotten).
        let entry = acked
            .checked_sub(c.base)
            .and_then(|i| c.table.get(i as usize))
            .copied();
        let never_sent = acked >= c.base && entry.is_none_or(|e| e.tx_count == 0);
        if acked >= sent_end || cum > sent_end || never_sent {
            c.stats.bad_feedback += 1;
            return false;
        }
        // A highest PSN beyond anything sent is something the receiver was fed
        // (a forged far-ahead DATA): believing it would declare everything in
        // flight lost, rejecting the ACK for it would stop the connection. The
        // acknowledged PSN itself is known good.
        let (highest, cum_bound) = if highest < sent_end {
            (highest, highest + 1)
        } else {
            c.stats.implausible_highest += 1;
            (acked, sent_end)
        };
        // A cumulative ACK says the receiver holds every PSN below it in order: it
        // cannot lie past the highest PSN the same ACK reports (the receiver's
        // highest is at least its expected PSN - 1), nor cover a PSN never sent. A
        // forged one would complete messages the receiver never got; it is ignored.
        let cum = if cum <= cum_bound && c.all_sent(c.una, cum) {
            cum
        } else {
            c.stats.rejected_cum_acks += 1;
            c.una
        };
        c.paths[path].last_feedback = Some(now);
        let echo = Instant::from_ns(fb.echo_timestamp_ns);
        let ecn = common.flags.contains(Flags::ECN_ECHO);
        match nak {
            None => {
                let mut sample = AckSample {
                    path,
                    rtt: None,
                    forward_delay_ps: None,
                    probe: false,
                    ecn,
                    psn: acked,
                };
                // Karn's rule: an RTT sample only from the ACK of a packet's newest
                // transmission (while the packet is still in the table; a resent
                // one's old copy echoes an older send time), and only from a
                // (send time, PSN) after the path's last sample's (ACKs of one path
                // come back in order, and packets sent in one burst share a send
                // time; a duplicate, or a replayed old DATA, echoes an older one).
                // Either says nothing about the path's RTT now.
                let newest = entry.is_none_or(|e| e.sent_at.as_ns() == fb.echo_timestamp_ns);
                let fresh = c.paths[path]
                    .last_sample
                    .is_none_or(|last| (fb.echo_timestamp_ns, acked) > last);
                if let Some(rtt) = now
                    .checked_since(echo)
                    .filter(|r| newest && fresh && *r > Duration::ZERO)
                {
                    let gain = c.cfg.delay_gain;
                    c.paths[path].on_rtt_sample(rtt, gain);
                    let fwd_ns = fb.rx_timestamp_ns as i128 - fb.echo_timestamp_ns as i128;
                    let fwd = (fwd_ns * 1000).clamp(i64::MIN as i128, i64::MAX as i128) as i64;
                    c.paths[path].on_forward_delay_sample(fwd, gain, c.cfg.delay_stable_tolerance);
                    sample.rtt = Some(rtt);
                    sample.forward_delay_ps = Some(fwd);
                    c.paths[path].last_sample = Some((fb.echo_timestamp_ns, acked));
                }
                let p = &mut c.paths[path];
                p.consecutive_losses = 0;
                p.counters.data_acked += 1;
                self.cc.on_ack(now, &sample, &c.paths);
                self.selector.on_ack(now, path, ecn);
                if ecn {
                    c.stats.ecn_echoes += 1;
                }
            }
            Some(reason) => {
                c.stats.naks_received += 1;
                self.cc.on_nak(now, path, reason);
            }
        }
        let mut progress = false;
        if let Some(e) = entry {
            if nak == Some(NakReason::OutOfOrder) {
                // Kept out of order (selectively acknowledged); `cum` is the hole.
                progress |= c.mark_acked(acked, true);
            } else if nak == Some(NakReason::SequenceError) {
                // Dropped for a hole before it: recovery goes back to `cum`.
            } else if nak.is_some() {
                // The path delivered it; the receiver refused it. Not a path loss.
                c.declare_refused(acked);
            } else {
                if !e.acked && e.tx_count > 1 && echo.as_ns() < e.sent_at.as_ns() {
                    c.stats.spurious_retransmissions += 1;
                }
                self.recovery.on_delivered(now, path, acked, echo);
                progress |= c.mark_acked(acked, true);
            }
        }
        let end = c.base + c.table.len() as u64;
        for psn in c.una..cum.min(end) {
            progress |= c.mark_acked(psn, false);
        }
        c.pop_acked(events);
        c.highest_seen = c.highest_seen.max(highest);
        if progress {
            self.recovery.on_progress(now);
        }
        if nak == Some(NakReason::BufferFull) {
            c.on_buffer_full(now, cum, acked);
            if self.cc.on_receiver_full(now, &c.paths) {
                c.stats.buffer_full_cuts += 1;
            }
        }
        if nak.is_some() {
            self.recovery.on_nak(now, cum, echo, c);
        }
        self.recovery.detect_losses(now, c);
        self.settle(now);
        self.core.flush_path_events(events);
        true
    }

    fn on_probe_ack(&mut self, now: Instant, path: usize, events: &mut VecDeque<Event>) {
        let c = &mut self.core;
        c.stats.probes_acked += 1;
        if c.paths[path].status == PathStatus::Down {
            c.paths[path].rejoin();
            events.push_back(Event::PathUp { path: path as u16 });
            self.cc.on_path_up(now, path, &c.paths);
        }
        let p = &mut c.paths[path];
        p.consecutive_losses = 0;
        p.counters.probes_acked += 1;
        let sample = AckSample {
            path,
            rtt: None,
            forward_delay_ps: None,
            probe: true,
            ecn: false,
            psn: 0,
        };
        self.cc.on_ack(now, &sample, &c.paths);
    }
}

impl Core {
    fn expand(&self, psn: Psn) -> Option<u64> {
        let abs = self.base as i64 + psn.diff(Psn(self.base as u32)) as i64;
        (abs >= 0).then_some(abs as u64)
    }

    /// Every PSN of `from..to` was transmitted at least once (those below `base`
    /// were: they are delivered).
    fn all_sent(&self, from: u64, to: u64) -> bool {
        let end = self.base + self.table.len() as u64;
        to <= end
            && (from.max(self.base)..to)
                .all(|psn| self.table[(psn - self.base) as usize].tx_count > 0)
    }

    /// Marks one PSN acknowledged; true when it was not before. Only the packet's
    /// own ACK (`own`, which returned on its path) takes it out of its path's
    /// inflight: a cumulative ACK that overtook it on a faster path must not, or
    /// inflight_p would undercount by the reverse-delay difference and ARCC would
    /// underestimate the queue.
    fn mark_acked(&mut self, psn: u64, own: bool) -> bool {
        if psn < self.base {
            return false;
        }
        let idx = (psn - self.base) as usize;
        let Some(e) = self.table.get_mut(idx) else {
            return false;
        };
        if own && e.in_flight {
            e.in_flight = false;
            self.paths[e.path as usize].inflight -= 1;
        }
        if e.acked {
            return false;
        }
        if e.in_flight {
            let rtt = self.paths[e.path as usize]
                .srtt
                .unwrap_or(self.cfg.initial_rtt);
            let at = e.sent_at + rtt.saturating_mul(2);
            self.inflight_expiry = Some(self.inflight_expiry.map_or(at, |t| t.min(at)));
        }
        e.acked = true;
        if e.queued {
            e.queued = false;
            self.retx.remove();
        }
        self.stats.packets_acked += 1;
        true
    }

    /// Packets known delivered whose own ACK never came back leave their path's
    /// inflight two path RTTs after they were sent.
    pub(super) fn expire_acked_inflight(&mut self, now: Instant) {
        // Nothing acknowledged is still counted in flight: no scan.
        if self.inflight_expiry.is_none() {
            return;
        }
        let mut next: Option<Instant> = None;
        for i in 0..self.table.len() {
            let e = self.table[i];
            if e.acked && e.in_flight {
                let rtt = self.paths[e.path as usize]
                    .srtt
                    .unwrap_or(self.cfg.initial_rtt);
                let at = e.sent_at + rtt.saturating_mul(2);
                if at <= now {
                    self.table[i].in_flight = false;
                    self.paths[e.path as usize].inflight -= 1;
                } else {
                    next = Some(next.map_or(at, |t| t.min(at)));
                }
            }
        }
        self.inflight_expiry = next;
    }

    fn pop_acked(&mut self, events: &mut VecDeque<Event>) {
        while self.una < self.base + self.table.len() as u64
            && self.table[(self.una - self.base) as usize].acked
        {
            self.una += 1;
            if let Some(w) = self.rx_window {
                self.rx_window_grow += 1;
                if self.rx_window_grow >= w {
                    self.rx_window_grow = 0;
                    self.rx_window = (w < 1 << 20).then_some(w + 1);
                }
            }
        }
        while self.table.front().is_some_and(|e| e.acked && !e.in_flight) {
            self.table.pop_front();
            self.base += 1;
        }
        while let Some(m) = self.messages.front() {
            if m.first_psn + m.packets <= self.una {
                events.push_back(Event::SendComplete { msg_id: m.id });
                self.stats.messages_completed += 1;
                self.messages.pop_front();
            } else {
                break;
            }
        }
    }
}
