//! The receive half of the driver loop: posting receive WRs (ring slots, or in
//! place with two scatter entries), completions, GRH stripping, NIC receive
//! timestamps, and handing datagrams to the host.

use super::{Driver, Nic, RecvDesc, SlotUse};
use crate::datapath::{Clock, InPlaceHost};
use crate::verbs::error::VerbsError;
use crate::verbs::grh::{self, GRH_LEN};
use crate::verbs::in_place;
use rondo_proto::time::Instant;
use rondo_proto::transmit::Host;
use rondo_proto::wire::{self, Body};

impl<N: Nic> Driver<N> {
    /// Hands every completed receive to the host; returns how many.
    pub(super) fn receive_completions<H: InPlaceHost>(
        &mut self,
        host: &mut H,
        clock: &Clock,
    ) -> Result<usize, VerbsError> {
        let mut delivered = 0;
        // Every completion there is, before the caller reposts: WRs the NIC has
        // consumed but the driver has not seen would throw the in-place
        // prediction off.
        loop {
            let n = self.nic.poll_recv(&mut self.wc)?;
            delivered += self.receive_batch(host, clock, n);
            if n < self.wc.len() {
                return Ok(delivered);
            }
        }
    }

    /// Hands the `n` completions polled into `self.wc` to the host.
    fn receive_batch<H: InPlaceHost>(&mut self, host: &mut H, clock: &Clock, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        let polled = clock.now();
        let stride = GRH_LEN + self.slot_len;
        let mut delivered = 0;
        for i in 0..n {
            let wc = self.wc[i];
            let slot = usize::try_from(wc.wr_id).unwrap_or(usize::MAX);
            if self.rx.complete(slot).is_err() {
                self.stats.malformed += 1;
                continue;
            }
            let used = std::mem::replace(&mut self.slot_use[slot], SlotUse::Ring);
            // The NIC arrival time, on the host clock, when the NIC stamps it.
            let (now, nic_ns) = match (wc.ts, self.stamps.as_mut()) {
                (Some(ts), Some(st)) if wc.ok => {
                    let ns = st.unwrap.extend_ns(ts);
                    let at = st.map.map(ns, polled);
                    self.stats.rx_timestamps += 1;
                    (at.max(self.last_now), Some(ns))
                }
                _ => (polled.max(self.last_now), None),
            };
            self.last_now = now;
            let buf = &self.nic.recv_mem()[slot * stride..(slot + 1) * stride];
            let ce = wc.ok && wc.byte_len >= GRH_LEN && wc.grh && grh::ecn_ce(&buf[..GRH_LEN]);
            match used {
                SlotUse::Ring => {
                    if !wc.ok {
                        self.stats.completion_errors += 1;
                        continue;
                    }
                    let Ok(datagram) = grh::strip_grh(buf, wc.byte_len) else {
                        self.stats.malformed += 1;
                        continue;
                    };
                    let mut sink = Sink {
                        stats: &mut self.stats,
                        rtt: &mut self.rtt,
                        flows: &self.flows,
                    };
                    sink.deliver(host, now, nic_ns, datagram, ce);
                    delivered += 1;
                }
                SlotUse::InPlace { flow, buf, offset } => {
                    delivered += usize::from(self.land(
                        host,
                        now,
                        nic_ns,
                        slot,
                        (flow, buf, offset),
                        wc,
                        ce,
                    ));
                }
            }
        }
        delivered
    }

    /// A completion of an in-place WR of `flow` into (`buf`, `offset`): the
    /// expected packet goes to the host in place, anything else is copied out of
    /// the place and handed over as a datagram. Returns whether a datagram went.
    #[allow(clippy::too_many_arguments)]
    fn land<H: InPlaceHost>(
        &mut self,
        host: &mut H,
        now: Instant,
        nic_ns: Option<u64>,
        slot: usize,
        (flow, buf, offset): (usize, u64, u64),
        wc: super::Completion,
        ce: bool,
    ) -> bool {
        let f = &self.flows[flow];
        let state = f.state.clone();
        let (flow_id, hlen) = (f.flow, f.header_len);
        let stride = GRH_LEN + self.slot_len;
        let mut s = in_place::lock(&state);
        if !wc.ok || wc.byte_len < GRH_LEN {
            s.consumed(buf, offset);
            if wc.ok {
                self.stats.malformed += 1;
            } else {
                self.stats.completion_errors += 1;
            }
            return false;
        }
        let len = wc.byte_len - GRH_LEN;
        let in_header = len.min(hlen);
        let spill = len - in_header;
        let start = slot * stride + GRH_LEN;
        let header = &self.nic.recv_mem()[start..start + in_header];
        let data = match wire::parse_split(header, spill) {
            Ok(r) if r.common.flow == flow_id => match r.body {
                Body::Data(d) => Some(d),
                _ => None,
            },
            _ => None,
        };
        let exact = host.takes_in_place()
            && data.is_some_and(|d| d.offset == offset && s.expects(buf, offset, d.msg_id));
        if exact {
            s.consumed(buf, offset);
            drop(s);
            self.stats.in_place_hits += 1;
            self.stats.datagrams_in += 1;
            self.stats.bytes_in += len as u64;
            self.stats.ce_marks += u64::from(ce);
            let header = &self.nic.recv_mem()[start..start + in_header];
            // Path 0: the Rondo header's path id is authoritative.
            host.handle_in_place(now, 0, header, spill, ce);
            if let Some(d) = data {
                self.sink().saw(flow_id, &Body::Data(d));
            }
            return true;
        }
        // Another datagram: copy it out (header from the slot, the rest from the
        // place), then the place is free again.
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        scratch.extend_from_slice(header);
        s.read_landed(buf, offset, spill, &mut scratch);
        s.consumed(buf, offset);
        drop(s);
        self.stats.in_place_repaired += 1;
        self.sink().deliver(host, now, nic_ns, &scratch, ce);
        self.scratch = scratch;
        true
    }

