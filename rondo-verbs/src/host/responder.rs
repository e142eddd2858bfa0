//! The responding side of a QP: acts on the verdicts on SEND, WRITE and READ
//! requests (taken in order, with receive matching, bounds and access checks, by
//! the QP's placement; see [`super::placement`]) and answers each one.

use super::placement::{lock, Verdict};
use super::requester::GatherList;
use super::VerbsHost;
use crate::header::{AckStatus, Header, MsgOp};
use crate::types::{QpState, WcOpcode, WcStatus};
use rondo_proto::{Instant, Message};
use std::sync::Arc;

impl VerbsHost {
    /// A SEND, WRITE or READ request's message is complete: act on the verdict its
    /// placement took when the header arrived (its payload, if executed, is already
    /// in place; see [`super::placement`]).
    pub(crate) fn on_request(&mut self, now: Instant, qpn: u32, msg_id: u64) {
        let Some(slot) = self.qps.get_mut(&qpn) else {
            return;
        };
        let decided = {
            let mut rx = lock(&slot.rx);
            match rx.decided.front() {
                Some(d) if d.msg_id == msg_id => rx.decided.pop_front(),
                _ => None,
            }
        };
        let Some(d) = decided else {
            slot.stats.bad_messages += 1; // not a request its placement saw
            return;
        };
        let h = d.header;
        // A QP that failed while the message was arriving executes nothing, as one
        // in error before it (its receives are already flushed).
        let verdict = if slot.state == QpState::Error {
            Verdict::Closed
        } else {
            d.verdict
        };
        match verdict {
            Verdict::Closed => {
                // A QP in error executes nothing; tell the requester so it does not hang.
                slot.stats.requests_refused += 1;
                self.answer(now, qpn, Header::answer_message(h.req_id, AckStatus::RemOp));
            }
            Verdict::Stale { old } => {
                if old {
                    slot.stats.bad_messages += 1;
                }
            }
            Verdict::Rnr => {
                slot.stats.rnr_naks_sent += 1;
                self.answer(now, qpn, Header::answer_message(h.req_id, AckStatus::Rnr));
            }
            Verdict::Fatal(status) => self.refuse(now, qpn, h.req_id, status),
            Verdict::RecvError { status, answer } => {
                slot.complete_recv(
                    d.recv.as_ref(),
                    status,
                    WcOpcode::Recv,
                    d.len,
                    (h.imm, h.solicited),
                );
                self.refuse(now, qpn, h.req_id, answer);
            }
            Verdict::Execute => {
                let op = match h.op {
                    MsgOp::Send => WcOpcode::Recv,
                    _ => WcOpcode::RecvRdmaWithImm,
                };
                slot.complete_recv(
                    d.recv.as_ref(),
                    WcStatus::Success,
                    op,
                    d.len,
                    (h.imm, h.solicited),
                );
                match d.read_from {
                    Some((mr, off)) => {
                        // The bytes are sent from the region (zero copy), as a NIC
                        // answers a READ.
                        let mut resp = Header::new(MsgOp::ReadResp, h.req_id);
                        resp.len = h.len;
                        let msg = match h.len as usize {
                            0 => resp.alone(),
                            n => resp.with_body(Arc::new(GatherList::one((mr, off, n)))),
                        };
                        self.answer(now, qpn, msg);
                    }
                    None => {
                        if slot.ack_pending.replace(h.req_id).is_none() {
                            self.acks_due.push(qpn);
                        }
                    }
                }
            }
        }
    }

    /// Refuses request `req_id` for good: answers with `status` and puts the QP in
    /// error.
    fn refuse(&mut self, now: Instant, qpn: u32, req_id: u64, status: AckStatus) {
        if let Some(slot) = self.qps.get_mut(&qpn) {
            slot.stats.requests_refused += 1;
        }
        self.answer(now, qpn, Header::answer_message(req_id, status));
        self.fail_qp(qpn, None);
    }

    /// Sends the coalesced ACK of `qpn`, if one is pending: it acknowledges every
    /// request up to the id it carries.
    pub(crate) fn flush_ack(&mut self, now: Instant, qpn: u32) {
        let Some(id) = self.qps.get_mut(&qpn).and_then(|s| s.ack_pending.take()) else {
            return;
        };
        if let Some(s) = self.qps.get_mut(&qpn) {
            s.stats.acks_sent += 1;
        }
        self.post_answer(now, qpn, Header::answer_message(id, AckStatus::Ok));
    }

    /// Sends every pending coalesced ACK (before the datapath asks for packets).
    pub(crate) fn flush_acks(&mut self, now: Instant) {
        while let Some(qpn) = self.acks_due.pop() {
            self.flush_ack(now, qpn);
        }
    }

    /// Sends an answer after any pending ACK, so that answers stay in request order.
    fn answer(&mut self, now: Instant, qpn: u32, msg: impl Into<Message>) {
        self.flush_ack(now, qpn);
        self.post_answer(now, qpn, msg);
    }

    fn post_answer(&mut self, now: Instant, qpn: u32, msg: impl Into<Message>) {
        let Some(slot) = self.qps.get_mut(&qpn) else {
            return;
        };
        let Some(conn) = slot.conn else {
            return;
        };
        let msg_id = slot.next_msg;
        slot.next_msg += 1;
        if self.endpoint.post(conn, now, msg_id, msg).is_err() && slot.state != QpState::Error {
            self.fail_qp(qpn, Some(WcStatus::RetryExcErr));
        }
    }
}
