//! What a hostile peer or a dead path can do to a connection that its sender owns
//! (issue "Hostile peers, dead paths and stuck requests", the engine's bounds):
//! each test forges or replays datagrams built from real ones, or black-holes a
//! path, on two endpoints joined by a small fixed-delay network, and checks that the
//! connection neither stalls nor believes what it was fed.

use proptest::prelude::*;
use rondo_proto::wire::{self, Body, Repr};
use rondo_proto::{
    BufferConfig, ConnectionHandle, Duration, Endpoint, Event, FlowConfig, Host, Instant,
    PathStatus, Psn, SharedBuffer,
};
use std::collections::BTreeMap;

mod common;

const TOKEN: Option<u64> = Some(0x5eed);
const PATHS: u16 = 4;
/// One-way delay of every path.
const DELAY: Duration = Duration::from_us(5);

/// Two endpoints, `a` sending to `b`, over `PATHS` paths of `DELAY` each way.
/// Datagrams in flight are keyed by (arrival time, sequence) so that the run is
/// deterministic.
struct Net {
    a: Endpoint,
    b: Endpoint,
    ha: ConnectionHandle,
    hb: ConnectionHandle,
    now: Instant,
    seq: u64,
    /// (arrival, seq) -> (to b?, path, datagram)
    wire: BTreeMap<(Instant, u64), (bool, u16, Vec<u8>)>,
    /// Paths that drop everything sent on them (both directions).
    black_holed: Vec<u16>,
    /// Every datagram `a` sent, in order.
    sent_by_a: Vec<(u16, Vec<u8>)>,
    /// Every datagram `b` sent, in order.
    sent_by_b: Vec<(u16, Vec<u8>)>,
    events_a: Vec<Event>,
    events_b: Vec<Event>,
}

fn config() -> FlowConfig {
    FlowConfig {
        paths: PATHS,
        token: TOKEN,
        ..FlowConfig::default()
    }
}

impl Net {
    fn new(cfg: &FlowConfig) -> Net {
        let buffer = || SharedBuffer::in_heap(BufferConfig::default()).unwrap();
        let (mut a, mut b) = (Endpoint::new(buffer()), Endpoint::new(buffer()));
        let ha = a.connect(Instant::ZERO, 1, 2, cfg).unwrap();
        let hb = b.connect(Instant::ZERO, 2, 1, cfg).unwrap();
        Net {
            a,
            b,
            ha,
            hb,
            now: Instant::ZERO,
            seq: 0,
            wire: BTreeMap::new(),
            black_holed: Vec::new(),
            sent_by_a: Vec::new(),
            sent_by_b: Vec::new(),
            events_a: Vec::new(),
            events_b: Vec::new(),
        }
    }

    /// Puts `datagram` on the wire towards `b` (or `a`) on `path`, arriving after
    /// `DELAY`.
    fn inject(&mut self, to_b: bool, path: u16, datagram: Vec<u8>) {
        self.seq += 1;
        self.wire
            .insert((self.now + DELAY, self.seq), (to_b, path, datagram));
    }

    fn transmit(&mut self) {
        let mut buf = vec![0u8; 9000];
        while let Some(t) = self.a.poll_transmit(self.now, &mut buf) {
            let d = buf[..t.len].to_vec();
            self.sent_by_a.push((t.path, d.clone()));
            if !self.black_holed.contains(&t.path) {
                self.inject(true, t.path, d);
            }
        }
        while let Some(t) = self.b.poll_transmit(self.now, &mut buf) {
            let d = buf[..t.len].to_vec();
            self.sent_by_b.push((t.path, d.clone()));
            if !self.black_holed.contains(&t.path) {
                self.inject(false, t.path, d);
            }
        }
    }

