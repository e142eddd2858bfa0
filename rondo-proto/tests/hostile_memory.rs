//! What one forged far-ahead DATA costs a receiver (issue "Hostile peers, dead
//! paths and stuck requests", row 6), from a counting global allocator: its
//! bookkeeping must be bounded by the reorder buffer's capacity, not by how far
//! ahead the forged PSN claims to be (2^20 - 1 PSNs ahead used to cost 48 MiB).
//!
//! One test function only: the allocator counts every thread of this binary.

use rondo_proto::wire::{self, Body};
use rondo_proto::{BufferConfig, Endpoint, FlowConfig, Host, Instant, Psn, SharedBuffer};
#[path = "common/counting_alloc.rs"]
mod counting_alloc;

use counting_alloc::live_bytes as live;

#[global_allocator]
static ALLOC: counting_alloc::Counting = counting_alloc::Counting;

const TOKEN: Option<u64> = Some(0x5eed);
/// Connections (QPs) the forger sends one far-ahead DATA to.
const N: u32 = 8;

#[test]
fn one_forged_far_ahead_data_costs_bookkeeping_bounded_by_the_buffer() {
    let cfg = FlowConfig {
        token: TOKEN,
        ..FlowConfig::default()
    };
    let buffer = || SharedBuffer::in_heap(BufferConfig::default()).unwrap();
    let (mut a, mut b) = (Endpoint::new(buffer()), Endpoint::new(buffer()));
    let now = Instant::from_us(1);
    let mut forged = Vec::new();
    let mut buf = vec![0u8; 9000];
    for f in 0..N {
        let ha = a.connect(now, 2 * f, 2 * f + 1, &cfg).unwrap();
        b.connect(now, 2 * f + 1, 2 * f, &cfg).unwrap();
        a.post(ha, now, 1, vec![7u8; 4000]).unwrap();
        // The connection's first DATA, sniffed, re-sent just inside the window.
        let (path, d) = loop {
            let t = a.poll_transmit(now, &mut buf).expect("a sends its DATA");
            let d = buf[..t.len].to_vec();
            if matches!(wire::parse(&d).unwrap().0.body, Body::Data(_)) {
                break (t.path, d);
            }
        };
        let (mut repr, payload) = wire::parse(&d).unwrap();
        let ahead = BufferConfig::default().max_distance - 1;
        repr.common.psn = Psn(repr.common.psn.0.wrapping_add(ahead));
        forged.push((path, repr.to_datagram(payload, TOKEN).unwrap()));
    }
    let before = live();
    for (path, d) in &forged {
        b.handle_datagram(now, *path, d, false);
    }
    let per_qp = (live() - before) / N as isize;
    let held = b.reorder_buffer().used_slots();
    eprintln!("one forged DATA 2^20 - 1 PSNs ahead: {per_qp} heap bytes per QP, {held} slots");
    assert_eq!(held, N as usize, "each forged DATA holds one slot");
    // The capacity of the default buffer is 819 slots; the bookkeeping of one
    // held packet far ahead is a map entry and an ACK queued.
    assert!(
        per_qp < 4096,
        "{per_qp} bytes of bookkeeping for one forged DATA"
    );
}
