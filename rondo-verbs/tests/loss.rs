//! Byte-exact transfer under 1% and 10% loss and reordering, and determinism of
//! the `mem` backend (same seed, same run).

mod common;
use common::*;
use rondo_verbs::*;

const SLOT: usize = 256 << 10;

/// Runs a mixed workload of SEND, WRITE_WITH_IMM and READ over a lossy, jittery
/// fabric, verifies every byte, and returns the counters of both QPs.
fn lossy_run(seed: u64) -> (QpStats, QpStats, Instant) {
    lossy_run_with(seed, QpInitAttr::default())
}

/// [`lossy_run`] with QPs made from `attr`.
fn lossy_run_with(seed: u64, attr: QpInitAttr) -> (QpStats, QpStats, Instant) {
    lossy_run_at(seed, 0.01, attr)
}

/// [`lossy_run_with`] at a loss probability of `loss` on every path.
fn lossy_run_at(seed: u64, loss: f64, attr: QpInitAttr) -> (QpStats, QpStats, Instant) {
    let fabric = FabricConfig::uniform(4, 25.0, 2.0)
        .with_loss(loss)
        .with_jitter(Duration::from_us(3));
    lossy_run_on(seed, fabric, attr)
}

/// The workload of [`lossy_run`] over `fabric`.
fn lossy_run_on(seed: u64, fabric: FabricConfig, attr: QpInitAttr) -> (QpStats, QpStats, Instant) {
    let p = pair_with(fabric, seed, attr, 16 * SLOT);
    let sizes: Vec<usize> = (0..24u64)
        .map(|i| {
            1 + (pattern(seed + i, 4)
                .iter()
                .map(|&b| b as usize)
                .product::<usize>()
                % SLOT)
        })
        .collect();
    for (i, &len) in sizes.iter().enumerate() {
        let slot = i % 8;
        let data = pattern(seed * 1000 + i as u64, len);
        p.a.mr.write(slot * SLOT, &data).unwrap();
        let src = vec![Sge::new(&p.a.mr, slot * SLOT, len as u32)];
        let dst = RemoteAddr {
            addr: p.b.mr.addr() + (8 + slot) as u64 * SLOT as u64,
            rkey: p.b.mr.rkey(),
        };
        match i % 3 {
            0 => {
                p.b.qp
                    .post_recv(&RecvWr {
                        wr_id: i as u64,
                        sg_list: vec![Sge::new(&p.b.mr, slot * SLOT, SLOT as u32)],
                    })
                    .unwrap();
                p.a.qp.post_send(&SendWr::send(i as u64, src)).unwrap();
            }
            1 => {
                p.b.qp
                    .post_recv(&RecvWr {
                        wr_id: i as u64,
                        sg_list: vec![],
                    })
                    .unwrap();
                p.a.qp
                    .post_send(&SendWr::write(i as u64, src, dst).with_imm(i as u32))
                    .unwrap();
            }
            _ => {
                // READ it back from B after B wrote it locally.
                p.b.mr.write((8 + slot) * SLOT, &data).unwrap();
                let local = vec![Sge::new(&p.a.mr, (8 + slot) * SLOT, len as u32)];
                p.a.qp
                    .post_send(&SendWr::read(i as u64, local, dst))
                    .unwrap();
            }
        }
        let wc = one(&p.a.cq);
        assert_eq!((wc.wr_id, wc.status), (i as u64, WcStatus::Success));
        let mut got = vec![0; len];
        match i % 3 {
            0 => {
                let r = one(&p.b.cq);
                assert_eq!((r.wr_id, r.byte_len), (i as u64, len as u64));
                p.b.mr.read(slot * SLOT, &mut got).unwrap();
            }
            1 => {
                let r = one(&p.b.cq);
                assert_eq!((r.wr_id, r.imm), (i as u64, Some(i as u32)));
                p.b.mr.read((8 + slot) * SLOT, &mut got).unwrap();
            }
            _ => p.a.mr.read((8 + slot) * SLOT, &mut got).unwrap(),
        }
        assert!(got == data, "message {i} of {len} bytes differs");
    }
    (p.a.qp.stats(), p.b.qp.stats(), p.fabric.now())
}

#[test]
fn byte_exact_under_one_percent_loss_and_reordering() {
    let (a, b, _) = lossy_run(11);
    assert!(
        a.retx_packets + b.retx_packets > 0,
        "loss was injected: {a:?} {b:?}"
    );
    assert!(a.ood_max + b.ood_max > 0, "jitter reorders: {a:?} {b:?}");
}

/// The UET baseline under the verbs API: the same workload, byte-exact.
#[test]
fn uet_is_byte_exact_under_loss_through_the_verbs_api() {
    let mut attr = QpInitAttr::default();
    attr.flow.transport = "uet".parse().unwrap();
    let (a, b, t) = lossy_run_with(13, attr);
    assert!(a.retx_packets + b.retx_packets > 0, "{a:?} {b:?}");
    // Another transport ran: Rondo's run of the same seed differs.
    assert_ne!((a, b, t), lossy_run(13));
}

