//! Every operation over the in-process fabric, with scatter/gather lists,
//! signaled and unsignaled requests, ordering, sizes, and queue limits.

mod common;
use common::*;
use rondo_verbs::*;

fn remote(mr: &MemoryRegion, offset: u64) -> RemoteAddr {
    RemoteAddr {
        addr: mr.addr() + offset,
        rkey: mr.rkey(),
    }
}

#[test]
fn send_and_recv() {
    let p = pair(4096);
    let data = pattern(1, 1000);
    p.a.mr.write(0, &data).unwrap();
    p.b.qp
        .post_recv(&RecvWr {
            wr_id: 9,
            sg_list: vec![Sge::new(&p.b.mr, 100, 2000)],
        })
        .unwrap();
    p.a.qp
        .post_send(&SendWr::send(5, vec![Sge::new(&p.a.mr, 0, 1000)]))
        .unwrap();
    let wc = one(&p.a.cq);
    assert_eq!(
        (wc.wr_id, wc.status, wc.opcode, wc.byte_len, wc.qp_num),
        (5, WcStatus::Success, WcOpcode::Send, 1000, p.a.qp.qp_num())
    );
    let wc = one(&p.b.cq);
    assert_eq!(
        (wc.wr_id, wc.status, wc.opcode, wc.byte_len, wc.imm),
        (9, WcStatus::Success, WcOpcode::Recv, 1000, None)
    );
    assert_eq!(wc.qp_num, p.b.qp.qp_num());
    let mut got = vec![0; 1000];
    p.b.mr.read(100, &mut got).unwrap();
    assert_eq!(got, data);
}

#[test]
fn send_with_imm_carries_the_immediate() {
    let p = pair(4096);
    p.a.mr.write(0, b"hello").unwrap();
    p.b.qp
        .post_recv(&RecvWr {
            wr_id: 1,
            sg_list: vec![Sge::new(&p.b.mr, 0, 64)],
        })
        .unwrap();
    p.a.qp
        .post_send(&SendWr::send(2, vec![Sge::new(&p.a.mr, 0, 5)]).with_imm(0xabcd_0123))
        .unwrap();
    assert_eq!(one(&p.a.cq).status, WcStatus::Success);
    let wc = one(&p.b.cq);
    assert_eq!(
        (wc.opcode, wc.imm, wc.byte_len),
        (WcOpcode::Recv, Some(0xabcd_0123), 5)
    );
    let mut got = [0; 5];
    p.b.mr.read(0, &mut got).unwrap();
    assert_eq!(&got, b"hello");
}

#[test]
fn zero_length_send_consumes_a_receive() {
    let p = pair(4096);
    p.b.qp
        .post_recv(&RecvWr {
            wr_id: 4,
            sg_list: vec![],
        })
        .unwrap();
    p.a.qp
        .post_send(&SendWr::send(3, vec![]).with_imm(7))
        .unwrap();
    assert_eq!(one(&p.a.cq).status, WcStatus::Success);
    let wc = one(&p.b.cq);
    assert_eq!(
        (wc.wr_id, wc.byte_len, wc.imm, wc.status),
        (4, 0, Some(7), WcStatus::Success)
    );
}

#[test]
fn rdma_write_places_bytes_without_a_receive() {
    let p = pair(1 << 16);
    let data = pattern(2, 30_000);
    p.a.mr.write(10, &data).unwrap();
    p.a.qp
        .post_send(&SendWr::write(
            11,
            vec![Sge::new(&p.a.mr, 10, 30_000)],
            remote(&p.b.mr, 5_000),
        ))
        .unwrap();
    let wc = one(&p.a.cq);
    assert_eq!(
        (wc.wr_id, wc.status, wc.opcode, wc.byte_len),
        (11, WcStatus::Success, WcOpcode::RdmaWrite, 30_000)
    );
    let mut got = vec![0; 30_000];
    p.b.mr.read(5_000, &mut got).unwrap();
    assert_eq!(got, data);
    // Placed from the datagrams straight into the region, every byte.
    assert_eq!(p.b.qp.stats().bytes_placed_direct, 30_000);
    // No receive completion for a plain WRITE.
    assert_eq!(p.b.cq.poll(&mut [WorkCompletion::default(); 4]).unwrap(), 0);
}

