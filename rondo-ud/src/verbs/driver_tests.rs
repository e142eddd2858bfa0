//! The driver loop over an in-memory NIC: two endpoints exchange messages
//! through UD "QPs" whose wire delivers to posted receives in order, with the GRH
//! in front, as a ConnectX does.

use super::*;
use crate::verbs::address::{address_plan, AddressConfig, AhSpec};
use crate::verbs::exchange::EndpointInfo;
use crate::verbs::flow_label::roce_source_port;
use crate::verbs::grh::GRH_LEN;
use crate::verbs::send::SendConfig;
use rondo_proto::{BufferConfig, Endpoint, Event, SharedBuffer};
use std::cell::RefCell;
use std::collections::{HashSet, VecDeque};
use std::rc::Rc;

const MTU: usize = 1024;
const PATHS: u16 = 4;

/// The NIC profile's flow over `PATHS` paths with datagrams of `mtu` bytes.
fn nic_flow(mtu: usize) -> rondo_proto::FlowConfig {
    rondo_proto::FlowConfig {
        mtu,
        ..crate::HostProfile::NIC.flow_config(PATHS)
    }
}

struct Frame {
    data: Vec<u8>,
    tclass: u8,
    qkey: u32,
    /// NIC clock (extended ticks) when it was sent.
    sent: u64,
}

#[derive(Default)]
struct Wire {
    queues: HashMap<u32, VecDeque<Frame>>,
    /// Mark every frame CE.
    mark_ce: bool,
    /// NIC clock shared by both NICs, in ticks (extended; completions carry it
    /// masked). Each send takes one tick; a frame arrives `delay` ticks after it
    /// was sent.
    ticks: u64,
    delay: u64,
    /// Deliver the next pair of frames to this QPN swapped (reordering).
    swap_to: Option<u32>,
    /// Deliver the 4th next frame to this QPN first (a bigger jump).
    jump_to: Option<u32>,
    /// Drop the frame with this index (counted over frames to `drop_to`) once.
    drop_nth: Option<usize>,
    drop_to: u32,
    seen_to_drop: usize,
    held: bool,
    /// Deliver the next frame to this QPN twice (a duplicate).
    dup_to: Option<u32>,
}

struct FakeNic {
    qpn: u32,
    qkey: u32,
    wire: Rc<RefCell<Wire>>,
    ahs: Vec<AhSpec>,
    send_mem: Vec<u8>,
    recv_mem: Vec<u8>,
    posted: VecDeque<RecvDesc>,
    send_done: VecDeque<Completion>,
    /// Completion clock (mask, kHz); `None`: no timestamps.
    clock: Option<NicClock>,
    /// Registered landing buffers: key -> (address, length).
    registered: HashMap<u64, (usize, usize)>,
    registrations: u64,
    /// Bytes written to in-place targets.
    target_writes: u64,
    /// Extra receive completions to hand out first (fault injection).
    injected: VecDeque<Completion>,
    chains: Vec<usize>,
    /// (source port, traffic class) of every datagram sent.
    sent: HashSet<(u16, u8)>,
    dropped_no_recv: u64,
    stride: usize,
}

impl FakeNic {
    fn new(qpn: u32, wire: &Rc<RefCell<Wire>>, depth: usize, slots: usize) -> FakeNic {
        FakeNic {
            qpn,
            qkey: 0x5247_0001,
            wire: wire.clone(),
            ahs: Vec::new(),
            send_mem: vec![0; depth * MTU],
            recv_mem: vec![0; slots * (GRH_LEN + MTU)],
            posted: VecDeque::new(),
            send_done: VecDeque::new(),
            clock: None,
            registered: HashMap::new(),
            registrations: 0,
            target_writes: 0,
            injected: VecDeque::new(),
            chains: Vec::new(),
            sent: HashSet::new(),
            dropped_no_recv: 0,
            stride: GRH_LEN + MTU,
        }
    }
}

impl Nic for FakeNic {
    fn send_mem(&mut self) -> &mut [u8] {
        &mut self.send_mem
    }

