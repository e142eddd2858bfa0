//! The numbers every report uses (DESIGN.md "Metrics"), over the measurement
//! window: from the warm-up time (0 by default) to now.

use super::{FlowResult, LinkStats, Simulator};
use crate::LinkId;
use rondo_proto::time::{Duration, Instant};
use rondo_proto::Histogram;

/// Retransmissions in the window.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RetxMetrics {
    /// Data packets sent (first transmissions and retransmissions).
    pub data_packets: u64,
    /// Retransmitted data packets.
    pub packets: u64,
    /// Retransmissions of packets that were not lost: an earlier copy of the PSN
    /// had arrived or was still on its way (the simulator knows every drop, in
    /// the network and at the receiver).
    pub spurious: u64,
    /// `spurious / data_packets` (0 with no data sent).
    pub spurious_ratio: f64,
    /// Retransmissions the transport itself found spurious (an ACK for the
    /// original arrived after the retransmission): its own, partial, view.
    pub reported_spurious: u64,
    /// Mean time from a packet's first transmission to its retransmission.
    pub mean_delay: Option<Duration>,
}

/// Packets dropped in the window, by cause.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Drops {
    /// Data packets a receiving NIC dropped because its reorder buffer was full.
    pub reorder_buffer: u64,
    /// Data or control packets over a port's class drop threshold.
    pub switch_threshold: u64,
    /// Data or control packets refused because the switch's shared buffer was full.
    pub switch_buffer: u64,
    /// Probes over the probe drop threshold (or a full shared buffer).
    pub probe: u64,
    /// Packets lost on a failed link or with no live next hop.
    pub link_down: u64,
    /// Packets with no route (a host sending for an unknown flow).
    pub no_route: u64,
    /// Packets dropped at random (`switch.loss`).
    pub random: u64,
    /// NAKs dropped by the switches (`switch.drop_naks`).
    pub naks: u64,
}

impl Drops {
    /// Drops in switches (thresholds and shared buffer), probes excluded.
    pub fn switch(&self) -> u64 {
        self.switch_threshold + self.switch_buffer
    }
}

/// Results of a run so far.
#[derive(Clone, Debug, PartialEq)]
pub struct Metrics {
    /// Start of the measurement window.
    pub window_start: Instant,
    /// Length of the measurement window.
    pub window: Duration,
    /// Payload delivered in order to applications, Gbit/s.
    pub goodput_gbps: f64,
    /// Unique data packets (headers included; probes, duplicates and packets the
    /// reorder buffer dropped excluded) arriving at receivers, Gbit/s.
    pub throughput_gbps: f64,
    /// Max-min fair aggregate for the topology and the flows of the window, Gbit/s
    /// (see [`Simulator::ideal_gbps`]).
    pub ideal_gbps: f64,
    /// `throughput / ideal` (0 when the ideal is 0).
    pub utilization: f64,
    /// NIC-level OOD at each data arrival, pooled over receiving NICs.
    pub nic_ood: Histogram,
    /// NIC-level RBO (reorder-buffer slots in use) at each data arrival, pooled.
    pub nic_rbo: Histogram,
    /// Every flow, in the order added.
    pub flows: Vec<FlowResult>,
    /// Finite flows completed.
    pub flows_completed: usize,
    /// Finite flows in all.
    pub flows_finite: usize,
    /// Retransmissions.
    pub retx: RetxMetrics,
    /// Drops by cause.
    pub drops: Drops,
    /// Statistics of every switch link (queue max and time-average).
    pub queues: Vec<(LinkId, LinkStats)>,
    /// Largest instantaneous difference between the queues of the path links
    /// ([`Simulator::path_links`]), bytes; 0 without path links.
    pub max_interpath_queue_diff_bytes: u64,
    /// Jain's index over the goodput of long-lived flows in the window.
    pub fairness_jain: Option<f64>,
    /// Goodput of each long-lived flow in the window, Gbit/s, in the order added.
    pub long_flow_gbps: Vec<f64>,
    /// Events processed.
    pub events: u64,
    /// Times a host asked for a timeout at the same instant 10 000 times in a row
    /// without progress and was moved on by 1 ns (an engine bug if non-zero).
    pub stuck_timers: u64,
}

