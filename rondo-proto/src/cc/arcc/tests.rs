//! Unit tests of [`super`].

use super::*;

fn params() -> ArccParams {
    ArccParams {
        q0: 3.0,
        tau_q: Duration::from_ns(800),
        alpha: 0.8,
        alpha_weight: AlphaWeight::History,
        gamma: 0.5,
        fast_correction_factor: 4.0,
        min_window: 1.0,
        queue_estimate: QueueEstimate::Rtt,
        rounding: 0.0,
    }
}

#[test]
fn no_update_before_the_first_ack() {
    let cfg = FlowConfig::default();
    let mut p = ArccPath::new(&cfg, 3.0, Instant::ZERO);
    assert!(p
        .update(Instant::from_us(10), Duration::from_us(20), 0, &params())
        .is_none());
    assert_eq!(p.window, 1.0);
}

#[test]
fn first_update_sets_the_window_to_the_target() {
    let cfg = FlowConfig::default();
    let mut p = ArccPath::new(&cfg, 3.0, Instant::ZERO);
    // 20 ACKs in 10 us = 2 packets/us; T = 20 us -> pipe 40 packets.
    p.acks_in_interval = 20;
    let u = p
        .update(Instant::from_us(10), Duration::from_us(20), 40, &params())
        .unwrap();
    assert!(u.direct);
    assert_eq!(p.ack_rate, 2.0);
    // queue 0 < tau: margin grows from 0.75 to 1.5
    assert!((p.margin - 1.5).abs() < 1e-9);
    assert!((p.window - 41.5).abs() < 1e-9);
}

#[test]
fn large_queue_cuts_the_margin_multiplicatively() {
    let cfg = FlowConfig::default();
    let mut p = ArccPath::new(&cfg, 3.0, Instant::ZERO);
    p.acks_in_interval = 20;
    p.update(Instant::from_us(10), Duration::from_us(20), 40, &params())
        .unwrap();
    // Next interval: same rate, but 44 in flight: Q = 4 packets, d = 2 us > tau 0.8 us.
    p.acks_in_interval = 20;
    let m = p.margin;
    let u = p
        .update(Instant::from_us(20), Duration::from_us(20), 44, &params())
        .unwrap();
    assert!((u.queue - 4.0).abs() < 1e-9);
    assert!((u.queue_delay_us - 2.0).abs() < 1e-9);
    assert!((p.margin - m * 0.8 / 2.0).abs() < 1e-9);
    // 2 us < 4 tau = 3.2 us: smoothed, not direct.
    assert!(!u.direct);
}

/// Two intervals of a path with a pipe near one packet and 2 in flight (one
/// ACK, then none): the queueing delay the second update reads, and whether
/// it grew the margin, with `rounding` packets taken for window rounding.
fn small_path_second_update(rounding: f64) -> (ArccUpdate, f64, f64) {
    let cfg = FlowConfig::default();
    let params = ArccParams {
        rounding,
        ..params()
    };
    let mut p = ArccPath::new(&cfg, 3.0, Instant::ZERO);
    // 0.1 packet/us over T = 12 us: a pipe of 1.2 packets.
    p.acks_in_interval = 1;
    p.update(Instant::from_us(10), Duration::from_us(12), 2, &params)
        .unwrap();
    let m = p.margin;
    // No ACK (so no RTT sample) in the next interval: r = 0.08, pipe 0.96.
    let u = p
        .update(Instant::from_us(20), Duration::from_us(12), 2, &params)
        .unwrap();
    (u, m, p.margin)
}

#[test]
fn an_excess_below_one_packet_is_rounding_with_the_allowance() {
    // The paper's estimate: (2 - 0.96) / 0.08 = 13 us, 16 tau: the margin is
    // cut to 6%, directly.
    let (u, m, after) = small_path_second_update(0.0);
    assert!((u.queue_delay_us - 13.0).abs() < 1e-9, "{u:?}");
    assert!(u.direct && after < 0.1 * m);
    // One packet of rounding: 0.04 / 0.08 = 0.5 us < tau: the margin grows.
    let (u, m, after) = small_path_second_update(1.0);
    assert!((u.queue_delay_us - 0.5).abs() < 1e-9, "{u:?}");
    assert!(!u.direct && after > m);
}