    /// Runs until `until`: arrivals, timers and transmissions in time order.
    fn run_until(&mut self, until: Instant) {
        loop {
            self.transmit();
            let next_arrival = self.wire.keys().next().map(|k| k.0);
            let next = [next_arrival, self.a.poll_timeout(), self.b.poll_timeout()]
                .into_iter()
                .flatten()
                .min();
            let Some(next) = next.filter(|&t| t <= until) else {
                self.now = until;
                break;
            };
            self.now = self.now.max(next);
            while let Some(entry) = self.wire.first_entry() {
                if entry.key().0 > self.now {
                    break;
                }
                let (to_b, path, d) = entry.remove();
                let host = if to_b { &mut self.b } else { &mut self.a };
                host.handle_datagram(self.now, path, &d, false);
            }
            for (ep, h, events) in [
                (&mut self.a, self.ha, &mut self.events_a),
                (&mut self.b, self.hb, &mut self.events_b),
            ] {
                if ep.poll_timeout().is_some_and(|t| t <= self.now) {
                    ep.handle_timeout(self.now);
                }
                while let Some(e) = ep.poll_event(h) {
                    events.push(e);
                }
            }
        }
    }

    fn delivered(&self, msg_id: u64) -> bool {
        self.events_b
            .iter()
            .any(|e| matches!(e, Event::Received { msg_id: m, .. } if *m == msg_id))
    }

    fn completed(&self, msg_id: u64) -> bool {
        self.events_a
            .iter()
            .any(|e| matches!(e, Event::SendComplete { msg_id: m } if *m == msg_id))
    }
}

fn message(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + 3) as u8).collect()
}

/// Parses a datagram of this test's connection.
fn parse(d: &[u8]) -> Repr {
    wire::parse(d).expect("our own datagram parses").0
}

/// Row 1: one sniffed DATA re-sent with its PSN moved 100,000 ahead. The
/// receiver's highest PSN jumps and every ACK after it reports it; the sender
/// used to reject all of them and the transfer died. Now those ACKs count, only
/// their highest field does not.
#[test]
fn a_forged_far_ahead_data_does_not_stop_the_transfer() {
    let mut net = Net::new(&config());
    net.a
        .post(net.ha, Instant::ZERO, 1, message(400_000))
        .unwrap();
    net.run_until(Instant::from_us(30));
    let (path, d) = net
        .sent_by_a
        .iter()
        .find(|(_, d)| matches!(parse(d).body, Body::Data(_)))
        .cloned()
        .expect("a DATA was sent");
    let mut forged = parse(&d);
    forged.common.psn = Psn(forged.common.psn.0.wrapping_add(100_000));
    let Body::Data(data) = forged.body else {
        unreachable!()
    };
    let payload = vec![0xee; data.payload_len];
    net.inject(true, path, forged.to_datagram(&payload, TOKEN).unwrap());
    net.run_until(Instant::from_us(20_000));
    let stats = net.a.connection(net.ha).sender_stats();
    assert!(
        stats.implausible_highest > 0,
        "the forged highest was reported"
    );
    assert!(
        net.completed(1) && net.delivered(1),
        "the transfer finished"
    );
    assert!(!net.a.connection(net.ha).is_failed());
}

/// Row 3: old DATA replayed 100 times, 2 ms after it was first sent: each copy
/// gets an ACK echoing its old timestamp. Only the ACK of a packet's newest
/// transmission gives an RTT sample (Karn), so the path's srtt stays near the
/// 10 us the network has, where it used to grow to milliseconds.
#[test]
fn replayed_data_gives_no_rtt_sample() {
    let mut net = Net::new(&config());
    net.a
        .post(net.ha, Instant::ZERO, 1, message(200_000))
        .unwrap();
    net.run_until(Instant::from_us(200));
    let old: Vec<(u16, Vec<u8>)> = net
        .sent_by_a
        .iter()
        .filter(|(_, d)| matches!(parse(d).body, Body::Data(_)))
        .take(10)
        .cloned()
        .collect();
    net.run_until(Instant::from_us(2_000));
    for _ in 0..10 {
        for (path, d) in &old {
            net.inject(true, *path, d.clone());
        }
    }
    net.run_until(Instant::from_us(2_100));
    for (i, p) in net.a.connection(net.ha).paths().iter().enumerate() {
        let srtt = p.srtt().expect("every path was sampled");
        assert!(
            srtt < Duration::from_us(100),
            "path {i}: srtt {srtt:?} after replays (the network's RTT is 10 us)"
        );
    }
    net.a.post(net.ha, net.now, 2, message(200_000)).unwrap();
    net.run_until(Instant::from_us(4_000));
    assert!(net.completed(2));
}

