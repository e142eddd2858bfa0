//! An endpoint: one host's NIC-level state, the shared reorder buffer and the
//! connections that use it, with datagram demultiplexing by flow id.
//!
//! The work per event does not grow with the number of connections ([`schedule`]):
//! `poll_transmit` asks only the connections whose deadline has come, in the same
//! round-robin order as a scan of all of them would, `handle_timeout` runs only the
//! due ones, and `poll_timeout` reads the earliest deadline.

mod schedule;

use crate::config::{ConfigError, FlowConfig};
use crate::connection::{Closed, Connection, ConnectionSummary};
use crate::event::{Event, PostError};
use crate::message::{Message, PayloadBytes};
use crate::placement::Placement;
use crate::receiver::SharedBuffer;
use crate::stats::EndpointStats;
use crate::time::Instant;
use crate::transmit::{Host, PayloadRef, Transmit, TxBuffer};
use crate::wire::{self, WireError};
use schedule::Schedule;
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
    /// The endpoint holds as many connections as a `u32` counts.
    #[error("this endpoint holds {0} connections, the most it can; close and forget some")]
    TooManyConnections(usize),
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

/// A connection's place in its endpoint: open, or closed and reduced to a
/// tombstone that answers late duplicates.
#[derive(Debug)]
enum Slot {
    /// With its flow's place in the shared reorder buffer
    /// ([`reorder::FlowId::place`]), beside the pointer (the slot stays two
    /// words): reading ahead of an arrival asks for that flow's state without
    /// reading the connection first ([`Endpoint::prefetch_connection`]).
    Open(Box<Connection>, u32),
    /// Boxed, as an open connection is: a slot is two words, and the slots of
    /// an endpoint with thousands of connections stay in few cache lines.
    Closed(Box<Closed>),
    /// Forgotten: nothing is left.
    Vacant,
}

impl Slot {
    fn open(&self) -> Option<&Connection> {
        match self {
            Slot::Open(c, _) => Some(c),
            _ => None,
        }
    }

    fn open_mut(&mut self) -> Option<&mut Connection> {
        match self {
            Slot::Open(c, _) => Some(c),
            _ => None,
        }
    }

    /// The local flow id of an open or closed connection.
    fn local_flow(&self) -> Option<u32> {
        match self {
            Slot::Open(c, _) => Some(c.local_flow()),
            Slot::Closed(c) => Some(c.local_flow()),
            Slot::Vacant => None,
        }
    }

