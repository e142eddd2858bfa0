//! Authenticated datagrams (issue 15) between two engines, each behind
//! `rondo_ud::auth::Authenticated`, over a small fixed-delay network: forged,
//! mangled and replayed datagrams built from real ones are dropped and counted
//! and change nothing; `encrypt` hides the payload; a wrong key lets nothing in;
//! `none` behaves as a bare engine.

use rondo_proto::auth::{AuthMode, KeyPair, TRAILER_LEN};
use rondo_proto::wire::{self, Body, Repr};
use rondo_proto::{
    BufferConfig, ConnectionHandle, Duration, Endpoint, Event, FlowConfig, Host, Instant, Psn,
    SharedBuffer,
};
use rondo_ud::auth::Authenticated;
use std::collections::BTreeMap;

const PATHS: u16 = 4;
const DELAY: Duration = Duration::from_us(5);
const MTU: usize = 1500;

struct Net {
    a: Authenticated<Endpoint>,
    b: Authenticated<Endpoint>,
    ha: ConnectionHandle,
    hb: ConnectionHandle,
    now: Instant,
    seq: u64,
    wire: BTreeMap<(Instant, u64), (bool, u16, Vec<u8>)>,
    /// Drop everything `a` sends.
    cut_a_to_b: bool,
    sent_by_a: Vec<(u16, Vec<u8>)>,
    sent_by_b: Vec<(u16, Vec<u8>)>,
    events_a: Vec<Event>,
    events_b: Vec<Event>,
}

/// The flow configuration, with room for the trailer in `mode`.
fn config(mode: AuthMode) -> FlowConfig {
    FlowConfig {
        paths: PATHS,
        token: Some(0x5eed),
        mtu: MTU - mode.overhead(),
        ..FlowConfig::default()
    }
}

impl Net {
    /// `a` (flow 1) and `b` (flow 2); `b` agrees its key with `b_peer` (a's
    /// public key, or another to model a wrong key).
    fn with_keys(mode: AuthMode, wrong_key: bool) -> Net {
        let cfg = config(mode);
        let buffer = || SharedBuffer::in_heap(BufferConfig::default()).unwrap();
        let (mut a, mut b) = (Endpoint::new(buffer()), Endpoint::new(buffer()));
        let ha = a.connect(Instant::ZERO, 1, 2, &cfg).unwrap();
        let hb = b.connect(Instant::ZERO, 2, 1, &cfg).unwrap();
        let (ka, kb, other) = (
            KeyPair::generate().unwrap(),
            KeyPair::generate().unwrap(),
            KeyPair::generate().unwrap(),
        );
        let b_sees = if wrong_key {
            other.public()
        } else {
            ka.public()
        };
        let (mut a, mut b) = (Authenticated::new(a), Authenticated::new(b));
        a.add_flow(1, ka.agree(1, &kb.public(), 2, mode).unwrap());
        b.add_flow(2, kb.agree(2, &b_sees, 1, mode).unwrap());
        Net {
            a,
            b,
            ha,
            hb,
            now: Instant::ZERO,
            seq: 0,
            wire: BTreeMap::new(),
            cut_a_to_b: false,
            sent_by_a: Vec::new(),
            sent_by_b: Vec::new(),
            events_a: Vec::new(),
            events_b: Vec::new(),
        }
    }

    fn new(mode: AuthMode) -> Net {
        Net::with_keys(mode, false)
    }

    fn inject(&mut self, to_b: bool, path: u16, datagram: Vec<u8>) {
        self.seq += 1;
        self.wire
            .insert((self.now + DELAY, self.seq), (to_b, path, datagram));
    }

    fn transmit(&mut self) {
        let mut buf = vec![0u8; MTU];
        while let Some(t) = self.a.poll_transmit(self.now, &mut buf) {
            let d = buf[..t.len].to_vec();
            self.sent_by_a.push((t.path, d.clone()));
            if !self.cut_a_to_b {
                self.inject(true, t.path, d);
            }
        }
        while let Some(t) = self.b.poll_transmit(self.now, &mut buf) {
            let d = buf[..t.len].to_vec();
            self.sent_by_b.push((t.path, d.clone()));
            self.inject(false, t.path, d);
        }
    }