/// Row 4: probe ACKs forged from a real ACK while no probe is outstanding: a
/// black-holed path that went down stays down, and the forgeries are counted.
#[test]
fn probe_acks_for_no_outstanding_probe_are_ignored() {
    let cfg = FlowConfig {
        down_probe_interval: Duration::from_ms(10_000),
        path_down_losses: 2,
        ..config()
    };
    let mut net = Net::new(&cfg);
    net.black_holed.push(0);
    net.a
        .post(net.ha, Instant::ZERO, 1, message(2_000_000))
        .unwrap();
    net.run_until(Instant::from_us(30_000));
    assert_eq!(
        net.a.connection(net.ha).paths().status(0),
        PathStatus::Down,
        "the black-holed path went down"
    );
    let ups_before = net
        .events_a
        .iter()
        .filter(|e| matches!(e, Event::PathUp { .. }))
        .count();
    let (_, real_ack) = net
        .sent_by_b
        .iter()
        .rev()
        .find(|(_, d)| matches!(parse(d).body, Body::Ack(_)))
        .cloned()
        .expect("b acknowledged something");
    let mut forged = parse(&real_ack);
    let Body::Ack(mut fb) = forged.body else {
        unreachable!()
    };
    fb.of_probe = true;
    fb.acked_path = 0;
    for seq in 0..50 {
        fb.acked_psn = Psn(1_000 + seq);
        forged.body = Body::Ack(fb);
        net.inject(false, 1, forged.to_datagram(&[], TOKEN).unwrap());
    }
    net.run_until(net.now + Duration::from_ms(1));
    let conn = net.a.connection(net.ha);
    assert_eq!(conn.paths().status(0), PathStatus::Down);
    let ups_after = net
        .events_a
        .iter()
        .filter(|e| matches!(e, Event::PathUp { .. }))
        .count();
    assert_eq!(
        ups_before, ups_after,
        "no forged probe ACK brought path 0 up"
    );
    assert_eq!(conn.sender_stats().unexpected_probe_acks, 50);
}

/// A 3 MB transfer over four paths with path 2 black-holed and a host-stack
/// early-recovery threshold (1024 packets), so that only the retransmission
/// timer finds path 2's losses; run for 200 ms, by when path 2 must have been
/// taken down and the transfer finished.
fn transfer_past_a_black_holed_path() -> (FlowConfig, Net) {
    let cfg = FlowConfig {
        early_recovery_threshold: 1024,
        ..config()
    };
    let mut net = Net::new(&cfg);
    net.black_holed.push(2);
    net.a
        .post(net.ha, Instant::ZERO, 1, message(3_000_000))
        .unwrap();
    net.run_until(Instant::from_us(200_000));
    assert!(
        net.events_a
            .iter()
            .any(|e| matches!(e, Event::PathDown { path: 2 })),
        "path 2 was taken down"
    );
    assert!(
        net.completed(1) && net.delivered(1),
        "the transfer finished"
    );
    (cfg, net)
}

/// Row 9: the timer's losses on the black-holed path count toward taking it
/// down, because the path stayed silent while the others answered: it goes
/// down and the transfer ends ([`transfer_past_a_black_holed_path`]).
#[test]
fn a_black_holed_path_goes_down_when_only_the_timer_finds_its_losses() {
    transfer_past_a_black_holed_path();
}