    fn token(&self) -> Option<u64> {
        match self {
            Slot::Open(c, _) => c.token(),
            Slot::Closed(c) => c.token(),
            Slot::Vacant => None,
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        match self {
            Slot::Open(c, _) => c.poll_timeout(),
            Slot::Closed(c) => c.poll_timeout(),
            Slot::Vacant => None,
        }
    }
}

/// One host's Rondo endpoint.
#[derive(Debug)]
pub struct Endpoint {
    buffer: SharedBuffer,
    conns: Vec<Slot>,
    /// Local flow id to connection index (a `u32`: eight bytes an entry, so
    /// that a large endpoint's table stays in cache).
    by_flow: HashMap<u32, u32, reorder::FlowIdHash>,
    next_poll: usize,
    stats: EndpointStats,
    schedule: Schedule,
    /// Connections handed out by [`Endpoint::connection_mut`]: their deadlines are
    /// read again before the next call that uses the schedule.
    dirty: Vec<usize>,
    /// Scratch: the due connections of one `handle_timeout`.
    due: Vec<usize>,
    /// The measurement tap ([`crate::tap::MetricsTap`]), off until asked for.
    tap: crate::tap::TapLog,
    /// The open connections' OOD outside the shared reorder buffer (RC selective
    /// repeat's direct placement), kept up to date while the tap is on.
    direct_ood: u64,
    /// Spurious retransmissions of the connections closed so far (for the tap).
    closed_spurious: u64,
    /// The host line clock: when the line is next free of this endpoint's
    /// datagrams. Capacity probes of every connection go only when it has come,
    /// so that probing fills the host's line rate and no more (§4.2.2), however
    /// many connections probe at once.
    line_next: Instant,
    /// Connections that may want to probe (a superset: one that no longer does
    /// leaves when next asked), and the round-robin cursor over them.
    probing: schedule::IndexSet,
    next_probe: usize,
    /// The connection a driver says the datagram being handled is for
    /// ([`Endpoint::handle_datagram_for`]), tried before the flow table.
    hint: Option<usize>,
}

impl Endpoint {
    /// A new endpoint over the NIC-level reorder buffer that every flow of it
    /// shares. The driver builds the buffer (it owns the memory: huge pages,
    /// registration), so that the engine does no I/O of its own.
    pub fn new(buffer: SharedBuffer) -> Endpoint {
        Endpoint {
            buffer,
            conns: Vec::new(),
            by_flow: HashMap::default(),
            next_poll: 0,
            stats: EndpointStats::default(),
            schedule: Schedule::default(),
            dirty: Vec::new(),
            due: Vec::new(),
            tap: crate::tap::TapLog::default(),
            direct_ood: 0,
            closed_spurious: 0,
            line_next: Instant::ZERO,
            probing: schedule::IndexSet::default(),
            next_probe: 0,
            hint: None,
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
        let Ok(index) = u32::try_from(self.conns.len()) else {
            return Err(EndpointError::TooManyConnections(self.conns.len()));
        };
        let slot = self.buffer.slot_size();
        if slot < cfg.payload_per_packet() {
            return Err(EndpointError::SlotTooSmall { slot, mtu: cfg.mtu });
        }
        let rx = self.buffer.add_flow(reorder::Psn(cfg.initial_psn));
        let conn = Connection::new(now, local_flow, remote_flow, cfg, rx)?;
        self.conns.push(Slot::Open(Box::new(conn), rx.place()));
        self.schedule.push();
        self.probing.grow(self.conns.len());
        let i = index as usize;
        self.by_flow.insert(local_flow, index);
        self.touch(i);
        Ok(ConnectionHandle(i))
    }

    /// The connection behind a handle.
    ///
    /// Panics when the handle is not one of this endpoint's open connections
    /// (closed, or from another endpoint); [`Endpoint::get`] does not.
    pub fn connection(&self, h: ConnectionHandle) -> &Connection {
        self.get(h)
            .expect("a handle of an open connection of this endpoint")
    }

    /// The connection behind a handle, mutable. Panics as [`Endpoint::connection`].
    pub fn connection_mut(&mut self, h: ConnectionHandle) -> &mut Connection {
        self.get_mut(h)
            .expect("a handle of an open connection of this endpoint")
    }

    /// The connection behind a handle, `None` when it is closed or unknown.
    pub fn get(&self, h: ConnectionHandle) -> Option<&Connection> {
        self.conns.get(h.0)?.open()
    }

    /// The connection behind a handle, mutable; `None` when it is closed or unknown.
    pub fn get_mut(&mut self, h: ConnectionHandle) -> Option<&mut Connection> {
        let c = self.conns.get_mut(h.0)?.open_mut()?;
        self.dirty.push(h.0);
        Some(c)
    }

    /// Every open connection, in handle order.
    pub fn connections(&self) -> impl Iterator<Item = &Connection> + '_ {
        self.conns.iter().filter_map(Slot::open)
    }

    /// Closes connection `h` (issue 10: a finished connection frees its state):
    /// its sender and receiver state, and its flow in the reorder buffer, are
    /// freed, and its final counters returned. A small tombstone stays under its
    /// flow id: a retransmitted duplicate or a probe that arrives later is answered
    /// as the receiver would have (a sender whose last ACKs were lost still
    /// completes); new data, ACKs and NAKs for it are dropped and counted as
    /// `unknown_flow`. Close a connection whose messages are all acknowledged and
    /// received: what is still in flight is dropped. `None` when `h` is not open.
    ///
    /// [`Endpoint::forget`] removes the tombstone too.
    pub fn close(&mut self, h: ConnectionHandle) -> Option<ConnectionSummary> {
        self.flush();
        let slot = self.conns.get_mut(h.0)?;
        slot.open()?;
        let Slot::Open(conn, _) = std::mem::replace(slot, Slot::Vacant) else {
            return None;
        };
        self.direct_ood = self
            .direct_ood
            .saturating_sub(conn.direct_ood(&self.buffer));
        let (closed, summary) = conn.close(&mut self.buffer);
        self.closed_spurious += summary.sender.spurious_retransmissions;
        self.conns[h.0] = Slot::Closed(Box::new(closed));
        self.touch(h.0);
        Some(summary)
    }

