//! Several contexts and QPs on one fabric: routing by peer, QPs sharing a
//! context's reorder buffer, a QP pair inside one context, all at once, lossy.

mod common;
use common::pattern;
use rondo_verbs::*;

struct Ctx {
    ctx: Context,
    pd: ProtectionDomain,
    cq: CompletionQueue,
    mr: MemoryRegion,
}

#[test]
fn many_qps_across_three_contexts_and_within_one() {
    let fabric = MemFabric::new(
        17,
        FabricConfig::uniform(4, 25.0, 2.0)
            .with_loss(0.01)
            .with_jitter(Duration::from_us(2)),
    )
    .unwrap();
    let ctxs: Vec<Ctx> = (0..3)
        .map(|i| {
            let ctx = Context::open_mem(
                &fabric,
                ContextAttr {
                    seed: i,
                    ..ContextAttr::default()
                },
            )
            .unwrap();
            let pd = ctx.alloc_pd().unwrap();
            let cq = ctx.create_cq(1024).unwrap();
            let mr = pd.register(16 << 20, AccessFlags::ALL).unwrap();
            Ctx { ctx, pd, cq, mr }
        })
        .collect();
    // (requester, responder) context pairs; (0, 0) is a QP pair inside context 0.
    let links = [(0, 1), (1, 0), (0, 2), (2, 1), (0, 0)];
    let mut qps = Vec::new();
    for &(x, y) in &links {
        let (cx, cy) = (&ctxs[x], &ctxs[y]);
        let qx = cx
            .ctx
            .create_qp(&cx.pd, &cx.cq, &cx.cq, QpInitAttr::default())
            .unwrap();
        let qy = cy
            .ctx
            .create_qp(&cy.pd, &cy.cq, &cy.cq, QpInitAttr::default())
            .unwrap();
        qx.connect(&qy.endpoint()).unwrap();
        qy.connect(&qx.endpoint()).unwrap();
        qps.push((qx, qy));
    }
    // Each link WRITEs 8 messages of 100 KB into its own 1 MiB window of the
    // responder's region, all links at once.
    let mut expected = Vec::new();
    for (k, &(x, y)) in links.iter().enumerate() {
        for m in 0..8u64 {
            let data = pattern(k as u64 * 100 + m, 100_000);
            let src_off = (k << 20) + m as usize * 100_000 + 4096;
            let dst_off = (k << 20) + m as usize * 100_000 + 8192;
            // Requester's source lies in its own region; for (0, 0) source and
            // destination are the same region, at different offsets.
            let src_off = if x == y { src_off + (8 << 20) } else { src_off };
            ctxs[x].mr.write(src_off, &data).unwrap();
            let remote = RemoteAddr {
                addr: ctxs[y].mr.addr() + dst_off as u64,
                rkey: ctxs[y].mr.rkey(),
            };
            let wr = SendWr::write(
                k as u64 * 100 + m,
                vec![Sge::new(&ctxs[x].mr, src_off, 100_000)],
                remote,
            );
            qps[k].0.post_send(&wr).unwrap();
            expected.push((y, dst_off, data));
        }
    }
    // Collect 8 completions per link from the requesters' CQs.
    let mut got = vec![Vec::new(); links.len()];
    let mut wc = [WorkCompletion::default(); 16];
    let mut idle = 0;
    while got.iter().map(Vec::len).sum::<usize>() < 8 * links.len() && idle < 100_000 {
        let mut any = false;
        for c in &ctxs {
            let n = c.cq.poll(&mut wc).unwrap();
            for w in &wc[..n] {
                assert_eq!(w.status, WcStatus::Success, "{w:?}");
                let k = (w.wr_id / 100) as usize;
                assert_eq!(w.qp_num, qps[k].0.qp_num());
                got[k].push(w.wr_id % 100);
            }
            any |= n > 0;
        }
        idle = if any { 0 } else { idle + 1 };
    }
    for (k, g) in got.iter().enumerate() {
        assert_eq!(
            g,
            &(0..8).collect::<Vec<u64>>(),
            "link {k}: completions in order"
        );
    }
    for (y, off, data) in &expected {
        let mut buf = vec![0; data.len()];
        ctxs[*y].mr.read(*off, &mut buf).unwrap();
        assert!(&buf == data, "bytes at context {y} offset {off}");
    }
    let retx: u64 = qps.iter().map(|(a, _)| a.stats().retx_packets).sum();
    assert!(retx > 0, "loss was injected");
    for c in &ctxs {
        let s = c.ctx.stats();
        assert_eq!((s.malformed, s.unknown_qp, s.bad_token), (0, 0, 0), "{s:?}");
    }
}
