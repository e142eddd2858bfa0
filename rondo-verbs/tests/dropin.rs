//! What the libibverbs drop-in (`rondo-ibv`) needs from this crate, each tested on
//! its own: application-owned memory (`register_external`), the completion
//! notification hook of completion channels, forcing a QP into the error state, and
//! the by-value posts.
#![allow(unsafe_code)] // register_external is unsafe by contract

mod common;
use common::*;
use rondo_verbs::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A buffer the test owns and registers as an external region.
struct Buffer(Vec<u8>);

impl Buffer {
    fn region(&mut self, pd: &ProtectionDomain) -> MemoryRegion {
        // SAFETY: every region made here is dropped before the buffer (the test
        // drops the pair's QPs and regions first) and the Vec is never resized.
        unsafe { pd.register_external(self.0.as_mut_ptr(), self.0.len(), AccessFlags::ALL) }
            .unwrap()
    }
}

#[test]
fn write_read_and_send_move_bytes_into_and_out_of_application_memory() {
    let p = pair(1 << 20);
    let data = pattern(3, 300_000);
    let mut buf_b = Buffer(vec![0; 1 << 20]);
    let mr_b = buf_b.region(&p.b.pd);
    assert!(mr_b.is_external() && !p.a.mr.is_external());
    assert_eq!(mr_b.addr(), buf_b.0.as_ptr() as u64);

    // WRITE from A's owned region into B's buffer.
    p.a.mr.write(0, &data).unwrap();
    let remote = RemoteAddr {
        addr: mr_b.addr() + 1000,
        rkey: mr_b.rkey(),
    };
    let sge = Sge::new(&p.a.mr, 0, data.len() as u32);
    p.a.qp
        .post_send_owned(SendWr::write(1, vec![sge], remote))
        .unwrap();
    assert_eq!(one(&p.a.cq).status, WcStatus::Success);

    // READ it back from B's buffer into another place of A's region.
    let back = Sge::new(&p.a.mr, 400_000, data.len() as u32);
    p.a.qp
        .post_send(&SendWr::read(2, vec![back], remote))
        .unwrap();
    let wc = one(&p.a.cq);
    assert_eq!(
        (wc.status, wc.byte_len),
        (WcStatus::Success, data.len() as u64)
    );
    let mut got = vec![0; data.len()];
    p.a.mr.read(400_000, &mut got).unwrap();
    assert_eq!(got, data);

    // SEND into a receive posted on B's buffer.
    let recv = RecvWr {
        wr_id: 9,
        sg_list: vec![Sge::new(&mr_b, 500_000, 1000)],
    };
    p.b.qp.post_recv_owned(recv).unwrap();
    p.a.qp
        .post_send(&SendWr::send(3, vec![Sge::new(&p.a.mr, 0, 1000)]))
        .unwrap();
    assert_eq!(one(&p.a.cq).status, WcStatus::Success);
    let wc = one(&p.b.cq);
    assert_eq!(
        (wc.wr_id, wc.status, wc.byte_len),
        (9, WcStatus::Success, 1000)
    );

    // A wrong rkey into the buffer is refused and writes nothing.
    let bad = RemoteAddr {
        addr: mr_b.addr(),
        rkey: mr_b.rkey() ^ 1,
    };
    let sge = Sge::new(&p.a.mr, 0, 16);
    p.a.qp.post_send(&SendWr::write(4, vec![sge], bad)).unwrap();
    assert_eq!(one(&p.a.cq).status, WcStatus::RemAccessErr);

    let contents = mr_b.with_slice(|s| s.to_vec());
    drop((mr_b, p));
    assert_eq!(&buf_b.0[1000..1000 + data.len()], &data[..]);
    assert_eq!(&buf_b.0[500_000..501_000], &data[..1000]);
    assert_eq!(
        &buf_b.0[..1000],
        &[0; 1000][..],
        "nothing before the WRITE's target"
    );
    assert_eq!(contents, buf_b.0, "with_slice sees the application's bytes");
}

#[test]
fn an_external_region_needs_an_address_and_a_length() {
    let p = pair(4096);
    let mut b = [0u8; 8];
    // SAFETY: both calls fail before anything is registered.
    let zero = unsafe {
        p.a.pd
            .register_external(b.as_mut_ptr(), 0, AccessFlags::ALL)
    };
    assert!(
        matches!(zero, Err(VerbsError::InvalidAttr { .. })),
        "{zero:?}"
    );
    let null = unsafe {
        p.a.pd
            .register_external(std::ptr::null_mut(), 8, AccessFlags::ALL)
    };
    assert!(
        matches!(null, Err(VerbsError::InvalidAttr { .. })),
        "{null:?}"
    );
}

