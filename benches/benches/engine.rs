//! The engine alone, both sides together: per data packet, the sender's
//! `poll_transmit`, the receiver's handling of the DATA and sending of its ACK, the
//! sender's handling of the ACK, and both sides' timers, over a lossless 100 Gbit/s
//! wire in each direction with a fixed 2 us delay and no network model between them
//! ([`rondo_benches::EnginePair`]). 4 KB datagrams (MTU 4096), Rondo's defaults
//! otherwise; one group per path count (4 and 64). Every payload is copied into its
//! datagram and out of it.
//!
//! One iteration is one 1 MiB message (its data packets are the throughput), with
//! the next one always posted, so the pipe stays full: criterion's time per element
//! is ns per data packet for both sides together.
//!
//! Run: `cargo bench -p rondo-benches --bench engine -- --warm-up-time 1 --measurement-time 3`

use criterion::{Criterion, Throughput};
use rondo_benches::EnginePair;
use std::time::Instant;

const MTU: usize = 4096;
const MESSAGE: usize = 1 << 20;

fn engine(c: &mut Criterion) {
    for paths in [4u16, 64] {
        let mut group = c.benchmark_group(format!("engine/P={paths}"));
        let mut pair = EnginePair::new(paths, MTU, MESSAGE);
        // Past slow start and the first probing phase.
        pair.run_messages(8);
        group.throughput(Throughput::Elements(pair.packets_per_message()));
        group.bench_function("data_packet", |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                pair.run_messages(iters);
                start.elapsed()
            })
        });
        group.finish();
        assert_eq!(pair.retransmissions(), 0, "the wires lose nothing");
    }
}

// `criterion_group!` would generate an undocumented `pub fn`; this is what it and
// `criterion_main!` expand to.
fn main() {
    let mut c = Criterion::default().configure_from_args();
    engine(&mut c);
    c.final_summary();
}
