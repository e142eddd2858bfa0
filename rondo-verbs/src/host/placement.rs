//! Direct placement of requests (DESIGN.md, "Receive placement: in order means zero
//! copy"): each QP's engine connection places its messages through a
//! [`RequestPlacement`], which takes the responder's verdict on a SEND, WRITE or
//! READ request as soon as the request's verbs header is in, and then copies each
//! payload, as the engine hands it over in order, straight from the datagram (or
//! the reorder-buffer slot) to its final place in a memory region. There is no
//! reassembly buffer: a WRITE costs one user-space copy per byte at the responder.
//!
//! The verdict uses the same rules and the same state as the responder did when it
//! executed whole messages (sequence, QP state, receive queue, keys, bounds, access),
//! all of it checked before the first byte is written, so a refused request writes
//! nothing. The state lives in [`RxState`], shared (under the context's lock, so
//! never contended) by the host and the placement; the verdict waits in
//! [`RxState::decided`] until the host sees the message complete and acts on it
//! (completions, ACKs, NAKs, error state). Responses (ACK, READ response) and
//! messages whose header does not parse are collected whole for the host, as
//! before.

use crate::header::{AckStatus, Header, MsgOp, HEADER_LEN};
use crate::mr::MrShared;
use crate::types::{AccessFlags, RecvWr, Sge, WcStatus};
use reorder::FlowIdHash;
use rondo_proto::placement::Placement;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

/// Largest up-front allocation for a response kept whole; longer ones grow.
const MAX_PREALLOC: u64 = 64 << 20;

/// A context's memory regions by key, shared by its host and its QPs' placements.
/// Every work request and every arriving request looks a key up; the keys are the
/// context's own (drawn at registration), so the multiplicative hash of the
/// engine's flow tables serves (a peer's forged key is only looked up).
#[derive(Debug, Default)]
pub(crate) struct KeyTables {
    pub lkeys: HashMap<u32, Arc<MrShared>, FlowIdHash>,
    pub rkeys: HashMap<u32, Arc<MrShared>, FlowIdHash>,
}

impl KeyTables {
    /// The region of a local scatter/gather entry, checked against `pd`, bounds and
    /// `need`, with the entry's offset inside it.
    pub(crate) fn local(
        &self,
        pd: u32,
        sge: &Sge,
        need: AccessFlags,
    ) -> Option<(Arc<MrShared>, usize)> {
        let mr = self.lkeys.get(&sge.lkey)?;
        if mr.pd != pd || !mr.access.contains(need) {
            return None;
        }
        let off = mr.offset_of(sge.addr, u64::from(sge.len))?;
        Some((mr.clone(), off))
    }

    /// The region named by a remote key for an access of `len` bytes at `addr`.
    pub(crate) fn remote(
        &self,
        pd: u32,
        rkey: u32,
        addr: u64,
        len: u64,
        need: AccessFlags,
    ) -> Option<(Arc<MrShared>, usize)> {
        let mr = self.rkeys.get(&rkey)?;
        if mr.pd != pd || !mr.access.contains(need) {
            return None;
        }
        let off = mr.offset_of(addr, len)?;
        Some((mr.clone(), off))
    }
}

/// Locks shared state; a panic elsewhere while it was held leaves consistent
/// counters and queues behind, so a poisoned lock is taken over.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The responder's state of one QP, shared by the host and the QP's placement.
#[derive(Debug)]
pub(crate) struct RxState {
    pub pd: u32,
    /// False once the QP is in error (or destroyed): requests are refused.
    pub open: bool,
    /// The next request id to execute.
    pub expected_req: u64,
    /// Posted receives, oldest first.
    pub recvs: VecDeque<RecvWr>,
    /// Verdicts on requests whose message is complete, oldest first, for the host.
    pub decided: VecDeque<Decided>,
    /// A receive consumed by the request being placed (flushed if the QP fails
    /// before the request completes).
    pub landing_recv: Option<RecvWr>,
    /// The host flushed the receives (the QP failed): a verdict is never undone.
    pub flushed: bool,
    /// Payload bytes copied straight from datagrams into memory regions.
    pub bytes_direct: u64,
}