    fn run_until(&mut self, until: Instant) {
        loop {
            self.transmit();
            let next_arrival = self.wire.keys().next().map(|k| k.0);
            let next = [next_arrival, self.a.poll_timeout(), self.b.poll_timeout()]
                .into_iter()
                .flatten()
                .min();
            let Some(next) = next.filter(|&t| t <= until) else {
                self.now = until;
                break;
            };
            self.now = self.now.max(next);
            while let Some(entry) = self.wire.first_entry() {
                if entry.key().0 > self.now {
                    break;
                }
                let (to_b, path, d) = entry.remove();
                let host = if to_b { &mut self.b } else { &mut self.a };
                host.handle_datagram(self.now, path, &d, false);
            }
            for (ep, h, events) in [
                (&mut self.a, self.ha, &mut self.events_a),
                (&mut self.b, self.hb, &mut self.events_b),
            ] {
                if ep.poll_timeout().is_some_and(|t| t <= self.now) {
                    ep.handle_timeout(self.now);
                }
                while let Some(e) = ep.inner_mut().poll_event(h) {
                    events.push(e);
                }
            }
        }
    }

    fn delivered(&self, msg_id: u64) -> Option<&[u8]> {
        self.events_b.iter().find_map(|e| match e {
            Event::Received { msg_id: m, data } if *m == msg_id => Some(&data[..]),
            _ => None,
        })
    }

    fn completed(&self, msg_id: u64) -> bool {
        self.events_a
            .iter()
            .any(|e| matches!(e, Event::SendComplete { msg_id: m } if *m == msg_id))
    }
}

fn message(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + 3) as u8).collect()
}

/// Splits a sealed datagram into the engine's part (parsed) and the trailer.
fn unseal(d: &[u8]) -> (Repr, Vec<u8>, Vec<u8>) {
    let body = &d[..d.len() - TRAILER_LEN];
    let (repr, payload) = wire::parse(body).expect("our own datagram parses");
    (repr, payload.to_vec(), d[d.len() - TRAILER_LEN..].to_vec())
}

/// A forgery: `repr` emitted with `payload`, followed by a sniffed trailer whose
/// sequence number is moved `ahead` (so that the replay window lets it through
/// to the tag check; 0 leaves it, a replay).
fn forge(repr: &Repr, payload: &[u8], trailer: &[u8], ahead: u64) -> Vec<u8> {
    let mut d = repr.to_datagram(payload, Some(0x5eed)).unwrap();
    let seq = u64::from_be_bytes(trailer[..8].try_into().unwrap()) + ahead;
    d.extend_from_slice(&seq.to_be_bytes());
    d.extend_from_slice(&trailer[8..]);
    d
}

fn first_data(sent: &[(u16, Vec<u8>)]) -> (u16, Vec<u8>) {
    sent.iter()
        .find(|(_, d)| matches!(unseal(d).0.body, Body::Data(_)))
        .cloned()
        .expect("a DATA was sent")
}

/// Row 1 under `auth`: a sniffed DATA re-sent with its PSN 100,000 ahead (and
/// its sniffed trailer) never reaches the engine: the receiver's highest PSN does
/// not move, so the sender is never told an implausible one.
#[test]
fn a_forged_far_ahead_data_is_dropped_before_the_engine() {
    let mut net = Net::new(AuthMode::Auth);
    let msg = message(400_000);
    net.a
        .inner_mut()
        .post(net.ha, Instant::ZERO, 1, msg.clone())
        .unwrap();
    net.run_until(Instant::from_us(30));
    let (path, d) = first_data(&net.sent_by_a);
    let (mut repr, payload, trailer) = unseal(&d);
    repr.common.psn = Psn(repr.common.psn.0.wrapping_add(100_000));
    net.inject(true, path, forge(&repr, &payload, &trailer, 1_000));
    net.inject(true, path, forge(&repr, &payload, &trailer, 0));
    net.run_until(Instant::from_us(20_000));
    assert_eq!(net.b.stats().bad_tag, 1, "the forgery was counted");
    assert_eq!(
        net.b.stats().replayed,
        1,
        "so was the one with its old sequence"
    );
    assert_eq!(
        net.a.connection(net.ha).sender_stats().implausible_highest,
        0,
        "no ACK reported the forged PSN"
    );
    assert!(net.completed(1));
    assert_eq!(net.delivered(1), Some(&msg[..]));
}

