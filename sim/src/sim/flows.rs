//! Hosts and flows: driving each host's [`Endpoint`] through the `Host` trait,
//! starting flows, posting their messages and recording their completion.

use super::Simulator;
use crate::error::SimError;
use crate::net::fabric::NONE;
use crate::net::{Ev, Meta};
use rondo_proto::placement::Placement;
use rondo_proto::tap::{MetricsTap, TapEvent};
use rondo_proto::time::{Duration, Instant};
use rondo_proto::{ConnectionHandle, Event, ExternalBytes, FlowConfig, Host, Message, Priority};
use std::collections::VecDeque;
use std::sync::Arc;

/// Bytes of one posted message: finite flows post their bytes in messages of
/// this size (the last one shorter); long-lived flows keep
/// [`LONG_OUTSTANDING`] of them posted.
pub const MESSAGE_BYTES: u64 = 256 * 1024;
/// Messages a long-lived flow keeps outstanding (1 MiB).
pub const LONG_OUTSTANDING: usize = 4;
/// Bytes of one READ request message (address, key and length, as a RoCE
/// RETH carries them).
pub const READ_REQUEST_BYTES: usize = 16;
/// Largest ring of first-transmission times per flow: a retransmission more than
/// this many PSNs behind the newest one sent gets no delay sample.
const FIRST_SENT_RING: usize = 1 << 14;
/// Bytes of probes a host NIC queues behind its data; more are dropped there
/// (counted as probe drops). Each connection paces its probes at the line rate on
/// its own (paper §4.2.2), so N connections probing at once queue N times the line
/// rate of probes: without a bound, the 319 connections of a host in a 320-host
/// all-to-all queue millions of them. 1 MiB is above what one connection queues
/// behind its own data while it probes (at most 3 base RTTs at the line rate; the
/// 320-host permutation peaks at 117 KB on any port), so runs with one sending
/// connection per host are unchanged.
const NIC_PROBE_QUEUE_BYTES: u64 = 1 << 20;
/// Timeouts of one host at one instant after which its timer is pushed 1 ns on.
const MAX_TIMEOUTS_AT_ONE_INSTANT: u32 = 10_000;

/// The payload of a simulated message: zeros, generated as the engine reads them,
/// so that a run of 100,000 flows holds no payload memory.
#[derive(Debug)]
struct Zeros(usize);

impl ExternalBytes for Zeros {
    fn len(&self) -> usize {
        self.0
    }

    fn read(&self, _offset: usize, dst: &mut [u8]) {
        dst.fill(0);
    }

    fn addr(&self, _offset: usize, _len: usize) -> Option<usize> {
        None
    }
}

/// The receive placement of a simulated flow: the engine counts what is
/// delivered in order (`ReceiverStats::bytes_delivered`); the bytes themselves
/// are not kept.
#[derive(Debug)]
struct CountOnly;

impl Placement for CountOnly {
    fn begin(&mut self, _msg_id: u64, _msg_len: u64) -> bool {
        true
    }

    fn target(&mut self, _offset: u64, _len: usize) -> Option<&mut [u8]> {
        None
    }

    fn place(&mut self, _offset: u64, _payload: &[u8]) {}

    fn commit(&mut self, _offset: u64, _len: usize) {}

    fn finish(&mut self) -> Vec<u8> {
        Vec::new()
    }
}

/// The operation of a flow's messages (`op` in scenario files).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// `src` sends the data to `dst` (an RDMA WRITE or SEND).
    #[default]
    Write,
    /// `src` (the requester) asks `dst` (the responder) for the data, one
    /// request of [`READ_REQUEST_BYTES`] per message; `dst` answers each request
    /// with a response message of the asked length on its side of the
    /// connection. A READ completes when its response has arrived in order at
    /// `src`, the flow when the last one has. At most the transport's
    /// [`rondo_proto::Transport::max_outstanding_reads`] READs are outstanding;
    /// the next waits for a completion (ConnectX-7: 16, paper App. A).
    Read,
}

/// How a flow posts its data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Messages {
    /// WRITE or READ.
    pub op: Op,
    /// Bytes per message (per READ); the last message of a finite flow is shorter.
    pub bytes: u64,
    /// Messages a long-lived flow keeps posted (perftest's tx depth); a finite
    /// flow posts all of its messages at its start.
    pub depth: usize,
}

