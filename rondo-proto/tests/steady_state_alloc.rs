//! No heap allocation per packet on the engine's steady-state path (issue 16),
//! from a counting global allocator: a long transfer between two endpoints over
//! lossless wires ([`rondo_benches::EnginePair`], the engine benchmark's
//! workload: messages sent from one shared body and received into one reused
//! buffer, datagram buffers recycled), counted after a warm-up that may allocate
//! (tables, queues and scratch reaching their working sizes).
//!
//! One test function only: the allocator counts every thread of this binary.

#[path = "common/counting_alloc.rs"]
mod counting_alloc;

use counting_alloc::allocations;
use rondo_benches::EnginePair;

#[global_allocator]
static ALLOC: counting_alloc::Counting = counting_alloc::Counting;

/// Messages of the warm-up, and of the counted transfer (1 MiB each).
const WARM_UP: u64 = 20;
const COUNTED: u64 = 200;
/// Allocations allowed over the whole counted transfer (amortised growth of a
/// queue past its warm-up size), independent of its length.
const ALLOWED: u64 = 4;

#[test]
fn a_long_transfer_allocates_nothing_per_packet() {
    for paths in [4, 16] {
        let mut pair = EnginePair::new(paths, 4096, 1 << 20);
        pair.run_messages(WARM_UP);
        let (before, packets) = (allocations(), pair.data_packets_sent());
        pair.run_messages(COUNTED);
        let n = allocations() - before;
        let packets = pair.data_packets_sent() - packets;
        eprintln!("P={paths}: {n} allocations over {packets} data packets ({COUNTED} messages)");
        assert_eq!(pair.messages().0, WARM_UP + COUNTED);
        assert!(packets > 50_000, "{packets} data packets");
        assert!(
            n <= ALLOWED,
            "{n} allocations over {packets} data packets at {paths} paths"
        );
    }
}
