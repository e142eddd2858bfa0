//! Wire format tests: byte layout pinned by hand-written vectors, one test per
//! malformed case, property tests for round trips and panic freedom.

mod malformed;
mod props;

use super::*;
use crate::Psn;

/// A DATA packet in the middle of a 10-byte message.
fn data_repr(offset: u64, payload_len: usize, msg_len: u64) -> Repr {
    Repr {
        common: CommonRepr {
            flow: 0x0102,
            psn: Psn(0x0001_0203),
            path: 7,
            flags: Flags::RETX,
            timestamp_ns: 0x1122_3344,
        },
        body: Body::Data(DataRepr {
            msg_id: 9,
            msg_len,
            offset,
            payload_len,
        }),
    }
}

fn feedback() -> FeedbackRepr {
    FeedbackRepr {
        acked_psn: Psn(0x0001_0203),
        cum_ack: Psn(0x0001_0200),
        highest_psn: Psn(0x0001_0210),
        acked_path: 7,
        of_probe: true,
        duplicate: true,
        echo_timestamp_ns: 0x1122_3344,
        rx_timestamp_ns: 0xaabb_ccdd,
    }
}

fn ack_repr() -> Repr {
    Repr {
        common: CommonRepr {
            flow: 0x0102,
            psn: Psn(0),
            path: 1,
            flags: Flags::ECN_ECHO,
            timestamp_ns: 0x5566_7788,
        },
        body: Body::Ack(feedback()),
    }
}

/// Emits `repr` into a fresh buffer, payload bytes counting up from 0xa0.
fn emit_vec(repr: &Repr) -> Vec<u8> {
    let mut buf = vec![0xee; repr.buffer_len()];
    let header_len = repr.emit(&mut buf).expect("emit");
    if let Body::Data(_) = repr.body {
        for (i, byte) in buf[header_len..].iter_mut().enumerate() {
            *byte = 0xa0u8.wrapping_add(i as u8);
        }
    }
    buf
}

/// `bytes` with `extensions` inserted after the fixed header and `header_words`
/// grown to cover them (`extensions.len()` must be a multiple of 4).
fn with_extensions(mut bytes: Vec<u8>, extensions: &[u8]) -> Vec<u8> {
    assert_eq!(extensions.len() % 4, 0);
    let fixed = Packet::new_checked(&bytes[..]).unwrap().header_len();
    bytes.splice(fixed..fixed, extensions.iter().copied());
    bytes[3] += (extensions.len() / 4) as u8;
    bytes
}

fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(u8::is_ascii_hexdigit).collect();
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(core::str::from_utf8(pair).unwrap(), 16).unwrap())
        .collect()
}

const DATA_HEX: &str = "
    01 01 05 0c  0007 0000  00000102  00010203  00000000 11223344
    00000000 00000009  00000000 0000000a  00000000 00000000
    a0 a1 a2 a3";

const ACK_HEX: &str = "
    01 03 02 0e  0001 0000  00000102  00000000  00000000 55667788
    00010203  00010200  00010210  0007 03 00
    00000000 11223344  00000000 aabbccdd";

#[test]
fn data_byte_layout() {
    // First packet (offset 0) of a 10-byte message, a retransmission: RETX | FIRST.
    let repr = data_repr(0, 4, 10);
    let bytes = hex(DATA_HEX);
    assert_eq!(emit_vec(&repr), bytes);

    let (parsed, payload) = parse(&bytes).unwrap();
    let mut expected = repr;
    expected.common.flags = Flags::RETX | Flags::FIRST;
    assert_eq!(parsed, expected);
    assert_eq!(payload, [0xa0, 0xa1, 0xa2, 0xa3]);

    let packet = Packet::new_checked(&bytes[..]).unwrap();
    assert_eq!(packet.header_len(), DATA_HEADER_LEN);
    assert_eq!(packet.msg_len(), 10);
    assert_eq!(packet.psn(), Psn(0x0001_0203));
    assert_eq!(packet.extensions().count(), 0);
}

#[test]
fn ack_byte_layout() {
    let repr = ack_repr();
    let bytes = hex(ACK_HEX);
    assert_eq!(emit_vec(&repr), bytes);
    assert_eq!(parse(&bytes).unwrap(), (repr, &[][..]));

    let packet = Packet::new_checked(&bytes[..]).unwrap();
    assert_eq!(packet.header_len(), FEEDBACK_HEADER_LEN);
    assert_eq!(packet.cum_ack(), Psn(0x0001_0200));
    assert_eq!(packet.rx_timestamp_ns(), 0xaabb_ccdd);
}

#[test]
fn nak_and_probe_layout() {
    let nak = Repr {
        body: Body::Nak(feedback(), NakReason::OutOfWindow),
        ..ack_repr()
    };
    let bytes = emit_vec(&nak);
    assert_eq!(bytes[1], 4);
    assert_eq!(bytes[39], 2);
    assert_eq!(parse(&bytes).unwrap().0, nak);

    let probe = Repr {
        common: CommonRepr {
            psn: Psn(5),
            ..ack_repr().common
        },
        body: Body::Probe(ProbeRepr { pad_len: 100 }),
    };
    let bytes = emit_vec(&probe);
    assert_eq!(bytes.len(), PROBE_HEADER_LEN + 100);
    assert_eq!(&bytes[..4], [1, 2, 0x02, 6]);
    assert!(bytes[PROBE_HEADER_LEN..].iter().all(|&b| b == 0));
    assert_eq!(parse(&bytes).unwrap(), (probe, &[][..]));
}