impl Default for Messages {
    /// WRITEs of [`MESSAGE_BYTES`], [`LONG_OUTSTANDING`] posted.
    fn default() -> Self {
        Messages {
            op: Op::Write,
            bytes: MESSAGE_BYTES,
            depth: LONG_OUTSTANDING,
        }
    }
}

/// Names a set of flows a later flow waits for ([`Simulator::add_gate`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GateId(pub u32);

/// A gate: flows that start once every flow it waits for has finished.
#[derive(Clone, Debug, Default)]
pub(crate) struct Gate {
    /// Flows still to finish (or fail).
    remaining: usize,
    /// Flows waiting for it to open.
    waiting: Vec<u32>,
}

/// A flow to simulate.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowSpec {
    /// Sending host.
    pub src: usize,
    /// Receiving host.
    pub dst: usize,
    /// When it starts.
    pub start: Instant,
    /// Bytes to send; `None` for a long-lived flow.
    pub bytes: Option<u64>,
    /// A long-lived flow stops posting new data at this time (`None`: never).
    pub stop: Option<Instant>,
    /// Logical paths; `None`: as many as the hosts have equal-cost paths.
    pub paths: Option<u16>,
    /// Engine configuration template: the simulator sets `paths`, `mtu`,
    /// `line_rate_bps` and `seed`.
    pub cfg: FlowConfig,
    /// A label (job id, background) carried into the results.
    pub group: u32,
    /// WRITE or READ, the message size, the posting depth.
    pub messages: Messages,
    /// Start no earlier than when every flow of this gate has finished (or
    /// failed): a dependency, as a collective's phase waits for the last.
    pub after: Option<GateId>,
}

impl FlowSpec {
    /// A transfer of `bytes` from `src` to `dst` starting at time zero, with the
    /// default engine configuration, as many paths as the hosts have, group 0.
    pub fn transfer(src: usize, dst: usize, bytes: u64) -> FlowSpec {
        FlowSpec {
            src,
            dst,
            start: Instant::ZERO,
            bytes: Some(bytes),
            stop: None,
            paths: None,
            cfg: FlowConfig::default(),
            group: 0,
            messages: Messages::default(),
            after: None,
        }
    }
}

/// What happened to one flow.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowResult {
    /// Sending host.
    pub src: usize,
    /// Receiving host.
    pub dst: usize,
    /// The label from [`FlowSpec::group`].
    pub group: u32,
    /// Bytes to send (`None`: long-lived).
    pub bytes: Option<u64>,
    /// Logical paths used.
    pub paths: u16,
    /// Start time (for a flow behind a gate: when the gate opened, if later
    /// than its own start; its own start when it never started).
    pub start: Instant,
    /// When the last byte was delivered in order (finite flows).
    pub finish: Option<Instant>,
    /// When a long-lived flow stopped posting (if it has).
    pub stop: Option<Instant>,
    /// Payload bytes delivered in order at the receiver, since the start.
    pub delivered: u64,
    /// Payload bytes delivered since the start of measurement.
    pub delivered_in_window: u64,
    /// The connection failed (retry exceeded).
    pub failed: bool,
}

impl FlowResult {
    /// Flow completion time, for finite flows that completed.
    pub fn fct(&self) -> Option<Duration> {
        self.finish.map(|f| f.saturating_since(self.start))
    }
}

pub(crate) struct FlowState {
    /// The flow as added: read when it starts and when it posts a message.
    pub spec: Box<FlowSpec>,
    /// Its engine configuration.
    pub cfg: Box<FlowConfig>,
    /// `spec.src`, `spec.dst`, `spec.bytes` and `spec.messages.op`, here because
    /// every packet reads them: inline, the spec and the configuration spread a
    /// flow's state over 14 cache lines, and the all-to-all's 102,080 flows miss
    /// on most of them.
    pub src: usize,
    pub dst: usize,
    pub bytes: Option<u64>,
    pub op: Op,
    pub started: bool,
    /// When it started.
    pub started_at: Option<Instant>,
    pub h_src: ConnectionHandle,
    pub h_dst: ConnectionHandle,
    pub finish: Option<Instant>,
    pub stopped: Option<Instant>,
    pub failed: bool,
    pub delivered_at_warmup: u64,
    /// Payload delivered in order at the receiver, from the receiving endpoint's
    /// tap ([`TapEvent::Arrival`]).
    pub delivered: u64,
    pub next_msg: u64,
    pub posted_bytes: u64,
    /// What the network did with recent PSNs (first transmission time, copies
    /// sent and lost), for the retransmission delay and for telling spurious
    /// retransmissions: a ring indexed by PSN, grown up to [`FIRST_SENT_RING`]
    /// entries.
    pub first_sent: Vec<SentRecord>,
    /// The connection sending the data (`src`'s for a WRITE, `dst`'s for a
    /// READ) is closed: every message acknowledged.
    pub src_closed: bool,
    /// The connection receiving the data is closed; what it delivered.
    pub dst_closed: Option<u64>,
    /// READs issued whose response has not arrived yet.
    pub reads_outstanding: u32,
    /// The transport's READ limit (`u32::MAX`: none).
    pub read_limit: u32,
    /// Lengths of the READ requests sent and not yet answered, oldest first
    /// (requests arrive in order, so the responder's next one is the front).
    pub requests: VecDeque<u64>,
    /// Response bytes the responder has posted.
    pub served_bytes: u64,
    /// Message id of the responder's next response.
    pub next_response: u64,
    /// The gates this flow counts toward.
    pub opens: Vec<u32>,
}

