//! The receiving half of a flow: per-packet ACKs, in-order delivery through the
//! shared reorder buffer, NAK and drop when it is full (paper §6.2.1), duplicate
//! suppression, message reassembly; the RC policies' NAKs and direct placement
//! ([`crate::receiver_policy`]).

use crate::config::AckCoalesce;
use crate::event::Event;
use crate::feedback::FeedbackQueue;
use crate::placement::{CopyPlacement, Placement};
use crate::receiver_policy::{Admission, DirectStore, NakLimiter, ReceiverPolicy};
use crate::stats::ReceiverStats;
use crate::time::{Duration, Instant};
use crate::transmit::{Transmit, TxBuffer};
use crate::wire::{Body, CommonRepr, DataRepr, FeedbackRepr, Flags, NakReason, Repr};
use crate::Psn;
use reorder::{FlowId, Outcome, ReorderBuffer};
use std::collections::VecDeque;

/// What the reorder buffer keeps beside each held payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxMeta {
    /// Message id.
    pub msg_id: u64,
    /// Message length in bytes.
    pub msg_len: u64,
    /// Offset of this payload in the message.
    pub offset: u64,
}

/// Where a data packet's payload is.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Payload<'a> {
    /// In the datagram.
    Bytes(&'a [u8]),
    /// Already at its final place (received in place by the datapath).
    InPlace,
}

/// The shared, NIC-level reorder buffer type of an endpoint.
pub type SharedBuffer = ReorderBuffer<RxMeta>;

/// The message being placed: which one, and how many bytes are in place.
#[derive(Debug)]
struct Assembly {
    msg_id: u64,
    msg_len: u64,
    placed: u64,
}

/// The receiving half of a flow.
#[derive(Debug)]
pub(crate) struct Receiver {
    pub(crate) flow: FlowId,
    policy: ReceiverPolicy,
    /// Go-back-N's NAK rate limit.
    nak_limiter: NakLimiter,
    /// Out-of-order payloads placed directly (selective NAK).
    direct: DirectStore,
    max_message_len: u64,
    assembling: Option<Assembly>,
    /// The message (id, length) whose start the placement refused: its later
    /// packets are taken and dropped as before, not mistaken for forgeries.
    refused: Option<(u64, u64)>,
    placement: Box<dyn Placement>,
    /// Payload bytes of a full data packet (the size of an in-place target).
    payload_per_packet: usize,
    /// A payload received in place for the wrong PSN, on its way to the reorder buffer.
    scratch: Vec<u8>,
    feedback: FeedbackQueue,
    /// Connection token written into every feedback datagram.
    token: Option<u64>,
    pub(crate) stats: ReceiverStats,
}

impl Receiver {
    /// Asks for the cache lines of the counters an arrival updates.
    pub(crate) fn prefetch(&self) {
        reorder::prefetch(&self.stats);
        reorder::prefetch(&self.policy);
    }

    pub(crate) fn new(
        flow: FlowId,
        policy: ReceiverPolicy,
        max_message_len: u64,
        token: Option<u64>,
        payload_per_packet: usize,
        acks: AckCoalesce,
        mtu: usize,
    ) -> Receiver {
        Receiver {
            payload_per_packet,
            scratch: Vec::new(),
            flow,
            policy,
            nak_limiter: NakLimiter::default(),
            direct: DirectStore::default(),
            max_message_len,
            assembling: None,
            refused: None,
            placement: Box::new(CopyPlacement::default()),
            feedback: FeedbackQueue::new(acks, mtu, token),
            token,
            stats: ReceiverStats::default(),
        }
    }

    /// Whether a packet at the expected PSN contradicts the message being placed
    /// (neither its next bytes nor the start of a message), or, between messages,
    /// is not a message start: it is dropped unacknowledged, so that the PSN stays
    /// expected and the real packet, still to come, is taken (a forged one then
    /// costs nothing).
    fn contradicts_assembly(&self, meta: &RxMeta) -> bool {
        if meta.offset == 0 {
            return false;
        }
        match &self.assembling {
            Some(a) => {
                a.msg_id != meta.msg_id || a.msg_len != meta.msg_len || a.placed != meta.offset
            }
            None => self.refused != Some((meta.msg_id, meta.msg_len)),
        }
    }

    fn feedback_repr(
        &self,
        now: Instant,
        rb: &SharedBuffer,
        common: &CommonRepr,
        of_probe: bool,
        duplicate: bool,
    ) -> FeedbackRepr {
        let expected = rb.expected(self.flow).unwrap_or(Psn::ZERO);
        let highest = rb
            .highest(self.flow)
            .ok()
            .flatten()
            .unwrap_or(expected.sub(1));
        let highest = self.direct.highest().map_or(highest, |h| h.max_of(highest));
        FeedbackRepr {
            acked_psn: common.psn,
            cum_ack: expected,
            highest_psn: highest,
            acked_path: common.path,
            of_probe,
            duplicate,
            echo_timestamp_ns: common.timestamp_ns,
            rx_timestamp_ns: now.as_ns(),
        }
    }

