//! The requesting side of a QP: posting, sending, RNR retries, and completing
//! send work requests from the responder's answers, in posting order.

use super::{wc_opcode, Request, VerbsHost, MAX_MESSAGE_BYTES};
use crate::header::{AckStatus, Header, MsgOp};
use crate::mr::MrShared;
use crate::types::{AccessFlags, Opcode, QpState, SendWr, WcStatus};
use crate::VerbsError;
use rondo_proto::{ExternalBytes, Instant, Message};
use std::sync::Arc;

/// `rnr_retry` value that means "retry forever" (ibverbs).
const RNR_RETRY_FOREVER: u8 = 7;

impl VerbsHost {
    /// Posts a send work request (`ibv_post_send`).
    pub(crate) fn post_send(
        &mut self,
        now: Instant,
        qpn: u32,
        wr: &SendWr,
    ) -> Result<(), VerbsError> {
        self.check_send(qpn, wr)?;
        self.queue_send(now, qpn, wr.clone())
    }

    /// [`Self::post_send`] of a request given by value (kept without a copy).
    pub(crate) fn post_send_owned(
        &mut self,
        now: Instant,
        qpn: u32,
        wr: SendWr,
    ) -> Result<(), VerbsError> {
        self.check_send(qpn, &wr)?;
        self.queue_send(now, qpn, wr)
    }

    /// The checks of `ibv_post_send` that fail the call itself.
    fn check_send(&self, qpn: u32, wr: &SendWr) -> Result<(), VerbsError> {
        let Some(slot) = self.qps.get(&qpn) else {
            return Err(VerbsError::InvalidWr("no such QP"));
        };
        let needs_remote = matches!(
            wr.opcode,
            Opcode::RdmaWrite | Opcode::RdmaWriteWithImm | Opcode::RdmaRead
        );
        if needs_remote != wr.remote.is_some() {
            return Err(VerbsError::InvalidWr(
                "RDMA WRITE and READ need `remote`; SEND must not have it",
            ));
        }
        let has_imm = matches!(wr.opcode, Opcode::SendWithImm | Opcode::RdmaWriteWithImm);
        if has_imm != wr.imm.is_some() {
            return Err(VerbsError::InvalidWr(
                "the *WithImm opcodes need `imm`; the others must not have it",
            ));
        }
        if wr.sg_list.len() > slot.attr.max_sge {
            return Err(VerbsError::InvalidWr(
                "more scatter/gather entries than QpInitAttr::max_sge",
            ));
        }
        match slot.state {
            QpState::Init => {
                return Err(VerbsError::InvalidState {
                    qpn,
                    state: slot.state,
                    hint: "connect the QP to its peer before posting sends",
                })
            }
            QpState::Error | QpState::Rts => {}
        }
        if slot.state == QpState::Rts && slot.outstanding.len() >= slot.attr.max_send_wr {
            return Err(VerbsError::SendQueueFull {
                depth: slot.attr.max_send_wr,
            });
        }
        Ok(())
    }

    /// Queues a checked request (or flushes it on a QP in error) and sends it.
    fn queue_send(&mut self, now: Instant, qpn: u32, wr: SendWr) -> Result<(), VerbsError> {
        let Some(slot) = self.qps.get(&qpn) else {
            return Err(VerbsError::InvalidWr("no such QP"));
        };
        if slot.state == QpState::Error {
            let wc = slot.completion(wr.wr_id, WcStatus::WrFlushErr, wc_opcode(wr.opcode));
            slot.send_cq.push(wc);
            return Ok(());
        }
        let len = wr.total_len();
        let need = if wr.opcode == Opcode::RdmaRead {
            AccessFlags::LOCAL_WRITE
        } else {
            AccessFlags::NONE
        };
        let local_error = if len > MAX_MESSAGE_BYTES {
            Some(WcStatus::LocLenErr)
        } else if wr
            .sg_list
            .iter()
            .any(|s| self.local(slot.pd, s, need).is_none())
        {
            Some(WcStatus::LocProtErr)
        } else {
            None
        };
        let slot = self.qps.get_mut(&qpn).expect("checked above");
        slot.outstanding.push_back(Request {
            req_id: slot.next_req,
            wr,
            len,
            sent: false,
            msg_id: 0,
            delivered: false,
            rnr_count: 0,
            local_error,
        });
        slot.next_req += 1;
        self.pump(now, qpn);
        Ok(())
    }

