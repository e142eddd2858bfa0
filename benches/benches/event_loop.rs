//! The simulator's event loop: events per second on a permutation over a k = 4
//! fat tree (16 hosts, 100 Gbit/s, 1 us links, MTU 1000), every host sending
//! 256 KB to a seeded permutation peer, each host running the real engine. The
//! time covers building the simulator and the whole run (engine work included),
//! so it is the rate a user sees. Criterion reports events/s.
//!
//! Run: `cargo bench -p rondo-benches --bench event_loop -- --warm-up-time 1 --measurement-time 5`
//!
//! For the paper-scale figure (clos3, 320 hosts x 2 MB) use
//! `rondo sim --builtin clos320-permutation`.

use criterion::{Criterion, Throughput};
use rondo_proto::time::{Duration, Instant};
use rondo_sim::{FlowSpec, SimConfig, Simulator, Topology};

const HOSTS: usize = 16;
const BYTES: u64 = 256 * 1024;

/// Runs the workload; returns the number of events processed.
fn permutation() -> u64 {
    let topo = Topology::FatTree {
        k: 4,
        gbps: 100.0,
        link_delay: Duration::from_us(1),
    };
    let cfg = SimConfig {
        mtu: 1000,
        ..SimConfig::default()
    };
    let mut sim = Simulator::new(&topo, cfg).expect("fat tree");
    // A fixed derangement: host i sends to (5 i + 3) mod 16 (5 is coprime to 16).
    for src in 0..HOSTS {
        let dst = (5 * src + 3) % HOSTS;
        sim.add_flow(FlowSpec::transfer(src, dst, BYTES))
            .expect("flow");
    }
    sim.run(Instant::from_us(1_000_000), &mut |_| {});
    let m = sim.metrics();
    assert_eq!(m.flows_completed, HOSTS, "every flow completes");
    m.events
}

fn event_loop(c: &mut Criterion) {
    let events = permutation();
    let mut group = c.benchmark_group("sim/fattree4-permutation");
    group.throughput(Throughput::Elements(events));
    group.sample_size(10);
    group.bench_function("events", |b| b.iter(permutation));
    group.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    event_loop(&mut c);
    c.final_summary();
}