#[test]
fn rdma_write_with_imm_consumes_a_receive() {
    let p = pair(1 << 16);
    let data = pattern(3, 4000);
    p.a.mr.write(0, &data).unwrap();
    p.b.qp
        .post_recv(&RecvWr {
            wr_id: 77,
            sg_list: vec![],
        })
        .unwrap();
    p.a.qp
        .post_send(
            &SendWr::write(12, vec![Sge::new(&p.a.mr, 0, 4000)], remote(&p.b.mr, 100)).with_imm(99),
        )
        .unwrap();
    let wc = one(&p.a.cq);
    assert_eq!(
        (wc.status, wc.opcode),
        (WcStatus::Success, WcOpcode::RdmaWrite)
    );
    let wc = one(&p.b.cq);
    assert_eq!(
        (wc.wr_id, wc.opcode, wc.imm, wc.byte_len),
        (77, WcOpcode::RecvRdmaWithImm, Some(99), 4000)
    );
    let mut got = vec![0; 4000];
    p.b.mr.read(100, &mut got).unwrap();
    assert_eq!(got, data);
}

#[test]
fn rdma_read_fetches_remote_bytes() {
    let p = pair(1 << 16);
    let data = pattern(4, 20_000);
    p.b.mr.write(300, &data).unwrap();
    p.a.qp
        .post_send(&SendWr::read(
            13,
            vec![Sge::new(&p.a.mr, 0, 20_000)],
            remote(&p.b.mr, 300),
        ))
        .unwrap();
    let wc = one(&p.a.cq);
    assert_eq!(
        (wc.wr_id, wc.status, wc.opcode, wc.byte_len),
        (13, WcStatus::Success, WcOpcode::RdmaRead, 20_000)
    );
    let mut got = vec![0; 20_000];
    p.a.mr.read(0, &mut got).unwrap();
    assert_eq!(got, data);
}

#[test]
fn scatter_gather_lists_gather_and_scatter_in_order() {
    let p = pair(1 << 16);
    let mr2 = p.a.pd.register(4096, AccessFlags::LOCAL_WRITE).unwrap();
    p.a.mr.write(0, b"abc").unwrap();
    mr2.write(1000, b"defgh").unwrap();
    p.a.mr.write(50, b"ij").unwrap();
    let sges = vec![
        Sge::new(&p.a.mr, 0, 3),
        Sge::new(&mr2, 1000, 5),
        Sge::new(&p.a.mr, 50, 2),
    ];
    // Receive scattered over three pieces of 4, 4 and 8 bytes.
    let rmr2 = p.b.pd.register(64, AccessFlags::LOCAL_WRITE).unwrap();
    p.b.qp
        .post_recv(&RecvWr {
            wr_id: 1,
            sg_list: vec![
                Sge::new(&p.b.mr, 0, 4),
                Sge::new(&rmr2, 10, 4),
                Sge::new(&p.b.mr, 20, 8),
            ],
        })
        .unwrap();
    p.a.qp.post_send(&SendWr::send(1, sges.clone())).unwrap();
    assert_eq!(one(&p.a.cq).byte_len, 10);
    assert_eq!(one(&p.b.cq).byte_len, 10);
    let mut x = [0; 4];
    p.b.mr.read(0, &mut x).unwrap();
    assert_eq!(&x, b"abcd");
    rmr2.read(10, &mut x).unwrap();
    assert_eq!(&x, b"efgh");
    let mut y = [0; 2];
    p.b.mr.read(20, &mut y).unwrap();
    assert_eq!(&y, b"ij");
    // The same gather list as a WRITE, and a READ scattering back.
    p.a.qp
        .post_send(&SendWr::write(2, sges, remote(&p.b.mr, 1000)))
        .unwrap();
    assert_eq!(one(&p.a.cq).status, WcStatus::Success);
    let back = p.a.pd.register(64, AccessFlags::LOCAL_WRITE).unwrap();
    p.a.qp
        .post_send(&SendWr::read(
            3,
            vec![Sge::new(&back, 0, 6), Sge::new(&back, 32, 4)],
            remote(&p.b.mr, 1000),
        ))
        .unwrap();
    assert_eq!(one(&p.a.cq).byte_len, 10);
    let mut z = [0; 6];
    back.read(0, &mut z).unwrap();
    assert_eq!(&z, b"abcdef");
    back.read(32, &mut x).unwrap();
    assert_eq!(&x, b"ghij");
}