    fn recv_mem(&self) -> &[u8] {
        &self.recv_mem
    }

    fn post_send(&mut self, chain: &[SendDesc], slot_len: usize) -> Result<(), VerbsError> {
        self.chains.push(chain.len());
        for d in chain {
            let ah = self.ahs[d.ah];
            let start = d.wr.slot * slot_len;
            let data = self.send_mem[start..start + d.wr.len].to_vec();
            let sent = {
                let mut w = self.wire.borrow_mut();
                w.ticks += 1;
                w.ticks
            };
            let ts = self.clock.map(|c| sent & c.mask);
            self.sent
                .insert((roce_source_port(ah.flow_label).unwrap(), ah.traffic_class));
            let mut wire = self.wire.borrow_mut();
            let tclass = ah.traffic_class | if wire.mark_ce { 0b11 } else { 0 };
            wire.queues
                .entry(d.remote_qpn)
                .or_default()
                .push_back(Frame {
                    data,
                    tclass,
                    qkey: d.remote_qkey,
                    sent,
                });
            if d.wr.signaled {
                self.send_done.push_back(Completion {
                    wr_id: d.wr.wr_id,
                    ok: true,
                    byte_len: 0,
                    grh: false,
                    ts,
                });
            }
        }
        Ok(())
    }

    fn post_recv(&mut self, wrs: &[RecvDesc], stride: usize) -> Result<(), VerbsError> {
        assert_eq!(stride, self.stride);
        for d in wrs {
            if let Some((key, addr, len)) = d.target {
                let (base, cap) = self.registered[&key]; // posting needs a registration
                assert!(addr as usize >= base && addr as usize + len <= base + cap);
                assert!(d.header < stride);
            } else {
                assert_eq!(d.header, stride);
            }
        }
        self.posted.extend(wrs);
        Ok(())
    }

    fn register(&mut self, key: u64, addr: *mut u8, len: usize) -> Result<(), VerbsError> {
        assert!(self.registered.insert(key, (addr as usize, len)).is_none());
        self.registrations += 1;
        Ok(())
    }

    fn deregister(&mut self, key: u64) {
        assert!(self.registered.remove(&key).is_some(), "deregistered twice");
    }

    fn clock(&self) -> Option<NicClock> {
        self.clock
    }

    fn poll_send(&mut self, out: &mut [Completion]) -> Result<usize, VerbsError> {
        let n = out.len().min(self.send_done.len());
        for o in out.iter_mut().take(n) {
            *o = self.send_done.pop_front().unwrap();
        }
        Ok(n)
    }

    #[allow(unsafe_code)] // writes into posted in-place targets, as the NIC does
    fn poll_recv(&mut self, out: &mut [Completion]) -> Result<usize, VerbsError> {
        let mut n = 0;
        while n < out.len() {
            if let Some(c) = self.injected.pop_front() {
                out[n] = c;
                n += 1;
                continue;
            }
            let Some(frame) = self.next_frame() else {
                break;
            };
            if frame.qkey != self.qkey {
                continue; // UD drops datagrams with another qkey
            }
            let Some(wr) = self.posted.pop_front() else {
                self.dropped_no_recv += 1; // no receive posted: dropped
                continue;
            };
            let arrival = {
                let mut w = self.wire.borrow_mut();
                let at = frame.sent + w.delay;
                w.ticks = w.ticks.max(at);
                at
            };
            // GRH then the datagram, scattered over the WR's entries.
            let mut bytes = vec![0u8; GRH_LEN];
            bytes[0] = 0x60 | (frame.tclass >> 4);
            bytes[1] = (frame.tclass & 0x0F) << 4;
            bytes.extend_from_slice(&frame.data);
            let (head, room) = match wr.target {
                Some((_, _, len)) => (wr.header, wr.header + len),
                None => (self.stride, self.stride),
            };
            let ok = bytes.len() <= room;
            if ok {
                let n = bytes.len().min(head);
                let slot = &mut self.recv_mem[wr.slot * self.stride..][..n];
                slot.copy_from_slice(&bytes[..n]);
                if let (Some((_, addr, _)), true) = (wr.target, bytes.len() > head) {
                    let rest = &bytes[head..];
                    // SAFETY: the target is registered and posted (checked at
                    // post_recv); the driver keeps it allocated until this
                    // completion is polled.
                    unsafe { std::ptr::copy_nonoverlapping(rest.as_ptr(), addr, rest.len()) };
                    self.target_writes += rest.len() as u64;
                }
            }
            out[n] = Completion {
                wr_id: wr.slot as u64,
                ok,
                byte_len: bytes.len(),
                grh: true,
                ts: self.clock.map(|c| arrival & c.mask),
            };
            n += 1;
        }
        Ok(n)
    }
}