impl RxState {
    pub(crate) fn new(pd: u32) -> RxState {
        RxState {
            pd,
            open: true,
            expected_req: 0,
            recvs: VecDeque::new(),
            decided: VecDeque::new(),
            landing_recv: None,
            flushed: false,
            bytes_direct: 0,
        }
    }

    /// Every receive the QP holds, in posting order, taken out (for a flush): those
    /// of completed and of half-placed requests, then the posted ones.
    pub(crate) fn take_receives(&mut self) -> Vec<RecvWr> {
        self.flushed = true;
        let mut out: Vec<RecvWr> = self
            .decided
            .iter_mut()
            .filter_map(|d| d.recv.take())
            .collect();
        out.extend(self.landing_recv.take());
        out.extend(self.recvs.drain(..));
        out
    }
}

/// What the responder does with one request.
#[derive(Debug)]
pub(crate) enum Verdict {
    /// Executed: its payload was placed (SEND, WRITE), or a READ to answer from
    /// `read_from`.
    Execute,
    /// A SEND whose receive cannot hold it: the receive completes with `status`,
    /// the requester is refused with `answer` and the QP goes to error.
    RecvError { status: WcStatus, answer: AckStatus },
    /// No receive posted: refuse, expect the same request again.
    Rnr,
    /// Refused for good: answer with the status and put the QP in error.
    Fatal(AckStatus),
    /// Not the expected request: ignored (`old`: a duplicate of an executed one).
    Stale { old: bool },
    /// The QP is in error: refused.
    Closed,
}

/// The verdict on one request, with what the host needs to act on it.
#[derive(Debug)]
pub(crate) struct Decided {
    pub msg_id: u64,
    pub header: Header,
    pub verdict: Verdict,
    /// Payload bytes after the verbs header.
    pub len: u64,
    /// The receive the request consumed (SEND, WRITE with immediate).
    pub recv: Option<RecvWr>,
    /// READ: the region and offset to answer from.
    pub read_from: Option<(Arc<MrShared>, usize)>,
}

/// One stretch of a request's destination.
#[derive(Debug)]
struct Segment {
    mr: Arc<MrShared>,
    off: usize,
    len: usize,
}

/// Where the current message's bytes go.
#[derive(Debug)]
enum Mode {
    /// Collecting the verbs header.
    Header,
    /// A request being executed: payload bytes go to `segments`, in order.
    Direct {
        decided: Decided,
        segments: Vec<Segment>,
        /// Segment and offset in it of the next byte.
        at: (usize, usize),
        /// Bytes placed so far (counted in [`RxState::bytes_direct`] at the end).
        placed: u64,
    },
    /// A refused request: its payload is dropped.
    Discard(Decided),
    /// A response, or a message whose header does not parse: kept whole for the host.
    Whole,
}

/// The placement of one QP's incoming messages (see the module documentation).
#[derive(Debug)]
pub(crate) struct RequestPlacement {
    rx: Arc<Mutex<RxState>>,
    tables: Arc<Mutex<KeyTables>>,
    msg_id: u64,
    msg_len: u64,
    /// The verbs header (all of the message in [`Mode::Whole`]).
    head: Vec<u8>,
    mode: Mode,
}

impl RequestPlacement {
    pub(crate) fn new(rx: Arc<Mutex<RxState>>, tables: Arc<Mutex<KeyTables>>) -> Self {
        RequestPlacement {
            rx,
            tables,
            msg_id: 0,
            msg_len: 0,
            head: Vec::with_capacity(HEADER_LEN),
            mode: Mode::Header,
        }
    }