#[test]
fn unsignaled_requests_complete_silently_and_in_order() {
    let p = pair(1 << 16);
    p.a.mr.write(0, &pattern(5, 8192)).unwrap();
    for i in 0..8u64 {
        let wr = SendWr::write(i, vec![Sge::new(&p.a.mr, 0, 8192)], remote(&p.b.mr, 0));
        let wr = if i == 7 { wr } else { wr.unsignaled() };
        p.a.qp.post_send(&wr).unwrap();
    }
    let wcs = p.a.cq.poll_n(8, 50_000).unwrap();
    assert_eq!(wcs.len(), 1, "only the signaled request completes");
    assert_eq!(wcs[0].wr_id, 7);
}

#[test]
fn receive_completions_follow_posting_order() {
    let p = pair(1 << 20);
    for i in 0..50u64 {
        p.b.qp
            .post_recv(&RecvWr {
                wr_id: 1000 + i,
                sg_list: vec![Sge::new(&p.b.mr, i as usize * 8192, 8192)],
            })
            .unwrap();
    }
    let mut sent = Vec::new();
    let mut posted = 0u64;
    let mut done = 0;
    while done < 50 {
        while posted < 50 && posted - done as u64 <= 16 {
            let len = 1 + (posted as usize * 997) % 8192;
            let data = pattern(100 + posted, len);
            p.a.mr.write(posted as usize * 8192, &data).unwrap();
            sent.push(data);
            p.a.qp
                .post_send(&SendWr::send(
                    posted,
                    vec![Sge::new(&p.a.mr, posted as usize * 8192, len as u32)],
                ))
                .unwrap();
            posted += 1;
        }
        let wc = one(&p.a.cq);
        assert_eq!(wc.wr_id, done as u64, "send completions in posting order");
        done += 1;
    }
    let wcs = p.b.cq.poll_n(50, 50_000).unwrap();
    assert_eq!(wcs.len(), 50);
    for (i, wc) in wcs.iter().enumerate() {
        assert_eq!(wc.wr_id, 1000 + i as u64);
        assert_eq!(wc.byte_len, sent[i].len() as u64);
        let mut got = vec![0; sent[i].len()];
        p.b.mr.read(i * 8192, &mut got).unwrap();
        assert_eq!(got, sent[i], "message {i}");
    }
}

#[test]
fn full_queues_refuse_posts_and_drop_nothing() {
    let attr = QpInitAttr {
        max_send_wr: 4,
        max_recv_wr: 2,
        ..QpInitAttr::default()
    };
    let p = pair_with(FabricConfig::default(), 3, attr, 4096);
    for i in 0..4 {
        p.a.qp
            .post_send(&SendWr::write(
                i,
                vec![Sge::new(&p.a.mr, 0, 100)],
                remote(&p.b.mr, 0),
            ))
            .unwrap();
    }
    let e =
        p.a.qp
            .post_send(&SendWr::write(
                4,
                vec![Sge::new(&p.a.mr, 0, 100)],
                remote(&p.b.mr, 0),
            ))
            .unwrap_err();
    assert_eq!(e, VerbsError::SendQueueFull { depth: 4 });
    assert!(e.to_string().contains("poll the send CQ"));
    let wcs = p.a.cq.poll_n(4, 50_000).unwrap();
    assert_eq!(
        wcs.iter().map(|w| w.wr_id).collect::<Vec<_>>(),
        [0, 1, 2, 3]
    );
    // Room again.
    p.a.qp
        .post_send(&SendWr::write(
            5,
            vec![Sge::new(&p.a.mr, 0, 100)],
            remote(&p.b.mr, 0),
        ))
        .unwrap();
    assert_eq!(one(&p.a.cq).wr_id, 5);
    let r = RecvWr {
        wr_id: 0,
        sg_list: vec![],
    };
    p.b.qp.post_recv(&r).unwrap();
    p.b.qp.post_recv(&r).unwrap();
    assert_eq!(
        p.b.qp.post_recv(&r).unwrap_err(),
        VerbsError::RecvQueueFull { depth: 2 }
    );
}

