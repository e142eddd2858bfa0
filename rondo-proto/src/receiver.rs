//! The receiving half of a flow: per-packet ACKs, in-order delivery through the
//! shared reorder buffer, NAK and drop when it is full (paper §6.2.1), duplicate
//! suppression, message reassembly.

use crate::event::Event;
use crate::placement::{CopyPlacement, Placement};
use crate::receiver_policy::{Admission, ReceiverPolicy};
use crate::stats::ReceiverStats;
use crate::time::Instant;
use crate::transmit::{Priority, Transmit, TxBuffer};
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

#[derive(Debug)]
struct PendingFeedback {
    at: Instant,
    path: u16,
    repr: Repr,
}

/// The receiving half of a flow.
#[derive(Debug)]
pub(crate) struct Receiver {
    pub(crate) flow: FlowId,
    policy: ReceiverPolicy,
    max_message_len: u64,
    assembling: Option<Assembly>,
    placement: Box<dyn Placement>,
    /// Payload bytes of a full data packet (the size of an in-place target).
    payload_per_packet: usize,
    /// A payload received in place for the wrong PSN, on its way to the reorder buffer.
    scratch: Vec<u8>,
    feedback: VecDeque<PendingFeedback>,
    /// Connection token written into every feedback datagram.
    token: Option<u64>,
    pub(crate) stats: ReceiverStats,
}

impl Receiver {
    pub(crate) fn new(
        flow: FlowId,
        policy: ReceiverPolicy,
        max_message_len: u64,
        token: Option<u64>,
        payload_per_packet: usize,
    ) -> Receiver {
        Receiver {
            payload_per_packet,
            scratch: Vec::new(),
            flow,
            policy,
            max_message_len,
            assembling: None,
            placement: Box::new(CopyPlacement::default()),
            feedback: VecDeque::new(),
            token,
            stats: ReceiverStats::default(),
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

    fn queue(
        &mut self,
        now: Instant,
        path: u16,
        fb: FeedbackRepr,
        nak: Option<NakReason>,
        ce: bool,
        local: u32,
    ) {
        let mut flags = Flags::empty();
        if ce {
            flags.insert(Flags::ECN_ECHO);
        }
        let body = match nak {
            None => Body::Ack(fb),
            Some(r) => Body::Nak(fb, r),
        };
        let repr = Repr {
            common: CommonRepr {
                flow: local,
                psn: Psn::ZERO,
                path,
                flags,
                timestamp_ns: now.as_ns(),
            },
            body,
        };
        self.feedback.push_back(PendingFeedback {
            at: now,
            path,
            repr,
        });
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
        self.queue(now, common.path, fb, None, ce, remote);
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
        if let Admission::Refuse(reason) = self.policy.admit(common.psn, expected) {
            self.stats.refused += 1;
            let fb = self.feedback_repr(now, rb, common, false, false);
            self.queue(now, common.path, fb, Some(reason), ce, remote);
            return;
        }
        let arrival = match rb.arrive(self.flow, common.psn, meta, bytes) {
            Ok(a) => a,
            Err(_) => {
                // Payload larger than a slot: not a packet this flow's peer would send.
                self.stats.inconsistent += 1;
                return;
            }
        };
        self.stats.ood.record(arrival.ood as u64);
        self.stats.rbo.record(arrival.rbo as u64);
        let (nak, duplicate) = match arrival.outcome {
            Outcome::InOrder => {
                self.stats.placed_in_order += 1;
                self.place(meta, payload, data.payload_len, events);
                while let Ok(Some(())) = rb.pop_ready(self.flow, |_, m, bytes| {
                    self.stats.placed_repaired += 1;
                    self.place(m, Payload::Bytes(bytes), bytes.len(), events)
                }) {}
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
        self.queue(now, common.path, fb, nak, ce, remote);
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
            self.assembling = self
                .placement
                .begin(meta.msg_id, meta.msg_len)
                .then_some(Assembly {
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

    pub(crate) fn poll_feedback<B: TxBuffer + ?Sized>(&mut self, tx: &mut B) -> Option<Transmit> {
        let f = self.feedback.pop_front()?;
        let len = f.repr.buffer_len_with_token(self.token);
        f.repr
            .emit_with_token(tx.take(f.path, Priority::Control, len), self.token)
            .ok()?;
        Some(Transmit {
            path: f.path,
            priority: Priority::Control,
            len,
            flow: 0,
            payload: None,
        })
    }

    pub(crate) fn feedback_due(&self) -> Option<Instant> {
        self.feedback.front().map(|f| f.at)
    }
}
