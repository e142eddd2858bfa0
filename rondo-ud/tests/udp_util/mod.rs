//! Two endpoints over two UDP datapaths on loopback, driven from one thread.
#![allow(dead_code)]

use rondo_proto::{
    BufferConfig, ConnectionHandle, Endpoint, Event, FlowConfig, Host, SharedBuffer,
};
use rondo_ud::udp::{Clock, UdpConfig, UdpDatapath};
use std::time::Duration;

/// Flow id of side A's connection (B addresses it).
pub const FLOW_A: u32 = 1;
/// Flow id of side B's connection.
pub const FLOW_B: u32 = 2;

/// One side: a datapath, a host and the connection handle.
pub struct Side<H> {
    pub dp: UdpDatapath,
    pub host: H,
    pub conn: ConnectionHandle,
}

/// A loopback datapath config with ephemeral ports.
pub fn loopback(paths: u16) -> UdpConfig {
    UdpConfig {
        local_ip: "127.0.0.1".parse().unwrap(),
        base_port: 0,
        paths,
        ..UdpConfig::default()
    }
}

/// The UDP datapath's profile with a token; a loaded CI machine can
/// stall a thread for milliseconds, so the RTO floor is higher still.
pub fn flow(paths: u16) -> FlowConfig {
    FlowConfig {
        rto_min: rondo_proto::Duration::from_ms(5),
        token: Some(0x0123_4567_89ab_cdef),
        ..rondo_ud::HostProfile::HOST_STACK.flow_config(paths)
    }
}

/// Binds both datapaths, connects both endpoints and routes each to the other.
pub fn pair(udp: UdpConfig, cfg: &FlowConfig, clock: &Clock) -> (Side<Endpoint>, Side<Endpoint>) {
    let mut a = UdpDatapath::bind(udp.clone()).unwrap();
    let mut b = UdpDatapath::bind(udp).unwrap();
    a.check_flow(cfg).unwrap();
    b.check_flow(cfg).unwrap();
    let mut ea = Endpoint::new(SharedBuffer::new(BufferConfig::default()).unwrap());
    let mut eb = Endpoint::new(SharedBuffer::new(BufferConfig::default()).unwrap());
    let ha = ea.connect(clock.now(), FLOW_A, FLOW_B, cfg).unwrap();
    let hb = eb.connect(clock.now(), FLOW_B, FLOW_A, cfg).unwrap();
    a.add_peer(FLOW_A, b.local_addrs().to_vec()).unwrap();
    b.add_peer(FLOW_B, a.local_addrs().to_vec()).unwrap();
    (
        Side {
            dp: a,
            host: ea,
            conn: ha,
        },
        Side {
            dp: b,
            host: eb,
            conn: hb,
        },
    )
}

/// Polls both sides in turn until `done` or `rounds` rounds have passed.
pub fn drive<HA: Host, HB: Host>(
    a: &mut Side<HA>,
    b: &mut Side<HB>,
    clock: &Clock,
    rounds: usize,
    mut done: impl FnMut(&mut Side<HA>, &mut Side<HB>) -> bool,
) -> bool {
    for _ in 0..rounds {
        a.dp.poll(&mut a.host, clock, Duration::from_micros(200))
            .unwrap();
        b.dp.poll(&mut b.host, clock, Duration::from_micros(200))
            .unwrap();
        if done(a, b) {
            return true;
        }
    }
    false
}

/// Drives both sides until B's connection has an event and returns the first one;
/// `None` when `rounds` rounds pass without one.
pub fn first_event_at_b(
    a: &mut Side<Endpoint>,
    b: &mut Side<Endpoint>,
    clock: &Clock,
    rounds: usize,
) -> Option<Event> {
    let mut ev_b = Vec::new();
    drive(a, b, clock, rounds, |_, b| {
        events(&mut b.host, b.conn, &mut ev_b);
        !ev_b.is_empty()
    });
    ev_b.into_iter().next()
}

/// Drains a connection's events into `out`.
pub fn events(ep: &mut Endpoint, h: ConnectionHandle, out: &mut Vec<Event>) {
    while let Some(e) = ep.poll_event(h) {
        out.push(e);
    }
}

/// A seeded byte pattern.
pub fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = rondo_proto::rng::Rng::new(seed);
    (0..len).map(|_| rng.next_u64() as u8).collect()
}
