//! The sending half of a flow: segmentation, the sent table, retransmission
//! queue, pacing and line clocks, path liveness, and the transport seams it is
//! built from: congestion control ([`crate::cc`]), path selection
//! ([`crate::select`]), packet selection ([`crate::scheduler`]) and loss recovery
//! ([`crate::recovery`]).
//!
//! [`Sender`] owns one of each seam and a [`Core`], the state every transport
//! shares; the seams read the core and tell the sender what to do. Each concern is
//! a submodule: [`transmit`] (what goes out next, and where), [`feedback`] (ACKs
//! and NAKs), [`loss`] (loss verdicts, path failure, "buffer full" NAKs) with its
//! [`retx`] queue, and [`timers`] (wake-ups).

mod feedback;
mod lazy;
mod loss;
mod retx;
mod timers;
mod transmit;

use crate::cc::{AnyCc, CongestionControl, FlowView};
use crate::config::FlowConfig;
use crate::event::{ConnectionError, Event};
use crate::message::{Message, PayloadBytes};
use crate::path::Paths;
use crate::recovery::{AnyRecovery, LossRecovery};
use crate::scheduler::{AnyPacketSelector, PacketSelector, UnsentSet};
use crate::select::{AnyPathSelector, PathSelector};
use crate::stats::SenderStats;
use crate::time::{Duration, Instant};
use crate::transport::Transport;
pub(crate) use lazy::LazySender;
use retx::RetxQueue;
use std::collections::VecDeque;
pub(crate) use transmit::line_clock_after;

#[derive(Debug)]
pub(crate) struct OutMessage {
    id: u64,
    first_psn: u64,
    packets: u64,
    data: Message,
}

#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SentPacket {
    pub(crate) acked: bool,
    pub(crate) in_flight: bool,
    pub(crate) queued: bool,
    pub(crate) path: u16,
    pub(crate) tx_count: u8,
    /// Packets in flight on its path when it was last sent (saturating): the
    /// packets ahead of it (`FlowConfig::scheduler_ahead`).
    pub(crate) ahead: u16,
    pub(crate) sent_at: Instant,
}

// One entry per packet of the window: `ahead` took bytes the layout left as
// padding, and it should stay that way.
const _: () = assert!(std::mem::size_of::<SentPacket>() == 16);

/// The state of a sender that every transport shares.
#[derive(Debug)]
pub(crate) struct Core {
    pub(crate) cfg: FlowConfig,
    payload: u64,
    pub(crate) paths: Paths,
    /// The largest smoothed RTT of any path, kept with each RTT sample: the
    /// retransmission timer reads it on every `poll_timeout`.
    pub(crate) max_srtt: Option<Duration>,
    messages: VecDeque<OutMessage>,
    /// State of PSNs `[base, base + table.len())`.
    pub(crate) table: VecDeque<SentPacket>,
    pub(crate) base: u64,
    /// Lowest PSN not known to be delivered.
    una: u64,
    next_psn: u64,
    unsent: UnsentSet,
    retx: RetxQueue,
    /// Highest PSN the receiver reported seeing.
    pub(crate) highest_seen: u64,
    pace_next: Instant,
    probe_seq: u32,
    probe_rr: usize,
    /// (PSN, retransmission) of the DATA packet the current transmit call wrote.
    pub(crate) last_data: Option<(u32, bool)>,
    /// Receiver-limited span: new PSNs only below `una + rx_window`, set by
    /// "reorder buffer full" NAKs and grown by one per window delivered (per
    /// `FlowConfig::receiver_span_step` PSNs when that is set).
    rx_window: Option<u64>,
    rx_window_grow: u64,
    /// The loss-recovery scheme's outstanding-PSN limit: new PSNs only below
    /// `una + psn_window` ([`crate::recovery`]'s `psn_window`).
    psn_window: Option<u64>,
    /// Scratch: every path's open window during path selection (allocated at
    /// the first selection: a connection that only receives never needs it).
    open: Vec<f64>,
    pub(crate) stats: SenderStats,
    pub(crate) failed: Option<ConnectionError>,
    pending_path_events: VecDeque<Event>,
    /// Paths taken out of rotation since the seams last heard of it.
    downed: Vec<usize>,
    /// Loss verdicts (path, by timeout) since the congestion controller last heard.
    losses: Vec<(usize, bool)>,
    /// When the first packet known delivered (by a cumulative ACK) without its
    /// own ACK leaves its path's inflight ([`Core::expire_acked_inflight`]):
    /// a wake-up, so that a sender whose per-packet ACKs were lost (NAKs
    /// dropped by a switch, say) does not wait with its window full. `None`
    /// when no entry is acknowledged and still in flight, so the scan is skipped.
    pub(crate) inflight_expiry: Option<Instant>,
}

/// The sending half of a flow: the shared core and one implementation of each seam.
#[derive(Debug)]
pub(crate) struct Sender {
    pub(crate) core: Core,
    pub(crate) cc: AnyCc,
    pub(crate) selector: AnyPathSelector,
    pub(crate) scheduler: AnyPacketSelector,
    pub(crate) recovery: AnyRecovery,
    /// The last transmit attempt had data, pacing allowed it, and the path
    /// selector chose no path (a fixed path out of rotation while others are
    /// open): the send term of `poll_timeout` waits until feedback, a post, or a
    /// timer that changed the controller or recovery, instead of reporting "now"
    /// for ever.
    select_blocked: bool,
}

