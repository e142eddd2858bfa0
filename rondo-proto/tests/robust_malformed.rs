//! Hostile and broken datagrams fed straight into an [`Endpoint`]: each named case
//! expects its exact typed error (or the exact counter when the datagram parses but
//! makes no sense), and nothing may panic. A property test then throws arbitrary and
//! mutated datagrams at an endpoint and checks that it still moves a real message.

mod common;

use proptest::prelude::*;
use rondo_proto::wire::{
    self, Body, CommonRepr, DataRepr, FeedbackRepr, Flags, NakReason, Repr, WireError,
    COMMON_HEADER_LEN, DATA_HEADER_LEN, FEEDBACK_HEADER_LEN,
};
use rondo_proto::{
    BufferConfig, ConnectionHandle, DatagramError, Duration, Endpoint, EndpointStats, Event,
    FlowConfig, Host, Instant, PathStatus, Psn, SharedBuffer, Transmit, Transport,
};
use rondo_sim::pair::PathSpec;
use rondo_sim::Testbed;

/// The flow id of the endpoint's connection (what datagrams addressed to it carry).
const LOCAL: u32 = 1;
/// The peer's flow id.
const REMOTE: u32 = 2;

fn endpoint_with(cfg: &FlowConfig) -> (Endpoint, ConnectionHandle) {
    let mut ep = Endpoint::new(SharedBuffer::new(BufferConfig::default()).unwrap());
    let h = ep.connect(Instant::ZERO, LOCAL, REMOTE, cfg).unwrap();
    (ep, h)
}

fn endpoint() -> (Endpoint, ConnectionHandle) {
    endpoint_with(&FlowConfig::default())
}

fn common(flow: u32, psn: u32, path: u16) -> CommonRepr {
    CommonRepr {
        flow,
        psn: Psn(psn),
        path,
        flags: Flags::empty(),
        timestamp_ns: 1_000,
    }
}

fn emit(repr: &Repr, payload: &[u8]) -> Vec<u8> {
    let mut buf = vec![0; repr.buffer_len()];
    let header_len = repr.emit(&mut buf).unwrap();
    buf[header_len..header_len + payload.len()].copy_from_slice(payload);
    buf
}

fn data(psn: u32, msg_id: u64, msg_len: u64, offset: u64, payload: &[u8]) -> Vec<u8> {
    data_for(LOCAL, psn, msg_id, msg_len, offset, payload)
}

fn data_for(
    flow: u32,
    psn: u32,
    msg_id: u64,
    msg_len: u64,
    offset: u64,
    payload: &[u8],
) -> Vec<u8> {
    let repr = Repr {
        common: common(flow, psn, 0),
        body: Body::Data(DataRepr {
            msg_id,
            msg_len,
            offset,
            payload_len: payload.len(),
        }),
    };
    emit(&repr, payload)
}

fn feedback(acked_psn: u32, cum_ack: u32, highest_psn: u32, acked_path: u16) -> FeedbackRepr {
    FeedbackRepr {
        acked_psn: Psn(acked_psn),
        cum_ack: Psn(cum_ack),
        highest_psn: Psn(highest_psn),
        acked_path,
        of_probe: false,
        duplicate: false,
        echo_timestamp_ns: 0,
        rx_timestamp_ns: 5_000,
    }
}

fn ack(fb: FeedbackRepr) -> Vec<u8> {
    let repr = Repr {
        common: common(LOCAL, 0, fb.acked_path),
        body: Body::Ack(fb),
    };
    emit(&repr, &[])
}

fn nak(fb: FeedbackRepr, reason: NakReason) -> Vec<u8> {
    let repr = Repr {
        common: common(LOCAL, 0, fb.acked_path),
        body: Body::Nak(fb, reason),
    };
    emit(&repr, &[])
}

/// Everything the endpoint wants to send at `now`, parsed.
fn drain(ep: &mut Endpoint, now: Instant) -> Vec<(Transmit, Repr, Vec<u8>)> {
    let mut buf = vec![0; 64 * 1024];
    let mut out = Vec::new();
    while let Some(t) = ep.poll_transmit(now, &mut buf) {
        let (repr, payload) = wire::parse(&buf[..t.len]).expect("the engine emits valid datagrams");
        out.push((t, repr, payload.to_vec()));
        assert!(out.len() < 10_000, "poll_transmit never ends");
    }
    out
}

fn events(ep: &mut Endpoint, h: ConnectionHandle) -> Vec<Event> {
    std::iter::from_fn(|| ep.poll_event(h)).collect()
}

fn received(events: &[Event]) -> Vec<(u64, Vec<u8>)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Received { msg_id, data } => Some((*msg_id, data.clone())),
            _ => None,
        })
        .collect()
}

/// Feeds one datagram that must fail to parse with `expected`, and checks the counters.
fn expect_malformed(datagram: &[u8], expected: WireError) {
    let (mut ep, h) = endpoint();
    let r = ep.receive(Instant::from_us(1), 0, datagram, false);
    assert_eq!(r, Err(DatagramError::Malformed(expected)));
    assert_eq!(
        ep.stats(),
        EndpointStats {
            malformed: 1,
            unknown_flow: 0,
            datagrams: 1,
            bad_token: 0,
        }
    );
    assert_eq!(ep.connection(h).receiver_stats().data_packets, 0);
    assert!(
        drain(&mut ep, Instant::from_us(1)).is_empty(),
        "nothing to answer"
    );
    assert!(events(&mut ep, h).is_empty());
}

