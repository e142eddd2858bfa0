//! A sealed transfer under attack, for the `sealed_transfer` fuzz target and the
//! bounded stable test `tests/sealed_fuzz.rs` (one copy: the fuzz target includes
//! this file by path).
//!
//! Two engines, each behind `Authenticated` with keys agreed from fixed secrets
//! (mode `auth`), move one 60 KB message over four fixed-delay paths. The input is
//! a list of 5-byte records `[op][k][pos: u16 LE][val]`; before each the network
//! runs 2 us. `op % 4`: 0 replays captured datagram `k` to its receiver; 1 flips
//! byte `pos` of it by `val` (the tag must catch it); 2 and 3 act as a peer that
//! holds the key: the captured datagram without its trailer, with header byte
//! `pos` xor `val` (2) or its PSN moved by `pos` (3), handed to the receiving
//! engine behind the authentication check. Afterwards the network runs clean for
//! up to 200 ms of simulated time: the transfer must complete (or a side report an
//! error); a transfer still going then is a stall. Without insider records the
//! message must arrive byte-exact.

use rondo_proto::auth::{AuthMode, KeyPair, TRAILER_LEN};
use rondo_proto::wire;
use rondo_proto::{
    BufferConfig, ConnectionHandle, Duration, Endpoint, Event, FlowConfig, Host, Instant,
    PayloadBytes, Psn, SharedBuffer,
};
use rondo_ud::auth::Authenticated;
use std::collections::BTreeMap;

const PATHS: u16 = 4;
const DELAY: Duration = Duration::from_us(5);
const MTU: usize = 1500;
const MESSAGE: usize = 60_000;
const MAX_RECORDS: usize = 64;
const CLEAN_RUN: Duration = Duration::from_ms(200);

/// What a run did.
#[derive(Debug, PartialEq, Eq)]
pub struct Run {
    /// How it ended.
    pub outcome: Outcome,
    /// Datagrams the authentication of either side dropped (bad tag, replay,
    /// truncated).
    pub auth_dropped: u64,
    /// Datagrams handed to an engine behind the check (insider records).
    pub behind_the_check: u64,
}

/// How a run ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Sent, acknowledged and delivered.
    Completed,
    /// A side reported an error (an insider can make a connection fail).
    Failed,
}

/// A datagram on the wire: to b, path, bytes, and whether it goes behind the check.
type InFlight = (bool, u16, Vec<u8>, bool);

struct Net {
    a: Authenticated<Endpoint>,
    b: Authenticated<Endpoint>,
    ha: ConnectionHandle,
    hb: ConnectionHandle,
    now: Instant,
    seq: u64,
    /// (arrival, order) -> (to b, path, datagram, behind the check).
    wire: BTreeMap<(Instant, u64), InFlight>,
    captured: Vec<(bool, u16, Vec<u8>)>,
    sent: bool,
    received: Option<Vec<u8>>,
    failed: bool,
    behind_the_check: u64,
}

impl Net {
    fn new() -> Net {
        let mode = AuthMode::Auth;
        let cfg = FlowConfig {
            paths: PATHS,
            token: Some(0x5eed),
            mtu: MTU - mode.overhead(),
            ..FlowConfig::default()
        };
        let buffer = || SharedBuffer::in_heap(BufferConfig::default()).expect("a heap buffer");
        let (mut a, mut b) = (Endpoint::new(buffer()), Endpoint::new(buffer()));
        let ha = a.connect(Instant::ZERO, 1, 2, &cfg).expect("connect a");
        let hb = b.connect(Instant::ZERO, 2, 1, &cfg).expect("connect b");
        let ka = KeyPair::from_secret_bytes([0x11; 32]);
        let kb = KeyPair::from_secret_bytes([0x22; 32]);
        let (mut a, mut b) = (Authenticated::new(a), Authenticated::new(b));
        a.add_flow(1, ka.agree(1, &kb.public(), 2, mode).expect("keys"));
        b.add_flow(2, kb.agree(2, &ka.public(), 1, mode).expect("keys"));
        Net {
            a,
            b,
            ha,
            hb,
            now: Instant::ZERO,
            seq: 0,
            wire: BTreeMap::new(),
            captured: Vec::new(),
            sent: false,
            received: None,
            failed: false,
            behind_the_check: 0,
        }
    }

    fn put(&mut self, to_b: bool, path: u16, d: Vec<u8>, inner: bool) {
        self.seq += 1;
        self.wire
            .insert((self.now + DELAY, self.seq), (to_b, path, d, inner));
    }

    fn transmit(&mut self) {
        let mut buf = vec![0u8; MTU];
        for to_b in [true, false] {
            loop {
                let host = if to_b { &mut self.a } else { &mut self.b };
                let Some(t) = host.poll_transmit(self.now, &mut buf) else {
                    break;
                };
                let mut d = buf[..t.len].to_vec();
                // Sealed datagrams are whole in the buffer; an unsealed one may
                // name its payload instead.
                if let Some(r) = t.payload {
                    if let PayloadBytes::Slice(s) = host.payload(r) {
                        d.extend_from_slice(s);
                    }
                }
                if self.captured.len() < 4096 {
                    self.captured.push((to_b, t.path, d.clone()));
                }
                self.put(to_b, t.path, d, false);
            }
        }
    }

