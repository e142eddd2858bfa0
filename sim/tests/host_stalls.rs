//! Hosts that stall (`SimConfig::host_stalls`): a stalled host handles nothing, and
//! handles what reached it meanwhile, in arrival order, when it resumes.

use rondo_proto::time::{Duration, Instant};
use rondo_sim::{FlowSpec, HostStalls, PathSpec, SimConfig, Simulator, Topology};

fn two_paths() -> Topology {
    Topology::Parallel {
        host_gbps: 100.0,
        paths: vec![
            PathSpec {
                gbps: 10.0,
                delay: Duration::from_us(20),
            };
            2
        ],
    }
}

/// A 4 MB transfer with host stalls of `stalls`; the delivery log and the FCT.
fn transfer(stalls: Option<HostStalls>, seed: u64) -> (Vec<rondo_sim::Delivery>, Duration) {
    let cfg = SimConfig {
        seed,
        host_stalls: stalls,
        ..SimConfig::default()
    };
    let mut sim = Simulator::new(&two_paths(), cfg).unwrap();
    sim.log_deliveries(true);
    sim.add_flow(FlowSpec::transfer(0, 1, 4 << 20)).unwrap();
    sim.run(Instant::from_us(1_000_000), &mut |_| {});
    let fct = sim.metrics().flows[0]
        .fct()
        .expect("the transfer completed");
    assert_eq!(sim.metrics().flows[0].delivered, 4 << 20);
    (sim.deliveries().to_vec(), fct)
}

/// The largest number of packets host `host` handled at one instant.
fn largest_batch(log: &[rondo_sim::Delivery], host: usize) -> usize {
    let mut best = 0;
    let mut run = (Instant::MAX, 0);
    for d in log.iter().filter(|d| d.host == host) {
        run = if d.at == run.0 {
            (d.at, run.1 + 1)
        } else {
            (d.at, 1)
        };
        best = best.max(run.1);
    }
    best
}

fn stalls() -> Option<HostStalls> {
    Some(HostStalls {
        mean_gap: Duration::from_us(500),
        length: Duration::from_us(100),
    })
}

#[test]
fn a_stalled_host_handles_its_backlog_at_once_when_it_resumes() {
    let (calm, calm_fct) = transfer(None, 1);
    let (stalled, stalled_fct) = transfer(stalls(), 1);
    // Packets of 1500 B at 10 Gb/s arrive 1.2 us apart on each path: without
    // stalls no more than one per path arrives at one instant; a stall of 50-150 us
    // holds dozens, handled together.
    assert!(largest_batch(&calm, 1) <= 2, "{}", largest_batch(&calm, 1));
    assert!(
        largest_batch(&stalled, 1) >= 20,
        "{}",
        largest_batch(&stalled, 1)
    );
    // The sender's ACKs wait too.
    assert!(
        largest_batch(&stalled, 0) >= 10,
        "{}",
        largest_batch(&stalled, 0)
    );
    assert!(stalled_fct > calm_fct, "{stalled_fct:?} vs {calm_fct:?}");
}

#[test]
fn stalls_follow_the_seed() {
    let (a, fa) = transfer(stalls(), 7);
    let (b, fb) = transfer(stalls(), 7);
    let (_, fc) = transfer(stalls(), 8);
    assert_eq!((a.len(), fa), (b.len(), fb));
    assert!(a
        .iter()
        .zip(&b)
        .all(|(x, y)| x.at == y.at && x.host == y.host));
    assert_ne!(fa, fc, "another seed stalls at other times");
}

#[test]
fn a_zero_gap_or_length_is_refused() {
    for (gap, length) in [(0, 100), (500, 0)] {
        let cfg = SimConfig {
            host_stalls: Some(HostStalls {
                mean_gap: Duration::from_us(gap),
                length: Duration::from_us(length),
            }),
            ..SimConfig::default()
        };
        let e = Simulator::new(&two_paths(), cfg).err().expect("refused");
        assert!(e.to_string().contains("host stalls"), "{e}");
    }
}
