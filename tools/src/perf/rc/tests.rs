//! The RC run's client and server over an in-memory RC pair (no device): every
//! operation, `--verify`, latency mode, with the control exchange over loopback TCP.
//!
//! The pair keeps RC's rules where the run depends on them: operations on a QP
//! execute in posting order; a SEND or a WRITE_WITH_IMM waits (RNR) until the peer
//! posts a receive, and everything posted after it waits too; and, as the worst
//! case a responder may show, a WRITE_WITH_IMM's payload is placed before its
//! receive is found. QPs only send in RTS, and RTR must name the peer QP and its
//! send PSN.

use super::attr::initial_psn;
use super::nic::{Completion, PortInfo, Post, RcError, RcNic, SendOp};
use super::run::{client_on, Side};
use super::serve::server_on;
use crate::perf::client::SETUP_TIMEOUT;
use crate::perf::exchange::{Backend, Control, Hello, Message, Op, Report, Transport};
use crate::perf::report::Outcome;
use crate::perf::slotted_checks as checks;
use crate::perf::Progress;
use rondo_ud::verbs::qp_attr::{QpAttrs, QpState};
use std::collections::VecDeque;
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

const REM_ACCESS_ERR: u32 = 10;
const LOC_LEN_ERR: u32 = 1;

#[derive(Clone, Copy, Debug)]
struct Recv {
    wr_id: u64,
    buf: usize,
    offset: usize,
    len: usize,
}

#[derive(Clone, Copy, Debug)]
struct Waiting {
    post: Post,
    /// A WRITE_WITH_IMM whose payload is already in place.
    placed: bool,
}

#[derive(Debug, Default)]
struct Qp {
    state: Option<QpState>,
    dest_qpn: Option<u32>,
    rq_psn: Option<u32>,
    recvs: VecDeque<Recv>,
    /// Operations of the peer's QP waiting for a receive here, in order.
    waiting: VecDeque<Waiting>,
}

#[derive(Debug, Default)]
struct Host {
    bufs: Vec<Vec<u8>>,
    qps: Vec<Qp>,
    cq: VecDeque<Completion>,
}

/// Two hosts wired QP `q` to QP `q`.
#[derive(Debug, Default)]
struct Wire {
    hosts: [Host; 2],
}

fn qpn(host: usize, q: usize) -> u32 {
    0x100 * (host as u32 + 1) + q as u32
}

fn addr(host: usize, b: usize) -> u64 {
    ((host as u64 + 1) << 48) | ((b as u64 + 1) << 32)
}

fn rkey(host: usize, b: usize) -> u32 {
    0xAB00_0000 | ((host as u32) << 16) | b as u32
}

enum Step {
    Done,
    Wait { placed: bool },
}

impl Wire {
    /// Where `(address, rkey, len)` falls in `host`'s buffers.
    fn resolve(
        &self,
        host: usize,
        remote: Option<(u64, u32)>,
        len: usize,
    ) -> Option<(usize, usize)> {
        let (a, key) = remote?;
        let b = ((a >> 32) & 0xFFFF) as usize;
        let b = b.checked_sub(1)?;
        let offset = (a & 0xFFFF_FFFF) as usize;
        let ok = a >> 48 == host as u64 + 1
            && key == rkey(host, b)
            && self.hosts[host].bufs.get(b)?.len() >= offset + len;
        ok.then_some((b, offset))
    }

    fn copy(&mut self, from: (usize, usize, usize), to: (usize, usize, usize), len: usize) {
        let bytes = self.hosts[from.0].bufs[from.1][from.2..from.2 + len].to_vec();
        self.hosts[to.0].bufs[to.1][to.2..to.2 + len].copy_from_slice(&bytes);
    }

    fn complete(
        &mut self,
        host: usize,
        q: usize,
        wr_id: u64,
        status: u32,
        receive: bool,
        len: usize,
    ) {
        self.hosts[host].cq.push_back(Completion {
            wr_id,
            status,
            receive,
            byte_len: len as u32,
            qp_num: qpn(host, q),
        });
    }

