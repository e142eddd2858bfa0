//! An endpoint: one host's NIC-level state, the shared reorder buffer and the
//! connections that use it, with datagram demultiplexing by flow id.

use crate::config::{ConfigError, FlowConfig};
use crate::connection::Connection;
use crate::event::{Event, PostError};
use crate::message::{Message, PayloadBytes};
use crate::placement::Placement;
use crate::receiver::SharedBuffer;
use crate::stats::EndpointStats;
use crate::time::Instant;
use crate::transmit::{Host, PayloadRef, Transmit};
use crate::wire::{self, WireError};
use std::collections::HashMap;
use thiserror::Error;

mod tap;

/// Handle of a connection inside its endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConnectionHandle(pub usize);

/// Why an endpoint operation failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum EndpointError {
    /// The flow configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A connection with this local flow id exists already.
    #[error("flow id {0} is already in use on this endpoint; pick another local flow id")]
    FlowInUse(u32),
    /// The reorder buffer slot is smaller than the flow's MTU.
    #[error("the reorder buffer's slots ({slot} bytes) are smaller than the flow's MTU ({mtu}); raise BufferConfig::slot_size")]
    SlotTooSmall {
        /// Slot size.
        slot: usize,
        /// Flow MTU.
        mtu: usize,
    },
}

