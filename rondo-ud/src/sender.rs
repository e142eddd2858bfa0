//! The sending half of a flow: segmentation, ARCC windows and pacing, capacity
//! probing, deficit path selection, the packet scheduler, and loss recovery.

mod retx;

use crate::config::{FlowConfig, PathSelection};
use crate::event::{ConnectionError, Event};
use crate::mem::rng::Rng;
use crate::path::{ArccParams, PathState, PathStatus};
use crate::scheduler::{compute_skips, phase_skip, SkipScratch, UnsentSet};
use crate::select::DeficitSelector;
use crate::stats::SenderStats;
use crate::time::{Duration, Instant};
use crate::transmit::{Priority, Transmit};
use crate::wire::{Body, CommonRepr, DataRepr, FeedbackRepr, Flags, NakReason, ProbeRepr, Repr};
use crate::Psn;
use retx::RetxQueue;
use std::collections::VecDeque;

/// Shortest ARCC update interval, whatever the RTT samples say.
const MIN_UPDATE_INTERVAL: Duration = Duration::from_us(1);

/// ARCC update interval Tu = 0.5 T of a path (paper §4.2.1), floored.
fn update_interval(cfg: &FlowConfig, base_rtt: Duration) -> Duration {
    base_rtt
        .mul_f64(cfg.update_interval_rtts)
        .max(MIN_UPDATE_INTERVAL)
}

/// Where a DATA payload lies in the sender: (message first PSN, offset, length).
pub(crate) type PayloadAt = (u64, u64, u32);

#[derive(Debug)]
struct OutMessage {
    id: u64,
    first_psn: u64,
    packets: u64,
    data: Vec<u8>,
}

#[derive(Clone, Copy, Debug, Default)]
struct SentPacket {
    acked: bool,
    in_flight: bool,
    queued: bool,
    path: u16,
    tx_count: u8,
    sent_at: Instant,
}

/// The sending half of a flow.
#[derive(Debug)]
pub(crate) struct Sender {
    cfg: FlowConfig,
    params: ArccParams,
    payload: u64,
    pub(crate) paths: Vec<PathState>,
    messages: VecDeque<OutMessage>,
    /// State of PSNs `[base, base + table.len())`.
    table: VecDeque<SentPacket>,
    base: u64,
    /// No table entry below this PSN is a loss candidate (in flight, not acked):
    /// where `detect_losses` starts. Every transmission lowers it to its PSN.
    loss_scan: u64,
    /// `poll_transmit_split` in progress: DATA payloads are not copied but located.
    split: bool,
    /// Where the payload of the last DATA packet emitted in split mode lies:
    /// (message first PSN, offset, length).
    split_out: Option<PayloadAt>,
    /// Scratch: each path's ACK deadline during `detect_losses`.
    deadlines: Vec<Duration>,
    /// Lowest PSN not known to be delivered.
    una: u64,
    next_psn: u64,
    unsent: UnsentSet,
    retx: RetxQueue,
    highest_seen: u64,
    pace_next: Instant,
    line_next: Instant,
    probing_until: Option<Instant>,
    quiet_updates: u32,
    probe_seq: u32,
    probe_rr: usize,
    scheduler_on: bool,
    pub(crate) scheduler_enabled_at: Option<Instant>,
    retries: u32,
    last_progress: Instant,
    loss_timer: Option<Instant>,
    last_nak_cut: Option<Instant>,
    /// Receiver-limited span: new PSNs only below `una + rx_window`, set by
    /// "reorder buffer full" NAKs and grown by one per window delivered.
    rx_window: Option<u64>,
    rx_window_grow: u64,
    rng: Rng,
    selector: DeficitSelector,
    open: Vec<f64>,
    skip_scratch: SkipScratch,
    pub(crate) stats: SenderStats,
    pub(crate) failed: Option<ConnectionError>,
    pending_path_events: VecDeque<Event>,
}