/// A flow with nothing outstanding does not probe the paths it took out of
/// rotation: it used to send a probe per `down_probe_interval` for as long as it
/// lived (on the in-process verbs fabric an idle QP kept the network busy for
/// ever). Its next message probes them again at once.
#[test]
fn an_idle_flow_probes_its_down_paths_only_when_it_has_a_message() {
    let (cfg, mut net) = transfer_past_a_black_holed_path();
    let probes = |net: &Net| net.a.connection(net.ha).sender_stats().probes_sent;
    let idle = probes(&net);
    net.run_until(net.now + cfg.down_probe_interval.saturating_mul(50));
    assert_eq!(probes(&net), idle, "an idle flow sent probes");
    net.a.post(net.ha, net.now, 2, message(4_000)).unwrap();
    net.run_until(net.now + Duration::from_ms(1));
    assert!(probes(&net) > idle, "the new message did not probe path 2");
    assert!(net.completed(2) && net.delivered(2));
}

/// Row 5: cumulative ACKs forged from a real one while the receiver gets
/// nothing (every path black-holed): the forged cumulative ACK covers PSNs that
/// were sent, but lies past the highest PSN its own ACK reports, which no real
/// receiver's does. The sender ignores it (counted) and never reports the
/// message complete.
#[test]
fn forged_cumulative_acks_never_complete_a_send() {
    let mut net = Net::new(&config());
    net.a
        .post(net.ha, Instant::ZERO, 1, message(20_000))
        .unwrap();
    net.run_until(Instant::from_us(500));
    assert!(net.completed(1));
    let (_, real_ack) = net
        .sent_by_b
        .iter()
        .rev()
        .find(|(_, d)| matches!(parse(d).body, Body::Ack(_)))
        .cloned()
        .expect("b acknowledged something");
    net.black_holed.extend(0..PATHS);
    net.a.post(net.ha, net.now, 2, message(4_000)).unwrap();
    net.run_until(net.now + Duration::from_us(2));
    let sent_before = net.sent_by_a.len();
    assert!(sent_before > 0);
    let mut forged = parse(&real_ack);
    let Body::Ack(mut fb) = forged.body else {
        unreachable!()
    };
    let first = fb.cum_ack;
    for k in 1..=16 {
        fb.cum_ack = Psn(first.0.wrapping_add(k));
        forged.body = Body::Ack(fb);
        net.inject(false, 0, forged.to_datagram(&[], TOKEN).unwrap());
    }
    net.run_until(net.now + Duration::from_ms(5));
    assert!(
        !net.completed(2),
        "a forged cumulative ACK completed a message nobody received"
    );
    assert!(!net.delivered(2));
    let stats = net.a.connection(net.ha).sender_stats();
    // Those past anything sent are refused whole, as before; the others lose
    // their cumulative ACK.
    assert!(stats.rejected_cum_acks > 0, "{stats:?}");
    assert_eq!(
        stats.rejected_cum_acks + stats.bad_feedback,
        16,
        "{stats:?}"
    );
}

/// The first `n` DATA datagrams on the wire towards `b`, by PSN: (key, path,
/// datagram).
fn data_in_flight(net: &Net, n: usize) -> Vec<((Instant, u64), u16, Vec<u8>)> {
    let mut data: Vec<_> = net
        .wire
        .iter()
        .filter(|(_, (to_b, _, d))| *to_b && matches!(parse(d).body, Body::Data(_)))
        .map(|(k, (_, path, d))| (*k, *path, d.clone()))
        .collect();
    data.sort_by_key(|(_, _, d)| parse(d).common.psn.0);
    data.truncate(n);
    data
}

/// `d` with its message offset moved by one packet's payload.
fn with_wrong_offset(d: &[u8]) -> Vec<u8> {
    let (mut repr, payload) = wire::parse(d).unwrap();
    let Body::Data(mut data) = repr.body else {
        unreachable!()
    };
    data.offset += config().payload_per_packet() as u64;
    repr.body = Body::Data(data);
    repr.to_datagram(payload, TOKEN).unwrap()
}

