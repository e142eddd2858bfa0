//! One test per way a datagram can be malformed, each expecting its exact error.

use super::*;

fn data_bytes() -> Vec<u8> {
    emit_vec(&data_repr(4, 2, 10))
}

fn parse_err(bytes: &[u8]) -> WireError {
    parse(bytes).expect_err("malformed packet parsed")
}

#[test]
fn empty_buffer() {
    assert_eq!(
        parse_err(&[]),
        WireError::Truncated {
            needed: COMMON_HEADER_LEN,
            got: 0
        }
    );
}

#[test]
fn truncated_common_header() {
    assert_eq!(
        parse_err(&data_bytes()[..23]),
        WireError::Truncated {
            needed: COMMON_HEADER_LEN,
            got: 23
        }
    );
}

#[test]
fn truncated_data_fixed_part() {
    assert_eq!(
        parse_err(&data_bytes()[..40]),
        WireError::Truncated {
            needed: DATA_HEADER_LEN,
            got: 40
        }
    );
}

#[test]
fn truncated_feedback_fixed_part() {
    assert_eq!(
        parse_err(&emit_vec(&ack_repr())[..50]),
        WireError::Truncated {
            needed: FEEDBACK_HEADER_LEN,
            got: 50
        }
    );
}

#[test]
fn bad_version() {
    let mut bytes = data_bytes();
    bytes[0] = 2;
    assert_eq!(parse_err(&bytes), WireError::BadVersion(2));
}

#[test]
fn unknown_type() {
    let mut bytes = data_bytes();
    bytes[1] = 9;
    assert_eq!(parse_err(&bytes), WireError::UnknownType(9));
}

#[test]
fn reserved_flag_bits() {
    let mut bytes = data_bytes();
    Packet::new_unchecked(&mut bytes[..]).set_flags_byte(0x11);
    assert_eq!(parse_err(&bytes), WireError::ReservedFlags(0x11));
}

#[test]
fn reserved_feedback_flag_bits() {
    let mut bytes = emit_vec(&ack_repr());
    Packet::new_unchecked(&mut bytes[..]).set_feedback_flags(0x07);
    assert_eq!(parse_err(&bytes), WireError::ReservedFlags(0x07));
}

#[test]
fn header_words_too_small() {
    let mut bytes = data_bytes();
    bytes[3] = 11;
    assert_eq!(
        parse_err(&bytes),
        WireError::BadHeaderLength {
            words: 11,
            min: DATA_HEADER_LEN,
            available: 50
        }
    );
}

#[test]
fn header_words_past_the_end() {
    let mut bytes = data_bytes();
    bytes[3] = 13;
    assert_eq!(
        parse_err(&bytes),
        WireError::BadHeaderLength {
            words: 13,
            min: DATA_HEADER_LEN,
            available: 50
        }
    );
}

#[test]
fn data_with_empty_payload() {
    let bytes = emit_vec(&data_repr(0, 1, 1));
    assert_eq!(
        parse_err(&bytes[..DATA_HEADER_LEN]),
        WireError::EmptyPayload
    );
}

#[test]
fn offset_plus_len_past_msg_len() {
    let mut bytes = data_bytes();
    Packet::new_unchecked(&mut bytes[..]).set_msg_len(5);
    assert_eq!(
        parse_err(&bytes),
        WireError::InconsistentMessage {
            msg_len: 5,
            offset: 4,
            payload_len: 2
        }
    );
}

#[test]
fn offset_plus_len_overflowing_u64() {
    let mut bytes = data_bytes();
    let mut packet = Packet::new_unchecked(&mut bytes[..]);
    packet.set_offset(u64::MAX - 1);
    packet.set_msg_len(u64::MAX);
    assert_eq!(
        parse_err(&bytes),
        WireError::InconsistentMessage {
            msg_len: u64::MAX,
            offset: u64::MAX - 1,
            payload_len: 2
        }
    );
}

#[test]
fn first_missing_on_offset_zero() {
    let mut bytes = emit_vec(&data_repr(0, 2, 10));
    Packet::new_unchecked(&mut bytes[..]).set_flags(Flags::RETX);
    assert_eq!(parse_err(&bytes), WireError::FirstLastMismatch);
}

#[test]
fn first_on_nonzero_offset() {
    let mut bytes = data_bytes();
    Packet::new_unchecked(&mut bytes[..]).set_flags(Flags::FIRST);
    assert_eq!(parse_err(&bytes), WireError::FirstLastMismatch);
}

