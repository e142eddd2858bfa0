//! The result of one scenario run: the keys of `rondo sim --json`.

use serde::Serialize;

/// One run's result. Serialised as `rondo sim --json` prints it: dotted names of the
/// issue are nested objects (`ood.nic_p99` is `{"ood": {"nic_p99": ..}}`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    /// Scenario name (with the run's label for a sweep).
    pub scenario: String,
    /// Transport name (`rondo`).
    pub transport: String,
    /// How the switches chose among equal-cost links (`steer`, Rondo's fabric by
    /// default; `ecmp`, the baselines'; `spray`; `adaptive`).
    pub routing: String,
    /// Seed.
    pub seed: u64,
    /// Payload delivered in order to applications, Gbit/s, over the measured time.
    pub goodput_gbps: f64,
    /// Unique data packets (headers included) arriving at receivers, Gbit/s.
    pub throughput_gbps: f64,
    /// Max-min fair aggregate for the topology and workload, Gbit/s.
    pub ideal_gbps: f64,
    /// `throughput_gbps / ideal_gbps` (0..1).
    pub utilization: f64,
    /// NIC-level OOD, packets.
    pub ood: NicDistribution,
    /// NIC-level RBO, packets.
    pub rbo: NicDistribution,
    /// Time from the first flow's start to the last finite flow's completion, us
    /// (`null` without finite flows, or when one did not complete).
    pub jct_us: Option<f64>,
    /// A lower bound on `jct_us`: the busiest host's wire bytes of the finite
    /// flows (sent or received) at its link rate, us (`null` without finite
    /// flows). A JCT near it means the hosts' links bound the job, not the fabric.
    pub jct_bound_us: Option<f64>,
    /// 99th percentile of FCT / ideal FCT over completed finite flows (`null`
    /// without them).
    pub fct_slowdown_p99: Option<f64>,
    /// Flow completion times of finite flows, us (`null` without completed ones).
    pub fct_us: Option<Percentiles>,
    /// Finite flows completed.
    pub flows_completed: u64,
    /// Finite flows in all.
    pub flows_total: u64,
    /// Long-lived flows.
    pub flows_long: u64,
    /// Retransmissions.
    pub retx: Retransmissions,
    /// Drops by cause, packets.
    pub drops: Drops,
    /// Switch queues.
    pub queue: Queues,
    /// Jain's fairness index over the goodput of long-lived flows (1 with one flow;
    /// `null` without long-lived flows).
    pub fairness_jain: Option<f64>,
    /// Goodput of each long-lived flow over its time in the measured span, Gbit/s,
    /// in workload order (empty without long-lived flows).
    pub long_flow_goodput_gbps: Vec<f64>,
    /// Each `[[workload]]` table's flows, goodput and JCT, in file order.
    pub workloads: Vec<WorkloadResult>,
    /// How the simulation ran.
    pub sim: SimStats,
    /// Why the run ended: `done`, `deadline` or `idle`.
    pub end: String,
    /// Simulated time at the end, us.
    pub simulated_us: f64,
    /// Measured span (from warm-up to the end), us.
    pub measured_us: f64,
}

/// The result of one workload table.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct WorkloadResult {
    /// Its `kind` (`incast`, `background`, ...).
    pub kind: String,
    /// Flows it made.
    pub flows: u64,
    /// Its finite flows that completed.
    pub flows_completed: u64,
    /// Payload its flows delivered in order over the measured span, Gbit/s.
    pub goodput_gbps: f64,
    /// From its first finite flow's start to its last one's completion, us
    /// (`null` without finite flows or when one did not complete).
    pub jct_us: Option<f64>,
}

/// A NIC-level distribution.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct NicDistribution {
    /// Mean.
    pub nic_avg: f64,
    /// 99th percentile.
    pub nic_p99: u64,
    /// 99.9th percentile.
    pub nic_p999: u64,
    /// Maximum.
    pub nic_max: u64,
}

/// Percentiles of a set of values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Percentiles {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Maximum.
    pub max: f64,
}

impl Percentiles {
    /// Nearest-rank percentiles of `values` (`None` when empty).
    pub fn of(values: &mut [f64]) -> Option<Percentiles> {
        if values.is_empty() {
            return None;
        }
        values.sort_by(f64::total_cmp);
        let rank = |q: f64| {
            let i = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
            values[i - 1]
        };
        Some(Percentiles {
            p50: rank(0.5),
            p99: rank(0.99),
            max: values[values.len() - 1],
        })
    }
}

/// Retransmission counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Retransmissions {
    /// Data packets sent (first transmissions and retransmissions).
    pub data_packets: u64,
    /// Data packets retransmitted.
    pub packets: u64,
    /// Retransmissions of packets that were not lost (a copy had arrived or was
    /// on its way): the simulator's count, from every drop it made.
    pub spurious: u64,
    /// `spurious / data_packets`.
    pub spurious_ratio: f64,
    /// Retransmissions the transport found spurious itself (the original's ACK
    /// came after the retransmission).
    pub reported_spurious: u64,
    /// Mean time from a packet's first transmission to its retransmission, us.
    pub mean_delay_us: f64,
}

/// Drops by cause.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Drops {
    /// Data packets refused by a full reorder buffer.
    pub reorder_buffer: u64,
    /// Data and control packets dropped at switches (queue threshold, shared
    /// buffer, failed link, no route).
    pub switch: u64,
    /// Probes dropped at the probe queue threshold.
    pub probe: u64,
    /// Packets of any class dropped at random (`switch.loss`).
    pub random: u64,
    /// NAKs dropped by the switches (`switch.drop_naks`).
    pub naks: u64,
}

/// Switch queue figures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Queues {
    /// Largest difference between the queues of the parallel paths' ports
    /// (`parallel`: the forward paths; `fig2`: leaf 0's uplinks P1-P4) at one
    /// sample, KB; 0 on other topologies.
    pub max_interpath_diff_kb: f64,
    /// Largest queue of any switch port, KB.
    pub max_port_kb: f64,
}

/// How the simulation ran.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct SimStats {
    /// Events processed.
    pub events: u64,
    /// Wall-clock time of the run, s.
    pub wall_s: f64,
    /// Events per second of wall-clock time.
    pub events_per_s: f64,
    /// Times a host's timer stayed due at one instant 10,000 times without
    /// progress and the simulator moved it on by 1 ns: an engine bug when not 0.
    pub stuck_timers: u64,
}