impl FlowState {
    /// Whether a datagram taken by local flow id `local` (even: `src`'s
    /// connection) arrived at the side that receives the data.
    fn is_data_receiver(&self, local: u32) -> bool {
        let at_src = local % 2 == 0;
        at_src == (self.op == Op::Read)
    }
}

/// The network's record of one PSN of a flow: what only the simulator knows
/// (a transport can only guess which of its packets were lost).
#[derive(Clone, Copy, Debug)]
pub(crate) struct SentRecord {
    pub psn: u32,
    /// Copies sent (first transmission and retransmissions), saturating.
    pub sent: u16,
    /// Copies dropped by the network or thrown away by the receiver, saturating.
    pub lost: u16,
    /// First transmission; `Instant::MAX` marks an unused entry.
    pub first: Instant,
}

impl SentRecord {
    const UNUSED: SentRecord = SentRecord {
        psn: 0,
        sent: 0,
        lost: 0,
        first: Instant::MAX,
    };

    /// The record of `psn` in `ring`, if it is still there.
    fn of(ring: &mut [SentRecord], psn: u32) -> Option<&mut SentRecord> {
        let mask = ring.len().wrapping_sub(1);
        ring.get_mut(psn as usize & mask)
            .filter(|r| r.psn == psn && r.first != Instant::MAX)
    }
}

impl Simulator {
    /// Adds a flow; returns its index in [`crate::Metrics::flows`].
    pub fn add_flow(&mut self, spec: FlowSpec) -> Result<usize, SimError> {
        self.check_pair(spec.src, spec.dst)?;
        let bad = |what: String, allowed| Err(SimError::Flow { what, allowed });
        if spec.bytes == Some(0) {
            return bad(
                "bytes = 0".into(),
                "at least 1 byte, or None for a long-lived flow",
            );
        }
        if spec.paths == Some(0) {
            return bad("paths = 0".into(), "1 to 1024 logical paths, or None");
        }
        if spec.start < self.now {
            return bad(
                format!("start {:?} before now {:?}", spec.start, self.now),
                "a start at or after now",
            );
        }
        if spec.stop.is_some_and(|s| s < spec.start) {
            return bad("stop before start".into(), "stop at or after start");
        }
        if spec.messages.bytes == 0 || spec.messages.bytes > spec.cfg.max_message_len {
            return bad(
                format!("messages of {} bytes", spec.messages.bytes),
                "1 byte up to the engine's max_message_len per message",
            );
        }
        if spec.messages.depth == 0 {
            return bad("messages.depth = 0".into(), "at least one message posted");
        }
        if let Some(g) = spec.after {
            if g.0 as usize >= self.gates.len() {
                return bad(
                    format!("gate {} does not exist", g.0),
                    "a gate made by Simulator::add_gate",
                );
            }
        }
        if self.flows.len() >= (u32::MAX / 2) as usize {
            return bad("too many flows".into(), "at most 2^31 - 1 flows");
        }
        let paths = match spec.paths {
            Some(p) => p,
            None => {
                let n = self
                    .fabric
                    .equal_cost_paths(spec.src as u32, spec.dst as u32);
                n.clamp(1, 1024) as u16
            }
        };
        let index = self.flows.len();
        let cfg = self.flow_config_template(&spec, paths, index);
        cfg.validate().map_err(rondo_proto::EndpointError::from)?;
        rondo_proto::check_transmit_buffer(self.slab.slot_len(), cfg.mtu)?;
        match spec.after {
            Some(g) if self.gates[g.0 as usize].remaining > 0 => {
                self.gates[g.0 as usize].waiting.push(index as u32);
            }
            _ => self
                .agenda
                .push(spec.start.max(self.now), Ev::Start(index as u32)),
        }
        let read_limit = cfg.transport.max_outstanding_reads().unwrap_or(u32::MAX);
        if spec.bytes.is_some() {
            self.finite_open += 1;
            self.finite_total += 1;
        } else {
            self.long_running += 1;
            if let Some(stop) = spec.stop {
                self.agenda.push(stop, Ev::Stop(index as u32));
            }
        }
        self.flows.push(FlowState {
            src: spec.src,
            dst: spec.dst,
            bytes: spec.bytes,
            op: spec.messages.op,
            spec: Box::new(spec),
            cfg: Box::new(cfg),
            started: false,
            started_at: None,
            h_src: ConnectionHandle(0),
            h_dst: ConnectionHandle(0),
            finish: None,
            stopped: None,
            failed: false,
            delivered_at_warmup: 0,
            delivered: 0,
            next_msg: 0,
            posted_bytes: 0,
            first_sent: Vec::new(),
            src_closed: false,
            dst_closed: None,
            reads_outstanding: 0,
            read_limit,
            requests: VecDeque::new(),
            served_bytes: 0,
            next_response: 0,
            opens: Vec::new(),
        });
        Ok(index)
    }

