//! A path's send queue: datagrams packed back to back in one buffer, grouped into
//! GSO trains when they are sent.

use super::sys::OutMsg;
use std::net::SocketAddr;

/// Most datagrams in one GSO train (the kernel's `UDP_MAX_SEGMENTS`).
const MAX_GSO_SEGMENTS: usize = 64;
/// Most bytes in one GSO train (a UDP length field, less IP and UDP headers).
const MAX_GSO_BYTES: usize = 65_000;

#[derive(Clone, Copy, Debug)]
struct Item {
    dest: SocketAddr,
    tos: Option<u8>,
    len: usize,
}

/// Datagrams queued for one path socket.
#[derive(Debug)]
pub(super) struct TxQueue {
    buf: Vec<u8>,
    used: usize,
    items: Vec<Item>,
    capacity: usize,
}

impl TxQueue {
    /// Room for `capacity` datagrams of up to `max_datagram` bytes.
    pub(super) fn new(capacity: usize, max_datagram: usize) -> TxQueue {
        TxQueue {
            buf: vec![0; capacity * max_datagram],
            used: 0,
            items: Vec::with_capacity(capacity),
            capacity,
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// True when one more datagram of `len` bytes fits.
    pub(super) fn has_room(&self, len: usize) -> bool {
        self.items.len() < self.capacity && self.used + len <= self.buf.len()
    }

    /// Queues a copy of `datagram` (the caller checked `has_room`).
    pub(super) fn push(&mut self, dest: SocketAddr, tos: Option<u8>, datagram: &[u8]) {
        let len = datagram.len();
        self.buf[self.used..self.used + len].copy_from_slice(datagram);
        self.used += len;
        self.items.push(Item { dest, tos, len });
    }

    /// The free space after the queued bytes, `len` bytes of it (the caller checked
    /// `has_room(len)`), for a datagram to be written in place.
    pub(super) fn tail_mut(&mut self, len: usize) -> &mut [u8] {
        &mut self.buf[self.used..self.used + len]
    }

    /// The first `len` bytes of the free space (a datagram written there).
    pub(super) fn tail(&self, len: usize) -> &[u8] {
        &self.buf[self.used..self.used + len]
    }

    /// Queues the `len` bytes written at `tail_mut`.
    pub(super) fn commit_tail(&mut self, dest: SocketAddr, tos: Option<u8>, len: usize) {
        self.used += len;
        self.items.push(Item { dest, tos, len });
    }

    /// The queued bytes.
    pub(super) fn bytes(&self) -> &[u8] {
        &self.buf[..self.used]
    }

    pub(super) fn clear(&mut self) {
        self.used = 0;
        self.items.clear();
    }

    /// Fills `out` with the messages that send the whole queue.
    pub(super) fn build(&self, out: &mut Vec<OutMsg>, gso: bool) {
        self.build_from(out, gso, 0);
    }

    /// Fills `out` with the messages that send the queue from byte `skip` on (a
    /// datagram boundary). With `gso`, consecutive datagrams to one destination with
    /// one TOS and one size (the last of a train may be shorter) form one train.
    pub(super) fn build_from(&self, out: &mut Vec<OutMsg>, gso: bool, skip: usize) {
        out.clear();
        let mut start = 0;
        for item in &self.items {
            let at = start;
            start += item.len;
            if at < skip {
                continue;
            }
            if let Some(last) = out.last_mut() {
                let seg = if last.segment > 0 {
                    usize::from(last.segment)
                } else {
                    last.len
                };
                let whole = last.len % seg == 0; // no short segment closed the train yet
                if gso
                    && whole
                    && last.dest == item.dest
                    && last.tos == item.tos
                    && item.len <= seg
                    && seg <= usize::from(u16::MAX)
                    && last.len / seg < MAX_GSO_SEGMENTS
                    && last.len + item.len <= MAX_GSO_BYTES
                {
                    last.segment = seg as u16;
                    last.len += item.len;
                    continue;
                }
            }
            out.push(OutMsg {
                dest: item.dest,
                start: at,
                len: item.len,
                segment: 0,
                tos: item.tos,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    #[test]
    fn equal_sizes_to_one_destination_form_one_train() {
        let mut q = TxQueue::new(8, 100);
        for len in [100, 100, 100, 40, 100] {
            q.push(addr(1), None, &vec![1; len]);
        }
        let mut out = Vec::new();
        q.build(&mut out, true);
        // 3 x 100 + a short 40 close the first train; the next 100 starts another.
        assert_eq!(out.len(), 2);
        assert_eq!((out[0].start, out[0].len, out[0].segment), (0, 340, 100));
        assert_eq!(out[0].datagrams(), 4);
        assert_eq!((out[1].start, out[1].len, out[1].segment), (340, 100, 0));
        q.build(&mut out, false);
        assert_eq!(out.len(), 5);
        assert!(out.iter().all(|m| m.segment == 0));
    }

    #[test]
    fn destination_tos_and_larger_datagrams_break_trains() {
        let mut q = TxQueue::new(4, 200);
        q.push(addr(1), None, &[0; 50]);
        q.push(addr(2), None, &[0; 50]);
        q.push(addr(2), Some(4), &[0; 50]);
        q.push(addr(2), Some(4), &[0; 60]);
        let mut out = Vec::new();
        q.build(&mut out, true);
        assert_eq!(out.len(), 4);
        assert!(!q.has_room(1), "four datagrams fill a queue of four");
        q.build_from(&mut out, true, 100);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].start, 100);
    }
}
