//! Proposition 3 (paper §4.4, App. C.4): with fixed per-path forward delays and
//! constant sending rates, measured accurately, the packet scheduler removes the
//! OOD caused by path-delay heterogeneity; without it the maximum OOD follows
//! eq. (3), OOD_max ~ R x (max D - min D).
//!
//! `fluid_*` drive the engine's own scheduler code (`scheduler::skips` and
//! `UnsentSet`) with transmission opportunities at exactly the proposition's
//! constant rates; `engine_*` run the whole engine over the two-host testbed of `rondo_sim::pair`, where
//! queueing jitter makes rates and delays only approximately constant.

mod common;

use proptest::prelude::*;
use rondo_proto::scheduler::{phase_skip, skips, UnsentSet};
use rondo_proto::*;
use rondo_sim::pair::PathSpec;
use rondo_sim::Testbed;

/// Sends `n` packets over paths with constant rates (packets/us) and fixed
/// delays (us); returns the OOD sampled at every arrival (before it is applied).
#[derive(Clone, Copy, PartialEq)]
enum Sched {
    Off,
    /// Eq. (7): fluid counts, computed once.
    Fluid,
    /// The engine's default: each other path's upcoming opportunities from its
    /// phase (last transmission plus one interval), at every transmission.
    Phase,
}

fn fluid_run(rates: &[f64], delays: &[f64], n: u64, sched: Sched) -> Vec<u64> {
    let p = rates.len();
    let rates_ns: Vec<f64> = rates.iter().map(|r| r / 1e3).collect();
    let delays_ns: Vec<Option<f64>> = delays.iter().map(|d| Some(d * 1e3)).collect();
    let mut skip = vec![0u32; p];
    if sched == Sched::Fluid {
        skips(&rates_ns, &delays_ns, &mut skip);
    }
    let mut last: Vec<Option<f64>> = vec![None; p];
    let mut unsent = UnsentSet::new(0);
    unsent.extend_to(n);
    // Transmission opportunities: path q sends at k / rate_q, in time order.
    let mut next: Vec<(f64, usize)> = (0..p).map(|q| (0.5 / rates[q], q)).collect();
    let mut arrivals: Vec<(f64, u64)> = Vec::with_capacity(n as usize);
    while !unsent.is_empty() {
        let (i, _) = next
            .iter()
            .enumerate()
            .min_by(|a, b| a.1 .0.total_cmp(&b.1 .0))
            .unwrap();
        let (t, q) = next[i];
        let k = match sched {
            Sched::Phase => {
                // As the engine estimates it: last send plus one interval.
                let phase: Vec<f64> = (0..p)
                    .map(|j| last[j].map_or(t * 1e3, |l| (l + 1.0 / rates[j]) * 1e3))
                    .collect();
                phase_skip(q, t * 1e3, &rates_ns, &delays_ns, &phase)
            }
            _ => skip[q] as u64,
        };
        last[q] = Some(t);
        let psn = unsent.kth(k + 1).unwrap();
        unsent.mark_sent(psn);
        arrivals.push((t + delays[q], psn));
        next[i].0 += 1.0 / rates[q];
    }
    arrivals.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut received = vec![false; n as usize];
    let (mut expected, mut highest) = (0u64, None::<u64>);
    let mut ood = Vec::with_capacity(n as usize);
    for (_, psn) in arrivals {
        ood.push(highest.map_or(0, |h| h.saturating_sub(expected)));
        highest = Some(highest.map_or(psn, |h| h.max(psn)));
        received[psn as usize] = true;
        while expected < n && received[expected as usize] {
            expected += 1;
        }
    }
    ood
}

/// Eq. (3): R x (max D - min D), with R the aggregate rate in packets/us.
fn eq3(rates: &[f64], delays: &[f64]) -> f64 {
    let r: f64 = rates.iter().sum();
    let (lo, hi) = delays
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), &d| (lo.min(d), hi.max(d)));
    r * (hi - lo)
}

