//! Liveness of a requester whose peer goes silent (issue "Hostile peers, dead
//! paths and stuck requests", row 8): the local ACK timeout and retry count of
//! `QpInitAttr`, as ibverbs' `timeout` and `retry_cnt`, end a request that gets
//! no answer with `RetryExcErr` and put the QP in the error state.

mod common;
use common::*;
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