#[test]
fn malformed_requests_are_refused_at_post() {
    let p = pair(4096);
    let bad = [
        SendWr {
            remote: None,
            ..SendWr::write(0, vec![], RemoteAddr { addr: 0, rkey: 0 })
        },
        SendWr {
            remote: Some(RemoteAddr { addr: 0, rkey: 0 }),
            ..SendWr::send(0, vec![])
        },
        SendWr {
            imm: None,
            ..SendWr::send(0, vec![]).with_imm(1)
        },
        SendWr {
            imm: Some(1),
            ..SendWr::send(0, vec![])
        },
        SendWr::send(0, vec![Sge::new(&p.a.mr, 0, 1); 9]),
    ];
    for wr in &bad {
        assert!(
            matches!(p.a.qp.post_send(wr), Err(VerbsError::InvalidWr(_))),
            "{wr:?}"
        );
    }
    // Before connect: sends are refused, receives accepted.
    let fabric = MemFabric::new(1, FabricConfig::default()).unwrap();
    let s = side(&fabric, 1, &QpInitAttr::default(), 4096);
    assert_eq!(s.qp.state(), QpState::Init);
    assert!(matches!(
        s.qp.post_send(&SendWr::send(0, vec![])),
        Err(VerbsError::InvalidState {
            state: QpState::Init,
            ..
        })
    ));
    s.qp.post_recv(&RecvWr {
        wr_id: 0,
        sg_list: vec![],
    })
    .unwrap();
}

#[test]
fn single_message_sizes_around_the_mtu() {
    let p = pair(2 << 20);
    let mtu_payload = p.a.qp.packet_payload();
    assert!(mtu_payload > 1000, "{mtu_payload}");
    for (i, len) in [1, mtu_payload - 1, mtu_payload, mtu_payload + 1, 1 << 20]
        .into_iter()
        .enumerate()
    {
        let data = pattern(i as u64 + 50, len);
        p.a.mr.write(0, &data).unwrap();
        // SEND, then WRITE, then READ back into A's second half.
        p.b.qp
            .post_recv(&RecvWr {
                wr_id: i as u64,
                sg_list: vec![Sge::new(&p.b.mr, 0, len as u32)],
            })
            .unwrap();
        p.a.qp
            .post_send(&SendWr::send(1, vec![Sge::new(&p.a.mr, 0, len as u32)]))
            .unwrap();
        assert_eq!(one(&p.a.cq).status, WcStatus::Success);
        assert_eq!(one(&p.b.cq).byte_len, len as u64);
        let mut got = vec![0; len];
        p.b.mr.read(0, &mut got).unwrap();
        assert_eq!(got, data, "SEND of {len} bytes");
        p.a.qp
            .post_send(&SendWr::write(
                2,
                vec![Sge::new(&p.a.mr, 0, len as u32)],
                remote(&p.b.mr, 1 << 20),
            ))
            .unwrap();
        assert_eq!(one(&p.a.cq).status, WcStatus::Success);
        p.b.mr.read(1 << 20, &mut got).unwrap();
        assert_eq!(got, data, "WRITE of {len} bytes");
        p.a.qp
            .post_send(&SendWr::read(
                3,
                vec![Sge::new(&p.a.mr, 1 << 20, len as u32)],
                remote(&p.b.mr, 1 << 20),
            ))
            .unwrap();
        assert_eq!(one(&p.a.cq).byte_len, len as u64);
        p.a.mr.read(1 << 20, &mut got).unwrap();
        assert_eq!(got, data, "READ of {len} bytes");
    }
}

