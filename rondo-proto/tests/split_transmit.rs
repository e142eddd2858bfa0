//! `Host::poll_transmit` into a buffer that takes payloads by reference (the
//! payload stays in the message, for zero-copy sends) emits exactly the datagrams
//! it writes whole into a plain buffer.

use rondo_proto::{
    BufferConfig, ByReference, Endpoint, ExternalBytes, FlowConfig, Host, Instant, Message,
    PayloadBytes, PayloadRef, SharedBuffer,
};
use std::sync::Arc;

fn endpoint() -> (Endpoint, rondo_proto::ConnectionHandle) {
    let cfg = FlowConfig {
        token: Some(5),
        pacing: false,
        initial_window: 64.0,
        ..FlowConfig::default()
    };
    let mut ep = Endpoint::new(SharedBuffer::in_heap(BufferConfig::default()).unwrap());
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
        let u = split
            .poll_transmit(now, &mut ByReference(&mut b))
            .expect("same schedule");
        let r = u.payload;
        let mut datagram = b[..u.len].to_vec();
        if let Some(r) = r {
            with_payload += 1;
            let PayloadBytes::Slice(payload) = split.payload(r) else {
                panic!("an owned message's payload is a slice of it");
            };
            assert_eq!(payload.len(), r.len as usize);
            datagram.extend_from_slice(payload);
        }
        assert_eq!((t.path, t.priority, t.flow), (u.path, u.priority, u.flow));
        assert_eq!(&a[..t.len], &datagram[..], "datagram {sent}");
        sent += 1;
    }
    assert!(sent >= 14 && with_payload >= 14, "{sent} datagrams");
    assert!(split.poll_transmit(now, &mut ByReference(&mut b)).is_none());
    // A reference to nothing reads as empty.
    let nothing = PayloadRef {
        source: 7,
        ..PayloadRef::default()
    };
    assert!(split.payload(nothing).is_empty());
}

/// Bytes the test owns, shared with the engine as an external body; every range
/// has an address (inside `bytes`), which the test maps back to offsets.
#[derive(Debug)]
struct Shared {
    bytes: Vec<u8>,
    reads: std::sync::atomic::AtomicUsize,
}

impl ExternalBytes for Shared {
    fn len(&self) -> usize {
        self.bytes.len()
    }
    fn read(&self, offset: usize, dst: &mut [u8]) {
        self.reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        dst.copy_from_slice(&self.bytes[offset..offset + dst.len()]);
    }
    fn addr(&self, offset: usize, _len: usize) -> Option<usize> {
        Some(self.bytes.as_ptr() as usize + offset)
    }
}

#[test]
fn an_external_body_is_sent_by_address_and_never_read() {
    let (mut whole, hw) = endpoint();
    let (mut split, hs) = endpoint();
    let head = vec![0xab; 40];
    let body = Arc::new(Shared {
        bytes: (0..20_000u32).map(|i| (i * 13 + 1) as u8).collect(),
        reads: Default::default(),
    });
    let base = body.bytes.as_ptr() as usize;
    let now = Instant::from_us(3);
    whole
        .post(hw, now, 9, Message::new(head.clone(), body.clone()))
        .unwrap();
    split
        .post(hs, now, 9, Message::new(head.clone(), body.clone()))
        .unwrap();
    let mut expected = head;
    expected.extend_from_slice(&body.bytes);
    let (mut a, mut b) = (vec![0u8; 2048], vec![0u8; 2048]);
    let (mut sent, mut by_address, mut from_head) = (0, 0, 0);
    while let Some(t) = whole.poll_transmit(now, &mut a) {
        let u = split
            .poll_transmit(now, &mut ByReference(&mut b))
            .expect("same schedule");
        let r = u.payload;
        let mut datagram = b[..u.len].to_vec();
        match r.map(|r| split.payload(r)) {
            Some(PayloadBytes::Addr { addr, len }) => {
                by_address += 1;
                let off = addr - base;
                datagram.extend_from_slice(&body.bytes[off..off + len]);
            }
            Some(PayloadBytes::Slice(s)) => {
                from_head += 1;
                datagram.extend_from_slice(s);
            }
            None => {}
        }
        assert_eq!(&a[..t.len], &datagram[..], "datagram {sent}");
        sent += 1;
    }
    assert!(sent >= 14, "{sent} datagrams");
    // Every packet's body part goes by address: the first packet, which straddles
    // head and body, has the head's bytes copied after its header and the rest
    // referenced, so the split sender never reads the body.
    assert_eq!((by_address, from_head), (sent, 0));
    let whole_reads = sent; // the whole sender read every payload it wrote
    let reads = body.reads.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(
        reads, whole_reads,
        "the split sender read nothing of the body"
    );
}