impl FakeNic {
    /// The next frame for this QP, after the wire's reordering and loss.
    fn next_frame(&mut self) -> Option<Frame> {
        let mut w = self.wire.borrow_mut();
        loop {
            let swap = w.swap_to == Some(self.qpn) && !w.held;
            let len = w.queues.get(&self.qpn).map_or(0, VecDeque::len);
            let jump = w.jump_to == Some(self.qpn) && len >= 4;
            let q = w.queues.get_mut(&self.qpn)?;
            let f = if jump {
                let f = q.remove(3)?;
                w.jump_to = None;
                f
            } else if swap && len >= 2 {
                let f = q.remove(1)?;
                w.held = true; // the first of the pair goes next, unswapped
                w.swap_to = None; // one pair per request
                f
            } else {
                let f = q.pop_front()?;
                w.held = false;
                f
            };
            if w.drop_to == self.qpn && w.drop_nth.is_some() {
                let i = w.seen_to_drop;
                w.seen_to_drop += 1;
                if Some(i) == w.drop_nth {
                    w.drop_nth = None;
                    continue;
                }
            }
            if w.dup_to == Some(self.qpn) {
                w.dup_to = None;
                let copy = Frame {
                    data: f.data.clone(),
                    ..f
                };
                w.queues.entry(self.qpn).or_default().push_front(copy);
            }
            return Some(f);
        }
    }
}

struct Side {
    d: Driver<FakeNic>,
    ep: Endpoint,
    conn: rondo_proto::ConnectionHandle,
}

fn driver(qpn: u32, wire: &Rc<RefCell<Wire>>, nic_clock: Option<NicClock>) -> Driver<FakeNic> {
    let send = SendConfig {
        depth: 128,
        ..SendConfig::default()
    };
    let sq = SendQueue::new(send).unwrap();
    let rx = RxRing::new(256, 32).unwrap();
    let mut nic = FakeNic::new(qpn, wire, 128, 256);
    nic.clock = nic_clock;
    Driver::new(nic, MTU, sq, rx).unwrap()
}

fn route_to(d: &mut Driver<FakeNic>, flow: u32, peer_qpn: u32) {
    let info = EndpointInfo {
        qpn: peer_qpn,
        qkey: 0x5247_0001,
        gid: [1; 16],
        lid: 0,
        mtu: MTU as u32,
        paths: PATHS,
    };
    let plan = address_plan(&AddressConfig::default(), &info, PATHS).unwrap();
    let ah_base = d.nic.ahs.len();
    d.nic.ahs.extend(&plan);
    d.routes.insert(
        flow,
        Route {
            qpn: peer_qpn,
            qkey: info.qkey,
            ah_base,
            ahs: plan.len(),
        },
    );
}

fn pair(wire: &Rc<RefCell<Wire>>, clock: &Clock) -> (Side, Side) {
    pair_with(wire, clock, &nic_flow(MTU), None)
}