/// A valid 1-packet data datagram of 100 bytes at PSN 0.
fn valid_data() -> Vec<u8> {
    data(0, 9, 100, 0, &[7; 100])
}

// ------------------------------------------------------------------ parse errors

#[test]
fn empty_datagram() {
    expect_malformed(
        &[],
        WireError::Truncated {
            needed: COMMON_HEADER_LEN,
            got: 0,
        },
    );
}

#[test]
fn truncated_common_header() {
    let d = valid_data();
    expect_malformed(
        &d[..COMMON_HEADER_LEN - 1],
        WireError::Truncated {
            needed: COMMON_HEADER_LEN,
            got: COMMON_HEADER_LEN - 1,
        },
    );
}

#[test]
fn truncated_data_header() {
    let d = valid_data();
    expect_malformed(
        &d[..30],
        WireError::Truncated {
            needed: DATA_HEADER_LEN,
            got: 30,
        },
    );
}

#[test]
fn truncated_feedback_header() {
    let d = ack(feedback(0, 0, 0, 0));
    expect_malformed(
        &d[..FEEDBACK_HEADER_LEN - 1],
        WireError::Truncated {
            needed: FEEDBACK_HEADER_LEN,
            got: FEEDBACK_HEADER_LEN - 1,
        },
    );
}

#[test]
fn bad_version() {
    for v in [0u8, 2, 255] {
        let mut d = valid_data();
        d[0] = v;
        expect_malformed(&d, WireError::BadVersion(v));
    }
}

#[test]
fn unknown_type() {
    for t in [0u8, 5, 255] {
        let mut d = valid_data();
        d[1] = t;
        expect_malformed(&d, WireError::UnknownType(t));
    }
}

#[test]
fn reserved_flag_bits() {
    let mut d = valid_data();
    d[2] |= 0x10;
    let byte = d[2];
    expect_malformed(&d, WireError::ReservedFlags(byte));
}

#[test]
fn header_words_shorter_than_fixed_header() {
    let mut d = valid_data();
    d[3] = (DATA_HEADER_LEN / 4 - 1) as u8;
    expect_malformed(
        &d,
        WireError::BadHeaderLength {
            words: d[3],
            min: DATA_HEADER_LEN,
            available: d.len(),
        },
    );
}

#[test]
fn header_words_past_the_datagram() {
    let mut d = ack(feedback(0, 0, 0, 0));
    d[3] = (FEEDBACK_HEADER_LEN / 4 + 1) as u8;
    expect_malformed(
        &d,
        WireError::BadHeaderLength {
            words: d[3],
            min: FEEDBACK_HEADER_LEN,
            available: FEEDBACK_HEADER_LEN,
        },
    );
}

/// `valid_data` with a 4-byte extension area holding `ext` between header and payload.
fn data_with_extension(ext: [u8; 4]) -> Vec<u8> {
    let d = valid_data();
    let mut out = d[..DATA_HEADER_LEN].to_vec();
    out[3] = (DATA_HEADER_LEN / 4 + 1) as u8;
    out.extend_from_slice(&ext);
    out.extend_from_slice(&d[DATA_HEADER_LEN..]);
    out
}

#[test]
fn unknown_critical_extension() {
    expect_malformed(
        &data_with_extension([0x81, 2, 0, 0]),
        WireError::UnknownCriticalExtension(0x81),
    );
}

#[test]
fn extension_overrunning_the_header() {
    expect_malformed(
        &data_with_extension([0x01, 5, 0, 0]),
        WireError::MalformedExtension {
            at: DATA_HEADER_LEN,
        },
    );
}

#[test]
fn non_critical_extension_is_skipped() {
    let (mut ep, h) = endpoint();
    let d = data_with_extension([0x01, 2, 0xaa, 0xbb]);
    assert_eq!(ep.receive(Instant::from_us(1), 0, &d, false), Ok(()));
    assert_eq!(received(&events(&mut ep, h)), [(9, vec![7; 100])]);
}

#[test]
fn data_with_empty_payload() {
    let d = valid_data();
    expect_malformed(&d[..DATA_HEADER_LEN], WireError::EmptyPayload);
}

#[test]
fn data_payload_past_message_end() {
    // Claims a 50-byte message but carries 100 bytes at offset 0.
    let mut d = valid_data();
    d[32..40].copy_from_slice(&50u64.to_be_bytes()); // msg_len (docs/wire.md)
    expect_malformed(
        &d,
        WireError::InconsistentMessage {
            msg_len: 50,
            offset: 0,
            payload_len: 100,
        },
    );
}

#[test]
fn data_offset_overflows() {
    let mut d = data(0, 9, u64::MAX, 10, &[7; 100]);
    d[40..48].copy_from_slice(&(u64::MAX - 10).to_be_bytes());
    expect_malformed(
        &d,
        WireError::InconsistentMessage {
            msg_len: u64::MAX,
            offset: u64::MAX - 10,
            payload_len: 100,
        },
    );
}

