//! The scenario file's schema: every key, its type and its default.
//!
//! Each table rejects unknown keys; an `Option` key left out is `None`.
//! `docs/sim.md` documents every key.

use crate::LinkKind;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use std::fmt;

/// One scenario: a topology, a transport, a workload, timed events, and how long to run.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Name printed in reports (default: the file name without `.toml`).
    pub name: Option<String>,
    /// Seed of every random choice (workload, ECMP hashing, flows).
    #[serde(default = "one")]
    pub seed: u64,
    /// Run length in microseconds; a finite workload may end earlier.
    pub duration_us: f64,
    /// Measurement starts after this many microseconds.
    #[serde(default)]
    pub warmup_us: f64,
    /// Bytes of a full data packet on the wire, all headers included.
    #[serde(default = "default_mtu")]
    pub mtu: u32,
    /// Interval of the queue and OOD time series, in microseconds (`--trace`).
    #[serde(default = "default_trace_interval")]
    pub trace_interval_us: f64,
    /// The network.
    pub topology: TopologySpec,
    /// Switch settings shared by every switch.
    #[serde(default)]
    pub switch: SwitchSpec,
    /// Host settings shared by every host.
    #[serde(default)]
    pub host: HostSpec,
    /// The transport every flow runs.
    #[serde(default)]
    pub transport: TransportSpec,
    /// What the hosts send: one `[workload]` table or several `[[workload]]` tables.
    pub workload: Workloads,
    /// Timed link changes (`[[events]]`).
    #[serde(default)]
    pub events: Vec<EventSpec>,
}

fn one() -> u64 {
    1
}
fn default_mtu() -> u32 {
    1500
}
fn default_trace_interval() -> f64 {
    10.0
}
fn default_host_gbps() -> f64 {
    100.0
}
fn default_link_delay() -> f64 {
    1.0
}
fn default_flows() -> u32 {
    1
}

/// `[topology]`: which network, selected by `kind`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum TopologySpec {
    /// Two hosts joined by K parallel paths (the paper's testbed, Fig. 9a).
    Parallel(ParallelSpec),
    /// 16 senders and 4 receivers over four parallel spine paths (paper Fig. 2).
    Fig2(Fig2Spec),
    /// The paper's 3-tier Clos: 320 hosts, 5 pods of 4 ToR + 4 aggregation, 16 core.
    Clos3(Clos3Spec),
    /// A k-ary fat tree.
    Fattree(FatTreeSpec),
}

/// `kind = "parallel"`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ParallelSpec {
    /// NIC rate of both hosts, Gbit/s.
    #[serde(default = "default_host_gbps")]
    pub host_gbps: f64,
    /// The paths, each with its rate and one-way delay.
    pub paths: Vec<PathEntry>,
}

/// One path of a `parallel` topology.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PathEntry {
    /// Rate, Gbit/s.
    pub gbps: f64,
    /// One-way propagation delay, microseconds.
    pub delay_us: f64,
}

/// `kind = "fig2"`: fixed at 100 Gbit/s and 1 us per link (paper Fig. 2).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Fig2Spec {
    /// Extra one-way delay of each spine path's uplink from the senders' leaf (at
    /// most four entries), microseconds: the persistent delay difference of Fig. 4.
    #[serde(default)]
    pub extra_delay_us: Vec<f64>,
}

/// `kind = "clos3"`: 100 Gbit/s host links, 400 Gbit/s fabric links, 1 us per link.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Clos3Spec {
    /// 1 (non-blocking, 16 core switches) or 4 (4 core switches).
    #[serde(default = "default_oversubscription")]
    pub oversubscription: u32,
}

fn default_oversubscription() -> u32 {
    1
}

/// `kind = "fattree"`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FatTreeSpec {
    /// Switch radix k (even): k pods, k^3/4 hosts.
    pub k: u32,
    /// Rate of every link, Gbit/s.
    #[serde(default = "default_host_gbps")]
    pub gbps: f64,
    /// Propagation delay of every link, microseconds.
    #[serde(default = "default_link_delay")]
    pub link_delay_us: f64,
}

/// `[host]`: settings of every host.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HostSpec {
    /// Mean time between a host's stalls, microseconds (exponential gaps; with
    /// `stall_us`): a software datapath whose thread waits for a core now and then.
    pub stall_every_us: Option<f64>,
    /// Mean length of a stall, microseconds (uniform from half to 1.5 times it;
    /// 0: no stalls).
    pub stall_us: Option<f64>,
}

