//! The landing's bookkeeping, with the NIC's writes simulated.
#![allow(unsafe_code)] // the tests write at posted targets, as the NIC does

use super::*;

fn landing(ppp: usize) -> FlowLanding {
    FlowLanding::new(ppp, 2, 1 << 20)
}

/// The NIC writes `bytes` at a posted target.
fn nic_write(t: &PostTarget, bytes: &[u8]) {
    assert!(bytes.len() <= t.len);
    // SAFETY: the target is posted, in bounds, and nothing else writes it.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), t.ptr, bytes.len()) };
}

#[test]
fn in_order_message_lands_in_place_and_is_handed_over_without_copy() {
    let mut p = landing(4);
    assert!(p.begin(7, 10));
    let posts: Vec<PostTarget> = (0..3).map_while(|i| p.next_post(i)).collect();
    assert_eq!(
        posts.iter().map(|t| t.offset).collect::<Vec<_>>(),
        [0, 4, 8]
    );
    assert_eq!(posts[2].len, 4, "the last WR has room for a whole packet");
    for (t, bytes) in posts.iter().zip([&b"abcd"[..], b"efgh", b"ij"]) {
        nic_write(t, bytes);
        assert!(p.expects(t.buf, t.offset, 7));
        p.consumed(t.buf, t.offset);
        p.commit(t.offset, bytes.len());
    }
    let addr = posts[0].ptr as usize;
    let v = p.finish();
    assert_eq!(v, b"abcdefghij");
    assert_eq!(v.as_ptr() as usize, addr, "the buffer itself, not a copy");
    assert_eq!(p.counters.zero_copy_messages, 1);
    assert_eq!(p.released(), &[posts[0].buf]);
    p.reclaim();
    assert!(p.bufs.is_empty());
}

#[test]
fn bytes_placed_over_a_posted_wr_wait_for_it_and_finish_copies() {
    let mut p = landing(4);
    assert!(p.begin(1, 8));
    let t0 = p.next_post(0).unwrap();
    let t1 = p.next_post(1).unwrap();
    // Packet 1 arrives first into WR 0 (copied out by the driver), then the
    // engine places packets 0 and 1 from elsewhere while WR 1 is still posted.
    nic_write(&t0, b"EFGH");
    p.consumed(t0.buf, t0.offset);
    p.place(0, b"abcd");
    assert!(p.target(4, 4).is_none(), "WR 1 is posted there");
    p.place(4, b"efgh");
    // The message completes with WR 1 posted: a copy, the buffer stays.
    assert_eq!(p.finish(), b"abcdefgh");
    assert_eq!(p.released(), &[] as &[u64]);
    // A stray datagram lands in WR 1 later: the delivered copy is unaffected,
    // the deferred write is made, and the buffer is released.
    nic_write(&t1, b"XXXX");
    p.consumed(t1.buf, t1.offset);
    assert_eq!(p.released(), &[t1.buf]);
    assert_eq!(
        (p.counters.deferred_writes, p.counters.finish_copies),
        (1, 1)
    );
    p.reclaim();
    assert_eq!(p.posted(), 0);
}

#[test]
fn small_and_huge_messages_are_copied_and_an_abandoned_buffer_waits_for_its_wrs() {
    let mut p = landing(4);
    assert!(p.begin(1, 1), "below the in-place minimum");
    assert!(p.next_post(0).is_none());
    p.place(0, b"z");
    assert_eq!(p.finish(), b"z");
    assert!(p.begin(2, 1 << 30), "above the limit: copied, not refused");
    assert!(p.next_post(0).is_none());
    assert_eq!(p.counters.copied_messages, 2);
    assert!(p.begin(3, 12));
    let t = p.next_post(0).unwrap();
    assert!(p.next_post(0).is_none(), "one WR per place");
    // A new message starts before this one finished: the old buffer is kept
    // while its WR is posted.
    assert!(p.begin(4, 12));
    assert!(!p.expects(t.buf, t.offset, 3));
    assert!(p.released().is_empty());
    p.consumed(t.buf, t.offset);
    assert_eq!(p.released(), &[t.buf]);
}

#[test]
fn wrs_past_the_end_land_in_buffers_of_the_next_messages() {
    let mut p = landing(4);
    assert!(p.begin(1, 8));
    // Six WRs in a row: two into this message, then two each into buffers
    // allocated ahead for the next two messages of the same length.
    let posts: Vec<PostTarget> = (0..6).map_while(|i| p.next_post(i)).collect();
    assert_eq!(posts.len(), 6);
    let bufs: Vec<u64> = posts.iter().map(|t| t.buf).collect();
    assert!(bufs[0] == bufs[1] && bufs[2] == bufs[3] && bufs[4] == bufs[5]);
    assert!(bufs[0] != bufs[2] && bufs[2] != bufs[4]);
    assert_eq!(
        posts.iter().map(|t| t.offset).collect::<Vec<_>>(),
        [0, 4, 0, 4, 0, 4]
    );
    let land = |t: &PostTarget, bytes: &[u8], msg: u64, p: &mut FlowLanding| {
        nic_write(t, bytes);
        let in_place = p.expects(t.buf, t.offset, msg);
        let mut copy = Vec::new();
        if !in_place {
            p.read_landed(t.buf, t.offset, bytes.len(), &mut copy);
        }
        p.consumed(t.buf, t.offset);
        if in_place {
            p.commit(t.offset, bytes.len());
        } else {
            // The engine starts the message at its first packet, then places it.
            if t.offset == 0 {
                assert!(p.begin(msg, 8));
            }
            p.place(t.offset, &copy);
        }
        in_place
    };
    assert!(land(&posts[0], b"abcd", 1, &mut p));
    assert!(land(&posts[1], b"efgh", 1, &mut p));
    assert_eq!(p.finish(), b"abcdefgh");
    // Message 2's first packet is copied (it begins the message), the rest lands
    // in place, in the buffer allocated ahead, which becomes the message.
    assert!(!land(&posts[2], b"ijkl", 2, &mut p));
    assert!(land(&posts[3], b"mnop", 2, &mut p));
    let v = p.finish();
    assert_eq!(v, b"ijklmnop");
    assert_eq!(v.as_ptr(), posts[2].ptr as *const u8, "no copy");
    // Message 3 has another length: the buffer allocated for it is dropped once
    // its WRs complete; a new one is allocated.
    assert!(p.begin(3, 12));
    assert_eq!((p.counters.ahead_taken, p.counters.ahead_dropped), (1, 1));
    assert_eq!(p.counters.zero_copy_messages, 2);
    assert!(!p.released().contains(&posts[4].buf), "its WRs are posted");
    p.consumed(posts[4].buf, 0);
    p.consumed(posts[4].buf, 4);
    assert!(p.released().contains(&posts[4].buf));
}

#[test]
fn a_payload_straddling_a_posted_packet_waits_for_it() {
    // Packets of another size than the WRs (a peer with a smaller MTU): bytes
    // 2..6 cover the WR at 4..8, so they wait for it.
    let mut p = landing(4);
    assert!(p.begin(1, 8));
    let t1 = p.next_post(1).unwrap();
    assert_eq!(t1.offset, 4);
    p.place(0, b"ab");
    p.place(2, b"cdef");
    assert!(p.target(6, 2).is_none());
    nic_write(&t1, b"XXXX");
    p.consumed(t1.buf, t1.offset);
    p.place(6, b"gh");
    assert_eq!(p.finish(), b"abcdefgh");
    assert_eq!(p.counters.deferred_writes, 1);
}
