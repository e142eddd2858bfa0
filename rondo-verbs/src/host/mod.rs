//! The verbs layer of one context, sans IO: an engine [`Endpoint`] plus the QPs,
//! memory regions and completion queues on top of it. It implements [`Host`], so the
//! in-process fabric and the UDP progress loop drive it like any engine host.

pub(crate) mod placement;
mod requester;
mod responder;
#[cfg(test)]
mod tests;

use crate::cq::CqShared;
use crate::mr::MrShared;
use crate::types::{
    AsyncEvent, ContextStats, Opcode, QpInitAttr, QpState, QpStats, RecvWr, SendWr, Sge, WcOpcode,
    WcStatus, WorkCompletion,
};
use crate::VerbsError;
use placement::{lock, KeyTables, RequestPlacement, RxState};
use reorder::FlowIdHash;
use rondo_proto::rng::Rng;
use rondo_proto::{
    ConnectionHandle, Duration, Endpoint, Event, FlowConfig, Host, Instant, PayloadRef, Transmit,
    TxBuffer,
};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

/// Largest message a work request may carry (2 GiB, as ibverbs' 31-bit lengths).
pub const MAX_MESSAGE_BYTES: u64 = 1 << 31;

/// One outstanding send work request.
#[derive(Debug)]
pub(crate) struct Request {
    pub req_id: u64,
    pub wr: SendWr,
    pub len: u64,
    /// Handed to the engine (cleared when an RNR NAK makes it go again).
    pub sent: bool,
    /// The engine message that carries it (set when it is sent).
    pub msg_id: u64,
    /// The engine reported that message delivered (every packet acknowledged):
    /// only then can the responder's ACK be true.
    pub delivered: bool,
    pub rnr_count: u8,
    /// Failed a local check at post time; completes with this when it reaches the front.
    pub local_error: Option<WcStatus>,
}

/// State of one QP inside the host.
#[derive(Debug)]
pub(crate) struct QpSlot {
    pub qpn: u32,
    pub pd: u32,
    pub state: QpState,
    pub conn: Option<ConnectionHandle>,
    pub send_cq: Arc<CqShared>,
    pub recv_cq: Arc<CqShared>,
    pub attr: QpInitAttr,
    // Requester.
    pub next_req: u64,
    pub next_msg: u64,
    pub outstanding: VecDeque<Request>,
    /// How many requests at the front of `outstanding` were handed to the engine
    /// (they go in order, so the sent ones are a prefix).
    pub sent: usize,
    pub rnr_until: Option<Instant>,
    /// Highest request id the responder acknowledged (its ACKs are cumulative);
    /// a request completes when it is acknowledged and its message delivered.
    pub acked_upto: Option<u64>,
    /// When the oldest sent request times out without an answer (local ACK
    /// timeout), and the timeouts so far.
    pub ack_deadline: Option<Instant>,
    pub timeouts: u8,
    /// The engine's packets of this QP acknowledged and received (duplicates
    /// aside) when last read: when it moves, the peer's transport is answering,
    /// which restarts the local ACK timer as an RC requester's every ACK does.
    pub progress_seen: u64,
    // Responder.
    /// Sequence, receives and verdicts, shared with the connection's placement.
    pub rx: Arc<Mutex<RxState>>,
    /// Highest request executed and not yet acknowledged (ACKs are coalesced).
    pub ack_pending: Option<u64>,
    pub stats: QpStats,
}

impl QpSlot {
    /// Whether the READs handed to the engine and not yet answered are as many
    /// as the QP's transport allows (`rc-gbn` and `rc-sr`: ConnectX-7's 16,
    /// paper App. A; [`rondo_proto::Transport::max_outstanding_reads`]). A NIC
    /// processes its send queue in order, so a READ held here holds every
    /// request posted after it too.
    pub(crate) fn reads_at_limit(&self) -> bool {
        let Some(limit) = self.attr.flow.transport.max_outstanding_reads() else {
            return false;
        };
        let reads = self
            .outstanding
            .iter()
            .take(self.sent)
            .filter(|r| r.wr.opcode == Opcode::RdmaRead)
            .count();
        reads >= limit as usize
    }