    /// The verbs header of a request.
    fn request_header(r: &Request) -> Header {
        let op = match r.wr.opcode {
            Opcode::Send | Opcode::SendWithImm => MsgOp::Send,
            Opcode::RdmaWrite | Opcode::RdmaWriteWithImm => MsgOp::Write,
            Opcode::RdmaRead => MsgOp::ReadReq,
        };
        let mut h = Header::new(op, r.req_id);
        h.imm = r.wr.imm;
        h.solicited = r.wr.solicited;
        if let Some(remote) = r.wr.remote {
            h.addr = remote.addr;
            h.rkey = remote.rkey;
        }
        h.len = r.len;
        h
    }

    /// The engine message of a request: the verbs header, then the gather list's
    /// bytes, left in their regions (`None` when an entry no longer resolves).
    fn build_request(&self, pd: u32, r: &Request) -> Option<Message> {
        let h = Self::request_header(r);
        if h.op == MsgOp::ReadReq || r.len == 0 {
            return Some(h.alone());
        }
        let list =
            r.wr.sg_list
                .iter()
                .filter(|s| s.len > 0)
                .map(|s| {
                    self.local(pd, s, AccessFlags::NONE)
                        .map(|(mr, off)| (mr, off, s.len as usize))
                })
                .collect::<Option<GatherList>>()?;
        Some(h.with_body(Arc::new(list)))
    }

    /// Sends, in order, every request not yet handed to the engine (unless an RNR
    /// wait is running), and completes a front request that failed locally.
    pub(crate) fn pump(&mut self, now: Instant, qpn: u32) {
        loop {
            let Some(slot) = self.qps.get(&qpn) else {
                return;
            };
            if slot.state != QpState::Rts {
                return;
            }
            if let Some(st) = slot.outstanding.front().and_then(|r| r.local_error) {
                self.fail_qp(qpn, Some(st));
                return;
            }
            if slot.rnr_until.is_some() {
                return;
            }
            // Requests are sent in order: the sent ones are a prefix.
            let i = slot.sent;
            let Some(r) = slot.outstanding.get(i) else {
                return;
            };
            debug_assert!(!r.sent && i.checked_sub(1).is_none_or(|j| slot.outstanding[j].sent));
            if r.local_error.is_some() {
                return; // completes when it reaches the front
            }
            if r.wr.opcode == Opcode::RdmaRead && slot.reads_at_limit() {
                return; // goes when an earlier READ's response completes it
            }
            let built = self.build_request(slot.pd, r);
            let slot = self.qps.get(&qpn).expect("present");
            let Some(msg) = built else {
                // The region was deregistered since posting.
                let slot = self.qps.get_mut(&qpn).expect("present");
                slot.outstanding[i].local_error = Some(WcStatus::LocProtErr);
                continue;
            };
            let conn = slot.conn.expect("an RTS QP is connected");
            let slot = self.qps.get_mut(&qpn).expect("present");
            let msg_id = slot.next_msg;
            slot.next_msg += 1;
            if self.endpoint.post(conn, now, msg_id, msg).is_err() {
                self.fail_qp(qpn, Some(WcStatus::RetryExcErr));
                return;
            }
            let slot = self.qps.get_mut(&qpn).expect("present");
            let r = &mut slot.outstanding[i];
            r.sent = true;
            r.msg_id = msg_id;
            r.delivered = false;
            slot.sent += 1;
            slot.stats.requests_sent += 1;
            self.restart_ack_timer(now, qpn, false);
        }
    }

