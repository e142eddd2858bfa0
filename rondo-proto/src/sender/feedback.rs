//! ACK and NAK handling: RTT and forward-delay samples, what the congestion
//! controller hears, acknowledgement bookkeeping and message completion.

use super::{Core, Sender, SentPacket};
use crate::cc::{AckSample, CongestionControl};
use crate::event::Event;
use crate::recovery::LossRecovery;
use crate::select::PathSelector;
use crate::time::{Duration, Instant};
use crate::wire::{AckBlock, CommonRepr, FeedbackRepr, Flags, NakReason};
use crate::Psn;
use std::collections::VecDeque;

impl Sender {
    /// An ACK or NAK arrived, with the ACK blocks of a coalesced ACK (each block
    /// PSN acknowledged as by its own ACK, before the fixed part's packet).
    /// Returns false when it made no sense (counted).
    pub(crate) fn on_feedback<'a>(
        &mut self,
        now: Instant,
        common: &CommonRepr,
        fb: &FeedbackRepr,
        nak: Option<NakReason>,
        blocks: impl Iterator<Item = AckBlock<'a>>,
        events: &mut VecDeque<Event>,
    ) -> bool {
        self.catch_up(now, events);
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
            // The probe's round trip, from its echoed send time (this sender's
            // clock); none for an echo from the future.
            let sent = Instant::from_ns(fb.echo_timestamp_ns);
            let rtt = now.checked_since(sent).filter(|_| fb.echo_timestamp_ns > 0);
            self.on_probe_ack(now, path, rtt, events);
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
        let mut progress = false;
        if nak.is_none() {
            for block in blocks {
                progress |= self.on_block(now, common.timestamp_ns, &block);
            }
        }
        let c = &mut self.core;
        match nak {
            None => {
                let mut sample = AckSample::data(path, acked, ecn);
                sample.held =
                    Duration::from_ns(common.timestamp_ns.saturating_sub(fb.rx_timestamp_ns));
                // Karn's rule (`Core::rtt_sample`).
                let times = (fb.echo_timestamp_ns, fb.rx_timestamp_ns);
                c.rtt_sample(now, path, acked, entry, times, &mut sample);
                self.count_ack(now, &sample);
            }
            Some(reason) => {
                c.stats.naks_received += 1;
                self.cc.on_nak(now, path, reason);
            }
        }
        let c = &mut self.core;
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

    /// One ACK block of a coalesced ACK sent at `sent_ns` (the receiver's clock):
    /// every PSN is a first transmission's arrival, acknowledged as by its own
    /// ACK; the first (the newest) gives the path's RTT and forward-delay sample,
    /// the block's CE marks go to its first packets. PSNs never sent and a
    /// path out of range are counted in `bad_feedback` and skipped. Returns
    /// whether something was newly acknowledged.
    fn on_block(&mut self, now: Instant, sent_ns: u64, block: &AckBlock<'_>) -> bool {
        let c = &mut self.core;
        let path = usize::from(block.path);
        if path >= c.paths.len() {
            c.stats.bad_feedback += 1;
            return false;
        }
        c.paths[path].last_feedback = Some(now);
        let sent_end = c.base + c.table.len() as u64;
        let mut progress = false;
        // The newest packet's hold; an older one of the same path arrived about
        // as much earlier as it was sent earlier, and waited that much longer.
        let newest_held = sent_ns.saturating_sub(block.rx_timestamp_ns);
        for (i, psn) in block.psns().enumerate() {
            let c = &mut self.core;
            let acked = c.expand(psn).filter(|&a| a < sent_end);
            let entry = acked
                .and_then(|a| a.checked_sub(c.base))
                .map(|i| c.table[i as usize]);
            let Some(acked) =
                acked.filter(|&a| a < c.base || entry.is_some_and(|e| e.tx_count > 0))
            else {
                c.stats.bad_feedback += 1;
                continue;
            };
            let ecn = i < usize::from(block.ce_count);
            let mut sample = AckSample::data(path, acked, ecn);
            let earlier = entry.filter(|e| i > 0 && e.tx_count == 1).map_or(0, |e| {
                block.echo_timestamp_ns.saturating_sub(e.sent_at.as_ns())
            });
            sample.held = Duration::from_ns(newest_held.saturating_add(earlier));
            if i == 0 {
                let times = (block.echo_timestamp_ns, block.rx_timestamp_ns);
                c.rtt_sample(now, path, acked, entry, times, &mut sample);
            }
            self.count_ack(now, &sample);
            let c = &mut self.core;
            let Some(e) = entry else { continue };
            // The receiver blocks only first transmissions: the copy that
            // arrived was sent before any retransmission, at `sent_at` when
            // there was none (the newest's echo says it in any case).
            if !e.acked && e.tx_count > 1 {
                c.stats.spurious_retransmissions += 1;
            }
            let sent_at = if i == 0 {
                Some(Instant::from_ns(block.echo_timestamp_ns))
            } else {
                (e.tx_count == 1).then_some(e.sent_at)
            };
            if let Some(sent_at) = sent_at {
                self.recovery.on_delivered(now, path, acked, sent_at);
            }
            progress |= self.core.mark_acked(acked, true);
        }
        progress
    }

    /// One data packet's own ACK, for the path's counters and the seams: the
    /// congestion controller (whose ACK rate counts packets) and path selection.
    fn count_ack(&mut self, now: Instant, sample: &AckSample) {
        let c = &mut self.core;
        let p = &mut c.paths[sample.path];
        p.consecutive_losses = 0;
        p.counters.data_acked += 1;
        self.cc.on_ack(now, sample, &c.paths);
        self.selector.on_ack(now, sample.path, sample.ecn);
        if sample.ecn {
            c.stats.ecn_echoes += 1;
        }
    }

    fn on_probe_ack(
        &mut self,
        now: Instant,
        path: usize,
        rtt: Option<Duration>,
        events: &mut VecDeque<Event>,
    ) {
        let c = &mut self.core;
        c.stats.probes_acked += 1;
        if !c.paths.is_up(path) {
            c.paths.rejoin(path);
            events.push_back(Event::PathUp { path: path as u16 });
            self.cc.on_path_up(now, path, &c.paths);
        }
        let p = &mut c.paths[path];
        p.consecutive_losses = 0;
        p.counters.probes_acked += 1;
        let sample = AckSample {
            probe: true,
            probe_rtt: rtt,
            ..AckSample::data(path, 0, false)
        };
        self.cc.on_ack(now, &sample, &c.paths);
    }
}

