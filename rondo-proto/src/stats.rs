//! Counters and distributions the engine exposes (DESIGN.md "Metrics").

/// An exact histogram of small non-negative integers (OOD, RBO in packets), with
/// one overflow bucket; gives average, percentiles and maximum.
///
/// The exact buckets are allocated as samples reach them (a connection that never
/// sees reordering keeps a handful), so that an endpoint can hold thousands of
/// connections (issue 10: under 16 KB per idle connection). Zeros, the common
/// sample (a packet in order), are counted beside the totals rather than in the
/// bucket vector, so that recording one reads no cache line but the
/// histogram's own (a receiver records two per arrival).
#[derive(Clone, Debug)]
pub struct Histogram {
    /// Buckets `1..counts.len()` (`counts[0]` stays 0: zeros are `zeros`); the
    /// ones up to `exact` not yet reached are 0.
    counts: Vec<u64>,
    zeros: u64,
    exact: usize,
    overflow: u64,
    total: u64,
    sum: u128,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram::new(4096)
    }
}

/// Equal when they hold the same samples in the same buckets, however many
/// buckets each has allocated.
impl PartialEq for Histogram {
    fn eq(&self, other: &Self) -> bool {
        let n = self.counts.len().max(other.counts.len()).max(1);
        let at = |h: &Histogram, i: usize| h.bucket(i);
        self.exact == other.exact
            && self.overflow == other.overflow
            && self.total == other.total
            && self.sum == other.sum
            && self.max == other.max
            && (0..n).all(|i| at(self, i) == at(other, i))
    }
}

impl Eq for Histogram {}

impl Histogram {
    /// Exact counts for values below `exact`; larger values are only in max/avg.
    pub fn new(exact: usize) -> Histogram {
        Histogram {
            counts: Vec::new(),
            zeros: 0,
            exact: exact.max(1),
            overflow: 0,
            total: 0,
            sum: 0,
            max: 0,
        }
    }

    /// Records one sample.
    pub fn record(&mut self, v: u64) {
        if v == 0 {
            self.zeros += 1;
        } else if v < self.exact as u64 {
            let i = v as usize;
            if i >= self.counts.len() {
                let len = (i + 1).next_power_of_two().clamp(8, self.exact);
                self.counts.resize(len, 0);
            }
            self.counts[i] += 1;
        } else {
            self.overflow += 1;
        }
        self.total += 1;
        self.sum += v as u128;
        self.max = self.max.max(v);
    }

    /// Adds every sample of `other`.
    pub fn merge(&mut self, other: &Histogram) {
        if other.counts.len() > self.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        self.exact = self.exact.max(other.exact);
        for (i, c) in other.counts.iter().enumerate() {
            self.counts[i] += c;
        }
        self.zeros += other.zeros;
        self.overflow += other.overflow;
        self.total += other.total;
        self.sum += other.sum;
        self.max = self.max.max(other.max);
    }

    /// Samples of value `v` below `exact`.
    fn bucket(&self, v: usize) -> u64 {
        if v == 0 {
            self.zeros
        } else {
            self.counts.get(v).copied().unwrap_or(0)
        }
    }

    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.total
    }

    /// Mean, 0 without samples.
    pub fn mean(&self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            self.sum as f64 / self.total as f64
        }
    }

    /// Largest sample, 0 without samples.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The smallest value v such that at least `q` (0..=1) of the samples are <= v.
    /// Values in the overflow bucket are reported as the maximum.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.total as f64).ceil() as u64).max(1);
        let mut seen = self.zeros;
        if seen >= rank {
            return 0;
        }
        for (v, c) in self.counts.iter().enumerate().skip(1) {
            seen += c;
            if seen >= rank {
                return v as u64;
            }
        }
        self.max
    }
}

