//! ACK and NAK handling: RTT and forward-delay samples, per-path ACK counting,
//! acknowledgement bookkeeping and message completion.

use super::{update_interval, Sender};
use crate::event::Event;
use crate::path::PathStatus;
use crate::time::{Duration, Instant};
use crate::wire::{CommonRepr, FeedbackRepr, Flags, NakReason};
use crate::Psn;
use std::collections::VecDeque;

impl Sender {
    fn expand(&self, psn: Psn) -> Option<u64> {
        let abs = self.base as i64 + psn.diff(Psn(self.base as u32)) as i64;
        (abs >= 0).then_some(abs as u64)
    }

    /// An ACK or NAK arrived. Returns false when it made no sense (counted).
    pub(crate) fn on_feedback(
        &mut self,
        now: Instant,
        common: &CommonRepr,
        fb: &FeedbackRepr,
        nak: Option<NakReason>,
        events: &mut VecDeque<Event>,
    ) -> bool {
        let path = fb.acked_path as usize;
        if path >= self.paths.len() {
            self.stats.bad_feedback += 1;
            return false;
        }
        if fb.of_probe {
            self.on_probe_ack(now, path, events);
            return true;
        }
        let (Some(acked), Some(cum), Some(highest)) = (
            self.expand(fb.acked_psn),
            self.expand(fb.cum_ack),
            self.expand(fb.highest_psn),
        ) else {
            self.stats.bad_feedback += 1;
            return false;
        };
        // Everything below `sent_end` has a table entry; PSNs never sent have tx_count 0.
        let sent_end = self.base + self.table.len() as u64;
        let never_sent = acked >= self.base
            && self
                .table
                .get((acked - self.base) as usize)
                .is_none_or(|e| e.tx_count == 0);
        if acked >= sent_end || cum > sent_end || highest >= sent_end || never_sent {
            self.stats.bad_feedback += 1;
            return false;
        }
        let echo = Instant::from_ns(fb.echo_timestamp_ns);
        if nak.is_none() {
            if let Some(rtt) = now.checked_since(echo).filter(|r| *r > Duration::ZERO) {
                let gain = self.cfg.delay_gain;
                self.paths[path].on_rtt_sample(rtt, gain);
                let fwd = fb.rx_timestamp_ns as i128 - fb.echo_timestamp_ns as i128;
                self.paths[path].on_forward_delay_sample(
                    fwd as f64,
                    gain,
                    self.cfg.delay_stable_tolerance,
                );
                self.refresh_tau();
            }
            self.on_path_ack(now, path, false);
            if common.flags.contains(Flags::ECN_ECHO) {
                self.stats.ecn_echoes += 1;
            }
        } else {
            self.stats.naks_received += 1;
        }
        let mut progress = false;
        if acked >= self.base {
            let idx = (acked - self.base) as usize;
            if idx < self.table.len() {
                if nak.is_some() {
                    // The path delivered it; the receiver refused it. Not a path loss.
                    self.declare_lost(acked, now, true);
                } else {
                    let e = self.table[idx];
                    if !e.acked && e.tx_count > 1 && echo.as_ns() < e.sent_at.as_ns() {
                        self.stats.spurious_retransmissions += 1;
                    }
                    progress |= self.mark_acked(acked, true);
                }
            }
        }
        let end = self.base + self.table.len() as u64;
        for psn in self.una..cum.min(end) {
            progress |= self.mark_acked(psn, false);
        }
        self.pop_acked(events);
        self.highest_seen = self.highest_seen.max(highest);
        if progress {
            self.retries = 0;
            self.last_progress = now;
        }
        if nak == Some(NakReason::BufferFull) {
            self.on_buffer_full(now, cum, acked);
        }
        self.detect_losses(now);
        events.append(&mut self.pending_path_events);
        true
    }

    fn on_path_ack(&mut self, now: Instant, path: usize, probe: bool) {
        let p = &mut self.paths[path];
        p.consecutive_losses = 0;
        if p.next_update.is_none() {
            // First ACK of the path: its first ARCC interval starts now.
            p.interval_start = now;
            let tu = update_interval(&self.cfg, p.base_rtt_or(self.cfg.initial_rtt));
            p.next_update = Some(now + tu);
        }
        if probe {
            p.probe_acks_in_interval += 1;
            if !p.probe_absorbed {
                p.probe_credit += 1; // one extra data packet per probe ACK (§4.2.2)
            }
            p.counters.probes_acked += 1;
        } else {
            p.acks_in_interval += 1;
            p.counters.data_acked += 1;
        }
        if self.probing_until == Some(Instant::MAX) {
            // Startup probing lasts three base RTTs from the first ACK.
            let t = self.max_base_rtt().mul_f64(self.cfg.probe_duration_rtts);
            self.probing_until = Some(now + t);
        }
    }

    fn on_probe_ack(&mut self, now: Instant, path: usize, events: &mut VecDeque<Event>) {
        self.stats.probes_acked += 1;
        if self.paths[path].status == PathStatus::Down {
            let cfg = self.cfg.clone();
            self.paths[path].reset_for_rejoin(&cfg, now);
            self.paths[path].next_update = None;
            events.push_back(Event::PathUp { path: path as u16 });
            if cfg.probing {
                self.start_probing(now + self.max_base_rtt().mul_f64(cfg.probe_duration_rtts));
            }
        }
        self.on_path_ack(now, path, true);
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
        for i in 0..self.table.len() {
            let e = self.table[i];
            if e.acked && e.in_flight {
                let rtt = self.paths[e.path as usize]
                    .srtt
                    .unwrap_or(self.cfg.initial_rtt);
                if e.sent_at + rtt.saturating_mul(2) <= now {
                    self.table[i].in_flight = false;
                    self.paths[e.path as usize].inflight -= 1;
                }
            }
        }
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
