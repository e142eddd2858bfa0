//! The receive side: one `recvmmsg` per path socket and round, datagrams handed
//! over merged across paths in PSN order.

use super::{is_ce, sys, UdpDatapath};
use std::io;
use std::os::fd::AsRawFd;

impl UdpDatapath {
    /// Receives the datagrams waiting on the path sockets that the last
    /// `wait_readable` found readable and hands each to `deliver(path, datagram,
    /// tos)`. Each round takes one `recvmmsg` batch from every readable socket and
    /// delivers the datagrams interleaved across paths, one per path in turn: the
    /// sender sprays consecutive PSNs over the paths, so this keeps the arrival
    /// order close to PSN order instead of handing over one path's batch at a time.
    pub(super) fn deliver_ready(
        &mut self,
        mut deliver: impl FnMut(u16, &[u8], Option<u8>),
    ) -> io::Result<usize> {
        let mut total = 0;
        for round in 0..4 {
            let mut more = false;
            for path in 0..self.sockets.len() {
                self.rx_got[path] = 0;
                // The first round tries every socket, not only those ppoll found
                // readable: datagrams of the other paths that arrived since would
                // otherwise wait a whole poll and come out far behind their PSNs.
                if round > 0 && self.pollfds[path].revents == 0 {
                    continue;
                }
                let got = self.recv_path(path)?;
                if got < self.rx_per_path {
                    self.pollfds[path].revents = 0; // drained
                } else {
                    more = true;
                }
            }
            total += self.deliver_interleaved(&mut deliver);
            if !more {
                break;
            }
        }
        Ok(total)
    }

    /// One `recvmmsg` on `path`'s socket into its slots; returns the messages.
    fn recv_path(&mut self, path: usize) -> io::Result<usize> {
        let (pp, slot) = (self.rx_per_path, self.rx_slot);
        let buf = &mut self.rx_buf[path * pp * slot..(path + 1) * pp * slot];
        let msgs = &mut self.rx_msgs[path * pp..(path + 1) * pp];
        let fd = self.sockets[path].as_raw_fd();
        let got = match sys::recv(fd, &mut self.arrays, buf, slot, msgs) {
            Ok(got) => got,
            Err(e) => {
                self.stats.recv_errors += 1;
                return Err(e);
            }
        };
        if got > 0 {
            self.stats.recv_batches += 1;
        }
        for m in &msgs[..got] {
            if m.truncated {
                self.stats.truncated += 1;
            } else if m.segment > 0 && m.segment < m.len {
                self.stats.gro_receives += 1;
            }
        }
        self.rx_got[path] = got;
        Ok(got)
    }

    /// Hands the datagrams of this round to `deliver` in PSN order across paths: a
    /// merge of the per-path queues (each in sending order) by the PSN of DATA
    /// packets; other packets go first. The round arrived at one instant, so the
    /// order within it is the datapath's to choose, and PSN order spares the
    /// engine reorder-buffer copies (`placed_repaired`).
    fn deliver_interleaved(&mut self, deliver: &mut impl FnMut(u16, &[u8], Option<u8>)) -> usize {
        let (pp, slot) = (self.rx_per_path, self.rx_slot);
        let n = self.sockets.len();
        let stats = &mut self.stats;
        let mut delivered = 0;
        // Per path: (message index, byte offset in it).
        let mut cursor = [(0usize, 0usize); 64];
        for group in (0..n).step_by(cursor.len()) {
            let paths = group..(group + cursor.len()).min(n);
            cursor.fill((0, 0));
            loop {
                // The path whose next datagram sorts first.
                let mut best: Option<(usize, Option<u32>)> = None;
                for path in paths.clone() {
                    let (msg, off) = &mut cursor[path - group];
                    while *msg < self.rx_got[path] && self.rx_msgs[path * pp + *msg].truncated {
                        *msg += 1;
                    }
                    if *msg >= self.rx_got[path] {
                        continue;
                    }
                    let base = (path * pp + *msg) * slot + *off;
                    let key = data_psn(&self.rx_buf[base..base + 16.min(slot - *off)]);
                    let first = match (best, key) {
                        (None, _) => true,
                        (Some((_, Some(_))), None) => true,
                        (Some((_, Some(b))), Some(k)) => (k.wrapping_sub(b) as i32) < 0,
                        (Some((_, None)), _) => false,
                    };
                    if first {
                        best = Some((path, key));
                    }
                }
                let Some((path, _)) = best else {
                    break;
                };
                let (msg, off) = &mut cursor[path - group];
                let m = self.rx_msgs[path * pp + *msg];
                let base = (path * pp + *msg) * slot;
                let stride = if m.segment > 0 { m.segment } else { m.len };
                let end = (*off + stride.max(1)).min(m.len);
                let datagram = &self.rx_buf[base + *off..base + end];
                if end >= m.len {
                    (*msg, *off) = (*msg + 1, 0);
                } else {
                    *off = end;
                }
                stats.datagrams_in += 1;
                stats.bytes_in += datagram.len() as u64;
                if m.tos.is_some() {
                    stats.tos_seen += 1;
                }
                if is_ce(m.tos) {
                    stats.ecn_ce += 1;
                }
                delivered += 1;
                deliver(path as u16, datagram, m.tos);
            }
        }
        delivered
    }
}

/// The PSN of a Rondo DATA packet (version 1, type 1) from its first bytes, the
/// sort key of receive merging; `None` for anything else.
pub(super) fn data_psn(head: &[u8]) -> Option<u32> {
    match head {
        [1, 1, _, _, _, _, _, _, _, _, _, _, a, b, c, d, ..] => {
            Some(u32::from_be_bytes([*a, *b, *c, *d]))
        }
        _ => None,
    }
}