/// `[switch]`: settings of every switch; a key left out keeps the simulator's default.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SwitchSpec {
    /// Shared buffer per switch, KB.
    pub buffer_kb: Option<f64>,
    /// Drop threshold of a data queue, KB.
    pub data_threshold_kb: Option<f64>,
    /// Drop threshold of a probe queue, in MTU-sized probes (small: paper §4.2.2).
    pub probe_threshold_packets: Option<u32>,
    /// ECN marking of data packets on or off.
    pub ecn: Option<bool>,
    /// ECN: queue length where marking starts, KB.
    pub ecn_kmin_kb: Option<f64>,
    /// ECN: queue length where the marking probability reaches `ecn_pmax`, KB.
    pub ecn_kmax_kb: Option<f64>,
    /// ECN: marking probability at `ecn_kmax_kb`.
    pub ecn_pmax: Option<f64>,
    /// PFC (lossless pause) on or off.
    pub pfc: Option<bool>,
    /// PFC: ingress bytes that send a pause, KB.
    pub pfc_xoff_kb: Option<f64>,
    /// PFC: ingress bytes that send a resume, KB.
    pub pfc_xon_kb: Option<f64>,
    /// Random loss: the probability that each switch egress drops a packet
    /// (for example 0.001), seeded by the scenario's seed.
    pub loss: Option<f64>,
    /// Next-hop choice: `ecmp` (hash, the default), `spray` (random per packet) or
    /// `adaptive` (shortest egress queue). Left out with `transport.kind = "ar"`:
    /// `adaptive`.
    pub routing: Option<RoutingSpec>,
    /// Drop every NAK at the switches (the paper's App. A setup for `rc-sr`:
    /// the receiver keeps out-of-order packets, the sender does not resend).
    pub drop_naks: Option<bool>,
}

/// `switch.routing`.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum RoutingSpec {
    /// A hash of the packet's flow and logical path.
    Ecmp,
    /// A uniformly random equal-cost next hop per packet.
    Spray,
    /// The equal-cost next hop with the shortest egress data queue.
    Adaptive,
    /// By logical path, as Rondo's switch program steers by UDP source port.
    Steer,
}

/// Baselines a scenario may already name, to come with the baselines issue: a
/// scenario naming one is refused with [`ScenarioError::TransportNotImplemented`](super::ScenarioError::TransportNotImplemented).
/// Empty now that every transport the paper compares against is built (`uet` was
/// the last); kept so that a name can be reserved before its transport lands.
pub const PLANNED_TRANSPORTS: &[&str] = &[];

/// The transport a scenario names (`transport.kind`): one the engine has
/// ([`rondo_proto::Transport`], any registered name), or a baseline still to come.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransportKind {
    /// A transport of the engine.
    Engine(rondo_proto::Transport),
    /// A name of [`PLANNED_TRANSPORTS`].
    Planned(&'static str),
}

impl Default for TransportKind {
    fn default() -> Self {
        TransportKind::RONDO
    }
}

impl TransportKind {
    /// Rondo.
    pub const RONDO: TransportKind = TransportKind::Engine(rondo_proto::Transport::RONDO);

    /// The name as written in scenario files.
    pub fn name(self) -> &'static str {
        match self {
            TransportKind::Engine(t) => t.name(),
            TransportKind::Planned(name) => name,
        }
    }

    /// Every name a scenario may write, the engine's first.
    pub fn names() -> Vec<&'static str> {
        rondo_proto::Transport::all()
            .map(|t| t.name())
            .chain(PLANNED_TRANSPORTS.iter().copied())
            .collect()
    }
}

impl<'de> Deserialize<'de> for TransportKind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        if let Ok(t) = rondo_proto::Transport::from_name(&name) {
            return Ok(TransportKind::Engine(t));
        }
        if let Some(p) = PLANNED_TRANSPORTS.iter().find(|p| **p == name) {
            return Ok(TransportKind::Planned(p));
        }
        Err(de::Error::custom(format!(
            "unknown transport `{name}`, expected one of {}",
            TransportKind::names().join(", ")
        )))
    }
}

