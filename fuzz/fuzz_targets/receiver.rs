//! An `Endpoint` with one connection, fed arbitrary datagrams and driven like a
//! datapath would drive it; it must never panic, and what it sends must parse.
//!
//! Input: a sequence of records `[len: u16 LE][dt: u8][datagram: len bytes]`; the
//! clock advances by `dt * 100 ns` before each datagram (a short last record takes
//! what is left). Before the first record the connection has posted a 3-packet
//! message and sent what it could at time 0, so that ACKs and NAKs can refer to
//! real packets.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rondo_proto::{wire, Duration, Endpoint, BufferConfig, SharedBuffer, FlowConfig, Host, Instant};

/// The connection's flow id: datagrams for it carry this `flow`.
const LOCAL: u32 = 1;
const REMOTE: u32 = 2;

fn drive(ep: &mut Endpoint, now: Instant, buf: &mut [u8]) {
    if ep.poll_timeout().is_some_and(|t| t <= now) {
        ep.handle_timeout(now);
    }
    let mut sent = 0;
    while let Some(t) = ep.poll_transmit(now, buf) {
        assert!(t.len <= buf.len());
        if let Err(e) = wire::parse(&buf[..t.len]) {
            panic!("the endpoint emitted a datagram that does not parse: {e}");
        }
        sent += 1;
        assert!(sent < 1_000_000, "poll_transmit never returns None");
    }
}

fuzz_target!(|input: &[u8]| {
    let mut ep = Endpoint::new(SharedBuffer::new(BufferConfig::default()).unwrap());
    let cfg = FlowConfig::default();
    let h = ep.connect(Instant::ZERO, LOCAL, REMOTE, &cfg).unwrap();
    let mut buf = vec![0u8; 64 * 1024];
    let msg_len = 3 * cfg.payload_per_packet() - 7;
    ep.post(h, Instant::ZERO, 1, vec![0xab; msg_len]).unwrap();
    let mut now = Instant::ZERO;
    drive(&mut ep, now, &mut buf);

    let mut rest = input;
    let mut fed = 0u64;
    while rest.len() >= 3 {
        let len = usize::from(u16::from_le_bytes([rest[0], rest[1]]));
        now += Duration::from_ns(u64::from(rest[2]) * 100);
        let body = &rest[3..];
        let (datagram, tail) = body.split_at(len.min(body.len()));
        rest = tail;
        let path = (fed % 4) as u16;
        let _ = ep.receive(now, path, datagram, fed % 7 == 3);
        fed += 1;
        drive(&mut ep, now, &mut buf);
        while ep.poll_event(h).is_some() {}
    }
    let stats = ep.stats();
    assert_eq!(stats.datagrams, fed);
    assert!(stats.malformed + stats.unknown_flow <= fed);

    // Let the timers run out for a while (RTOs, path probes, ARCC updates).
    let end = now + Duration::from_ms(5);
    let mut timeouts = 0;
    while let Some(t) = ep.poll_timeout() {
        if t > end {
            break;
        }
        now = now.max(t);
        drive(&mut ep, now, &mut buf);
        while ep.poll_event(h).is_some() {}
        timeouts += 1;
        assert!(timeouts < 1_000_000, "the timer never moves past {now:?}");
    }
});
