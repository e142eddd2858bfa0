//! One flow between two endpoints: a sender half and a receiver half.

use crate::cc::AnyCc;
use crate::config::{ConfigError, FlowConfig};
use crate::event::{Event, PostError};
use crate::message::Message;
use crate::path::Paths;
use crate::receiver::{Payload, Receiver, RxTombstone, SharedBuffer};
use crate::scheduler::PacketSelector;
use crate::sender::LazySender;
use crate::stats::{ReceiverStats, SenderStats};
use crate::time::Instant;
use crate::transmit::{Transmit, TxBuffer};
use crate::wire::{Body, Packet, Repr};
use reorder::FlowId;
use std::collections::VecDeque;

/// One Rondo flow over P logical paths, sans IO: feed it datagrams and timeouts,
/// poll it for datagrams, timers and events.
#[derive(Debug)]
pub struct Connection {
    local_flow: u32,
    remote_flow: u32,
    sender: LazySender,
    receiver: Receiver,
    events: VecDeque<Event>,
    max_message_len: u64,
    token: Option<u64>,
    transport: crate::Transport,
}

impl Connection {
    pub(crate) fn new(
        now: Instant,
        local_flow: u32,
        remote_flow: u32,
        cfg: &FlowConfig,
        rx_flow: FlowId,
    ) -> Result<Connection, ConfigError> {
        cfg.validate()?;
        Ok(Connection {
            local_flow,
            remote_flow,
            sender: LazySender::new(cfg, now),
            receiver: Receiver::new(
                rx_flow,
                crate::Transport::receiver_policy(cfg),
                cfg.max_message_len,
                cfg.token,
                cfg.payload_per_packet(),
                cfg.ack_coalescing(),
                cfg.mtu,
            ),
            events: VecDeque::new(),
            max_message_len: cfg.max_message_len,
            token: cfg.token,
            transport: cfg.transport,
        })
    }

    /// This side's flow id (the `flow` field of datagrams addressed to it).
    pub fn local_flow(&self) -> u32 {
        self.local_flow
    }

    /// Asks for the cache lines a datagram's arrival reads first: the flow id,
    /// the token and event queue, the receiver's counters (see
    /// [`crate::Endpoint::prefetch_connection`]).
    pub(crate) fn prefetch(&self) {
        reorder::prefetch(&self.local_flow);
        reorder::prefetch(&self.token);
        self.receiver.prefetch();
    }

    /// The connection token datagrams for this flow must carry, if any.
    pub fn token(&self) -> Option<u64> {
        self.token
    }

    /// The peer's flow id.
    pub fn remote_flow(&self) -> u32 {
        self.remote_flow
    }

    /// Queues a message for sending: owned bytes (`Vec<u8>`) or a [`Message`] whose
    /// body stays where it is until it is acknowledged. Its PSNs are assigned now;
    /// `Event::SendComplete` follows when every packet is acknowledged.
    pub fn post(
        &mut self,
        now: Instant,
        msg_id: u64,
        data: impl Into<Message>,
    ) -> Result<(), PostError> {
        let data = data.into();
        if let Some(e) = self.sender.built().and_then(|s| s.core.failed) {
            return Err(PostError::Failed(e));
        }
        if data.is_empty() {
            return Err(PostError::Empty);
        }
        if data.len() as u64 > self.max_message_len {
            return Err(PostError::TooLarge {
                len: data.len() as u64,
                max: self.max_message_len,
            });
        }
        self.sender
            .get_mut()
            .post(now, msg_id, data, &mut self.events);
        Ok(())
    }

    /// A parsed datagram: `header` holds at least its header (the ACK blocks of a
    /// coalesced ACK are read from it), `payload` a DATA payload.
    pub(crate) fn handle_repr(
        &mut self,
        now: Instant,
        rb: &mut SharedBuffer,
        repr: &Repr,
        header: &[u8],
        payload: &[u8],
        ce: bool,
    ) {
        match &repr.body {
            Body::Data(d) => self.receiver.on_data(
                now,
                rb,
                &repr.common,
                d,
                Payload::Bytes(payload),
                ce,
                self.remote_flow,
                &mut self.events,
            ),
            Body::Probe(_) => self
                .receiver
                .on_probe(now, rb, &repr.common, ce, self.remote_flow),
            Body::Ack(fb) => {
                let blocks = Packet::new_unchecked(header);
                let blocks = blocks.ack_blocks();
                self.sender.get_mut().on_feedback(
                    now,
                    &repr.common,
                    fb,
                    None,
                    blocks,
                    &mut self.events,
                );
            }
            Body::Nak(fb, reason) => {
                let blocks = std::iter::empty();
                let nak = Some(*reason);
                self.sender.get_mut().on_feedback(
                    now,
                    &repr.common,
                    fb,
                    nak,
                    blocks,
                    &mut self.events,
                );
            }
        }
    }

