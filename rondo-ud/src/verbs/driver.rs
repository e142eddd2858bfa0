//! The driver loop of the verbs datapath over any [`Nic`]: what to post, what a
//! completion means, and handing datagrams to a [`Host`]. The real NIC is
//! `datapath::IbvNic`; tests drive the same loop over an in-memory NIC.

use super::address::ah_index;
use super::error::VerbsError;
use super::in_place::{self, LandingPlacement};
use super::rx_ring::RxRing;
use super::send::{SendQueue, SendWr};
use super::timestamp::{HostMap, NicClock, NicRttSample, RttMatcher, Unwrap};
use crate::datapath::{Clock, Datapath, InPlaceHost, PollOutcome};
use crate::HostProfile;
use reorder::landing::{FlowLanding, LandingCounters};
use rondo_proto::time::Instant;
use rondo_proto::transmit::{Host, Transmit};
use rondo_proto::wire::{self, Body};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[path = "driver_rx.rs"]
mod rx;

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
    /// Raw NIC completion timestamp (extended CQs with timestamps only).
    pub ts: Option<u64>,
}

/// One receive WR as the NIC posts it: ring slot `slot` (its first
/// `GRH_LEN + slot_len` bytes) whole, or, with a target, the first `header`
/// bytes of the slot then the target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RecvDesc {
    /// Ring slot (also the WR id).
    pub slot: usize,
    /// Payload target: (registration key, address, length); `None`: whole slot.
    pub target: Option<(u64, *mut u8, usize)>,
    /// With a target: bytes of the slot for the GRH and the Rondo header.
    pub header: usize,
}

/// What the driver needs of a NIC: buffers, AHs, posts and polls.
pub(crate) trait Nic {
    /// The send arena: `depth` slots of `slot_len` bytes.
    fn send_mem(&mut self) -> &mut [u8];
    /// The receive arena: slots of `GRH_LEN + slot_len` bytes.
    fn recv_mem(&self) -> &[u8];
    /// Posts one chain (one doorbell).
    fn post_send(&mut self, chain: &[SendDesc], slot_len: usize) -> Result<(), VerbsError>;
    /// Posts receives (one chain); ring slots are `stride` bytes apart.
    fn post_recv(&mut self, wrs: &[RecvDesc], stride: usize) -> Result<(), VerbsError>;
    /// Registers `len` bytes at `addr` (a landing buffer) under `key`.
    fn register(&mut self, key: u64, addr: *mut u8, len: usize) -> Result<(), VerbsError>;
    /// Deregisters what `register` registered under `key`.
    fn deregister(&mut self, key: u64);
    /// The NIC clock when completions carry timestamps.
    fn clock(&self) -> Option<NicClock>;
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
    /// Received datagrams handed to the host at their NIC completion time.
    pub rx_timestamps: u64,
    /// NIC-level RTT samples (DATA send completion to ACK receive completion).
    pub nic_rtt_samples: u64,
    /// Receive WRs posted with a payload target (in-place receive).
    pub in_place_posted: u64,
    /// Of their completions, datagrams that were the expected packet at its place,
    /// handed to the engine in place.
    pub in_place_hits: u64,
    /// Of their completions, other datagrams: copied out of the place and handed
    /// over like any datagram (the engine repairs them through its reorder buffer).
    pub in_place_repaired: u64,
    /// Landing buffers registered with the NIC.
    pub registrations: u64,
    /// In-place placement counters, summed over the flows.
    pub landing: LandingCounters,
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

/// A flow received in place.
#[derive(Debug)]
pub(crate) struct InPlaceFlow {
    /// Its local flow id.
    pub flow: u32,
    /// Bytes of its DATA header (token included).
    pub header_len: usize,
    pub state: Arc<Mutex<FlowLanding>>,
    /// Buffers registered with the NIC.
    registered: HashSet<u64>,
}

/// What a posted receive slot receives into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SlotUse {
    Ring,
    InPlace { flow: usize, buf: u64, offset: u64 },
}

/// NIC clock state: raw timestamps to NIC ns, NIC ns to host time.
#[derive(Debug)]
struct Stamps {
    unwrap: Unwrap,
    map: HostMap,
}