impl Simulator {
    /// Metrics over the window from the warm-up time to now.
    pub fn metrics(&self) -> Metrics {
        let now = self.now;
        let window = now.saturating_since(self.window_start);
        let secs = window.as_secs_f64();
        let per_s = |bytes: u64| {
            if secs > 0.0 {
                bytes as f64 * 8.0 / secs / 1e9
            } else {
                0.0
            }
        };
        let flows: Vec<FlowResult> = (0..self.flows.len()).map(|f| self.flow_result(f)).collect();
        let long_rates = long_flow_rates(&flows, self.window_start, now);
        let goodput = per_s(flows.iter().map(|f| f.delivered_in_window).sum());
        let c = self.counters;
        let w = self.at_warmup;
        let throughput = per_s(c.unique_data_bytes - w.unique_data_bytes);
        let ideal = self.ideal_gbps();
        let (spurious, rb) = self.engine_totals();
        let retx_samples = c.retx_delay_samples - w.retx_delay_samples;
        let queues = self
            .links()
            .filter(|l| self.fabric.links[l.0].from >= self.fabric.hosts)
            .filter_map(|l| Some((l, self.link_stats(l)?)))
            .collect();
        Metrics {
            window_start: self.window_start,
            window,
            goodput_gbps: goodput,
            throughput_gbps: throughput,
            ideal_gbps: ideal,
            utilization: if ideal > 0.0 { throughput / ideal } else { 0.0 },
            nic_ood: self.nic_ood.clone(),
            nic_rbo: self.nic_rbo.clone(),
            flows_completed: self.finite_total - self.finite_open,
            flows_finite: self.finite_total,
            fairness_jain: jain(&long_rates),
            long_flow_gbps: long_rates
                .iter()
                .map(|bytes_per_s| bytes_per_s * 8.0 / 1e9)
                .collect(),
            flows,
            retx: RetxMetrics {
                data_packets: c.data_packets - w.data_packets,
                packets: c.retx_packets - w.retx_packets,
                spurious: c.spurious - w.spurious,
                spurious_ratio: if c.data_packets > w.data_packets {
                    (c.spurious - w.spurious) as f64 / (c.data_packets - w.data_packets) as f64
                } else {
                    0.0
                },
                reported_spurious: spurious - self.engine_at_warmup.0,
                mean_delay: (retx_samples > 0).then(|| {
                    let ps = (c.retx_delay_ps - w.retx_delay_ps) / u128::from(retx_samples);
                    Duration::from_ps(ps as u64)
                }),
            },
            drops: Drops {
                reorder_buffer: rb - self.engine_at_warmup.1,
                switch_threshold: c.drop_data_threshold - w.drop_data_threshold,
                switch_buffer: c.drop_buffer - w.drop_buffer,
                probe: c.drop_probe - w.drop_probe,
                link_down: c.drop_link_down - w.drop_link_down,
                no_route: c.drop_no_route - w.drop_no_route,
                random: c.drop_random - w.drop_random,
                naks: c.drop_nak - w.drop_nak,
            },
            queues,
            max_interpath_queue_diff_bytes: self.interpath_max,
            events: self.events,
            stuck_timers: c.stuck_timers - w.stuck_timers,
        }
    }

    fn flow_result(&self, f: usize) -> FlowResult {
        let fl = &self.flows[f];
        let delivered = self.delivered(f);
        FlowResult {
            src: fl.src,
            dst: fl.dst,
            group: fl.spec.group,
            bytes: fl.bytes,
            paths: fl.cfg.paths,
            start: fl.started_at.unwrap_or(fl.spec.start),
            finish: fl.finish,
            stop: fl.stopped,
            delivered,
            delivered_in_window: delivered.saturating_sub(fl.delivered_at_warmup),
            failed: fl.failed,
        }
    }

    /// The ideal aggregate, Gbit/s: max-min fair rates by progressive filling
    /// (water-filling) for the flows active in the window, all taken as running at
    /// once, each free to spread over all its equal-cost paths (a fluid
    /// multipath). The shared resources are the cuts of the topology, each with
    /// its link rates (failed links count 0): every host's NIC (up) and its links
    /// down; in fig2 each leaf's uplinks and downlinks; in clos3/fattree each edge
    /// switch's and each pod's uplinks and downlinks. For two hosts over parallel
    /// paths this is min(host rate, sum of path rates). When links change during
    /// the window, the ideal is the time-weighted mean of the ideals of the spans
    /// between changes.
    pub fn ideal_gbps(&self) -> f64 {
        let active: Vec<(u32, u32)> = self
            .flows
            .iter()
            .filter(|f| {
                f.started
                    && f.finish.is_none_or(|t| t > self.window_start)
                    && f.stopped.is_none_or(|t| t > self.window_start)
                    && !f.failed
            })
            .map(|f| (f.src as u32, f.dst as u32))
            .collect();
        let cuts = &self.fabric.cuts;
        let uses: Vec<Vec<usize>> = active
            .iter()
            .map(|&(s, d)| {
                let mut r = Vec::new();
                for (i, c) in cuts.iter().enumerate() {
                    let (a, b) = (c.hosts.contains(&s), c.hosts.contains(&d));
                    if a && !b {
                        r.push(2 * i);
                    } else if b && !a {
                        r.push(2 * i + 1);
                    }
                }
                r
            })
            .collect();
        let ideal = |cap: &[f64]| water_fill(cap, &uses).iter().sum::<f64>();
        let (start, end) = (self.window_start, self.now);
        let window = end.saturating_since(start).as_ps();
        if self.capacity_history.is_empty() || window == 0 {
            return ideal(&self.cut_capacities());
        }
        // Each span between changes, clipped to the window, weighted by its length.
        let h = &self.capacity_history;
        let mut weighted = 0.0;
        for (i, (from, cap)) in h.iter().enumerate() {
            let to = h.get(i + 1).map_or(end, |next| next.0);
            let (a, b) = ((*from).max(start), to.min(end));
            if b > a {
                weighted += ideal(cap) * b.saturating_since(a).as_ps() as f64;
            }
        }
        weighted / window as f64
    }