    /// Removes what is left of a closed connection (its tombstone): datagrams for
    /// its flow id are unknown from now on, and the id can be connected again.
    /// False when `h` is not a closed connection of this endpoint.
    pub fn forget(&mut self, h: ConnectionHandle) -> bool {
        let Some(Slot::Closed(c)) = self.conns.get(h.0) else {
            return false;
        };
        let flow = c.local_flow();
        self.by_flow.remove(&flow);
        self.conns[h.0] = Slot::Vacant;
        self.schedule.set(h.0, None);
        true
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
        self.flush();
        let Some(c) = self.conns.get_mut(h.0).and_then(Slot::open_mut) else {
            return Err(PostError::Closed);
        };
        let r = c.post(now, msg_id, data);
        self.touch(h.0);
        r
    }

    /// Replaces the receive placement of a connection (DESIGN.md "Receive
    /// placement"): every later message is placed through `placement`. Switch it
    /// between messages; a message being placed when it changes is lost
    /// (counted as inconsistent).
    pub fn set_placement(&mut self, h: ConnectionHandle, placement: Box<dyn Placement>) {
        if let Some(c) = self.conns.get_mut(h.0).and_then(Slot::open_mut) {
            c.set_placement(placement);
            self.touch(h.0);
        }
    }

    /// The next event of a connection (`None` once it is closed).
    pub fn poll_event(&mut self, h: ConnectionHandle) -> Option<Event> {
        self.conns.get_mut(h.0)?.open_mut()?.poll_event()
    }

    /// A connection that has queued events since it was last returned here, oldest
    /// first: a driver with many connections drains only these instead of asking
    /// every connection for events. (A connection drained meanwhile through
    /// [`Endpoint::poll_event`] is skipped.)
    pub fn next_with_events(&mut self) -> Option<ConnectionHandle> {
        self.flush();
        while let Some(i) = self.schedule.pop_with_events() {
            if self.conns[i].open().is_some_and(Connection::has_events) {
                return Some(ConnectionHandle(i));
            }
        }
        None
    }

    /// The shared reorder buffer (occupancy, NIC-level OOD, arena).
    pub fn reorder_buffer(&self) -> &SharedBuffer {
        &self.buffer
    }

    /// [`Host::handle_datagram`] for a datagram that the driver has already
    /// matched to connection `h`, as a NIC's steering matches the destination
    /// QP: `h`'s slot is tried before the flow table, whose lookup in an
    /// endpoint with thousands of connections is a cache miss or two. Nothing
    /// is trusted: `h` is taken only when its flow id is the datagram's, and
    /// the datagram is handled exactly as `handle_datagram` would handle it.
    pub fn handle_datagram_for(
        &mut self,
        h: ConnectionHandle,
        now: Instant,
        path: u16,
        data: &[u8],
        ecn_ce: bool,
    ) {
        self.hint = Some(h.0);
        self.handle_datagram(now, path, data, ecn_ce);
        self.hint = None;
    }

    /// Asks for the cache line of connection `h`'s slot, which a datagram for
    /// it reads first ([`reorder::prefetch`]; nothing is read or changed). A
    /// driver that knows what comes next (the simulator reads its agenda ahead)
    /// calls it an event or two before; then [`Endpoint::prefetch_connection`].
    pub fn prefetch_slot(&self, h: ConnectionHandle) {
        if let Some(slot) = self.conns.get(h.0) {
            reorder::prefetch(slot);
        }
    }