#[test]
fn data_first_last_flags_disagree_with_offset() {
    let mut d = valid_data();
    d[2] &= !Flags::FIRST.bits();
    expect_malformed(&d, WireError::FirstLastMismatch);
    let mut d = valid_data();
    d[2] &= !Flags::LAST.bits();
    expect_malformed(&d, WireError::FirstLastMismatch);
}

#[test]
fn ack_with_trailing_bytes() {
    let mut d = ack(feedback(0, 0, 0, 0));
    d.extend_from_slice(&[0; 3]);
    expect_malformed(&d, WireError::TrailingBytes(3));
}

#[test]
fn ack_with_a_nak_reason() {
    let mut d = ack(feedback(0, 0, 0, 0));
    d[39] = 1;
    expect_malformed(&d, WireError::BadNakReason(1));
}

#[test]
fn nak_with_unknown_reason() {
    for reason in [0u8, 5, 255] {
        let mut d = nak(feedback(0, 0, 0, 0), NakReason::BufferFull);
        d[39] = reason;
        expect_malformed(&d, WireError::BadNakReason(reason));
    }
}

#[test]
fn feedback_reserved_flags() {
    let mut d = ack(feedback(0, 0, 0, 0));
    d[38] = 0x04;
    expect_malformed(&d, WireError::ReservedFlags(0x04));
}

// ------------------------------------------------------------------ unknown flows

#[test]
fn data_for_unknown_flow_id() {
    let (mut ep, h) = endpoint();
    let d = data_for(77, 0, 9, 100, 0, &[7; 100]);
    assert_eq!(
        ep.receive(Instant::from_us(1), 0, &d, false),
        Err(DatagramError::UnknownFlow(77))
    );
    assert_eq!(
        ep.stats(),
        EndpointStats {
            malformed: 0,
            unknown_flow: 1,
            datagrams: 1,
            bad_token: 0,
        }
    );
    assert_eq!(ep.connection(h).receiver_stats().data_packets, 0);
    assert!(drain(&mut ep, Instant::from_us(1)).is_empty());
}

#[test]
fn ack_for_unknown_flow_id() {
    let (mut ep, h) = endpoint();
    let repr = Repr {
        common: common(REMOTE, 0, 0),
        body: Body::Ack(feedback(0, 0, 0, 0)),
    };
    assert_eq!(
        ep.receive(Instant::from_us(1), 0, &emit(&repr, &[]), false),
        Err(DatagramError::UnknownFlow(REMOTE))
    );
    assert_eq!(ep.stats().unknown_flow, 1);
    assert_eq!(ep.connection(h).sender_stats().bad_feedback, 0);
}

// ------------------------------------------------------------------ bad feedback

/// An endpoint that has posted one 3-packet message and sent its first packet at
/// time 0. Returns the path it went on.
fn sending_endpoint() -> (Endpoint, ConnectionHandle, u16) {
    let (mut ep, h) = endpoint();
    let payload = FlowConfig::default().payload_per_packet();
    ep.post(h, Instant::ZERO, 1, vec![3; 3 * payload]).unwrap();
    let sent = drain(&mut ep, Instant::ZERO);
    let data: Vec<_> = sent
        .iter()
        .filter(|(_, r, _)| matches!(r.body, Body::Data(_)))
        .collect();
    assert_eq!(data.len(), 1, "one packet at t=0 (pacing): {sent:?}");
    assert_eq!(data[0].1.common.psn, Psn(0));
    (ep, h, data[0].0.path)
}

#[test]
fn ack_for_psn_never_posted() {
    // Nothing posted: every PSN is unknown.
    let (mut ep, h) = endpoint();
    assert_eq!(
        ep.receive(Instant::from_us(5), 0, &ack(feedback(10, 0, 10, 0)), false),
        Ok(())
    );
    assert_eq!(ep.connection(h).sender_stats().bad_feedback, 1);
    // With a message in flight: a PSN past everything posted, and one before the
    // first PSN (wrapped).
    let (mut ep, h, path) = sending_endpoint();
    ep.receive(
        Instant::from_us(5),
        path,
        &ack(feedback(3, 0, 3, path)),
        false,
    )
    .unwrap();
    assert_eq!(ep.connection(h).sender_stats().bad_feedback, 1);
    ep.receive(
        Instant::from_us(5),
        path,
        &ack(feedback(u32::MAX, 0, 0, path)),
        false,
    )
    .unwrap();
    assert_eq!(ep.connection(h).sender_stats().bad_feedback, 2);
    let s = ep.connection(h).sender_stats();
    assert_eq!(s.packets_acked, 0);
    assert!(events(&mut ep, h).is_empty());
}

#[test]
fn ack_for_posted_but_unsent_psn() {
    // PSN 2 belongs to the posted message but was never transmitted: the ACK
    // "refers to nothing this sender sent" (SenderStats::bad_feedback).
    let (mut ep, h, path) = sending_endpoint();
    ep.receive(
        Instant::from_us(5),
        path,
        &ack(feedback(2, 0, 2, path)),
        false,
    )
    .unwrap();
    let s = *ep.connection(h).sender_stats();
    assert_eq!(s.packets_acked, 0);
    assert_eq!(s.bad_feedback, 1, "{s:?}");
}

