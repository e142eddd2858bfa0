//! A path's send queue: datagram heads packed back to back in one buffer (whole
//! datagrams, or headers whose payload stays in the host's memory), grouped into
//! GSO trains when they are sent.

use super::sys::OutMsg;
use rondo_proto::message::PayloadBytes;
use rondo_proto::transmit::PayloadRef;
use std::net::SocketAddr;

/// Most datagrams in one GSO train (the kernel's `UDP_MAX_SEGMENTS`).
const MAX_GSO_SEGMENTS: usize = 64;
/// Most bytes in one GSO train (a UDP length field, less IP and UDP headers).
const MAX_GSO_BYTES: usize = 65_000;
/// iovecs per queued datagram: its head in the queue, its payload in the host.
pub(super) const IOVS_PER_DATAGRAM: usize = 2;

#[derive(Clone, Copy, Debug)]
struct Item {
    dest: SocketAddr,
    tos: Option<u8>,
    /// Where the head starts in `buf`.
    start: usize,
    /// Bytes of the head in `buf`.
    head: usize,
    /// The payload in the host's memory, if not in `buf`.
    payload: Option<PayloadRef>,
}

impl Item {
    /// The whole datagram's length.
    fn len(&self) -> usize {
        self.head + self.payload.map_or(0, |p| p.len as usize)
    }
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
        self.tail_mut(datagram.len()).copy_from_slice(datagram);
        self.commit_tail(dest, tos, datagram.len(), None);
    }

    /// The free space after the queued bytes, `len` bytes of it (the caller checked
    /// `has_room(len)`), for a datagram to be written in place.
    pub(super) fn tail_mut(&mut self, len: usize) -> &mut [u8] {
        &mut self.buf[self.used..self.used + len]
    }

    /// Queues the `head` bytes written at `tail_mut`, followed on the wire by
    /// `payload` from the host's memory when there is one.
    pub(super) fn commit_tail(
        &mut self,
        dest: SocketAddr,
        tos: Option<u8>,
        head: usize,
        payload: Option<PayloadRef>,
    ) {
        self.items.push(Item {
            dest,
            tos,
            start: self.used,
            head,
            payload,
        });
        self.used += head;
    }

    pub(super) fn clear(&mut self) {
        self.used = 0;
        self.items.clear();
    }

    /// Slice `j` of the queue, two per datagram: its head, then its payload
    /// (`payload` resolves a [`PayloadRef`]; empty when the datagram is whole in the
    /// queue). The iovec ranges of [`TxQueue::build_from`] count in these slices.
    pub(super) fn slice<'a>(
        &'a self,
        j: usize,
        payload: &dyn Fn(PayloadRef) -> PayloadBytes<'a>,
    ) -> PayloadBytes<'a> {
        let Some(item) = self.items.get(j / IOVS_PER_DATAGRAM) else {
            return PayloadBytes::EMPTY;
        };
        if j % IOVS_PER_DATAGRAM == 0 {
            PayloadBytes::Slice(&self.buf[item.start..item.start + item.head])
        } else {
            // The engine keeps a message until it is acknowledged, and nothing is
            // acknowledged while a queue is being sent, so the payload is there.
            item.payload.map_or(PayloadBytes::EMPTY, payload)
        }
    }

    /// Fills `out` with the messages that send the queue from its `skip`-th
    /// datagram on. Consecutive datagrams to one destination with one TOS and one
    /// size of at most `max_segment` bytes (the last of a train may be shorter)
    /// form one GSO train; `max_segment` 0: no trains.
    pub(super) fn build_from(&self, out: &mut Vec<OutMsg>, max_segment: usize, skip: usize) {
        out.clear();
        for (k, item) in self.items.iter().enumerate().skip(skip) {
            let len = item.len();
            if let Some(last) = out.last_mut() {
                let seg = if last.segment > 0 {
                    usize::from(last.segment)
                } else {
                    last.len
                };
                let whole = last.len % seg == 0; // no short segment closed the train yet
                if whole
                    && last.dest == item.dest
                    && last.tos == item.tos
                    && len <= seg
                    && seg <= max_segment.min(usize::from(u16::MAX))
                    && last.len / seg < MAX_GSO_SEGMENTS
                    && last.len + len <= MAX_GSO_BYTES
                {
                    last.segment = seg as u16;
                    last.len += len;
                    last.iov_count += IOVS_PER_DATAGRAM;
                    continue;
                }
            }
            out.push(OutMsg {
                dest: item.dest,
                iov_start: k * IOVS_PER_DATAGRAM,
                iov_count: IOVS_PER_DATAGRAM,
                len,
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
        q.build_from(&mut out, usize::from(u16::MAX), 0);
        // 3 x 100 + a short 40 close the first train; the next 100 starts another.
        assert_eq!(out.len(), 2);
        assert_eq!(
            (out[0].iov_start, out[0].len, out[0].segment),
            (0, 340, 100)
        );
        assert_eq!((out[0].iov_count, out[0].datagrams()), (8, 4));
        assert_eq!((out[1].iov_start, out[1].len, out[1].segment), (8, 100, 0));
        q.build_from(&mut out, 0, 0);
        assert_eq!(out.len(), 5);
        assert!(out.iter().all(|m| m.segment == 0));
    }

    #[test]
    fn trains_keep_to_the_segment_limit() {
        let mut q = TxQueue::new(8, 100);
        for len in [100, 100, 40, 40, 40] {
            q.push(addr(1), None, &vec![1; len]);
        }
        let mut out = Vec::new();
        q.build_from(&mut out, 100, 0);
        assert_eq!(
            out.len(),
            2,
            "100 + 100 + 40 form one train, 40 + 40 another"
        );
        // A route refused segments of 100: those go one by one, shorter ones still
        // form trains.
        q.build_from(&mut out, 99, 0);
        let shape: Vec<(usize, u16)> = out.iter().map(|m| (m.len, m.segment)).collect();
        assert_eq!(shape, [(100, 0), (100, 0), (120, 40)]);
    }

    #[test]
    fn destination_tos_and_larger_datagrams_break_trains() {
        let mut q = TxQueue::new(4, 200);
        q.push(addr(1), None, &[0; 50]);
        q.push(addr(2), None, &[0; 50]);
        q.push(addr(2), Some(4), &[0; 50]);
        q.push(addr(2), Some(4), &[0; 60]);
        let mut out = Vec::new();
        q.build_from(&mut out, usize::from(u16::MAX), 0);
        assert_eq!(out.len(), 4);
        assert!(!q.has_room(1), "four datagrams fill a queue of four");
        q.build_from(&mut out, usize::from(u16::MAX), 2);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].iov_start, 4);
    }

    #[test]
    fn payloads_in_the_host_follow_their_heads() {
        let mut q = TxQueue::new(4, 100);
        let r = PayloadRef {
            len: 5,
            ..PayloadRef::default()
        };
        q.tail_mut(3).copy_from_slice(b"hdr");
        q.commit_tail(addr(1), None, 3, Some(r));
        q.push(addr(1), None, b"whole");
        let host = *b"12345";
        let slices: Vec<PayloadBytes<'_>> = (0..4)
            .map(|j| q.slice(j, &|_| PayloadBytes::Slice(&host[..])))
            .collect();
        let s = PayloadBytes::Slice;
        assert_eq!(slices, [s(b"hdr"), s(b"12345"), s(b"whole"), s(b"")]);
        let mut out = Vec::new();
        q.build_from(&mut out, usize::from(u16::MAX), 0);
        assert_eq!(
            (out.len(), out[0].len),
            (1, 13),
            "8 + 5: one train, short last"
        );
        assert_eq!(out[0].segment, 8);
    }
}
