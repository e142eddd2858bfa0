//! A two-host parallel-path run in the simulator matches the two-host
//! [`Testbed`] of `rondo_sim::pair` (the same engine over the same links, switch
//! queues aside), on equal and on unequal path delays.

use rondo_proto::time::{Duration, Instant};
use rondo_proto::{BufferConfig, FlowConfig};
use rondo_sim::pair;
use rondo_sim::Testbed;
use rondo_sim::{FlowSpec, PathSpec, SimConfig, Simulator, Topology};

const RATES: [f64; 4] = [25.0, 20.0, 15.0, 10.0];
const BYTES: u64 = 4 << 20;

fn sim_paths(delays_us: &[f64; 4]) -> Vec<PathSpec> {
    RATES
        .iter()
        .zip(delays_us)
        .map(|(&gbps, &d)| PathSpec {
            gbps,
            delay: Duration::from_us_f64(d),
        })
        .collect()
}

/// Goodput and utilization of one transfer of BYTES over the testbed
/// (utilization: data packets with their headers over the transfer time, against
/// min(host rate, sum of path rates) = 70 Gbit/s).
fn testbed_goodput_utilization(delays_us: &[f64; 4]) -> (f64, f64) {
    let paths: Vec<pair::PathSpec> = RATES
        .iter()
        .zip(delays_us)
        .map(|(&g, &d)| pair::PathSpec::new(g, d))
        .collect();
    let mut tb = Testbed::new(
        1,
        100.0,
        &paths,
        &FlowConfig::default(),
        BufferConfig::default(),
    )
    .unwrap();
    // Messages of the simulator's size, so both transfers are the same packets.
    let mut left = BYTES;
    let mut id = 0;
    while left > 0 {
        let n = left.min(rondo_sim::MESSAGE_BYTES);
        tb.post(id, vec![0; n as usize]).unwrap();
        id += 1;
        left -= n;
    }
    let done = tb.run_until(Instant::from_us(100_000), |tb| {
        tb.receiver().receiver_stats().bytes_delivered == BYTES
    });
    assert!(done, "testbed transfer did not finish");
    let secs = tb.now().saturating_since(Instant::ZERO).as_secs_f64();
    let payload = FlowConfig::default().payload_per_packet() as u64;
    let mut packets = 0;
    let mut left = BYTES;
    while left > 0 {
        let n = left.min(rondo_sim::MESSAGE_BYTES);
        packets += n.div_ceil(payload);
        left -= n;
    }
    let wire_bits = (BYTES + packets * rondo_proto::wire::DATA_HEADER_LEN as u64) * 8;
    (
        BYTES as f64 * 8.0 / secs / 1e9,
        wire_bits as f64 / secs / 1e9 / 70.0,
    )
}

#[test]
fn parallel_matches_the_testbed_on_equal_delays() {
    compare(&[5.0; 4]);
}

#[test]
fn parallel_matches_the_testbed_on_unequal_delays() {
    compare(&[15.0, 5.0, 5.0, 5.0]);
}

fn compare(delays_us: &[f64; 4]) {
    let topo = Topology::Parallel {
        host_gbps: 100.0,
        paths: sim_paths(delays_us),
    };
    let mut sim = Simulator::new(&topo, SimConfig::default()).unwrap();
    sim.add_flow(FlowSpec::transfer(0, 1, BYTES)).unwrap();
    let end = sim.run(Instant::from_us(100_000), &mut |_| {});
    assert_eq!(end, rondo_sim::RunEnd::Done);
    let m = sim.metrics();
    let f = &m.flows[0];
    assert_eq!(f.delivered, BYTES);
    assert_eq!(f.paths, 4);
    let fct = f.fct().unwrap().as_secs_f64();
    let sim_goodput = BYTES as f64 * 8.0 / fct / 1e9;
    let (tb, tb_util) = testbed_goodput_utilization(delays_us);
    eprintln!(
        "goodput: sim {sim_goodput:.2}, testbed {tb:.2} Gbit/s; utilization: sim {:.3}, testbed {tb_util:.3}",
        m.utilization
    );
    assert!(
        (sim_goodput - tb).abs() / tb < 0.03,
        "goodput: sim {sim_goodput} vs testbed {tb}"
    );
    assert!((m.ideal_gbps - 70.0).abs() < 1e-6);
    assert!(
        (m.utilization - tb_util).abs() / tb_util < 0.03,
        "utilization: sim {} vs testbed {tb_util}",
        m.utilization
    );
    assert!(
        m.utilization > 0.85 && m.utilization <= 1.0,
        "{}",
        m.utilization
    );
}