    /// Completes receive `recv` (if the request consumed one) on the receive CQ;
    /// `solicited`: the requester asked for a solicited event.
    pub(crate) fn complete_recv(
        &self,
        recv: Option<&RecvWr>,
        status: WcStatus,
        opcode: WcOpcode,
        byte_len: u64,
        (imm, solicited): (Option<u32>, bool),
    ) {
        if let Some(r) = recv {
            let mut wc = self.completion(r.wr_id, status, opcode);
            wc.byte_len = byte_len;
            wc.imm = imm;
            self.recv_cq.push_solicited(wc, solicited);
        }
    }

    fn completion(&self, wr_id: u64, status: WcStatus, opcode: WcOpcode) -> WorkCompletion {
        WorkCompletion {
            wr_id,
            status,
            opcode,
            byte_len: 0,
            imm: None,
            qp_num: self.qpn,
        }
    }
}

/// Completion opcode of a send work request.
pub(crate) fn wc_opcode(op: Opcode) -> WcOpcode {
    match op {
        Opcode::Send | Opcode::SendWithImm => WcOpcode::Send,
        Opcode::RdmaWrite | Opcode::RdmaWriteWithImm => WcOpcode::RdmaWrite,
        Opcode::RdmaRead => WcOpcode::RdmaRead,
    }
}

/// Key, QP-number and seed source: seeded for `mem` (deterministic runs), the
/// OS CSPRNG for real datapaths, one draw per value (issue 15 row 11: keys,
/// tokens and QP numbers of a real context are not one seeded stream whose
/// outputs go on the wire in clear).
pub(crate) enum Keys {
    /// A seeded generator (the in-memory fabric and unit tests).
    Seeded(Rng),
    /// Every value drawn from the operating system (`getrandom`).
    Os,
}

impl Keys {
    pub(crate) fn seeded(seed: u64) -> Keys {
        Keys::Seeded(Rng::new(seed))
    }

    /// Values from the OS CSPRNG, for real backends; fails when it cannot be read.
    pub(crate) fn from_os() -> Result<Keys, VerbsError> {
        getrandom::u64()
            .map_err(|e| VerbsError::Io(format!("reading the OS random source for keys: {e}")))?;
        Ok(Keys::Os)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        match self {
            Keys::Seeded(rng) => rng.next_u64(),
            // `from_os` checked that the source works; should it fail later, the
            // value is taken from the kernel's address-space randomisation and the
            // clock (still unpredictable to a peer, never a fixed stream).
            Keys::Os => getrandom::u64().unwrap_or_else(|_| fallback_u64()),
        }
    }

    /// A nonzero 32-bit value for which `taken` is false.
    fn fresh(&mut self, bits: u32, taken: impl Fn(u32) -> bool) -> u32 {
        loop {
            let k = (self.next_u64() >> (64 - bits)) as u32;
            if k != 0 && !taken(k) {
                return k;
            }
        }
    }
}

/// A value for the unlikely case that the OS random source stops working after
/// it worked at open: std's per-process random hash keys over the clock.
fn fallback_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish()
}

/// How long a destroyed QP's connection stays to refuse requests after the last
/// one (or its destruction), at least and at most; within that, the QP's local ACK
/// timeout x (`retry_cnt` + 1), as long as a peer configured like it keeps trying.
const ORPHAN_LINGER_MIN: Duration = Duration::from_ms(100);
const ORPHAN_LINGER_MAX: Duration = Duration::from_ms(10_000);

/// The engine connection of a destroyed QP, kept for a while so that requests
/// arriving on it are refused (`RemOpErr`) and the peer's requester does not hang.
#[derive(Debug)]
struct Orphan {
    conn: ConnectionHandle,
    /// The destroyed QP's number: its flow id in the datapath and authentication.
    qpn: u32,
    next_msg: u64,
    rx: Arc<Mutex<RxState>>,
    linger: Duration,
    /// When it is removed, unless another request comes first.
    retire_at: Instant,
}