/// Path selection of the Rondo transport.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum PathSelectionSpec {
    /// Deficit-based selection (paper §4.2.3).
    #[default]
    Deficit,
    /// Random spraying over open windows (ablation).
    Random,
}

/// Loss recovery of the transports that let it be chosen (`transport.loss_recovery`).
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
pub enum LossRecoverySpec {
    /// Selective repeat with early recovery (today's behaviour).
    #[default]
    #[serde(rename = "sr")]
    SelectiveRepeat,
    /// RACK-TLP over the flow's PSN space.
    #[serde(rename = "rack-flow")]
    RackFlow,
    /// RACK-TLP per path.
    #[serde(rename = "rack-path")]
    RackPath,
}

/// `[transport]`; a key left out keeps its value in [`TransportSpec::default`].
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct TransportSpec {
    /// Which transport.
    pub kind: TransportKind,
    /// Shared reorder buffer per receiving NIC, KB of MTU-sized slots.
    pub reorder_buffer_kb: f64,
    /// Rondo's packet scheduler (paper §4.3).
    pub scheduler: bool,
    /// Capacity probing (paper §4.2.2).
    pub probing: bool,
    /// Rondo paces what probe ACKs buy beyond this many packets of a path's open
    /// window at 1.25 W_p / T_p (default: not paced, the paper's rule;
    /// `rondo_proto::FlowConfig::probe_pacing_burst`).
    pub probe_pacing_burst_packets: Option<f64>,
    /// Rondo paces what probe ACKs buy (as `probe_pacing_burst_packets = 0`) once
    /// the receiver has refused a packet for want of buffer (default true;
    /// `rondo_proto::FlowConfig::probe_pacing_after_refusal`).
    pub probe_pacing_after_refusal: Option<bool>,
    /// Logical paths per flow (default: as many as equal-cost paths).
    pub paths: Option<u16>,
    /// `deficit` or `random`.
    pub path_selection: PathSelectionSpec,
    /// Flow-level pacing.
    pub pacing: bool,
    /// Initial window per path, packets.
    pub initial_window: Option<f64>,
    /// Margin ceiling q0, packets.
    pub q0: Option<f64>,
    /// Target queueing delay as a fraction of the largest base RTT.
    pub target_queue_rtts: Option<f64>,
    /// ACK-rate EWMA weight.
    pub alpha: Option<f64>,
    /// Window EWMA gain.
    pub gamma: Option<f64>,
    /// Early-recovery threshold, packets.
    pub early_recovery_threshold: Option<u32>,
    /// Smallest retransmission timeout, microseconds.
    pub rto_min_us: Option<f64>,
    /// `sr` (default), `rack-flow` or `rack-path` (Rondo, swift-rps).
    pub loss_recovery: LossRecoverySpec,
    /// ARCC's update interval Tu as a fraction of the path's base RTT (0.5).
    pub update_interval_rtts: Option<f64>,
    /// Base RTT per path: `measured` (the smallest RTT seen), `topology` (each
    /// logical path's route as the links are from time 0: propagation plus
    /// serialisation of a full packet out and an ACK back, with empty queues,
    /// as Swift does) or `auto` (default: `topology` for Rondo, `measured` for
    /// the others).
    pub base_rtt: BaseRttSpec,
    /// Early recovery's rule: `gap-and-rtt` (default) or `gap`.
    pub early_recovery: EarlyRecoverySpec,
    /// Whose largest base RTT sets Rondo's tau_q = `target_queue_rtts` x it:
    /// `network` (default; the topology's largest, the same for every flow, paper
    /// App. E) or `flow` (the flow's own paths).
    pub tau_q_base: TauQBaseSpec,
    /// The least tau_q: `packet` (default; one MTU's serialisation at the
    /// topology's slowest link, so one waiting packet is not a queue above
    /// target) or `none` (the paper's 0.04 x base RTT, however short).
    pub tau_q_floor: TauQFloorSpec,
    /// Whose margin Rondo's q0 bounds: `path` (default; q0 on every path, as the
    /// paper writes it) or `flow` (q0 shared by the flow's paths).
    pub margin_scope: MarginScopeSpec,
    /// Rondo's measured base RTT expires after this many base RTTs when it grew
    /// by more than 4 tau_q and probes confirm it (default 10; 0: never).
    pub base_rtt_window_rtts: Option<f64>,
    /// Packets of excess inflight Rondo's inflight-based queue estimate takes
    /// for window rounding (default 0, the paper's estimate).
    pub queue_rounding_packets: Option<f64>,
    /// Rondo's smallest path window in packets (default 1); below 1 the flow
    /// pacer spaces a path's packets more than one RTT apart.
    pub min_window_packets: Option<f64>,
    /// Host pauses Rondo rides through, microseconds: tau_q is at least this, and
    /// a path's margin may grow to what its ACK rate brings in this time (default
    /// 0; for hosts that stall, `[host]`).
    pub stall_allowance_us: Option<f64>,
    /// How close a forward-delay sample must be to its estimate to count toward
    /// starting the packet scheduler, microseconds (default 2).
    pub delay_stable_tolerance_us: Option<f64>,
    /// The packet scheduler may start during a capacity-probing phase when its
    /// paths' forward delays span more than this, microseconds (default 15; 0:
    /// only after probing; `rondo_proto::FlowConfig::scheduler_start_gap`).
    pub scheduler_start_gap_us: Option<f64>,
    /// The packet scheduler corrects each path's delay by the packets in
    /// flight on it now (default true; `rondo_proto::FlowConfig::scheduler_ahead`).
    pub scheduler_ahead: Option<bool>,
    /// ARCC's update intervals without an ACK run on until one comes (default
    /// false; `rondo_proto::FlowConfig::intervals_run_on`).
    pub intervals_run_on: Option<bool>,
    /// A flow with nothing to send runs its controller's timers at its next
    /// event, each at its own time, instead of waking for each (default true:
    /// the simulator runs timers on time; off under `host.stall_*`, where
    /// hosts run them late; `rondo_proto::FlowConfig::timers_on_time`). The
    /// reports are the same either way; only `sim.events` and the run time
    /// change.
    pub timers_on_time: Option<bool>,
    /// Whether a "reorder buffer full" NAK holds new data within the
    /// receiver-limited span (default: the transport's choice,
    /// `rondo_proto::Transport::receiver_span`).
    pub receiver_span: Option<bool>,
    /// The receiver-limited span grows by one packet per this many PSNs
    /// delivered (default 4; 0: per span's worth; `rondo_proto::FlowConfig::receiver_span_step`).
    pub receiver_span_step: Option<u32>,
    /// Data packets one ACK acknowledges at most (1: an ACK per packet; default:
    /// the transport's choice, `rondo_proto::Transport::ack_coalesce`).
    pub ack_coalesce_packets: Option<u16>,
    /// The longest a data packet's ACK waits for others to share it,
    /// microseconds (default: the transport's choice).
    pub ack_coalesce_us: Option<f64>,
    /// DCQCN's additive-increase step R_AI, a fraction of the line rate.
    pub dcqcn_rai: Option<f64>,
    /// DCQCN's hyper-increase step R_HAI, a fraction of the line rate.
    pub dcqcn_rhai: Option<f64>,
    /// DCQCN's rate-increase timer, microseconds.
    pub dcqcn_increase_timer_us: Option<f64>,
    /// Swift's flow-scaling range, a multiple of the base RTT.
    pub swift_fs_range: Option<f64>,
    /// Swift's additive increase, packets per RTT.
    pub swift_ai: Option<f64>,
}

