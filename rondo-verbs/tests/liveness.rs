//! Liveness of a requester whose peer goes silent (issue "Hostile peers, dead
//! paths and stuck requests", row 8): the local ACK timeout and retry count of
//! `QpInitAttr`, as ibverbs' `timeout` and `retry_cnt`, end a request that gets
//! no answer with `RetryExcErr` and put the QP in the error state.

mod common;
use common::*;
use rondo_proto::wire::{Body, CommonRepr, DataRepr, FeedbackRepr, Flags, Repr};
use rondo_proto::Psn;
use rondo_verbs::*;

const LEN: usize = 256 << 10;

/// A READ whose request reached the responder, then 100% loss: the responder's
/// answer never comes and the requester's engine has nothing left to resend. It
/// used to wait forever; now it fails within `timeout x (retry_cnt + 1)`.
#[test]
fn a_read_answered_into_a_black_hole_ends_in_retry_exceeded() {
    let attr = QpInitAttr {
        timeout: 10, // 4.194 ms
        retry_cnt: 3,
        ..QpInitAttr::default()
    };
    let limit = attr.ack_timeout().unwrap().saturating_mul(4);
    let p = pair_with(FabricConfig::default(), 5, attr, 2 * LEN);
    let remote = RemoteAddr {
        addr: p.b.mr.addr(),
        rkey: p.b.mr.rkey(),
    };
    let local = vec![Sge::new(&p.a.mr, 0, LEN as u32)];
    p.a.qp.post_send(&SendWr::read(1, local, remote)).unwrap();
    // Until the request is at B and B is answering.
    let start = p.fabric.now();
    while p.b.qp.stats().data_packets_received == 0 {
        p.fabric.run_until(p.fabric.now() + Duration::from_ns(200));
        assert!(p.fabric.now() < start + Duration::from_ms(1));
    }
    p.fabric.set_loss(1.0);
    let lost_at = p.fabric.now();
    let wc = p.a.cq.poll_n(1, 1_000_000).unwrap();
    assert_eq!(wc.len(), 1, "the READ never completed");
    assert_eq!((wc[0].wr_id, wc[0].status), (1, WcStatus::RetryExcErr));
    assert_eq!(p.a.qp.state(), QpState::Error);
    let waited = p.fabric.now().saturating_since(lost_at);
    eprintln!("RetryExcErr {waited:?} after the loss began (limit {limit:?})");
    assert!(waited <= limit, "failed after {waited:?} (limit {limit:?})");
    assert_eq!(p.a.qp.stats().ack_timeouts, 4);
}

/// `timeout` and `retry_cnt` given after the QP was created (as ibverbs programs do
/// in `ibv_modify_qp` to RTS, which rondo-ibv passes on): the created QP would wait
/// 8 x 67 ms, the modified one fails within 4 x 4.19 ms.
#[test]
fn timeout_and_retry_cnt_set_after_creation_apply() {
    let p = pair_with(FabricConfig::default(), 5, QpInitAttr::default(), 2 * LEN);
    assert_eq!(p.a.qp.retry(), (14, 7));
    for (t, r, name) in [(Some(32), None, "timeout"), (None, Some(8), "retry_cnt")] {
        match p.a.qp.set_retry(t, r) {
            Err(VerbsError::InvalidAttr { name: n, .. }) => assert_eq!(n, name),
            other => panic!("{t:?} {r:?}: {other:?}"),
        }
    }
    assert_eq!(
        p.a.qp.retry(),
        (14, 7),
        "a refused change changed something"
    );
    p.a.qp.set_retry(Some(10), Some(3)).unwrap();
    assert_eq!(p.a.qp.retry(), (10, 3));
    let limit = Duration::from_ns(4096 << 10).saturating_mul(4);
    let remote = RemoteAddr {
        addr: p.b.mr.addr(),
        rkey: p.b.mr.rkey(),
    };
    let local = vec![Sge::new(&p.a.mr, 0, LEN as u32)];
    p.a.qp.post_send(&SendWr::read(1, local, remote)).unwrap();
    let start = p.fabric.now();
    while p.b.qp.stats().data_packets_received == 0 {
        p.fabric.run_until(p.fabric.now() + Duration::from_ns(200));
        assert!(p.fabric.now() < start + Duration::from_ms(1));
    }
    p.fabric.set_loss(1.0);
    let lost_at = p.fabric.now();
    let wc = p.a.cq.poll_n(1, 1_000_000).unwrap();
    assert_eq!(wc.len(), 1, "the READ never completed");
    assert_eq!((wc[0].wr_id, wc[0].status), (1, WcStatus::RetryExcErr));
    let waited = p.fabric.now().saturating_since(lost_at);
    assert!(waited <= limit, "failed after {waited:?} (limit {limit:?})");
    assert_eq!(p.a.qp.stats().ack_timeouts, 4);
}

