//! The driver loop of the verbs datapath over any [`Nic`]: what to post, what a
//! completion means, and handing datagrams to a [`Host`]. The real NIC is
//! `datapath::IbvNic`; tests drive the same loop over an in-memory NIC.

use super::address::ah_index;
use super::error::VerbsError;
use super::grh::{self, GRH_LEN};
use super::rx_ring::RxRing;
use super::send::{SendQueue, SendWr};
use crate::time::Instant;
use crate::transmit::Host;
use crate::udp::{Clock, PollOutcome};
use std::collections::HashMap;
use std::time::Duration;

/// One send WR as the NIC posts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SendDesc {
    /// The planned WR (id, slot, length, flags).
    pub wr: SendWr,
    /// Index of its AH in the NIC's AH table.
    pub ah: usize,
    /// Remote QP number and qkey.
    pub remote_qpn: u32,
    pub remote_qkey: u32,
}

/// One work completion, reduced to what the driver reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Completion {
    pub wr_id: u64,
    pub ok: bool,
    /// Bytes received, GRH included.
    pub byte_len: usize,
    /// The GRH was on the wire (its traffic class is meaningful).
    pub grh: bool,
}

/// What the driver needs of a NIC: buffers, AHs, posts and polls.
pub(crate) trait Nic {
    /// The send arena: `depth` slots of `slot_len` bytes.
    fn send_mem(&mut self) -> &mut [u8];
    /// The receive arena: slots of `GRH_LEN + slot_len` bytes.
    fn recv_mem(&self) -> &[u8];
    /// Posts one chain (one doorbell).
    fn post_send(&mut self, chain: &[SendDesc], slot_len: usize) -> Result<(), VerbsError>;
    /// Posts receives into `slots` (one chain).
    fn post_recv(&mut self, slots: &[usize], stride: usize) -> Result<(), VerbsError>;
    /// Up to `out.len()` send completions.
    fn poll_send(&mut self, out: &mut [Completion]) -> Result<usize, VerbsError>;
    /// Up to `out.len()` receive completions.
    fn poll_recv(&mut self, out: &mut [Completion]) -> Result<usize, VerbsError>;
}

/// Counters of a [`VerbsDatapath`](super::VerbsDatapath).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VerbsStats {
    /// Datagrams posted.
    pub datagrams_out: u64,
    /// Bytes posted.
    pub bytes_out: u64,
    /// `ibv_post_send` calls (doorbells).
    pub doorbells: u64,
    /// Inline sends.
    pub inline: u64,
    /// Signaled sends.
    pub signaled: u64,
    /// Datagrams received and handed to the host.
    pub datagrams_in: u64,
    /// Their bytes (GRH excluded).
    pub bytes_in: u64,
    /// Received with ECN CE.
    pub ce_marks: u64,
    /// Completions with an error status (send or receive).
    pub completion_errors: u64,
    /// Receives that did not fit a GRH and a buffer, or named no posted slot.
    pub malformed: u64,
    /// Transmits with no peer or path.
    pub unroutable: u64,
    /// `ibv_post_recv` chains.
    pub recv_batches: u64,
}

/// Where a peer's datagrams go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Route {
    pub qpn: u32,
    pub qkey: u32,
    /// Index of the peer's first AH in the NIC's table (path 0, control).
    pub ah_base: usize,
    /// AHs the peer has (paths x priorities).
    pub ahs: usize,
}

/// The driver state over a NIC.
#[derive(Debug)]
pub(crate) struct Driver<N> {
    pub nic: N,
    pub routes: HashMap<u32, Route>,
    /// Largest datagram now (the smallest MTU of this side and its peers).
    pub mtu: usize,
    /// Bytes of a send slot, and of a receive slot after its GRH.
    pub slot_len: usize,
    sq: SendQueue,
    rx: RxRing,
    wc: Vec<Completion>,
    planned: Vec<SendWr>,
    planned_route: Vec<Route>,
    chain: Vec<SendDesc>,
    rx_batch: Vec<usize>,
    stats: VerbsStats,
}

impl<N: Nic> Driver<N> {
    /// A driver over `nic`; posts the first receives.
    pub fn new(nic: N, mtu: usize, sq: SendQueue, rx: RxRing) -> Result<Driver<N>, VerbsError> {
        let depth = sq.config().depth;
        let mut d = Driver {
            nic,
            routes: HashMap::new(),
            mtu,
            slot_len: mtu,
            wc: vec![Completion::default(); 64],
            planned: Vec::with_capacity(depth),
            planned_route: Vec::with_capacity(depth),
            chain: Vec::with_capacity(sq.config().max_chain),
            rx_batch: Vec::new(),
            sq,
            rx,
            stats: VerbsStats::default(),
        };
        d.repost()?;
        Ok(d)
    }

    /// Counters so far.
    pub fn stats(&self) -> VerbsStats {
        let c = self.sq.counters();
        VerbsStats {
            doorbells: c.doorbells,
            inline: c.inline,
            signaled: c.signaled,
            ..self.stats
        }
    }

    /// Send WRs not yet retired by a completion.
    #[cfg(test)]
    pub fn outstanding_sends(&self) -> usize {
        self.sq.outstanding()
    }

    /// Receives posted now.
    #[cfg(test)]
    pub fn posted_receives(&self) -> usize {
        self.rx.posted()
    }

