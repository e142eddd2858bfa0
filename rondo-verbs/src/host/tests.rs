//! The verbs host driven by hand: datagrams moved in batches, as a UDP datapath
//! moves them, so that the responder's ACKs coalesce.

use super::{Keys, VerbsHost};
use crate::cq::CqShared;
use crate::mr::MrShared;
use crate::types::{AccessFlags, QpInitAttr, RemoteAddr, SendWr, Sge, WcStatus, WorkCompletion};
use rondo_proto::{BufferConfig, Endpoint, FlowConfig, Host, Instant, SharedBuffer};
use std::sync::Arc;

struct Side {
    host: VerbsHost,
    qpn: u32,
    cq: Arc<CqShared>,
    mr: Arc<MrShared>,
}

fn side(seed: u64) -> Side {
    let cfg = BufferConfig {
        slot_size: 4096,
        ..Default::default()
    };
    let buffer = SharedBuffer::new(cfg).unwrap();
    let mut host = VerbsHost::new(Endpoint::new(buffer), Keys::seeded(seed), 1 << 34);
    let pd = host.alloc_pd();
    let cq = Arc::new(CqShared::new(256));
    let qpn = host.create_qp(pd, cq.clone(), cq.clone(), QpInitAttr::default());
    let mr = host.register(MrShared::new(1 << 16, pd, AccessFlags::ALL).unwrap());
    Side { host, qpn, cq, mr }
}

/// Collects every datagram `from` has now.
fn collect(now: Instant, from: &mut Side, out: &mut Vec<(u16, Vec<u8>)>) {
    let mut buf = vec![0u8; 9000];
    while let Some(t) = from.host.poll_transmit(now, &mut buf) {
        out.push((t.path, buf[..t.len].to_vec()));
    }
}

/// Hands `to` a batch of datagrams, all of them before it transmits.
fn deliver(now: Instant, batch: &mut Vec<(u16, Vec<u8>)>, to: &mut Side) {
    for (path, d) in batch.drain(..) {
        to.host.handle_datagram(now, path, &d, false);
    }
}

#[test]
fn acks_coalesce_when_datagrams_arrive_in_batches() {
    let (mut a, mut b) = (side(1), side(2));
    let cfg = FlowConfig {
        mtu: 4096,
        token: Some(9),
        ..FlowConfig::default()
    };
    a.host.connect(Instant::ZERO, a.qpn, b.qpn, &cfg).unwrap();
    b.host.connect(Instant::ZERO, b.qpn, a.qpn, &cfg).unwrap();
    let remote = RemoteAddr {
        addr: b.mr.addr,
        rkey: b.mr.rkey,
    };
    let sge = Sge {
        addr: a.mr.addr,
        len: 64,
        lkey: a.mr.lkey,
    };
    for i in 0..32 {
        let wr = SendWr::write(i, vec![sge], remote);
        a.host.post_send(Instant::ZERO, a.qpn, &wr).unwrap();
    }
    let mut done = Vec::new();
    let mut now = Instant::ZERO;
    let (mut ab, mut ba) = (Vec::new(), Vec::new());
    for step in 0..100_000 {
        now += rondo_proto::Duration::from_ns(500);
        a.host.handle_timeout(now);
        b.host.handle_timeout(now);
        collect(now, &mut a, &mut ab);
        // B reads its socket every 10 us: what arrived meanwhile is one batch.
        if step % 20 == 0 {
            deliver(now, &mut ab, &mut b);
        }
        collect(now, &mut b, &mut ba);
        deliver(now, &mut ba, &mut a);
        let mut wc = [WorkCompletion::default(); 32];
        let n = a.cq.drain(&mut wc);
        done.extend_from_slice(&wc[..n]);
        if done.len() == 32 {
            break;
        }
    }
    assert_eq!(done.len(), 32);
    for (i, wc) in done.iter().enumerate() {
        assert_eq!((wc.wr_id, wc.status), (i as u64, WcStatus::Success));
    }
    let acks = b.host.qp_stats(b.qpn).acks_sent;
    assert!((1..=16).contains(&acks), "{acks} ACKs for 32 WRITEs");
    assert_eq!(a.host.qp_stats(a.qpn).bad_messages, 0);
}