#[test]
fn nak_for_psn_never_sent() {
    let (mut ep, h, path) = sending_endpoint();
    ep.receive(
        Instant::from_us(5),
        path,
        &nak(feedback(7, 0, 7, path), NakReason::OutOfWindow),
        false,
    )
    .unwrap();
    let s = *ep.connection(h).sender_stats();
    assert_eq!(s.bad_feedback, 1);
    assert_eq!(s.lost_declared, 0);
    assert_eq!(s.retransmissions, 0);
}

#[test]
fn ack_with_cum_ack_past_everything_posted() {
    let (mut ep, h, path) = sending_endpoint();
    ep.receive(
        Instant::from_us(5),
        path,
        &ack(feedback(0, 4, 0, path)),
        false,
    )
    .unwrap();
    let s = *ep.connection(h).sender_stats();
    assert_eq!(s.bad_feedback, 1);
    assert_eq!(s.packets_acked, 0);
    assert!(events(&mut ep, h).is_empty(), "no SendComplete");
}

#[test]
fn ack_with_acked_path_out_of_range() {
    let (mut ep, h, _) = sending_endpoint();
    let paths = FlowConfig::default().paths;
    for (n, bad_path) in [paths, paths + 1, u16::MAX].into_iter().enumerate() {
        ep.receive(
            Instant::from_us(5),
            0,
            &ack(feedback(0, 1, 0, bad_path)),
            false,
        )
        .unwrap();
        assert_eq!(ep.connection(h).sender_stats().bad_feedback, n as u64 + 1);
    }
    // The probe-ACK flavour goes through the same check.
    let mut fb = feedback(0, 0, 0, paths);
    fb.of_probe = true;
    ep.receive(Instant::from_us(5), 0, &ack(fb), false).unwrap();
    let s = *ep.connection(h).sender_stats();
    assert_eq!(s.bad_feedback, 4);
    assert_eq!(s.packets_acked, 0);
    assert_eq!(s.probes_acked, 0);
}

#[test]
fn ack_with_extreme_timestamps() {
    // A forged or corrupted ACK for a real packet, with timestamps at the ends of
    // the u64 range: the RTT and forward-delay arithmetic must not overflow.
    let cases = [
        (1, 1u64 << 63),
        (u64::MAX, 0),
        (0, u64::MAX),
        (1 << 63, 1),
        (4_000, u64::MAX),
    ];
    for (echo, rx) in cases {
        let (mut ep, h, path) = sending_endpoint();
        let mut fb = feedback(0, 1, 0, path);
        fb.echo_timestamp_ns = echo;
        fb.rx_timestamp_ns = rx;
        ep.receive(Instant::from_us(5), path, &ack(fb), false)
            .unwrap();
        let s = *ep.connection(h).sender_stats();
        assert_eq!(s.packets_acked, 1, "echo {echo} rx {rx}");
        // The connection keeps working: timers and transmits still run.
        let now = Instant::from_us(50);
        if ep.poll_timeout().is_some_and(|t| t <= now) {
            ep.handle_timeout(now);
        }
        drain(&mut ep, now);
    }
}

/// Timer wake-ups of `ep` from `from` to `from + span`, driven as a datapath would.
fn wakeups(ep: &mut Endpoint, h: ConnectionHandle, from: Instant, span: Duration) -> u64 {
    let end = from + span;
    let mut buf = vec![0; 64 * 1024];
    let mut now = from;
    let mut n = 0;
    while let Some(t) = ep.poll_timeout() {
        if t > end || n > 1_000_000 {
            break;
        }
        now = now.max(t);
        ep.handle_timeout(now);
        while ep.poll_transmit(now, &mut buf).is_some() {}
        events(ep, h);
        n += 1;
    }
    n
}

#[test]
fn ack_claiming_a_zero_rtt_does_not_storm_the_timer() {
    // Found by fuzz/fuzz_targets/receiver.rs. An ACK whose echo timestamp equals the
    // arrival time (an RTT of 0, which no network has) naming another path than the
    // one the packet went on. Compare a plausible 5 us RTT: a few hundred wake-ups
    // per millisecond.
    let at = Instant::from_us(10);
    let mut counts = Vec::new();
    for rtt_ns in [5_000, 0] {
        let (mut ep, h, path) = sending_endpoint();
        let other = (path + 1) % FlowConfig::default().paths;
        let mut fb = feedback(0, 1, 0, other);
        fb.echo_timestamp_ns = at.as_ns() - rtt_ns;
        ep.receive(at, other, &ack(fb), false).unwrap();
        assert_eq!(ep.connection(h).sender_stats().packets_acked, 1);
        counts.push(wakeups(&mut ep, h, at, Duration::from_ms(1)));
    }
    assert!(counts[0] < 10_000, "{counts:?}");
    assert!(
        counts[1] < 10_000,
        "one zero-RTT ACK: {} timer wake-ups in 1 ms (vs {} with a 5 us RTT)",
        counts[1],
        counts[0]
    );
}

// ------------------------------------------------------------------ data the receiver rejects