/// The verbs layer of one context.
pub(crate) struct VerbsHost {
    pub endpoint: Endpoint,
    /// By QP number (the context's own numbers, looked up on every post, poll and
    /// event: the engine's flow-table hash, not SipHash).
    pub qps: HashMap<u32, QpSlot, FlowIdHash>,
    /// Engine connections of destroyed QPs, for a while ([`Orphan`]).
    orphans: Vec<Orphan>,
    /// Flow ids of orphans removed since the last [`VerbsHost::take_retired`], kept
    /// when `report_retired`: the datagram authentication in front of the host
    /// forgets their keys.
    retired: Vec<u32>,
    pub report_retired: bool,
    /// Memory regions by key, shared with the QPs' placements.
    tables: Arc<Mutex<KeyTables>>,
    pub keys: Keys,
    next_pd: u32,
    pub stats: ContextStats,
    /// QPs with a coalesced ACK pending.
    acks_due: Vec<u32>,
    /// Scratch list of connected QPs for `process_events`.
    scratch: Vec<(u32, ConnectionHandle)>,
    /// Line rate given to each QP's engine flow.
    pub line_rate_bps: u64,
    /// Async events not yet taken by the application (at most one per CQ and one
    /// per QP: each reports a state a CQ or QP enters once).
    pub async_events: VecDeque<AsyncEvent>,
    /// Runs once per async event queued ([`crate::Context::set_async_notify`]).
    pub async_notify: Option<crate::cq::NotifyHook>,
}

impl VerbsHost {
    pub(crate) fn new(endpoint: Endpoint, keys: Keys, line_rate_bps: u64) -> VerbsHost {
        VerbsHost {
            endpoint,
            qps: HashMap::default(),
            orphans: Vec::new(),
            retired: Vec::new(),
            report_retired: false,
            tables: Arc::default(),
            keys,
            next_pd: 1,
            stats: ContextStats::default(),
            acks_due: Vec::new(),
            scratch: Vec::new(),
            line_rate_bps,
            async_events: VecDeque::new(),
            async_notify: None,
        }
    }

    pub(crate) fn alloc_pd(&mut self) -> u32 {
        self.next_pd += 1;
        self.next_pd - 1
    }

    pub(crate) fn register(&mut self, mut mr: MrShared) -> Arc<MrShared> {
        let mut t = lock(&self.tables);
        mr.lkey = self.keys.fresh(32, |k| t.lkeys.contains_key(&k));
        mr.rkey = self.keys.fresh(32, |k| t.rkeys.contains_key(&k));
        let mr = Arc::new(mr);
        t.lkeys.insert(mr.lkey, mr.clone());
        t.rkeys.insert(mr.rkey, mr.clone());
        mr
    }

    pub(crate) fn deregister(&mut self, lkey: u32, rkey: u32) {
        let mut t = lock(&self.tables);
        t.lkeys.remove(&lkey);
        t.rkeys.remove(&rkey);
    }

    /// A new QP number (24 bits, random, unused).
    pub(crate) fn create_qp(
        &mut self,
        pd: u32,
        send_cq: Arc<CqShared>,
        recv_cq: Arc<CqShared>,
        attr: QpInitAttr,
    ) -> u32 {
        // Not the number of a destroyed QP whose connection is still there.
        let qpn = self.keys.fresh(24, |k| {
            self.qps.contains_key(&k) || self.orphans.iter().any(|o| o.qpn == k)
        });
        self.qps.insert(
            qpn,
            QpSlot {
                qpn,
                pd,
                state: QpState::Init,
                conn: None,
                send_cq,
                recv_cq,
                attr,
                next_req: 0,
                next_msg: 0,
                outstanding: VecDeque::new(),
                sent: 0,
                rnr_until: None,
                acked_upto: None,
                ack_deadline: None,
                timeouts: 0,
                progress_seen: 0,
                rx: Arc::new(Mutex::new(RxState::new(pd))),
                ack_pending: None,
                stats: QpStats::default(),
            },
        );
        qpn
    }