    /// Executes one operation of `from`'s QP `q` at the peer.
    fn execute(&mut self, from: usize, q: usize, w: Waiting) -> Step {
        let to = 1 - from;
        let p = w.post;
        let done = |wire: &mut Wire, status| {
            if p.signaled || status != 0 {
                wire.complete(from, q, p.wr_id, status, false, p.len);
            }
            Step::Done
        };
        match p.op {
            SendOp::Write | SendOp::WriteImm(_) => {
                let Some((b, off)) = self.resolve(to, p.remote, p.len) else {
                    return done(self, REM_ACCESS_ERR);
                };
                if !w.placed {
                    self.copy((from, p.buf, p.offset), (to, b, off), p.len);
                }
                if let SendOp::WriteImm(_) = p.op {
                    let Some(r) = self.hosts[to].qps[q].recvs.pop_front() else {
                        return Step::Wait { placed: true };
                    };
                    self.complete(to, q, r.wr_id, 0, true, p.len);
                }
                done(self, 0)
            }
            SendOp::Send => {
                let Some(r) = self.hosts[to].qps[q].recvs.pop_front() else {
                    return Step::Wait { placed: false };
                };
                if p.len > r.len {
                    self.complete(to, q, r.wr_id, LOC_LEN_ERR, true, 0);
                    return done(self, 9);
                }
                self.copy((from, p.buf, p.offset), (to, r.buf, r.offset), p.len);
                self.complete(to, q, r.wr_id, 0, true, p.len);
                done(self, 0)
            }
            SendOp::Read => {
                let Some((b, off)) = self.resolve(to, p.remote, p.len) else {
                    return done(self, REM_ACCESS_ERR);
                };
                self.copy((to, b, off), (from, p.buf, p.offset), p.len);
                done(self, 0)
            }
        }
    }

    /// Runs the operations waiting at `host`'s QP `q` while they can go.
    fn drain(&mut self, host: usize, q: usize) {
        while let Some(w) = self.hosts[host].qps[q].waiting.pop_front() {
            if let Step::Wait { placed } = self.execute(1 - host, q, w) {
                self.hosts[host].qps[q]
                    .waiting
                    .push_front(Waiting { placed, ..w });
                return;
            }
        }
    }
}

/// One side of the in-memory RC pair.
struct FakeNic {
    wire: Arc<Mutex<Wire>>,
    me: usize,
}