/// Whose margin q0 bounds (`transport.margin_scope`; [`rondo_proto::MarginScope`]).
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum MarginScopeSpec {
    /// q0 for the flow, shared by its paths in rotation.
    Flow,
    /// q0 for every path.
    #[default]
    Path,
}

/// Whose largest base RTT sets tau_q (`transport.tau_q_base`).
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum TauQBaseSpec {
    /// The topology's largest base RTT, one value for every flow.
    #[default]
    Network,
    /// The largest base RTT of the flow's own paths.
    Flow,
}

/// The least tau_q (`transport.tau_q_floor`).
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum TauQFloorSpec {
    /// One MTU's serialisation at the slowest link of the topology.
    #[default]
    Packet,
    /// No floor.
    None,
}

/// Where the base RTT of each path comes from (`transport.base_rtt`).
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum BaseRttSpec {
    /// `topology` for Rondo, whose ARCC takes T from the topology (paper
    /// §4.2.1) and whose probes confirm a longer one; `measured` for the other
    /// transports.
    #[default]
    Auto,
    /// The smallest RTT measured on the path.
    Measured,
    /// From the route of each logical path in the topology.
    Topology,
}

impl BaseRttSpec {
    /// Whether a flow of `transport` takes its base RTTs from the topology.
    pub fn from_topology(self, transport: rondo_proto::Transport) -> bool {
        match self {
            BaseRttSpec::Auto => transport == rondo_proto::Transport::RONDO,
            BaseRttSpec::Measured => false,
            BaseRttSpec::Topology => true,
        }
    }
}