    pub(crate) fn destroy_qp(&mut self, now: Instant, qpn: u32) {
        if let Some(slot) = self.qps.remove(&qpn) {
            lock(&slot.rx).open = false;
            if let Some(conn) = slot.conn {
                let linger = slot.attr.ack_timeout().map_or(ORPHAN_LINGER_MAX, |t| {
                    t.saturating_mul(u64::from(slot.attr.retry_cnt) + 1)
                });
                let linger = Duration::from_ps(
                    linger
                        .as_ps()
                        .clamp(ORPHAN_LINGER_MIN.as_ps(), ORPHAN_LINGER_MAX.as_ps()),
                );
                self.orphans.push(Orphan {
                    conn,
                    qpn,
                    next_msg: slot.next_msg,
                    rx: slot.rx,
                    linger,
                    retire_at: now + linger,
                });
            }
        }
    }

    /// Removes the orphans whose linger is over: their engine connections are
    /// closed and forgotten, their flow ids handed to [`VerbsHost::take_retired`].
    fn retire_orphans(&mut self, now: Instant) {
        let mut i = 0;
        while i < self.orphans.len() {
            if self.orphans[i].retire_at > now {
                i += 1;
                continue;
            }
            let o = self.orphans.swap_remove(i);
            self.endpoint.close(o.conn);
            self.endpoint.forget(o.conn);
            if self.report_retired {
                self.retired.push(o.qpn);
            }
        }
    }

    /// Flow ids of destroyed QPs whose connections are gone since the last call.
    pub(crate) fn take_retired(&mut self) -> Vec<u32> {
        std::mem::take(&mut self.retired)
    }

    /// Connects a QP's engine flow to the peer QP `remote_qpn`.
    pub(crate) fn connect(
        &mut self,
        now: Instant,
        qpn: u32,
        remote_qpn: u32,
        cfg: &FlowConfig,
    ) -> Result<(), VerbsError> {
        let slot = self
            .qps
            .get_mut(&qpn)
            .ok_or(VerbsError::InvalidWr("no such QP"))?;
        if slot.state != QpState::Init {
            return Err(VerbsError::InvalidState {
                qpn,
                state: slot.state,
                hint: "connect a QP once, right after creating it",
            });
        }
        let h = self
            .endpoint
            .connect(now, qpn, remote_qpn, cfg)
            .map_err(|e| VerbsError::Engine(e.to_string()))?;
        slot.conn = Some(h);
        slot.state = QpState::Rts;
        let placement = RequestPlacement::new(slot.rx.clone(), self.tables.clone());
        self.endpoint.set_placement(h, Box::new(placement));
        Ok(())
    }

    pub(crate) fn qp_state(&self, qpn: u32) -> QpState {
        self.qps.get(&qpn).map_or(QpState::Error, |s| s.state)
    }

    /// Verbs and engine counters of a QP.
    pub(crate) fn qp_stats(&self, qpn: u32) -> QpStats {
        let Some(slot) = self.qps.get(&qpn) else {
            return QpStats::default();
        };
        let mut s = slot.stats.clone();
        if let Some(h) = slot.conn {
            let c = self.endpoint.connection(h);
            let tx = c.sender_stats();
            let rx = c.receiver_stats();
            s.retx_packets = tx.retransmissions;
            s.data_packets_sent = tx.data_packets_sent;
            s.payloads_by_reference = tx.payloads_by_reference;
            s.ood_max = rx.ood.max();
            s.ood_p99 = rx.ood.quantile(0.99);
            s.ood_avg = rx.ood.mean();
            s.data_packets_received = rx.data_packets;
            s.bytes_delivered = rx.bytes_delivered;
            s.dropped_out_of_window = rx.dropped_out_of_window;
            s.dropped_buffer_full = rx.dropped_buffer_full;
            s.dropped_inconsistent = rx.inconsistent;
            s.placed_in_order = rx.placed_in_order;
            s.placed_in_place = rx.placed_in_place;
            s.placed_repaired = rx.placed_repaired;
            s.duplicates_received = rx.duplicates;
            s.rejected_acks = tx.bad_feedback
                + tx.unexpected_probe_acks
                + tx.implausible_highest
                + tx.rejected_cum_acks;
            s.probes_sent = tx.probes_sent;
            s.probes_acked = tx.probes_acked;
            s.path_downs = tx.path_downs;
        }
        s.bytes_placed_direct = lock(&slot.rx).bytes_direct;
        s
    }

