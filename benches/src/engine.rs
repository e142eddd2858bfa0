//! The engine alone: a sending and a receiving [`Endpoint`] with one connection,
//! joined by nothing but a wire in each direction (a FIFO: serialisation at the
//! line rate plus a fixed propagation delay, no switch, no queue limit, no event
//! heap). Each step delivers what has arrived, runs the timers that are due and
//! polls both endpoints for what they send, then jumps to the next arrival or
//! deadline. What a step costs is the engine's work for the packets of that step:
//! the sender's `poll_transmit`, the receiver's handling of the DATA and its ACK,
//! the sender's handling of the ACK, and their timers.
//!
//! Messages are sent from one shared body (no copy of the message per post) and
//! received into one reused buffer (no allocation per message), as a NIC sends
//! from and receives into registered memory; every payload is still copied into
//! its datagram and out of it. After a warm-up the loop allocates nothing of its
//! own (datagram buffers are recycled), so a counting allocator around it sees
//! the engine's allocations only.

use rondo_proto::placement::Placement;
use rondo_proto::{
    BufferConfig, ConnectionHandle, Duration, Endpoint, Event, ExternalBytes, FlowConfig, Host,
    Instant, Message, SharedBuffer,
};
use std::collections::VecDeque;
use std::sync::Arc;

/// Line rate of each direction's wire (bits per second).
const LINE_BPS: u64 = 100_000_000_000;
/// One-way propagation delay of the wire.
const ONE_WAY: Duration = Duration::from_us(2);
/// Messages kept posted, so that the pipe never drains between two of them.
const OUTSTANDING: u64 = 2;

/// Message bytes shared by every message: a fixed pattern.
#[derive(Debug)]
struct Body(Vec<u8>);

impl ExternalBytes for Body {
    fn len(&self) -> usize {
        self.0.len()
    }

    fn read(&self, offset: usize, dst: &mut [u8]) {
        dst.copy_from_slice(&self.0[offset..offset + dst.len()]);
    }

    fn addr(&self, _offset: usize, _len: usize) -> Option<usize> {
        None
    }
}

/// Receives every message into the same buffer (its bytes are not handed out:
/// `Event::Received` carries none).
#[derive(Debug)]
struct Reused(Vec<u8>);

impl Placement for Reused {
    fn begin(&mut self, _msg_id: u64, msg_len: u64) -> bool {
        msg_len <= self.0.len() as u64
    }

    fn target(&mut self, offset: u64, len: usize) -> Option<&mut [u8]> {
        let start = usize::try_from(offset).ok()?;
        self.0.get_mut(start..start.checked_add(len)?)
    }

    fn place(&mut self, offset: u64, payload: &[u8]) {
        if let Some(dst) = self.target(offset, payload.len()) {
            dst.copy_from_slice(payload);
        }
    }

    fn commit(&mut self, _offset: u64, _len: usize) {}

    fn finish(&mut self) -> Vec<u8> {
        Vec::new()
    }
}

/// A datagram on a wire.
#[derive(Debug)]
struct InFlight {
    at: Instant,
    path: u16,
    len: usize,
    bytes: Vec<u8>,
}

/// One direction: datagrams in arrival order, and when the wire is free again.
#[derive(Debug, Default)]
struct Wire {
    queue: VecDeque<InFlight>,
    free_at: Instant,
}

impl Wire {
    fn next_arrival(&self) -> Option<Instant> {
        self.queue.front().map(|d| d.at)
    }
}

/// Two endpoints, one connection, a long transfer of equal messages.
#[derive(Debug)]
pub struct EnginePair {
    sender: Endpoint,
    receiver: Endpoint,
    tx: ConnectionHandle,
    rx: ConnectionHandle,
    now: Instant,
    to_receiver: Wire,
    to_sender: Wire,
    /// Datagram buffers not on a wire.
    spare: Vec<Vec<u8>>,
    /// The transmit buffer (one MTU).
    buf: Vec<u8>,
    body: Arc<Body>,
    mtu: usize,
    /// Payload bytes per DATA packet.
    payload: usize,
    posted: u64,
    completed: u64,
    received: u64,
}

impl EnginePair {
    /// A pair whose connection runs over `paths` paths with `mtu`-byte datagrams
    /// (Rondo's defaults otherwise) and sends `message` bytes per message; two
    /// messages are posted at once.
    pub fn new(paths: u16, mtu: usize, message: usize) -> EnginePair {
        let cfg = FlowConfig {
            paths,
            mtu,
            line_rate_bps: LINE_BPS,
            ..FlowConfig::default()
        };
        let buffer = || {
            SharedBuffer::in_heap(BufferConfig {
                slot_size: mtu,
                capacity_bytes: 1024 * mtu,
                ..BufferConfig::default()
            })
            .expect("reorder buffer")
        };
        let (mut sender, mut receiver) = (Endpoint::new(buffer()), Endpoint::new(buffer()));
        let now = Instant::from_us(1);
        let tx = sender.connect(now, 1, 2, &cfg).expect("sender connection");
        let rx = receiver
            .connect(now, 2, 1, &cfg)
            .expect("receiver connection");
        receiver.set_placement(rx, Box::new(Reused(vec![0; message])));
        let body = Arc::new(Body((0..message).map(|i| (i % 251) as u8).collect()));
        let mut pair = EnginePair {
            sender,
            receiver,
            tx,
            rx,
            now,
            to_receiver: Wire::default(),
            to_sender: Wire::default(),
            spare: Vec::new(),
            buf: vec![0; mtu],
            body,
            mtu,
            payload: cfg.payload_per_packet(),
            posted: 0,
            completed: 0,
            received: 0,
        };
        for _ in 0..OUTSTANDING {
            pair.post();
        }
        pair
    }