impl RcNic for FakeNic {
    fn create_qp(&mut self, _: u32, _: u32) -> Result<usize, RcError> {
        let mut w = self.wire.lock().unwrap();
        w.hosts[self.me].qps.push(Qp {
            state: None,
            ..Qp::default()
        });
        Ok(w.hosts[self.me].qps.len() - 1)
    }
    fn register(&mut self, len: usize) -> Result<usize, RcError> {
        let mut w = self.wire.lock().unwrap();
        w.hosts[self.me].bufs.push(vec![0; len]);
        Ok(w.hosts[self.me].bufs.len() - 1)
    }
    fn qpn(&self, q: usize) -> u32 {
        qpn(self.me, q)
    }
    fn addr(&self, b: usize) -> u64 {
        addr(self.me, b)
    }
    fn rkey(&self, b: usize) -> u32 {
        rkey(self.me, b)
    }
    fn len(&self, b: usize) -> usize {
        self.wire.lock().unwrap().hosts[self.me].bufs[b].len()
    }
    fn read(&self, b: usize, at: usize, len: usize, f: &mut dyn FnMut(&[u8])) {
        f(&self.wire.lock().unwrap().hosts[self.me].bufs[b][at..at + len]);
    }
    fn write(&mut self, b: usize, at: usize, len: usize, f: &mut dyn FnMut(&mut [u8])) {
        f(&mut self.wire.lock().unwrap().hosts[self.me].bufs[b][at..at + len]);
    }
    fn modify(&mut self, q: usize, a: &QpAttrs) -> Result<(), RcError> {
        let mut w = self.wire.lock().unwrap();
        let qp = &mut w.hosts[self.me].qps[q];
        let next = a.state.ok_or(RcError::Invalid("no state"))?;
        let expected = match qp.state {
            None => QpState::Init,
            Some(QpState::Init) => QpState::Rtr,
            Some(_) => QpState::Rts,
        };
        if next != expected {
            return Err(RcError::Invalid("out-of-order transition"));
        }
        if next == QpState::Rtr {
            qp.dest_qpn = a.dest_qpn;
            qp.rq_psn = a.rq_psn;
            let peer = qpn(1 - self.me, q);
            if a.dest_qpn != Some(peer) || a.rq_psn != Some(initial_psn(peer)) {
                return Err(RcError::Invalid(
                    "RTR must name the peer QP and its send PSN",
                ));
            }
        }
        qp.state = Some(next);
        Ok(())
    }
    fn post_send(&mut self, q: usize, p: &Post) -> Result<(), RcError> {
        let mut w = self.wire.lock().unwrap();
        if w.hosts[self.me].qps[q].state != Some(QpState::Rts) {
            return Err(RcError::Invalid("post_send before RTS"));
        }
        let peer = 1 - self.me;
        let op = Waiting {
            post: *p,
            placed: false,
        };
        if !w.hosts[peer].qps[q].waiting.is_empty() {
            w.hosts[peer].qps[q].waiting.push_back(op);
        } else if let Step::Wait { placed } = w.execute(self.me, q, op) {
            w.hosts[peer].qps[q]
                .waiting
                .push_back(Waiting { placed, ..op });
        }
        Ok(())
    }
    fn post_recv(
        &mut self,
        q: usize,
        wr_id: u64,
        buf: usize,
        offset: usize,
        len: usize,
    ) -> Result<(), RcError> {
        let mut w = self.wire.lock().unwrap();
        w.hosts[self.me].qps[q].recvs.push_back(Recv {
            wr_id,
            buf,
            offset,
            len,
        });
        w.drain(self.me, q);
        Ok(())
    }
    fn poll(&mut self, out: &mut [Completion]) -> Result<usize, RcError> {
        let mut w = self.wire.lock().unwrap();
        let cq = &mut w.hosts[self.me].cq;
        let n = out.len().min(cq.len());
        for (o, c) in out.iter_mut().zip(cq.drain(..n)) {
            *o = c;
        }
        Ok(n)
    }
    fn status_name(&self, status: u32) -> String {
        format!("in-memory status {status}")
    }
}

fn port() -> PortInfo {
    PortInfo {
        lid: 0,
        gid: [7; 16],
        active_mtu: 4096,
        max_rd_atomic: 16,
        max_dest_rd_atomic: 16,
    }
}

/// A verified bandwidth run of RC: 2 queue pairs of 4 slots.
fn hello(op: Op, size: u64, n: u64) -> Hello {
    Hello {
        paths: 1,
        transport: Transport::Rc,
        backend: Backend::Verbs,
        tx_depth: 4,
        verify_seed: Some(11),
        ..checks::hello(op, size, n)
    }
}

/// Client and server over one in-memory RC pair, control over loopback TCP; the
/// server's copy of the hello changed by `tamper`.
fn run_with(h: Hello, tamper: impl FnOnce(&mut Hello) + Send + 'static) -> (Outcome, Report) {
    let wire = Arc::new(Mutex::new(Wire::default()));
    let server_wire = wire.clone();
    checks::over_loopback(
        h,
        tamper,
        move |ctrl, h| {
            let nic = FakeNic {
                wire: server_wire,
                me: 1,
            };
            server_on(Side::new(nic, port(), 1, 3, h), ctrl, h).unwrap()
        },
        |ctrl, h| {
            let side = Side::new(FakeNic { wire, me: 0 }, port(), 1, 3, &h).unwrap();
            client_on(side, ctrl, h, &mut Progress::new(false)).unwrap()
        },
    )
}