/// Row 12: duplicates and refused ACKs are visible in `QpStats`: a DATA of B's
/// replayed to A counts as a duplicate, an ACK of A's replayed back to A (it
/// acknowledges a PSN A never sent on that flow) as a rejected ACK.
#[test]
fn replays_and_rejected_acks_are_counted() {
    let p = pair(1 << 16);
    let remote = RemoteAddr {
        addr: p.b.mr.addr(),
        rkey: p.b.mr.rkey(),
    };
    p.a.mr.write(0, &[5; 64]).unwrap();
    let wr = SendWr::write(1, vec![Sge::new(&p.a.mr, 0, 64)], remote);
    p.a.qp.post_send(&wr).unwrap();
    assert_eq!(one(&p.a.cq).status, WcStatus::Success);
    let before = p.b.qp.stats();
    assert_eq!((before.duplicates_received, before.rejected_acks), (0, 0));
    // A forged DATA for B: its first PSN again (a replay), then an ACK whose
    // acknowledged PSN lies far beyond anything B sent.
    let dup = forged_data_for(&p, 0);
    p.fabric.inject(&p.b.ctx, 0, &dup).unwrap();
    let ack = forged_ack_for(&p, 1 << 20);
    p.fabric.inject(&p.b.ctx, 0, &ack).unwrap();
    let after = p.b.qp.stats();
    assert_eq!(after.duplicates_received, 1, "{after:?}");
    assert_eq!(after.rejected_acks, 1, "{after:?}");
}

/// A datagram for B's flow with `body`, under the pair's connection token.
fn to_b(p: &Pair, psn: u32, body: Body, payload: &[u8]) -> Vec<u8> {
    let token = p.a.qp.endpoint().token ^ p.b.qp.endpoint().token;
    let repr = Repr {
        common: CommonRepr {
            flow: p.b.qp.qp_num(),
            psn: Psn(psn),
            path: 0,
            flags: Flags::empty(),
            timestamp_ns: 1,
        },
        body,
    };
    repr.to_datagram(payload, Some(token)).unwrap()
}

fn forged_data_for(p: &Pair, psn: u32) -> Vec<u8> {
    let payload = [0u8; 64];
    let body = Body::Data(DataRepr {
        msg_id: 0,
        msg_len: 64,
        offset: 0,
        payload_len: 64,
    });
    to_b(p, psn, body, &payload)
}

fn forged_ack_for(p: &Pair, acked: u32) -> Vec<u8> {
    let body = Body::Ack(FeedbackRepr {
        acked_psn: Psn(acked),
        cum_ack: Psn(0),
        highest_psn: Psn(acked),
        acked_path: 0,
        of_probe: false,
        duplicate: false,
        echo_timestamp_ns: 1,
        rx_timestamp_ns: 1,
    });
    to_b(p, 0, body, &[])
}

/// Capacity probes of a QP whose MTU is larger than 1500 bytes cross the
/// fabric: its probe class held two 1500-byte probes, so every probe of a
/// 9000-byte QP was dropped, and a path taken out of rotation never came back.
#[test]
fn capacity_probes_of_a_jumbo_mtu_qp_are_answered() {
    let attr = QpInitAttr::default();
    assert!(
        attr.mtu > 3000,
        "the case needs probes larger than 3000 bytes"
    );
    let p = pair_with(FabricConfig::default(), 3, attr, 4 * LEN);
    let remote = RemoteAddr {
        addr: p.b.mr.addr(),
        rkey: p.b.mr.rkey(),
    };
    let src = vec![Sge::new(&p.a.mr, 0, 4 * LEN as u32)];
    p.a.qp.post_send(&SendWr::write(1, src, remote)).unwrap();
    let wc = one(&p.a.cq);
    assert_eq!(wc.status, WcStatus::Success);
    let s = p.a.qp.stats();
    assert!(s.probes_sent > 0, "no capacity probe was sent: {s:?}");
    assert!(s.probes_acked > 0, "no capacity probe was answered: {s:?}");
}