/// When selective repeat declares a packet lost ([`rondo_proto::EarlyRecovery`]).
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum EarlyRecoverySpec {
    /// The PSN gap and the path's ACK deadline (default).
    #[default]
    GapAndRtt,
    /// The PSN gap alone (the paper's ER).
    Gap,
}

impl Default for TransportSpec {
    fn default() -> Self {
        TransportSpec {
            kind: TransportKind::RONDO,
            reorder_buffer_kb: 1200.0,
            scheduler: true,
            probing: true,
            probe_pacing_burst_packets: None,
            probe_pacing_after_refusal: None,
            paths: None,
            path_selection: PathSelectionSpec::Deficit,
            pacing: true,
            initial_window: None,
            q0: None,
            target_queue_rtts: None,
            alpha: None,
            gamma: None,
            early_recovery_threshold: None,
            rto_min_us: None,
            loss_recovery: LossRecoverySpec::SelectiveRepeat,
            update_interval_rtts: None,
            base_rtt: BaseRttSpec::Auto,
            early_recovery: EarlyRecoverySpec::GapAndRtt,
            tau_q_base: TauQBaseSpec::Network,
            tau_q_floor: TauQFloorSpec::Packet,
            margin_scope: MarginScopeSpec::Path,
            base_rtt_window_rtts: None,
            queue_rounding_packets: None,
            min_window_packets: None,
            stall_allowance_us: None,
            delay_stable_tolerance_us: None,
            scheduler_start_gap_us: None,
            scheduler_ahead: None,
            intervals_run_on: None,
            timers_on_time: None,
            receiver_span: None,
            receiver_span_step: None,
            ack_coalesce_packets: None,
            ack_coalesce_us: None,
            dcqcn_rai: None,
            dcqcn_rhai: None,
            dcqcn_increase_timer_us: None,
            swift_fs_range: None,
            swift_ai: None,
        }
    }
}

/// One or several workloads (`[workload]` or `[[workload]]`).
#[derive(Clone, Debug, PartialEq)]
pub struct Workloads(pub Vec<WorkloadSpec>);

impl<'de> Deserialize<'de> for Workloads {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct OneOrMany;
        impl<'de> Visitor<'de> for OneOrMany {
            type Value = Workloads;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a [workload] table or [[workload]] tables")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Workloads, A::Error> {
                let one = WorkloadSpec::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(Workloads(vec![one]))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Workloads, A::Error> {
                let many =
                    Vec::<WorkloadSpec>::deserialize(de::value::SeqAccessDeserializer::new(seq))?;
                Ok(Workloads(many))
            }
        }
        d.deserialize_any(OneOrMany)
    }
}

/// Flow-size distribution of a `poisson` workload.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum CdfName {
    /// WebSearch (DCTCP paper).
    Websearch,
    /// Facebook Hadoop.
    Hadoop,
}

/// `[workload]`: what the hosts send, selected by `kind`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WorkloadSpec {
    /// Flows from each sender to a receiver, long-lived unless `bytes` is set.
    LongFlows(LongFlowsSpec),
    /// N senders to one receiver.
    Incast(IncastSpec),
    /// Every host sends to one other host chosen by a seeded permutation.
    Permutation(PermutationSpec),
    /// MoE-like all-to-all within groups of hosts, with skewed expert popularity.
    AllToAll(AllToAllSpec),
    /// Poisson flow arrivals with sizes from a CDF, at a given load.
    Poisson(PoissonSpec),
    /// Single-path background flows.
    Background(BackgroundSpec),
    /// A training step's collectives over ring and all-to-all phases, each
    /// phase waiting for the last.
    Collective(CollectiveSpec),
}