/// Every transport finishes the workload byte-exact under 10% loss. UET did
/// not (seed 4): a packet acknowledged by a cumulative ACK whose own ACK was
/// lost left its path's inflight only at a timer, which did not tell path
/// selection that the window had room again, so with nothing else in flight the
/// flow waited for ever, until the QP's local ACK timeouts failed it 537 ms later.
#[test]
fn every_transport_finishes_under_ten_percent_loss() {
    for transport in rondo_proto::Transport::all() {
        for seed in 1..=4 {
            let mut attr = QpInitAttr::default();
            attr.flow.transport = transport;
            let (a, b, _) = lossy_run_at(seed, 0.1, attr);
            assert!(
                a.retx_packets + b.retx_packets > 0,
                "{} seed {seed}: {a:?} {b:?}",
                transport.name()
            );
        }
    }
}

/// Every transport finishes the workload byte-exact on fabrics that are hard in
/// other ways, each with 5% loss: duplicates and 20 us of jitter; one path 38 us
/// longer and another at 2 Gbit/s; 512-byte datagrams; 16 paths; one path.
#[test]
fn every_transport_finishes_on_hard_fabrics() {
    let lossy = |mut f: FabricConfig| {
        for s in &mut f.paths {
            s.loss = 0.05;
        }
        f
    };
    let mut dup = FabricConfig::uniform(4, 25.0, 2.0).with_jitter(Duration::from_us(20));
    for s in &mut dup.paths {
        s.duplicate = 0.05;
    }
    let mut unequal = FabricConfig::uniform(4, 25.0, 2.0);
    unequal.paths[0].delay = Duration::from_us(40);
    unequal.paths[3].gbps = 2.0;
    let cases = [
        ("duplicates", lossy(dup), 4, 4096),
        ("unequal paths", lossy(unequal), 4, 4096),
        ("512-byte datagrams", lossy(FabricConfig::default()), 4, 512),
        (
            "16 paths",
            lossy(FabricConfig::uniform(16, 10.0, 2.0)),
            16,
            4096,
        ),
        (
            "one path",
            lossy(FabricConfig::uniform(1, 100.0, 2.0)),
            1,
            4096,
        ),
    ];
    for (name, fabric, paths, mtu) in cases {
        for transport in rondo_proto::Transport::all() {
            let mut attr = QpInitAttr {
                paths,
                mtu,
                ..QpInitAttr::default()
            };
            attr.flow.transport = transport;
            let (a, b, _) = lossy_run_on(2, fabric.clone(), attr);
            assert!(
                a.retx_packets + b.retx_packets > 0,
                "{name}, {}: {a:?} {b:?}",
                transport.name()
            );
        }
    }
}

/// 200 one-packet WRITEs, one at a time, over `fabric`: the requester's counters.
fn one_packet_at_a_time(seed: u64, fabric: FabricConfig) -> QpStats {
    let p = pair_with(fabric, seed, QpInitAttr::default(), 1 << 20);
    for i in 0..200 {
        let src = vec![Sge::new(&p.a.mr, 0, 4096)];
        let dst = RemoteAddr {
            addr: p.b.mr.addr() + 8192,
            rkey: p.b.mr.rkey(),
        };
        p.a.qp.post_send(&SendWr::write(i, src, dst)).unwrap();
        assert_eq!(one(&p.a.cq).status, WcStatus::Success, "WRITE {i}");
    }
    p.a.qp.stats()
}

/// A flow that sends one packet at a time loses a packet that is alone on its
/// path now and then; that alone does not take the path out of rotation (it did
/// at every such loss: 61 times in 2,000 WRITEs at 1% loss, seeds 1-10). A
/// black-holed path still goes, after its second loss in a row.
#[test]
fn a_lone_lost_packet_does_not_take_its_path_down() {
    for seed in 1..=3 {
        let s = one_packet_at_a_time(seed, FabricConfig::uniform(4, 25.0, 2.0).with_loss(0.01));
        assert!(s.retx_packets > 0, "seed {seed}: {s:?}");
        assert_eq!(s.path_downs, 0, "seed {seed}: {s:?}");
        let mut holed = FabricConfig::uniform(4, 25.0, 2.0);
        holed.paths[1].loss = 1.0;
        let s = one_packet_at_a_time(seed, holed);
        assert!(
            s.path_downs > 0,
            "seed {seed}: path 1 stayed in rotation: {s:?}"
        );
    }
}

#[test]
fn same_seed_same_run() {
    let x = lossy_run(12);
    let y = lossy_run(12);
    assert_eq!(x, y);
    let z = lossy_run(13);
    assert_ne!(x.2, z.2, "another seed gives another run");
}
