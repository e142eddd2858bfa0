//! Property tests: every valid packet round-trips, and no input makes parsing panic.

use proptest::prelude::*;

use super::*;

fn arb_common() -> impl Strategy<Value = CommonRepr> {
    (
        any::<u32>(),
        any::<u32>(),
        any::<u16>(),
        0u8..16,
        any::<u64>(),
    )
        .prop_map(|(flow, psn, path, flags, timestamp_ns)| CommonRepr {
            flow,
            psn: Psn(psn),
            path,
            flags: Flags::from_bits(flags).unwrap(),
            timestamp_ns,
        })
}

/// Consistent DATA fields: `offset + payload_len <= msg_len`, with the first and
/// last packet of a message and the edges of `u64` well represented.
fn arb_data() -> impl Strategy<Value = DataRepr> {
    (1usize..=64)
        .prop_flat_map(|len| {
            let max_offset = u64::MAX - len as u64;
            (
                Just(len),
                prop_oneof![Just(0), Just(max_offset), 0..=max_offset],
            )
        })
        .prop_flat_map(|(len, offset)| {
            let max_tail = u64::MAX - offset - len as u64;
            (
                Just(len),
                Just(offset),
                prop_oneof![Just(0), 0..=max_tail.min(64), 0..=max_tail],
                any::<u64>(),
            )
        })
        .prop_map(|(payload_len, offset, tail, msg_id)| DataRepr {
            msg_id,
            msg_len: offset + payload_len as u64 + tail,
            offset,
            payload_len,
        })
}

fn arb_feedback() -> impl Strategy<Value = FeedbackRepr> {
    (
        (any::<u32>(), any::<u32>(), any::<u32>(), any::<u16>()),
        (any::<bool>(), any::<bool>(), any::<u64>(), any::<u64>()),
    )
        .prop_map(
            |((acked, cum, highest, acked_path), (of_probe, duplicate, echo, rx))| FeedbackRepr {
                acked_psn: Psn(acked),
                cum_ack: Psn(cum),
                highest_psn: Psn(highest),
                acked_path,
                of_probe,
                duplicate,
                echo_timestamp_ns: echo,
                rx_timestamp_ns: rx,
            },
        )
}

fn arb_body() -> impl Strategy<Value = Body> {
    prop_oneof![
        arb_data().prop_map(Body::Data),
        (0usize..300).prop_map(|pad_len| Body::Probe(ProbeRepr { pad_len })),
        arb_feedback().prop_map(Body::Ack),
        (
            arb_feedback(),
            prop_oneof![
                Just(NakReason::BufferFull),
                Just(NakReason::OutOfWindow),
                Just(NakReason::SequenceError),
                Just(NakReason::OutOfOrder)
            ]
        )
            .prop_map(|(feedback, reason)| Body::Nak(feedback, reason)),
    ]
}

fn arb_repr() -> impl Strategy<Value = Repr> {
    (arb_common(), arb_body()).prop_map(|(common, body)| Repr { common, body })
}

/// What `parse` returns for an emitted `repr`: DATA's FIRST/LAST follow the offset.
fn normalized(mut repr: Repr) -> Repr {
    if let Body::Data(data) = repr.body {
        repr.common.flags = repr
            .common
            .flags
            .with_if(Flags::FIRST, data.is_first())
            .with_if(Flags::LAST, data.is_last());
    }
    repr
}

/// A successful parse must survive emit and parse again unchanged.
fn assert_reemits(repr: &Repr, payload: &[u8]) {
    let mut buf = vec![0; repr.buffer_len()];
    let header_len = repr.emit(&mut buf).unwrap();
    buf[header_len..header_len + payload.len()].copy_from_slice(payload);
    assert_eq!(parse(&buf).unwrap(), (*repr, payload));
}

/// Calls every accessor valid for a checked packet of this type.
fn read_all_fields(bytes: &[u8]) {
    let Ok(packet) = Packet::new_checked(bytes) else {
        return;
    };
    let _ = (
        packet.flags(),
        packet.path(),
        packet.reserved(),
        packet.flow(),
    );
    let _ = (packet.psn(), packet.timestamp_ns(), packet.payload());
    match packet.packet_type().unwrap() {
        PacketType::Data => {
            let _ = (packet.msg_id(), packet.msg_len(), packet.offset());
        }
        PacketType::Probe => {}
        PacketType::Ack | PacketType::Nak => {
            let _ = (packet.acked_psn(), packet.cum_ack(), packet.highest_psn());
            let _ = (packet.acked_path(), packet.of_probe(), packet.duplicate());
            let _ = (packet.nak_reason(), packet.echo_timestamp_ns());
            let _ = packet.rx_timestamp_ns();
        }
    }
    packet.extensions().for_each(drop);
}

proptest! {
    #[test]
    fn emit_then_parse_round_trips(repr in arb_repr(), fill in any::<u8>()) {
        let mut buf = vec![0xee; repr.buffer_len()];
        let header_len = repr.emit(&mut buf).unwrap();
        prop_assert_eq!(header_len, repr.header_len());
        buf[header_len..].iter_mut().for_each(|b| *b = fill);
        let (parsed, payload) = parse(&buf).unwrap();
        prop_assert_eq!(parsed, normalized(repr));
        match repr.body {
            Body::Data(data) => prop_assert_eq!(payload, &vec![fill; data.payload_len][..]),
            _ => prop_assert!(payload.is_empty()),
        }
    }

    #[test]
    fn parse_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        read_all_fields(&bytes);
        if let Ok((repr, payload)) = parse(&bytes) {
            assert_reemits(&repr, payload);
        }
    }

    /// Arbitrary bytes behind a plausible first word, to get past the version and
    /// type checks.
    #[test]
    fn parse_plausible_headers_never_panics(
        packet_type in 0u8..6,
        flags in 0u8..20,
        words in 0u8..20,
        rest in proptest::collection::vec(any::<u8>(), 0..120),
    ) {
        let mut bytes = vec![VERSION, packet_type, flags, words];
        bytes.extend(rest);
        read_all_fields(&bytes);
        if let Ok((repr, payload)) = parse(&bytes) {
            assert_reemits(&repr, payload);
        }
    }

    #[test]
    fn parse_mutated_packets_never_panics(
        repr in arb_repr(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 0..4),
        keep in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
    ) {
        let mut buf = vec![0; repr.buffer_len()];
        repr.emit(&mut buf).unwrap();
        if !buf.is_empty() {
            for (at, mask) in flips {
                let at = at.index(buf.len());
                buf[at] ^= mask;
            }
        }
        if truncate {
            buf.truncate(keep.index(buf.len() + 1));
        }
        read_all_fields(&buf);
        if let Ok((repr, payload)) = parse(&buf) {
            assert_reemits(&repr, payload);
        }
    }
}