    fn post(&mut self) {
        let msg = Message::new(Vec::new(), self.body.clone());
        self.sender
            .post(self.tx, self.now, self.posted, msg)
            .expect("post");
        self.posted += 1;
    }

    /// Runs until `n` more messages are acknowledged (each completed one is
    /// replaced by a new one).
    pub fn run_messages(&mut self, n: u64) {
        let target = self.completed + n;
        while self.completed < target {
            self.step();
        }
    }

    /// Data packets the sender has sent (retransmissions included).
    pub fn data_packets_sent(&self) -> u64 {
        self.sender
            .connection(self.tx)
            .sender_stats()
            .data_packets_sent
    }

    /// Retransmissions so far (none on these lossless wires).
    pub fn retransmissions(&self) -> u64 {
        self.sender
            .connection(self.tx)
            .sender_stats()
            .retransmissions
    }

    /// Messages acknowledged and messages received so far.
    pub fn messages(&self) -> (u64, u64) {
        (self.completed, self.received)
    }

    /// Data packets per message.
    pub fn packets_per_message(&self) -> u64 {
        (self.body.len() as u64).div_ceil(self.payload as u64)
    }

    /// One instant: deliveries, timers, transmissions, events; then time moves to
    /// the next arrival or deadline.
    fn step(&mut self) {
        let now = self.now;
        while let Some(d) = self.to_receiver.queue.front() {
            if d.at > now {
                break;
            }
            let d = self.to_receiver.queue.pop_front().expect("front");
            self.receiver
                .handle_datagram(now, d.path, &d.bytes[..d.len], false);
            self.spare.push(d.bytes);
        }
        while let Some(d) = self.to_sender.queue.front() {
            if d.at > now {
                break;
            }
            let d = self.to_sender.queue.pop_front().expect("front");
            self.sender
                .handle_datagram(now, d.path, &d.bytes[..d.len], false);
            self.spare.push(d.bytes);
        }
        if self.sender.poll_timeout().is_some_and(|t| t <= now) {
            self.sender.handle_timeout(now);
        }
        if self.receiver.poll_timeout().is_some_and(|t| t <= now) {
            self.receiver.handle_timeout(now);
        }
        while let Some(t) = self.sender.poll_transmit(now, &mut self.buf) {
            let bytes = self.copy_out(t.len);
            send(&mut self.to_receiver, now, t.path, t.len, bytes);
        }
        while let Some(t) = self.receiver.poll_transmit(now, &mut self.buf) {
            let bytes = self.copy_out(t.len);
            send(&mut self.to_sender, now, t.path, t.len, bytes);
        }
        while let Some(e) = self.sender.poll_event(self.tx) {
            if let Event::SendComplete { .. } = e {
                self.completed += 1;
                self.post();
            }
        }
        while let Some(e) = self.receiver.poll_event(self.rx) {
            if let Event::Received { .. } = e {
                self.received += 1;
            }
        }
        let next = [
            self.to_receiver.next_arrival(),
            self.to_sender.next_arrival(),
            self.sender.poll_timeout(),
            self.receiver.poll_timeout(),
        ]
        .into_iter()
        .flatten()
        .min()
        .expect("a transfer in progress has something pending");
        // A deadline of "now" that polling did not satisfy waits a nanosecond.
        self.now = next.max(now + Duration::from_ns(1));
    }

    /// The first `len` bytes of the transmit buffer in a recycled buffer.
    fn copy_out(&mut self, len: usize) -> Vec<u8> {
        let mut bytes = self.spare.pop().unwrap_or_else(|| vec![0; self.mtu]);
        bytes[..len].copy_from_slice(&self.buf[..len]);
        bytes
    }
}

/// Puts a datagram on `wire` at `now`: it arrives after the wire serialised it
/// (behind what it is still sending) and the propagation delay.
fn send(wire: &mut Wire, now: Instant, path: u16, len: usize, bytes: Vec<u8>) {
    let done = wire.free_at.max(now) + Duration::serialisation(len as u64, LINE_BPS);
    wire.free_at = done;
    wire.queue.push_back(InFlight {
        at: done + ONE_WAY,
        path,
        len,
        bytes,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_transfer_completes_in_order_without_retransmissions() {
        for paths in [4, 64] {
            let mut pair = EnginePair::new(paths, 4096, 256 * 1024);
            pair.run_messages(20);
            let (completed, received) = pair.messages();
            assert_eq!(completed, 20);
            assert!(received >= 20, "{received} received");
            assert_eq!(pair.retransmissions(), 0);
            let per_message = pair.packets_per_message();
            assert!((64..=70).contains(&per_message), "{per_message}");
            assert!(pair.data_packets_sent() >= 20 * per_message);
        }
    }
}