proptest! {
    #![proptest_config(common::proptest_config(64))]

    #[test]
    fn fluid_scheduler_keeps_ood_at_most_two(
        rates in prop::collection::vec(0.8f64..2.1, 2..=4),
        extra in prop::collection::vec(0.0f64..25.0, 4),
    ) {
        // 10-25 Gbps paths of 1500-byte packets; one-way delays 5 us + up to 25 us.
        let delays: Vec<f64> = (0..rates.len()).map(|i| 5.0 + extra[i]).collect();
        // The proposition is about the steady state: in the last R x dD packets
        // fewer PSNs remain than the slow paths would skip, and the end of the
        // transfer reorders (bounded by eq. (3)); leave them out. Leave out as many
        // at the start too: until every path has sent, the phase of a path that has
        // not is taken as "now" (the engine does not schedule then: it waits for
        // stable delay samples on every path), and one start-up case reached 3.
        let tail = eq3(&rates, &delays).ceil() as usize + 8;
        let steady = |v: Vec<u64>| v[tail..v.len() - tail].iter().copied().max().unwrap();
        // The engine's scheduler (phase counts): at most 2, as the proposition says.
        let max_phase = steady(fluid_run(&rates, &delays, 6000, Sched::Phase));
        prop_assert!(max_phase <= 2, "OOD with the scheduler reached {max_phase}");
        // Eq. (7) as written counts the other paths' opportunities as a fluid; each
        // other path's real count is off by less than one packet depending on its
        // phase, the sum is rounded, and two packets' errors can meet with opposite
        // signs. Worst seen over 40,000 seeded cases of these ranges: 2, 5, 7 for
        // P = 2, 3, 4 (a bound of 2 (P - 1), from 400 cases, was exceeded in CI
        // with 7 at P = 4), so 2 P - 1. The engine's phase count above stays at 0.
        let max_fluid = steady(fluid_run(&rates, &delays, 6000, Sched::Fluid));
        let bound = 2 * rates.len() as u64 - 1;
        prop_assert!(max_fluid <= bound, "OOD with eq. (7) reached {max_fluid} (bound {bound})");
        let without = fluid_run(&rates, &delays, 6000, Sched::Off);
        let max_without = *without.iter().max().unwrap() as f64;
        let predicted = eq3(&rates, &delays);
        if predicted >= 10.0 {
            let err = (max_without - predicted).abs() / predicted;
            prop_assert!(err <= 0.2, "max OOD {max_without} vs eq. (3) {predicted:.1}");
        }
    }
}

/// Runs the engine over parallel paths and returns the receiver's OOD distribution
/// measured from one slowest-path RTT after the scheduler came on (or, without the
/// scheduler, after the same warm-up), plus the measured aggregate packet rate.
fn engine_run(
    rates: &[f64],
    extra_us: &[f64],
    scheduler: bool,
) -> (Histogram, f64, Option<Instant>) {
    let paths: Vec<PathSpec> = rates
        .iter()
        .zip(extra_us)
        .map(|(&g, &e)| PathSpec::new(g, 2.0 + e))
        .collect();
    let cfg = FlowConfig {
        scheduler,
        ..FlowConfig::default()
    };
    let mut tb = Testbed::new(3, 100.0, &paths, &cfg, BufferConfig::default()).unwrap();
    tb.post(1, vec![7u8; 24_000_000]).unwrap();
    let warm = Instant::from_us(400);
    tb.run_until(warm, |_| false);
    tb.clear_receiver_distributions();
    let start_bytes = tb.receiver().receiver_stats().bytes_delivered;
    let end = Instant::from_us(1600);
    tb.run_until(end, |_| false);
    let s = tb.receiver().receiver_stats();
    let pkts = (s.bytes_delivered - start_bytes) as f64
        / FlowConfig::default().payload_per_packet() as f64;
    (
        s.ood.clone(),
        pkts / 1200.0,
        tb.sender().scheduler_enabled_at(),
    )
}