    pub(crate) fn context_stats(&self) -> ContextStats {
        let e = self.endpoint.stats();
        ContextStats {
            datagrams: e.datagrams,
            malformed: e.malformed,
            unknown_qp: e.unknown_flow,
            bad_token: e.bad_token,
            ..self.stats
        }
    }

    /// Finds the region of a local scatter/gather entry, checked against `pd`,
    /// bounds and `need`; returns it with the entry's offset inside it.
    pub(crate) fn local(
        &self,
        pd: u32,
        sge: &Sge,
        need: crate::AccessFlags,
    ) -> Option<(Arc<MrShared>, usize)> {
        lock(&self.tables).local(pd, sge, need)
    }

    /// Posts a receive (`ibv_post_recv`).
    pub(crate) fn post_recv(&mut self, qpn: u32, wr: RecvWr) -> Result<(), VerbsError> {
        let slot = self
            .qps
            .get_mut(&qpn)
            .ok_or(VerbsError::InvalidWr("no such QP"))?;
        if wr.sg_list.len() > slot.attr.max_sge {
            return Err(VerbsError::InvalidWr(
                "more scatter/gather entries than QpInitAttr::max_sge",
            ));
        }
        if slot.state == QpState::Error {
            let wc = slot.completion(wr.wr_id, WcStatus::WrFlushErr, WcOpcode::Recv);
            slot.recv_cq.push(wc);
            return Ok(());
        }
        let mut rx = lock(&slot.rx);
        if rx.recvs.len() >= slot.attr.max_recv_wr {
            return Err(VerbsError::RecvQueueFull {
                depth: slot.attr.max_recv_wr,
            });
        }
        rx.recvs.push_back(wr);
        Ok(())
    }

    /// Moves a QP to the error state: the front request completes with `front`
    /// (if given), every other request and every receive is flushed.
    pub(crate) fn fail_qp(&mut self, qpn: u32, front: Option<WcStatus>) {
        let Some(slot) = self.qps.get_mut(&qpn) else {
            return;
        };
        slot.state = QpState::Error;
        slot.rnr_until = None;
        slot.ack_deadline = None;
        let mut status = front;
        slot.sent = 0;
        while let Some(r) = slot.outstanding.pop_front() {
            let st = status.take().unwrap_or(WcStatus::WrFlushErr);
            let wc = slot.completion(r.wr.wr_id, st, wc_opcode(r.wr.opcode));
            slot.send_cq.push(wc);
        }
        let flushed = {
            let mut rx = lock(&slot.rx);
            rx.open = false;
            rx.take_receives()
        };
        for r in flushed {
            let wc = slot.completion(r.wr_id, WcStatus::WrFlushErr, WcOpcode::Recv);
            slot.recv_cq.push(wc);
        }
    }

