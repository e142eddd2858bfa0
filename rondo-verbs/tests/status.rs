//! Every completion status, with ibverbs' meaning, and what happens to the QPs.

mod common;
use common::*;
use rondo_verbs::*;

fn remote(mr: &MemoryRegion, offset: u64) -> RemoteAddr {
    RemoteAddr {
        addr: mr.addr() + offset,
        rkey: mr.rkey(),
    }
}

fn write(wr_id: u64, mr: &MemoryRegion, len: u32, to: RemoteAddr) -> SendWr {
    SendWr::write(wr_id, vec![Sge::new(mr, 0, len)], to)
}

/// Posts a request that fails, then a follower that must be flushed, and returns
/// both completions.
fn fail_then_flush(p: &Pair, bad: SendWr) -> (WorkCompletion, WorkCompletion) {
    p.a.qp.post_send(&bad).unwrap();
    p.a.qp
        .post_send(&write(99, &p.a.mr, 8, remote(&p.b.mr, 0)))
        .unwrap();
    let wcs = p.a.cq.poll_n(2, 50_000).unwrap();
    assert_eq!(wcs.len(), 2, "{wcs:?}");
    assert_eq!(p.a.qp.state(), QpState::Error);
    (wcs[0], wcs[1])
}

#[test]
fn loc_prot_err_for_a_bad_lkey_or_an_entry_outside_the_region() {
    for case in 0..3 {
        let p = pair(4096);
        let sge = match case {
            0 => Sge {
                lkey: p.a.mr.lkey() ^ 1,
                ..Sge::new(&p.a.mr, 0, 8)
            },
            1 => Sge::new(&p.a.mr, 4090, 8),
            _ => Sge::new(&p.b.mr, 0, 8), // the peer's region is not local
        };
        let (wc, flushed) = fail_then_flush(&p, SendWr::send(1, vec![sge]));
        assert_eq!(
            (wc.wr_id, wc.status, wc.opcode),
            (1, WcStatus::LocProtErr, WcOpcode::Send),
            "case {case}"
        );
        assert_eq!((flushed.wr_id, flushed.status), (99, WcStatus::WrFlushErr));
    }
}

#[test]
fn loc_prot_err_for_a_read_into_a_region_without_local_write() {
    let p = pair(4096);
    let ro = p.a.pd.register(64, AccessFlags::NONE).unwrap();
    p.a.qp
        .post_send(&SendWr::read(
            1,
            vec![Sge::new(&ro, 0, 8)],
            remote(&p.b.mr, 0),
        ))
        .unwrap();
    let wc = one(&p.a.cq);
    assert_eq!(
        (wc.status, wc.opcode),
        (WcStatus::LocProtErr, WcOpcode::RdmaRead)
    );
}

#[test]
fn loc_prot_err_for_a_region_of_another_pd() {
    let p = pair(4096);
    let other =
        p.a.ctx
            .alloc_pd()
            .unwrap()
            .register(64, AccessFlags::ALL)
            .unwrap();
    p.a.qp
        .post_send(&SendWr::send(1, vec![Sge::new(&other, 0, 8)]))
        .unwrap();
    assert_eq!(one(&p.a.cq).status, WcStatus::LocProtErr);
}

#[test]
fn loc_len_err_at_the_receiver_rem_inv_req_at_the_sender() {
    let p = pair(4096);
    p.b.qp
        .post_recv(&RecvWr {
            wr_id: 5,
            sg_list: vec![Sge::new(&p.b.mr, 0, 10)],
        })
        .unwrap();
    p.b.qp
        .post_recv(&RecvWr {
            wr_id: 6,
            sg_list: vec![Sge::new(&p.b.mr, 0, 10)],
        })
        .unwrap();
    let (wc, flushed) = fail_then_flush(&p, SendWr::send(1, vec![Sge::new(&p.a.mr, 0, 11)]));
    assert_eq!((wc.wr_id, wc.status), (1, WcStatus::RemInvReq));
    assert_eq!(flushed.status, WcStatus::WrFlushErr);
    let wcs = p.b.cq.poll_n(2, 1000).unwrap();
    assert_eq!(wcs[0].wr_id, 5);
    assert_eq!(wcs[0].status, WcStatus::LocLenErr);
    assert_eq!(
        wcs[1].wr_id, 6,
        "the responder QP went to error and flushed its receives"
    );
    assert_eq!(wcs[1].status, WcStatus::WrFlushErr);
    assert_eq!(p.b.qp.state(), QpState::Error);
    // Nothing of the refused message was placed.
    let mut got = [1u8; 10];
    p.b.mr.read(0, &mut got).unwrap();
    assert_eq!(got, [0; 10]);
}