    /// Asks for the cache lines of connection `h` that a datagram for it reads
    /// first (its flow id, token and receiver counters). Reads the slot (which
    /// [`Endpoint::prefetch_slot`] brought in) and changes nothing.
    pub fn prefetch_connection(&self, h: ConnectionHandle) {
        if let Some(Slot::Open(c, rx)) = self.conns.get(h.0) {
            c.prefetch();
            self.buffer.prefetch_place(*rx);
        }
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
        match &mut self.conns[i] {
            Slot::Open(c, _) => {
                c.handle_repr(now, &mut self.buffer, &repr, datagram, payload, ecn_ce)
            }
            Slot::Closed(c) => {
                if !c.handle_repr(now, &repr, ecn_ce) {
                    self.stats.unknown_flow += 1;
                }
            }
            Slot::Vacant => {}
        }
        self.touch(i);
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
        let conn = self.conns.get_mut(h.0)?.open_mut()?;
        self.dirty.push(h.0);
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
        match &mut self.conns[i] {
            Slot::Open(c, _) => c.handle_in_place(now, &mut self.buffer, &repr, header, ecn_ce),
            Slot::Closed(c) => {
                if !c.handle_repr(now, &repr, ecn_ce) {
                    self.stats.unknown_flow += 1;
                }
            }
            Slot::Vacant => {}
        }
        self.touch(i);
        Ok(())
    }

    /// The index of the connection (open or closed) with local flow id `flow`:
    /// the driver's hint when that slot has this flow id (a slot's id is unique
    /// among the table's, so the answer is the table's), else the table's.
    fn flow_index(&self, flow: u32) -> Option<usize> {
        if let Some(i) = self.hint {
            if self.conns.get(i).and_then(Slot::local_flow) == Some(flow) {
                return Some(i);
            }
        }
        self.by_flow.get(&flow).map(|&i| i as usize)
    }