    /// A gate that opens once every flow of `flows` (finite flows already
    /// added) has finished or failed; flows added with `after` set to it start
    /// then (at their own start, if later).
    pub fn add_gate(&mut self, flows: &[usize]) -> Result<GateId, SimError> {
        let bad = |what: String| {
            Err(SimError::Flow {
                what,
                allowed: "a gate waits for one or more finite flows already added",
            })
        };
        if flows.is_empty() {
            return bad("a gate waiting for no flow".into());
        }
        if let Some(&f) = flows
            .iter()
            .find(|&&f| self.flows.get(f).is_none_or(|fl| fl.bytes.is_none()))
        {
            return bad(format!(
                "gate on flow {f}, which is not a finite flow added before"
            ));
        }
        let id = self.gates.len() as u32;
        let mut remaining = 0;
        for &f in flows {
            let fl = &mut self.flows[f];
            if fl.finish.is_none() && !fl.failed {
                fl.opens.push(id);
                remaining += 1;
            }
        }
        self.gates.push(Gate {
            remaining,
            waiting: Vec::new(),
        });
        Ok(GateId(id))
    }

    /// Flow `f` finished or failed: the gates it counts toward move on, and
    /// those that open start their flows.
    fn count_toward_gates(&mut self, f: u32) {
        let opens = std::mem::take(&mut self.flows[f as usize].opens);
        for g in opens {
            let gate = &mut self.gates[g as usize];
            gate.remaining -= 1;
            if gate.remaining == 0 {
                for w in std::mem::take(&mut gate.waiting) {
                    let at = self.flows[w as usize].spec.start.max(self.now);
                    self.agenda.push(at, Ev::Start(w));
                }
            }
        }
    }

    /// Flow `f` has delivered everything.
    fn finish_flow(&mut self, f: u32) {
        self.flows[f as usize].finish = Some(self.now);
        self.finite_open -= 1;
        self.count_toward_gates(f);
    }

    pub(super) fn start_flow(&mut self, f: u32) {
        let now = self.now;
        let fl = &self.flows[f as usize];
        let (src, dst) = (fl.src, fl.dst);
        let cfg = FlowConfig::clone(&fl.cfg);
        let mut cfg_b = cfg.clone();
        cfg_b.seed = cfg.seed.wrapping_add(1);
        let a = self.hosts[src].ep.connect(now, 2 * f, 2 * f + 1, &cfg);
        let b = self.hosts[dst].ep.connect(now, 2 * f + 1, 2 * f, &cfg_b);
        let (Ok(a), Ok(b)) = (a, b) else {
            // Validated in add_flow; a refusal here fails the flow rather than the run.
            self.fail_flow(f);
            return;
        };
        self.hosts[src].conns.push(2 * f);
        self.hosts[dst].conns.push(2 * f + 1);
        self.hosts[src].ep.set_placement(a, Box::new(CountOnly));
        self.hosts[dst].ep.set_placement(b, Box::new(CountOnly));
        let fl = &mut self.flows[f as usize];
        fl.started = true;
        fl.started_at = Some(now);
        fl.h_src = a;
        fl.h_dst = b;
        if fl.op == Op::Read {
            self.issue_reads(f);
            self.service(src as u32);
            return;
        }
        let depth = fl.spec.messages.depth;
        match fl.bytes {
            Some(total) => {
                while self.flows[f as usize].posted_bytes < total {
                    if !self.post_message(f, total - self.flows[f as usize].posted_bytes) {
                        break;
                    }
                }
            }
            None => {
                for _ in 0..depth {
                    self.post_message(f, u64::MAX);
                }
            }
        }
        self.service(src as u32);
    }