impl WorkloadSpec {
    /// The table's `kind`, as the file writes it.
    pub fn kind(&self) -> &'static str {
        match self {
            WorkloadSpec::LongFlows(_) => "long_flows",
            WorkloadSpec::Incast(_) => "incast",
            WorkloadSpec::Permutation(_) => "permutation",
            WorkloadSpec::AllToAll(_) => "all_to_all",
            WorkloadSpec::Poisson(_) => "poisson",
            WorkloadSpec::Background(_) => "background",
            WorkloadSpec::Collective(_) => "collective",
        }
    }
}

/// `kind = "long_flows"`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LongFlowsSpec {
    /// Flows per sender.
    #[serde(default = "default_flows")]
    pub flows: u32,
    /// Sending hosts (indices).
    #[serde(default = "default_senders")]
    pub senders: Vec<usize>,
    /// Receiving hosts: sender i sends to `receivers[i % len]`.
    #[serde(default = "default_receivers")]
    pub receivers: Vec<usize>,
    /// Bytes per flow (default: long-lived, until `stop_us` or the end).
    pub bytes: Option<u64>,
    /// Start time, microseconds.
    #[serde(default)]
    pub start_us: f64,
    /// Stop time of long-lived flows, microseconds.
    pub stop_us: Option<f64>,
    /// Logical paths per flow (overrides `transport.paths`).
    pub paths: Option<u16>,
    /// `write` (default: the sender sends the data) or `read` (the sender is
    /// the requester: its requests go to the receiver, which sends the data
    /// back; at most the transport's limit of READs outstanding, 16 for the RC
    /// models).
    #[serde(default)]
    pub op: crate::Op,
    /// Bytes per message (per READ), default 256 KiB.
    pub message_bytes: Option<u64>,
    /// Messages a long-lived flow keeps posted (perftest's tx depth), default 4.
    pub tx_depth: Option<usize>,
}

fn default_senders() -> Vec<usize> {
    vec![0]
}
fn default_receivers() -> Vec<usize> {
    vec![1]
}

/// `kind = "incast"`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct IncastSpec {
    /// Number of senders.
    pub senders: usize,
    /// The receiving host.
    #[serde(default)]
    pub receiver: usize,
    /// First sending host; senders are the next hosts in order, skipping the receiver.
    #[serde(default)]
    pub first_sender: usize,
    /// Bytes per flow (default: long-lived).
    pub bytes: Option<u64>,
    /// Start time, microseconds.
    #[serde(default)]
    pub start_us: f64,
    /// Stop time of long-lived flows, microseconds.
    pub stop_us: Option<f64>,
    /// Logical paths per flow.
    pub paths: Option<u16>,
}

/// `kind = "permutation"`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PermutationSpec {
    /// Bytes per flow (default: long-lived).
    pub bytes: Option<u64>,
    /// Hosts taking part: the first `hosts` (default: all).
    pub hosts: Option<usize>,
    /// Start time, microseconds.
    #[serde(default)]
    pub start_us: f64,
    /// Stop time of long-lived flows, microseconds.
    pub stop_us: Option<f64>,
    /// Logical paths per flow.
    pub paths: Option<u16>,
}

/// `kind = "all_to_all"`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AllToAllSpec {
    /// Mean bytes each host sends to each other host of its group.
    pub bytes: u64,
    /// Hosts per group (consecutive hosts; default: all hosts in one group).
    pub group_size: Option<usize>,
    /// Instead of groups: each host sends to this many receivers drawn at random
    /// from all other hosts (seeded), wherever they sit (MoE-like expert traffic
    /// across pods).
    pub receivers: Option<usize>,
    /// Zipf exponent of expert popularity (0: every destination gets `bytes`).
    #[serde(default)]
    pub skew: f64,
    /// Start time, microseconds.
    #[serde(default)]
    pub start_us: f64,
    /// Logical paths per flow.
    pub paths: Option<u16>,
}

/// `kind = "poisson"`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PoissonSpec {
    /// Offered load as a fraction of each host's link rate, in (0, 1].
    pub load: f64,
    /// Built-in flow-size distribution (`websearch` or `hadoop`).
    pub cdf: Option<CdfName>,
    /// Own distribution instead: `[[bytes, cumulative_percent], ...]`.
    pub cdf_points: Option<Vec<[f64; 2]>>,
    /// Hosts taking part: the first `hosts` (default: all).
    pub hosts: Option<usize>,
    /// At most this many flows (default: as many as arrive before the stop).
    pub flows: Option<usize>,
    /// Arrivals start here, microseconds.
    #[serde(default)]
    pub start_us: f64,
    /// No arrivals after this, microseconds (default: `duration_us`).
    pub stop_us: Option<f64>,
    /// Logical paths per flow.
    pub paths: Option<u16>,
}