#[test]
fn an_armed_notification_fires_once_on_the_next_completion_or_at_once_when_not_empty() {
    let p = pair(4096);
    let fired = Arc::new(AtomicUsize::new(0));
    let f = fired.clone();
    p.a.cq.set_notify(Arc::new(move || {
        f.fetch_add(1, Ordering::SeqCst);
    }));
    let send = |id| {
        p.b.qp
            .post_recv(&RecvWr {
                wr_id: id,
                sg_list: vec![Sge::new(&p.b.mr, 0, 64)],
            })
            .unwrap();
        p.a.qp
            .post_send(&SendWr::send(id, vec![Sge::new(&p.a.mr, 0, 8)]))
            .unwrap();
        assert_eq!(one(&p.b.cq).wr_id, id);
        // Long enough for the ACK to reach A.
        p.fabric.run_until(p.fabric.now() + Duration::from_ms(5));
    };
    // Not armed: no notification.
    send(1);
    assert_eq!(fired.load(Ordering::SeqCst), 0);
    assert_eq!(one(&p.a.cq).wr_id, 1);
    // Armed on an empty queue: fires at the next completion, once.
    p.a.cq.arm_notify();
    p.a.cq.arm_notify();
    assert_eq!(fired.load(Ordering::SeqCst), 0);
    send(2);
    send(3);
    assert_eq!(
        fired.load(Ordering::SeqCst),
        1,
        "one arming, one notification"
    );
    // Armed on a non-empty queue: fires at once.
    p.a.cq.arm_notify();
    assert_eq!(fired.load(Ordering::SeqCst), 2);
    let got = p.a.cq.poll_n(2, 1000).unwrap();
    assert_eq!(got.iter().map(|w| w.wr_id).collect::<Vec<_>>(), vec![2, 3]);
}

#[test]
fn a_solicited_only_notification_waits_for_a_solicited_receive_or_an_error() {
    let p = pair(4096);
    let fired = Arc::new(AtomicUsize::new(0));
    let f = fired.clone();
    p.b.cq.set_notify(Arc::new(move || {
        f.fetch_add(1, Ordering::SeqCst);
    }));
    let post_recv = |id| {
        p.b.qp
            .post_recv(&RecvWr {
                wr_id: id,
                sg_list: vec![Sge::new(&p.b.mr, 0, 64)],
            })
            .unwrap();
    };
    let send = |id, solicited| {
        post_recv(id);
        let wr = SendWr {
            solicited,
            ..SendWr::send(id, vec![Sge::new(&p.a.mr, 0, 8)])
        };
        p.a.qp.post_send(&wr).unwrap();
        assert_eq!(one(&p.b.cq).wr_id, id);
    };
    p.b.cq.arm_notify_solicited();
    send(1, false);
    assert_eq!(fired.load(Ordering::SeqCst), 0, "an unsolicited SEND");
    send(2, true);
    assert_eq!(fired.load(Ordering::SeqCst), 1, "a solicited SEND");
    send(3, true);
    assert_eq!(fired.load(Ordering::SeqCst), 1, "fired once per arming");
    // Armed for solicited on a queue holding only an unsolicited one: nothing yet.
    send(4, false);
    post_recv(5);
    p.a.qp
        .post_send(&SendWr::send(5, vec![Sge::new(&p.a.mr, 0, 8)]))
        .unwrap();
    p.fabric.run_until(p.fabric.now() + Duration::from_ms(5));
    p.b.cq.arm_notify_solicited();
    assert_eq!(fired.load(Ordering::SeqCst), 1, "an unsolicited one queued");
    assert_eq!(one(&p.b.cq).wr_id, 5);
    // An error completion fires it: a flushed receive.
    post_recv(6);
    p.b.qp.set_error();
    assert_eq!(fired.load(Ordering::SeqCst), 2, "a flushed receive");
}

#[test]
fn set_error_flushes_outstanding_sends_and_receives_and_everything_posted_after() {
    let p = pair(4096);
    p.b.qp
        .post_recv(&RecvWr {
            wr_id: 70,
            sg_list: vec![Sge::new(&p.b.mr, 0, 64)],
        })
        .unwrap();
    p.b.qp
        .post_recv(&RecvWr {
            wr_id: 71,
            sg_list: vec![Sge::new(&p.b.mr, 64, 64)],
        })
        .unwrap();
    // Posted without running the fabric: still outstanding when the QP fails.
    for id in 1..=3 {
        let wr = SendWr::write(
            id,
            vec![Sge::new(&p.a.mr, 0, 8)],
            RemoteAddr {
                addr: p.b.mr.addr(),
                rkey: p.b.mr.rkey(),
            },
        );
        p.a.qp
            .post_send(&if id == 2 { wr.unsignaled() } else { wr })
            .unwrap();
    }
    p.a.qp.set_error();
    p.b.qp.set_error();
    p.b.qp.set_error(); // already in error: nothing more
    assert_eq!(p.a.qp.state(), QpState::Error);
    let a = p.a.cq.poll_n(3, 1000).unwrap();
    assert_eq!(
        a.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        vec![
            (1, WcStatus::WrFlushErr),
            (2, WcStatus::WrFlushErr),
            (3, WcStatus::WrFlushErr)
        ],
        "unsignaled requests are flushed too"
    );
    let b = p.b.cq.poll_n(3, 1000).unwrap();
    assert_eq!(
        b.iter()
            .map(|w| (w.wr_id, w.status, w.opcode))
            .collect::<Vec<_>>(),
        vec![
            (70, WcStatus::WrFlushErr, WcOpcode::Recv),
            (71, WcStatus::WrFlushErr, WcOpcode::Recv)
        ]
    );
    // Posted after: completes flushed at once.
    p.a.qp
        .post_send_owned(SendWr::send(4, vec![Sge::new(&p.a.mr, 0, 8)]))
        .unwrap();
    p.b.qp
        .post_recv_owned(RecvWr {
            wr_id: 72,
            sg_list: vec![],
        })
        .unwrap();
    assert_eq!(one(&p.a.cq).status, WcStatus::WrFlushErr);
    assert_eq!((one(&p.b.cq).wr_id, one_status(&p.b.cq)), (72, None));
}

fn one_status(cq: &CompletionQueue) -> Option<WcStatus> {
    cq.poll_n(1, 100).unwrap().first().map(|w| w.status)
}