#[test]
fn data_with_msg_len_beyond_max_message_len() {
    let cfg = FlowConfig {
        max_message_len: 10_000,
        ..FlowConfig::default()
    };
    let (mut ep, h) = endpoint_with(&cfg);
    let d = data(0, 9, 10_001, 0, &[7; 100]);
    assert_eq!(ep.receive(Instant::from_us(1), 0, &d, false), Ok(()));
    let r = ep.connection(h).receiver_stats().clone();
    assert_eq!(r.inconsistent, 1);
    assert_eq!(r.data_packets, 1);
    assert_eq!(r.bytes_delivered, 0);
    assert!(events(&mut ep, h).is_empty());
    // PSN 0 is still expected: a proper message there is delivered.
    let d = data(0, 10, 10_000, 0, &[8; 100]);
    ep.receive(Instant::from_us(2), 0, &d, false).unwrap();
    assert_eq!(ep.connection(h).receiver_stats().inconsistent, 1);
    assert_eq!(ep.connection(h).receiver_stats().bytes_delivered, 100);
}

#[test]
fn data_psn_far_outside_the_window() {
    let (mut ep, h) = endpoint();
    let max_distance = BufferConfig::default().max_distance;
    // Just inside: buffered and acknowledged.
    let inside = data(max_distance - 1, 9, 100, 0, &[7; 100]);
    ep.receive(Instant::from_us(1), 0, &inside, false).unwrap();
    // At the limit and far beyond: dropped and NAKed OUT_OF_WINDOW.
    for psn in [max_distance, 1 << 30] {
        let d = data(psn, 9, 100, 0, &[7; 100]);
        assert_eq!(ep.receive(Instant::from_us(1), 0, &d, false), Ok(()));
    }
    let r = ep.connection(h).receiver_stats().clone();
    assert_eq!(r.dropped_out_of_window, 2);
    assert_eq!(r.data_packets, 3);
    let sent = drain(&mut ep, Instant::from_us(1));
    let feedback: Vec<_> = sent
        .iter()
        .map(|(_, r, _)| (r.common.flow, r.body))
        .collect();
    assert_eq!(feedback.len(), 3, "{feedback:?}");
    assert!(
        matches!(feedback[0], (REMOTE, Body::Ack(fb)) if fb.acked_psn == Psn(max_distance - 1))
    );
    for (i, psn) in [(1, max_distance), (2, 1 << 30)] {
        match feedback[i] {
            (REMOTE, Body::Nak(fb, NakReason::OutOfWindow)) => {
                assert_eq!(fb.acked_psn, Psn(psn));
                assert_eq!(fb.cum_ack, Psn(0));
            }
            other => panic!("expected NAK OutOfWindow for {psn}, got {other:?}"),
        }
    }
    assert!(events(&mut ep, h).is_empty());
}

#[test]
fn data_psn_behind_the_window_is_a_duplicate() {
    let (mut ep, h) = endpoint();
    for psn in [u32::MAX, 1 << 31] {
        ep.receive(
            Instant::from_us(1),
            0,
            &data(psn, 9, 100, 0, &[7; 100]),
            false,
        )
        .unwrap();
    }
    let r = ep.connection(h).receiver_stats().clone();
    assert_eq!(r.duplicates, 2);
    assert_eq!(r.bytes_delivered, 0);
    assert!(events(&mut ep, h).is_empty());
}

#[test]
fn data_payload_larger_than_a_reorder_slot() {
    let (mut ep, h) = endpoint();
    let slot = BufferConfig::default().slot_size;
    let big = vec![1u8; slot + 1];
    // In order and out of order alike.
    for psn in [0, 5] {
        let d = data(psn, 9, big.len() as u64, 0, &big);
        assert_eq!(ep.receive(Instant::from_us(1), 0, &d, false), Ok(()));
    }
    let r = ep.connection(h).receiver_stats().clone();
    assert_eq!(r.inconsistent, 2);
    assert_eq!(r.bytes_delivered, 0);
    assert_eq!(r.rbo.max(), 0);
    assert!(events(&mut ep, h).is_empty());
    // The stream is intact: PSN 0 is still expected.
    ep.receive(Instant::from_us(2), 0, &valid_data(), false)
        .unwrap();
    assert_eq!(received(&events(&mut ep, h)), [(9, vec![7; 100])]);
}

#[test]
fn duplicate_data_packet() {
    let (mut ep, h) = endpoint();
    let a = [1u8; 100];
    let b = [2u8; 50];
    let p0 = data(0, 4, 150, 0, &a);
    let p1 = data(1, 4, 150, 100, &b);
    let t = Instant::from_us(1);
    // PSN 1 twice while buffered, then PSN 0 delivers, then both again.
    for d in [&p1, &p1, &p0, &p0, &p1] {
        assert_eq!(ep.receive(t, 0, d, false), Ok(()));
    }
    let r = ep.connection(h).receiver_stats().clone();
    assert_eq!(r.data_packets, 5);
    assert_eq!(r.duplicates, 3);
    assert_eq!(r.messages_delivered, 1);
    assert_eq!(r.bytes_delivered, 150);
    let got = received(&events(&mut ep, h));
    assert_eq!(got, [(4, [&a[..], &b[..]].concat())]);
    // Every arrival is acknowledged; duplicates say so.
    let dup_flags: Vec<bool> = drain(&mut ep, t)
        .iter()
        .map(|(_, r, _)| match r.body {
            Body::Ack(fb) => fb.duplicate,
            other => panic!("expected ACKs only, got {other:?}"),
        })
        .collect();
    assert_eq!(dup_flags, [false, true, false, true, true]);
}