    fn sink(&mut self) -> Sink<'_> {
        Sink {
            stats: &mut self.stats,
            rtt: &mut self.rtt,
            flows: &self.flows,
        }
    }

    /// Posts the receive slots that are due, in one chain per batch: in place
    /// for a flow whose message has places left (`in_place`), whole otherwise.
    pub(super) fn repost(&mut self, in_place: bool) -> Result<(), VerbsError> {
        let stride = GRH_LEN + self.slot_len;
        let mut batch = std::mem::take(&mut self.rx_batch);
        let mut descs = Vec::with_capacity(batch.capacity());
        let mut result = Ok(());
        while self.rx.take_batch(&mut batch) > 0 {
            self.stats.recv_batches += 1;
            descs.clear();
            let ahead = self.rx.posted() - batch.len();
            for (i, &slot) in batch.iter().enumerate() {
                let desc = if in_place {
                    self.in_place_desc(slot, ahead + i)?
                } else {
                    None
                };
                descs.push(desc.unwrap_or(RecvDesc {
                    slot,
                    target: None,
                    header: stride,
                }));
            }
            result = self.nic.post_recv(&descs, stride);
            if result.is_err() {
                break;
            }
        }
        self.rx_batch = batch;
        result
    }

    /// An in-place WR for `slot`, `ahead` WRs behind the oldest posted one.
    fn in_place_desc(&mut self, slot: usize, ahead: usize) -> Result<Option<RecvDesc>, VerbsError> {
        for (i, f) in self.flows.iter_mut().enumerate() {
            let mut s = in_place::lock(&f.state);
            let Some(t) = s.next_post(ahead) else {
                continue;
            };
            let key = ((i as u64) << 40) | t.buf;
            if f.registered.insert(t.buf) {
                if let Err(e) = self.nic.register(key, t.base, t.cap) {
                    f.registered.remove(&t.buf);
                    s.unpost(t.buf, t.offset);
                    return Err(e);
                }
                self.stats.registrations += 1;
            }
            self.slot_use[slot] = SlotUse::InPlace {
                flow: i,
                buf: t.buf,
                offset: t.offset,
            };
            self.stats.in_place_posted += 1;
            return Ok(Some(RecvDesc {
                slot,
                target: Some((key, t.ptr, t.len)),
                header: GRH_LEN + f.header_len,
            }));
        }
        Ok(None)
    }

    /// Deregisters and frees the landing buffers no WR uses any more.
    pub(super) fn release(&mut self) {
        for (i, f) in self.flows.iter_mut().enumerate() {
            let mut s = in_place::lock(&f.state);
            if s.released().is_empty() {
                continue;
            }
            for &buf in s.released() {
                if f.registered.remove(&buf) {
                    self.nic.deregister(((i as u64) << 40) | buf);
                }
            }
            s.reclaim();
        }
    }
}

/// What handing a datagram to the host touches, apart from the NIC (whose
/// receive memory the datagram may still be in).
struct Sink<'a> {
    stats: &'a mut super::VerbsStats,
    rtt: &'a mut crate::verbs::timestamp::RttMatcher,
    flows: &'a [super::InPlaceFlow],
}

impl Sink<'_> {
    /// Hands one datagram to the host; an ACK with a NIC arrival time may pair
    /// with its DATA packet's send time for a NIC-level RTT sample.
    fn deliver<H: Host>(
        &mut self,
        host: &mut H,
        now: Instant,
        nic_ns: Option<u64>,
        datagram: &[u8],
        ce: bool,
    ) {
        let parsed = if nic_ns.is_some() || !self.flows.is_empty() {
            wire::parse(datagram).ok().map(|(repr, _)| repr)
        } else {
            None
        };
        if let (Some(ns), Some(repr)) = (nic_ns, parsed.as_ref()) {
            if let Body::Ack(fb) = &repr.body {
                let flow = repr.common.flow;
                let (psn, path, echo) = (fb.acked_psn.0, fb.acked_path, fb.echo_timestamp_ns);
                if !fb.of_probe {
                    self.rtt.on_ack(flow, psn, path, echo, ns);
                }
                // A coalesced ACK also echoes the newest packet of each block.
                let header = rondo_proto::wire::Packet::new_unchecked(datagram);
                for block in header.ack_blocks() {
                    if let Some(newest) = block.psns().next() {
                        self.rtt
                            .on_ack(flow, newest.0, block.path, block.echo_timestamp_ns, ns);
                    }
                }
            }
        }
        self.stats.ce_marks += u64::from(ce);
        self.stats.datagrams_in += 1;
        self.stats.bytes_in += datagram.len() as u64;
        // Path 0: the Rondo header's path id is authoritative.
        host.handle_datagram(now, 0, datagram, ce);
        if let Some(repr) = parsed {
            self.saw(repr.common.flow, &repr.body);
        }
    }

    /// Notes where a DATA packet of an in-place flow arrived (after the host took
    /// it, so that a message it started is the one being placed).
    fn saw(&mut self, flow: u32, body: &Body) {
        let Body::Data(d) = body else {
            return;
        };
        if let Some(f) = self.flows.iter().rev().find(|f| f.flow == flow) {
            in_place::lock(&f.state).saw(d.msg_id, d.offset);
        }
    }
}
