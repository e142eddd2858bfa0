//! `Endpoint::handle_datagram_for`: a driver's hint of the receiving connection
//! (the simulator passes the handle its sender addressed) skips the flow table,
//! and trusts nothing. Whatever the hint (right, another connection's, a closed
//! one's, out of range), every datagram is handled exactly as
//! `handle_datagram` handles it: same counters, same events, same replies.

use rondo_proto::wire::{Body, CommonRepr, DataRepr, Flags, Repr};
use rondo_proto::{
    BufferConfig, ConnectionHandle, Endpoint, FlowConfig, Host, Instant, Psn, SharedBuffer,
};

/// Local flow ids of the endpoint's three connections; `TOKENS` their tokens.
const FLOWS: [u32; 3] = [10, 11, 12];
const TOKENS: [u64; 3] = [0xa1, 0xb2, 0xc3];

/// An endpoint with the three connections (handles 0, 1, 2), the third closed.
fn endpoint() -> Endpoint {
    let mut ep = Endpoint::new(SharedBuffer::new(BufferConfig::default()).unwrap());
    for (i, (&flow, &token)) in FLOWS.iter().zip(&TOKENS).enumerate() {
        let cfg = FlowConfig {
            token: Some(token),
            ..FlowConfig::default()
        };
        let h = ep.connect(Instant::ZERO, flow, 100 + flow, &cfg).unwrap();
        assert_eq!(h, ConnectionHandle(i));
    }
    ep.close(ConnectionHandle(2)).expect("open");
    ep
}

/// A one-packet message with `psn` for local flow `flow`, carrying `token`.
fn datagram(flow: u32, psn: u32, token: u64) -> Vec<u8> {
    let repr = Repr {
        common: CommonRepr {
            flow,
            psn: Psn(psn),
            path: 0,
            flags: Flags::FIRST | Flags::LAST,
            timestamp_ns: 1_000,
        },
        body: Body::Data(DataRepr {
            msg_id: u64::from(psn),
            msg_len: 64,
            offset: 0,
            payload_len: 64,
        }),
    };
    let mut buf = vec![0; repr.buffer_len_with_token(Some(token))];
    let header = repr.emit_with_token(&mut buf, Some(token)).unwrap();
    buf[header..].fill(0x5a);
    buf
}

/// What an endpoint shows after its datagrams: its counters, each open
/// connection's events and receiver counters, and the datagrams it sends.
fn observe(ep: &mut Endpoint) -> String {
    let now = Instant::from_us(50);
    ep.handle_timeout(now);
    let mut out = format!("{:?}\n", ep.stats());
    for i in 0..FLOWS.len() {
        let h = ConnectionHandle(i);
        if let Some(c) = ep.get(h) {
            out += &format!("{i}: {:?}\n", c.receiver_stats());
        }
        while let Some(e) = ep.poll_event(h) {
            out += &format!("{i}: {e:?}\n");
        }
    }
    let mut buf = vec![0; 2048];
    while let Some(t) = ep.poll_transmit(now, &mut buf) {
        out += &format!("{} {:?}\n", t.path, &buf[..t.len]);
    }
    out
}

#[test]
fn any_hint_gives_what_the_flow_table_gives() {
    let cases = [
        ("right connection", datagram(FLOWS[1], 0, TOKENS[1])),
        ("out of order", datagram(FLOWS[1], 3, TOKENS[1])),
        ("wrong token", datagram(FLOWS[1], 0, TOKENS[0])),
        ("closed connection", datagram(FLOWS[2], 0, TOKENS[2])),
        ("unknown flow", datagram(77, 0, TOKENS[0])),
        ("truncated", datagram(FLOWS[1], 0, TOKENS[1])[..20].to_vec()),
    ];
    let hints = [0, 1, 2, 3, usize::MAX].map(ConnectionHandle);
    let now = Instant::from_us(10);
    for (what, d) in &cases {
        let mut plain = endpoint();
        plain.handle_datagram(now, 0, d, false);
        let expected = observe(&mut plain);
        for hint in hints {
            let mut hinted = endpoint();
            hinted.handle_datagram_for(hint, now, 0, d, false);
            assert_eq!(observe(&mut hinted), expected, "{what}, hint {hint:?}");
        }
    }
    // The cases differ from each other: the comparison above can fail.
    let mut ep = endpoint();
    ep.handle_datagram_for(ConnectionHandle(0), now, 0, &cases[0].1, false);
    let delivered = ep
        .connection(ConnectionHandle(1))
        .receiver_stats()
        .data_packets;
    assert_eq!(
        delivered, 1,
        "the datagram for flow 11 reached its connection"
    );
    let mut ep = endpoint();
    ep.handle_datagram_for(ConnectionHandle(1), now, 0, &cases[2].1, false);
    assert_eq!(ep.stats().bad_token, 1);
    let mut ep = endpoint();
    ep.handle_datagram_for(ConnectionHandle(0), now, 0, &cases[4].1, false);
    assert_eq!(ep.stats().unknown_flow, 1);
}

#[test]
fn reading_ahead_changes_nothing() {
    let now = Instant::from_us(10);
    let d = datagram(FLOWS[0], 0, TOKENS[0]);
    let mut plain = endpoint();
    plain.handle_datagram(now, 0, &d, false);
    let mut ahead = endpoint();
    for h in [0, 1, 2, 7].map(ConnectionHandle) {
        ahead.prefetch_slot(h);
        ahead.prefetch_connection(h);
    }
    ahead.handle_datagram(now, 0, &d, false);
    assert_eq!(observe(&mut ahead), observe(&mut plain));
}