    /// Reports CQs that overran and moves the QPs that complete on them to error
    /// (ibverbs' `IBV_EVENT_CQ_ERR`, then `IBV_EVENT_QP_FATAL` for each such QP):
    /// a lost completion leaves a QP whose requests can no longer be accounted for.
    pub(crate) fn fail_overrun_qps(&mut self) {
        let mut failed = Vec::new();
        for slot in self.qps.values() {
            for cq in [&slot.send_cq, &slot.recv_cq] {
                if let Some(cq) = cq.take_overrun() {
                    self.async_events.push_back(AsyncEvent::CqError { cq });
                    self.notify_async();
                }
            }
            let overran = slot.send_cq.overflowed() || slot.recv_cq.overflowed();
            if overran && slot.state != QpState::Error {
                failed.push(slot.qpn);
            }
        }
        for qpn in failed {
            self.fail_qp(qpn, None);
            self.async_events
                .push_back(AsyncEvent::QpFatal { qp_num: qpn });
            self.notify_async();
        }
    }

    /// Runs the async event hook, if one is set, for an event just queued.
    fn notify_async(&self) {
        if let Some(hook) = &self.async_notify {
            hook();
        }
    }

    /// Handles every pending engine event of every QP.
    pub(crate) fn process_events(&mut self, now: Instant) {
        // Reused between calls: this runs after every datagram.
        let mut qpns = std::mem::take(&mut self.scratch);
        qpns.clear();
        qpns.extend(self.qps.values().filter_map(|s| s.conn.map(|h| (s.qpn, h))));
        for &(qpn, h) in &qpns {
            while let Some(ev) = self.endpoint.poll_event(h) {
                match ev {
                    Event::Received { msg_id, data } => self.on_message(now, qpn, msg_id, &data),
                    Event::SendComplete { msg_id } => self.on_delivered(qpn, msg_id),
                    Event::Error(_) if self.qp_state(qpn) != QpState::Error => {
                        self.fail_qp(qpn, Some(WcStatus::RetryExcErr));
                    }
                    _ => {}
                }
            }
        }
        self.scratch = qpns;
        self.note_transport_progress(now);
        self.fail_overrun_qps();
        for o in &mut self.orphans {
            let (h, next_msg) = (&o.conn, &mut o.next_msg);
            while let Some(ev) = self.endpoint.poll_event(*h) {
                let Event::Received { data, .. } = ev else {
                    continue;
                };
                o.retire_at = now + o.linger;
                lock(&o.rx).decided.clear(); // all refused: answered below
                self.stats.for_destroyed_qp += 1;
                use crate::header::{AckStatus, Header, MsgOp};
                let Ok((req, _)) = Header::parse(&data) else {
                    continue;
                };
                if matches!(req.op, MsgOp::Send | MsgOp::Write | MsgOp::ReadReq) {
                    let nak = Header::answer_message(req.req_id, AckStatus::RemOp);
                    let _ = self.endpoint.post(*h, now, *next_msg, nak);
                    *next_msg += 1;
                }
            }
        }
    }

    fn on_message(&mut self, now: Instant, qpn: u32, msg_id: u64, msg: &[u8]) {
        let (h, payload) = match crate::header::Header::parse(msg) {
            Ok(x) => x,
            Err(_) => {
                if let Some(s) = self.qps.get_mut(&qpn) {
                    s.stats.bad_messages += 1;
                }
                return;
            }
        };
        use crate::header::MsgOp;
        match h.op {
            MsgOp::Send | MsgOp::Write | MsgOp::ReadReq => self.on_request(now, qpn, msg_id),
            MsgOp::Ack | MsgOp::ReadResp => self.on_response(now, qpn, &h, payload),
        }
    }

    /// Restarts the local ACK timer of `qpn` after an answer (or a first send):
    /// running while a sent request waits for its answer.
    pub(crate) fn restart_ack_timer(&mut self, now: Instant, qpn: u32, progress: bool) {
        let Some(s) = self.qps.get_mut(&qpn) else {
            return;
        };
        if progress {
            s.timeouts = 0;
        }
        s.ack_deadline = match s.attr.ack_timeout() {
            Some(t) if s.sent > 0 && s.state == QpState::Rts => {
                if progress || s.ack_deadline.is_none() {
                    Some(now + t)
                } else {
                    s.ack_deadline
                }
            }
            _ => None,
        };
    }

