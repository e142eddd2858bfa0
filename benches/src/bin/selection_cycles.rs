//! Cycles per packet of the selection workload ([`rondo_benches::SelectionFlow`],
//! as in `benches/selection.rs`) without criterion, for machines where wall-clock
//! samples are noisy or a PMU is at hand.
//!
//! Sends packets in short chunks and prints ns/packet of the fastest and the median
//! chunk (the fastest is the one least disturbed by other processes), and an
//! *estimate* of cycles per packet: ns x the `cpu MHz` of `/proc/cpuinfo` (the
//! nominal clock on a VM; turbo makes the true count higher). Where hardware
//! counters work, run it under `perf stat -e cycles,instructions` and divide by the
//! printed packet total instead.
//!
//! Usage: `selection_cycles [P (4)] [skips|skip0 (skips)] [chunks (500)]`

use rondo_benches::{SelectionFlow, Skips};
use std::hint::black_box;
use std::time::Instant;

/// Packets per timed chunk (about a millisecond).
const CHUNK: u64 = 20_000;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let paths: usize = args.first().map_or(4, |a| a.parse().expect("P: a number"));
    let skips = match args.get(1).map(String::as_str) {
        None | Some("skips") => Skips::Heterogeneous,
        Some("skip0") => Skips::Zero,
        Some(other) => panic!("unknown variant {other:?}: skips or skip0"),
    };
    let chunks: usize = args
        .get(2)
        .map_or(500, |a| a.parse().expect("chunks: a number"));

    let mut flow = SelectionFlow::new(paths, skips);
    let mut ns_per_packet: Vec<f64> = (0..chunks)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..CHUNK {
                black_box(flow.send_one());
            }
            start.elapsed().as_nanos() as f64 / CHUNK as f64
        })
        .collect();
    ns_per_packet.sort_by(f64::total_cmp);
    let fastest = ns_per_packet[0];
    let median = ns_per_packet[chunks / 2];
    println!(
        "P={paths} {skips:?}: {} packets; ns/packet fastest chunk {fastest:.2}, median {median:.2}",
        CHUNK * chunks as u64
    );
    if let Some(mhz) = cpu_mhz() {
        println!(
            "estimated cycles/packet at {mhz:.0} MHz: fastest {:.0}, median {:.0}",
            fastest * mhz / 1e3,
            median * mhz / 1e3
        );
    }
}

/// The first `cpu MHz` of `/proc/cpuinfo`, if any.
fn cpu_mhz() -> Option<f64> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines()
        .find(|l| l.starts_with("cpu MHz"))?
        .split(':')
        .nth(1)?
        .trim()
        .parse()
        .ok()
}