    /// Sends READ requests of flow `f` while its transport's READ limit (and,
    /// for a long-lived flow, its posting depth) allows and data is left.
    fn issue_reads(&mut self, f: u32) {
        let now = self.now;
        loop {
            let fl = &mut self.flows[f as usize];
            if fl.failed || fl.reads_outstanding >= fl.read_limit {
                return;
            }
            let m = fl.spec.messages;
            let len = match fl.bytes {
                Some(total) if fl.posted_bytes < total => (total - fl.posted_bytes).min(m.bytes),
                Some(_) => return,
                None if fl.stopped.is_none() && (fl.reads_outstanding as usize) < m.depth => {
                    m.bytes
                }
                None => return,
            };
            let id = fl.next_msg;
            fl.next_msg += 1;
            fl.posted_bytes += len;
            fl.reads_outstanding += 1;
            fl.requests.push_back(len);
            let (h, src) = (fl.h_src, fl.src);
            let request = Message::from(vec![0u8; READ_REQUEST_BYTES]);
            if self.hosts[src].ep.post(h, now, id, request).is_err() {
                self.fail_flow(f);
                return;
            }
        }
    }

    /// The responder of READ flow `f` answers the oldest request it received.
    fn serve_read(&mut self, f: u32) {
        let now = self.now;
        let fl = &mut self.flows[f as usize];
        let Some(len) = fl.requests.pop_front() else {
            return;
        };
        let id = fl.next_response;
        fl.next_response += 1;
        fl.served_bytes += len;
        let (h, dst) = (fl.h_dst, fl.dst);
        let body = Message::new(Vec::new(), Arc::new(Zeros(len as usize)));
        if self.hosts[dst].ep.post(h, now, id, body).is_err() {
            self.fail_flow(f);
        }
    }

    /// Posts one WRITE message of up to the flow's message size (at most
    /// `remaining`).
    fn post_message(&mut self, f: u32, remaining: u64) -> bool {
        let fl = &mut self.flows[f as usize];
        let len = remaining
            .min(fl.spec.messages.bytes)
            .min(fl.cfg.max_message_len);
        let id = fl.next_msg;
        fl.next_msg += 1;
        fl.posted_bytes += len;
        let h = fl.h_src;
        let src = fl.src;
        let now = self.now;
        let body = Message::new(Vec::new(), Arc::new(Zeros(len as usize)));
        if self.hosts[src].ep.post(h, now, id, body).is_err() {
            self.fail_flow(f);
            return false;
        }
        true
    }

    pub(super) fn stop_flow(&mut self, f: u32) {
        let fl = &mut self.flows[f as usize];
        if fl.stopped.is_none() && !fl.failed {
            fl.stopped = Some(self.now);
            self.long_running -= 1;
        }
    }

    fn fail_flow(&mut self, f: u32) {
        let now = self.now;
        let fl = &mut self.flows[f as usize];
        if fl.failed {
            return;
        }
        fl.failed = true;
        if fl.bytes.is_some() {
            if fl.finish.is_none() {
                self.finite_open -= 1;
                self.count_toward_gates(f);
            }
        } else if fl.stopped.is_none() {
            fl.stopped = Some(now);
            self.long_running -= 1;
        }
    }

    /// Payload delivered in order so far on flow `f`.
    pub(crate) fn delivered(&self, f: usize) -> u64 {
        self.flows[f].delivered
    }