impl Sender {
    pub(crate) fn new(cfg: &FlowConfig, now: Instant) -> Sender {
        let paths: Vec<PathState> = (0..cfg.paths as usize)
            .map(|i| PathState::new(cfg, i, now))
            .collect();
        let start = cfg.initial_psn as u64;
        let mut s = Sender {
            cfg: cfg.clone(),
            params: ArccParams {
                q0: cfg.q0,
                tau_q: Duration::ZERO,
                alpha: cfg.alpha,
                alpha_weight: cfg.alpha_weight,
                gamma: cfg.gamma,
                fast_correction_factor: cfg.fast_correction_factor,
                min_window: cfg.min_window,
                queue_estimate: cfg.queue_estimate,
            },
            payload: cfg.payload_per_packet() as u64,
            paths,
            messages: VecDeque::new(),
            table: VecDeque::new(),
            base: start,
            loss_scan: start,
            split: false,
            split_out: None,
            deadlines: Vec::with_capacity(usize::from(cfg.paths)),
            una: start,
            next_psn: start,
            unsent: UnsentSet::new(start),
            retx: RetxQueue::with_capacity(1024),
            highest_seen: start,
            pace_next: now,
            line_next: now,
            probing_until: cfg.probing.then_some(Instant::MAX),
            quiet_updates: 0,
            probe_seq: 0,
            probe_rr: 0,
            scheduler_on: false,
            scheduler_enabled_at: None,
            retries: 0,
            last_progress: now,
            loss_timer: None,
            last_nak_cut: None,
            rx_window: None,
            rx_window_grow: 0,
            rng: Rng::new(cfg.seed),
            selector: DeficitSelector::new(cfg.paths as usize),
            open: vec![0.0; cfg.paths as usize],
            skip_scratch: SkipScratch::default(),
            stats: SenderStats::default(),
            failed: None,
            pending_path_events: VecDeque::new(),
        };
        s.refresh_tau();
        s
    }

    /// Queues a message; PSNs are assigned now.
    pub(crate) fn post(&mut self, msg_id: u64, data: Vec<u8>) {
        let packets = (data.len() as u64).div_ceil(self.payload);
        self.messages.push_back(OutMessage {
            id: msg_id,
            first_psn: self.next_psn,
            packets,
            data,
        });
        self.next_psn += packets;
        self.unsent.extend_to(self.next_psn);
    }

    fn has_data(&self) -> bool {
        !self.retx.is_empty() || self.new_data_allowed()
    }

    /// Unsent PSNs exist and the receiver-limited span lets the lowest one go.
    fn new_data_allowed(&self) -> bool {
        self.unsent
            .lowest()
            .is_some_and(|l| self.rx_window.is_none_or(|w| l < self.una + w))
    }

    /// Bytes posted and not yet acknowledged.
    pub(crate) fn outstanding_messages(&self) -> usize {
        self.messages.len()
    }

    fn max_base_rtt(&self) -> Duration {
        self.paths
            .iter()
            .map(|p| p.base_rtt_or(self.cfg.initial_rtt))
            .max()
            .unwrap_or(self.cfg.initial_rtt)
    }

    fn refresh_tau(&mut self) {
        self.params.tau_q = self.max_base_rtt().mul_f64(self.cfg.target_queue_rtts);
    }

    fn probing(&self, now: Instant) -> bool {
        self.probing_until.is_some_and(|t| now < t)
    }