/// Two sides with flow configuration `cfg`, their NICs stamping completions on
/// `nic_clock` when it is set.
fn pair_with(
    wire: &Rc<RefCell<Wire>>,
    clock: &Clock,
    cfg: &rondo_proto::FlowConfig,
    nic_clock: Option<NicClock>,
) -> (Side, Side) {
    let mut a = driver(0x11, wire, nic_clock);
    let mut b = driver(0x22, wire, nic_clock);
    route_to(&mut a, 1, 0x22);
    route_to(&mut b, 2, 0x11);
    let mut ea = Endpoint::new(SharedBuffer::new(BufferConfig::default()).unwrap());
    let mut eb = Endpoint::new(SharedBuffer::new(BufferConfig::default()).unwrap());
    let ha = ea.connect(clock.now(), 1, 2, cfg).unwrap();
    let hb = eb.connect(clock.now(), 2, 1, cfg).unwrap();
    (
        Side {
            d: a,
            ep: ea,
            conn: ha,
        },
        Side {
            d: b,
            ep: eb,
            conn: hb,
        },
    )
}

fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = rondo_proto::rng::Rng::new(seed);
    (0..len).map(|_| rng.next_u64() as u8).collect()
}

/// Drives both sides until `a` saw `n` send completions; returns `b`'s messages.
fn transfer(a: &mut Side, b: &mut Side, clock: &Clock, n: usize) -> Vec<(u64, Vec<u8>)> {
    transfer_with(a, b, clock, n, |_| {})
}

/// [`transfer`], calling `between` on the wire after every round.
fn transfer_with(
    a: &mut Side,
    b: &mut Side,
    clock: &Clock,
    n: usize,
    mut between: impl FnMut(&mut Wire),
) -> Vec<(u64, Vec<u8>)> {
    let (mut done, mut got) = (0, Vec::new());
    for _ in 0..200_000 {
        a.d.poll(&mut a.ep, clock, Duration::ZERO).unwrap();
        b.d.poll(&mut b.ep, clock, Duration::ZERO).unwrap();
        between(&mut a.d.nic.wire.borrow_mut());
        while let Some(e) = a.ep.poll_event(a.conn) {
            done += usize::from(matches!(e, Event::SendComplete { .. }));
        }
        while let Some(e) = b.ep.poll_event(b.conn) {
            if let Event::Received { msg_id, data } = e {
                got.push((msg_id, data));
            }
        }
        if done == n {
            break;
        }
    }
    assert_eq!(done, n, "transfer did not finish: {:?}", a.d.stats());
    got
}

#[test]
fn messages_cross_the_driver_byte_exact_on_every_path() {
    let wire = Rc::new(RefCell::new(Wire::default()));
    let clock = Clock::new();
    let (mut a, mut b) = pair(&wire, &clock);
    let msgs: Vec<Vec<u8>> = (0..5)
        .map(|i| pattern(100 + i * 50_001, i as u64))
        .collect();
    for (i, m) in msgs.iter().enumerate() {
        a.ep.post(a.conn, clock.now(), i as u64, m.clone()).unwrap();
    }
    let got = transfer(&mut a, &mut b, &clock, msgs.len());
    assert_eq!(got.len(), msgs.len());
    for (i, (id, data)) in got.iter().enumerate() {
        assert_eq!(*id, i as u64);
        assert!(data == &msgs[i], "message {i} differs");
    }
    let (sa, sb) = (a.d.stats(), b.d.stats());
    // One doorbell per chain of at most 16 WRs.
    assert!(a.d.nic.chains.iter().all(|&n| (1..=16).contains(&n)));
    assert_eq!(sa.doorbells, a.d.nic.chains.len() as u64);
    assert!(
        sa.doorbells < sa.datagrams_out,
        "chains of more than one WR: {sa:?}"
    );
    // One WR in 64 signaled; the queue never overflows and drains on completions.
    assert_eq!(sa.signaled, sa.datagrams_out / 64);
    assert!(a.d.outstanding_sends() < 64);
    // ACKs (56 bytes) go inline; data (MTU) does not.
    assert!(sb.inline > 0 && sb.inline <= sb.datagrams_out, "{sb:?}");
    assert_eq!(sa.inline, 0, "no datagram of a is 60 bytes or less: {sa:?}");
    // Data left on P distinct RoCEv2 source ports, in the data traffic class.
    let data_ports: HashSet<u16> =
        a.d.nic
            .sent
            .iter()
            .filter(|(_, tc)| *tc == 26 << 2)
            .map(|(p, _)| *p)
            .collect();
    assert_eq!(data_ports, (0..PATHS).map(|p| 0xC000 + p).collect());
    assert!(
        b.d.nic.sent.iter().all(|(_, tc)| *tc == 46 << 2),
        "b sends only ACKs"
    );
    // Every received datagram had its GRH stripped and its slot reposted.
    assert_eq!(sb.datagrams_in, b.ep.stats().datagrams);
    assert_eq!(b.ep.stats().malformed, 0);
    assert!(sb.recv_batches > 1);
    // Without NIC timestamps: poll times, no NIC-level RTT samples; no in-place
    // flow: every receive is a whole-datagram ring slot.
    assert_eq!(
        (sa.rx_timestamps, sb.rx_timestamps, sa.nic_rtt_samples),
        (0, 0, 0)
    );
    assert_eq!((sb.in_place_posted, sb.registrations), (0, 0));
    assert!(
        b.d.posted_receives() >= 256 - 32,
        "{}",
        b.d.posted_receives()
    );
    assert_eq!(b.d.nic.dropped_no_recv, 0);
}