    /// An `Ack` or `ReadResp` arrived. A successful ACK acknowledges every request
    /// up to its id (the responder coalesces them); any other answer is for the
    /// oldest outstanding request. An acknowledged request completes once the
    /// engine has also delivered its message ([`Self::on_delivered`]): an ACK for
    /// a request the responder cannot have received (forged) completes nothing.
    pub(crate) fn on_response(&mut self, now: Instant, qpn: u32, h: &Header, payload: &[u8]) {
        let cumulative = h.op == MsgOp::Ack && h.status == AckStatus::Ok;
        if !cumulative {
            // An answer to a later request: the responder had every earlier one,
            // so those it acknowledged complete now, delivered or not.
            self.complete_acked(qpn, true);
        }
        let Some(slot) = self.qps.get_mut(&qpn) else {
            return;
        };
        let front = slot.outstanding.front();
        let matches = slot.state == QpState::Rts
            && front.is_some_and(|r| {
                r.sent
                    && if cumulative {
                        r.req_id <= h.req_id && h.req_id < slot.next_req
                    } else {
                        r.req_id == h.req_id
                    }
            })
            && (h.op == MsgOp::Ack || slot.outstanding[0].wr.opcode == Opcode::RdmaRead);
        if !matches {
            slot.stats.bad_messages += 1;
            return;
        }
        // An answer from the responder: the local ACK timer starts again.
        slot.timeouts = 0;
        slot.ack_deadline = None;
        match h.status {
            AckStatus::Ok if cumulative => {
                if slot.outstanding[0].wr.opcode == Opcode::RdmaRead {
                    // A READ is answered by its response, never by an ACK.
                    slot.stats.bad_messages += 1;
                    return;
                }
                slot.acked_upto = Some(slot.acked_upto.map_or(h.req_id, |a| a.max(h.req_id)));
                self.complete_acked(qpn, false);
                self.pump(now, qpn);
                self.restart_ack_timer(now, qpn, true);
            }
            AckStatus::Ok => {
                self.complete_front(qpn, h, payload);
                self.pump(now, qpn);
                self.restart_ack_timer(now, qpn, true);
            }
            AckStatus::Rnr => {
                let r = &mut slot.outstanding[0];
                r.rnr_count = r.rnr_count.saturating_add(1);
                let limit = slot.attr.rnr_retry;
                if limit != RNR_RETRY_FOREVER && r.rnr_count > limit {
                    self.fail_qp(qpn, Some(WcStatus::RnrRetryExcErr));
                    return;
                }
                // Go back: the responder drops everything after the refused request.
                for r in slot.outstanding.iter_mut().take(slot.sent) {
                    r.sent = false;
                }
                slot.stats.rnr_resends += slot.sent as u64;
                slot.sent = 0;
                slot.rnr_until = Some(now + slot.attr.rnr_timer);
            }
            AckStatus::RemAccess => self.fail_qp(qpn, Some(WcStatus::RemAccessErr)),
            AckStatus::RemInvReq => self.fail_qp(qpn, Some(WcStatus::RemInvReq)),
            AckStatus::RemOp => self.fail_qp(qpn, Some(WcStatus::RemOpErr)),
        }
    }

    /// The engine delivered message `msg_id`: its request, if acknowledged,
    /// completes (with those before it).
    pub(crate) fn on_delivered(&mut self, qpn: u32, msg_id: u64) {
        let Some(slot) = self.qps.get_mut(&qpn) else {
            return;
        };
        let sent = slot.sent;
        if let Some(r) = slot
            .outstanding
            .iter_mut()
            .take(sent)
            .find(|r| r.msg_id == msg_id)
        {
            r.delivered = true;
            self.complete_acked(qpn, false);
        }
    }

    /// Completes, in order, the front requests the responder acknowledged whose
    /// messages the engine delivered (all acknowledged ones when `force`).
    fn complete_acked(&mut self, qpn: u32, force: bool) {
        let Some(slot) = self.qps.get_mut(&qpn) else {
            return;
        };
        let Some(upto) = slot.acked_upto else {
            return;
        };
        while let Some(r) = slot.outstanding.front() {
            if r.req_id > upto
                || !r.sent
                || !(r.delivered || force)
                || r.wr.opcode == Opcode::RdmaRead
            {
                return;
            }
            let r = slot.outstanding.pop_front().expect("checked");
            slot.sent -= 1;
            if r.wr.signaled {
                let mut wc = slot.completion(r.wr.wr_id, WcStatus::Success, wc_opcode(r.wr.opcode));
                wc.byte_len = r.len;
                slot.send_cq.push(wc);
            }
        }
    }