    /// The expected PSN and the final place of its payload (see
    /// [`Endpoint::expected_target`](crate::Endpoint::expected_target)).
    pub(crate) fn in_place_target(&mut self, rb: &SharedBuffer) -> Option<(crate::Psn, &mut [u8])> {
        self.receiver.in_place_target(rb)
    }

    pub(crate) fn handle_in_place(
        &mut self,
        now: Instant,
        rb: &mut SharedBuffer,
        repr: &Repr,
        header: &[u8],
        ce: bool,
    ) {
        match &repr.body {
            Body::Data(d) => self.receiver.on_data_in_place(
                now,
                rb,
                &repr.common,
                d,
                ce,
                self.remote_flow,
                &mut self.events,
            ),
            _ => self.handle_repr(now, rb, repr, header, &[], ce),
        }
    }

    /// Writes the next datagram to send into a buffer taken from `tx` (which must
    /// hold at least `mtu` bytes): feedback first, then retransmissions, data,
    /// probes. A smaller `tx` gets `None`, with nothing consumed, and counts in
    /// [`SenderStats::short_buffers`]. When `tx` takes payloads by reference, a
    /// DATA payload may stay in its message ([`Transmit::payload`], `source` 0),
    /// read with [`Connection::payload`].
    pub fn poll_transmit<B: TxBuffer + ?Sized>(
        &mut self,
        now: Instant,
        tx: &mut B,
    ) -> Option<Transmit> {
        // Writing part of a datagram, or popping what could not be written, would
        // lose it.
        if tx.capacity() < self.mtu() {
            self.sender.get_mut().core.stats.short_buffers += 1;
            return None;
        }
        if let Some(s) = self.sender.built_mut() {
            s.core.last_data = None;
        }
        let t = match self.receiver.poll_feedback(now, tx) {
            Some(t) => t,
            None => self
                .sender
                .built_mut()?
                .poll_transmit(now, tx, self.remote_flow)?,
        };
        Some(Transmit {
            flow: self.local_flow,
            ..t
        })
    }

    /// The flow's datagram size: the least a transmit buffer must hold.
    pub(crate) fn mtu(&self) -> usize {
        self.sender.cfg().mtu
    }

    /// Whether the connection would send a capacity probe now
    /// ([`Connection::poll_probe`]).
    pub(crate) fn wants_probe(&self, now: Instant) -> bool {
        self.sender.built().is_some_and(|s| s.wants_probe(now))
    }

    /// A capacity probe, when the connection is probing (§4.2.2) and the host
    /// line has room: the endpoint asks, after no connection had anything else
    /// to send, with a buffer of at least `mtu` bytes.
    pub(crate) fn poll_probe<B: TxBuffer + ?Sized>(
        &mut self,
        now: Instant,
        tx: &mut B,
    ) -> Option<Transmit> {
        let t = self
            .sender
            .built_mut()?
            .poll_probe(now, tx, self.remote_flow)?;
        Some(Transmit {
            flow: self.local_flow,
            ..t
        })
    }

    /// The host line clock `clock` moved past a `len`-byte datagram sent at `now`
    /// (at this connection's line rate and burst credit).
    pub(crate) fn line_clock_after(&self, clock: Instant, now: Instant, len: usize) -> Instant {
        crate::sender::line_clock_after(self.sender.cfg(), clock, now, len)
    }

    /// The PSN and retransmission flag of the DATA packet the last
    /// [`Connection::poll_transmit`] wrote, if it wrote one (for the measurement
    /// tap: no header needs parsing).
    pub(crate) fn last_data_sent(&self) -> Option<(u32, bool)> {
        self.sender.built().and_then(|s| s.core.last_data)
    }

