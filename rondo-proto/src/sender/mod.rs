//! The sending half of a flow: segmentation, ARCC windows and pacing, capacity
//! probing, deficit path selection, the packet scheduler, and loss recovery.
//!
//! This module holds the state and its small queries; each concern is a submodule
//! adding to `impl Sender`: [`transmit`] (what goes out next, and where),
//! [`feedback`] (ACKs and NAKs), [`loss`] (early recovery, path failure, RTO) with
//! its [`retx`] queue, and [`timers`] (wake-ups, ARCC updates, probing phases).

mod feedback;
mod loss;
mod retx;
mod timers;
mod transmit;

use crate::config::FlowConfig;
use crate::event::{ConnectionError, Event};
use crate::message::{Message, PayloadBytes};
use crate::path::{ArccParams, PathState, PathStatus};
use crate::rng::Rng;
use crate::scheduler::{SkipScratch, UnsentSet};
use crate::select::DeficitSelector;
use crate::stats::SenderStats;
use crate::time::{Duration, Instant};
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
    data: Message,
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
    pub(crate) fn post(&mut self, msg_id: u64, data: Message) {
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

    /// The flow's datagram size: the least a transmit buffer must hold.
    pub(crate) fn mtu(&self) -> usize {
        self.cfg.mtu
    }

    /// The payload bytes `offset..offset + len` of the message whose first PSN is
    /// `first_psn`, while it is not fully acknowledged.
    pub(crate) fn payload(
        &self,
        first_psn: u64,
        offset: u64,
        len: u32,
    ) -> Option<PayloadBytes<'_>> {
        let i = self.messages.partition_point(|m| m.first_psn < first_psn);
        let m = self.messages.get(i).filter(|m| m.first_psn == first_psn)?;
        m.data.locate(usize::try_from(offset).ok()?, len as usize)
    }

    fn in_flight_count(&self) -> u32 {
        self.paths.iter().map(|p| p.inflight).sum()
    }
}