/// Sender counters of one connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SenderStats {
    /// Data packets sent, retransmissions included.
    pub data_packets_sent: u64,
    /// Data bytes sent (engine header included).
    pub data_bytes_sent: u64,
    /// Data packets whose payload the datapath sent from where it lies (the
    /// message's owned bytes or its external body, by address) instead of a copy
    /// after the header ([`crate::Transmit::payload`]).
    pub payloads_by_reference: u64,
    /// Retransmitted data packets.
    pub retransmissions: u64,
    /// Retransmissions whose original copy was acknowledged after all.
    pub spurious_retransmissions: u64,
    /// Packets declared lost (early recovery, NAK or timeout).
    pub lost_declared: u64,
    /// Distinct PSNs acknowledged.
    pub packets_acked: u64,
    /// Messages whose every packet was acknowledged.
    pub messages_completed: u64,
    /// Probes sent.
    pub probes_sent: u64,
    /// Probe ACKs received.
    pub probes_acked: u64,
    /// Probing phases started after startup.
    pub probing_phases: u64,
    /// Retransmission timeouts.
    pub rto_fired: u64,
    /// NAKs received.
    pub naks_received: u64,
    /// Window cuts caused by "reorder buffer full" NAKs.
    pub buffer_full_cuts: u64,
    /// ACKs carrying an ECN echo.
    pub ecn_echoes: u64,
    /// Paths taken out of rotation.
    pub path_downs: u64,
    /// ACKs or NAKs that referred to nothing this sender sent.
    pub bad_feedback: u64,
    /// Probe ACKs for no probe outstanding on their path (forged, replayed or
    /// duplicated): ignored.
    pub unexpected_probe_acks: u64,
    /// ACKs whose reported highest PSN lies beyond anything sent (a forged or
    /// corrupt far-ahead DATA at the receiver): the ACK is used, that field is
    /// not.
    pub implausible_highest: u64,
    /// ACKs whose cumulative ACK covers a PSN never sent, or lies past the highest
    /// PSN the same ACK reports (a real receiver's never does: it is forged): the
    /// ACK is used, its cumulative ACK is not.
    pub rejected_cum_acks: u64,
    /// `poll_transmit` calls refused, sending nothing, because the buffer was
    /// shorter than the flow's `mtu` (a datagram is all or nothing). Anything but 0
    /// is a driver bug: the flow stalls until the driver offers `mtu` bytes.
    pub short_buffers: u64,
}

/// Receiver counters and distributions of one connection.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReceiverStats {
    /// OOD sampled at every data arrival, before it is applied (DESIGN.md "Metrics").
    pub ood: Histogram,
    /// RBO (packets held out of order) sampled at every data arrival.
    pub rbo: Histogram,
    /// Data packets received (duplicates included).
    pub data_packets: u64,
    /// Payload bytes delivered in order.
    pub bytes_delivered: u64,
    /// Messages delivered.
    pub messages_delivered: u64,
    /// Duplicate data packets (already received).
    pub duplicates: u64,
    /// Data packets the receiver policy refused before the reorder buffer saw
    /// them (NAKed with the policy's reason).
    pub refused: u64,
    /// Data packets dropped because the reorder buffer was full (NAKed).
    pub dropped_buffer_full: u64,
    /// Data packets dropped because their PSN was too far ahead.
    pub dropped_out_of_window: u64,
    /// Data packets whose message fields contradict the stream (dropped).
    pub inconsistent: u64,
    /// Probes received.
    pub probes: u64,
    /// Arrivals marked Congestion Experienced.
    pub ce_marked: u64,
    /// Data packets placed straight from the datagram because they arrived in PSN
    /// order (the zero-copy candidates of DESIGN.md "Receive placement").
    pub placed_in_order: u64,
    /// Of those, packets a datapath had already received at their final place.
    pub placed_in_place: u64,
    /// Data packets that arrived out of order and were placed later from the
    /// reorder buffer ("repaired").
    pub placed_repaired: u64,
    /// Data packets that arrived out of order and were placed directly, outside
    /// the reorder buffer (RC selective repeat's direct data placement).
    pub placed_direct: u64,
}

/// Endpoint-wide counters of datagrams that could not be used.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EndpointStats {
    /// Datagrams that failed to parse.
    pub malformed: u64,
    /// Datagrams for a flow this endpoint does not have.
    pub unknown_flow: u64,
    /// Datagrams received.
    pub datagrams: u64,
    /// Datagrams for a flow with a connection token whose token was missing or wrong.
    pub bad_token: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_exact() {
        let mut h = Histogram::new(16);
        for v in 1..=100 {
            h.record(v % 10);
        }
        assert_eq!(h.count(), 100);
        assert_eq!(h.quantile(0.5), 4);
        assert_eq!(h.quantile(0.99), 9);
        assert_eq!(h.max(), 9);
        assert!((h.mean() - 4.5).abs() < 1e-9);
        h.record(1000);
        assert_eq!(h.quantile(1.0), 1000);
    }

    #[test]
    fn zeros_count_in_quantiles_merges_and_equality() {
        let mut h = Histogram::new(16);
        for _ in 0..98 {
            h.record(0);
        }
        h.record(3);
        h.record(20);
        assert_eq!((h.quantile(0.5), h.quantile(0.98)), (0, 0));
        assert_eq!((h.quantile(0.99), h.quantile(1.0)), (3, 20));
        let mut only_zeros = Histogram::new(16);
        only_zeros.record(0);
        assert_ne!(only_zeros, Histogram::new(16), "a zero is a sample");
        let mut m = Histogram::new(16);
        m.merge(&h);
        m.merge(&only_zeros);
        assert_eq!(m.count(), 101);
        assert_eq!(m.quantile(0.98), 0);
        assert_eq!((m.quantile(0.99), m.quantile(1.0)), (3, 20));
    }
}