    /// The verbs header is in: take the verdict and choose the mode.
    fn on_header(&mut self) {
        let Ok((h, _)) = Header::parse(&self.head) else {
            self.mode = Mode::Whole; // the host counts it as a bad message
            return;
        };
        if !matches!(h.op, MsgOp::Send | MsgOp::Write | MsgOp::ReadReq) {
            let rest = (self.msg_len - HEADER_LEN as u64).min(MAX_PREALLOC);
            self.head.reserve(rest as usize);
            self.mode = Mode::Whole;
            return;
        }
        let len = self.msg_len - HEADER_LEN as u64;
        let mut rx = lock(&self.rx);
        let tables = lock(&self.tables);
        let (verdict, segments, recv, read_from) = decide(&mut rx, &tables, &h, len);
        // Held where a flush finds it until the message completes.
        rx.landing_recv = recv;
        let decided = Decided {
            msg_id: self.msg_id,
            header: h,
            verdict,
            len,
            recv: None,
            read_from,
        };
        if matches!(decided.verdict, Verdict::Execute) && len > 0 {
            self.mode = Mode::Direct {
                decided,
                segments,
                at: (0, 0),
                placed: 0,
            };
        } else {
            self.mode = Mode::Discard(decided);
        }
    }

    /// A new message began before the current one was complete (only a peer that
    /// breaks its own stream does that): the verdict on the abandoned request is
    /// undone, so that its receive goes back to the front of the queue and the
    /// sequence expects it again; bytes it already placed stay (as a NIC's would).
    fn abandon(&mut self, d: &Decided) {
        let mut rx = lock(&self.rx);
        if let Some(r) = rx.landing_recv.take() {
            rx.recvs.push_front(r);
        }
        if rx.flushed {
            return;
        }
        match d.verdict {
            Verdict::Execute => rx.expected_req -= 1,
            Verdict::Fatal(_) | Verdict::RecvError { .. } => rx.open = true,
            _ => {}
        }
    }

    fn copy(&mut self, mut bytes: &[u8]) {
        let Mode::Direct {
            segments,
            at,
            placed,
            ..
        } = &mut self.mode
        else {
            return;
        };
        *placed += bytes.len() as u64;
        while !bytes.is_empty() {
            let Some(seg) = segments.get(at.0) else {
                break; // more payload than the verdict placed: cannot happen (lengths checked)
            };
            let k = bytes.len().min(seg.len - at.1);
            let start = seg.off + at.1;
            seg.mr.copy_in(start, &bytes[..k]);
            bytes = &bytes[k..];
            at.1 += k;
            if at.1 == seg.len {
                *at = (at.0 + 1, 0);
            }
        }
    }
}