#[test]
fn ce_marks_in_the_grh_reach_the_engine() {
    let wire = Rc::new(RefCell::new(Wire {
        mark_ce: true,
        ..Wire::default()
    }));
    let clock = Clock::new();
    let (mut a, mut b) = pair(&wire, &clock);
    a.ep.post(a.conn, clock.now(), 0, pattern(20_000, 9))
        .unwrap();
    let got = transfer(&mut a, &mut b, &clock, 1);
    assert_eq!(got.len(), 1);
    let sb = b.d.stats();
    assert_eq!(
        sb.ce_marks, sb.datagrams_in,
        "every datagram was marked: {sb:?}"
    );
}

#[test]
fn bad_completions_are_counted_and_their_slots_reposted() {
    let wire = Rc::new(RefCell::new(Wire::default()));
    let clock = Clock::new();
    let (_, mut b) = pair(&wire, &clock);
    let slot = b.d.nic.posted.front().unwrap().slot;
    b.d.nic.posted.pop_front();
    b.d.nic.injected.extend([
        // Shorter than a GRH.
        Completion {
            wr_id: slot as u64,
            ok: true,
            byte_len: 12,
            grh: true,
            ts: None,
        },
        // A slot that is not posted (the same one again).
        Completion {
            wr_id: slot as u64,
            ok: true,
            byte_len: 100,
            grh: true,
            ts: None,
        },
        // An error completion of an unknown WR.
        Completion {
            wr_id: 9_999,
            ok: false,
            byte_len: 0,
            grh: false,
            ts: None,
        },
    ]);
    b.d.poll(&mut b.ep, &clock, Duration::ZERO).unwrap();
    let s = b.d.stats();
    assert_eq!(s.malformed, 3, "{s:?}");
    assert_eq!(s.datagrams_in, 0);
    assert_eq!(b.ep.stats().datagrams, 0, "nothing reached the engine");
}

#[test]
fn transmits_without_a_route_are_unroutable() {
    let wire = Rc::new(RefCell::new(Wire::default()));
    let clock = Clock::new();
    let mut d = driver(0x33, &wire, None);
    let mut ep = Endpoint::new(SharedBuffer::new(BufferConfig::default()).unwrap());
    let h = ep.connect(clock.now(), 7, 8, &nic_flow(MTU)).unwrap();
    ep.post(h, clock.now(), 0, vec![1; 5000]).unwrap();
    d.poll(&mut ep, &clock, Duration::ZERO).unwrap();
    let s = d.stats();
    assert!(s.unroutable > 0, "{s:?}");
    assert_eq!((s.datagrams_out, s.doorbells), (0, 0));
    assert!(wire.borrow().queues.values().all(VecDeque::is_empty));
}

#[path = "driver_place_tests.rs"]
mod place;