    /// Drains the events of the connection with local flow id `local`.
    fn drain(&mut self, local: u32) {
        let f = local / 2;
        let Some(fl) = self.flows.get(f as usize) else {
            return;
        };
        if !fl.started {
            return;
        }
        let sender = local % 2 == 0;
        let (host, h) = if sender {
            (fl.src, fl.h_src)
        } else {
            (fl.dst, fl.h_dst)
        };
        let mut completes = 0;
        let mut failed = false;
        let mut received = 0;
        while let Some(e) = self.hosts[host].ep.poll_event(h) {
            match e {
                Event::SendComplete { .. } => completes += 1,
                Event::Received { .. } => received += 1,
                Event::Error(_) => failed = true,
                _ => {}
            }
        }
        if failed {
            self.fail_flow(f);
        }
        let fl = &mut self.flows[f as usize];
        let read = fl.op == Op::Read;
        if read && sender && received > 0 {
            // READ responses arrived: those READs are complete.
            fl.reads_outstanding = fl.reads_outstanding.saturating_sub(received);
        }
        let fl = &self.flows[f as usize];
        if received > 0 && fl.is_data_receiver(local) {
            if let Some(total) = fl.bytes {
                if fl.finish.is_none() && !fl.failed && self.delivered(f as usize) >= total {
                    self.finish_flow(f);
                }
            }
        }
        let fl = &self.flows[f as usize];
        if read {
            if sender {
                self.issue_reads(f);
            } else if !fl.failed {
                // Served from the responder's host, which the caller services next.
                for _ in 0..received {
                    self.serve_read(f);
                }
            }
        } else if completes > 0 && fl.bytes.is_none() && fl.stopped.is_none() && !fl.failed {
            for _ in 0..completes {
                self.post_message(f, u64::MAX);
            }
        }
        if completes > 0 || received > 0 {
            // Only a completion or a delivery moves what closing waits for
            // (its sender idle, its data all there); the check reads the other
            // side's connection, cold in a large run.
            self.close_finished(f);
        }
    }

    /// Frees the connections of a finished flow (issue 10): the sender once
    /// every message is acknowledged, the receiver once it has everything and the
    /// sender is closed (so nothing new can come; duplicates still in flight are
    /// answered by its tombstone, with the ACKs it would have sent).
    fn close_finished(&mut self, f: u32) {
        let fl = &self.flows[f as usize];
        let Some(total) = fl.bytes else {
            return;
        };
        // The data's sender and receiver: (host, connection).
        let (tx, rx, all_posted) = match fl.op {
            Op::Write => (
                (fl.src, fl.h_src),
                (fl.dst, fl.h_dst),
                fl.posted_bytes >= total,
            ),
            Op::Read => (
                (fl.dst, fl.h_dst),
                (fl.src, fl.h_src),
                fl.served_bytes >= total,
            ),
        };
        let idle = |ep: &rondo_proto::Endpoint, h| {
            ep.get(h).is_some_and(|c| c.outstanding_messages() == 0)
        };
        if !fl.src_closed && all_posted && !fl.failed && idle(&self.hosts[tx.0].ep, tx.1) {
            if let Some(s) = self.hosts[tx.0].ep.close(tx.1) {
                self.closed_spurious += s.sender.spurious_retransmissions;
            }
            self.flows[f as usize].src_closed = true;
        }
        let fl = &self.flows[f as usize];
        // A READ's requester closes once its requests are acknowledged too.
        let rx_idle = fl.op == Op::Write || idle(&self.hosts[rx.0].ep, rx.1);
        if fl.src_closed && fl.finish.is_some() && fl.dst_closed.is_none() && rx_idle {
            if let Some(s) = self.hosts[rx.0].ep.close(rx.1) {
                self.closed_spurious += s.sender.spurious_retransmissions;
                self.flows[f as usize].dst_closed = Some(s.receiver.bytes_delivered);
            }
        }
    }

    /// Sends everything host `host` has to send now, then reschedules its timer.
    pub(crate) fn service(&mut self, host: u32) {
        if self.stalled(host) {
            return;
        }
        let now = self.now;
        let hi = host as usize;
        loop {
            let ep = &mut self.hosts[hi].ep;
            let Some(t) = ep.poll_transmit(now, self.slab.tx()) else {
                break;
            };
            let slot = self.slab.store(t.len);
            let mut sent = None;
            while let Some(e) = ep.poll_tap() {
                if let TapEvent::DataSent {
                    psn,
                    retransmission,
                    ..
                } = e
                {
                    sent = Some((psn, retransmission));
                }
            }
            self.inject(host, slot, t, sent);
        }
        let h = &mut self.hosts[hi];
        if let Some(t) = h.ep.poll_timeout() {
            let t = if t <= now && h.spin.0 == now && h.spin.1 >= MAX_TIMEOUTS_AT_ONE_INSTANT {
                self.counters.stuck_timers += 1;
                now + Duration::from_ns(1)
            } else {
                t.max(now)
            };
            if h.timer_at.is_none_or(|s| t < s) {
                h.gen = h.gen.wrapping_add(1);
                h.timer_at = Some(t);
                self.agenda.push(t, Ev::Timer { host, gen: h.gen });
            }
        }
    }