/// Row 5 under `auth`: cumulative ACKs forged from a real one (with its sniffed
/// trailer) while the receiver gets nothing complete nothing.
#[test]
fn forged_cumulative_acks_complete_nothing() {
    let mut net = Net::new(AuthMode::Auth);
    net.a
        .inner_mut()
        .post(net.ha, Instant::ZERO, 1, message(50_000))
        .unwrap();
    net.run_until(Instant::from_us(2_000));
    assert!(net.completed(1));
    net.cut_a_to_b = true;
    net.a
        .inner_mut()
        .post(net.ha, net.now, 2, message(50_000))
        .unwrap();
    net.run_until(net.now + Duration::from_us(20));
    let (_, ack) = net
        .sent_by_b
        .iter()
        .rev()
        .find(|(_, d)| matches!(unseal(d).0.body, Body::Ack(_)))
        .cloned()
        .expect("b acknowledged something");
    let (mut repr, _, trailer) = unseal(&ack);
    let Body::Ack(mut fb) = repr.body else {
        unreachable!()
    };
    for i in 0..40 {
        fb.cum_ack = Psn(fb.cum_ack.0 + 1 + i);
        fb.highest_psn = fb.cum_ack;
        fb.acked_psn = Psn(fb.cum_ack.0 - 1);
        repr.body = Body::Ack(fb);
        net.inject(false, 0, forge(&repr, &[], &trailer, u64::from(1 + i)));
    }
    // A replay of the real ACK, too.
    net.inject(false, 0, ack);
    net.run_until(net.now + Duration::from_us(200));
    assert_eq!(net.a.stats().bad_tag, 40);
    assert_eq!(net.a.stats().replayed, 1);
    assert!(!net.completed(2), "nothing was received, nothing completes");
}

/// Every datagram replayed once, and every one mangled in one byte: all dropped
/// and counted, the transfer byte-exact.
#[test]
fn replayed_and_mangled_datagrams_are_dropped_and_counted() {
    for mode in [AuthMode::Auth, AuthMode::Encrypt] {
        let mut net = Net::new(mode);
        let msg = message(200_000);
        net.a
            .inner_mut()
            .post(net.ha, Instant::ZERO, 1, msg.clone())
            .unwrap();
        net.run_until(Instant::from_us(100));
        let old: Vec<(u16, Vec<u8>)> = net.sent_by_a.iter().take(20).cloned().collect();
        for (i, (path, d)) in old.iter().enumerate() {
            net.inject(true, *path, d.clone());
            let mut m = d.clone();
            let at = (i * 37) % m.len();
            m[at] ^= 0x10;
            net.inject(true, *path, m);
        }
        net.run_until(Instant::from_us(20_000));
        let s = net.b.stats();
        assert_eq!(s.replayed + s.bad_tag, 40, "{mode:?}: {s:?}");
        assert!(s.replayed >= 20, "{mode:?}: {s:?}");
        assert_eq!(net.delivered(1), Some(&msg[..]), "{mode:?}");
        assert_eq!(net.b.connection(net.hb).receiver_stats().duplicates, 0);
    }
}

/// `encrypt`: the message is delivered byte-exact and no DATA on the wire
/// carries its bytes in clear; under `auth` they are in clear.
#[test]
fn encrypt_round_trip_hides_the_payload() {
    for mode in [AuthMode::Auth, AuthMode::Encrypt] {
        let mut net = Net::new(mode);
        let msg = message(100_000);
        net.a
            .inner_mut()
            .post(net.ha, Instant::ZERO, 1, msg.clone())
            .unwrap();
        net.run_until(Instant::from_us(20_000));
        assert_eq!(net.delivered(1), Some(&msg[..]), "{mode:?}");
        let (_, d) = first_data(&net.sent_by_a);
        let (_, payload, _) = unseal(&d);
        let in_clear = msg.windows(payload.len()).any(|w| w == &payload[..]);
        assert_eq!(in_clear, mode == AuthMode::Auth, "{mode:?}");
    }
}

/// A receiver that agreed its key with the wrong public key accepts nothing.
#[test]
fn a_wrong_key_lets_nothing_in() {
    let mut net = Net::with_keys(AuthMode::Auth, true);
    net.a
        .inner_mut()
        .post(net.ha, Instant::ZERO, 1, message(10_000))
        .unwrap();
    net.run_until(Instant::from_us(5_000));
    assert!(net.b.stats().bad_tag > 0);
    assert_eq!(net.b.stats().opened, 0);
    assert!(net.delivered(1).is_none());
    assert_eq!(net.b.connection(net.hb).receiver_stats().data_packets, 0);
}

/// `none`: nothing sealed, no trailer, the transfer as with bare engines (and a
/// replay reaches the engine, which counts it as a duplicate).
#[test]
fn none_mode_is_the_bare_engine() {
    let mut net = Net::new(AuthMode::None);
    let msg = message(100_000);
    net.a
        .inner_mut()
        .post(net.ha, Instant::ZERO, 1, msg.clone())
        .unwrap();
    net.run_until(Instant::from_us(100));
    let (path, d) = net.sent_by_a[0].clone();
    assert!(wire::parse(&d).is_ok(), "a plain datagram, no trailer");
    net.inject(true, path, d);
    net.run_until(Instant::from_us(20_000));
    assert_eq!(net.delivered(1), Some(&msg[..]));
    assert_eq!(net.b.stats().dropped(), 0);
    assert!(net.b.connection(net.hb).receiver_stats().duplicates > 0);
}