    /// Payload bytes left in place by [`Connection::poll_transmit`].
    pub(crate) fn payload(
        &self,
        first_psn: u64,
        offset: u64,
        len: u32,
    ) -> Option<crate::message::PayloadBytes<'_>> {
        self.sender.built()?.payload(first_psn, offset, len)
    }

    /// The next time the connection needs `handle_timeout` or `poll_transmit`.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let a = self.receiver.feedback_due();
        let b = self.sender.built().and_then(|s| s.poll_timeout());
        match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Runs the timers that are due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.run_timers(now);
    }

    /// Runs the timers that are due at `now`; false when none was (a wake-up
    /// for the send time alone), so that nothing changed.
    pub(crate) fn run_timers(&mut self, now: Instant) -> bool {
        match self.sender.built_mut() {
            Some(s) if s.timers_due(now) => {
                s.handle_timeout(now, &mut self.events);
                true
            }
            _ => false,
        }
    }

    /// Replaces the receive placement (see [`Endpoint::set_placement`](crate::Endpoint::set_placement)).
    pub fn set_placement(&mut self, placement: Box<dyn crate::placement::Placement>) {
        self.receiver.set_placement(placement);
    }

    /// The next application event.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Events are queued.
    pub(crate) fn has_events(&self) -> bool {
        !self.events.is_empty()
    }

    /// Per-path sender measurements (status, RTT, forward delay, inflight, counters).
    pub fn paths(&self) -> &Paths {
        &self.sender.get().core.paths
    }

    /// Sets the retransmission timer of a running connection
    /// (`FlowConfig::rto_min`, `rto_max` and `retry_limit`), as a verbs QP's
    /// `timeout` may change after it connected. Refused, changing nothing, where
    /// `FlowConfig::validate` would refuse them.
    pub fn set_rto_bounds(
        &mut self,
        min: crate::Duration,
        max: Option<crate::Duration>,
        retry_limit: u32,
    ) -> Result<(), crate::ConfigError> {
        let sender = self.sender.get_mut();
        let cfg = crate::FlowConfig {
            rto_min: min,
            rto_max: max,
            retry_limit,
            ..sender.core.cfg.clone()
        };
        cfg.validate()?;
        sender.core.cfg = cfg;
        crate::recovery::LossRecovery::set_rto_bounds(&mut sender.recovery, min, max, retry_limit);
        Ok(())
    }

    /// Sender counters.
    pub fn sender_stats(&self) -> &SenderStats {
        &self.sender.get().core.stats
    }

    /// The receiver's OOD outside the shared reorder buffer (directly placed
    /// payloads of the RC selective-repeat model; 0 otherwise).
    pub(crate) fn direct_ood(&self, rb: &SharedBuffer) -> u64 {
        self.receiver.direct_ood(rb)
    }

    /// The sender's spurious retransmissions so far (without building a sender
    /// that waits: it has none).
    pub(crate) fn spurious_retransmissions(&self) -> u64 {
        self.sender
            .built()
            .map_or(0, |s| s.core.stats.spurious_retransmissions)
    }

    /// Receiver counters and OOD/RBO distributions.
    pub fn receiver_stats(&self) -> &ReceiverStats {
        &self.receiver.stats
    }

    /// When the packet scheduler was switched on, if it was.
    pub fn scheduler_enabled_at(&self) -> Option<Instant> {
        self.sender.get().scheduler.enabled_at()
    }

    /// The transport this connection runs.
    pub fn transport(&self) -> crate::Transport {
        self.transport
    }

    /// The sender's congestion controller (windows per path; ARCC's state through
    /// [`AnyCc::arcc`]).
    pub fn congestion_control(&self) -> &AnyCc {
        &self.sender.get().cc
    }

    /// The packet scheduler's current skip of `path` (0 when it has none).
    pub fn skip(&self, path: usize) -> u32 {
        self.sender.get().scheduler.skip(path)
    }

    /// Flow pacing rate (Rondo: sum_p W_p / T_p) in packets per microsecond.
    pub fn pacing_rate(&self) -> f64 {
        self.sender.get().pacing_rate()
    }

    /// Messages posted and not yet completely acknowledged.
    pub fn outstanding_messages(&self) -> usize {
        self.sender.built().map_or(0, |s| s.outstanding_messages())
    }

    /// Clears the receiver's OOD and RBO distributions (end of a warm-up period).
    pub fn clear_distributions(&mut self) {
        self.receiver.stats.ood = Default::default();
        self.receiver.stats.rbo = Default::default();
    }

    /// True once the connection has failed (`Event::Error` was emitted).
    pub fn is_failed(&self) -> bool {
        self.sender.built().is_some_and(|s| s.core.failed.is_some())
    }
}