#[test]
fn probe_padding_content_is_ignored() {
    let probe = Repr {
        common: ack_repr().common,
        body: Body::Probe(ProbeRepr { pad_len: 8 }),
    };
    let mut bytes = emit_vec(&probe);
    bytes[PROBE_HEADER_LEN..].fill(0x5a);
    assert_eq!(parse(&bytes).unwrap().0, probe);
}

#[test]
fn reserved_field_is_ignored_on_parse() {
    let mut bytes = hex(ACK_HEX);
    bytes[6] = 0xff;
    assert_eq!(parse(&bytes).unwrap().0, ack_repr());
}

#[test]
fn emit_sets_first_and_last() {
    for (offset, len, msg_len, flags) in [
        (0, 4, 4, Flags::FIRST | Flags::LAST),
        (0, 4, 10, Flags::FIRST),
        (4, 2, 10, Flags::empty()),
        (6, 4, 10, Flags::LAST),
    ] {
        let mut repr = data_repr(offset, len, msg_len);
        repr.common.flags = Flags::FIRST | Flags::LAST; // overridden by emit
        let (parsed, _) = parse(&emit_vec(&repr)).unwrap();
        assert_eq!(parsed.common.flags, flags, "offset {offset}");
    }
}

#[test]
fn emit_leaves_bytes_past_the_packet_alone() {
    let repr = ack_repr();
    let mut buf = [0xee; 100];
    assert_eq!(repr.emit(&mut buf), Ok(FEEDBACK_HEADER_LEN));
    assert!(buf[FEEDBACK_HEADER_LEN..].iter().all(|&b| b == 0xee));
}

#[test]
fn to_datagram_is_header_then_payload() {
    let mut repr = data_repr(4, 4, 10);
    repr.common.flags = Flags::RETX; // emit adds neither FIRST nor LAST here
    let token = Some(0x0102_0304_0506_0708);
    let bytes = repr.to_datagram(b"wxyz", token).unwrap();
    assert_eq!(bytes.len(), repr.buffer_len_with_token(token));
    let mut by_hand = vec![0; bytes.len()];
    let header_len = repr.emit_with_token(&mut by_hand, token).unwrap();
    by_hand[header_len..].copy_from_slice(b"wxyz");
    assert_eq!(bytes, by_hand);
    let (parsed, payload) = parse(&bytes).unwrap();
    assert_eq!((parsed, payload), (repr, &b"wxyz"[..]));
    let ack = ack_repr().to_datagram(&[], None).unwrap();
    assert_eq!(ack, hex(ACK_HEX));
}

#[test]
fn to_datagram_refuses_a_payload_of_another_length() {
    let repr = data_repr(4, 4, 10);
    assert_eq!(
        repr.to_datagram(b"abc", None),
        Err(WireError::PayloadLength {
            expected: 4,
            got: 3
        })
    );
    assert_eq!(
        ack_repr().to_datagram(b"x", None),
        Err(WireError::PayloadLength {
            expected: 0,
            got: 1
        })
    );
    // The header's own checks still apply.
    let bad = data_repr(8, 4, 10);
    assert!(matches!(
        bad.to_datagram(b"abcd", None),
        Err(WireError::InconsistentMessage { .. })
    ));
}

#[test]
fn flags_builder() {
    let mut flags = Flags::empty().with(Flags::RETX).with(Flags::LAST);
    assert_eq!(flags.bits(), 0x09);
    assert!(flags.contains(Flags::RETX | Flags::LAST));
    assert!(!flags.contains(Flags::FIRST));
    flags.insert(Flags::ECN_ECHO);
    flags.remove(Flags::RETX);
    assert_eq!(flags, Flags::from_bits(0x0a).unwrap());
    assert_eq!(Flags::from_bits(0x80), Err(WireError::ReservedFlags(0x80)));
}

/// A DATA header written into a buffer of the header's size, followed by the
/// payload, is the datagram `emit_with_token` writes whole; a shorter buffer is a
/// typed error, and a probe still needs room for its padding.
#[test]
fn a_header_alone_emits_into_a_header_sized_buffer() {
    let token = Some(0x0bad_cafe);
    let repr = data_repr(2, 5, 10);
    let payload = [1u8, 2, 3, 4, 5];
    let whole = repr.to_datagram(&payload, token).unwrap();
    let hlen = repr.header_len_with_token(token);
    let mut head = vec![0u8; hlen];
    assert_eq!(repr.emit_header_with_token(&mut head, token), Ok(hlen));
    head.extend_from_slice(&payload);
    assert_eq!(head, whole);
    assert_eq!(
        repr.emit_header_with_token(&mut vec![0u8; hlen - 1], token),
        Err(WireError::BufferTooSmall {
            needed: hlen,
            got: hlen - 1
        })
    );
    let probe = Repr {
        body: Body::Probe(ProbeRepr { pad_len: 40 }),
        ..repr
    };
    let plen = probe.buffer_len_with_token(token);
    assert!(matches!(
        probe.emit_header_with_token(&mut vec![0u8; plen - 1], token),
        Err(WireError::BufferTooSmall { .. })
    ));
}
