//! Sender plus receiver cost per packet: one 4 MB message over the simulator's two-host
//! four-path testbed (25/20/15/10 Gbps, 10/5/5/5 us, 100 Gbps hosts), timed from
//! `post` to the sender's completion. The time includes the network's (`rondo_sim::pair`)
//! event loop (links, queues, event heap), so it is an upper bound on the engine's
//! own cost. Criterion reports packets/s (data packets of a full payload; ACKs,
//! probes and retransmissions are not counted).
//!
//! Two variants in the same group: `rondo` (the defaults) and `no_scheduler_no_probing`
//! (`FlowConfig { scheduler: false, probing: false, .. }`).
//!
//! Run: `cargo bench -p rondo-benches --bench pair -- --warm-up-time 1 --measurement-time 3`

use criterion::{BatchSize, Criterion, Throughput};
use rondo_proto::{BufferConfig, FlowConfig, Instant};
use rondo_sim::pair::PathSpec;
use rondo_sim::Testbed;

/// Message size.
const BYTES: usize = 4 << 20;

fn testbed(cfg: &FlowConfig) -> Testbed {
    let paths = [
        PathSpec::new(25.0, 10.0),
        PathSpec::new(20.0, 5.0),
        PathSpec::new(15.0, 5.0),
        PathSpec::new(10.0, 5.0),
    ];
    Testbed::new(1, 100.0, &paths, cfg, BufferConfig::default()).expect("testbed")
}

fn transfer(mut tb: Testbed, data: Vec<u8>) -> Testbed {
    tb.post(1, data).expect("post");
    let done = tb.run_until(Instant::from_us(100_000), |t| t.send_completions() == 1);
    assert!(done, "the message did not complete");
    tb
}

fn pair(c: &mut Criterion) {
    let packets = BYTES.div_ceil(FlowConfig::default().payload_per_packet()) as u64;
    let mut group = c.benchmark_group("pair/4MB");
    group.throughput(Throughput::Elements(packets));
    group.sample_size(10);
    let variants = [
        ("rondo", FlowConfig::default()),
        (
            "no_scheduler_no_probing",
            FlowConfig {
                scheduler: false,
                probing: false,
                ..Default::default()
            },
        ),
    ];
    for (name, cfg) in variants {
        group.bench_function(name, |b| {
            b.iter_batched(
                || (testbed(&cfg), vec![0x5a; BYTES]),
                |(tb, data)| transfer(tb, data),
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

// `criterion_group!` would generate an undocumented `pub fn`; this is what it and
// `criterion_main!` expand to.
fn main() {
    let mut c = Criterion::default().configure_from_args();
    pair(&mut c);
    c.final_summary();
}