/// A connection's final counters, returned when it is closed
/// ([`Endpoint::close`](crate::Endpoint::close)).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnectionSummary {
    /// Sender counters.
    pub sender: SenderStats,
    /// Receiver counters and OOD/RBO distributions.
    pub receiver: ReceiverStats,
    /// Messages posted and never completely acknowledged.
    pub outstanding_messages: usize,
}

/// What stays of a closed connection: its flow ids and token, and the receiver's
/// tombstone, which answers retransmitted duplicates and probes as the receiver
/// would have (so that a peer whose last ACKs were lost still completes).
#[derive(Debug)]
pub(crate) struct Closed {
    local_flow: u32,
    remote_flow: u32,
    token: Option<u64>,
    rx: RxTombstone,
}

impl Connection {
    /// Ends the connection: its state is freed (the reorder buffer's flow too),
    /// leaving a [`Closed`] tombstone and the final counters.
    pub(crate) fn close(self, rb: &mut SharedBuffer) -> (Closed, ConnectionSummary) {
        let outstanding_messages = self.outstanding_messages();
        let (rx, receiver) = self.receiver.close(rb);
        let closed = Closed {
            local_flow: self.local_flow,
            remote_flow: self.remote_flow,
            token: self.token,
            rx,
        };
        let summary = ConnectionSummary {
            sender: self
                .sender
                .built()
                .map(|s| s.core.stats)
                .unwrap_or_default(),
            receiver,
            outstanding_messages,
        };
        (closed, summary)
    }
}

impl Closed {
    /// This side's flow id.
    pub(crate) fn local_flow(&self) -> u32 {
        self.local_flow
    }

    /// The connection token datagrams for this flow must carry, if any.
    pub(crate) fn token(&self) -> Option<u64> {
        self.token
    }

    /// A datagram for the closed flow; false when it was dropped.
    pub(crate) fn handle_repr(&mut self, now: Instant, repr: &Repr, ce: bool) -> bool {
        self.rx.on_repr(now, repr, ce, self.remote_flow)
    }

    /// The next queued answer.
    pub(crate) fn poll_transmit<B: TxBuffer + ?Sized>(
        &mut self,
        now: Instant,
        tx: &mut B,
    ) -> Option<Transmit> {
        let t = self.rx.poll_feedback(now, tx)?;
        Some(Transmit {
            flow: self.local_flow,
            ..t
        })
    }

    /// When the next answer is due.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        self.rx.feedback_due()
    }
}

#[cfg(test)]
mod tests {
    use crate::cc::CongestionControl;
    use crate::message::ExternalBytes;
    use crate::time::Duration;
    use crate::{
        BufferConfig, ConnectionHandle, Endpoint, FlowConfig, Host, Instant, Message, SharedBuffer,
        Transport,
    };
    use std::collections::VecDeque;
    use std::sync::Arc;

    /// Message bytes whose `Debug` is short (the test compares a sender's
    /// `Debug` before and after).
    #[derive(Debug)]
    struct Pattern(usize);

    impl ExternalBytes for Pattern {
        fn len(&self) -> usize {
            self.0
        }

        fn read(&self, offset: usize, dst: &mut [u8]) {
            for (i, b) in dst.iter_mut().enumerate() {
                *b = ((offset + i) % 251) as u8;
            }
        }

        fn addr(&self, _offset: usize, _len: usize) -> Option<usize> {
            None
        }
    }