#[test]
fn data_continuing_a_message_never_started() {
    // At the expected PSN, offset 100 of a message whose first packet never came:
    // between messages only a message start can come next, so it is dropped
    // unacknowledged (issue 15 row 7) and the PSN stays expected.
    let (mut ep, h) = endpoint();
    let t = Instant::from_us(1);
    ep.receive(t, 0, &data(0, 4, 150, 100, &[2; 50]), false)
        .unwrap();
    let r = ep.connection(h).receiver_stats().clone();
    assert_eq!(r.inconsistent, 1);
    assert_eq!(r.messages_delivered, 0);
    assert!(received(&events(&mut ep, h)).is_empty());
    let mut buf = vec![0; 64 * 1024];
    assert!(
        ep.poll_transmit(t, &mut buf).is_none(),
        "it was acknowledged"
    );
    // The real packet of that PSN, a message start, is taken and delivered, and a
    // proper message after it.
    ep.receive(t, 0, &data(0, 5, 10, 0, &[3; 10]), false)
        .unwrap();
    ep.receive(t, 0, &data(1, 6, 10, 0, &[4; 10]), false)
        .unwrap();
    assert_eq!(
        received(&events(&mut ep, h)),
        [(5, vec![3; 10]), (6, vec![4; 10])]
    );
}

#[test]
fn message_restarted_before_it_finished() {
    let (mut ep, h) = endpoint();
    let t = Instant::from_us(1);
    ep.receive(t, 0, &data(0, 4, 150, 0, &[1; 100]), false)
        .unwrap();
    // A new first packet where PSN 1 should continue message 4.
    ep.receive(t, 0, &data(1, 5, 10, 0, &[3; 10]), false)
        .unwrap();
    let r = ep.connection(h).receiver_stats().clone();
    assert_eq!(r.inconsistent, 1);
    assert_eq!(received(&events(&mut ep, h)), [(5, vec![3; 10])]);
}

#[test]
fn data_with_fields_contradicting_the_message() {
    // Second packet with another msg_id, another msg_len, or a gap in the offsets.
    let t = Instant::from_us(1);
    for second in [
        data(1, 99, 150, 100, &[2; 50]),
        data(1, 4, 160, 100, &[2; 60]),
        data(1, 4, 150, 90, &[2; 60]),
    ] {
        let (mut ep, h) = endpoint();
        ep.receive(t, 0, &data(0, 4, 150, 0, &[1; 100]), false)
            .unwrap();
        ep.receive(t, 0, &second, false).unwrap();
        let r = ep.connection(h).receiver_stats().clone();
        assert_eq!(r.inconsistent, 1);
        assert!(received(&events(&mut ep, h)).is_empty());
    }
}

#[test]
fn probe_is_acknowledged() {
    let (mut ep, h) = endpoint();
    let repr = Repr {
        common: common(LOCAL, 17, 2),
        body: Body::Probe(rondo_proto::wire::ProbeRepr { pad_len: 1000 }),
    };
    ep.receive(Instant::from_us(1), 2, &emit(&repr, &[]), false)
        .unwrap();
    assert_eq!(ep.connection(h).receiver_stats().probes, 1);
    let sent = drain(&mut ep, Instant::from_us(1));
    assert_eq!(sent.len(), 1);
    match sent[0].1.body {
        Body::Ack(fb) => {
            assert!(fb.of_probe);
            assert_eq!(fb.acked_psn, Psn(17));
            assert_eq!(fb.acked_path, 2);
        }
        other => panic!("expected a probe ACK, got {other:?}"),
    }
}

// ------------------------------------------------------------------ property tests

/// A valid datagram for the endpoint's flow of each type, from a few random fields.
fn template() -> impl Strategy<Value = Vec<u8>> {
    let psn = prop_oneof![0u32..8, any::<u32>()];
    let path = prop_oneof![0u16..6, any::<u16>()];
    let ts = prop_oneof![0u64..100_000, any::<u64>()];
    (
        0u8..4,
        psn.clone(),
        psn.clone(),
        path,
        ts.clone(),
        ts,
        1usize..1600,
        any::<bool>(),
    )
        .prop_map(|(kind, psn, psn2, path, ts1, ts2, len, flag)| {
            let fb = FeedbackRepr {
                acked_psn: Psn(psn),
                cum_ack: Psn(psn2),
                highest_psn: Psn(psn.max(psn2)),
                acked_path: path,
                of_probe: flag && kind == 2,
                duplicate: flag,
                echo_timestamp_ns: ts1,
                rx_timestamp_ns: ts2,
            };
            let mut c = common(LOCAL, psn, path);
            c.timestamp_ns = ts1;
            let (body, payload) = match kind {
                0 => {
                    let offset = if flag { 0 } else { u64::from(psn2 % 4) * 1452 };
                    let body = Body::Data(DataRepr {
                        msg_id: u64::from(psn2 % 3),
                        msg_len: offset + len as u64 + u64::from(flag) * 1452,
                        offset,
                        payload_len: len,
                    });
                    (body, vec![psn as u8; len])
                }
                1 => (
                    Body::Probe(rondo_proto::wire::ProbeRepr { pad_len: len }),
                    vec![],
                ),
                2 => (Body::Ack(fb), vec![]),
                _ => (
                    Body::Nak(
                        fb,
                        if flag {
                            NakReason::BufferFull
                        } else {
                            NakReason::OutOfWindow
                        },
                    ),
                    vec![],
                ),
            };
            emit(&Repr { common: c, body }, &payload)
        })
}