/// A request longer on the wire than the local ACK timeout allows: a 1 MiB WRITE
/// and a 1 MiB READ over 200 Mbit/s take about 42 ms, the timer gives up after
/// 4 x 4.2 ms without an answer. An RC requester's timer restarts at every ACK
/// of the transport, so such a request completes on a slow link; so must ours,
/// where the engine's acknowledgements and the response's packets are that
/// progress (it failed with `RetryExcErr`, as did `rondo perf` 4 MiB WRITEs
/// through a 200 Mbit/s bottleneck).
#[test]
fn a_request_slower_than_the_ack_timeout_completes_while_it_progresses() {
    const BIG: usize = 1 << 20;
    let attr = QpInitAttr {
        timeout: 10, // 4.194 ms
        retry_cnt: 3,
        ..QpInitAttr::default()
    };
    let limit = attr.ack_timeout().unwrap().saturating_mul(4);
    let p = pair_with(FabricConfig::uniform(4, 0.05, 1.0), 5, attr, 2 * BIG);
    let data = pattern(3, BIG);
    p.a.mr.write(0, &data).unwrap();
    let remote = RemoteAddr {
        addr: p.b.mr.addr(),
        rkey: p.b.mr.rkey(),
    };
    let start = p.fabric.now();
    let local = vec![Sge::new(&p.a.mr, 0, BIG as u32)];
    p.a.qp.post_send(&SendWr::write(1, local, remote)).unwrap();
    let wc = one(&p.a.cq);
    assert_eq!((wc.wr_id, wc.status), (1, WcStatus::Success));
    let took = p.fabric.now().saturating_since(start);
    assert!(
        took > limit,
        "the WRITE took {took:?}: not longer than the timer allows, so it tests nothing"
    );
    let mut got = vec![0; BIG];
    p.b.mr.read(0, &mut got).unwrap();
    assert!(got == data, "the WRITE's bytes differ");
    // And back: the READ's response is the long part.
    let local = vec![Sge::new(&p.a.mr, BIG, BIG as u32)];
    p.a.qp.post_send(&SendWr::read(2, local, remote)).unwrap();
    let wc = one(&p.a.cq);
    assert_eq!((wc.wr_id, wc.status), (2, WcStatus::Success));
    p.a.mr.read(BIG, &mut got).unwrap();
    assert!(got == data, "the READ's bytes differ");
    assert_eq!(p.a.qp.state(), QpState::Rts);
}

/// A loss burst shorter than `timeout` x (`retry_cnt` + 1): 70 ms of 100% loss
/// against 6 x 16.8 ms. An RC NIC resends after each `timeout` and gets through
/// once the burst ends; the engine's RTO doubled past the timer instead
/// (resends at 16, 32, 64 and 128 ms into the burst), so the QP failed at 101 ms
/// though its next resend would have got through. Capped at the QP's timeout,
/// the RTO resends at 66 and 83 ms, and the WRITE completes.
#[test]
fn a_loss_burst_shorter_than_the_qps_timeouts_is_survived() {
    let attr = QpInitAttr {
        timeout: 12, // 16.8 ms
        retry_cnt: 5,
        ..QpInitAttr::default()
    };
    let p = pair_with(FabricConfig::uniform(4, 25.0, 1000.0), 5, attr, 2 * LEN);
    let remote = RemoteAddr {
        addr: p.b.mr.addr(),
        rkey: p.b.mr.rkey(),
    };
    // A first WRITE gives the engine its RTT samples.
    let local = vec![Sge::new(&p.a.mr, 0, 4096)];
    p.a.qp
        .post_send(&SendWr::write(1, local.clone(), remote))
        .unwrap();
    assert_eq!(one(&p.a.cq).status, WcStatus::Success);
    p.fabric.set_loss(1.0);
    let start = p.fabric.now();
    p.a.qp.post_send(&SendWr::write(2, local, remote)).unwrap();
    p.fabric.run_until(start + Duration::from_ms(70));
    p.fabric.set_loss(0.0);
    let wc = one(&p.a.cq);
    assert_eq!((wc.wr_id, wc.status), (2, WcStatus::Success));
    let took = p.fabric.now().saturating_since(start);
    eprintln!("completed {took:?} after the burst began");
    assert!(took > Duration::from_ms(70), "completed during the burst");
}