#[test]
fn loc_len_err_for_a_message_over_the_limit() {
    // MAX_MESSAGE_BYTES + 4096 bytes, gathered from one 4 KiB region.
    let n = (MAX_MESSAGE_BYTES / 4096) as usize + 1;
    let attr = QpInitAttr {
        max_sge: n,
        ..QpInitAttr::default()
    };
    let p = pair_with(FabricConfig::default(), 1, attr, 4096);
    let wr = SendWr::send(1, vec![Sge::new(&p.a.mr, 0, 4096); n]);
    p.a.qp.post_send(&wr).unwrap();
    assert_eq!(one(&p.a.cq).status, WcStatus::LocLenErr);
}

#[test]
fn rem_access_err_outside_the_region_without_the_flag_or_with_a_bad_rkey() {
    for case in 0..5 {
        let p = pair(4096);
        let ro = p.b.pd.register(4096, AccessFlags::LOCAL_WRITE).unwrap();
        let bad = match case {
            0 => write(1, &p.a.mr, 16, remote(&p.b.mr, 4090)),
            1 => write(
                1,
                &p.a.mr,
                16,
                RemoteAddr {
                    addr: p.b.mr.addr(),
                    rkey: p.b.mr.rkey() ^ 1,
                },
            ),
            2 => write(1, &p.a.mr, 16, remote(&ro, 0)),
            3 => SendWr::read(1, vec![Sge::new(&p.a.mr, 0, 16)], remote(&ro, 0)),
            _ => SendWr::read(1, vec![Sge::new(&p.a.mr, 0, 16)], remote(&p.b.mr, 4095)),
        };
        p.b.mr.write(4000, &[0xee; 96]).unwrap();
        let (wc, flushed) = fail_then_flush(&p, bad);
        assert_eq!(
            (wc.wr_id, wc.status),
            (1, WcStatus::RemAccessErr),
            "case {case}"
        );
        assert_eq!(flushed.status, WcStatus::WrFlushErr);
        assert!(p.b.qp.stats().requests_refused >= 1);
        assert_eq!(p.b.qp.stats().bytes_placed_direct, 0, "case {case}");
        // Never applied.
        let mut got = [0u8; 96];
        p.b.mr.read(4000, &mut got).unwrap();
        assert_eq!(got, [0xee; 96], "case {case}");
        let mut zero = [1u8; 16];
        ro.read(0, &mut zero).unwrap();
        assert_eq!(zero, [0; 16]);
    }
}

#[test]
fn rem_op_err_when_the_receive_buffer_is_bad() {
    let p = pair(4096);
    p.b.qp
        .post_recv(&RecvWr {
            wr_id: 5,
            sg_list: vec![Sge {
                lkey: 12345,
                ..Sge::new(&p.b.mr, 0, 64)
            }],
        })
        .unwrap();
    p.a.qp
        .post_send(&SendWr::send(1, vec![Sge::new(&p.a.mr, 0, 8)]))
        .unwrap();
    assert_eq!(one(&p.a.cq).status, WcStatus::RemOpErr);
    assert_eq!(one(&p.b.cq).status, WcStatus::LocProtErr);
}

#[test]
fn a_send_refused_for_a_bad_later_entry_writes_nothing() {
    // The first entry is good, the second names no region: the whole receive is
    // refused before a byte lands (the verdict comes with the verbs header).
    let p = pair(1 << 16);
    p.b.mr.write(0, &[0xee; 3000]).unwrap();
    p.b.qp
        .post_recv(&RecvWr {
            wr_id: 5,
            sg_list: vec![
                Sge::new(&p.b.mr, 0, 2000),
                Sge {
                    lkey: 12345,
                    ..Sge::new(&p.b.mr, 2000, 2000)
                },
            ],
        })
        .unwrap();
    p.a.mr.write(0, &[7; 3000]).unwrap();
    p.a.qp
        .post_send(&SendWr::send(1, vec![Sge::new(&p.a.mr, 0, 3000)]))
        .unwrap();
    assert_eq!(one(&p.a.cq).status, WcStatus::RemOpErr);
    assert_eq!(one(&p.b.cq).status, WcStatus::LocProtErr);
    let mut got = [0u8; 3000];
    p.b.mr.read(0, &mut got).unwrap();
    assert_eq!(got, [0xee; 3000]);
    assert_eq!(p.b.qp.stats().bytes_placed_direct, 0);
}

#[test]
fn rnr_retry_exceeded_when_no_receive_is_ever_posted() {
    let attr = QpInitAttr {
        rnr_retry: 3,
        ..QpInitAttr::default()
    };
    let p = pair_with(FabricConfig::default(), 5, attr, 4096);
    let (wc, flushed) = fail_then_flush(&p, SendWr::send(1, vec![Sge::new(&p.a.mr, 0, 8)]));
    assert_eq!((wc.wr_id, wc.status), (1, WcStatus::RnrRetryExcErr));
    assert_eq!(flushed.status, WcStatus::WrFlushErr);
    // The first try and three retries were refused.
    assert_eq!(p.b.qp.stats().rnr_naks_sent, 4);
}