#[test]
fn objects_keep_their_parents_alive() {
    let fabric = MemFabric::new(1, FabricConfig::default()).unwrap();
    let (qp, cq, mr, peer) = {
        let a = side(&fabric, 1, &QpInitAttr::default(), 4096);
        let b = side(&fabric, 2, &QpInitAttr::default(), 4096);
        a.qp.connect(&b.qp.endpoint()).unwrap();
        b.qp.connect(&a.qp.endpoint()).unwrap();
        (a.qp, a.cq, a.mr, b)
    };
    // The context, PD of `qp` were dropped by name; the QP still works.
    mr.write(0, b"alive").unwrap();
    qp.post_send(&SendWr::write(
        1,
        vec![Sge::new(&mr, 0, 5)],
        remote(&peer.mr, 0),
    ))
    .unwrap();
    assert_eq!(one(&cq).status, WcStatus::Success);
    let mut got = [0; 5];
    peer.mr.read(0, &mut got).unwrap();
    assert_eq!(&got, b"alive");
    assert_eq!(qp.context().device_name(), "mem");
}

#[test]
fn handles_can_move_between_threads() {
    fn send_sync<T: Send + Sync + Clone>() {}
    send_sync::<Context>();
    send_sync::<ProtectionDomain>();
    send_sync::<MemoryRegion>();
    send_sync::<CompletionQueue>();
    send_sync::<QueuePair>();
    send_sync::<MemFabric>();
    // And they work from another thread.
    let p = pair(4096);
    let (qp, mr, cq) = (p.a.qp.clone(), p.a.mr.clone(), p.a.cq.clone());
    let to = remote(&p.b.mr, 0);
    let status = std::thread::spawn(move || {
        qp.post_send(&SendWr::write(1, vec![Sge::new(&mr, 0, 8)], to))
            .unwrap();
        one(&cq).status
    })
    .join()
    .unwrap();
    assert_eq!(status, WcStatus::Success);
}

/// The RC models keep ConnectX-7's 16 outstanding READs (paper App. A): the
/// 17th READ, and the WRITE posted after it, wait in the send queue until a
/// response completes an earlier READ; every request then completes in order.
/// Rondo's own QPs have no such limit.
#[test]
fn rc_models_hold_reads_beyond_sixteen_outstanding() {
    for (transport, first_sent) in [("rc-sr", 16), ("rc-gbn", 16), ("rondo", 21)] {
        let mut attr = QpInitAttr::default();
        attr.flow.transport = transport.parse().unwrap();
        let p = pair_with(FabricConfig::default(), 7, attr, 1 << 16);
        p.b.mr.write(0, &pattern(5, 20 * 64)).unwrap();
        for i in 0..20u64 {
            let at = i as usize * 64;
            p.a.qp
                .post_send(&SendWr::read(
                    i,
                    vec![Sge::new(&p.a.mr, at, 64)],
                    remote(&p.b.mr, at as u64),
                ))
                .unwrap();
        }
        p.a.mr.write(4096, b"after").unwrap();
        p.a.qp
            .post_send(&SendWr::write(
                20,
                vec![Sge::new(&p.a.mr, 4096, 5)],
                remote(&p.b.mr, 4096),
            ))
            .unwrap();
        assert_eq!(p.a.qp.stats().requests_sent, first_sent, "{transport}");
        let wcs = p.a.cq.poll_n(21, 1_000_000).unwrap();
        let ids: Vec<u64> = wcs.iter().map(|wc| wc.wr_id).collect();
        assert_eq!(ids, (0..21).collect::<Vec<_>>(), "{transport}");
        assert!(wcs.iter().all(|wc| wc.status == WcStatus::Success));
        assert_eq!(p.a.qp.stats().requests_sent, 21, "{transport}");
        let mut got = vec![0; 20 * 64];
        p.a.mr.read(0, &mut got).unwrap();
        assert_eq!(got, pattern(5, 20 * 64), "{transport}");
    }
}
