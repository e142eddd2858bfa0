//! A connected pair of QPs on two contexts of one in-process fabric.
#![allow(dead_code)]

use rondo_verbs::*;

pub struct Side {
    pub ctx: Context,
    pub pd: ProtectionDomain,
    pub cq: CompletionQueue,
    pub qp: QueuePair,
    pub mr: MemoryRegion,
}

pub struct Pair {
    pub fabric: MemFabric,
    pub a: Side,
    pub b: Side,
}

pub fn side(fabric: &MemFabric, seed: u64, attr: &QpInitAttr, mr_len: usize) -> Side {
    let ctx = Context::open_mem(
        fabric,
        ContextAttr {
            seed,
            ..ContextAttr::default()
        },
    )
    .unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(1024).unwrap();
    let qp = ctx.create_qp(&pd, &cq, &cq, attr.clone()).unwrap();
    let mr = pd.register(mr_len, AccessFlags::ALL).unwrap();
    Side {
        ctx,
        pd,
        cq,
        qp,
        mr,
    }
}

pub fn pair_with(fabric: FabricConfig, seed: u64, attr: QpInitAttr, mr_len: usize) -> Pair {
    let fabric = MemFabric::new(seed, fabric).unwrap();
    let a = side(&fabric, 1, &attr, mr_len);
    let b = side(&fabric, 2, &attr, mr_len);
    a.qp.connect(&b.qp.endpoint()).unwrap();
    b.qp.connect(&a.qp.endpoint()).unwrap();
    Pair { fabric, a, b }
}

pub fn pair(mr_len: usize) -> Pair {
    pair_with(FabricConfig::default(), 7, QpInitAttr::default(), mr_len)
}

/// Polls `cq` until one completion arrives (the fabric runs meanwhile).
pub fn one(cq: &CompletionQueue) -> WorkCompletion {
    let v = cq.poll_n(1, 100_000).unwrap();
    assert_eq!(v.len(), 1, "no completion arrived");
    v[0]
}

/// A seeded byte pattern.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}