    /// Capacity of each cut's up and down links now, Gbit/s (failed links count 0),
    /// in the order [`Simulator::ideal_gbps`] uses them.
    pub(crate) fn cut_capacities(&self) -> Vec<f64> {
        self.fabric
            .cuts
            .iter()
            .flat_map(|c| [&c.up, &c.down])
            .map(|links| {
                links
                    .iter()
                    .map(|&l| {
                        let p = &self.ports[l as usize];
                        if p.failed {
                            0.0
                        } else {
                            p.bps as f64 / 1e9
                        }
                    })
                    .sum()
            })
            .collect()
    }
}

/// Max-min fair rates of flows using `uses[f]` resources of capacities `cap`.
fn water_fill(cap: &[f64], uses: &[Vec<usize>]) -> Vec<f64> {
    let n = uses.len();
    let mut rate = vec![0.0; n];
    let mut frozen: Vec<bool> = uses.iter().map(|u| u.is_empty()).collect();
    let mut used = vec![0.0; cap.len()];
    let mut count = vec![0usize; cap.len()];
    loop {
        count.fill(0);
        for (f, u) in uses.iter().enumerate() {
            if !frozen[f] {
                for &r in u {
                    count[r] += 1;
                }
            }
        }
        let delta = (0..cap.len())
            .filter(|&r| count[r] > 0)
            .map(|r| ((cap[r] - used[r]) / count[r] as f64).max(0.0))
            .fold(f64::INFINITY, f64::min);
        if !delta.is_finite() {
            break;
        }
        for (f, u) in uses.iter().enumerate() {
            if !frozen[f] {
                rate[f] += delta;
                for &r in u {
                    used[r] += delta;
                }
            }
        }
        let full: Vec<bool> = (0..cap.len())
            .map(|r| count[r] > 0 && cap[r] - used[r] <= 1e-9 * cap[r].max(1.0))
            .collect();
        for (f, u) in uses.iter().enumerate() {
            if !frozen[f] && u.iter().any(|&r| full[r]) {
                frozen[f] = true;
            }
        }
    }
    rate
}

/// Goodput of each long-lived flow (not failed, active in the window) over its
/// time in the window, bytes per second.
fn long_flow_rates(flows: &[FlowResult], window_start: Instant, now: Instant) -> Vec<f64> {
    flows
        .iter()
        .filter(|f| f.bytes.is_none() && !f.failed)
        .filter_map(|f| {
            let from = f.start.max(window_start);
            let to = f.stop.unwrap_or(now).min(now);
            let span = to.checked_since(from)?.as_secs_f64();
            (span > 0.0).then(|| f.delivered_in_window as f64 / span)
        })
        .collect()
}

/// Jain's fairness index of `xs`.
fn jain(xs: &[f64]) -> Option<f64> {
    let sum: f64 = xs.iter().sum();
    let sq: f64 = xs.iter().map(|x| x * x).sum();
    (!xs.is_empty() && sq > 0.0).then(|| sum * sum / (xs.len() as f64 * sq))
}

#[cfg(test)]
mod tests {
    use super::water_fill;

    #[test]
    fn water_filling_is_max_min_fair() {
        // Two flows share resource 0 (10), flow 1 also uses resource 1 (2).
        let r = water_fill(&[10.0, 2.0], &[vec![0], vec![0, 1]]);
        assert!(
            (r[1] - 2.0).abs() < 1e-9 && (r[0] - 8.0).abs() < 1e-9,
            "{r:?}"
        );
    }
}