#[test]
fn engine_scheduler_cuts_ood_under_fixed_delay_difference() {
    // Four 25 Gbps paths, path 3 with 10 us more one-way delay (Fig. 4 style).
    let rates = [25.0; 4];
    let extra = [0.0, 0.0, 0.0, 10.0];
    let (with, _, enabled) = engine_run(&rates, &extra, true);
    let enabled = enabled.expect("the scheduler must come on");
    assert!(
        enabled < Instant::from_us(400),
        "scheduler enabled late: {enabled:?}"
    );
    let (without, pkt_rate, _) = engine_run(&rates, &extra, false);
    eprintln!(
        "with scheduler: OOD mean {:.2} p99 {} max {}; without: mean {:.2} p99 {} max {}; eq. (3) {:.1}",
        with.mean(), with.quantile(0.99), with.max(), without.mean(), without.quantile(0.99), without.max(), pkt_rate * 10.0
    );
    // Eq. (3) with the measured aggregate rate and the 10 us delay difference.
    let predicted = pkt_rate * 10.0;
    let err = (without.max() as f64 - predicted).abs() / predicted;
    assert!(
        err <= 0.2,
        "max OOD without scheduler {} vs eq. (3) {predicted:.1}",
        without.max()
    );
    // Per-packet queueing jitter on each path is what remains (DESIGN.md pitfalls);
    // the measured values are printed above.
    assert!(
        with.quantile(0.99) <= 18,
        "p99 OOD with scheduler {}",
        with.quantile(0.99)
    );
    assert!(with.max() <= 25, "max OOD with scheduler {}", with.max());
    assert!(
        with.mean() * 10.0 < without.mean(),
        "mean {} vs {}",
        with.mean(),
        without.mean()
    );
}

#[test]
fn engine_scheduler_handles_four_different_delays() {
    let (with, _, enabled) = engine_run(&[25.0; 4], &[0.0, 5.0, 12.0, 25.0], true);
    assert!(enabled.is_some());
    eprintln!(
        "four delays: OOD mean {:.2} p99 {} max {}",
        with.mean(),
        with.quantile(0.99),
        with.max()
    );
    assert!(with.quantile(0.99) <= 8, "p99 {}", with.quantile(0.99));
    assert!(with.max() <= 15, "max {}", with.max());
}

/// Sixteen equal paths behind a 25 Gbps host NIC: the bottleneck is shared, every
/// path has the same delay, and most paths wait for their window most of the time.
/// The scheduler must not invent reordering there (paper §6.3: no out-of-order
/// arrivals under incast). It once did: a path waiting for its window counted as one
/// upcoming opportunity for any delay-estimate difference, however small.
#[test]
fn engine_scheduler_adds_no_reordering_on_equal_paths() {
    let paths = vec![PathSpec::new(10.0, 3.0); 16];
    let run = |scheduler| {
        let cfg = FlowConfig {
            paths: 16,
            scheduler,
            ..FlowConfig::default()
        };
        let mut tb = Testbed::new(5, 25.0, &paths, &cfg, BufferConfig::default()).unwrap();
        tb.post(1, vec![7u8; 6_000_000]).unwrap();
        tb.run_until(Instant::from_us(300), |_| false);
        tb.clear_receiver_distributions();
        tb.run_until(Instant::from_us(1500), |_| false);
        (
            tb.receiver().receiver_stats().ood.clone(),
            tb.sender().scheduler_enabled_at(),
        )
    };
    let (with, enabled) = run(true);
    let (without, _) = run(false);
    eprintln!(
        "16 equal paths: with scheduler OOD mean {:.3} p99 {} max {} (enabled {enabled:?}); without mean {:.3} max {}",
        with.mean(),
        with.quantile(0.99),
        with.max(),
        without.mean(),
        without.max()
    );
    assert!(enabled.is_some(), "the scheduler must come on");
    // Measured: with mean 0.22, p99 2, max 5; without mean 0.08, max 1. Before the
    // fix: with mean 16.5, p99 46, max 56. What remains is delay-estimate noise.
    assert!(with.quantile(0.99) <= 3, "p99 {}", with.quantile(0.99));
    assert!(
        with.max() <= without.max() + 7,
        "max {} vs {}",
        with.max(),
        without.max()
    );
    assert!(
        with.mean() <= 0.5,
        "mean {} vs {}",
        with.mean(),
        without.mean()
    );
}