/// The driver state over a NIC.
#[derive(Debug)]
pub(crate) struct Driver<N> {
    /// First field: dropped first, so the QP is gone before the buffers it
    /// receives into.
    pub nic: N,
    flows: Vec<InPlaceFlow>,
    slot_use: Vec<SlotUse>,
    stamps: Option<Stamps>,
    rtt: RttMatcher,
    /// The latest time handed to the host (times handed to it never go back).
    last_now: Instant,
    scratch: Vec<u8>,
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
    /// Where the last transmit buffer starts in the send arena.
    tx_base: usize,
    chain: Vec<SendDesc>,
    rx_batch: Vec<usize>,
    stats: VerbsStats,
}

impl<N: Nic> Driver<N> {
    /// A driver over `nic`; posts the first receives.
    pub fn new(nic: N, mtu: usize, sq: SendQueue, rx: RxRing) -> Result<Driver<N>, VerbsError> {
        let depth = sq.config().depth;
        let stamps = nic.clock().map(|c| Stamps {
            unwrap: Unwrap::new(c),
            map: HostMap::default(),
        });
        let mut d = Driver {
            flows: Vec::new(),
            slot_use: vec![SlotUse::Ring; rx.slots()],
            stamps,
            rtt: RttMatcher::default(),
            last_now: Instant::ZERO,
            scratch: Vec::new(),
            nic,
            routes: HashMap::new(),
            mtu,
            slot_len: mtu,
            wc: vec![Completion::default(); 64],
            planned: Vec::with_capacity(depth),
            planned_route: Vec::with_capacity(depth),
            tx_base: 0,
            chain: Vec::with_capacity(sq.config().max_chain),
            rx_batch: Vec::new(),
            sq,
            rx,
            stats: VerbsStats::default(),
        };
        d.repost(false)?;
        Ok(d)
    }

    /// Counters so far.
    pub fn stats(&self) -> VerbsStats {
        let c = self.sq.counters();
        let mut landing = LandingCounters::default();
        for f in &self.flows {
            landing.add(&in_place::lock(&f.state).counters);
        }
        VerbsStats {
            doorbells: c.doorbells,
            inline: c.inline,
            signaled: c.signaled,
            nic_rtt_samples: self.rtt.made,
            landing,
            ..self.stats
        }
    }

    /// Moves the NIC-level RTT samples made since the last call into `out`.
    pub fn take_rtt_samples(&mut self, out: &mut Vec<NicRttSample>) {
        self.rtt.take(out);
    }

    /// Receives connection `h` of `ep` in place from now on; see
    /// [`VerbsDatapath::receive_in_place`](super::VerbsDatapath::receive_in_place).
    pub fn receive_in_place(
        &mut self,
        ep: &mut rondo_proto::Endpoint,
        h: rondo_proto::ConnectionHandle,
        cfg: &rondo_proto::FlowConfig,
        min_len: u64,
        max_len: u64,
    ) -> Result<(), VerbsError> {
        let conn = ep
            .connections()
            .get(h.0)
            .ok_or(VerbsError::Config("no connection behind this handle"))?;
        if conn.token() != cfg.token {
            return Err(VerbsError::Config(
                "the flow configuration's token differs from the connection's: pass the one it was connected with",
            ));
        }
        if cfg.mtu != self.mtu {
            return Err(VerbsError::Config(
                "in-place receive needs the flow's mtu equal to the datapath's (VerbsDatapath::flow_config)",
            ));
        }
        let header_len =
            rondo_proto::wire::DATA_HEADER_LEN + rondo_proto::wire::token_overhead(cfg.token);
        // An earlier entry of the flow stays: WRs may still be posted into its
        // buffers (its placement, once replaced, posts no more).
        let state = Arc::new(Mutex::new(FlowLanding::new(
            cfg.payload_per_packet(),
            min_len,
            max_len,
        )));
        self.flows.push(InPlaceFlow {
            flow: conn.local_flow(),
            header_len,
            state: state.clone(),
            registered: HashSet::new(),
        });
        let placement = LandingPlacement { state };
        ep.set_placement(h, Box::new(placement));
        Ok(())
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

    /// One round of the driver loop ([`crate::datapath::poll`]); see
    /// [`VerbsDatapath::poll`](super::VerbsDatapath::poll). Receives in place only
    /// when the host takes datagrams in place.
    pub fn poll<H: InPlaceHost>(
        &mut self,
        host: &mut H,
        clock: &Clock,
        max_wait: Duration,
    ) -> Result<PollOutcome, VerbsError> {
        crate::datapath::poll(self, host, clock, max_wait)
    }

    /// Retires send WRs whose signaled (or failed) completions arrived.
    fn reap_sends(&mut self) -> Result<(), VerbsError> {
        loop {
            let n = self.nic.poll_send(&mut self.wc)?;
            for wc in &self.wc[..n] {
                self.stats.completion_errors += u64::from(!wc.ok);
                if let (Some(ts), Some(st)) = (wc.ts, self.stamps.as_mut()) {
                    let ns = st.unwrap.extend_ns(ts);
                    self.rtt.on_send_completion(wc.wr_id, ns);
                }
                // A failed WR also ends the WRs before it; an unknown id is a
                // completion of another QP's and changes nothing.
                let _ = self.sq.complete(wc.wr_id);
            }
            if n < self.wc.len() {
                return Ok(());
            }
        }
    }
}

/// The verbs datapath under the driver loop: the host writes each datagram into
/// a free send slot of the registered send arena; a pass ends when every slot is
/// taken, and goes out in WR chains, one doorbell each.
impl<N: Nic> Datapath for Driver<N> {
    type Error = VerbsError;
    const PROFILE: HostProfile = HostProfile::NIC;
    /// A send slot of the registered send memory: DATA payloads are copied in
    /// (one gather entry per WR).
    type Tx<'a>
        = &'a mut [u8]
    where
        Self: 'a;

