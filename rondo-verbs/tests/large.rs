//! A single 1 GiB RDMA WRITE, over the in-process fabric with a
//! 9000-byte MTU (about 120 000 packets each way).

mod common;
use common::*;
use rondo_verbs::*;

#[test]
fn one_gib_write_is_byte_exact() {
    const GIB: usize = 1 << 30;
    let attr = QpInitAttr {
        mtu: 9000,
        ..QpInitAttr::default()
    };
    let p = pair_with(FabricConfig::uniform(4, 100.0, 2.0), 21, attr, GIB);
    // A seeded pattern, written in 1 MiB pieces.
    let chunk = pattern(77, 1 << 20);
    p.a.mr.with_slice(|s| {
        for (i, c) in s.chunks_mut(1 << 20).enumerate() {
            c.copy_from_slice(&chunk);
            c[..8].copy_from_slice(&(i as u64).to_be_bytes());
        }
    });
    let to = RemoteAddr {
        addr: p.b.mr.addr(),
        rkey: p.b.mr.rkey(),
    };
    p.a.qp
        .post_send(&SendWr::write(
            1,
            vec![Sge::new(&p.a.mr, 0, GIB as u32)],
            to,
        ))
        .unwrap();
    let wc = p.a.cq.poll_n(1, 10_000_000).unwrap();
    assert_eq!(wc.len(), 1);
    assert_eq!(
        (wc[0].status, wc[0].byte_len),
        (WcStatus::Success, GIB as u64)
    );
    let same = p.a.mr.with_slice(|a| p.b.mr.with_slice(|b| a == b));
    assert!(same, "1 GiB WRITE differs");
    let s = p.a.qp.stats();
    assert!(s.data_packets_sent >= (GIB / 9000) as u64, "{s:?}");
}
