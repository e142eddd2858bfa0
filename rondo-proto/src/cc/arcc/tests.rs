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
        stall_allowance_us: 0.0,
    }
}

/// One update of path `p` with allowance `w` at `at_us`, base RTT `rtt_us`,
/// `inflight` packets in flight.
fn update(
    p: &mut ArccPath,
    w: &mut Allowance,
    at_us: u64,
    rtt_us: u64,
    inflight: u32,
    params: &ArccParams,
) -> Option<ArccUpdate> {
    p.update(
        w,
        Instant::from_us(at_us),
        Duration::from_us(rtt_us),
        inflight,
        params,
        Duration::from_us(rtt_us / 2),
    )
}

#[test]
fn no_update_before_the_first_ack() {
    let cfg = FlowConfig::default();
    let mut p = ArccPath::new(3.0, Instant::ZERO);
    let mut w = Allowance::new(cfg.initial_window);
    assert!(update(&mut p, &mut w, 10, 20, 0, &params()).is_none());
    assert_eq!(w.window, 1.0);
}

#[test]
fn first_update_sets_the_window_to_the_target() {
    let cfg = FlowConfig::default();
    let mut p = ArccPath::new(3.0, Instant::ZERO);
    let mut w = Allowance::new(cfg.initial_window);
    // 20 ACKs in 10 us = 2 packets/us; T = 20 us -> pipe 40 packets.
    p.acks_in_interval = 20;
    let u = update(&mut p, &mut w, 10, 20, 40, &params()).unwrap();
    assert!(u.direct);
    assert_eq!(p.ack_rate, 2.0);
    // queue 0 < tau: margin grows from 0.75 to 1.5
    assert!((p.margin - 1.5).abs() < 1e-9);
    assert!((w.window - 41.5).abs() < 1e-9);
}

