//! A completion queue that overruns is reported as ibverbs reports it (issue 15,
//! row 12): the completion that found it full is lost, the CQ is in error (an async
//! `CqError` event, `poll` fails once it is drained), and the QP that completes on it
//! goes to error (`QpFatal`), instead of the queue growing past its depth.

mod common;

use common::side;
use rondo_verbs::*;

/// A QP on `fabric` whose send CQ holds `depth` entries (receives on a deep CQ).
fn sender(fabric: &MemFabric, depth: usize) -> (Context, CompletionQueue, QueuePair, MemoryRegion) {
    let ctx = Context::open_mem(
        fabric,
        ContextAttr {
            seed: 1,
            ..ContextAttr::default()
        },
    )
    .unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let send_cq = ctx.create_cq(depth).unwrap();
    let recv_cq = ctx.create_cq(64).unwrap();
    let qp = ctx
        .create_qp(&pd, &send_cq, &recv_cq, QpInitAttr::default())
        .unwrap();
    let mr = pd.register(4096, AccessFlags::ALL).unwrap();
    (ctx, send_cq, qp, mr)
}

#[test]
fn an_overrun_cq_is_an_async_error_and_its_qp_goes_to_error() {
    let fabric = MemFabric::new(3, FabricConfig::default()).unwrap();
    let (ctx, send_cq, qp, mr) = sender(&fabric, 2);
    let events = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = events.clone();
    ctx.set_async_notify(std::sync::Arc::new(move || {
        counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }));
    four_unpolled_sends(&fabric, &qp, &mr);
    // The hook ran once per event queued (what an async event fd counts).
    assert_eq!(events.load(std::sync::atomic::Ordering::Relaxed), 2);
    assert_eq!(
        ctx.poll_async_event(),
        Some(AsyncEvent::CqError {
            cq: send_cq.handle()
        })
    );
    assert_eq!(
        ctx.poll_async_event(),
        Some(AsyncEvent::QpFatal {
            qp_num: qp.qp_num()
        })
    );
    assert_eq!(ctx.poll_async_event(), None);
    assert_eq!(qp.state(), QpState::Error);
    assert!(send_cq.overruns() >= 2, "{}", send_cq.overruns());
    // The two completions it held come out, then the error: never a third entry.
    let mut wcs = [WorkCompletion::default(); 8];
    assert_eq!(send_cq.poll(&mut wcs).unwrap(), 2);
    assert!(wcs[..2].iter().all(|wc| wc.status == WcStatus::Success));
    assert_eq!(
        send_cq.poll(&mut wcs),
        Err(VerbsError::CqOverrun {
            cq: send_cq.handle(),
            depth: 2
        })
    );
    // A QP in error flushes what is posted afterwards (into the CQ in error: lost).
    qp.post_send(&SendWr::send(9, vec![Sge::new(&mr, 0, 8)]))
        .unwrap();
    assert!(send_cq.poll(&mut wcs).is_err());
}

#[test]
fn a_cq_polled_in_time_never_overruns() {
    // The same four SENDs, the CQ of two entries polled after each: no event.
    let fabric = MemFabric::new(3, FabricConfig::default()).unwrap();
    let (ctx, send_cq, qp, mr) = sender(&fabric, 2);
    let b = side(&fabric, 2, &QpInitAttr::default(), 4096);
    qp.connect(&b.qp.endpoint()).unwrap();
    b.qp.connect(&qp.endpoint()).unwrap();
    for i in 0..4 {
        b.qp.post_recv(&RecvWr {
            wr_id: i,
            sg_list: vec![Sge::new(&b.mr, 0, 64)],
        })
        .unwrap();
        qp.post_send(&SendWr::send(i, vec![Sge::new(&mr, 0, 64)]))
            .unwrap();
        let wc = common::one(&send_cq);
        assert_eq!((wc.wr_id, wc.status), (i, WcStatus::Success));
    }
    assert_eq!(ctx.poll_async_event(), None);
    assert_eq!(qp.state(), QpState::Rts);
    assert_eq!(send_cq.overruns(), 0);
}

/// Four SENDs on `qp` to a new peer QP, whose polls run the fabric until they are
/// in, then a millisecond more for their ACKs: the sender's four completions meet
/// its CQ, which it never polls.
fn four_unpolled_sends(fabric: &MemFabric, qp: &QueuePair, mr: &MemoryRegion) {
    let b = side(fabric, 2, &QpInitAttr::default(), 4096);
    qp.connect(&b.qp.endpoint()).unwrap();
    b.qp.connect(&qp.endpoint()).unwrap();
    for i in 0..4 {
        b.qp.post_recv(&RecvWr {
            wr_id: i,
            sg_list: vec![Sge::new(&b.mr, 0, 64)],
        })
        .unwrap();
        qp.post_send(&SendWr::send(i, vec![Sge::new(mr, 0, 64)]))
            .unwrap();
    }
    assert_eq!(b.cq.poll_n(4, 100_000).unwrap().len(), 4);
    fabric.run_until(fabric.now() + Duration::from_ms(1));
}

#[test]
fn a_resized_cq_holds_its_new_depth() {
    // The CQ of two entries grown to eight takes the four completions.
    let fabric = MemFabric::new(3, FabricConfig::default()).unwrap();
    let (ctx, send_cq, qp, mr) = sender(&fabric, 2);
    send_cq.resize(8).unwrap();
    assert_eq!(send_cq.depth(), 8);
    four_unpolled_sends(&fabric, &qp, &mr);
    assert_eq!(ctx.poll_async_event(), None);
    assert_eq!(send_cq.overruns(), 0);
    // Not below what it holds, not to 0; then down to exactly what it holds.
    for bad in [0, 3] {
        assert!(
            matches!(
                send_cq.resize(bad),
                Err(VerbsError::InvalidAttr { name: "depth", .. })
            ),
            "{bad}"
        );
    }
    assert_eq!(send_cq.depth(), 8);
    send_cq.resize(4).unwrap();
    let mut wcs = [WorkCompletion::default(); 8];
    assert_eq!(send_cq.poll(&mut wcs).unwrap(), 4);
    assert_eq!(qp.state(), QpState::Rts);
}

#[test]
fn a_cq_that_overran_cannot_be_resized() {
    let fabric = MemFabric::new(3, FabricConfig::default()).unwrap();
    let (_ctx, send_cq, qp, mr) = sender(&fabric, 2);
    four_unpolled_sends(&fabric, &qp, &mr);
    assert!(send_cq.resize(64).is_err());
}