    /// Queues the feedback of one arrival (sent on the path it arrived on).
    fn queue(
        &mut self,
        now: Instant,
        fb: FeedbackRepr,
        nak: Option<NakReason>,
        ce: bool,
        remote: u32,
    ) {
        self.feedback.push(now, fb, nak, ce, remote, false, false);
    }

    /// A probe arrived: acknowledge it (probes carry no data).
    pub(crate) fn on_probe(
        &mut self,
        now: Instant,
        rb: &SharedBuffer,
        common: &CommonRepr,
        ce: bool,
        remote: u32,
    ) {
        self.stats.probes += 1;
        let fb = self.feedback_repr(now, rb, common, true, false);
        self.queue(now, fb, None, ce, remote);
    }

    /// A data packet arrived.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn on_data(
        &mut self,
        now: Instant,
        rb: &mut SharedBuffer,
        common: &CommonRepr,
        data: &DataRepr,
        payload: Payload<'_>,
        ce: bool,
        remote: u32,
        events: &mut VecDeque<Event>,
    ) {
        self.stats.data_packets += 1;
        if ce {
            self.stats.ce_marked += 1;
        }
        if data.msg_len > self.max_message_len {
            self.stats.inconsistent += 1;
            return;
        }
        let meta = RxMeta {
            msg_id: data.msg_id,
            msg_len: data.msg_len,
            offset: data.offset,
        };
        let bytes = match payload {
            Payload::Bytes(b) => b,
            Payload::InPlace => &[], // in order, so the reorder buffer keeps nothing
        };
        let flow = self.flow;
        let expected = || rb.expected(flow).unwrap_or(Psn::ZERO);
        match self.policy.admit(common.psn, expected) {
            Admission::Offer => {}
            Admission::Refuse(reason) => {
                self.stats.refused += 1;
                let fb = self.feedback_repr(now, rb, common, false, false);
                self.queue(now, fb, Some(reason), ce, remote);
                return;
            }
            Admission::OutOfSequence => {
                // Dropped; the NAK names the expected PSN, to go back to.
                self.stats.refused += 1;
                let expected = rb.expected(flow).unwrap_or(Psn::ZERO);
                let interval = self.policy.nak_interval().unwrap_or(Duration::ZERO);
                if self.nak_limiter.allow(now, expected, interval) {
                    let fb = self.feedback_repr(now, rb, common, false, false);
                    let nak = Some(NakReason::SequenceError);
                    self.queue(now, fb, nak, ce, remote);
                }
                return;
            }
            Admission::PlaceDirect => {
                self.place_direct(now, rb, common, meta, bytes, ce, remote);
                return;
            }
        }
        if common.psn == rb.expected(flow).unwrap_or(Psn::ZERO) && self.contradicts_assembly(&meta)
        {
            self.stats.inconsistent += 1;
            return;
        }
        // Under direct placement the reorder buffer does not see what lies ahead.
        let direct_ood = self
            .direct
            .highest()
            .map(|h| h.diff(rb.expected(flow).unwrap_or(Psn::ZERO)).max(0) as u64);
        let arrival = match rb.arrive(self.flow, common.psn, meta, bytes) {
            Ok(a) => a,
            Err(_) => {
                // Payload larger than a slot: not a packet this flow's peer would send.
                self.stats.inconsistent += 1;
                return;
            }
        };
        self.stats
            .ood
            .record(direct_ood.unwrap_or(u64::from(arrival.ood)));
        self.stats.rbo.record(arrival.rbo as u64);
        let (nak, duplicate) = match arrival.outcome {
            Outcome::InOrder => {
                self.stats.placed_in_order += 1;
                self.place(meta, payload, data.payload_len, events);
                while let Ok(Some(())) = rb.pop_ready(self.flow, |_, m, bytes| {
                    self.stats.placed_repaired += 1;
                    self.place(m, Payload::Bytes(bytes), bytes.len(), events)
                }) {}
                self.direct.advance();
                self.deliver_direct(rb, events);
                (None, false)
            }
            Outcome::Buffered => (None, false),
            Outcome::Duplicate => {
                self.stats.duplicates += 1;
                (None, true)
            }
            Outcome::Full => {
                self.stats.dropped_buffer_full += 1;
                (Some(NakReason::BufferFull), false)
            }
            Outcome::OutOfWindow => {
                self.stats.dropped_out_of_window += 1;
                (Some(NakReason::OutOfWindow), false)
            }
        };
        let fb = self.feedback_repr(now, rb, common, false, duplicate);
        // An accepted first transmission may share an ACK with others; a
        // retransmission's ACK carries its own echo (Karn's rule at the sender).
        let coalescible = nak.is_none() && !duplicate && !common.flags.contains(Flags::RETX);
        let last = data.is_last();
        self.feedback
            .push(now, fb, nak, ce, remote, coalescible, last);
    }

    /// The flow's OOD held outside the shared reorder buffer: the highest PSN
    /// placed directly less the expected one (0 without direct placement).
    pub(crate) fn direct_ood(&self, rb: &SharedBuffer) -> u64 {
        // Most flows place nothing directly: no look-up in the buffer for them.
        self.direct.highest().map_or(0, |h| {
            let expected = rb.expected(self.flow).unwrap_or(Psn::ZERO);
            h.diff(expected).max(0) as u64
        })
    }

    /// An out-of-order arrival under [`ReceiverPolicy::SelectiveNak`]: placed
    /// directly, outside the shared reorder buffer, and NAKed with the expected
    /// PSN (the hole); a copy already placed is answered as a duplicate.
    #[allow(clippy::too_many_arguments)]
    fn place_direct(
        &mut self,
        now: Instant,
        rb: &SharedBuffer,
        common: &CommonRepr,
        meta: RxMeta,
        bytes: &[u8],
        ce: bool,
        remote: u32,
    ) {
        let expected = rb.expected(self.flow).unwrap_or(Psn::ZERO);
        let ahead = common.psn.diff(expected) as usize;
        let highest = self.direct.highest().unwrap_or(expected.sub(1));
        self.stats.ood.record(highest.diff(expected).max(0) as u64);
        self.stats.rbo.record(0);
        let (nak, duplicate) = if self.direct.place(common.psn, ahead, meta, bytes) {
            self.stats.placed_direct += 1;
            (Some(NakReason::OutOfOrder), false)
        } else {
            self.stats.duplicates += 1;
            (None, true)
        };
        let fb = self.feedback_repr(now, rb, common, false, duplicate);
        self.queue(now, fb, nak, ce, remote);
    }

    /// The run of directly placed payloads that the in-order arrival completed:
    /// each passes the reorder buffer in order (so its expected PSN moves; it
    /// holds nothing) and is delivered.
    fn deliver_direct(&mut self, rb: &mut SharedBuffer, events: &mut VecDeque<Event>) {
        while let Some((meta, buf)) = self.direct.pop_expected() {
            let psn = rb.expected(self.flow).unwrap_or(Psn::ZERO);
            let _ = rb.arrive(self.flow, psn, meta, &[]); // in order: nothing is copied
            self.place(meta, Payload::Bytes(&buf), buf.len(), events);
            self.direct.recycle(buf);
        }
    }

    /// In-order placement of one payload into the message being reassembled.
    fn place(
        &mut self,
        meta: RxMeta,
        payload: Payload<'_>,
        len: usize,
        events: &mut VecDeque<Event>,
    ) {
        if meta.offset == 0 {
            if self.assembling.is_some() {
                self.stats.inconsistent += 1; // previous message never finished
            }
            let began = self.placement.begin(meta.msg_id, meta.msg_len);
            self.refused = (!began).then_some((meta.msg_id, meta.msg_len));
            self.assembling = began.then_some(Assembly {
                msg_id: meta.msg_id,
                msg_len: meta.msg_len,
                placed: 0,
            });
        }
        let Some(a) = self.assembling.as_mut() else {
            self.stats.inconsistent += 1;
            return;
        };
        if a.msg_id != meta.msg_id || a.msg_len != meta.msg_len || a.placed != meta.offset {
            self.stats.inconsistent += 1;
            self.assembling = None;
            return;
        }
        match payload {
            Payload::Bytes(bytes) => self.placement.place(meta.offset, bytes),
            Payload::InPlace => {
                self.stats.placed_in_place += 1;
                self.placement.commit(meta.offset, len);
            }
        }
        a.placed += len as u64;
        self.stats.bytes_delivered += len as u64;
        if a.placed == a.msg_len {
            let msg_id = a.msg_id;
            self.assembling = None;
            self.stats.messages_delivered += 1;
            events.push_back(Event::Received {
                msg_id,
                data: self.placement.finish(),
            });
        }
    }

    /// The expected PSN and the final place of its payload, when the placement has
    /// one (a message is being placed and the placement hands out targets).
    pub(crate) fn in_place_target(&mut self, rb: &SharedBuffer) -> Option<(Psn, &mut [u8])> {
        let a = self.assembling.as_ref()?;
        let expected = rb.expected(self.flow).ok()?;
        let len = (a.msg_len - a.placed).min(self.payload_per_packet as u64) as usize;
        let offset = a.placed;
        Some((expected, self.placement.target(offset, len)?))
    }

    /// A data packet whose payload a datapath received at the target that
    /// [`Receiver::in_place_target`] gave. When it is the expected packet, nothing is
    /// copied; otherwise its payload is taken out of the target and handled like any
    /// arrival (the target's bytes are overwritten later by the right payload).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn on_data_in_place(
        &mut self,
        now: Instant,
        rb: &mut SharedBuffer,
        common: &CommonRepr,
        data: &DataRepr,
        ce: bool,
        remote: u32,
        events: &mut VecDeque<Event>,
    ) {
        let Some(a) = self.assembling.as_ref() else {
            self.stats.inconsistent += 1; // no target was handed out
            return;
        };
        let placed = a.placed;
        let exact = rb.expected(self.flow).ok() == Some(common.psn)
            && a.msg_id == data.msg_id
            && a.msg_len == data.msg_len
            && placed == data.offset;
        if exact {
            self.on_data(now, rb, common, data, Payload::InPlace, ce, remote, events);
            return;
        }
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        match self.placement.target(placed, data.payload_len) {
            Some(bytes) => scratch.extend_from_slice(bytes),
            None => {
                self.stats.inconsistent += 1;
                self.scratch = scratch;
                return;
            }
        }
        self.on_data(
            now,
            rb,
            common,
            data,
            Payload::Bytes(&scratch),
            ce,
            remote,
            events,
        );
        self.scratch = scratch;
    }

    pub(crate) fn set_placement(&mut self, placement: Box<dyn Placement>) {
        if self.assembling.take().is_some() {
            self.stats.inconsistent += 1;
        }
        self.placement = placement;
    }

    pub(crate) fn poll_feedback<B: TxBuffer + ?Sized>(
        &mut self,
        now: Instant,
        tx: &mut B,
    ) -> Option<Transmit> {
        self.feedback.poll(now, tx, self.token)
    }

    pub(crate) fn feedback_due(&self) -> Option<Instant> {
        self.feedback.due()
    }

    /// Ends the receiver: its flow leaves the shared reorder buffer (freeing any
    /// slot it holds) and what remains is a [`RxTombstone`] (with the feedback
    /// still queued) and the final counters.
    pub(crate) fn close(self, rb: &mut SharedBuffer) -> (RxTombstone, ReceiverStats) {
        let expected = rb.expected(self.flow).unwrap_or(Psn::ZERO);
        let highest = rb
            .highest(self.flow)
            .ok()
            .flatten()
            .unwrap_or(expected.sub(1));
        rb.remove_flow(self.flow);
        let mut feedback = self.feedback;
        feedback.close_now();
        let tomb = RxTombstone {
            expected,
            highest,
            max_message_len: self.max_message_len,
            token: self.token,
            feedback,
        };
        (tomb, self.stats)
    }
}