#[test]
fn rnr_retries_until_a_receive_is_posted_and_keeps_order() {
    let p = pair(4096);
    p.a.mr.write(0, b"first-second").unwrap();
    p.a.qp
        .post_send(&SendWr::send(1, vec![Sge::new(&p.a.mr, 0, 5)]))
        .unwrap();
    p.a.qp
        .post_send(&write(2, &p.a.mr, 12, remote(&p.b.mr, 100)))
        .unwrap();
    p.a.qp
        .post_send(&SendWr::send(3, vec![Sge::new(&p.a.mr, 6, 6)]))
        .unwrap();
    // Let several RNR rounds pass with no receive posted.
    let t = p.fabric.now();
    p.fabric.run_until(t + Duration::from_us(200));
    let naks = p.b.qp.stats().rnr_naks_sent;
    assert!(naks >= 3, "{naks}");
    // The WRITE behind the refused SEND was not applied ahead of it.
    let mut got = [0u8; 12];
    p.b.mr.read(100, &mut got).unwrap();
    assert_eq!(got, [0; 12]);
    p.b.qp
        .post_recv(&RecvWr {
            wr_id: 10,
            sg_list: vec![Sge::new(&p.b.mr, 0, 16)],
        })
        .unwrap();
    p.b.qp
        .post_recv(&RecvWr {
            wr_id: 11,
            sg_list: vec![Sge::new(&p.b.mr, 50, 16)],
        })
        .unwrap();
    let wcs = p.a.cq.poll_n(3, 50_000).unwrap();
    assert_eq!(
        wcs.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        [
            (1, WcStatus::Success),
            (2, WcStatus::Success),
            (3, WcStatus::Success)
        ]
    );
    let wcs = p.b.cq.poll_n(2, 1000).unwrap();
    assert_eq!(wcs.iter().map(|w| w.byte_len).collect::<Vec<_>>(), [5, 6]);
    p.b.mr.read(100, &mut got).unwrap();
    assert_eq!(&got, b"first-second");
    assert!(p.a.qp.stats().rnr_resends >= 3);
}

#[test]
fn retry_exceeded_when_the_peer_is_gone() {
    let p = pair(4096);
    p.b.qp
        .post_recv(&RecvWr {
            wr_id: 5,
            sg_list: vec![],
        })
        .unwrap();
    p.fabric.set_loss(1.0);
    p.a.qp
        .post_send(&write(1, &p.a.mr, 100, remote(&p.b.mr, 0)))
        .unwrap();
    p.a.qp
        .post_send(&write(2, &p.a.mr, 100, remote(&p.b.mr, 0)).unsignaled())
        .unwrap();
    let wcs = p.a.cq.poll_n(2, 1_000_000).unwrap();
    assert_eq!(
        wcs.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        [(1, WcStatus::RetryExcErr), (2, WcStatus::WrFlushErr)]
    );
    assert_eq!(p.a.qp.state(), QpState::Error);
    // Receives posted on a QP in error complete flushed at once.
    p.a.qp
        .post_recv(&RecvWr {
            wr_id: 8,
            sg_list: vec![],
        })
        .unwrap();
    let wc = one(&p.a.cq);
    assert_eq!(
        (wc.wr_id, wc.status, wc.opcode),
        (8, WcStatus::WrFlushErr, WcOpcode::Recv)
    );
    p.a.qp.post_send(&SendWr::send(9, vec![])).unwrap();
    assert_eq!(one(&p.a.cq).status, WcStatus::WrFlushErr);
}

#[test]
fn rem_op_err_when_the_peer_qp_was_destroyed() {
    let mut p = pair(4096);
    let b_ctx = p.b.ctx.clone();
    // Replace B's QP by a fresh, unconnected one: the old one is destroyed.
    let attr = QpInitAttr::default();
    p.b.qp = b_ctx.create_qp(&p.b.pd, &p.b.cq, &p.b.cq, attr).unwrap();
    p.a.qp
        .post_send(&write(1, &p.a.mr, 8, remote(&p.b.mr, 0)))
        .unwrap();
    let wc = one(&p.a.cq);
    assert_eq!((wc.wr_id, wc.status), (1, WcStatus::RemOpErr));
    assert_eq!(b_ctx.stats().for_destroyed_qp, 1);
    let mut got = [1u8; 8];
    p.b.mr.read(0, &mut got).unwrap();
    assert_eq!(got, [0; 8], "nothing written through a destroyed QP");
}