/// [`run_with`], the server expecting the pattern of `seed` when given.
fn run_seeded(h: Hello, seed: Option<u64>) -> (Outcome, Report) {
    run_with(h, move |h| h.verify_seed = seed.or(h.verify_seed))
}

#[test]
fn every_operation_moves_verified_bytes() {
    for o in checks::every_operation_moves_verified_bytes(hello, run_seeded) {
        assert_eq!((o.transport, o.backend, o.paths), ("rc", "verbs", 1));
    }
}

#[test]
fn verified_writes_wait_for_credits_although_payloads_land_early() {
    // Many more messages than slots: every slot is rewritten often, and the pair
    // places a WRITE_WITH_IMM's payload before its receive exists. Without the
    // credits a slot would be overwritten before the server checked it.
    let mut h = hello(Op::Write, 3000, 400);
    h.tx_depth = 2;
    h.qps = 1;
    let (o, r) = run_with(h, |_| {});
    assert!(o.verified, "{o:?} {r:?}");
    assert_eq!((r.messages, r.mismatched_bytes), (400, 0));
}

#[test]
fn a_receiver_expecting_other_bytes_does_not_verify() {
    checks::a_receiver_expecting_other_bytes_does_not_verify(hello, run_seeded);
}

#[test]
fn latency_mode_echoes_every_operation() {
    checks::latency_mode_echoes_every_operation(hello, run_seeded);
}

#[test]
fn a_server_port_with_a_smaller_mtu_rejects_the_run_with_advice() {
    let wire = Arc::new(Mutex::new(Wire::default()));
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server_wire = wire.clone();
    let server = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut ctrl = Control::new(stream).unwrap();
        let Message::Hello(h) = ctrl.recv(SETUP_TIMEOUT).unwrap() else {
            panic!("no hello")
        };
        let small = PortInfo {
            active_mtu: 1024,
            ..port()
        };
        let nic = FakeNic {
            wire: server_wire,
            me: 1,
        };
        server_on(Side::new(nic, small, 1, 3, &h), &mut ctrl, &h).unwrap_err()
    });
    let side = Side::new(
        FakeNic { wire, me: 0 },
        port(),
        1,
        3,
        &hello(Op::Write, 100, 1),
    )
    .unwrap();
    let mut ctrl = Control::new(TcpStream::connect(addr).unwrap()).unwrap();
    let err = client_on(
        side,
        &mut ctrl,
        hello(Op::Write, 100, 1),
        &mut Progress::new(false),
    )
    .unwrap_err();
    assert!(
        format!("{err:#}").contains("rerun the client with -m 1024"),
        "{err:#}"
    );
    assert!(format!("{:#}", server.join().unwrap()).contains("-m 1024"));
}

#[test]
fn the_pair_enforces_rc_rules_the_run_relies_on() {
    let wire = Arc::new(Mutex::new(Wire::default()));
    let mut a = FakeNic {
        wire: wire.clone(),
        me: 0,
    };
    let q = a.create_qp(8, 8).unwrap();
    let b = a.register(64).unwrap();
    let post = Post {
        wr_id: 1,
        op: SendOp::Send,
        buf: b,
        offset: 0,
        len: 8,
        remote: None,
        signaled: true,
    };
    assert!(a.post_send(q, &post).is_err(), "no post before RTS");
    let rts = QpAttrs {
        state: Some(QpState::Rts),
        ..QpAttrs::default()
    };
    assert!(a.modify(q, &rts).is_err(), "RESET cannot go to RTS");
    let rtr_wrong = QpAttrs {
        state: Some(QpState::Rtr),
        dest_qpn: Some(1),
        rq_psn: Some(1),
        ..QpAttrs::default()
    };
    let init = QpAttrs {
        state: Some(QpState::Init),
        ..QpAttrs::default()
    };
    a.modify(q, &init).unwrap();
    assert!(a.modify(q, &rtr_wrong).is_err(), "RTR must name the peer");
}