    /// One round of the loop; see [`VerbsDatapath::poll`](super::VerbsDatapath::poll).
    pub fn poll<H: Host>(
        &mut self,
        host: &mut H,
        clock: &Clock,
        max_wait: Duration,
    ) -> Result<PollOutcome, VerbsError> {
        let mut out = PollOutcome::default();
        let now = clock.now();
        run_timers(host, now);
        out.sent += self.flush(host, now)?;
        let wait = match host.poll_timeout() {
            Some(t) => clock.until(t).min(max_wait),
            None => max_wait,
        };
        let wait = if out.sent > 0 { Duration::ZERO } else { wait };
        let start = std::time::Instant::now();
        loop {
            self.reap_sends()?;
            let n = self.receive(host, clock)?;
            out.received += n;
            if n > 0 || start.elapsed() >= wait {
                break;
            }
            std::hint::spin_loop();
        }
        self.repost()?;
        let now = clock.now();
        run_timers(host, now);
        out.sent += self.flush(host, now)?;
        Ok(out)
    }

    /// Polls the host for transmits into free send slots and posts them in
    /// chains, one doorbell per chain.
    fn flush<H: Host>(&mut self, host: &mut H, now: Instant) -> Result<usize, VerbsError> {
        self.planned.clear();
        self.planned_route.clear();
        while let Some(slot) = self.sq.next_slot() {
            let base = slot * self.slot_len;
            let buf = &mut self.nic.send_mem()[base..base + self.mtu];
            let Some(t) = host.poll_transmit(now, buf) else {
                break;
            };
            let route = match self.routes.get(&t.flow) {
                Some(r) => Some(*r),
                None if self.routes.len() == 1 => self.routes.values().next().copied(),
                None => None,
            };
            let ah = ah_index(t.path, t.priority);
            let Some(route) = route.filter(|r| ah < r.ahs && t.len <= self.mtu) else {
                self.stats.unroutable += 1;
                continue;
            };
            if let Some(wr) = self.sq.plan(t.len, ah, route.qpn) {
                self.stats.datagrams_out += 1;
                self.stats.bytes_out += t.len as u64;
                self.planned.push(wr);
                self.planned_route.push(route);
            }
        }
        let n = self.planned.len();
        let planned = std::mem::take(&mut self.planned);
        let mut routes = self.planned_route.iter();
        let mut result = Ok(());
        for chain in self.sq.chains(&planned) {
            self.chain.clear();
            for (wr, route) in chain.iter().zip(routes.by_ref()) {
                self.chain.push(SendDesc {
                    wr: *wr,
                    ah: route.ah_base + wr.ah,
                    remote_qpn: route.qpn,
                    remote_qkey: route.qkey,
                });
            }
            result = self.nic.post_send(&self.chain, self.slot_len);
            if result.is_err() {
                break;
            }
        }
        self.planned = planned;
        result.map(|()| n)
    }

    /// Retires send WRs whose signaled (or failed) completions arrived.
    fn reap_sends(&mut self) -> Result<(), VerbsError> {
        loop {
            let n = self.nic.poll_send(&mut self.wc)?;
            for wc in &self.wc[..n] {
                self.stats.completion_errors += u64::from(!wc.ok);
                // A failed WR also ends the WRs before it; an unknown id is a
                // completion of another QP's and changes nothing.
                let _ = self.sq.complete(wc.wr_id);
            }
            if n < self.wc.len() {
                return Ok(());
            }
        }
    }

    /// Hands every completed receive to the host; returns how many.
    fn receive<H: Host>(&mut self, host: &mut H, clock: &Clock) -> Result<usize, VerbsError> {
        let n = self.nic.poll_recv(&mut self.wc)?;
        if n == 0 {
            return Ok(0);
        }
        let now = clock.now(); // one arrival time for what one poll receives
        let stride = GRH_LEN + self.slot_len;
        let mut delivered = 0;
        for wc in &self.wc[..n] {
            let slot = usize::try_from(wc.wr_id).unwrap_or(usize::MAX);
            if self.rx.complete(slot).is_err() {
                self.stats.malformed += 1;
                continue;
            }
            if !wc.ok {
                self.stats.completion_errors += 1;
                continue;
            }
            let buf = &self.nic.recv_mem()[slot * stride..(slot + 1) * stride];
            let Ok(datagram) = grh::strip_grh(buf, wc.byte_len) else {
                self.stats.malformed += 1;
                continue;
            };
            let ce = wc.grh && grh::ecn_ce(&buf[..GRH_LEN]);
            self.stats.ce_marks += u64::from(ce);
            self.stats.datagrams_in += 1;
            self.stats.bytes_in += datagram.len() as u64;
            // Path 0: the Rondo header's path id is authoritative.
            host.handle_datagram(now, 0, datagram, ce);
            delivered += 1;
        }
        Ok(delivered)
    }

    /// Posts the receive slots that are due, in one chain per batch.
    fn repost(&mut self) -> Result<(), VerbsError> {
        let stride = GRH_LEN + self.slot_len;
        let mut batch = std::mem::take(&mut self.rx_batch);
        let mut result = Ok(());
        while self.rx.take_batch(&mut batch) > 0 {
            self.stats.recv_batches += 1;
            result = self.nic.post_recv(&batch, stride);
            if result.is_err() {
                break;
            }
        }
        self.rx_batch = batch;
        result
    }
}

fn run_timers<H: Host>(host: &mut H, now: Instant) {
    if host.poll_timeout().is_some_and(|t| t <= now) {
        host.handle_timeout(now);
    }
}

#[cfg(test)]
#[path = "driver_tests.rs"]
mod tests;