/// Arbitrary bytes, or a valid template with a few bytes overwritten and maybe cut.
fn datagram() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..128),
        template(),
        (
            template(),
            prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
            any::<prop::sample::Index>(),
            any::<bool>()
        )
            .prop_map(|(mut d, edits, cut, truncate)| {
                for (i, b) in edits {
                    let i = i.index(d.len());
                    d[i] = b;
                }
                if truncate {
                    d.truncate(cut.index(d.len() + 1));
                }
                d
            }),
    ]
}

/// Feeds `datagrams` to `ep` at increasing times, polling it as a driver would, and
/// checks the endpoint's counters against what `receive` returned.
fn feed(ep: &mut Endpoint, datagrams: &[Vec<u8>], start: Instant, spacing: Duration) -> Instant {
    let before = ep.stats();
    let (mut malformed, mut unknown) = (0, 0);
    let mut now = start;
    let mut buf = vec![0; 64 * 1024];
    for (i, d) in datagrams.iter().enumerate() {
        now += spacing.saturating_mul(i as u64 % 7);
        match ep.receive(now, (i % 4) as u16, d, i % 5 == 0) {
            Ok(()) => {}
            Err(DatagramError::Malformed(e)) => {
                malformed += 1;
                assert_eq!(wire::parse(d).err(), Some(e));
            }
            Err(DatagramError::UnknownFlow(f)) => {
                unknown += 1;
                assert_ne!(f, LOCAL);
            }
            Err(e) => panic!("unexpected error {e:?}"),
        }
        if ep.poll_timeout().is_some_and(|t| t <= now) {
            ep.handle_timeout(now);
        }
        let mut n = 0;
        while let Some(t) = ep.poll_transmit(now, &mut buf) {
            wire::parse(&buf[..t.len]).expect("the engine emits valid datagrams");
            n += 1;
            assert!(n < 100_000, "poll_transmit never ends");
        }
    }
    let after = ep.stats();
    assert_eq!(after.datagrams - before.datagrams, datagrams.len() as u64);
    assert_eq!(after.malformed - before.malformed, malformed);
    assert_eq!(after.unknown_flow - before.unknown_flow, unknown);
    now
}

proptest! {
    #![proptest_config(common::proptest_config(256))]

    /// Arbitrary and mutated datagrams, into an endpoint with a message in flight:
    /// never a panic, counters match the results, emitted datagrams parse.
    #[test]
    fn arbitrary_datagrams_never_panic(datagrams in prop::collection::vec(datagram(), 1..40)) {
        let (mut ep, h, _) = sending_endpoint();
        let now = feed(&mut ep, &datagrams, Instant::from_us(1), Duration::from_ns(300));
        // Run the timers a while longer.
        let mut now = now;
        let end = now + Duration::from_ms(5);
        let mut buf = vec![0; 64 * 1024];
        let mut steps = 0;
        while let Some(t) = ep.poll_timeout() {
            if t > end {
                break;
            }
            now = now.max(t);
            ep.handle_timeout(now);
            while ep.poll_transmit(now, &mut buf).is_some() {}
            steps += 1;
            prop_assert!(steps < 100_000, "timer loop does not advance");
        }
        events(&mut ep, h);
    }
}

proptest! {
    #![proptest_config(common::proptest_config(32))]

    /// Garbage fed to the sending endpoint before it sends anything does not stop a
    /// real message from arriving byte-exact and completing.
    #[test]
    fn garbage_then_a_real_transfer(datagrams in prop::collection::vec(datagram(), 1..40)) {
        let paths = [PathSpec::new(25.0, 3.0), PathSpec::new(10.0, 5.0)];
        let mut tb = Testbed::new(3, 100.0, &paths, &FlowConfig::default(), BufferConfig::default()).unwrap();
        let a = tb.pair.a;
        let now = tb.now();
        // At the network's own time, so that the endpoint's clock never goes back.
        feed(tb.pair.net.host_mut(a), &datagrams, now, Duration::ZERO);
        let msg: Vec<u8> = (0..200_000u32).map(|i| (i * 31 + 7) as u8).collect();
        tb.post(1, msg.clone()).unwrap();
        let ok = tb.run_until(Instant::from_us(200_000), |t| t.send_completions() == 1 && t.received().count() == 1);
        prop_assert!(ok, "no completion by {:?}: {:?}", tb.now(), tb.sender().sender_stats());
        let got: Vec<_> = tb.received().collect();
        prop_assert_eq!(got.len(), 1);
        prop_assert_eq!(got[0].0, 1);
        prop_assert!(got[0].1 == msg.as_slice());
        prop_assert!(!tb.events_a.iter().any(|(_, e)| matches!(e, Event::Error(_))));
    }
}

// ------------------------------------------------------------------ refusals