impl Core {
    /// The RTT and forward-delay sample of the ACK of `acked` on `path` (its
    /// table entry as the feedback found it), from `times`: the echoed send
    /// time and the arrival time. `sample.held`, how long the receiver held the
    /// ACK for coalescing (0 for a per-packet ACK), is left out of the RTT.
    ///
    /// Karn's rule: an RTT sample only from the ACK of a packet's newest
    /// transmission (while the packet is still in the table; a resent one's
    /// old copy echoes an older send time), and only from a (send time, PSN)
    /// after the path's last sample's (ACKs of one path come back in order, and
    /// packets sent in one burst share a send time; a duplicate, or a replayed
    /// old DATA, echoes an older one). Either says nothing about the path's RTT
    /// now.
    fn rtt_sample(
        &mut self,
        now: Instant,
        path: usize,
        acked: u64,
        entry: Option<SentPacket>,
        (echo_ns, rx_ns): (u64, u64),
        sample: &mut AckSample,
    ) {
        let newest = entry.is_none_or(|e| e.sent_at.as_ns() == echo_ns);
        let fresh = self.paths[path]
            .last_sample
            .is_none_or(|last| (echo_ns, acked) > last);
        // The time the receiver held the ACK is not the path's.
        let Some(rtt) = now
            .checked_since(Instant::from_ns(echo_ns))
            .map(|r| r.saturating_sub(sample.held))
            .filter(|r| newest && fresh && *r > Duration::ZERO)
        else {
            return;
        };
        let gain = self.cfg.delay_gain;
        let old = self.paths[path].srtt;
        self.paths[path].on_rtt_sample(rtt, gain);
        self.note_srtt(old, self.paths[path].srtt);
        let fwd_ns = rx_ns as i128 - echo_ns as i128;
        let fwd = (fwd_ns * 1000).clamp(i64::MIN as i128, i64::MAX as i128) as i64;
        let tolerance = self.cfg.delay_stable_tolerance;
        let ahead = entry.map(|e| e.ahead);
        self.paths[path].on_forward_delay_sample(fwd, ahead, gain, tolerance);
        sample.rtt = Some(rtt);
        sample.forward_delay_ps = Some(fwd);
        self.paths[path].last_sample = Some((echo_ns, acked));
    }

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
            self.paths.remove_in_flight(e.path as usize);
            let p = &mut self.paths[e.path as usize];
            if p.newest_acked_sent.is_none_or(|t| t < e.sent_at) {
                p.newest_acked_sent = Some(e.sent_at);
            }
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
    /// Returns whether a packet left its path's inflight (its window has room
    /// again).
    pub(super) fn expire_acked_inflight(&mut self, now: Instant) -> bool {
        // Nothing acknowledged is still counted in flight: no scan.
        if self.inflight_expiry.is_none() {
            return false;
        }
        let mut expired = false;
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
                    self.paths.remove_in_flight(e.path as usize);
                    expired = true;
                } else {
                    next = Some(next.map_or(at, |t| t.min(at)));
                }
            }
        }
        self.inflight_expiry = next;
        expired
    }

    fn pop_acked(&mut self, events: &mut VecDeque<Event>) {
        while self.una < self.base + self.table.len() as u64
            && self.table[(self.una - self.base) as usize].acked
        {
            self.una += 1;
            if let Some(w) = self.rx_window {
                self.rx_window_grow += 1;
                let step = match self.cfg.receiver_span_step {
                    0 => w,
                    s => u64::from(s),
                };
                if self.rx_window_grow >= step {
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
