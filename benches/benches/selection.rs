//! Per-packet cost of the sender's critical path (paper App. D, whose cost model is
//! 25 cycles per packet at P = 4): path selection plus packet selection, the
//! workload of [`rondo_benches::SelectionFlow`].
//!
//! One iteration is one packet, so criterion's time per iteration is ns/packet.
//! Each group (one per P) measures two variants in the same run:
//! - `skips`: a heterogeneous flow, path 0 the slowest with skip 30-60, the others 0-5;
//! - `skip0`: skip 0 on every path (plain PSN order), the baseline; the scheduler's
//!   overhead is the ratio `skips / skip0`.
//!
//! Run: `cargo bench -p rondo-benches --bench selection -- --warm-up-time 1 --measurement-time 3`

use criterion::{Criterion, Throughput};
use rondo_benches::{SelectionFlow, Skips};

fn selection(c: &mut Criterion) {
    for paths in [4, 8, 16, 64] {
        let mut group = c.benchmark_group(format!("selection/P={paths}"));
        group.throughput(Throughput::Elements(1));
        for (name, skips) in [("skips", Skips::Heterogeneous), ("skip0", Skips::Zero)] {
            let mut flow = SelectionFlow::new(paths, skips);
            group.bench_function(name, |b| b.iter(|| flow.send_one()));
        }
        group.finish();
    }
}

// `criterion_group!` would generate an undocumented `pub fn`; this is what it and
// `criterion_main!` expand to.
fn main() {
    let mut c = Criterion::default().configure_from_args();
    selection(&mut c);
    c.final_summary();
}