/// A "reorder buffer full" NAK is the receiver's refusal of a packet its path
/// delivered: it does not count toward taking the path out of rotation. With
/// `path_down_losses` 2, one refusal on path 0 and then one loss found by early
/// recovery on path 0 leave the path up (counted as a loss, the refusal made
/// that the second loss in a row and the path went down).
#[test]
fn a_refusal_is_not_a_loss_of_its_path() {
    let cfg = FlowConfig {
        paths: 2,
        path_down_losses: 2,
        pacing: false,
        // Swift's first windows let several packets out per path at once.
        transport: Transport::from_name("swift-rps").unwrap(),
        ..FlowConfig::default()
    };
    let (mut ep, h) = endpoint_with(&cfg);
    let payload = cfg.payload_per_packet();
    ep.post(h, Instant::ZERO, 1, vec![3; 16 * payload]).unwrap();
    // What the initial windows let out in the first 5 us (the line-rate clock
    // spaces the packets).
    let mut sent: Vec<(u32, u16)> = Vec::new();
    for ns in (0..5_000).step_by(10) {
        let now = Instant::from_ns(ns);
        ep.handle_timeout(now);
        sent.extend(
            drain(&mut ep, now)
                .iter()
                .filter(|(_, r, _)| matches!(r.body, Body::Data(_)))
                .map(|(t, r, _)| (r.common.psn.0, t.path)),
        );
    }
    let on_path0: Vec<u32> = sent.iter().filter(|s| s.1 == 0).map(|s| s.0).collect();
    let highest = sent.iter().map(|s| s.0).max().unwrap();
    assert!(on_path0.len() >= 2, "two packets on path 0: {sent:?}");
    // The lowest packet on path 0 is refused; the next is the one early recovery
    // will find lost; everything else arrives.
    let (refused, lost) = (on_path0[0], on_path0[1]);
    assert!(highest > lost + 4, "a PSN gap beyond {lost}: {sent:?}");
    let at = Instant::from_us(5);
    for &(psn, path) in &sent {
        if psn != refused && psn != lost {
            ep.receive(at, path, &ack(feedback(psn, refused, psn, path)), false)
                .unwrap();
        }
    }
    let d = nak(
        feedback(refused, refused, highest, 0),
        NakReason::BufferFull,
    );
    ep.receive(at, 0, &d, false).unwrap();
    assert_eq!(ep.connection(h).paths().status(0), PathStatus::Up);
    let before = ep.connection(h).sender_stats().lost_declared;
    let mut now = at;
    while now < Instant::from_us(400) {
        now += Duration::from_us(1);
        ep.handle_timeout(now);
        drain(&mut ep, now);
        if ep.connection(h).sender_stats().lost_declared > before {
            break;
        }
    }
    let s = ep.connection(h).sender_stats();
    assert!(
        s.lost_declared > before,
        "early recovery found {lost} lost: {s:?}"
    );
    assert_eq!(ep.connection(h).paths().status(0), PathStatus::Up, "{s:?}");
    assert_eq!(s.path_downs, 0);
}

/// After a "reorder buffer full" NAK Rondo holds new PSNs within half the
/// refused span beyond the hole (the receiver-limited span, `sender/loss.rs`);
/// the baselines' papers have nothing like it, so swift-rps keeps sending new
/// data as its windows allow, unless `receiver_span` asks for the span.
#[test]
fn only_a_transport_with_the_receiver_span_holds_new_data_after_a_refusal() {
    // New PSNs sent after a refusal of the highest PSN of the first burst (hole
    // at PSN 0), once every other packet of the burst is acknowledged.
    let new_after_refusal = |span: Option<bool>| -> usize {
        let cfg = FlowConfig {
            paths: 2,
            pacing: false,
            transport: Transport::from_name("swift-rps").unwrap(),
            receiver_span: span,
            ..FlowConfig::default()
        };
        let (mut ep, h) = endpoint_with(&cfg);
        let payload = cfg.payload_per_packet();
        ep.post(h, Instant::ZERO, 1, vec![3; 1000 * payload])
            .unwrap();
        let data_sent = |out: Vec<(Transmit, Repr, Vec<u8>)>| -> Vec<(u32, u16)> {
            out.iter()
                .filter(|(_, r, _)| matches!(r.body, Body::Data(_)))
                .map(|(t, r, _)| (r.common.psn.0, t.path))
                .collect()
        };
        let mut burst = Vec::new();
        for ns in (0..10_000).step_by(100) {
            let now = Instant::from_ns(ns);
            ep.handle_timeout(now);
            burst.extend(data_sent(drain(&mut ep, now)));
        }
        let highest = burst.iter().map(|s| s.0).max().unwrap();
        assert!(highest > 16, "a first burst: {burst:?}");
        let at = Instant::from_us(12);
        let refused = burst.iter().find(|s| s.0 == highest).unwrap();
        let d = nak(
            feedback(highest, 0, highest, refused.1),
            NakReason::BufferFull,
        );
        ep.receive(at, refused.1, &d, false).unwrap();
        for &(psn, path) in burst.iter().filter(|s| s.0 != 0 && s.0 != highest) {
            ep.receive(at, path, &ack(feedback(psn, 0, highest, path)), false)
                .unwrap();
        }
        let mut after = Vec::new();
        for ns in (12_000..30_000).step_by(100) {
            let now = Instant::from_ns(ns);
            ep.handle_timeout(now);
            after.extend(data_sent(drain(&mut ep, now)));
        }
        after.iter().filter(|s| s.0 > highest).count()
    };
    assert!(new_after_refusal(None) > 0, "swift-rps sends on");
    assert_eq!(new_after_refusal(Some(true)), 0, "held within the span");
}