    /// Completes the oldest request; false when the answer was unusable.
    fn complete_front(&mut self, qpn: u32, h: &Header, payload: &[u8]) -> bool {
        let slot = self.qps.get(&qpn).expect("caller checked");
        let r = &slot.outstanding[0];
        if r.wr.opcode == Opcode::RdmaRead {
            if h.op != MsgOp::ReadResp || payload.len() as u64 != r.len {
                let slot = self.qps.get_mut(&qpn).expect("present");
                slot.stats.bad_messages += 1;
                return false;
            }
            let mut at = 0;
            for sge in &r.wr.sg_list {
                let Some((mr, off)) = self.local(slot.pd, sge, AccessFlags::LOCAL_WRITE) else {
                    self.fail_qp(qpn, Some(WcStatus::LocProtErr));
                    return false;
                };
                let n = sge.len as usize;
                mr.copy_in(off, &payload[at..at + n]);
                at += n;
            }
        }
        let slot = self.qps.get_mut(&qpn).expect("present");
        let r = slot.outstanding.pop_front().expect("caller checked");
        slot.sent -= 1; // the front was sent (the caller checked)
        if r.wr.signaled {
            let mut wc = slot.completion(r.wr.wr_id, WcStatus::Success, wc_opcode(r.wr.opcode));
            wc.byte_len = r.len;
            slot.send_cq.push(wc);
        }
        true
    }
}

/// One resolved gather entry: region, offset in it, length.
pub(crate) type Gathered = (Arc<MrShared>, usize, usize);

/// A request's gather list left in its regions: the engine reads it from there
/// when it writes a datagram itself, and a datapath that sends by address sends it
/// straight from the region (the mapping lives as long as the list holds it).
/// A list of one entry (most requests) is kept without a vector of its own.
#[derive(Debug)]
pub(crate) struct GatherList {
    parts: Parts,
    len: usize,
}

#[derive(Debug)]
enum Parts {
    One(Gathered),
    Many(Vec<Gathered>),
}

impl GatherList {
    /// The list of `part` alone.
    pub(crate) fn one(part: Gathered) -> GatherList {
        let len = part.2;
        GatherList {
            parts: Parts::One(part),
            len,
        }
    }

    fn parts(&self) -> &[Gathered] {
        match &self.parts {
            Parts::One(p) => std::slice::from_ref(p),
            Parts::Many(v) => v,
        }
    }
}

/// The parts in order; a list of one is kept without a vector.
impl FromIterator<Gathered> for GatherList {
    fn from_iter<I: IntoIterator<Item = Gathered>>(parts: I) -> GatherList {
        let mut parts = parts.into_iter();
        match (parts.next(), parts.next()) {
            (Some(only), None) => GatherList::one(only),
            (first, second) => {
                let parts: Vec<Gathered> = first.into_iter().chain(second).chain(parts).collect();
                let len = parts.iter().map(|p| p.2).sum();
                GatherList {
                    parts: Parts::Many(parts),
                    len,
                }
            }
        }
    }
}

impl ExternalBytes for GatherList {
    fn len(&self) -> usize {
        self.len
    }

    fn read(&self, mut offset: usize, mut dst: &mut [u8]) {
        for (mr, off, n) in self.parts() {
            if dst.is_empty() {
                break;
            }
            if offset >= *n {
                offset -= n;
                continue;
            }
            let k = (n - offset).min(dst.len());
            let start = off + offset;
            mr.copy_out(start, &mut dst[..k]);
            dst = &mut dst[k..];
            offset = 0;
        }
    }

    fn addr(&self, mut offset: usize, len: usize) -> Option<usize> {
        for (mr, off, n) in self.parts() {
            if offset < *n {
                return (offset + len <= *n).then(|| mr.addr as usize + off + offset);
            }
            offset -= n;
        }
        None
    }
}
