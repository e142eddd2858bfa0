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