#[test]
fn last_on_non_final_packet() {
    let mut bytes = data_bytes();
    Packet::new_unchecked(&mut bytes[..]).set_flags(Flags::LAST);
    assert_eq!(parse_err(&bytes), WireError::FirstLastMismatch);
}

#[test]
fn last_missing_on_final_packet() {
    let mut bytes = emit_vec(&data_repr(8, 2, 10));
    Packet::new_unchecked(&mut bytes[..]).set_flags(Flags::empty());
    assert_eq!(parse_err(&bytes), WireError::FirstLastMismatch);
}

#[test]
fn ack_with_trailing_bytes() {
    let mut bytes = emit_vec(&ack_repr());
    bytes.extend_from_slice(&[0, 0, 0]);
    assert_eq!(parse_err(&bytes), WireError::TrailingBytes(3));
}

#[test]
fn ack_with_nonzero_nak_reason() {
    let mut bytes = emit_vec(&ack_repr());
    Packet::new_unchecked(&mut bytes[..]).set_nak_reason(1);
    assert_eq!(parse_err(&bytes), WireError::BadNakReason(1));
}

#[test]
fn nak_with_unknown_reason() {
    let mut bytes = emit_vec(&ack_repr());
    let mut packet = Packet::new_unchecked(&mut bytes[..]);
    packet.set_packet_type(PacketType::Nak);
    for reason in [0, 5, 0xff] {
        packet.set_nak_reason(reason);
        assert_eq!(Repr::parse(&packet), Err(WireError::BadNakReason(reason)));
    }
}

#[test]
fn unknown_critical_extension() {
    let bytes = with_extensions(data_bytes(), &[0x81, 2, 0xaa, 0xbb]);
    assert_eq!(parse_err(&bytes), WireError::UnknownCriticalExtension(0x81));
}

#[test]
fn malformed_extension_overrunning_the_header() {
    // A pad, then a TLV claiming 5 value bytes where 2 remain.
    let bytes = with_extensions(data_bytes(), &[0, 0x01, 5, 0xaa]);
    assert_eq!(
        parse_err(&bytes),
        WireError::MalformedExtension {
            at: DATA_HEADER_LEN + 1
        }
    );
    // A type byte with no room for its length byte.
    let bytes = with_extensions(emit_vec(&ack_repr()), &[0, 0, 0, 0x42]);
    assert_eq!(
        parse_err(&bytes),
        WireError::MalformedExtension {
            at: FEEDBACK_HEADER_LEN + 3
        }
    );
}

#[test]
fn unknown_noncritical_extension_skipped() {
    let plain = data_bytes();
    let bytes = with_extensions(plain.clone(), &[0, 0x01, 1, 0xaa, 0x7f, 0, 0, 0]);
    let (repr, payload) = parse(&bytes).unwrap();
    assert_eq!((repr, payload), parse(&plain).unwrap());
    let packet = Packet::new_checked(&bytes[..]).unwrap();
    assert_eq!(packet.header_len(), DATA_HEADER_LEN + 8);
    let extensions: Vec<_> = packet.extensions().collect();
    assert_eq!(
        extensions,
        [
            Ok(Extension {
                kind: 0x01,
                value: &[0xaa]
            }),
            Ok(Extension {
                kind: 0x7f,
                value: &[]
            }),
        ]
    );
}

#[test]
fn emit_into_too_small_buffer() {
    let repr = data_repr(4, 2, 10);
    let mut buf = [0; 49];
    assert_eq!(
        repr.emit(&mut buf),
        Err(WireError::BufferTooSmall {
            needed: 50,
            got: 49
        })
    );
    let mut buf = [0; 55];
    assert_eq!(
        ack_repr().emit(&mut buf),
        Err(WireError::BufferTooSmall {
            needed: 56,
            got: 55
        })
    );
}

#[test]
fn emit_rejects_inconsistent_data() {
    let mut buf = [0; 100];
    assert_eq!(
        data_repr(0, 0, 10).emit(&mut buf),
        Err(WireError::EmptyPayload)
    );
    assert_eq!(
        data_repr(9, 2, 10).emit(&mut buf),
        Err(WireError::InconsistentMessage {
            msg_len: 10,
            offset: 9,
            payload_len: 2
        })
    );
}