    /// Puts a datagram host `host` wrote into `slot` on its NIC; `sent` is the
    /// (PSN, retransmission) of a data packet, from the endpoint's tap.
    fn inject(
        &mut self,
        host: u32,
        slot: u32,
        t: rondo_proto::Transmit,
        sent: Option<(u32, bool)>,
    ) {
        let f = (t.flow / 2) as usize;
        let sender = t.flow % 2 == 0;
        let (dst, conn) = match self.flows.get(f) {
            Some(fl) if sender => (fl.dst as u32, fl.h_dst.0 as u32),
            Some(fl) => (fl.src as u32, fl.h_src.0 as u32),
            None => (NONE, NONE),
        };
        if dst == NONE || t.len > self.cfg.mtu || t.len == 0 {
            self.counters.drop_no_route += 1;
            self.slab.free(slot);
            return;
        }
        let class = t.priority.index();
        // The data's direction: src to dst for a WRITE, back for a READ.
        let data_side = match self.flows.get(f) {
            Some(fl) if fl.op == Op::Read => !sender,
            _ => sender,
        };
        let data = sent.filter(|_| t.priority == Priority::Data && data_side);
        if let Some((psn, retx)) = data {
            self.note_data_sent(f, psn, retx);
        }
        self.slab
            .set_data(slot, data.map(|(psn, _)| (f as u32, psn)));
        let key = self.packet_key(host, dst, t.flow, t.path);
        let m = Meta {
            slot,
            len: t.len as u16,
            path: t.path,
            class: class as u8,
            ce: false,
            dst,
            ingress: NONE,
            key,
            conn,
        };
        let nic = self.fabric.nic[host as usize];
        if self.ports[nic as usize].failed {
            self.counters.drop_link_down += 1;
            self.lose(m);
            return;
        }
        // A NIC's queue of probes is bounded (see NIC_PROBE_QUEUE_BYTES).
        let probes = self.ports[nic as usize].class_bytes[Priority::Probe.index()];
        if t.priority == Priority::Probe && probes + t.len as u64 > NIC_PROBE_QUEUE_BYTES {
            self.counters.drop_probe += 1;
            self.slab.free(slot);
            return;
        }
        self.enqueue(nic, m);
    }

    /// Retransmission accounting of a data packet of flow `f` with `psn`, from the
    /// sending endpoint's tap ([`TapEvent::DataSent`]): a retransmission is
    /// spurious when fewer copies of its PSN were lost than were sent before it
    /// (one of them arrived, or is still on its way).
    fn note_data_sent(&mut self, f: usize, psn: u32, retx: bool) {
        let now = self.now;
        let measuring = self.measuring;
        let fl = &mut self.flows[f];
        let ring = &mut fl.first_sent;
        if measuring {
            self.counters.data_packets += 1;
        }
        if retx {
            let Some(r) = SentRecord::of(ring, psn) else {
                if measuring {
                    self.counters.retx_packets += 1;
                }
                return;
            };
            if measuring {
                self.counters.retx_packets += 1;
                self.counters.retx_delay_ps += u128::from(now.saturating_since(r.first).as_ps());
                self.counters.retx_delay_samples += 1;
                if r.lost < r.sent {
                    self.counters.spurious += 1;
                }
            }
            r.sent = r.sent.saturating_add(1);
            return;
        }
        let offset = psn.wrapping_sub(fl.cfg.initial_psn) as usize;
        if offset >= ring.len() && ring.len() < FIRST_SENT_RING {
            // Grow to cover the offset; entries move to their new slots.
            let size = (offset + 1).next_power_of_two().clamp(64, FIRST_SENT_RING);
            let mut grown = vec![SentRecord::UNUSED; size];
            for r in ring.iter().filter(|r| r.first != Instant::MAX) {
                grown[r.psn as usize & (size - 1)] = *r;
            }
            *ring = grown;
        }
        let mask = ring.len() - 1;
        ring[psn as usize & mask] = SentRecord {
            psn,
            sent: 1,
            lost: 0,
            first: now,
        };
    }