/// Issue 15, row 5: a verbs ACK forged from the responder's real one (its
/// request id moved on, sent as the next engine message from B) while A's
/// requests never reach B: it must not complete them as Success.
#[test]
fn a_forged_verbs_ack_completes_nothing_the_responder_never_got() {
    use rondo_proto::wire::{self, Body};
    let (mut a, mut b) = (side(3), side(4));
    let token = Some(11);
    let cfg = FlowConfig {
        mtu: 4096,
        token,
        ..FlowConfig::default()
    };
    a.host.connect(Instant::ZERO, a.qpn, b.qpn, &cfg).unwrap();
    b.host.connect(Instant::ZERO, b.qpn, a.qpn, &cfg).unwrap();
    let remote = RemoteAddr {
        addr: b.mr.addr,
        rkey: b.mr.rkey,
    };
    let sge = Sge {
        addr: a.mr.addr,
        len: 64,
        lkey: a.mr.lkey,
    };
    let mut now = Instant::ZERO;
    let (mut ab, mut ba) = (Vec::new(), Vec::new());
    let mut wc = [WorkCompletion::default(); 8];
    let mut step =
        |now: &mut Instant, a: &mut Side, b: &mut Side, cut: bool, ba_log: &mut Vec<_>| {
            *now += rondo_proto::Duration::from_ns(500);
            a.host.handle_timeout(*now);
            b.host.handle_timeout(*now);
            collect(*now, a, &mut ab);
            if cut {
                ab.clear();
            } else {
                deliver(*now, &mut ab, b);
            }
            collect(*now, b, &mut ba);
            ba_log.extend(ba.iter().cloned());
            deliver(*now, &mut ba, a);
        };
    // Request 0 goes through; B's answer is the DATA that carries its ACK.
    let wr = SendWr::write(0, vec![sge], remote);
    a.host.post_send(now, a.qpn, &wr).unwrap();
    let mut from_b = Vec::new();
    for _ in 0..1000 {
        step(&mut now, &mut a, &mut b, false, &mut from_b);
        if a.cq.drain(&mut wc) == 1 {
            break;
        }
    }
    assert_eq!((wc[0].wr_id, wc[0].status), (0, WcStatus::Success));
    let (path, real) = from_b
        .iter()
        .rev()
        .find(|(_, d)| matches!(wire::parse(d).unwrap().0.body, Body::Data(_)))
        .cloned()
        .expect("B answered with a DATA");
    // Requests 1 and 2 never reach B.
    for i in 1..3 {
        let wr = SendWr::write(i, vec![sge], remote);
        a.host.post_send(now, a.qpn, &wr).unwrap();
    }
    for _ in 0..4 {
        step(&mut now, &mut a, &mut b, true, &mut from_b);
    }
    let (mut forged, payload) = wire::parse(&real).unwrap();
    let mut payload = payload.to_vec();
    payload[8..16].copy_from_slice(&2u64.to_be_bytes()); // the request id
    forged.common.psn = forged.common.psn.next();
    let Body::Data(mut d) = forged.body else {
        unreachable!()
    };
    d.msg_id += 1;
    forged.body = Body::Data(d);
    let datagram = forged.to_datagram(&payload, token).unwrap();
    a.host.handle_datagram(now, path, &datagram, false);
    for _ in 0..200 {
        step(&mut now, &mut a, &mut b, true, &mut from_b);
    }
    let n = a.cq.drain(&mut wc);
    assert!(
        wc[..n].iter().all(|w| w.status != WcStatus::Success),
        "a forged ACK completed a request B never received: {:?}",
        &wc[..n]
    );
}