/// Row 7: a DATA forged from the second packet of a message, with its offset
/// moved, arrives at the receiver's expected PSN just before the real one. It
/// used to be taken (and acknowledged), the message dropped as inconsistent and
/// the sender told it was delivered; now it is dropped unacknowledged and the
/// real packet takes its place.
#[test]
fn data_at_the_expected_psn_with_a_wrong_offset_costs_nothing() {
    let mut net = Net::new(&config());
    net.a
        .post(net.ha, Instant::ZERO, 1, message(100_000))
        .unwrap();
    // Until two DATA are in flight (paths of equal delay deliver in PSN order,
    // so the first of them is the receiver's expected PSN when it arrives).
    let mut t = Instant::ZERO;
    let first_two = loop {
        net.run_until(t);
        let d = data_in_flight(&net, 2);
        if d.len() == 2 {
            break d;
        }
        t += Duration::from_ns(100);
    };
    let [(k0, _, first), (k1, path, real)] = &first_two[..] else {
        unreachable!()
    };
    assert!(k0 < k1, "the first PSN arrives first");
    assert_eq!(parse(first).common.psn.next(), parse(real).common.psn);
    // The real second packet arrives 1 ns late; the forgery in its place.
    let (k1, path, real) = (*k1, *path, real.clone());
    net.wire.remove(&k1);
    net.wire.insert(
        (k1.0 + Duration::from_ns(1), k1.1),
        (true, path, real.clone()),
    );
    net.wire.insert(k1, (true, path, with_wrong_offset(&real)));
    net.run_until(Instant::from_us(20_000));
    assert!(net.completed(1), "the transfer finished");
    assert!(net.delivered(1), "and the receiver got the message");
    assert!(!net.b.connection(net.hb).is_failed());
    assert_eq!(net.b.connection(net.hb).receiver_stats().inconsistent, 1);
}

/// Row 7, a message's first packet: a DATA forged from it with its offset moved
/// (so not a message start) arrives at the expected PSN just before the real one.
/// It used to be taken and acknowledged, the message lost (its real start then a
/// duplicate, its later packets without a start) while the sender was told it was
/// delivered; now it is dropped unacknowledged and the real packet takes its place.
#[test]
fn a_first_packet_at_the_expected_psn_with_a_wrong_offset_costs_nothing() {
    let mut net = Net::new(&config());
    net.a
        .post(net.ha, Instant::ZERO, 1, message(100_000))
        .unwrap();
    let mut t = Instant::ZERO;
    let (k0, path, first) = loop {
        net.run_until(t);
        if let Some(d) = data_in_flight(&net, 1).pop() {
            break d;
        }
        t += Duration::from_ns(100);
    };
    assert_eq!(parse(&first).common.psn, Psn(0));
    net.wire.remove(&k0);
    net.wire.insert(
        (k0.0 + Duration::from_ns(1), k0.1),
        (true, path, first.clone()),
    );
    net.wire.insert(k0, (true, path, with_wrong_offset(&first)));
    net.run_until(Instant::from_us(20_000));
    assert!(net.completed(1), "the transfer finished");
    assert!(net.delivered(1), "and the receiver got the message");
    assert!(!net.b.connection(net.hb).is_failed());
    assert_eq!(net.b.connection(net.hb).receiver_stats().inconsistent, 1);
}

/// What the stall property does with one captured datagram.
#[derive(Clone, Copy, Debug)]
enum Forgery {
    /// Replayed as it was.
    Replay,
    /// Its PSN (DATA) or acknowledged PSN (ACK, NAK) moved by this much.
    ShiftPsn(i32),
    /// DATA: its message offset moved; ACK/NAK: its cumulative ACK moved.
    ShiftOffset(i32),
}

fn forgery() -> impl Strategy<Value = Forgery> {
    prop_oneof![
        Just(Forgery::Replay),
        (-64i32..200_000).prop_map(Forgery::ShiftPsn),
        (-5_000i32..5_000).prop_map(Forgery::ShiftOffset),
    ]
}