impl Sender {
    pub(crate) fn new(cfg: &FlowConfig, now: Instant) -> Sender {
        let paths = Paths::new(cfg);
        let start = cfg.initial_psn as u64;
        let parts = Transport::parts(cfg, now, &paths);
        let psn_window = parts.recovery.psn_window();
        Sender {
            core: Core {
                cfg: cfg.clone(),
                payload: cfg.payload_per_packet() as u64,
                paths,
                max_srtt: None,
                messages: VecDeque::new(),
                table: VecDeque::new(),
                base: start,
                una: start,
                next_psn: start,
                unsent: UnsentSet::new(start),
                retx: RetxQueue::new(),
                highest_seen: start,
                pace_next: now,
                probe_seq: 0,
                last_data: None,
                probe_rr: 0,
                rx_window: None,
                rx_window_grow: 0,
                psn_window,
                inflight_expiry: None,
                open: Vec::new(),
                stats: SenderStats::default(),
                failed: None,
                pending_path_events: VecDeque::new(),
                downed: Vec::new(),
                losses: Vec::new(),
            },
            cc: parts.cc,
            selector: parts.selector,
            scheduler: parts.scheduler,
            recovery: parts.recovery,
            select_blocked: false,
        }
    }

    /// Queues a message at `now`; PSNs are assigned now.
    pub(crate) fn post(
        &mut self,
        now: Instant,
        msg_id: u64,
        data: Message,
        events: &mut VecDeque<Event>,
    ) {
        self.catch_up(now, events);
        self.select_blocked = false;
        let c = &mut self.core;
        let packets = (data.len() as u64).div_ceil(c.payload);
        c.messages.push_back(OutMessage {
            id: msg_id,
            first_psn: c.next_psn,
            packets,
            data,
        });
        c.next_psn += packets;
        c.unsent.extend_to(c.next_psn);
    }

    /// Tells the seams what the core decided since they last ran: paths taken
    /// out of rotation (path selection forgets them, the scheduler recomputes its
    /// skips) and loss verdicts (the congestion controller reacts).
    fn settle(&mut self, now: Instant) {
        if !self.core.downed.is_empty() {
            for &path in &self.core.downed {
                self.selector.reset(path);
            }
            self.core.downed.clear();
            self.scheduler.on_paths_changed(&self.core.paths, &self.cc);
        }
        for &(path, by_timeout) in &self.core.losses {
            self.cc.on_loss(now, path, by_timeout, &self.core.paths);
        }
        self.core.losses.clear();
    }

    /// Messages posted and not yet completely acknowledged.
    pub(crate) fn outstanding_messages(&self) -> usize {
        self.core.messages.len()
    }

    /// Flow pacing rate, in packets per microsecond.
    pub(crate) fn pacing_rate(&self) -> f64 {
        self.cc.pacing_rate(&self.core.paths)
    }

    /// The payload bytes `offset..offset + len` of the message whose first PSN is
    /// `first_psn`, while it is not fully acknowledged.
    pub(crate) fn payload(
        &self,
        first_psn: u64,
        offset: u64,
        len: u32,
    ) -> Option<PayloadBytes<'_>> {
        let messages = &self.core.messages;
        let i = messages.partition_point(|m| m.first_psn < first_psn);
        let m = messages.get(i).filter(|m| m.first_psn == first_psn)?;
        m.data.locate(usize::try_from(offset).ok()?, len as usize)
    }
}

impl Core {
    /// Whether paths out of rotation are probed now: there are some, and the
    /// flow has a message not yet completely acknowledged. An idle flow (a QP
    /// between messages, or the answering side of one) would otherwise send a
    /// probe per `down_probe_interval` for as long as it lives; its paths are
    /// probed again as soon as it has a message (their probe times are then
    /// already due).
    fn probes_down_paths(&self) -> bool {
        self.paths.down() > 0 && !self.messages.is_empty()
    }

    /// Whether the congestion controller's deadlines wait for the sender's
    /// next event instead of waking it (`FlowConfig::timers_on_time`, with
    /// nothing to send; `Sender::catch_up`). The flag first: it is off on
    /// sockets and NICs, and `has_data` costs more.
    #[inline]
    fn ticks_deferred(&self) -> bool {
        self.cfg.timers_on_time && !self.has_data()
    }

    fn has_data(&self) -> bool {
        !self.retx.is_empty() || self.new_data_allowed()
    }

    /// Unsent PSNs exist and the receiver-limited span lets the lowest one go.
    fn new_data_allowed(&self) -> bool {
        self.unsent.lowest().is_some_and(|l| {
            self.rx_window.is_none_or(|w| l < self.una + w)
                && self.psn_window.is_none_or(|w| l < self.una + w)
        })
    }

    /// Packets in flight over every path.
    pub(crate) fn in_flight_count(&self) -> u32 {
        self.paths.in_flight()
    }

    /// A path's smoothed RTT moved from `old` to `new`: the largest of any path
    /// follows, with a pass over the paths only when the one that held it fell.
    fn note_srtt(&mut self, old: Option<Duration>, new: Option<Duration>) {
        if new >= self.max_srtt {
            self.max_srtt = new;
        } else if old == self.max_srtt {
            self.max_srtt = self.paths.iter().filter_map(|p| p.srtt).max();
        }
    }

    /// Retransmissions are queued.
    pub(crate) fn retx_pending(&self) -> bool {
        !self.retx.is_empty()
    }

    /// Moves the path events decided since the last call to `events` (a
    /// `VecDeque::append` of nothing still costs its bookkeeping, on every
    /// feedback and timeout).
    fn flush_path_events(&mut self, events: &mut VecDeque<Event>) {
        if !self.pending_path_events.is_empty() {
            events.append(&mut self.pending_path_events);
        }
    }
}

impl FlowView for Core {
    fn has_data(&self) -> bool {
        Core::has_data(self)
    }

    fn sent_before_acked(&self, now: Instant, age: Duration) -> bool {
        self.table
            .iter()
            .all(|e| !e.in_flight || e.sent_at + age > now)
    }
}