    /// The connection index of a parsed datagram, after the flow and token checks.
    fn check_flow(&mut self, repr: &wire::Repr, header: &[u8]) -> Result<usize, DatagramError> {
        self.flush();
        let flow = repr.common.flow;
        // One connection is the common case: skip the hash.
        let found = match self.conns.as_slice() {
            [Slot::Open(only, _)] if only.local_flow() == flow => Some(0),
            _ => self.flow_index(flow),
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

impl Endpoint {
    /// Reads connection `i`'s deadline and events again after something changed it.
    fn touch(&mut self, i: usize) {
        let c = &self.conns[i];
        self.schedule.set(i, c.poll_timeout());
        if let Some(c) = c.open() {
            if c.has_events() {
                self.schedule.note_events(i);
            }
            // A probing phase ends at a time, not an event: `Instant::ZERO` asks
            // whether one is under way at all, and the next probe poll drops a
            // connection whose phase has ended.
            if c.wants_probe(Instant::ZERO) {
                self.probing.insert(i);
            }
        }
    }

    /// A capacity probe from the next probing connection after the last that
    /// probed, if the host line is free at `now` (moving the line clock past
    /// it). A connection that has nothing to probe leaves the probing set.
    fn poll_probe<B: TxBuffer + ?Sized>(&mut self, now: Instant, tx: &mut B) -> Option<Transmit> {
        if self.probing.is_empty() || now < self.line_next {
            return None;
        }
        while let Some(i) = self
            .probing
            .next_from(self.next_probe)
            .or_else(|| self.probing.next_from(0))
        {
            // A short buffer takes no probe: the connection stays in the set for
            // the next offer (its data attempt counted the short buffer).
            if self.conns[i]
                .open()
                .is_some_and(|c| tx.capacity() < c.mtu())
            {
                return None;
            }
            // Data first, as at any transmission opportunity: a connection whose
            // selection found every window shut is not due again until an ACK or
            // a tick, and the line's free slot is the moment to retry it.
            let mut data = None;
            let mut line = self.line_next;
            let t = transmit_from(&mut self.conns[i], i, now, tx, true, &mut line, &mut data);
            self.line_next = line;
            if let (Some(t), Some((psn, retransmission))) = (&t, data) {
                self.tap_data_sent(t.flow, psn, retransmission);
            }
            self.touch(i);
            match t {
                Some(t) => {
                    self.next_probe = i + 1;
                    return Some(t);
                }
                None => {
                    self.probing.remove(i);
                }
            }
        }
        None
    }

    /// Touches the connections handed out mutably since the last call.
    fn flush(&mut self) {
        while let Some(i) = self.dirty.pop() {
            self.touch(i);
        }
    }

    /// The first connection, in round-robin order from `next_poll`, for which
    /// `send` returns something. Only connections whose deadline has come are
    /// asked: one whose deadline is later has nothing to send (its deadline is
    /// when it will have), so the result is that of asking every connection.
    fn poll_ready<T>(
        &mut self,
        now: Instant,
        mut send: impl FnMut(&mut Slot, usize) -> Option<T>,
    ) -> Option<T> {
        self.flush();
        self.schedule.advance(now);
        if self.schedule.none_ready() {
            return None;
        }
        let n = self.conns.len();
        let start = self.next_poll;
        // First the connections at and after `start`, then those before it.
        for (mut from, to) in [(start, n), (0, start)] {
            while let Some(i) = self.schedule.next_ready(from, to) {
                from = i + 1;
                if self.schedule.deadline(i).is_none_or(|t| t > now) {
                    continue; // ready for a later `now` than this one
                }
                let out = send(&mut self.conns[i], i);
                self.touch(i);
                if out.is_some() {
                    self.next_poll = (i + 1) % n;
                    return out;
                }
            }
        }
        None
    }
}

/// What connection slot `i` sends at `now`: its feedback or DATA, else, with
/// `probe`, a capacity probe. The payload's source is set to `i`, the host line
/// clock `line` moves past what an open connection sent, and `data` gets the
/// DATA packet's PSN and retransmission flag.
fn transmit_from<B: TxBuffer + ?Sized>(
    slot: &mut Slot,
    i: usize,
    now: Instant,
    tx: &mut B,
    probe: bool,
    line: &mut Instant,
    data: &mut Option<(u32, bool)>,
) -> Option<Transmit> {
    let mut t = match slot {
        Slot::Open(c, _) => {
            let t = match c.poll_transmit(now, tx) {
                Some(t) => {
                    *data = c.last_data_sent();
                    t
                }
                None if probe => c.poll_probe(now, tx)?,
                None => return None,
            };
            *line = c.line_clock_after(*line, now, t.datagram_len());
            t
        }
        Slot::Closed(c) if !probe => c.poll_transmit(now, tx)?,
        Slot::Closed(_) | Slot::Vacant => return None,
    };
    if let Some(p) = &mut t.payload {
        p.source = i as u32;
    }
    Some(t)
}

impl Host for Endpoint {
    fn handle_datagram(&mut self, now: Instant, path: u16, data: &[u8], ecn_ce: bool) {
        if self.tap.is_on() {
            return self.receive_tapped(now, path, data, ecn_ce);
        }
        let _ = self.receive(now, path, data, ecn_ce);
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.flush();
        let mut due = std::mem::take(&mut self.due);
        due.clear();
        self.schedule.due(now, &mut due);
        for &i in &due {
            // A connection woken for its send time alone keeps its deadline:
            // `poll_transmit` serves it (a paced sender's every packet).
            let ran = match &mut self.conns[i] {
                Slot::Open(c, _) => c.run_timers(now),
                _ => true,
            };
            if ran {
                self.touch(i);
            }
        }
        self.due = due;
    }

    fn poll_transmit<B: TxBuffer + ?Sized>(
        &mut self,
        now: Instant,
        tx: &mut B,
    ) -> Option<Transmit> {
        let mut data = None;
        let mut line = self.line_next;
        let sent = self.poll_ready(now, |slot, i| {
            transmit_from(slot, i, now, tx, false, &mut line, &mut data)
        });
        self.line_next = line;
        let Some(t) = sent else {
            return self.poll_probe(now, tx);
        };
        if let Some((psn, retransmission)) = data {
            self.tap_data_sent(t.flow, psn, retransmission);
        }
        Some(t)
    }

    fn poll_timeout(&self) -> Option<Instant> {
        // The earliest of the schedule's deadline, those of the connections
        // handed out since the last flush, and the line clock while some
        // connection may want to probe (a driver asks after every call).
        let mut t = self.schedule.earliest();
        let mut take = |d: Instant| t = Some(t.map_or(d, |e| e.min(d)));
        for &i in &self.dirty {
            if let Some(d) = self.conns[i].poll_timeout() {
                take(d);
            }
        }
        if !self.probing.is_empty() {
            take(self.line_next);
        }
        t
    }

    fn payload(&self, r: PayloadRef) -> PayloadBytes<'_> {
        self.conns
            .get(r.source as usize)
            .and_then(Slot::open)
            .and_then(|c| c.payload(r.key, r.offset, r.len))
            .unwrap_or(PayloadBytes::EMPTY)
    }
}
