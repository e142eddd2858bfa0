//! The responding side of a QP: executes SEND, WRITE and READ requests in order,
//! with receive matching, bounds and access checks, and answers each one.

use super::VerbsHost;
use crate::header::{AckStatus, Header, MsgOp};
use crate::types::{AccessFlags, QpState, WcOpcode, WcStatus};
use rondo_ud::Instant;

/// The verdict on one request.
enum Verdict {
    /// Executed; acknowledge (coalesced with the ACKs of the requests that follow).
    Acked,
    /// Executed; answer with this message (a READ response).
    Done(Vec<u8>),
    /// No receive posted: refuse, expect the same request again.
    Rnr,
    /// Refused for good: answer with the status and put the QP in error.
    Fatal(AckStatus),
}

impl VerbsHost {
    /// A SEND, WRITE or READ request arrived.
    pub(crate) fn on_request(&mut self, now: Instant, qpn: u32, h: &Header, payload: &[u8]) {
        let Some(slot) = self.qps.get_mut(&qpn) else {
            return;
        };
        if slot.state == QpState::Error {
            // A QP in error executes nothing; tell the requester so it does not hang.
            slot.stats.requests_refused += 1;
            let mut ack = Header::new(MsgOp::Ack, h.req_id);
            ack.status = AckStatus::RemOp;
            self.answer(now, qpn, ack.message(0));
            return;
        }
        if h.req_id != slot.expected_req {
            if h.req_id < slot.expected_req {
                slot.stats.bad_messages += 1;
            }
            // Beyond: sent after a request we refused for RNR; it will come again.
            return;
        }
        let verdict = match h.op {
            MsgOp::Send => self.execute_send(qpn, h, payload),
            MsgOp::Write => self.execute_write(qpn, h, payload),
            _ => self.execute_read(qpn, h),
        };
        let slot = self.qps.get_mut(&qpn).expect("present");
        match verdict {
            Verdict::Acked => {
                slot.expected_req += 1;
                if slot.ack_pending.replace(h.req_id).is_none() {
                    self.acks_due.push(qpn);
                }
            }
            Verdict::Done(answer) => {
                slot.expected_req += 1;
                self.answer(now, qpn, answer);
            }
            Verdict::Rnr => {
                slot.stats.rnr_naks_sent += 1;
                let mut ack = Header::new(MsgOp::Ack, h.req_id);
                ack.status = AckStatus::Rnr;
                self.answer(now, qpn, ack.message(0));
            }
            Verdict::Fatal(status) => {
                slot.stats.requests_refused += 1;
                let mut ack = Header::new(MsgOp::Ack, h.req_id);
                ack.status = status;
                self.answer(now, qpn, ack.message(0));
                self.fail_qp(qpn, None);
            }
        }
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
        self.post_answer(now, qpn, Header::new(MsgOp::Ack, id).message(0));
    }

    /// Sends every pending coalesced ACK (before the datapath asks for packets).
    pub(crate) fn flush_acks(&mut self, now: Instant) {
        while let Some(qpn) = self.acks_due.pop() {
            self.flush_ack(now, qpn);
        }
    }

    /// Sends an answer after any pending ACK, so that answers stay in request order.
    fn answer(&mut self, now: Instant, qpn: u32, msg: Vec<u8>) {
        self.flush_ack(now, qpn);
        self.post_answer(now, qpn, msg);
    }

    fn post_answer(&mut self, now: Instant, qpn: u32, msg: Vec<u8>) {
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

    fn execute_send(&mut self, qpn: u32, h: &Header, payload: &[u8]) -> Verdict {
        let slot = self.qps.get(&qpn).expect("present");
        let Some(recv) = slot.recvs.front() else {
            return Verdict::Rnr;
        };
        let room: u64 = recv.sg_list.iter().map(|s| u64::from(s.len)).sum();
        let (status, answer) = if room < payload.len() as u64 {
            (WcStatus::LocLenErr, AckStatus::RemInvReq)
        } else {
            let mut rest = payload;
            let mut ok = true;
            for sge in &recv.sg_list {
                if rest.is_empty() {
                    break;
                }
                let Some((mr, off)) = self.local(slot.pd, sge, AccessFlags::LOCAL_WRITE) else {
                    ok = false;
                    break;
                };
                let n = rest.len().min(sge.len as usize);
                mr.lock()[off..off + n].copy_from_slice(&rest[..n]);
                rest = &rest[n..];
            }
            if ok {
                (WcStatus::Success, AckStatus::Ok)
            } else {
                (WcStatus::LocProtErr, AckStatus::RemOp)
            }
        };
        let slot = self.qps.get_mut(&qpn).expect("present");
        let recv = slot.recvs.pop_front().expect("checked");
        let mut wc = slot.completion(recv.wr_id, status, WcOpcode::Recv);
        wc.byte_len = payload.len() as u64;
        wc.imm = h.imm;
        slot.recv_cq.push(wc);
        if answer == AckStatus::Ok {
            Verdict::Acked
        } else {
            Verdict::Fatal(answer)
        }
    }

    fn execute_write(&mut self, qpn: u32, h: &Header, payload: &[u8]) -> Verdict {
        let slot = self.qps.get(&qpn).expect("present");
        if h.len != payload.len() as u64 {
            return Verdict::Fatal(AckStatus::RemInvReq);
        }
        let Some((mr, off)) =
            self.remote(slot.pd, h.rkey, h.addr, h.len, AccessFlags::REMOTE_WRITE)
        else {
            return Verdict::Fatal(AckStatus::RemAccess);
        };
        if h.imm.is_some() && slot.recvs.is_empty() {
            return Verdict::Rnr;
        }
        mr.lock()[off..off + payload.len()].copy_from_slice(payload);
        if h.imm.is_some() {
            let slot = self.qps.get_mut(&qpn).expect("present");
            let recv = slot.recvs.pop_front().expect("checked");
            let mut wc = slot.completion(recv.wr_id, WcStatus::Success, WcOpcode::RecvRdmaWithImm);
            wc.byte_len = payload.len() as u64;
            wc.imm = h.imm;
            slot.recv_cq.push(wc);
        }
        Verdict::Acked
    }

    fn execute_read(&mut self, qpn: u32, h: &Header) -> Verdict {
        let slot = self.qps.get(&qpn).expect("present");
        if h.len > super::MAX_MESSAGE_BYTES {
            return Verdict::Fatal(AckStatus::RemInvReq);
        }
        let Some((mr, off)) = self.remote(slot.pd, h.rkey, h.addr, h.len, AccessFlags::REMOTE_READ)
        else {
            return Verdict::Fatal(AckStatus::RemAccess);
        };
        let mut resp = Header::new(MsgOp::ReadResp, h.req_id);
        resp.len = h.len;
        let n = h.len as usize;
        let mut msg = resp.message(n);
        msg.extend_from_slice(&mr.lock()[off..off + n]);
        Verdict::Done(msg)
    }
}