    /// Free send slots bound a pass.
    fn tx_limit(&self) -> usize {
        usize::MAX
    }

    fn tx_buffer<H: Host>(&mut self, _: &H) -> Option<&mut [u8]> {
        let slot = self.sq.next_slot()?;
        let base = slot * self.slot_len;
        self.tx_base = base;
        Some(&mut self.nic.send_mem()[base..base + self.mtu])
    }

    fn tx_queue(&mut self, t: Transmit) {
        let route = match self.routes.get(&t.flow) {
            Some(r) => Some(*r),
            None if self.routes.len() == 1 => self.routes.values().next().copied(),
            None => None,
        };
        let ah = ah_index(t.path, t.priority);
        let Some(route) = route.filter(|r| ah < r.ahs && t.len <= self.mtu) else {
            self.stats.unroutable += 1;
            return;
        };
        let Some(wr) = self.sq.plan(t.len, ah, route.qpn) else {
            return;
        };
        if wr.signaled && self.stamps.is_some() {
            let base = self.tx_base;
            let buf = &self.nic.send_mem()[base..base + t.len];
            if let Ok((repr, _)) = wire::parse(buf) {
                if matches!(repr.body, Body::Data(_)) {
                    let c = repr.common;
                    self.rtt.on_send(wr.wr_id, t.flow, c.psn.0, c.timestamp_ns);
                }
            }
        }
        self.stats.datagrams_out += 1;
        self.stats.bytes_out += t.len as u64;
        self.planned.push(wr);
        self.planned_route.push(route);
    }

    fn tx_flush<H: Host>(&mut self, _: &H) -> Result<(), VerbsError> {
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
        self.planned.clear();
        self.planned_route.clear();
        result
    }

    fn now(&mut self, clock: &Clock) -> Instant {
        self.last_now = self.last_now.max(clock.now());
        self.last_now
    }

    /// Busy-polls the completion queues for up to `wait` (NIC queues have no
    /// descriptor to sleep on), hands every received datagram to the host, frees
    /// the landing buffers no WR uses any more, and reposts receives.
    fn receive<H: InPlaceHost>(
        &mut self,
        host: &mut H,
        clock: &Clock,
        wait: Duration,
    ) -> Result<usize, VerbsError> {
        let start = std::time::Instant::now();
        let mut received = 0;
        loop {
            self.reap_sends()?;
            let n = self.receive_completions(host, clock)?;
            self.release();
            received += n;
            if n > 0 || start.elapsed() >= wait {
                break;
            }
            std::hint::spin_loop();
        }
        self.repost(host.takes_in_place())?;
        Ok(received)
    }
}

#[cfg(test)]
#[path = "driver_tests.rs"]
mod tests;
