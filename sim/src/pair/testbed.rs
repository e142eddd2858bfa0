//! A ready two-host testbed: two [`Endpoint`]s with one connection each, joined by
//! a [`Pair`] over parallel paths (the paper's Fig. 9a testbed). Used by the engine
//! tests, benchmarks and `rondo demo`.

use super::{Network, Pair, PathSpec};
use reorder::ReorderError;
use rondo_proto::config::FlowConfig;
use rondo_proto::endpoint::{ConnectionHandle, Endpoint, EndpointError};
use rondo_proto::event::Event;
use rondo_proto::time::Instant;
use rondo_proto::Connection;
use rondo_proto::{BufferConfig, SharedBuffer};

/// Why a [`Testbed`] could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TestbedError {
    /// A reorder buffer could not be created.
    #[error("reorder buffer: {0}")]
    Reorder(#[from] ReorderError),
    /// An endpoint refused the connection.
    #[error(transparent)]
    Endpoint(#[from] EndpointError),
}

/// Two endpoints `a` (sender) and `b` (receiver) with one flow between them.
pub struct Testbed {
    /// The network.
    pub pair: Pair<Endpoint>,
    /// Connection handle on `a`.
    pub conn_a: ConnectionHandle,
    /// Connection handle on `b`.
    pub conn_b: ConnectionHandle,
    /// Events seen on `a`, in order.
    pub events_a: Vec<(Instant, Event)>,
    /// Events seen on `b`, in order.
    pub events_b: Vec<(Instant, Event)>,
}

impl Testbed {
    /// Two hosts with NICs of `host_gbps` over `paths`; the flow uses `cfg` on both
    /// sides (its `paths` is set to the number of paths) and the receiver's reorder
    /// buffer configuration `reorder` (both sides get one).
    pub fn new(
        seed: u64,
        host_gbps: f64,
        paths: &[PathSpec],
        cfg: &FlowConfig,
        reorder: BufferConfig,
    ) -> Result<Testbed, TestbedError> {
        let mut cfg = cfg.clone();
        cfg.paths = paths.len() as u16;
        cfg.line_rate_bps = (host_gbps * 1e9) as u64;
        let mut a = Endpoint::new(SharedBuffer::in_heap(reorder)?);
        let mut b = Endpoint::new(SharedBuffer::in_heap(reorder)?);
        let conn_a = a.connect(Instant::ZERO, 1, 2, &cfg)?;
        let mut cfg_b = cfg.clone();
        cfg_b.seed = cfg.seed.wrapping_add(1);
        let conn_b = b.connect(Instant::ZERO, 2, 1, &cfg_b)?;
        let paths: Vec<PathSpec> = paths.iter().map(|p| p.for_mtu(cfg.mtu)).collect();
        Ok(Testbed {
            pair: Pair::on(Network::with_mtu(seed, cfg.mtu), a, b, host_gbps, &paths),
            conn_a,
            conn_b,
            events_a: Vec::new(),
            events_b: Vec::new(),
        })
    }

    /// The current time.
    pub fn now(&self) -> Instant {
        self.pair.net.now()
    }

    /// The sending connection.
    pub fn sender(&self) -> &Connection {
        self.pair.net.host(self.pair.a).connection(self.conn_a)
    }

    /// The receiving connection.
    pub fn receiver(&self) -> &Connection {
        self.pair.net.host(self.pair.b).connection(self.conn_b)
    }

    /// The receiving endpoint.
    pub fn receiver_endpoint(&self) -> &Endpoint {
        self.pair.net.host(self.pair.b)
    }

    /// Posts a message from `a` to `b`.
    pub fn post(&mut self, msg_id: u64, data: Vec<u8>) -> Result<(), rondo_proto::PostError> {
        let now = self.now();
        let (a, h) = (self.pair.a, self.conn_a);
        self.pair.net.host_mut(a).post(h, now, msg_id, data)
    }

    fn collect_events(&mut self) -> bool {
        let now = self.now();
        let mut any = false;
        let (a, ha, b, hb) = (self.pair.a, self.conn_a, self.pair.b, self.conn_b);
        while let Some(e) = self.pair.net.host_mut_quiet(a).poll_event(ha) {
            self.events_a.push((now, e));
            any = true;
        }
        while let Some(e) = self.pair.net.host_mut_quiet(b).poll_event(hb) {
            self.events_b.push((now, e));
            any = true;
        }
        any
    }

    /// Steps the network until `done` holds (checked after every step and event
    /// collection), the network is idle, or `deadline` passes. Returns whether `done` held.
    pub fn run_until(&mut self, deadline: Instant, mut done: impl FnMut(&Testbed) -> bool) -> bool {
        loop {
            self.collect_events();
            if done(self) {
                return true;
            }
            match self.pair.net.next_event() {
                Some(t) if t <= deadline => {
                    self.pair.net.step();
                }
                _ => {
                    self.pair.net.run_until(deadline);
                    self.collect_events();
                    return done(self);
                }
            }
        }
    }

    /// Clears the receiver's OOD/RBO distributions (end of a warm-up period).
    pub fn clear_receiver_distributions(&mut self) {
        let (b, h) = (self.pair.b, self.conn_b);
        self.pair
            .net
            .host_mut_quiet(b)
            .connection_mut(h)
            .clear_distributions();
    }

    /// Messages received by `b` so far, in delivery order.
    pub fn received(&self) -> impl Iterator<Item = (u64, &[u8])> {
        self.events_b.iter().filter_map(|(_, e)| match e {
            Event::Received { msg_id, data } => Some((*msg_id, data.as_slice())),
            _ => None,
        })
    }

    /// Number of messages `a` has seen completed.
    pub fn send_completions(&self) -> usize {
        self.events_a
            .iter()
            .filter(|(_, e)| matches!(e, Event::SendComplete { .. }))
            .count()
    }
}