    /// Drops packet `m` (its cause already counted): a data packet's loss is
    /// recorded against its PSN, then its slot is freed.
    pub(crate) fn lose(&mut self, m: Meta) {
        self.note_lost(m.slot);
        self.slab.free(m.slot);
    }

    /// Records that the data packet in `slot` (if it is one) did not make it.
    fn note_lost(&mut self, slot: u32) {
        let Some((f, psn)) = self.slab.data(slot) else {
            return;
        };
        let Some(fl) = self.flows.get_mut(f as usize) else {
            return;
        };
        if let Some(r) = SentRecord::of(&mut fl.first_sent, psn) {
            r.lost = r.lost.saturating_add(1);
        }
    }

    /// A packet reached host `host`.
    pub(crate) fn deliver(&mut self, host: u32, m: Meta) {
        if self.stalled(host) {
            self.hosts[host as usize].backlog.push(m);
            return;
        }
        let now = self.now;
        let hi = host as usize;
        let data = m.class as usize == Priority::Data.index();
        let measure = data && self.measuring;
        if let Some(log) = self.deliveries.as_mut() {
            log.push(super::Delivery {
                at: now,
                host: hi,
                priority: match m.class {
                    0 => Priority::Control,
                    1 => Priority::Data,
                    _ => Priority::Probe,
                },
                len: usize::from(m.len),
                path: m.path,
                ce: m.ce,
            });
        }
        let bytes = self.slab.datagram(m.slot, usize::from(m.len));
        // The connection the sender addressed, as a NIC's steering finds a QP:
        // the endpoint checks it and skips its flow table, whose lookup in a
        // host with hundreds of connections is a cache miss or two.
        match m.conn {
            NONE => self.hosts[hi].ep.handle_datagram(now, m.path, bytes, m.ce),
            c => self.hosts[hi].ep.handle_datagram_for(
                ConnectionHandle(c as usize),
                now,
                m.path,
                bytes,
                m.ce,
            ),
        }
        let mut thrown_away = false;
        // What the receiving endpoint reports: NIC-level OOD and RBO just before
        // this packet, whether it was new data, what it delivered, and to whom.
        let mut local = u32::MAX;
        while let Some(e) = self.hosts[hi].ep.poll_tap() {
            let TapEvent::Arrival {
                flow,
                nic_ood,
                rbo_slots,
                new_data,
                discarded,
                delivered,
            } = e
            else {
                continue;
            };
            thrown_away |= discarded;
            if measure {
                self.nic_ood.record(nic_ood);
                self.nic_rbo.record(rbo_slots);
                if new_data {
                    self.counters.unique_data_bytes += u64::from(m.len);
                }
            }
            if let Some(flow) = flow {
                local = flow;
                if let Some(fl) = self.flows.get_mut((flow / 2) as usize) {
                    if fl.is_data_receiver(flow) {
                        fl.delivered += delivered;
                    }
                }
            }
        }
        if thrown_away {
            self.note_lost(m.slot);
        }
        self.slab.free(m.slot);
        self.drain(local);
        self.service(host);
    }

    pub(super) fn on_timer(&mut self, host: u32, gen: u32) {
        let now = self.now;
        if self.hosts[host as usize].gen != gen || self.stalled(host) {
            // Stale, or the host is stalled: `resume` runs the timer.
            return;
        }
        let h = &mut self.hosts[host as usize];
        h.timer_at = None;
        if h.spin.0 == now {
            h.spin.1 = h.spin.1.saturating_add(1);
        } else {
            h.spin = (now, 1);
        }
        // The endpoint runs the connections whose timers are due (none when the
        // timer moved later since it was scheduled).
        h.ep.handle_timeout(now);
        // Only the connections with events need draining; in handle order, as a
        // pass over all of them would.
        let mut ready = std::mem::take(&mut self.with_events);
        ready.clear();
        let ep = &mut self.hosts[host as usize].ep;
        while let Some(c) = ep.next_with_events() {
            ready.push(c);
        }
        ready.sort_unstable_by_key(|c| c.0);
        for &c in &ready {
            let local = self.hosts[host as usize].ep.connection(c).local_flow();
            self.drain(local);
        }
        self.with_events = ready;
        self.service(host);
    }
}
