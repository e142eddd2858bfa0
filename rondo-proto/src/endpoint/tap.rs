//! The endpoint's measurement tap ([`MetricsTap`]): every datagram handed in and
//! every data packet written is reported, with the NIC-level OOD and RBO the
//! endpoint's shared reorder buffer had, so that drivers never read it themselves.

use super::Endpoint;
use crate::connection::Connection;
use crate::tap::{MetricsTap, TapCounters, TapEvent};
use crate::time::Instant;
use crate::wire;

impl MetricsTap for Endpoint {
    fn set_tap(&mut self, on: bool) {
        self.tap.set_on(on);
        if on {
            let rb = &self.buffer;
            self.direct_ood = self.connections().map(|c| c.direct_ood(rb)).sum();
        }
    }

    fn poll_tap(&mut self) -> Option<TapEvent> {
        self.tap.pop()
    }

    fn tap_counters(&self) -> TapCounters {
        TapCounters {
            spurious_retransmissions: self.closed_spurious
                + self
                    .connections()
                    .map(Connection::spurious_retransmissions)
                    .sum::<u64>(),
            reorder_drops: self.buffer.stats().all_flows.dropped_full,
            nic_ood: self.nic_ood(),
        }
    }
}

impl Endpoint {
    /// NIC-level OOD now: the shared reorder buffer's (the sum over its flows)
    /// plus what RC selective repeat's direct placement holds outside it.
    fn nic_ood(&self) -> u64 {
        self.buffer.nic_ood() + self.direct_ood
    }

    /// [`Endpoint::receive`], reported to the tap as one [`TapEvent::Arrival`].
    pub(super) fn receive_tapped(&mut self, now: Instant, path: u16, data: &[u8], ecn_ce: bool) {
        let s = self.buffer.stats().all_flows;
        let seen = s.in_order + s.buffered;
        let nic_ood = self.nic_ood();
        let rbo_slots = self.buffer.used_slots() as u64;
        let packet =
            (data.len() >= wire::COMMON_HEADER_LEN).then(|| wire::Packet::new_unchecked(data));
        // Feedback goes to the sending half alone: the receiving half's counters
        // cannot change, and reading them would cost an ACK a cache line it does
        // not otherwise touch.
        let feedback = packet.as_ref().is_some_and(|p| {
            matches!(
                p.packet_type(),
                Ok(wire::PacketType::Ack | wire::PacketType::Nak)
            )
        });
        let conn = packet.and_then(|p| self.flow_index(p.flow()));
        let rb = &self.buffer;
        let before = conn.and_then(|i| self.conns[i].open()).map(|c| {
            (!feedback).then(|| {
                let r = c.receiver_stats();
                (
                    r.bytes_delivered,
                    discards(r),
                    r.placed_direct,
                    c.direct_ood(rb),
                )
            })
        });
        let ok = self.receive(now, path, data, ecn_ce).is_ok();
        let (flow, delivered, discarded, direct) = match (conn, before) {
            (Some(i), Some(before)) if ok => match (self.conns[i].open(), before) {
                (Some(c), None) => (Some(c.local_flow()), 0, false, false),
                (Some(c), Some((b, d, p, ood))) => {
                    let r = c.receiver_stats();
                    // A flow's direct OOD changes only on its own arrivals.
                    self.direct_ood =
                        (self.direct_ood + c.direct_ood(&self.buffer)).saturating_sub(ood);
                    (
                        Some(c.local_flow()),
                        r.bytes_delivered - b,
                        discards(r) > d,
                        r.placed_direct > p,
                    )
                }
                (None, _) => (None, 0, false, false),
            },
            _ => (None, 0, false, false),
        };
        let s = self.buffer.stats().all_flows;
        self.tap.record(TapEvent::Arrival {
            flow,
            nic_ood,
            rbo_slots,
            // Placed directly (RC selective repeat) is new data outside the buffer.
            new_data: s.in_order + s.buffered > seen || direct,
            discarded,
            delivered,
        });
    }

    /// Reports a data packet just written by connection `flow` to the tap.
    pub(super) fn tap_data_sent(&mut self, flow: u32, psn: u32, retransmission: bool) {
        if self.tap.is_on() {
            self.tap.record(TapEvent::DataSent {
                flow,
                psn,
                retransmission,
            });
        }
    }
}

/// Data packets a receiver threw away without keeping them.
fn discards(r: &crate::ReceiverStats) -> u64 {
    r.refused + r.dropped_buffer_full + r.dropped_out_of_window
}
