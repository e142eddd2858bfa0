//! Connection tokens (issue 4, "each connection carries a random token agreed at
//! connect time; datagrams without it are dropped and counted"): the token
//! extension on the wire, the endpoint's check, and a transfer that carries it.

use proptest::prelude::*;
use rondo_proto::wire::{
    self, Body, CommonRepr, DataRepr, Flags, Packet, Repr, WireError, DATA_HEADER_LEN, EXT_TOKEN,
    TOKEN_EXT_LEN,
};
use rondo_proto::{
    BufferConfig, DatagramError, Endpoint, Event, FlowConfig, Host, Instant, Psn, SharedBuffer,
    Transmit,
};
use rondo_sim::pair::PathSpec;
use rondo_sim::Testbed;

const LOCAL: u32 = 1;
const REMOTE: u32 = 2;
const TOKEN: u64 = 0x5eed_cafe_f00d_1234;

fn token_cfg(token: Option<u64>) -> FlowConfig {
    FlowConfig {
        token,
        ..FlowConfig::default()
    }
}

fn endpoint(token: Option<u64>) -> Endpoint {
    let mut ep = Endpoint::new(SharedBuffer::new(BufferConfig::default()).unwrap());
    ep.connect(Instant::ZERO, LOCAL, REMOTE, &token_cfg(token))
        .unwrap();
    ep
}

fn data_repr(payload_len: usize) -> Repr {
    Repr {
        common: CommonRepr {
            flow: LOCAL,
            psn: Psn(0),
            path: 0,
            flags: Flags::FIRST | Flags::LAST,
            timestamp_ns: 1_000,
        },
        body: Body::Data(DataRepr {
            msg_id: 3,
            msg_len: payload_len as u64,
            offset: 0,
            payload_len,
        }),
    }
}

/// A one-packet message for `LOCAL`, with `token` in its header.
fn datagram(token: Option<u64>) -> Vec<u8> {
    let repr = data_repr(100);
    let mut buf = vec![0; repr.buffer_len_with_token(token)];
    let header_len = repr.emit_with_token(&mut buf, token).unwrap();
    buf[header_len..].fill(0x42);
    buf
}

fn drain(ep: &mut Endpoint, now: Instant) -> Vec<Transmit> {
    let mut buf = vec![0; 2048];
    std::iter::from_fn(|| ep.poll_transmit(now, &mut buf)).collect()
}

#[test]
fn token_round_trips_through_the_header() {
    let bytes = datagram(Some(TOKEN));
    assert_eq!(bytes.len(), DATA_HEADER_LEN + TOKEN_EXT_LEN + 100);
    let (repr, payload) = wire::parse(&bytes).unwrap();
    assert_eq!(repr, data_repr(100));
    assert_eq!(payload, &[0x42; 100][..]);
    let packet = Packet::new_checked(&bytes[..]).unwrap();
    assert_eq!(packet.header_len(), DATA_HEADER_LEN + TOKEN_EXT_LEN);
    assert_eq!(packet.token(), Some(TOKEN));
    assert_eq!(Packet::new_unchecked(&datagram(None)[..]).token(), None);
}

#[test]
fn malformed_or_repeated_token_extension_is_rejected() {
    // Value of 4 bytes instead of 8.
    let mut short = datagram(Some(TOKEN));
    short[DATA_HEADER_LEN + 1] = 4;
    assert_eq!(
        wire::parse(&short).map(|_| ()),
        Err(WireError::BadTokenExtension {
            at: DATA_HEADER_LEN
        })
    );
    // Two tokens: the second one is the error.
    let one = datagram(Some(TOKEN));
    let ext = &one[DATA_HEADER_LEN..DATA_HEADER_LEN + TOKEN_EXT_LEN];
    let mut two = one[..DATA_HEADER_LEN + TOKEN_EXT_LEN].to_vec();
    two.extend_from_slice(ext);
    two.extend_from_slice(&one[DATA_HEADER_LEN + TOKEN_EXT_LEN..]);
    two[3] += (TOKEN_EXT_LEN / 4) as u8;
    assert_eq!(
        wire::parse(&two).map(|_| ()),
        Err(WireError::BadTokenExtension {
            at: DATA_HEADER_LEN + TOKEN_EXT_LEN
        })
    );
    assert_eq!(two[DATA_HEADER_LEN + TOKEN_EXT_LEN], EXT_TOKEN);
}

#[test]
fn right_token_is_accepted() {
    let mut ep = endpoint(Some(TOKEN));
    assert_eq!(
        ep.receive(Instant::from_us(1), 0, &datagram(Some(TOKEN)), false),
        Ok(())
    );
    assert_eq!(ep.stats().bad_token, 0);
    let h = rondo_proto::ConnectionHandle(0);
    assert_eq!(
        ep.poll_event(h),
        Some(Event::Received {
            msg_id: 3,
            data: vec![0x42; 100]
        })
    );
    // The ACK carries the token too.
    let mut buf = vec![0; 2048];
    let t = ep.poll_transmit(Instant::from_us(1), &mut buf).unwrap();
    assert_eq!(
        Packet::new_checked(&buf[..t.len]).unwrap().token(),
        Some(TOKEN)
    );
}