/// The responder's verdict on request `h` with `len` payload bytes, and the state
/// changes it implies (the next expected request, receives consumed, error state):
/// the rules of RC, applied before any byte is written.
#[allow(clippy::type_complexity)]
fn decide(
    rx: &mut RxState,
    tables: &KeyTables,
    h: &Header,
    len: u64,
) -> (
    Verdict,
    Vec<Segment>,
    Option<RecvWr>,
    Option<(Arc<MrShared>, usize)>,
) {
    let refuse = |v| (v, Vec::new(), None, None);
    if !rx.open {
        return refuse(Verdict::Closed);
    }
    if h.req_id != rx.expected_req {
        // Beyond: sent after a request refused for RNR; it will come again.
        return refuse(Verdict::Stale {
            old: h.req_id < rx.expected_req,
        });
    }
    let pd = rx.pd;
    let (verdict, segments, recv, read_from) = match h.op {
        MsgOp::Send => {
            let Some(recv) = rx.recvs.front() else {
                return refuse(Verdict::Rnr);
            };
            let room: u64 = recv.sg_list.iter().map(|s| u64::from(s.len)).sum();
            let mut segments = Vec::new();
            let mut left = len;
            let mut prot = false;
            for sge in &recv.sg_list {
                if left == 0 {
                    break;
                }
                let Some((mr, off)) = tables.local(pd, sge, AccessFlags::LOCAL_WRITE) else {
                    prot = true;
                    break;
                };
                let n = left.min(u64::from(sge.len));
                segments.push(Segment {
                    mr,
                    off,
                    len: n as usize,
                });
                left -= n;
            }
            let recv = rx.recvs.pop_front();
            let verdict = if room < len {
                Verdict::RecvError {
                    status: WcStatus::LocLenErr,
                    answer: AckStatus::RemInvReq,
                }
            } else if prot {
                Verdict::RecvError {
                    status: WcStatus::LocProtErr,
                    answer: AckStatus::RemOp,
                }
            } else {
                Verdict::Execute
            };
            (verdict, segments, recv, None)
        }
        MsgOp::Write => {
            let to = tables.remote(pd, h.rkey, h.addr, h.len, AccessFlags::REMOTE_WRITE);
            match to {
                _ if h.len != len => (Verdict::Fatal(AckStatus::RemInvReq), Vec::new(), None, None),
                None => (Verdict::Fatal(AckStatus::RemAccess), Vec::new(), None, None),
                Some(_) if h.imm.is_some() && rx.recvs.is_empty() => {
                    (Verdict::Rnr, Vec::new(), None, None)
                }
                Some((mr, off)) => {
                    let recv = if h.imm.is_some() {
                        rx.recvs.pop_front()
                    } else {
                        None
                    };
                    let seg = Segment {
                        mr,
                        off,
                        len: len as usize,
                    };
                    (Verdict::Execute, vec![seg], recv, None)
                }
            }
        }
        _ => {
            let from = (h.len <= super::MAX_MESSAGE_BYTES)
                .then(|| tables.remote(pd, h.rkey, h.addr, h.len, AccessFlags::REMOTE_READ));
            match from {
                None => (Verdict::Fatal(AckStatus::RemInvReq), Vec::new(), None, None),
                Some(None) => (Verdict::Fatal(AckStatus::RemAccess), Vec::new(), None, None),
                Some(from) => (Verdict::Execute, Vec::new(), None, from),
            }
        }
    };
    match verdict {
        Verdict::Execute => rx.expected_req += 1,
        Verdict::Fatal(_) | Verdict::RecvError { .. } => rx.open = false,
        _ => {}
    }
    (verdict, segments, recv, read_from)
}

impl Placement for RequestPlacement {
    fn begin(&mut self, msg_id: u64, msg_len: u64) -> bool {
        if let Mode::Direct { decided, .. } | Mode::Discard(decided) =
            std::mem::replace(&mut self.mode, Mode::Header)
        {
            self.abandon(&decided);
        }
        self.msg_id = msg_id;
        self.msg_len = msg_len;
        self.head.clear();
        self.mode = Mode::Header;
        true
    }

    fn target(&mut self, _offset: u64, _len: usize) -> Option<&mut [u8]> {
        None // regions sit behind their locks; payloads are copied in `place`
    }

    fn place(&mut self, _offset: u64, mut payload: &[u8]) {
        if let Mode::Header = self.mode {
            let k = payload.len().min(HEADER_LEN - self.head.len());
            self.head.extend_from_slice(&payload[..k]);
            payload = &payload[k..];
            if self.head.len() < HEADER_LEN {
                return;
            }
            self.on_header();
        }
        match self.mode {
            Mode::Whole => self.head.extend_from_slice(payload),
            Mode::Direct { .. } => self.copy(payload),
            Mode::Header | Mode::Discard(_) => {}
        }
    }

    fn commit(&mut self, _offset: u64, _len: usize) {
        // Never handed out a target.
    }

