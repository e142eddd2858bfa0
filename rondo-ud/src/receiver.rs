//! The receiving half of a flow: per-packet ACKs, in-order delivery through the
//! shared reorder buffer, NAK and drop when it is full (paper §6.2.1), duplicate
//! suppression, message reassembly.

use crate::event::Event;
use crate::stats::ReceiverStats;
use crate::time::Instant;
use crate::transmit::{Priority, Transmit};
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

/// The shared, NIC-level reorder buffer type of an endpoint.
pub type SharedBuffer = ReorderBuffer<RxMeta>;

#[derive(Debug)]
struct Assembly {
    msg_id: u64,
    msg_len: u64,
    data: Vec<u8>,
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
    max_message_len: u64,
    assembling: Option<Assembly>,
    feedback: VecDeque<PendingFeedback>,
    /// Connection token written into every feedback datagram.
    token: Option<u64>,
    pub(crate) stats: ReceiverStats,
}

/// Largest up-front allocation for a message being reassembled; bigger messages grow.
const MAX_PREALLOC: u64 = 64 << 20;

impl Receiver {
    pub(crate) fn new(flow: FlowId, max_message_len: u64, token: Option<u64>) -> Receiver {
        Receiver {
            flow,
            max_message_len,
            assembling: None,
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
        payload: &[u8],
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
        let arrival = match rb.arrive(self.flow, common.psn, meta, payload) {
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
                self.place(meta, payload, events);
                while let Ok(Some(())) =
                    rb.pop_ready(self.flow, |_, m, bytes| self.place(m, bytes, events))
                {
                }
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
    fn place(&mut self, meta: RxMeta, payload: &[u8], events: &mut VecDeque<Event>) {
        if meta.offset == 0 {
            if self.assembling.is_some() {
                self.stats.inconsistent += 1; // previous message never finished
            }
            self.assembling = Some(Assembly {
                msg_id: meta.msg_id,
                msg_len: meta.msg_len,
                data: Vec::with_capacity(meta.msg_len.min(MAX_PREALLOC) as usize),
            });
        }
        let Some(a) = self.assembling.as_mut() else {
            self.stats.inconsistent += 1;
            return;
        };
        if a.msg_id != meta.msg_id
            || a.msg_len != meta.msg_len
            || a.data.len() as u64 != meta.offset
        {
            self.stats.inconsistent += 1;
            self.assembling = None;
            return;
        }
        a.data.extend_from_slice(payload);
        self.stats.bytes_delivered += payload.len() as u64;
        if a.data.len() as u64 == a.msg_len {
            let a = self.assembling.take().expect("checked above");
            self.stats.messages_delivered += 1;
            events.push_back(Event::Received {
                msg_id: a.msg_id,
                data: a.data,
            });
        }
    }

    pub(crate) fn poll_feedback(&mut self, buf: &mut [u8]) -> Option<Transmit> {
        let f = self.feedback.pop_front()?;
        let len = f.repr.emit_with_token(buf, self.token).ok()?;
        Some(Transmit {
            path: f.path,
            priority: Priority::Control,
            len,
            flow: 0,
        })
    }

    pub(crate) fn feedback_due(&self) -> Option<Instant> {
        self.feedback.front().map(|f| f.at)
    }
}