#[test]
fn wrong_token_is_dropped_and_counted() {
    let mut ep = endpoint(Some(TOKEN));
    assert_eq!(
        ep.receive(Instant::from_us(1), 0, &datagram(Some(TOKEN ^ 1)), false),
        Err(DatagramError::BadToken { flow: LOCAL })
    );
    assert_eq!(ep.stats().bad_token, 1);
    assert_eq!(
        ep.connection(rondo_proto::ConnectionHandle(0))
            .receiver_stats()
            .data_packets,
        0
    );
    assert!(drain(&mut ep, Instant::from_us(1)).is_empty(), "no ACK");
}

#[test]
fn missing_token_is_dropped_and_counted() {
    let mut ep = endpoint(Some(TOKEN));
    assert_eq!(
        ep.receive(Instant::from_us(1), 0, &datagram(None), false),
        Err(DatagramError::BadToken { flow: LOCAL })
    );
    assert_eq!(ep.stats().bad_token, 1);
    assert_eq!(ep.stats().datagrams, 1);
    assert!(drain(&mut ep, Instant::from_us(1)).is_empty());
}

#[test]
fn flow_without_token_accepts_both() {
    let mut ep = endpoint(None);
    assert_eq!(
        ep.receive(Instant::from_us(1), 0, &datagram(None), false),
        Ok(())
    );
    assert_eq!(ep.stats().bad_token, 0);
}

#[test]
fn token_costs_payload_not_mtu() {
    let cfg = token_cfg(Some(TOKEN));
    assert_eq!(
        cfg.payload_per_packet(),
        cfg.mtu - DATA_HEADER_LEN - TOKEN_EXT_LEN
    );
    let mut bad = token_cfg(Some(TOKEN));
    bad.mtu = DATA_HEADER_LEN + TOKEN_EXT_LEN;
    assert!(bad.validate().is_err());
}

#[test]
fn transfer_with_tokens_on_both_sides() {
    let paths = [PathSpec::new(10.0, 5.0), PathSpec::new(10.0, 8.0)];
    let cfg = FlowConfig {
        paths: 2,
        ..token_cfg(Some(TOKEN))
    };
    let mut tb = Testbed::new(1, 100.0, &paths, &cfg, BufferConfig::default()).unwrap();
    let data: Vec<u8> = (0..300_000u32).map(|i| (i * 13 + 1) as u8).collect();
    tb.post(7, data.clone()).unwrap();
    assert!(tb.run_until(Instant::from_us(20_000), |t| t.send_completions() == 1));
    let got: Vec<_> = tb.received().collect();
    assert_eq!(got.len(), 1);
    assert!(got[0].1 == data.as_slice());
    assert_eq!(tb.receiver_endpoint().stats().bad_token, 0);
    assert!(
        tb.sender().sender_stats().probes_sent > 0,
        "probes carry it too"
    );
}

proptest! {
    /// No token other than the agreed one gets a datagram in.
    #[test]
    fn no_mutated_token_is_accepted(mask in 1u64.., flip_byte in 0usize..8, bits in 1u8..) {
        let mut ep = endpoint(Some(TOKEN));
        // Change the token value: a whole-value mask, or some bits of one byte.
        let mut bytes = datagram(Some(TOKEN ^ mask));
        prop_assert_eq!(
            ep.receive(Instant::from_us(1), 0, &bytes, false),
            Err(DatagramError::BadToken { flow: LOCAL })
        );
        bytes = datagram(Some(TOKEN));
        bytes[DATA_HEADER_LEN + 2 + flip_byte] ^= bits;
        prop_assert_eq!(
            ep.receive(Instant::from_us(1), 0, &bytes, false),
            Err(DatagramError::BadToken { flow: LOCAL })
        );
        prop_assert_eq!(ep.stats().bad_token, 2);
        prop_assert_eq!(ep.connection(rondo_proto::ConnectionHandle(0)).receiver_stats().data_packets, 0);
    }
}

proptest! {
    /// Any DATA packet with any token round-trips: same `Repr`, same payload, same
    /// token, and the header stays a multiple of 4 bytes.
    #[test]
    fn token_round_trips_for_any_packet(
        token in any::<u64>(),
        len in 1usize..2000,
        offset in 0u64..10_000,
        extra in 0u64..5_000,
        psn in any::<u32>(),
    ) {
        let msg_len = offset + len as u64 + extra;
        let repr = Repr {
            common: CommonRepr {
                flow: 9,
                psn: Psn(psn),
                path: 3,
                flags: Flags::empty()
                    .with_if(Flags::FIRST, offset == 0)
                    .with_if(Flags::LAST, extra == 0),
                timestamp_ns: 77,
            },
            body: Body::Data(DataRepr { msg_id: 1, msg_len, offset, payload_len: len }),
        };
        let mut buf = vec![0; repr.buffer_len_with_token(Some(token))];
        let header_len = repr.emit_with_token(&mut buf, Some(token)).unwrap();
        prop_assert_eq!(header_len % 4, 0);
        buf[header_len..].fill(0x5c);
        let (parsed, payload) = wire::parse(&buf).unwrap();
        prop_assert_eq!(parsed, repr);
        prop_assert_eq!(payload.len(), len);
        prop_assert_eq!(Packet::new_checked(&buf[..]).unwrap().token(), Some(token));
    }
}
