//! Unit tests of [`super`].

use super::*;
use crate::path::PathState;

/// Two paths of base RTT 12 us at 100 Gbit/s, 1500-byte packets: the
/// reference point, so a = b = 1, BDP 100 packets, target 12 us.
fn setup(initial_bdps: f64) -> (Nscc, Paths) {
    let cfg = FlowConfig {
        paths: 2,
        base_rtt: Some(vec![Duration::from_us(12); 2]),
        ..FlowConfig::default()
    };
    let params = NsccParams {
        initial_window_bdps: initial_bdps,
        ..NsccParams::default()
    };
    let paths = Paths::from_states(
        (0..2)
            .map(|i| {
                let mut p = PathState::new(&cfg, i);
                p.on_rtt_sample(Duration::from_us(12), 0.125);
                p
            })
            .collect(),
    );
    (Nscc::with_params(&cfg, Instant::ZERO, params), paths)
}

/// The ACK of a packet on path 0 with queueing delay `delay_us`.
fn ack(delay_us: f64, ecn: bool) -> AckSample {
    AckSample {
        rtt: Some(Duration::from_us_f64(12.0 + delay_us)),
        ..AckSample::data(0, 0, ecn)
    }
}

fn acks(n: usize, s: &mut Nscc, paths: &Paths, at_us: u64, delay_us: f64, ecn: bool) {
    for _ in 0..n {
        s.on_ack(Instant::from_us(at_us), &ack(delay_us, ecn), paths);
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn the_reference_point_scales_to_one() {
    let (s, _) = setup(1.5);
    let k = s.scale();
    assert!(close(k.a, 1.0) && close(k.b, 1.0), "{k:?}");
    assert!(close(k.bdp, 100.0));
    assert_eq!(k.target, Duration::from_us(12));
    assert!(close(k.alpha, 4.0 / 12.0) && close(k.fi, 5.0));
    assert!(close(k.eta, 0.15) && close(k.fi_scale, 0.25));
    assert!(close(k.max_window, 150.0) && close(s.cwnd(), 150.0));
    // Twice the RTT: a and b double, alpha = 4 a b / target doubles.
    let cfg = FlowConfig {
        network_base_rtt: Some(Duration::from_us(24)),
        ..FlowConfig::default()
    };
    let k = Nscc::new(&cfg, Instant::ZERO).scale();
    assert!(close(k.a, 2.0) && close(k.b, 2.0) && close(k.alpha, 16.0 / 24.0));
}

#[test]
fn fair_increase_above_target_is_paid_every_eight_packets() {
    let (mut s, paths) = setup(0.5);
    let w0 = s.cwnd();
    acks(7, &mut s, &paths, 1, 15.0, false);
    assert_eq!(s.cwnd(), w0, "owed, not yet fulfilled");
    acks(1, &mut s, &paths, 1, 15.0, false);
    assert!(close(s.cwnd(), w0 + 8.0 * 5.0 / w0), "{}", s.cwnd());
}

#[test]
fn proportional_increase_below_target_grows_with_the_distance_to_it() {
    let (mut s, paths) = setup(0.5);
    let w0 = s.cwnd();
    // delay 6 us = target / 2: alpha x 6 us = 2 packets owed per ACK.
    acks(8, &mut s, &paths, 1, 6.0, false);
    let w1 = s.cwnd();
    assert!(close(w1, w0 + 16.0 / w0), "{w1}");
    // delay 9 us: 1 packet per ACK.
    acks(8, &mut s, &paths, 1, 9.0, false);
    assert!(close(s.cwnd(), w1 + 8.0 / w1), "{}", s.cwnd());
}

#[test]
fn near_zero_delay_for_more_than_a_window_of_acks_turns_to_fast_increase() {
    let (mut s, paths) = setup(0.1);
    assert!(close(s.cwnd(), 10.0));
    // ACKs under 1 us, one at a time: between adjustments (every 8th ACK) the
    // proportional increase is only owed; once the run of them is longer than
    // the window, each adds fi_scale at once.
    let mut fast = 0;
    for i in 1..=40u32 {
        let w = s.cwnd();
        acks(1, &mut s, &paths, 1, 0.5, false);
        if i % 8 != 0 {
            let d = s.cwnd() - w;
            if f64::from(i) > w {
                assert!(close(d, 0.25), "ACK {i}: {d}");
                fast += 1;
            } else {
                assert_eq!(d, 0.0, "ACK {i}");
            }
        }
    }
    assert!(fast >= 20, "{fast}");
    // A delay over 1 us ends the run.
    for delay in [2.0, 0.5] {
        let w = s.cwnd();
        acks(1, &mut s, &paths, 1, delay, false);
        assert_eq!(s.cwnd(), w);
    }
}

#[test]
fn ecn_above_target_cuts_by_the_average_excess_once_per_rtt() {
    let (mut s, paths) = setup(1.0);
    let w0 = s.cwnd();
    // delay 20 us, target 12: factor 1 - 0.8 x 8 / 20 = 0.68.
    acks(1, &mut s, &paths, 1, 20.0, true);
    assert!(close(s.cwnd(), w0 * 0.68), "{}", s.cwnd());
    acks(5, &mut s, &paths, 5, 20.0, true);
    assert!(close(s.cwnd(), w0 * 0.68), "once per base RTT");
    assert_eq!(s.decreases(), 1);
    // A huge excess cuts by half at most.
    let (mut s, paths) = setup(1.0);
    acks(1, &mut s, &paths, 1, 400.0, true);
    assert!(close(s.cwnd(), 50.0), "{}", s.cwnd());
}

#[test]
fn ecn_below_target_leaves_the_window_and_eta_comes_once_per_rtt() {
    let (mut s, paths) = setup(0.5);
    let w0 = s.cwnd();
    acks(16, &mut s, &paths, 1, 3.0, true);
    assert_eq!(s.cwnd(), w0);
    // 12 us after the last adjustment: + eta.
    acks(1, &mut s, &paths, 12, 3.0, true);
    assert!(close(s.cwnd(), w0 + 0.15), "{}", s.cwnd());
    acks(1, &mut s, &paths, 13, 3.0, true);
    assert!(close(s.cwnd(), w0 + 0.15));
}

#[test]
fn a_nack_costs_a_packet_and_quick_adapt_cuts_to_what_was_acknowledged() {
    let (mut s, mut paths) = setup(1.0);
    let w0 = s.cwnd();
    s.on_loss(Instant::from_us(2), 0, false, &paths);
    assert!(close(s.cwnd(), w0 - 1.0));
    s.on_loss(Instant::from_us(2), 0, true, &paths); // the RTO's business
    assert!(close(s.cwnd(), w0 - 1.0));
    // 5 ACKs in the first period (T + target = 24 us), then one after it.
    acks(5, &mut s, &paths, 10, 13.0, false);
    paths.set_inflight(0, 3);
    acks(1, &mut s, &paths, 24, 13.0, false);
    assert!(close(s.cwnd(), 6.0), "{}", s.cwnd());
    assert_eq!(s.quick_adapts(), 1);
    // The 3 packets in flight at the cut are not heard; the 4th is.
    acks(3, &mut s, &paths, 25, 13.0, false);
    assert!(close(s.cwnd(), 6.0));
    acks(8, &mut s, &paths, 26, 13.0, false);
    assert!(s.cwnd() > 6.0);
}

#[test]
fn quick_adapt_needs_a_long_delay_and_a_small_achievement() {
    // Delay over 4 targets (48 us) arms it.
    let (mut s, paths) = setup(1.0);
    acks(3, &mut s, &paths, 10, 50.0, false);
    acks(1, &mut s, &paths, 30, 50.0, false);
    assert!(close(s.cwnd(), 4.0), "{}", s.cwnd());
    // Not armed (delay 40 us): no cut.
    let (mut s, paths) = setup(1.0);
    acks(3, &mut s, &paths, 10, 40.0, false);
    acks(1, &mut s, &paths, 30, 40.0, false);
    assert_eq!(s.quick_adapts(), 0);
    // Armed, but 19 >= 150 / 8 packets acknowledged: no cut.
    let (mut s, paths) = setup(1.0);
    acks(19, &mut s, &paths, 10, 50.0, false);
    acks(1, &mut s, &paths, 30, 50.0, false);
    assert_eq!(s.quick_adapts(), 0);
    assert!(s.cwnd() > 50.0);
}

#[test]
fn delay_is_measured_from_the_flows_smallest_base_rtt() {
    // Path 1 is 18 us longer by design; T = 12 us.
    let cfg = FlowConfig {
        paths: 2,
        base_rtt: Some(vec![Duration::from_us(12), Duration::from_us(30)]),
        network_base_rtt: Some(Duration::from_us(12)),
        ..FlowConfig::default()
    };
    let params = NsccParams {
        initial_window_bdps: 0.5,
        ..NsccParams::default()
    };
    let paths = Paths::new(&cfg);
    let mut s = Nscc::with_params(&cfg, Instant::ZERO, params);
    let w0 = s.cwnd();
    let mut a = ack(0.0, false);
    a.path = 1;
    a.rtt = Some(Duration::from_us(30));
    for _ in 0..8 {
        s.on_ack(Instant::from_us(1), &a, &paths);
    }
    // 18 us >= target: fair increase (5 per ACK), not proportional (4 at 0 us).
    assert!(close(s.cwnd(), w0 + 40.0 / w0), "{}", s.cwnd());
    assert!(close(s.avg_delay_us().unwrap(), 18.0));
}

#[test]
fn the_window_stays_between_one_packet_and_maxwnd() {
    let (mut s, paths) = setup(1.5);
    acks(64, &mut s, &paths, 1, 0.0, false);
    assert!(close(s.cwnd(), 150.0));
    for _ in 0..400 {
        s.on_loss(Instant::from_us(3), 1, false, &paths);
    }
    assert!(close(s.cwnd(), 1.0));
    let mut open = [0.0; 2];
    s.open_windows(&paths, &mut open);
    assert_eq!(open, [1.0, 1.0]);
}