fn forge(d: &[u8], f: Forgery) -> Vec<u8> {
    let (mut repr, payload) = wire::parse(d).unwrap();
    let shift = |p: Psn, k: i32| Psn(p.0.wrapping_add(k as u32));
    match (f, &mut repr.body) {
        (Forgery::Replay, _) => return d.to_vec(),
        (Forgery::ShiftPsn(k), Body::Data(_) | Body::Probe(_)) => {
            repr.common.psn = shift(repr.common.psn, k)
        }
        (Forgery::ShiftPsn(k), Body::Ack(fb) | Body::Nak(fb, _)) => {
            fb.acked_psn = shift(fb.acked_psn, k)
        }
        (Forgery::ShiftOffset(k), Body::Data(data)) => {
            data.offset = data.offset.wrapping_add(k as i64 as u64)
        }
        (Forgery::ShiftOffset(k), Body::Ack(fb) | Body::Nak(fb, _)) => {
            fb.cum_ack = shift(fb.cum_ack, k)
        }
        (Forgery::ShiftOffset(_), Body::Probe(_)) => {}
    }
    // A forgery the wire format cannot carry (an offset past the message) is
    // replayed as it was.
    repr.to_datagram(payload, TOKEN)
        .unwrap_or_else(|_| d.to_vec())
}

proptest! {
    #![proptest_config(common::proptest_config(24))]

    /// Rows 2 and 7 (stalls): datagrams captured from a real transfer, replayed
    /// or forged (PSN, offset or cumulative ACK moved) into both sides during the
    /// transfer. Within bounded
    /// simulated time the transfer completes, or a side fails with an error
    /// event: it never just hangs.
    #[test]
    fn forged_and_replayed_datagrams_never_stall_a_transfer(
        forgeries in prop::collection::vec((any::<prop::sample::Index>(), forgery(), 0u64..2_000), 1..48),
    ) {
        let mut net = Net::new(&config());
        net.a.post(net.ha, Instant::ZERO, 1, message(300_000)).unwrap();
        net.run_until(Instant::from_us(100));
        let captured: Vec<(bool, u16, Vec<u8>)> = net
            .sent_by_a
            .iter()
            .map(|(p, d)| (true, *p, d.clone()))
            .chain(net.sent_by_b.iter().map(|(p, d)| (false, *p, d.clone())))
            .collect();
        let mut plan: Vec<(u64, bool, u16, Vec<u8>)> = forgeries
            .iter()
            .map(|(i, f, at)| {
                let (to_b, path, d) = &captured[i.index(captured.len())];
                (*at, *to_b, *path, forge(d, *f))
            })
            .collect();
        plan.sort_by_key(|p| p.0);
        for (at, to_b, path, d) in plan {
            net.run_until(Instant::from_us(100 + at));
            net.inject(to_b, path, d);
        }
        net.run_until(Instant::from_us(400_000));
        let failed = net.events_a.iter().chain(&net.events_b).any(|e| matches!(e, Event::Error(_)));
        prop_assert!(
            (net.completed(1) && net.delivered(1)) || failed,
            "stalled: completed {}, delivered {}; sender {:?}",
            net.completed(1),
            net.delivered(1),
            net.a.connection(net.ha).sender_stats()
        );
    }
}

/// Row 2: every datagram of the first 100 us of a transfer, both directions,
/// replayed over and over, one every 50 ns (20 M/s) for 2 ms: the transfer still
/// completes.
#[test]
fn replay_at_a_high_rate_does_not_stall_the_transfer() {
    let mut net = Net::new(&config());
    net.a
        .post(net.ha, Instant::ZERO, 1, message(1_000_000))
        .unwrap();
    net.run_until(Instant::from_us(100));
    let captured: Vec<(bool, u16, Vec<u8>)> = net
        .sent_by_a
        .iter()
        .map(|(p, d)| (true, *p, d.clone()))
        .chain(net.sent_by_b.iter().map(|(p, d)| (false, *p, d.clone())))
        .collect();
    let mut t = net.now;
    for (to_b, path, d) in captured.iter().cycle().take(40_000) {
        t += Duration::from_ns(50);
        net.run_until(t);
        net.inject(*to_b, *path, d.clone());
    }
    net.run_until(Instant::from_us(200_000));
    let stats = net.a.connection(net.ha).sender_stats();
    assert!(
        net.completed(1) && net.delivered(1),
        "stalled under replay: {stats:?}"
    );
    assert!(!net.a.connection(net.ha).is_failed());
}
