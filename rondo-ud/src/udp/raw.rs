//! `raw` mode for `rondo perf --transport raw-udp`: the same sockets and packet
//! size with no reliability, the ceiling the Rondo datapath is measured against.

use super::UdpDatapath;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

/// What [`UdpDatapath::raw_receive`] counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RawCount {
    /// Datagrams received.
    pub datagrams: u64,
    /// UDP payload bytes received.
    pub bytes: u64,
}

impl UdpDatapath {
    /// Blasts `count` datagrams of `len` bytes to `peer` (one address per path),
    /// round robin over the paths, in full batches, as fast as the sockets take
    /// them. Each datagram starts with its 8-byte sequence number. Returns the
    /// datagrams the kernel accepted.
    ///
    /// Errors (`InvalidInput`): `peer` does not have one address per path, or `len`
    /// is not 8 to `max_datagram` bytes.
    pub fn raw_blast(&mut self, peer: &[SocketAddr], len: usize, count: u64) -> io::Result<u64> {
        if peer.len() != self.sockets.len() || !(8..=self.scratch.len()).contains(&len) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "raw_blast needs one peer address per path and 8 to max_datagram bytes",
            ));
        }
        let before = self.stats.datagrams_out;
        let paths = self.sockets.len();
        let mut seq = 0u64;
        while seq < count {
            for (q, &dest) in self.tx.iter_mut().zip(peer) {
                while seq < count && q.has_room(len) {
                    self.scratch[..8].copy_from_slice(&seq.to_be_bytes());
                    q.push(dest, None, &self.scratch[..len]);
                    seq += 1;
                }
            }
            for path in 0..paths {
                self.send_queued(path, &|_| rondo_proto::PayloadBytes::EMPTY); // whole datagrams: no payload elsewhere
            }
        }
        Ok(self.stats.datagrams_out - before)
    }

    /// Counts the datagrams arriving on every path until none has arrived for
    /// `idle` (or, at the start, for `idle` either).
    pub fn raw_receive(&mut self, idle: Duration) -> io::Result<RawCount> {
        let mut count = RawCount::default();
        loop {
            if super::sys::wait_readable(&mut self.pollfds, idle)? == 0 {
                return Ok(count);
            }
            self.deliver_ready(|_, data, _| {
                count.datagrams += 1;
                count.bytes += data.len() as u64;
            })?;
        }
    }
}
