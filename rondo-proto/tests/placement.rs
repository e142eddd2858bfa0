//! Receive placement behind one interface: the default copies, an in-place
//! placement takes payloads received at their final place without a copy, and a
//! packet that lands at the wrong place is repaired through the reorder buffer.

use rondo_proto::placement::BufferPlacement;
use rondo_proto::wire::{self, Body, CommonRepr, DataRepr, Flags, Packet, Repr};
use rondo_proto::{
    BufferConfig, ConnectionHandle, Endpoint, Event, FlowConfig, Instant, Psn, SharedBuffer,
};

const LOCAL: u32 = 1;

fn endpoint() -> (Endpoint, ConnectionHandle, usize) {
    let cfg = FlowConfig {
        token: Some(77),
        ..FlowConfig::default()
    };
    let mut ep = Endpoint::new(SharedBuffer::in_heap(BufferConfig::default()).unwrap());
    let h = ep.connect(Instant::ZERO, LOCAL, 2, &cfg).unwrap();
    (ep, h, cfg.payload_per_packet())
}

/// Packet `i` of a message `msg` cut in `ppp`-byte payloads: (header, payload).
fn packet(msg: &[u8], ppp: usize, i: usize) -> (Vec<u8>, Vec<u8>) {
    let offset = i * ppp;
    let payload = msg[offset..(offset + ppp).min(msg.len())].to_vec();
    let repr = Repr {
        common: CommonRepr {
            flow: LOCAL,
            psn: Psn(i as u32),
            path: 0,
            flags: Flags::empty(),
            timestamp_ns: 5,
        },
        body: Body::Data(DataRepr {
            msg_id: 3,
            msg_len: msg.len() as u64,
            offset: offset as u64,
            payload_len: payload.len(),
        }),
    };
    let mut buf = vec![0; repr.buffer_len_with_token(Some(77))];
    let header_len = repr.emit_with_token(&mut buf, Some(77)).unwrap();
    buf.truncate(header_len);
    (buf, payload)
}

fn whole(p: &(Vec<u8>, Vec<u8>)) -> Vec<u8> {
    [p.0.clone(), p.1.clone()].concat()
}

#[test]
fn default_placement_copies_and_counts_in_order_and_repaired() {
    let (mut ep, h, ppp) = endpoint();
    let msg: Vec<u8> = (0..3 * ppp + 10).map(|i| i as u8).collect();
    let now = Instant::from_us(1);
    for i in [0, 2, 1, 3] {
        ep.receive(now, 0, &whole(&packet(&msg, ppp, i)), false)
            .unwrap();
    }
    assert_eq!(
        ep.poll_event(h),
        Some(Event::Received {
            msg_id: 3,
            data: msg
        })
    );
    let rx = ep.connection(h).receiver_stats();
    assert_eq!(
        (rx.placed_in_order, rx.placed_repaired, rx.placed_in_place),
        (3, 1, 0)
    );
    assert!(
        ep.expected_target(h).is_none(),
        "the copying placement has no targets"
    );
}

#[test]
fn in_place_placement_takes_payloads_without_copy_and_repairs_misses() {
    let (mut ep, h, ppp) = endpoint();
    ep.set_placement(h, Box::new(BufferPlacement::default()));
    let msg: Vec<u8> = (0..4 * ppp - 100).map(|i| (i * 7) as u8).collect();
    let now = Instant::from_us(1);
    // No message started: no target yet; the first packet comes the ordinary way.
    assert!(ep.expected_target(h).is_none());
    ep.receive(now, 0, &whole(&packet(&msg, ppp, 0)), false)
        .unwrap();

    // Packet 1 is expected and arrives: its payload lands at its target.
    let (psn, target) = ep.expected_target(h).unwrap();
    assert_eq!((psn, target.len()), (Psn(1), ppp));
    let (h1, p1) = packet(&msg, ppp, 1);
    target.copy_from_slice(&p1);
    ep.receive_in_place(now, 0, &h1, p1.len(), false).unwrap();

    // Packet 3 arrives where packet 2 was expected: repaired via the reorder buffer.
    let (psn, target) = ep.expected_target(h).unwrap();
    assert_eq!(psn, Psn(2));
    let (h3, p3) = packet(&msg, ppp, 3);
    target[..p3.len()].copy_from_slice(&p3);
    ep.receive_in_place(now, 0, &h3, p3.len(), false).unwrap();
    assert_eq!(ep.poll_event(h), None);

    // Packet 2 arrives in place too; 3 follows from the reorder buffer.
    let (psn, target) = ep.expected_target(h).unwrap();
    assert_eq!(psn, Psn(2));
    let (h2, p2) = packet(&msg, ppp, 2);
    target.copy_from_slice(&p2);
    ep.receive_in_place(now, 0, &h2, p2.len(), false).unwrap();

    assert_eq!(
        ep.poll_event(h),
        Some(Event::Received {
            msg_id: 3,
            data: msg
        })
    );
    let rx = ep.connection(h).receiver_stats();
    assert_eq!(rx.placed_in_order, 3, "packets 0, 1, 2");
    assert_eq!(rx.placed_in_place, 2, "packets 1 and 2");
    assert_eq!(rx.placed_repaired, 1, "packet 3");
}

#[test]
fn split_headers_are_checked_like_datagrams() {
    let (mut ep, _, ppp) = endpoint();
    let msg = vec![1u8; 100];
    let (mut header, payload) = packet(&msg, ppp, 0);
    // The header must be exactly header_words * 4 bytes.
    assert!(wire::parse_split(&header[..header.len() - 4], payload.len()).is_err());
    assert!(wire::parse_split(&header, payload.len()).is_ok());
    // A wrong token is refused on this path too.
    let ext = wire::DATA_HEADER_LEN + 2;
    header[ext] ^= 1;
    assert!(matches!(
        ep.receive_in_place(Instant::from_us(1), 0, &header, payload.len(), false),
        Err(rondo_proto::DatagramError::BadToken { flow: LOCAL })
    ));
    assert_eq!(
        Packet::new_unchecked(&header[..]).token(),
        Some(77 ^ (1 << 56))
    );
}