    fn events(&mut self) {
        while let Some(e) = self.a.poll_event(self.ha) {
            match e {
                Event::SendComplete { msg_id: 1 } => self.sent = true,
                Event::Error(_) => self.failed = true,
                _ => {}
            }
        }
        while let Some(e) = self.b.poll_event(self.hb) {
            match e {
                Event::Received { msg_id: 1, data } => self.received = Some(data),
                Event::Error(_) => self.failed = true,
                _ => {}
            }
        }
    }

    /// Runs the network and both engines' timers until `until`.
    fn run_until(&mut self, until: Instant) {
        loop {
            self.transmit();
            self.events();
            let next_wire = self.wire.keys().next().map(|k| k.0);
            let next_timer = [self.a.poll_timeout(), self.b.poll_timeout()]
                .into_iter()
                .flatten()
                .min();
            let Some(next) = [next_wire, next_timer].into_iter().flatten().min() else {
                break;
            };
            if next > until {
                break;
            }
            self.now = self.now.max(next);
            while let Some(entry) = self.wire.first_entry() {
                if entry.key().0 > self.now {
                    break;
                }
                let (to_b, path, d, inner) = entry.remove();
                let host = if to_b { &mut self.b } else { &mut self.a };
                if inner {
                    self.behind_the_check += 1;
                    host.inner_mut().handle_datagram(self.now, path, &d, false);
                } else {
                    host.handle_datagram(self.now, path, &d, false);
                }
            }
            for host in [&mut self.a, &mut self.b] {
                if host.poll_timeout().is_some_and(|t| t <= self.now) {
                    host.handle_timeout(self.now);
                }
            }
        }
        self.now = self.now.max(until);
        self.events();
    }

    fn done(&self) -> bool {
        self.failed || (self.sent && self.received.is_some())
    }
}

/// The message: a seeded pattern.
fn message() -> Vec<u8> {
    (0..MESSAGE as u32)
        .map(|i| (i.wrapping_mul(131) >> 3) as u8)
        .collect()
}

/// Runs the transfer under the records of `input`; `Err` says what went wrong.
pub fn run(input: &[u8]) -> Result<Run, String> {
    let mut net = Net::new();
    let msg = message();
    net.a
        .post(net.ha, Instant::ZERO, 1, msg.clone())
        .map_err(|e| format!("post: {e}"))?;
    let mut insider = false;
    for r in input.chunks_exact(5).take(MAX_RECORDS) {
        net.run_until(net.now + Duration::from_us(2));
        if net.captured.is_empty() {
            continue;
        }
        let (op, k) = (r[0] % 4, usize::from(r[1]));
        let pos = usize::from(u16::from_le_bytes([r[2], r[3]]));
        let val = r[4];
        let (to_b, path, mut d) = net.captured[k % net.captured.len()].clone();
        match op {
            0 => net.put(to_b, path, d, false),
            1 => {
                let i = pos % d.len();
                d[i] ^= val.max(1);
                net.put(to_b, path, d, false);
            }
            2 => {
                insider = true;
                d.truncate(d.len().saturating_sub(TRAILER_LEN));
                let i = pos % d.len().max(1);
                if let Some(b) = d.get_mut(i) {
                    *b ^= val;
                }
                net.put(to_b, path, d, true);
            }
            _ => {
                insider = true;
                d.truncate(d.len().saturating_sub(TRAILER_LEN));
                let Ok((mut repr, payload)) = wire::parse(&d) else {
                    continue;
                };
                repr.common.psn = Psn(repr.common.psn.0.wrapping_add(pos as u32));
                let Ok(forged) = repr.to_datagram(payload, Some(0x5eed)) else {
                    continue;
                };
                net.put(to_b, path, forged, true);
            }
        }
    }
    let end = net.now + CLEAN_RUN;
    while !net.done() && net.now < end {
        net.run_until((net.now + Duration::from_ms(1)).min(end));
    }
    let auth_dropped = [net.a.stats(), net.b.stats()]
        .iter()
        .map(|s| s.bad_tag + s.replayed + s.truncated)
        .sum();
    let ended = |outcome| Run {
        outcome,
        auth_dropped,
        behind_the_check: net.behind_the_check,
    };
    if net.failed {
        return if insider {
            Ok(ended(Outcome::Failed))
        } else {
            Err("a connection failed under outsider datagrams only".into())
        };
    }
    if !net.done() {
        return Err(format!(
            "stall: after {CLEAN_RUN:?} of clean network the transfer is not done (sent {}, received {}), sender {:?}",
            net.sent,
            net.received.is_some(),
            net.a.connection(net.ha).sender_stats()
        ));
    }
    if !insider && net.received.as_deref() != Some(msg.as_slice()) {
        return Err("the message arrived with other bytes under outsider datagrams only".into());
    }
    Ok(ended(Outcome::Completed))
}