    fn up_paths(&self) -> impl Iterator<Item = usize> + '_ {
        self.paths
            .iter()
            .enumerate()
            .filter(|(_, p)| p.status == PathStatus::Up)
            .map(|(i, _)| i)
    }

    /// Flow pacing rate sum_p W_p / T_p, in packets per microsecond.
    pub(crate) fn pacing_rate(&self) -> f64 {
        self.up_paths()
            .map(|i| {
                let p = &self.paths[i];
                (p.window + p.probe_credit as f64) / p.base_rtt_or(self.cfg.initial_rtt).as_us_f64()
            })
            .sum()
    }

    // ---------------------------------------------------------------- transmit

    pub(crate) fn poll_transmit(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        remote_flow: u32,
    ) -> Option<Transmit> {
        if self.failed.is_some() {
            return None;
        }
        if let Some(p) = (0..self.paths.len()).find(|&i| {
            self.paths[i].status == PathStatus::Down && self.paths[i].next_down_probe <= now
        }) {
            self.paths[p].next_down_probe = now + self.cfg.down_probe_interval;
            return self.emit_probe(now, p, buf, remote_flow);
        }
        if !self.has_data() {
            return None;
        }
        if !self.cfg.pacing || now >= self.pace_next {
            if let Some(path) = self.select_path() {
                return self.emit_data(now, path, buf, remote_flow);
            }
        }
        if self.probing(now) && now >= self.line_next {
            // Round robin over the paths in rotation, starting after the last probed.
            let n = self.paths.len();
            let next = (1..=n)
                .map(|k| (self.probe_rr + k) % n)
                .find(|&i| self.paths[i].status == PathStatus::Up);
            if let Some(p) = next {
                self.probe_rr = p;
                return self.emit_probe(now, p, buf, remote_flow);
            }
        }
        None
    }

    /// Deficit-based path selection (paper §4.2.3, eq. (6)), or random spraying.
    fn select_path(&mut self) -> Option<usize> {
        for (o, p) in self.open.iter_mut().zip(&self.paths) {
            *o = p.open_window();
        }
        match self.cfg.path_selection {
            PathSelection::Deficit => self.selector.select(&self.open),
            PathSelection::Random => {
                let n = self.open.iter().filter(|&&o| o > 0.0).count() as u64;
                if n == 0 {
                    return None;
                }
                let k = self.rng.gen_range(0..n) as usize;
                self.open
                    .iter()
                    .enumerate()
                    .filter(|(_, &o)| o > 0.0)
                    .nth(k)
                    .map(|(i, _)| i)
            }
        }
    }

    fn emit_data(
        &mut self,
        now: Instant,
        path: usize,
        buf: &mut [u8],
        remote_flow: u32,
    ) -> Option<Transmit> {
        let (psn, retx) = match self.retx.pop_first(&self.table, self.base) {
            Some(psn) => (psn, true),
            None => {
                let k = if !self.scheduler_on {
                    1
                } else if self.cfg.scheduler_phase {
                    self.phase_skip(path, now) + 1
                } else {
                    self.paths[path].skip as u64 + 1
                };
                let mut psn = self.unsent.kth(k)?;
                if self.rx_window.is_some_and(|w| psn >= self.una + w) {
                    psn = self.unsent.lowest()?; // the receiver cannot hold the skip
                }
                (psn, false)
            }
        };
        let idx = (psn - self.base) as usize;
        self.loss_scan = self.loss_scan.min(psn);
        if !retx {
            self.unsent.mark_sent(psn);
            while self.table.len() <= idx {
                self.table.push_back(SentPacket::default());
            }
        }
        let mi = self
            .messages
            .partition_point(|m| m.first_psn + m.packets <= psn);
        let msg = &self.messages[mi];
        let offset = (psn - msg.first_psn) * self.payload;
        let len = (msg.data.len() as u64 - offset).min(self.payload) as usize;
        let mut flags = Flags::empty();
        if retx {
            flags.insert(Flags::RETX);
        }
        let repr = Repr {
            common: CommonRepr {
                flow: remote_flow,
                psn: Psn(psn as u32),
                path: path as u16,
                flags,
                timestamp_ns: now.as_ns(),
            },
            body: Body::Data(DataRepr {
                msg_id: msg.id,
                msg_len: msg.data.len() as u64,
                offset,
                payload_len: len,
            }),
        };
        let hdr = repr.emit_with_token(buf, self.cfg.token).ok()?;
        let total = hdr + len;
        let written = if self.split {
            self.split_out = Some((msg.first_psn, offset, len as u32));
            hdr
        } else {
            buf[hdr..total].copy_from_slice(&msg.data[offset as usize..offset as usize + len]);
            total
        };

        let entry = &mut self.table[idx];
        entry.queued = false;
        entry.in_flight = true;
        entry.path = path as u16;
        entry.sent_at = now;
        entry.tx_count = entry.tx_count.saturating_add(1);
        let p = &mut self.paths[path];
        p.inflight += 1;
        p.sent_in_interval += 1;
        p.last_sent = Some(now);
        p.counters.data_sent += 1;
        self.stats.data_packets_sent += 1;
        self.stats.data_bytes_sent += total as u64;
        if retx {
            self.stats.retransmissions += 1;
        }
        let rate = self.pacing_rate();
        if rate > 0.0 {
            let gap = Duration::from_us_f64(total as f64 / self.cfg.mtu as f64 / rate);
            self.pace_next = self.pace_next.max(self.burst_floor(now, gap)) + gap;
        }
        let wire = Duration::serialisation(total as u64, self.cfg.line_rate_bps);
        self.line_next = self.line_next.max(self.burst_floor(now, wire)) + wire;
        if self.last_progress < now && self.in_flight_count() == 1 {
            self.last_progress = now; // the RTO runs from the first packet of a busy period
        }
        Some(Transmit {
            path: path as u16,
            priority: Priority::Data,
            len: written,
            flow: 0,
        })
    }

    /// [`Sender::poll_transmit`] that leaves a DATA payload in its message and says
    /// where: (message first PSN, offset, length).
    pub(crate) fn poll_transmit_split(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        remote_flow: u32,
    ) -> Option<(Transmit, Option<PayloadAt>)> {
        self.split = true;
        self.split_out = None;
        let t = self.poll_transmit(now, buf, remote_flow);
        self.split = false;
        t.map(|t| (t, self.split_out.take()))
    }

    /// The flow's datagram size: the least a transmit buffer must hold.
    pub(crate) fn mtu(&self) -> usize {
        self.cfg.mtu
    }

    /// The payload bytes `offset..offset + len` of the message whose first PSN is
    /// `first_psn`, while it is not fully acknowledged.
    pub(crate) fn payload(&self, first_psn: u64, offset: u64, len: u32) -> Option<&[u8]> {
        let i = self.messages.partition_point(|m| m.first_psn < first_psn);
        let m = self.messages.get(i).filter(|m| m.first_psn == first_psn)?;
        let start = usize::try_from(offset).ok()?;
        m.data.get(start..start.checked_add(len as usize)?)
    }

    /// The earliest a pacing clock may lag `now`: `pacing_burst - 1` slots of `gap`
    /// (exactly `now` without burst credit).
    fn burst_floor(&self, now: Instant, gap: Duration) -> Instant {
        let credit = gap.saturating_mul(u64::from(self.cfg.pacing_burst - 1));
        Instant::from_ps(now.as_ps().saturating_sub(credit.as_ps()))
    }

    /// The skip of a transmission on `path` now, from the other paths' phases.
    fn phase_skip(&mut self, path: usize, now: Instant) -> u64 {
        let now_ns = now.as_ps() as f64 / 1e3;
        let sc = &mut self.skip_scratch;
        if sc.rates.len() != self.paths.len() {
            return self.paths[path].skip as u64; // no skip computation yet
        }
        sc.next.clear();
        for (q, p) in self.paths.iter().enumerate() {
            let rate = sc.rates.get(q).copied().unwrap_or(0.0);
            let next = match (p.last_sent, rate > 0.0) {
                (Some(t), true) => t.as_ps() as f64 / 1e3 + 1.0 / rate,
                _ => now_ns,
            };
            sc.next.push(next);
        }
        phase_skip(path, now_ns, &sc.rates, &sc.delays, &sc.next)
    }

    fn emit_probe(
        &mut self,
        now: Instant,
        path: usize,
        buf: &mut [u8],
        remote_flow: u32,
    ) -> Option<Transmit> {
        let pad = self.cfg.mtu
            - crate::wire::PROBE_HEADER_LEN
            - crate::wire::token_overhead(self.cfg.token);
        let repr = Repr {
            common: CommonRepr {
                flow: remote_flow,
                psn: Psn(self.probe_seq),
                path: path as u16,
                flags: Flags::empty(),
                timestamp_ns: now.as_ns(),
            },
            body: Body::Probe(ProbeRepr { pad_len: pad }),
        };
        self.probe_seq = self.probe_seq.wrapping_add(1);
        let len = repr.buffer_len_with_token(self.cfg.token);
        repr.emit_with_token(buf, self.cfg.token).ok()?;
        self.paths[path].counters.probes_sent += 1;
        self.stats.probes_sent += 1;
        let wire = Duration::serialisation(len as u64, self.cfg.line_rate_bps);
        self.line_next = self.line_next.max(self.burst_floor(now, wire)) + wire;
        Some(Transmit {
            path: path as u16,
            priority: Priority::Probe,
            len,
            flow: 0,
        })
    }

    fn in_flight_count(&self) -> u32 {
        self.paths.iter().map(|p| p.inflight).sum()
    }

    // ---------------------------------------------------------------- feedback

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
    fn expire_acked_inflight(&mut self, now: Instant) {
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

    fn declare_lost(&mut self, psn: u64, now: Instant, by_timeout: bool) {
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
    fn detect_losses(&mut self, now: Instant) {
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

    fn on_buffer_full(&mut self, now: Instant, hole: u64, refused: u64) {
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

    // ---------------------------------------------------------------- timers

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

    fn rto_deadline(&self) -> Option<Instant> {
        (self.in_flight_count() > 0 || !self.retx.is_empty())
            .then(|| self.last_progress + self.rto())
    }

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

    fn on_rto(&mut self, now: Instant, events: &mut VecDeque<Event>) {
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

    fn start_probing(&mut self, until: Instant) {
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