#[test]
fn large_queue_cuts_the_margin_multiplicatively() {
    let cfg = FlowConfig::default();
    let mut p = ArccPath::new(3.0, Instant::ZERO);
    let mut w = Allowance::new(cfg.initial_window);
    p.acks_in_interval = 20;
    update(&mut p, &mut w, 10, 20, 40, &params()).unwrap();
    // Next interval: same rate, but 44 in flight: Q = 4 packets, d = 2 us > tau 0.8 us.
    p.acks_in_interval = 20;
    let m = p.margin;
    let u = update(&mut p, &mut w, 20, 20, 44, &params()).unwrap();
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
    let mut p = ArccPath::new(3.0, Instant::ZERO);
    let mut w = Allowance::new(cfg.initial_window);
    // 0.1 packet/us over T = 12 us: a pipe of 1.2 packets.
    p.acks_in_interval = 1;
    update(&mut p, &mut w, 10, 12, 2, &params).unwrap();
    let m = p.margin;
    // No ACK (so no RTT sample) in the next interval: r = 0.08, pipe 0.96.
    let u = update(&mut p, &mut w, 20, 12, 2, &params).unwrap();
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

/// The margin a path reaches after `updates` queue-free intervals at 1 packet/us
/// (T = 20 us), with a stall allowance of `allowance_us`.
fn margin_after_quiet_updates(allowance_us: f64, updates: u32) -> f64 {
    let cfg = FlowConfig::default();
    let params = ArccParams {
        stall_allowance_us: allowance_us,
        ..params()
    };
    let mut p = ArccPath::new(3.0, Instant::ZERO);
    let mut w = Allowance::new(cfg.initial_window);
    for i in 1..=updates {
        p.acks_in_interval = 10;
        update(&mut p, &mut w, u64::from(i) * 10, 20, 20, &params).unwrap();
    }
    p.margin
}

#[test]
fn a_stall_allowance_lets_the_margin_grow_to_what_the_ack_rate_brings_in_it() {
    // Without it the margin stops at q0 = 3 packets.
    assert!((margin_after_quiet_updates(0.0, 20) - 3.0).abs() < 1e-9);
    // With 40 us at 1 packet/us: 40 packets, reached in steps of a quarter.
    let m = margin_after_quiet_updates(40.0, 20);
    assert!((m - 40.0).abs() < 1e-9, "{m}");
    assert!((margin_after_quiet_updates(40.0, 1) - 10.75).abs() < 1e-9);
    // Below q0's worth it changes nothing.
    assert!((margin_after_quiet_updates(1.0, 20) - 3.0).abs() < 1e-9);
}

#[test]
fn tau_q_is_at_least_the_stall_allowance() {
    let cfg = FlowConfig {
        paths: 2,
        base_rtt: Some(vec![Duration::from_us(20); 2]),
        ..FlowConfig::default()
    };
    let paths = Paths::new(&cfg);
    let a = Arcc::new(&cfg, Instant::ZERO, &paths);
    let paper = a.tau_q();
    let a = Arcc::new(
        &FlowConfig {
            stall_allowance: Duration::from_ms(4),
            ..cfg.clone()
        },
        Instant::ZERO,
        &paths,
    );
    assert!(paper < Duration::from_us(4));
    assert_eq!(a.tau_q(), Duration::from_ms(4));
}

#[test]
fn a_full_receiver_halves_the_stall_allowance_once_per_rtt() {
    let cfg = FlowConfig {
        paths: 2,
        base_rtt: Some(vec![Duration::from_us(20); 2]),
        stall_allowance: Duration::from_ms(4),
        ..FlowConfig::default()
    };
    let paths = Paths::new(&cfg);
    let mut a = Arcc::new(&cfg, Instant::ZERO, &paths);
    assert_eq!(a.tau_q(), Duration::from_ms(4));
    let t = Instant::from_us(100);
    assert!(a.on_receiver_full(t, &paths));
    assert_eq!(a.tau_q(), Duration::from_ms(2));
    // Within an RTT (the initial 20 us here): no second cut.
    assert!(!a.on_receiver_full(t + Duration::from_us(5), &paths));
    assert_eq!(a.tau_q(), Duration::from_ms(2));
    assert!(a.on_receiver_full(t + Duration::from_us(25), &paths));
    assert_eq!(a.tau_q(), Duration::from_ms(1));
    // Without an allowance tau_q is the paper's, before and after.
    let paper = Arcc::new(
        &FlowConfig {
            stall_allowance: Duration::ZERO,
            ..cfg.clone()
        },
        Instant::ZERO,
        &paths,
    );
    let tau = paper.tau_q();
    let mut p = paper;
    assert!(p.on_receiver_full(t, &paths));
    assert_eq!(p.tau_q(), tau);
}

#[test]
fn a_window_below_one_packet_spaces_sends_by_the_rtt_over_the_window() {
    let cfg = FlowConfig {
        paths: 1,
        base_rtt: Some(vec![Duration::from_us(20)]),
        min_window: 0.1,
        probing: false,
        ..FlowConfig::default()
    };
    let mut paths = Paths::new(&cfg);
    let mut a = Arcc::new(&cfg, Instant::ZERO, &paths);
    // A window of one packet never waits.
    a.on_sent(Instant::from_us(50), 0, &paths);
    assert!(a.any_open(&paths));
    assert_eq!(a.poll_timeout(), None);
    // A quarter of a packet: after a send the path waits RTT / W = 80 us (no RTT
    // sample yet: the base RTT), acknowledged or not.
    a.allowance[0].window = 0.25;
    a.on_sent(Instant::from_us(100), 0, &paths);
    let mut open = [1.0];
    a.open_windows(&paths, &mut open);
    assert_eq!(open, [0.0]);
    assert!(!a.any_open(&paths));
    assert_eq!(a.poll_timeout(), Some(Instant::from_us(180)));
    assert!(
        !a.on_tick(Instant::from_us(179), &paths, &crate::cc::Backlogged)
            .opened
    );
    assert!(!a.any_open(&paths));
    assert!(
        a.on_tick(Instant::from_us(180), &paths, &crate::cc::Backlogged)
            .opened
    );
    assert!(a.any_open(&paths));
    // With RTT samples the smoothed RTT, queueing included, sets the spacing:
    // the path's rate falls as its queue grows, as a window's does.
    paths[0].srtt = Some(Duration::from_us(40));
    a.on_ack(Instant::from_us(190), &AckSample::data(0, 0, false), &paths);
    a.on_sent(Instant::from_us(200), 0, &paths);
    let gate = a.paths[0].gate.unwrap();
    assert!(a.poll_timeout().unwrap() <= gate);
    let spacing = gate.saturating_since(Instant::from_us(200)).as_us_f64();
    assert!((spacing - 160.0).abs() < 1.0, "{spacing}");
    // Its update intervals run on until an ACK falls into one: an interval
    // with nothing in it updates nothing.
    paths.set_inflight(0, 1);
    let due = a.path_due[0].unwrap();
    a.paths[0].acks_in_interval = 0;
    a.paths[0].probe_acks_in_interval = 0;
    let updates = a.paths[0].updates;
    assert!(!a.on_tick(due, &paths, &crate::cc::Backlogged).updated);
    assert_eq!(a.paths[0].updates, updates);
    assert!(a.path_due[0].unwrap() > due);
    a.on_ack(due, &AckSample::data(0, 1, false), &paths);
    let next = a.path_due[0].unwrap();
    assert!(a.on_tick(next, &paths, &crate::cc::Backlogged).updated);
    assert_eq!(a.paths[0].updates, updates + 1);
}

#[test]
fn the_pipe_covers_the_time_the_receiver_holds_its_acks() {
    // 2 packets/us over T = 20 us: a pipe of 40 packets with an ACK per packet,
    // 44 when the receiver holds each packet 2 us before acknowledging it.
    for (held_us, pipe) in [(0, 40.0), (2, 44.0)] {
        let mut p = ArccPath::new(3.0, Instant::ZERO);
        let mut w = Allowance::new(1.0);
        p.acks_in_interval = 20;
        p.interval_hold_sum_ps = 20 * Duration::from_us(held_us).as_ps();
        update(&mut p, &mut w, 10, 20, pipe as u32, &params()).unwrap();
        assert!((p.hold_us - held_us as f64).abs() < 1e-9);
        // Nothing in flight beyond the pipe is a queue: the margin grows.
        assert!((w.window - (pipe + 1.5)).abs() < 1e-9, "{}", w.window);
    }
}

/// A one-path flow of `cfg` (refused by the receiver first when `refused`)
/// gets 41 probe ACKs in the first 20 us interval of a 40 us path, which the
/// update folds into a window of about 84 packets (r T + q); then one send
/// leaves 53 packets of open window. Returns whether the path is open after
/// it, its gate, and the window.
fn after_probe_conversion(cfg: &FlowConfig, refused: bool) -> (bool, Option<Instant>, f64) {
    let probe = AckSample {
        probe: true,
        rtt: Some(Duration::from_us(40)),
        ..AckSample::data(0, 0, false)
    };
    let mut paths = Paths::new(cfg);
    let mut a = Arcc::new(cfg, Instant::ZERO, &paths);
    if refused {
        assert!(a.on_receiver_full(Instant::from_ns(10_000), &paths));
    }
    for k in 0..41 {
        a.on_ack(Instant::from_ns(20_000 + k * 400), &probe, &paths);
    }
    let due = a.path_due[0].unwrap();
    paths.set_inflight(0, 30);
    assert!(a.on_tick(due, &paths, &crate::cc::Backlogged).updated);
    let w = a.window(0);
    paths.set_inflight(0, 31);
    a.on_sent(due, 0, &paths);
    (a.any_open(&paths), a.paths[0].gate, w)
}

#[test]
fn probe_bought_packets_go_at_a_quarter_above_the_paths_new_rate() {
    let run = |burst: Option<f64>| {
        let cfg = FlowConfig {
            paths: 1,
            probe_pacing_burst: burst,
            ..FlowConfig::default()
        };
        after_probe_conversion(&cfg, false)
    };
    // The paper's rule: the open window goes out as fast as the flow pacer lets it.
    let (open, gate, w) = run(None);
    assert!(w > 80.0, "{w}");
    assert!(open);
    assert_eq!(gate, None);
    // Paced: the path waits T / (1.25 W) after the send.
    let (open, gate, w) = run(Some(4.0));
    assert!(!open);
    let due = Instant::from_ns(20_000) + Duration::from_us(20);
    let wait = gate.unwrap().saturating_since(due).as_us_f64();
    let want = 40.0 / (1.25 * w);
    assert!((wait - want).abs() < 0.01, "{wait} against {want}");
}

#[test]
fn a_refused_flow_paces_what_probe_acks_buy() {
    // `refused`: the receiver refused a packet for want of buffer before the
    // probe ACKs came.
    let gate = |after_refusal: bool, refused: bool| {
        let cfg = FlowConfig {
            paths: 1,
            probe_pacing_after_refusal: after_refusal,
            ..FlowConfig::default()
        };
        after_probe_conversion(&cfg, refused).1
    };
    // Never refused: the paper's rule, whatever the setting.
    assert_eq!(gate(true, false), None);
    // Refused: paced from then on, unless the setting is off.
    assert!(gate(true, true).is_some());
    assert_eq!(gate(false, true), None);
}

/// A two-path flow whose path 0 has a candidate base RTT of 30 us (20 us on
/// both paths for 400 us, startup probing long over, then path 0 takes 30 us
/// until a window of two base RTTs ends): a confirming phase has just started.
fn with_a_candidate() -> (Arcc, Paths, Instant) {
    with_a_candidate_from(None)
}

/// [`with_a_candidate`], with `configured` as both paths' configured base RTT
/// (the topology's).
fn with_a_candidate_from(configured: Option<Duration>) -> (Arcc, Paths, Instant) {
    let cfg = FlowConfig {
        paths: 2,
        base_rtt_window_rtts: Some(2.0),
        base_rtt: configured.map(|t| vec![t; 2]),
        ..FlowConfig::default()
    };
    let paths = Paths::new(&cfg);
    let mut a = Arcc::new(&cfg, Instant::ZERO, &paths);
    let data = |path, rtt_us| AckSample {
        rtt: Some(Duration::from_us(rtt_us)),
        ..AckSample::data(path, 0, false)
    };
    let mut t = 0;
    while t <= 400_000 || a.paths[0].base_candidate.is_none() {
        t += 1_000;
        let now = Instant::from_ns(t);
        a.on_ack(now, &data(1, 20), &paths);
        a.on_ack(now, &data(0, if t <= 400_000 { 20 } else { 30 }), &paths);
        assert!(t < 500_000, "no candidate");
    }
    (a, paths, Instant::from_ns(t))
}

/// The ACK of a probe of `path` sent at `sent`, arriving at `now`.
fn probe_ack(path: usize, sent: Instant, now: Instant) -> AckSample {
    AckSample {
        probe: true,
        probe_rtt: Some(now.saturating_since(sent)),
        ..AckSample::data(path, 0, false)
    }
}

/// A path whose RTT grows for good (its samples over a whole window above the
/// base RTT by more than 4 tau_q) gets a candidate; probes confirm it only when
/// they are served with a round trip as long (the path has room and the delay
/// is its own), and then the flow probes that path alone to take it back up.
/// A queue standing at a busy bottleneck serves no probe: the base RTT stays.
#[test]
fn a_longer_base_rtt_is_taken_when_probes_confirm_it() {
    let run = |probe_rtt_us: Option<u64>| {
        let (mut a, paths, now) = with_a_candidate();
        assert!(!a.probing(now));
        assert_eq!(a.paths[0].base_candidate, Some(Duration::from_us(30)));
        assert!(a.paths[1].base_candidate.is_none());
        // Probes to confirm, on path 0 alone.
        assert!(a.sends_probes(now));
        assert!(a.probes_path(now, 0) && !a.probes_path(now, 1));
        if let Some(us) = probe_rtt_us {
            for k in 1..=4 {
                let at = now + Duration::from_us(k);
                a.on_ack(at, &probe_ack(0, at - Duration::from_us(us), at), &paths);
            }
        }
        let now = now + Duration::from_us(5);
        (a.base_rtt(0), a.probing(now), a.probes_path(now, 1))
    };
    let us = Duration::from_us;
    // Four probes served in 30 us: taken, and path 0 alone is probed.
    assert_eq!(run(Some(30)), (us(30), true, false));
    // Served at once (the longer RTTs were a queue, drained since): kept.
    assert_eq!(run(Some(21)), (us(20), false, false));
    // None served: kept.
    assert_eq!(run(None).0, us(20));
}

/// A configured base RTT (the topology's) starts the measurement when the base
/// RTT may expire: probes confirm a longer one as they do a measured one (fig20
/// with `base_rtt = "topology"`: the path whose delay grew is used again). With
/// no expiry it stays what the configuration says.
#[test]
fn a_configured_base_rtt_expires_as_a_measured_one() {
    let us = Duration::from_us;
    let (mut a, paths, now) = with_a_candidate_from(Some(us(20)));
    assert_eq!(a.base_rtt(0), us(20));
    assert_eq!(a.paths[0].base_candidate, Some(us(30)));
    for k in 1..=4 {
        let at = now + us(k);
        a.on_ack(at, &probe_ack(0, at - us(30), at), &paths);
    }
    assert_eq!((a.base_rtt(0), a.base_rtt(1)), (us(30), us(20)));

    let cfg = FlowConfig {
        paths: 1,
        base_rtt: Some(vec![us(20)]),
        ..FlowConfig::default()
    };
    let paths = Paths::new(&cfg);
    let mut a = Arcc::new(&cfg, Instant::ZERO, &paths);
    let sample = AckSample {
        rtt: Some(us(30)),
        ..AckSample::data(0, 0, false)
    };
    for t in 1..=100 {
        a.on_ack(Instant::from_us(10 * t), &sample, &paths);
    }
    assert_eq!(a.base_rtt(0), us(20));
    // Nor without probes to confirm a longer one.
    let cfg = FlowConfig {
        base_rtt_window_rtts: Some(2.0),
        probing: false,
        ..cfg
    };
    let mut a = Arcc::new(&cfg, Instant::ZERO, &paths);
    for t in 1..=100 {
        a.on_ack(Instant::from_us(10 * t), &sample, &paths);
    }
    assert_eq!(a.base_rtt(0), us(20));
}

/// A window below one packet is one packet per round trip / W_p from the send
/// of the packet whose ACK measured it: the ACK of the path's latest packet
/// moves the gate that the (lagging) smoothed RTT set, the ACK of an older one
/// does not.
#[test]
fn the_ack_of_a_sub_packet_paths_latest_packet_clocks_its_gate() {
    let us = Duration::from_us;
    let cfg = FlowConfig {
        paths: 1,
        base_rtt: Some(vec![us(20)]),
        min_window: 0.1,
        probing: false,
        ..FlowConfig::default()
    };
    let mut paths = Paths::new(&cfg);
    let mut a = Arcc::new(&cfg, Instant::ZERO, &paths);
    a.allowance[0].window = 0.25;
    // A smoothed RTT of 100 us from a queue that has drained since: the send
    // at 100 us gates the path until 500 us.
    paths[0].srtt = Some(us(100));
    a.on_sent(Instant::from_us(100), 0, &paths);
    paths[0].last_sent = Some(Instant::from_us(100));
    assert_eq!(a.paths[0].gate, Some(Instant::from_us(500)));
    let ack = |rtt_us: u64| AckSample {
        rtt: Some(us(rtt_us)),
        ..AckSample::data(0, 0, false)
    };
    // The ACK of an older packet (sent at 90 us) leaves it.
    a.on_ack(Instant::from_us(110), &ack(20), &paths);
    assert_eq!(a.paths[0].gate, Some(Instant::from_us(500)));
    // The packet sent at 100 us took 20 us: the next goes at 100 + 20 / 0.25.
    a.on_ack(Instant::from_us(120), &ack(20), &paths);
    assert_eq!(a.paths[0].gate, Some(Instant::from_us(180)));
    assert_eq!(a.next_gate, Some(Instant::from_us(180)));
    assert!(!a.any_open(&paths));
    assert!(
        a.on_tick(Instant::from_us(180), &paths, &crate::cc::Backlogged)
            .opened
    );
    assert!(a.any_open(&paths));
    // A window of a packet or more has no gate.
    a.allowance[0].window = 1.0;
    paths[0].last_sent = Some(Instant::from_us(200));
    a.on_ack(Instant::from_us(220), &ack(20), &paths);
    assert_eq!(a.paths[0].gate, None);
}

/// Which phase sent a probe decides what its ACK does, whenever it arrives: a
/// probe sent to confirm a base RTT buys nothing, also when its ACK comes
/// after the confirming phase or in the probing phase the confirmation
/// started; a probe of an ordinary probing phase buys a packet, also when its
/// ACK comes after the phase ended and a confirming phase has run.
#[test]
fn a_probe_ack_counts_by_the_phase_that_sent_the_probe() {
    let us = Duration::from_us;
    let (mut a, paths, t0) = with_a_candidate();
    let phase = a.probe_phase();
    let credit = |a: &Arcc, path: usize| {
        (
            a.allowance[path].probe_credit,
            a.paths[path].probe_acks_in_interval,
        )
    };
    // Sent in the confirming phase, acknowledged after it.
    let before = credit(&a, 0);
    let late = t0 + phase + us(3);
    a.on_ack(late, &probe_ack(0, t0 + us(1), late), &paths);
    assert!(!a.probing(late) && !a.sends_probes(late));
    assert_eq!(credit(&a, 0), before);
    // An ordinary probing phase, its probe acknowledged after it ended.
    let p0 = late + us(10);
    a.start_probing(p0, p0 + phase);
    let end = p0 + phase + us(5);
    assert!(!a.probing(end));
    let (credit0, acks0) = credit(&a, 1);
    a.on_ack(end, &probe_ack(1, p0 + us(2), end), &paths);
    assert_eq!(credit(&a, 1), (credit0 + 1, acks0 + 1));
    // A probe sent before the confirming phase, acknowledged in it: ordinary.
    let (mut a, paths, t0) = with_a_candidate();
    let in_it = t0 + us(4);
    assert!(a.sends_probes(in_it) && !a.probing(in_it));
    let (credit0, acks0) = credit(&a, 0);
    a.on_ack(in_it, &probe_ack(0, t0 - us(20), in_it), &paths);
    assert_eq!(credit(&a, 0), (credit0 + 1, acks0 + 1));
}

/// A flow of one path (base RTT 20 us, Tu 10 us) with `inflight` packets in
/// flight, after two ACKs in its first interval and the update at 30 us that
/// takes them: an ACK rate of 0.2 packets per us. With the ACK it used.
fn one_path_after_two_acks(cfg: &FlowConfig, inflight: u32) -> (Arcc, Paths, AckSample) {
    let us = Duration::from_us;
    let mut paths = Paths::new(cfg);
    paths[0].srtt = Some(us(20));
    for _ in 0..inflight {
        paths.add_in_flight(0);
    }
    let mut a = Arcc::new(cfg, Instant::ZERO, &paths);
    let ack = AckSample {
        rtt: Some(us(20)),
        ..AckSample::data(0, 0, false)
    };
    a.on_ack(Instant::from_us(20), &ack, &paths);
    a.on_ack(Instant::from_us(25), &ack, &paths);
    a.on_tick(Instant::from_us(30), &paths, &crate::cc::Backlogged);
    (a, paths, ack)
}

/// `FlowConfig::intervals_run_on`: an update interval without an ACK sets no
/// timer and runs on; the ACK that falls into it brings the update at once, and
/// that update counts for the intervals it lasted (the ACK-rate EWMA keeps
/// alpha to that power). Off (the default), the path updates at every Tu,
/// measuring a rate of zero in the empty intervals.
#[test]
fn an_interval_without_an_ack_runs_on_until_one_comes() {
    let us = Duration::from_us;
    let run = |run_on: bool| {
        let cfg = FlowConfig {
            paths: 1,
            base_rtt: Some(vec![us(20)]),
            probing: false,
            intervals_run_on: run_on,
            ..FlowConfig::default()
        };
        let (mut a, paths, ack) = one_path_after_two_acks(&cfg, 1);
        assert_eq!(a.ack_rate(0), 0.2);
        // No ACK from 30 us to 70 us, then one.
        for t in [40, 50, 60] {
            a.on_tick(Instant::from_us(t), &paths, &crate::cc::Backlogged);
        }
        let waiting = a.poll_timeout();
        a.on_ack(Instant::from_us(70), &ack, &paths);
        let due = a.poll_timeout();
        a.on_tick(Instant::from_us(70), &paths, &crate::cc::Backlogged);
        (waiting, due, a.ack_rate(0))
    };
    // Run on: nothing due while it waits, the ACK's update at 70 us, one ACK
    // in 40 us over four intervals.
    let (waiting, due, rate) = run(true);
    assert_eq!(waiting, None);
    assert_eq!(due, Some(Instant::from_us(70)));
    let kept = 0.8f64.powi(4);
    assert!(
        (rate - (kept * 0.2 + (1.0 - kept) / 40.0)).abs() < 1e-12,
        "{rate}"
    );
    // Every Tu: three zero samples, then the update due at 70 us takes the ACK
    // (one in 10 us).
    let (waiting, due, rate) = run(false);
    assert_eq!(waiting, Some(Instant::from_us(70)));
    assert_eq!(due, Some(Instant::from_us(70)));
    let every_tu = 0.8 * (0.2 * 0.8f64.powi(3)) + 0.2 * 0.1;
    assert!((rate - every_tu).abs() < 1e-12, "{rate}");
}

/// A flow with data waiting whose only path is shut, with more in flight than
/// its window and no ACK since its last update: every later update without
/// an ACK cuts the margin, so none opens the window and the ticks may wait
/// for the flow's next event (`ticks_idle_until` says `Instant::MAX`); with an
/// ACK in the interval the next update may open it, and nothing waits.
#[test]
fn empty_updates_of_a_shut_window_wait_for_the_next_ack() {
    let us = Duration::from_us;
    let cfg = FlowConfig {
        paths: 1,
        base_rtt: Some(vec![us(20)]),
        probing: false,
        ..FlowConfig::default()
    };
    let backlogged = &crate::cc::Backlogged;
    // A pipe of 4 packets and a window of 4 plus the margin.
    let start = |inflight: u32| one_path_after_two_acks(&cfg, inflight);
    // Ten in flight: shut, and the inflight estimate of the queue (6 packets
    // at 0.2 per us) is far above tau_q.
    let (mut a, paths, ack) = start(10);
    assert!(!a.any_open(&paths));
    assert_eq!(a.poll_timeout(), Some(Instant::from_us(40)));
    assert_eq!(a.ticks_idle_until(&paths, backlogged), Some(Instant::MAX));
    // What the horizon promises: the updates run every Tu and none opens it.
    for t in (40..=400).step_by(10) {
        a.on_tick(Instant::from_us(t), &paths, backlogged);
        assert!(!a.any_open(&paths), "open at {t} us");
        assert_eq!(a.ticks_idle_until(&paths, backlogged), Some(Instant::MAX));
    }
    // An ACK in the interval: its update, the next, may open the window, and
    // nothing waits.
    a.on_ack(Instant::from_us(405), &ack, &paths);
    assert_eq!(a.poll_timeout(), Some(Instant::from_us(410)));
    assert_eq!(a.ticks_idle_until(&paths, backlogged), None);
    // Two in flight: open; nothing waits.
    let (a, paths, _) = start(2);
    assert!(a.any_open(&paths));
    assert_eq!(a.ticks_idle_until(&paths, backlogged), None);
}
