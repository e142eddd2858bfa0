//! `Host::poll_transmit_split` (the payload stays in the message, for zero-copy
//! sends) emits exactly the datagrams `poll_transmit` does.

use rondo_ud::{Endpoint, EndpointConfig, FlowConfig, Host, Instant, PayloadRef};

fn endpoint() -> (Endpoint, rondo_ud::ConnectionHandle) {
    let cfg = FlowConfig {
        token: Some(5),
        pacing: false,
        initial_window: 64.0,
        ..FlowConfig::default()
    };
    let mut ep = Endpoint::new(EndpointConfig::default()).unwrap();
    let h = ep.connect(Instant::ZERO, 1, 2, &cfg).unwrap();
    (ep, h)
}

#[test]
fn split_and_whole_transmits_are_the_same_datagrams() {
    let (mut whole, hw) = endpoint();
    let (mut split, hs) = endpoint();
    let msg: Vec<u8> = (0..20_000u32).map(|i| (i * 31 + 7) as u8).collect();
    let now = Instant::from_us(3);
    whole.post(hw, now, 9, msg.clone()).unwrap();
    split.post(hs, now, 9, msg).unwrap();
    let mut a = vec![0u8; 2048];
    let mut b = vec![0u8; 2048];
    let mut sent = 0;
    let mut with_payload = 0;
    while let Some(t) = whole.poll_transmit(now, &mut a) {
        let (u, r) = split
            .poll_transmit_split(now, &mut b)
            .expect("same schedule");
        let mut datagram = b[..u.len].to_vec();
        if let Some(r) = r {
            with_payload += 1;
            let payload = split.payload(r);
            assert_eq!(payload.len(), r.len as usize);
            datagram.extend_from_slice(payload);
        }
        assert_eq!((t.path, t.priority, t.flow), (u.path, u.priority, u.flow));
        assert_eq!(&a[..t.len], &datagram[..], "datagram {sent}");
        sent += 1;
    }
    assert!(sent >= 14 && with_payload >= 14, "{sent} datagrams");
    assert!(split.poll_transmit_split(now, &mut b).is_none());
    // A reference to nothing reads as empty.
    let nothing = PayloadRef {
        source: 7,
        ..PayloadRef::default()
    };
    assert!(split.payload(nothing).is_empty());
}