    fn finish(&mut self) -> Vec<u8> {
        let decided = match std::mem::replace(&mut self.mode, Mode::Header) {
            Mode::Direct {
                mut decided,
                placed,
                ..
            } => {
                let mut rx = lock(&self.rx);
                decided.recv = rx.landing_recv.take();
                rx.bytes_direct += placed;
                Some(decided)
            }
            Mode::Discard(mut decided) => {
                decided.recv = lock(&self.rx).landing_recv.take();
                Some(decided)
            }
            Mode::Header | Mode::Whole => None,
        };
        if let Some(d) = decided {
            lock(&self.rx).decided.push_back(d);
        }
        std::mem::replace(&mut self.head, Vec::with_capacity(HEADER_LEN))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::AccessFlags;

    fn setup() -> (RequestPlacement, Arc<Mutex<RxState>>, Arc<MrShared>) {
        let mut mr = MrShared::new(4096, 1, AccessFlags::ALL).unwrap();
        (mr.lkey, mr.rkey) = (11, 22);
        let mr = Arc::new(mr);
        let mut tables = KeyTables::default();
        tables.lkeys.insert(11, mr.clone());
        tables.rkeys.insert(22, mr.clone());
        let rx = Arc::new(Mutex::new(RxState::new(1)));
        for wr_id in [1, 2] {
            let sge = Sge {
                addr: mr.addr,
                len: 2000,
                lkey: 11,
            };
            lock(&rx).recvs.push_back(RecvWr {
                wr_id,
                sg_list: vec![sge],
            });
        }
        let p = RequestPlacement::new(rx.clone(), Arc::new(Mutex::new(tables)));
        (p, rx, mr)
    }

    fn send(req_id: u64, payload: &[u8]) -> Vec<u8> {
        let mut m = Header::new(MsgOp::Send, req_id).message(payload.len());
        m.extend_from_slice(payload);
        m
    }

    #[test]
    fn a_send_lands_in_its_receive_and_is_decided_once_complete() {
        let (mut p, rx, mr) = setup();
        let m = send(0, &[7; 1000]);
        assert!(p.begin(5, m.len() as u64));
        p.place(0, &m[..300]);
        p.place(300, &m[300..]);
        assert_eq!(
            p.finish().len(),
            HEADER_LEN,
            "only the header goes to the host"
        );
        let rx = lock(&rx);
        let d = rx.decided.front().unwrap();
        assert!(matches!(d.verdict, Verdict::Execute));
        assert_eq!(
            (d.msg_id, d.len, d.recv.as_ref().map(|r| r.wr_id)),
            (5, 1000, Some(1))
        );
        assert_eq!(
            (rx.expected_req, rx.recvs.len(), rx.bytes_direct),
            (1, 1, 1000)
        );
        let mut got = vec![0; 1000];
        assert!(mr.copy_out(0, &mut got));
        assert_eq!(got, vec![7; 1000]);
    }

    #[test]
    fn an_abandoned_request_gives_its_receive_back_and_is_expected_again() {
        let (mut p, rx, _mr) = setup();
        let m = send(0, &[7; 1000]);
        assert!(p.begin(5, m.len() as u64));
        p.place(0, &m[..500]); // the header is in: decided, receive 1 consumed
        {
            let rx = lock(&rx);
            assert_eq!((rx.expected_req, rx.recvs.len()), (1, 1));
        }
        // The peer starts another message before finishing this one.
        assert!(p.begin(6, m.len() as u64));
        {
            let rx = lock(&rx);
            let ids: Vec<u64> = rx.recvs.iter().map(|r| r.wr_id).collect();
            assert_eq!((rx.expected_req, ids), (0, vec![1, 2]));
            assert!(rx.landing_recv.is_none() && rx.decided.is_empty());
        }
        // The request, sent whole, executes into the same receive.
        p.place(0, &m);
        p.finish();
        let rx = lock(&rx);
        let d = rx.decided.front().unwrap();
        assert_eq!((d.msg_id, d.recv.as_ref().map(|r| r.wr_id)), (6, Some(1)));
    }

    #[test]
    fn a_flush_while_a_request_lands_keeps_its_receive_out_of_the_queue() {
        let (mut p, rx, _mr) = setup();
        let m = send(0, &[7; 1000]);
        assert!(p.begin(5, m.len() as u64));
        p.place(0, &m[..500]);
        let flushed: Vec<u64> = lock(&rx).take_receives().iter().map(|r| r.wr_id).collect();
        assert_eq!(
            flushed,
            [1, 2],
            "the landing receive first, in posting order"
        );
        lock(&rx).open = false;
        // Abandoned after the flush: nothing is given back, the QP stays closed.
        assert!(p.begin(6, 40));
        let rx = lock(&rx);
        assert!(rx.recvs.is_empty() && !rx.open);
    }
}