    /// Runs a transfer of `transport` over two endpoints joined by a wire of 3-7
    /// us each way that drops every `drop_every`th datagram; at every step where the
    /// sender's timers are not due (`Sender::timers_due`), runs them anyway and
    /// checks that nothing changed. Returns how many such steps there were.
    fn send_only_wake_ups(transport: Transport, drop_every: u64) -> usize {
        let cfg = FlowConfig {
            transport,
            paths: 4,
            line_rate_bps: 25_000_000_000,
            ..FlowConfig::default()
        };
        let buffer = || SharedBuffer::in_heap(BufferConfig::default()).expect("buffer");
        let (mut a, mut b) = (Endpoint::new(buffer()), Endpoint::new(buffer()));
        let mut now = Instant::from_us(1);
        let tx: ConnectionHandle = a.connect(now, 1, 2, &cfg).expect("connect");
        b.connect(now, 2, 1, &cfg).expect("connect");
        for id in 0..8 {
            let msg = Message::new(Vec::new(), Arc::new(Pattern(60_000)));
            a.post(tx, now, id, msg).expect("post");
        }
        // (arrival, to b, path, bytes)
        let mut wire: VecDeque<(Instant, bool, u16, Vec<u8>)> = VecDeque::new();
        let mut buf = vec![0u8; cfg.mtu];
        let (mut sent, mut checked) = (0u64, 0);
        let end = now + Duration::from_ms(500);
        while now < end && a.connection(tx).outstanding_messages() > 0 {
            while wire.front().is_some_and(|d| d.0 <= now) {
                let (_, to_b, path, bytes) = wire.pop_front().expect("front");
                let ep = if to_b { &mut b } else { &mut a };
                ep.handle_datagram(now, path, &bytes, false);
            }
            // At every step, and at times after it (between the step and the
            // next, nothing changes the sender): whenever its timers are not due,
            // running them changes nothing.
            if let Some(s) = a.connection_mut(tx).sender.built_mut() {
                // The step, a little later, and the moments where state that
                // `handle_timeout` tidies is just due or just not.
                let edges = [
                    s.cc.probing_until().filter(|&t| t != Instant::MAX),
                    s.core.inflight_expiry,
                ];
                let later = [0, 20].map(|us| now + Duration::from_us(us));
                let at_edges = edges
                    .into_iter()
                    .flatten()
                    .flat_map(|t| [Instant::from_ps(t.as_ps().saturating_sub(1)), t]);
                for at in later.into_iter().chain(at_edges).filter(|&t| t >= now) {
                    if !s.timers_due(at) {
                        let before = format!("{s:?}");
                        let mut events = VecDeque::new();
                        s.handle_timeout(at, &mut events);
                        let after = format!("{s:?}");
                        assert_eq!(after, before, "{} at {at:?}", transport.name());
                        assert!(events.is_empty());
                        checked += 1;
                    }
                }
            }
            for (ep, to_b) in [(&mut a, true), (&mut b, false)] {
                if ep.poll_timeout().is_some_and(|t| t <= now) {
                    ep.handle_timeout(now);
                }
                while let Some(t) = ep.poll_transmit(now, &mut buf[..]) {
                    sent += 1;
                    if sent % drop_every != 0 {
                        // 3-7 us: RTT samples move, datagrams overtake.
                        let at = now + Duration::from_us(3 + sent * 7 % 5);
                        let i = wire.partition_point(|d| d.0 <= at);
                        wire.insert(i, (at, to_b, t.path, buf[..t.len].to_vec()));
                    }
                }
                while ep.poll_event(ConnectionHandle(0)).is_some() {}
            }
            let next = [
                wire.front().map(|d| d.0),
                a.poll_timeout(),
                b.poll_timeout(),
            ]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(end);
            now = next.max(now + Duration::from_ns(1));
        }
        assert_eq!(
            a.connection(tx).outstanding_messages(),
            0,
            "{} did not finish",
            transport.name()
        );
        checked
    }

    /// The endpoint skips a connection's timers when only its send time came
    /// (`Sender::timers_due`): running them then must change nothing.
    #[test]
    fn a_wake_up_for_the_send_time_alone_changes_nothing() {
        let mut paced = 0;
        for transport in Transport::all() {
            // Without loss and with it (acknowledged packets still in flight).
            paced += send_only_wake_ups(transport, u64::MAX);
            paced += send_only_wake_ups(transport, 11);
        }
        assert!(paced > 100, "{paced} send-only wake-ups");
    }
}