    /// Restarts the local ACK timer of every QP waiting for an answer whose
    /// engine connection moved since the last look: packets of its requests
    /// acknowledged, or new packets received from the peer (responses, or the
    /// peer's own requests: either way its transport is alive). The timer then ends only
    /// a request whose peer went silent, not one that is slower on the wire than
    /// `timeout` x (`retry_cnt` + 1), as an RC requester's ACKs of each packet keep
    /// a long message alive on a slow link.
    fn note_transport_progress(&mut self, now: Instant) {
        let mut moved = std::mem::take(&mut self.scratch);
        moved.clear();
        for s in self.qps.values_mut() {
            let (Some(h), Some(_)) = (s.conn, s.ack_deadline) else {
                continue;
            };
            let Some(c) = self.endpoint.get(h) else {
                continue;
            };
            let r = c.receiver_stats();
            let progress =
                c.sender_stats().packets_acked + r.data_packets.saturating_sub(r.duplicates);
            if progress != s.progress_seen {
                s.progress_seen = progress;
                moved.push((s.qpn, h));
            }
        }
        for &(qpn, _) in &moved {
            self.restart_ack_timer(now, qpn, true);
        }
        self.scratch = moved;
    }

    /// Runs local ACK timers that are due: one more timeout, or after `retry_cnt`
    /// of them the oldest request fails with `RetryExcErr` and the QP goes to error.
    fn ack_timers(&mut self, now: Instant) {
        let due: Vec<u32> = self
            .qps
            .values()
            .filter(|s| s.ack_deadline.is_some_and(|t| t <= now))
            .map(|s| s.qpn)
            .collect();
        for qpn in due {
            let Some(s) = self.qps.get_mut(&qpn) else {
                continue;
            };
            s.ack_deadline = None;
            s.stats.ack_timeouts += 1;
            if s.timeouts >= s.attr.retry_cnt {
                self.fail_qp(qpn, Some(WcStatus::RetryExcErr));
            } else {
                s.timeouts += 1;
                self.restart_ack_timer(now, qpn, false);
            }
        }
    }

    /// Runs RNR retry timers that are due.
    fn rnr_timers(&mut self, now: Instant) {
        let due: Vec<u32> = self
            .qps
            .values()
            .filter(|s| s.rnr_until.is_some_and(|t| t <= now))
            .map(|s| s.qpn)
            .collect();
        for qpn in due {
            if let Some(s) = self.qps.get_mut(&qpn) {
                s.rnr_until = None;
            }
            self.pump(now, qpn);
        }
    }
}

impl Host for VerbsHost {
    fn handle_datagram(&mut self, now: Instant, path: u16, data: &[u8], ecn_ce: bool) {
        // Drops are counted by the endpoint (ContextStats) and per flow.
        let _ = self.endpoint.receive(now, path, data, ecn_ce);
        self.process_events(now);
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.endpoint.handle_timeout(now);
        self.rnr_timers(now);
        self.ack_timers(now);
        self.process_events(now);
        self.retire_orphans(now);
    }

    fn poll_transmit<B: TxBuffer + ?Sized>(
        &mut self,
        now: Instant,
        tx: &mut B,
    ) -> Option<Transmit> {
        if !self.acks_due.is_empty() {
            self.flush_acks(now);
        }
        self.endpoint.poll_transmit(now, tx)
    }

    fn payload(&self, r: PayloadRef) -> rondo_proto::PayloadBytes<'_> {
        self.endpoint.payload(r)
    }

    fn poll_timeout(&self) -> Option<Instant> {
        if !self.acks_due.is_empty() {
            return Some(Instant::ZERO);
        }
        let rnr = self
            .qps
            .values()
            .filter_map(|s| s.rnr_until)
            .chain(self.qps.values().filter_map(|s| s.ack_deadline))
            .chain(self.orphans.iter().map(|o| o.retire_at))
            .min();
        match (self.endpoint.poll_timeout(), rnr) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}