/// Why a datagram was dropped (it is also counted in [`EndpointStats`]).
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DatagramError {
    /// It does not parse.
    #[error("malformed datagram: {0}")]
    Malformed(#[from] WireError),
    /// No connection has this flow id.
    #[error("no connection with flow id {0}")]
    UnknownFlow(u32),
    /// The flow has a connection token and the datagram's token is missing or
    /// different: not from this connection's peer (or from an earlier connection).
    #[error("datagram for flow {flow} without the connection's token; dropped (check that both sides use the token agreed at connect time)")]
    BadToken {
        /// The flow id the datagram claimed.
        flow: u32,
    },
}

/// One host's Rondo endpoint.
#[derive(Debug)]
pub struct Endpoint {
    buffer: SharedBuffer,
    conns: Vec<Connection>,
    by_flow: HashMap<u32, usize>,
    next_poll: usize,
    stats: EndpointStats,
    /// The measurement tap ([`crate::tap::MetricsTap`]), off until asked for.
    tap: crate::tap::TapLog,
}

impl Endpoint {
    /// A new endpoint over the NIC-level reorder buffer that every flow of it
    /// shares. The driver builds the buffer (it owns the memory: huge pages,
    /// registration), so that the engine does no I/O of its own.
    pub fn new(buffer: SharedBuffer) -> Endpoint {
        Endpoint {
            buffer,
            conns: Vec::new(),
            by_flow: HashMap::new(),
            next_poll: 0,
            stats: EndpointStats::default(),
            tap: crate::tap::TapLog::default(),
        }
    }

    /// Opens a connection: datagrams with flow id `local_flow` are for it, and it
    /// addresses the peer's `remote_flow`.
    pub fn connect(
        &mut self,
        now: Instant,
        local_flow: u32,
        remote_flow: u32,
        cfg: &FlowConfig,
    ) -> Result<ConnectionHandle, EndpointError> {
        cfg.validate()?;
        if self.by_flow.contains_key(&local_flow) {
            return Err(EndpointError::FlowInUse(local_flow));
        }
        let slot = self.buffer.slot_size();
        if slot < cfg.payload_per_packet() {
            return Err(EndpointError::SlotTooSmall { slot, mtu: cfg.mtu });
        }
        let rx = self.buffer.add_flow(reorder::Psn(cfg.initial_psn));
        let conn = Connection::new(now, local_flow, remote_flow, cfg, rx)?;
        self.conns.push(conn);
        self.by_flow.insert(local_flow, self.conns.len() - 1);
        Ok(ConnectionHandle(self.conns.len() - 1))
    }

    /// The connection behind a handle.
    pub fn connection(&self, h: ConnectionHandle) -> &Connection {
        &self.conns[h.0]
    }

    /// The connection behind a handle, mutable.
    pub fn connection_mut(&mut self, h: ConnectionHandle) -> &mut Connection {
        &mut self.conns[h.0]
    }

    /// Every connection, in handle order.
    pub fn connections(&self) -> &[Connection] {
        &self.conns
    }

    /// Queues a message on a connection: owned bytes (`Vec<u8>`) or a [`Message`]
    /// whose body is sent from where it lies (see [`crate::message`]).
    pub fn post(
        &mut self,
        h: ConnectionHandle,
        now: Instant,
        msg_id: u64,
        data: impl Into<Message>,
    ) -> Result<(), PostError> {
        self.conns[h.0].post(now, msg_id, data)
    }

    /// Replaces the receive placement of a connection (DESIGN.md "Receive
    /// placement"): every later message is placed through `placement`. Switch it
    /// between messages; a message being placed when it changes is lost
    /// (counted as inconsistent).
    pub fn set_placement(&mut self, h: ConnectionHandle, placement: Box<dyn Placement>) {
        self.conns[h.0].set_placement(placement);
    }

    /// The next event of a connection.
    pub fn poll_event(&mut self, h: ConnectionHandle) -> Option<Event> {
        self.conns[h.0].poll_event()
    }

    /// The shared reorder buffer (occupancy, NIC-level OOD, arena).
    pub fn reorder_buffer(&self) -> &SharedBuffer {
        &self.buffer
    }

    /// Datagrams this endpoint could not use.
    pub fn stats(&self) -> EndpointStats {
        self.stats
    }

    /// A datagram arrived on `path`. Malformed datagrams, datagrams for unknown
    /// flows and datagrams without the flow's connection token are counted and
    /// dropped.
    pub fn receive(
        &mut self,
        now: Instant,
        path: u16,
        datagram: &[u8],
        ecn_ce: bool,
    ) -> Result<(), DatagramError> {
        self.stats.datagrams += 1;
        let (repr, payload) = match wire::parse(datagram) {
            Ok(x) => x,
            Err(e) => {
                self.stats.malformed += 1;
                return Err(e.into());
            }
        };
        let i = self.check_flow(&repr, datagram)?;
        let _ = path; // the header's path id is authoritative; the datapath's is advisory
        self.conns[i].handle_repr(now, &mut self.buffer, &repr, payload, ecn_ce);
        Ok(())
    }
}

impl Endpoint {
    /// For a datapath that receives in place (DESIGN.md "Receive placement"): the
    /// next expected PSN of connection `h` and the final place of its payload, when
    /// the connection's [`Placement`] has one. Receive the next datagram of the flow
    /// with its header in a header buffer and its payload in this slice, then hand it
    /// over with [`Endpoint::receive_in_place`].
    pub fn expected_target(&mut self, h: ConnectionHandle) -> Option<(crate::Psn, &mut [u8])> {
        let conn = self.conns.get_mut(h.0)?;
        conn.in_place_target(&self.buffer)
    }

    /// A datagram whose header (exactly `header_words * 4` bytes) is `header` and
    /// whose `payload_len` payload bytes a datapath received at the slice that
    /// [`Endpoint::expected_target`] returned last for this flow. When it is the
    /// expected packet its payload is placed without a copy (counted in
    /// `placed_in_place`); otherwise it is taken out of that slice and handled like
    /// any datagram. Checks and errors as [`Endpoint::receive`].
    pub fn receive_in_place(
        &mut self,
        now: Instant,
        path: u16,
        header: &[u8],
        payload_len: usize,
        ecn_ce: bool,
    ) -> Result<(), DatagramError> {
        let _ = path; // as in `receive`: the header's path id is authoritative
        self.stats.datagrams += 1;
        let repr = match wire::parse_split(header, payload_len) {
            Ok(r) => r,
            Err(e) => {
                self.stats.malformed += 1;
                return Err(e.into());
            }
        };
        let i = self.check_flow(&repr, header)?;
        self.conns[i].handle_in_place(now, &mut self.buffer, &repr, ecn_ce);
        Ok(())
    }

    /// The connection index of a parsed datagram, after the flow and token checks.
    fn check_flow(&mut self, repr: &wire::Repr, header: &[u8]) -> Result<usize, DatagramError> {
        let flow = repr.common.flow;
        // One connection is the common case: skip the hash.
        let found = match self.conns.as_slice() {
            [only] if only.local_flow() == flow => Some(0),
            _ => self.by_flow.get(&flow).copied(),
        };
        let Some(i) = found else {
            self.stats.unknown_flow += 1;
            return Err(DatagramError::UnknownFlow(flow));
        };
        if let Some(token) = self.conns[i].token() {
            // parse() checked the extensions: at most one well-formed token.
            if wire::Packet::new_unchecked(header).token() != Some(token) {
                self.stats.bad_token += 1;
                return Err(DatagramError::BadToken {
                    flow: repr.common.flow,
                });
            }
        }
        Ok(i)
    }
}

impl Host for Endpoint {
    fn handle_datagram(&mut self, now: Instant, path: u16, data: &[u8], ecn_ce: bool) {
        if self.tap.is_on() {
            return self.receive_tapped(now, path, data, ecn_ce);
        }
        let _ = self.receive(now, path, data, ecn_ce);
    }

    fn handle_timeout(&mut self, now: Instant) {
        for c in &mut self.conns {
            if c.poll_timeout().is_some_and(|t| t <= now) {
                c.handle_timeout(now);
            }
        }
    }

    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        let n = self.conns.len();
        for k in 0..n {
            let i = (self.next_poll + k) % n;
            if let Some(t) = self.conns[i].poll_transmit(now, buf) {
                self.next_poll = (i + 1) % n;
                self.tap_transmit(t.flow, &buf[..t.len]);
                return Some(t);
            }
        }
        None
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.conns.iter().filter_map(|c| c.poll_timeout()).min()
    }

    fn poll_transmit_split(
        &mut self,
        now: Instant,
        buf: &mut [u8],
    ) -> Option<(Transmit, Option<PayloadRef>)> {
        let n = self.conns.len();
        for k in 0..n {
            let i = (self.next_poll + k) % n;
            if let Some((t, at)) = self.conns[i].poll_transmit_split(now, buf) {
                self.next_poll = (i + 1) % n;
                self.tap_transmit(t.flow, &buf[..t.len]);
                let r = at.map(|(key, offset, len)| PayloadRef {
                    source: i as u32,
                    key,
                    offset,
                    len,
                });
                return Some((t, r));
            }
        }
        None
    }

    fn payload(&self, r: PayloadRef) -> PayloadBytes<'_> {
        self.conns
            .get(r.source as usize)
            .and_then(|c| c.payload(r.key, r.offset, r.len))
            .unwrap_or(PayloadBytes::EMPTY)
    }
}