/// What stays of a closed connection's receiver (issue 10: a finished connection
/// frees its state): the cumulative ACK and highest PSN, so that a retransmitted
/// duplicate still gets the ACK the receiver would have sent (marked duplicate),
/// and a probe its probe ACK. Data beyond the cumulative ACK is not taken: the
/// flow is over.
#[derive(Debug)]
pub(crate) struct RxTombstone {
    expected: Psn,
    highest: Psn,
    max_message_len: u64,
    token: Option<u64>,
    feedback: FeedbackQueue,
}

impl RxTombstone {
    /// A datagram for the closed flow: answers a duplicate or a probe as the
    /// receiver would; false when it is dropped (new data, ACKs and NAKs: the
    /// sender half is gone too).
    pub(crate) fn on_repr(&mut self, now: Instant, repr: &Repr, ce: bool, remote: u32) -> bool {
        let c = &repr.common;
        let (of_probe, duplicate) = match &repr.body {
            Body::Data(d) if d.msg_len > self.max_message_len => return true, // as `on_data`
            Body::Data(_) if c.psn.diff(self.expected) < 0 => (false, true),
            Body::Probe(_) => (true, false),
            _ => return false,
        };
        let fb = FeedbackRepr {
            acked_psn: c.psn,
            cum_ack: self.expected,
            highest_psn: self.highest,
            acked_path: c.path,
            of_probe,
            duplicate,
            echo_timestamp_ns: c.timestamp_ns,
            rx_timestamp_ns: now.as_ns(),
        };
        self.feedback.push(now, fb, None, ce, remote, false, false);
        true
    }

    pub(crate) fn poll_feedback<B: TxBuffer + ?Sized>(
        &mut self,
        now: Instant,
        tx: &mut B,
    ) -> Option<Transmit> {
        self.feedback.poll(now, tx, self.token)
    }

    pub(crate) fn feedback_due(&self) -> Option<Instant> {
        self.feedback.due()
    }
}
