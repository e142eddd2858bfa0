//! Closing a finished connection (issue 10): its state goes, a tombstone answers
//! late duplicates as the receiver would, and `forget` removes even that.

use rondo_proto::wire::{self, Body};
use rondo_proto::{
    BufferConfig, ConnectionHandle, DatagramError, Duration, Endpoint, Event, FlowConfig, Host,
    Instant, PostError, SharedBuffer,
};

fn endpoint() -> Endpoint {
    Endpoint::new(SharedBuffer::in_heap(BufferConfig::default()).unwrap())
}

/// Moves datagrams between `a` and `b` (1 us each way) until both are quiet;
/// returns the data datagrams `a` sent.
fn drive(a: &mut Endpoint, b: &mut Endpoint, now: &mut Instant) -> Vec<(u16, Vec<u8>)> {
    let mut buf = vec![0u8; 2048];
    let mut data = Vec::new();
    for _ in 0..100_000 {
        let mut moved = false;
        while let Some(t) = a.poll_transmit(*now, &mut buf) {
            data.push((t.path, buf[..t.len].to_vec()));
            b.handle_datagram(*now + Duration::from_us(1), t.path, &buf[..t.len], false);
            moved = true;
        }
        while let Some(t) = b.poll_transmit(*now, &mut buf) {
            a.handle_datagram(*now + Duration::from_us(1), t.path, &buf[..t.len], false);
            moved = true;
        }
        let next = [a.poll_timeout(), b.poll_timeout()]
            .into_iter()
            .flatten()
            .min();
        match next {
            Some(t) => *now = t.max(*now + Duration::from_ns(100)),
            None if !moved => break,
            None => *now += Duration::from_ns(100),
        }
        a.handle_timeout(*now);
        b.handle_timeout(*now);
        if a.connection(ConnectionHandle(0)).outstanding_messages() == 0 && !moved {
            break;
        }
    }
    data
}

#[test]
fn a_closed_receiver_still_acknowledges_duplicates_and_then_is_forgotten() {
    let cfg = FlowConfig::default();
    let mut now = Instant::from_us(1);
    let (mut a, mut b) = (endpoint(), endpoint());
    let ha = a.connect(now, 1, 2, &cfg).unwrap();
    let hb = b.connect(now, 2, 1, &cfg).unwrap();
    a.post(ha, now, 7, vec![3u8; 20_000]).unwrap();
    let sent = drive(&mut a, &mut b, &mut now);
    assert_eq!(a.connection(ha).outstanding_messages(), 0, "transfer done");
    assert!(matches!(
        b.poll_event(hb),
        Some(Event::Received { msg_id: 7, .. })
    ));

    let summary = b.close(hb).expect("open");
    assert_eq!(summary.receiver.bytes_delivered, 20_000);
    assert!(b.get(hb).is_none());
    assert_eq!(b.connections().count(), 0);
    assert!(b.close(hb).is_none(), "closing twice gives nothing");
    assert_eq!(b.post(hb, now, 8, vec![1]), Err(PostError::Closed));

    // A late retransmission of the first packet: the tombstone ACKs it, marked
    // duplicate, with the final cumulative ACK.
    let (path, first) = &sent[0];
    b.receive(now, *path, first, false).unwrap();
    let mut buf = vec![0u8; 2048];
    let t = b
        .poll_transmit(now, &mut buf)
        .expect("an ACK for the duplicate");
    let (repr, _) = wire::parse(&buf[..t.len]).unwrap();
    let Body::Ack(fb) = repr.body else {
        panic!("expected an ACK, got {:?}", repr.body);
    };
    assert!(fb.duplicate);
    let packets = 20_000u32.div_ceil(cfg.payload_per_packet() as u32);
    assert_eq!(
        fb.cum_ack.0,
        cfg.initial_psn + packets,
        "everything received"
    );
    assert_eq!(fb.acked_psn, repr_psn(first));
    assert_eq!(b.poll_transmit(now, &mut buf), None);

    // The sender closed too: the ACK is dropped there, counted as unknown.
    let before = a.stats().unknown_flow;
    a.close(ha).expect("open");
    a.handle_datagram(now, t.path, &buf[..t.len], false);
    assert_eq!(a.stats().unknown_flow, before + 1);
    assert_eq!(a.poll_timeout(), None, "nothing left to wake up for");

    // Forgotten, the flow id is unknown and free again.
    assert!(b.forget(hb));
    assert_eq!(
        b.receive(now, *path, first, false),
        Err(DatagramError::UnknownFlow(2))
    );
    b.connect(now, 2, 1, &cfg)
        .expect("the flow id is free again");
}

fn repr_psn(datagram: &[u8]) -> rondo_proto::Psn {
    wire::parse(datagram).unwrap().0.common.psn
}
