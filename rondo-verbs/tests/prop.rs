//! Property: any sequence of SEND, WRITE and READ with random scatter/gather lists,
//! over a lossy, reordering fabric with any seed, leaves both regions exactly as a
//! sequential model of the operations says.

mod common;
use common::*;
use proptest::prelude::*;
use rondo_verbs::*;

const REGION: usize = 96 << 10;

#[derive(Clone, Debug)]
enum Op {
    /// A writes `len` bytes at `src` (gathered in `pieces`) into B at `dst`.
    Write {
        src: usize,
        dst: usize,
        len: usize,
        pieces: usize,
        imm: bool,
    },
    /// A reads `len` bytes of B at `src` into A at `dst` (scattered in `pieces`).
    Read {
        src: usize,
        dst: usize,
        len: usize,
        pieces: usize,
    },
    /// A sends `len` bytes at `src` into a receive of B at `dst`.
    Send {
        src: usize,
        dst: usize,
        len: usize,
        pieces: usize,
    },
    /// The application changes A's region locally.
    Fill { at: usize, len: usize, seed: u64 },
}

fn op() -> impl Strategy<Value = Op> {
    let range = (0..REGION / 2, 0..REGION / 2, 0..REGION / 2, 1..5usize);
    prop_oneof![
        (range.clone(), any::<bool>()).prop_map(|((src, dst, len, pieces), imm)| Op::Write {
            src,
            dst,
            len,
            pieces,
            imm
        }),
        range.clone().prop_map(|(src, dst, len, pieces)| Op::Read {
            src,
            dst,
            len,
            pieces
        }),
        range.prop_map(|(src, dst, len, pieces)| Op::Send {
            src,
            dst,
            len,
            pieces
        }),
        (0..REGION / 2, 1..REGION / 2, any::<u64>()).prop_map(|(at, len, seed)| Op::Fill {
            at,
            len,
            seed
        }),
    ]
}

/// `len` bytes at `off` of `mr` as `pieces` entries of nearly equal size.
fn sges(mr: &MemoryRegion, off: usize, len: usize, pieces: usize) -> Vec<Sge> {
    let mut v = Vec::new();
    let mut at = 0;
    for i in 0..pieces {
        let n = (len - at) / (pieces - i);
        v.push(Sge::new(mr, off + at, n as u32));
        at += n;
    }
    v
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 12,
        // The same cases every run (CI must not depend on luck); change it to explore.
        rng_seed: proptest::test_runner::RngSeed::Fixed(0x0052_6f6e_646f),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]
    #[test]
    fn regions_match_a_sequential_model(seed in 1u64..1000, ops in proptest::collection::vec(op(), 1..16)) {
        let fabric = FabricConfig::uniform(4, 25.0, 2.0).with_loss(0.01).with_jitter(Duration::from_us(3));
        let p = pair_with(fabric, seed, QpInitAttr { mtu: 1500, ..QpInitAttr::default() }, REGION);
        let (mut ma, mut mb) = (vec![0u8; REGION], vec![0u8; REGION]);
        for (i, op) in ops.iter().enumerate() {
            let id = i as u64;
            match *op {
                Op::Fill { at, len, seed } => {
                    let d = pattern(seed, len);
                    p.a.mr.write(at, &d).unwrap();
                    ma[at..at + len].copy_from_slice(&d);
                    continue;
                }
                Op::Write { src, dst, len, pieces, imm } => {
                    let remote = RemoteAddr { addr: p.b.mr.addr() + dst as u64, rkey: p.b.mr.rkey() };
                    let mut wr = SendWr::write(id, sges(&p.a.mr, src, len, pieces), remote);
                    if imm {
                        p.b.qp.post_recv(&RecvWr { wr_id: id, sg_list: vec![] }).unwrap();
                        wr = wr.with_imm(i as u32);
                    }
                    p.a.qp.post_send(&wr).unwrap();
                    let d = ma[src..src + len].to_vec();
                    mb[dst..dst + len].copy_from_slice(&d);
                    if imm {
                        let r = one(&p.b.cq);
                        prop_assert_eq!((r.wr_id, r.imm, r.byte_len), (id, Some(i as u32), len as u64));
                    }
                }
                Op::Read { src, dst, len, pieces } => {
                    let remote = RemoteAddr { addr: p.b.mr.addr() + src as u64, rkey: p.b.mr.rkey() };
                    p.a.qp.post_send(&SendWr::read(id, sges(&p.a.mr, dst, len, pieces), remote)).unwrap();
                    let d = mb[src..src + len].to_vec();
                    ma[dst..dst + len].copy_from_slice(&d);
                }
                Op::Send { src, dst, len, pieces } => {
                    p.b.qp.post_recv(&RecvWr { wr_id: id, sg_list: sges(&p.b.mr, dst, len, pieces) }).unwrap();
                    p.a.qp.post_send(&SendWr::send(id, sges(&p.a.mr, src, len, 1))).unwrap();
                    let d = ma[src..src + len].to_vec();
                    mb[dst..dst + len].copy_from_slice(&d);
                    let r = one(&p.b.cq);
                    prop_assert_eq!((r.wr_id, r.status, r.byte_len), (id, WcStatus::Success, len as u64));
                }
            }
            let wc = one(&p.a.cq);
            prop_assert_eq!((wc.wr_id, wc.status), (id, WcStatus::Success));
        }
        prop_assert!(p.a.mr.with_slice(|s| s == &ma[..]), "A's region differs from the model");
        prop_assert!(p.b.mr.with_slice(|s| s == &mb[..]), "B's region differs from the model");
    }
}