/// `kind = "background"`: flows pinned to one logical path.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BackgroundSpec {
    /// Sending host.
    pub src: usize,
    /// Receiving host.
    pub dst: usize,
    /// Number of flows.
    #[serde(default = "default_flows")]
    pub flows: u32,
    /// Bytes per flow (default: long-lived).
    pub bytes: Option<u64>,
    /// Start time, microseconds.
    #[serde(default)]
    pub start_us: f64,
    /// Stop time of long-lived flows, microseconds.
    pub stop_us: Option<f64>,
}

/// `kind = "collective"`: `ranks` hosts (`first_host`, `first_host + stride`,
/// ...) run `phases` in order; a phase starts when the previous one has
/// finished on every rank.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CollectiveSpec {
    /// Ranks taking part (2 or more).
    pub ranks: usize,
    /// Host of rank 0.
    #[serde(default)]
    pub first_host: usize,
    /// Host index distance between consecutive ranks (1: neighbours).
    #[serde(default = "default_stride")]
    pub stride: usize,
    /// The phases, in order.
    pub phases: Vec<PhaseSpec>,
    /// Start of the first phase, microseconds.
    #[serde(default)]
    pub start_us: f64,
    /// Logical paths per flow.
    pub paths: Option<u16>,
}

fn default_stride() -> usize {
    1
}

/// One phase of a `collective` workload.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct PhaseSpec {
    /// Which collective.
    pub op: CollectiveOp,
    /// Bytes per rank, as NCCL counts them: the vector reduced (`all_reduce`),
    /// the gathered output (`all_gather`), the input scattered
    /// (`reduce_scatter`), everything a rank sends (`all_to_all`).
    pub bytes: u64,
}

/// A collective operation (ring algorithms; all-to-all sends directly).
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum CollectiveOp {
    /// Ring all-reduce: 2 (n - 1) steps of bytes / n to the next rank.
    AllReduce,
    /// Ring all-gather: n - 1 steps of bytes / n.
    AllGather,
    /// Ring reduce-scatter: n - 1 steps of bytes / n.
    ReduceScatter,
    /// Every rank sends bytes / n to every other rank at once.
    AllToAll,
}

impl CollectiveOp {
    /// The name as scenario files write it.
    pub fn name(self) -> &'static str {
        match self {
            CollectiveOp::AllReduce => "all_reduce",
            CollectiveOp::AllGather => "all_gather",
            CollectiveOp::ReduceScatter => "reduce_scatter",
            CollectiveOp::AllToAll => "all_to_all",
        }
    }
}

/// What a timed event does to a link.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum EventAction {
    /// Set the link's rate to `gbps`.
    Rate,
    /// Set the link's one-way delay to `delay_us`.
    Delay,
    /// The link drops everything.
    Fail,
    /// The link works again.
    Restore,
}

/// `[[events]]`: a link change at a given time. Name the link with `path` (the
/// parallel topology's path i, host 0 to host 1; fig2's uplink from the senders'
/// leaf to spine i) or with `link` and `index`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct EventSpec {
    /// When, microseconds.
    pub at_us: f64,
    /// Which path's link.
    pub path: Option<usize>,
    /// Which kind of link (with `index`; see [`LinkKind`] for the numbering).
    pub link: Option<LinkKind>,
    /// Index of the link within its kind.
    pub index: Option<usize>,
    /// Instead of `index`: this percentage of the links of kind `link`, drawn at
    /// random (seeded by the scenario's seed, the kind and the percentage, so two
    /// events with the same `link` and `percent`, a `fail` and its `restore`,
    /// name the same links).
    pub percent: Option<f64>,
    /// What happens.
    pub action: EventAction,
    /// New rate for `action = "rate"`, Gbit/s.
    pub gbps: Option<f64>,
    /// New one-way delay for `action = "delay"`, microseconds.
    pub delay_us: Option<f64>,
}
