//! Engine configuration: every parameter of paper §6.2.1, with the paper's values as
//! defaults, and a switch for each mechanism so ablations are possible.

use crate::time::Duration;
use thiserror::Error;

/// How the sender picks the path of each transmission (paper §4.2.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathSelection {
    /// Deficit-based selection over open windows (Rondo).
    Deficit,
    /// Uniformly random among paths with an open window (ablation).
    Random,
}

/// Which side the ACK-rate EWMA weight `alpha` multiplies (DESIGN.md open point).
///
/// Settled by `tests/arcc.rs`: [`AlphaWeight::History`] is stable and is the default;
/// see `docs/engine.md`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AlphaWeight {
    /// `r = alpha * r + (1 - alpha) * sample`: heavy smoothing (default).
    History,
    /// `r = (1 - alpha) * r + alpha * sample`: light smoothing.
    Sample,
}

/// How ARCC estimates a path's queueing delay d_p (paper §4.2.1; see docs/engine.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueEstimate {
    /// Mean RTT of the update interval minus the base RTT (default): the same
    /// for every flow crossing a queue, no lag when shares change.
    Rtt,
    /// The paper's excess inflight over the smoothed ACK rate, (inflight_p - r_p T) / r_p.
    Inflight,
}

/// Whose margin q0 bounds (paper §4.2.1; docs/engine.md, "One margin per flow").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MarginScope {
    /// q0 is the flow's margin, shared by its paths in rotation: each path's margin
    /// starts at q0 / (4 P), grows by q0 / (4 P) and stops at q0 / P. A
    /// flow's share of a bottleneck does not grow with its number of paths.
    Flow,
    /// q0 per path, as the paper writes it (default): a flow over P paths takes
    /// up to P shares of a bottleneck that a one-path flow crosses with one
    /// (Proposition 1 is per logical path).
    Path,
}

/// When selective repeat's early recovery declares a packet lost
/// (docs/engine.md, "Loss recovery"; docs/baselines.md, "early recovery").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EarlyRecovery {
    /// The PSN gap beyond the threshold **and** the packet's path ACK deadline
    /// since it was sent (default).
    #[default]
    GapAndRtt,
    /// The PSN gap alone, as the paper's ER (Figs. 1a, 15, 16): a packet is lost
    /// once the receiver has seen a PSN more than the threshold beyond it. Only a
    /// first transmission; a retransmission also waits for its path's deadline.
    Gap,
}

/// How a receiver coalesces its ACKs (docs/engine.md, "Coalesced ACKs"): one ACK
/// datagram acknowledges up to `packets` data packets, sent at the latest `delay`
/// after the first of them arrived, batched per path; a retransmission, a
/// duplicate, a probe and a refusal (NAK) send their path's batch at once, the
/// last packet of a message every batch (with a delay above 0).
/// The sender counts every acknowledged packet in its ACK rate and takes one
/// RTT sample per path and ACK, less the time the receiver held it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckCoalesce {
    /// Data packets one ACK acknowledges at most (1: an ACK per packet).
    pub packets: u16,
    /// The longest an arrival waits for its ACK. 0 still coalesces what arrives
    /// at one instant (a datapath's receive batch) before the next transmit.
    pub delay: Duration,
}

impl AckCoalesce {
    /// An ACK per data packet (the paper's receiver).
    pub const PER_PACKET: AckCoalesce = AckCoalesce {
        packets: 1,
        delay: Duration::ZERO,
    };
    /// The most packets one ACK may acknowledge.
    pub const MAX_PACKETS: u16 = 64;

    /// Whether ACKs are coalesced at all.
    pub const fn is_on(&self) -> bool {
        self.packets > 1
    }
}

/// Per-flow configuration. `FlowConfig::default()` gives the paper's parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowConfig {
    /// The transport: which congestion control, path selection, packet selection,
    /// loss recovery and receiver policy the flow runs ([`crate::transport`]).
    /// The fields below are Rondo's parameters; other transports read the ones
    /// that apply to them (paths, MTU, RTO, ...).
    pub transport: crate::Transport,
    /// Number of logical paths P (1 to 1024).
    pub paths: u16,
    /// Largest datagram the engine emits, engine header included (a full data packet).
    pub mtu: usize,
    /// Host line rate in bits per second: probes fill spare capacity up to it.
    pub line_rate_bps: u64,
    /// Base RTT per path when known from the topology (paper §4.2.1, as in Swift).
    /// `None`: the smallest RTT measured on the path (it includes serialisation).
    pub base_rtt: Option<Vec<Duration>>,
    /// RTT assumed before the first measurement (pacing of the first packets, first RTO).
    pub initial_rtt: Duration,
    /// ARCC update interval as a fraction of the path's base RTT: Tu = 0.5 T.
    pub update_interval_rtts: f64,
    /// Margin ceiling q0, in packets (3 MTU).
    pub q0: f64,
    /// When set, ARCC's measured base RTT of a path expires after this many base
    /// RTTs: the smallest RTT of the last such window, when it is above it by
    /// more than `fast_correction_factor` x tau_q (a delay ARCC would have
    /// drained were it a queue), becomes a candidate that probes served on the
    /// path confirm (a standing queue at a busy bottleneck serves none), so a
    /// path whose delay grew is sized for its new RTT; without `probing` it
    /// replaces the base RTT at once. `None` (default): the smallest RTT ever
    /// seen. The simulator sets 10 (docs/engine.md, "A base RTT that probes
    /// confirm", issue 12 row 5); the host profiles, over stacks without a
    /// low-priority class, keep `None`. With `probing` as well, a configured
    /// `base_rtt` is where ARCC's measurement starts and probes may confirm a
    /// longer one; otherwise a configured base RTT stands.
    pub base_rtt_window_rtts: Option<f64>,
    /// Packets of a path's excess inflight (inflight_p - r_p T_p) that ARCC's
    /// inflight-based queue estimate takes for the window's rounding rather than
    /// a queue; that estimate serves the intervals without an RTT sample. 0
    /// (default): the paper's Q_p = inflight_p - C_p. 1 undoes the start-up
    /// probing split on small windows (issue 12 row 2, docs/engine.md; off by
    /// default because it raises fig18's standing queue, row 6).
    pub queue_rounding_packets: f64,
    /// Whether q0 bounds each path's margin or the flow's ([`MarginScope`]).
    pub margin_scope: MarginScope,
    /// Target queueing delay as a fraction of the largest base RTT: tau_q = 0.04 T_max.
    pub target_queue_rtts: f64,
    /// The network's largest base RTT (paper §6.2.1's max_base_RTT), when the
    /// operator or the topology gives it: tau_q = `target_queue_rtts` x this for
    /// every flow, so flows with different base RTTs aim at the same queueing
    /// delay (App. E, Proposition 1; docs/engine.md, "One tau_q for the network").
    /// `None`: the largest base RTT of the flow's own paths.
    pub network_base_rtt: Option<Duration>,
    /// The least tau_q: one MTU's serialisation at the slowest link of the
    /// network, when the driver knows it (the simulator does). A tau_q below one
    /// packet's service time reads every packet waiting at that link as a queue
    /// above target and cuts the margin (docs/engine.md, "tau_q of at least one
    /// packet"). `None`: no floor.
    pub min_target_queue: Option<Duration>,
    /// Pauses of the hosts' datapath threads that a flow rides through without
    /// losing the link (0, the default: the paper's NIC, which never pauses). A
    /// software datapath on a loaded host stops for milliseconds while its thread
    /// waits for a core; with margins of q0 packets the bottleneck queue drains in
    /// each pause, and the delayed ACKs read as a queue far above tau_q and cut the
    /// windows. With an allowance S, tau_q is at least S and each path's margin may
    /// grow past q0 to what its ACK rate brings in S (r_p S), so every path keeps
    /// about S of queue: the price of a full link on such a host. A receiver
    /// that refuses packets ("buffer full") halves it, once per RTT
    /// (docs/engine.md, "Hosts that pause").
    pub stall_allowance: Duration,
    /// ACK-rate EWMA weight alpha = 0.8.
    pub alpha: f64,
    /// Which side alpha weights.
    pub alpha_weight: AlphaWeight,
    /// Window EWMA gain gamma = 0.5.
    pub gamma: f64,
    /// How the queueing delay d_p is estimated.
    pub queue_estimate: QueueEstimate,
    /// An estimated queueing delay above this multiple of tau_q sets W = W* at once.
    pub fast_correction_factor: f64,
    /// Initial window per path, in packets (W0 >= q0 / 4).
    pub initial_window: f64,
    /// Smallest per-path window, in packets (1). Rondo honours windows below
    /// one packet: after each send such a path waits its smoothed RTT / W_p,
    /// and its update intervals run on until an ACK falls into one
    /// (docs/engine.md, "Windows below one packet"; issue 12 row 6).
    pub min_window: f64,
    /// Capacity probing on or off (paper §4.2.2).
    pub probing: bool,
    /// When set, the data that probe ACKs buy is paced per path: while the path
    /// holds probe credit (probe ACKs not yet folded into its window), and for
    /// one base RTT after the update that folds them in, a path with more than
    /// this many packets of open window waits T_p / (1.25 W_p) after each send,
    /// so a window that jumps by the capacity probing found is filled at 1.25
    /// times the path's new rate instead of at the flow pacer's (which the other
    /// paths' windows share).
    /// `None` (default, the paper): probe-bought packets go as fast as the flow
    /// pacer lets them, and a long path's jump queues at its bottleneck
    /// (docs/engine.md, issue 12 row 3).
    pub probe_pacing_burst: Option<f64>,
    /// Once the receiver has refused a packet for want of reorder-buffer room
    /// ("buffer full"), pace what probe ACKs buy as `probe_pacing_burst` of 0
    /// does, unless that is set (true by default). A flow that overran the
    /// receiver's buffer must not overrun it again each time probing opens its
    /// windows: on paths whose delays differ the probe-bought packets of a long
    /// path land far ahead of the hole (issue 12 row 4; docs/engine.md, "Small
    /// reorder buffers on unequal paths"). A flow the receiver never refuses is
    /// unchanged.
    pub probe_pacing_after_refusal: bool,
    /// Length of a probing phase in base RTTs (3).
    pub probe_duration_rtts: f64,
    /// Consecutive updates with everything older than one base RTT acknowledged
    /// that trigger a probing phase (5).
    pub probe_trigger_updates: u32,
    /// Path selection (deficit, or random spraying for ablation).
    pub path_selection: PathSelection,
    /// Packets in a row the deficit selector gives one path while its window
    /// stays open, its deficits kept as if it had chosen each one (1, the
    /// default: the paper's packet-by-packet spreading). A host stack's datapath
    /// sends and receives each path's packets in per-path batches, so runs of
    /// consecutive PSNs per path arrive in order where packet-by-packet
    /// spreading arrives as interleaved batches (the UDP host profile:
    /// `rondo_ud::HostProfile`).
    pub path_burst: u32,
    /// Packet scheduler on or off (paper §4.3).
    pub scheduler: bool,
    /// Count the other paths' upcoming transmissions from their phase (last send
    /// plus one interval) at every transmission, instead of eq. (7)'s fluid count
    /// refreshed every Tu.
    pub scheduler_phase: bool,
    /// Consecutive stable forward-delay samples per path before the scheduler starts.
    pub scheduler_stable_samples: u32,
    /// A forward-delay sample is stable when within this of the estimate.
    pub delay_stable_tolerance: Duration,
    /// The scheduler may also start during a capacity-probing phase, once every
    /// path has its stable samples, when the paths' forward delays span more than
    /// this (`None`: only after probing). A probing phase lasts
    /// `probe_duration_rtts` of the flow's largest base RTT, so a flow with a much
    /// slower path waits longest exactly where the scheduler matters most;
    /// docs/engine.md "The scheduler during probing (row 8)".
    pub scheduler_start_gap: Option<Duration>,
    /// The packet scheduler reads each path's delay for a transmission now as
    /// its forward-delay estimate corrected by the packets in flight on the path
    /// now against those the estimate's packets found ahead of them, at the
    /// path's rate (on paths that keep at least [`AHEAD_MIN_PACKETS`] in flight
    /// on average, where the flow's own packets are the queue; beyond one
    /// packet, and by at most a quarter of those ahead). On by default;
    /// docs/engine.md "Packets ahead (row 7)".
    ///
    /// [`AHEAD_MIN_PACKETS`]: crate::scheduler::AHEAD_MIN_PACKETS
    pub scheduler_ahead: bool,
    /// ARCC's update intervals that hold no ACK run on, with no timer, until
    /// an ACK falls into one, and the update it then brings counts for as many
    /// intervals as it lasted (the EWMAs keep their weight to that power, the
    /// margin's increase and decrease are applied that many times). Off by
    /// default (the paper updates every Tu, measuring a rate of zero in an
    /// empty interval). On, a path whose round trip spans many update
    /// intervals (an incast's standing queue) is not woken at each of them:
    /// the 320-host all-to-all runs 1.8x faster. Reports move both ways
    /// (docs/engine.md, "Intervals that run on").
    pub intervals_run_on: bool,
    /// EWMA gain of the forward-delay and RTT estimates.
    pub delay_gain: f64,
    /// Flow-level pacing on or off.
    pub pacing: bool,
    /// Packets the pacer (and the probe clock) may send back to back after falling
    /// behind: a driver that polls every few microseconds and sends in batches (the
    /// UDP datapath: 16 to 32) needs the credit, or it sends one packet per poll.
    /// 1 (the default): no credit, every packet waits for its own pacing slot.
    pub pacing_burst: u32,
    /// Early recovery: a packet is lost when the receiver has seen a PSN this many
    /// beyond it (and its path's RTT has passed since it was sent).
    pub early_recovery_threshold: u32,
    /// Whether early recovery also waits for the path's RTT ([`EarlyRecovery`]).
    pub early_recovery: EarlyRecovery,
    /// Selective repeat also declares a packet lost when a packet sent after it
    /// on its own path has been acknowledged there, once its path's ACK deadline
    /// has passed: each path is a FIFO (a UDP socket pair, one ECMP route), so
    /// the later packet's ACK says the earlier one is not coming. For datapaths
    /// that reorder between paths by far more than the network loses (a host
    /// stack's per-path batches), whose PSN threshold is then too large to see
    /// a loss among a few small messages (docs/udp.md, "Loss among small
    /// messages"). Off by default (the paper's early recovery).
    pub path_order_loss: bool,
    /// Smallest retransmission timeout.
    pub rto_min: Duration,
    /// Largest retransmission timeout, backoff included (`None`: no limit). A verbs
    /// QP sets its local ACK timeout here, so that the engine resends at least as
    /// often as an RC NIC with that `timeout` would (docs/verbs.md, "Statuses").
    pub rto_max: Option<Duration>,
    /// Retransmission timeouts in a row without progress before "retry exceeded".
    pub retry_limit: u32,
    /// Packets lost in a row on one path (no ACK between) that take it out of rotation.
    pub path_down_losses: u32,
    /// Interval between probes on a path that is out of rotation.
    pub down_probe_interval: Duration,
    /// First PSN (tests start near 2^32 to cross the wrap).
    pub initial_psn: u32,
    /// Largest message accepted by `post` and by the receiver.
    pub max_message_len: u64,
    /// Seed of the flow's random choices.
    pub seed: u64,
    /// Connection token agreed at connect time (random, from the descriptor exchange).
    /// When set, every datagram the connection emits carries it in a token extension
    /// (`docs/wire.md`), and the endpoint drops datagrams for this flow whose token is
    /// missing or different ([`DatagramError::BadToken`](crate::DatagramError::BadToken)).
    /// `None` (the default): no token is sent and none is checked.
    pub token: Option<u64>,
    /// Switches on the flow's paths, when the topology is known (the simulator sets
    /// it from the route). Swift's target delay grows by a per-hop term with it;
    /// `None` (the default, over UDP and verbs): no per-hop term, the base RTT
    /// alone stands for the topology.
    pub hops: Option<u16>,
    /// Loss recovery of transports that let it be chosen (Rondo, swift-rps):
    /// selective repeat (the default) or RACK-TLP per flow or per path.
    pub loss_recovery: LossRecoveryKind,
    /// Whether a "reorder buffer full" NAK holds new PSNs within a span of what
    /// the receiver could take (the receiver-limited span, `sender/loss.rs`).
    /// `None` (the default): the transport's own choice,
    /// [`crate::Transport::receiver_span`].
    pub receiver_span: Option<bool>,
    /// How the receiver-limited span grows back: by one packet per this many
    /// PSNs delivered in order (4, the default); 0: per span's worth delivered,
    /// an additive increase of one packet per span. A small step regrows a span
    /// halved by a start-up refusal within a few spans, which a sender whose
    /// slow path must run far ahead needs (issue 12 row 4, with
    /// `probe_pacing_after_refusal`; docs/engine.md, "Small reorder buffers on
    /// unequal paths").
    pub receiver_span_step: u32,
    /// DCQCN's parameters (`ecmp`, `ar` and the RC models; docs/baselines.md,
    /// "DCQCN", has the sweep behind the defaults).
    pub dcqcn: crate::cc::DcqcnParams,
    /// Swift's parameters (`swift-rps`, `falcon`; docs/baselines.md, "swift-rps").
    pub swift: crate::cc::SwiftParams,
    /// How this side's receiver coalesces ACKs. `None` (the default): the
    /// transport's own choice, [`crate::Transport::ack_coalesce`].
    pub ack_coalesce: Option<AckCoalesce>,
    /// The driver runs every timer at its deadline, as the simulator does
    /// without host stalls. A flow with nothing to send then leaves its
    /// congestion controller's deadlines out of `poll_timeout` and runs them
    /// at its next datagram, post or timer, each at its own time and in order:
    /// the same updates, without a wake-up for each (`Sender::catch_up`;
    /// docs/engine.md, "Timers of a flow with nothing to send"). Off (the
    /// default) wherever timers can run late (sockets, a NIC's host, simulated
    /// host stalls): updates replayed after a late host's pause would find
    /// none of the ACKs that wait for it, and shrink the windows.
    pub timers_on_time: bool,
}

/// Which loss-recovery scheme a flow runs (`transport.loss_recovery`; paper
/// Figs. 15 and 16).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LossRecoveryKind {
    /// Selective repeat with early recovery (a PSN threshold and a per-path ACK
    /// deadline) and an RTO: `"sr"`.
    #[default]
    SelectiveRepeat,
    /// RACK-TLP over the flow's PSN space: `"rack-flow"`.
    RackFlow,
    /// RACK-TLP per path: `"rack-path"`.
    RackPath,
}

impl Default for FlowConfig {
    fn default() -> Self {
        FlowConfig {
            transport: crate::Transport::RONDO,
            paths: 4,
            mtu: 1500,
            line_rate_bps: 100_000_000_000,
            base_rtt: None,
            initial_rtt: Duration::from_us(20),
            update_interval_rtts: 0.5,
            q0: 3.0,
            base_rtt_window_rtts: None,
            queue_rounding_packets: 0.0,
            margin_scope: MarginScope::Path,
            target_queue_rtts: 0.04,
            network_base_rtt: None,
            min_target_queue: None,
            stall_allowance: Duration::ZERO,
            alpha: 0.8,
            alpha_weight: AlphaWeight::History,
            gamma: 0.5,
            queue_estimate: QueueEstimate::Rtt,
            fast_correction_factor: 4.0,
            initial_window: 1.0,
            min_window: 1.0,
            probing: true,
            probe_pacing_burst: None,
            probe_pacing_after_refusal: true,
            probe_duration_rtts: 3.0,
            probe_trigger_updates: 5,
            path_selection: PathSelection::Deficit,
            scheduler: true,
            scheduler_phase: true,
            scheduler_stable_samples: 8,
            delay_stable_tolerance: Duration::from_us(2),
            scheduler_start_gap: Some(Duration::from_us(15)),
            scheduler_ahead: true,
            intervals_run_on: false,
            delay_gain: 0.125,
            pacing: true,
            pacing_burst: 1,
            path_burst: 1,
            early_recovery_threshold: 4,
            early_recovery: EarlyRecovery::GapAndRtt,
            path_order_loss: false,
            rto_min: Duration::from_us(500),
            rto_max: None,
            retry_limit: 8,
            path_down_losses: 8,
            down_probe_interval: Duration::from_us(200),
            initial_psn: 0,
            max_message_len: 1 << 32,
            seed: 1,
            token: None,
            hops: None,
            loss_recovery: LossRecoveryKind::SelectiveRepeat,
            receiver_span: None,
            receiver_span_step: 4,
            dcqcn: crate::cc::DcqcnParams::default(),
            swift: crate::cc::SwiftParams::default(),
            ack_coalesce: None,
            timers_on_time: false,
        }
    }
}

/// A configuration value out of range.
#[derive(Debug, Error, Clone, PartialEq)]
#[non_exhaustive]
pub enum ConfigError {
    /// A parameter has a value outside what the engine supports.
    #[error("invalid configuration: `{name}` = {value} ({allowed})")]
    OutOfRange {
        /// Parameter name as in `FlowConfig`.
        name: &'static str,
        /// The value given.
        value: String,
        /// What is allowed.
        allowed: &'static str,
    },
}

/// A value written with `{:?}`, but only when a message needs it: `validate`
/// runs at every connection's opening, and the all-to-all of 102,080 flows spent
/// 1.6% of its run formatting values that were in range.
struct Debugged<T>(T);

impl<T: std::fmt::Debug> std::fmt::Display for Debugged<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

fn check(
    ok: bool,
    name: &'static str,
    value: impl ToString,
    allowed: &'static str,
) -> Result<(), ConfigError> {
    if ok {
        Ok(())
    } else {
        Err(ConfigError::OutOfRange {
            name,
            value: value.to_string(),
            allowed,
        })
    }
}

/// The largest [`FlowConfig::mtu`] the engine accepts (a UDP datagram's limit): a
/// transmit buffer of this many bytes serves every flow.
pub const MAX_MTU: usize = 65_535;

impl FlowConfig {
    /// Checks every parameter; the engine refuses a configuration that fails this.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check(
            (1..=1024).contains(&self.paths),
            "paths",
            self.paths,
            "1 to 1024",
        )?;
        check(
            (crate::wire::DATA_HEADER_LEN + 1..=MAX_MTU).contains(&self.mtu),
            "mtu",
            self.mtu,
            "data header + 1 to 65535 bytes",
        )?;
        check(
            self.mtu > crate::wire::DATA_HEADER_LEN + crate::wire::token_overhead(self.token),
            "mtu",
            self.mtu,
            "with a token: data header + 12 + 1 bytes or more",
        )?;
        check(
            self.line_rate_bps > 0,
            "line_rate_bps",
            self.line_rate_bps,
            "> 0",
        )?;
        if let Some(rtts) = &self.base_rtt {
            check(
                rtts.len() == self.paths as usize,
                "base_rtt",
                rtts.len(),
                "one per path",
            )?;
            check(
                rtts.iter().all(|d| *d > Duration::ZERO),
                "base_rtt",
                "0",
                "> 0",
            )?;
        }
        check(self.initial_rtt > Duration::ZERO, "initial_rtt", "0", "> 0")?;
        check(
            self.network_base_rtt != Some(Duration::ZERO),
            "network_base_rtt",
            "0",
            "> 0, or None",
        )?;
        check(
            self.min_target_queue != Some(Duration::ZERO),
            "min_target_queue",
            "0",
            "> 0, or None",
        )?;
        check(
            self.stall_allowance <= Duration::from_ms(1000),
            "stall_allowance",
            Debugged(self.stall_allowance),
            "0 to 1 s",
        )?;
        let unit = |x: f64| x.is_finite() && x > 0.0 && x <= 1.0;
        check(
            self.update_interval_rtts.is_finite() && self.update_interval_rtts > 0.0,
            "update_interval_rtts",
            self.update_interval_rtts,
            "> 0",
        )?;
        check(
            self.base_rtt_window_rtts
                .is_none_or(|x| x.is_finite() && x > 0.0),
            "base_rtt_window_rtts",
            Debugged(self.base_rtt_window_rtts),
            "> 0, or None",
        )?;
        check(
            self.probe_pacing_burst
                .is_none_or(|x| x.is_finite() && x >= 0.0),
            "probe_pacing_burst",
            Debugged(self.probe_pacing_burst),
            ">= 0 packets, or None",
        )?;
        check(
            self.queue_rounding_packets.is_finite() && self.queue_rounding_packets >= 0.0,
            "queue_rounding_packets",
            self.queue_rounding_packets,
            ">= 0 packets",
        )?;
        check(
            self.q0.is_finite() && self.q0 > 0.0,
            "q0",
            self.q0,
            "> 0 packets",
        )?;
        check(
            unit(self.target_queue_rtts),
            "target_queue_rtts",
            self.target_queue_rtts,
            "in (0, 1]",
        )?;
        check(
            self.alpha.is_finite() && (0.0..1.0).contains(&self.alpha),
            "alpha",
            self.alpha,
            "in [0, 1)",
        )?;
        check(unit(self.gamma), "gamma", self.gamma, "in (0, 1]")?;
        check(
            self.fast_correction_factor.is_finite() && self.fast_correction_factor > 1.0,
            "fast_correction_factor",
            self.fast_correction_factor,
            "> 1",
        )?;
        check(
            self.initial_window.is_finite() && self.initial_window >= self.q0 / 4.0,
            "initial_window",
            self.initial_window,
            ">= q0 / 4 (paper App. C.3)",
        )?;
        check(
            self.min_window.is_finite()
                && self.min_window > 0.0
                && self.min_window <= self.initial_window,
            "min_window",
            self.min_window,
            "in (0, initial_window]",
        )?;
        check(
            self.probe_duration_rtts.is_finite() && self.probe_duration_rtts > 0.0,
            "probe_duration_rtts",
            self.probe_duration_rtts,
            "> 0",
        )?;
        check(
            self.probe_trigger_updates > 0,
            "probe_trigger_updates",
            0,
            ">= 1",
        )?;
        check(
            self.scheduler_stable_samples > 0,
            "scheduler_stable_samples",
            0,
            ">= 1",
        )?;
        check(
            self.scheduler_start_gap.is_none_or(|g| g > Duration::ZERO),
            "scheduler_start_gap",
            Debugged(self.scheduler_start_gap),
            "None or more than 0",
        )?;
        check(
            unit(self.delay_gain),
            "delay_gain",
            self.delay_gain,
            "in (0, 1]",
        )?;
        check(
            self.early_recovery_threshold > 0,
            "early_recovery_threshold",
            0,
            ">= 1",
        )?;
        check(self.rto_min > Duration::ZERO, "rto_min", "0", "> 0")?;
        if let Some(max) = self.rto_max {
            check(max >= self.rto_min, "rto_max", Debugged(max), ">= rto_min")?;
        }
        check(self.retry_limit > 0, "retry_limit", 0, ">= 1")?;
        check(self.pacing_burst > 0, "pacing_burst", 0, ">= 1")?;
        check(
            (1..=1024).contains(&self.path_burst),
            "path_burst",
            self.path_burst,
            "1 to 1024 packets",
        )?;
        check(self.path_down_losses > 0, "path_down_losses", 0, ">= 1")?;
        check(
            self.down_probe_interval > Duration::ZERO,
            "down_probe_interval",
            "0",
            "> 0",
        )?;
        check(self.max_message_len > 0, "max_message_len", 0, ">= 1")?;
        if let Some(a) = self.ack_coalesce {
            check(
                (1..=AckCoalesce::MAX_PACKETS).contains(&a.packets),
                "ack_coalesce.packets",
                a.packets,
                "1 to 64",
            )?;
            check(
                a.delay <= Duration::from_ms(100),
                "ack_coalesce.delay",
                Debugged(a.delay),
                "0 to 100 ms",
            )?;
        }
        Ok(())
    }

    /// How this flow's receiver acknowledges: [`FlowConfig::ack_coalesce`], else
    /// its transport's choice.
    pub fn ack_coalescing(&self) -> AckCoalesce {
        self.ack_coalesce
            .unwrap_or_else(|| self.transport.ack_coalesce())
    }

    /// Payload bytes carried by a full data packet (the token extension, when set,
    /// takes its share of the MTU).
    pub fn payload_per_packet(&self) -> usize {
        self.mtu - crate::wire::DATA_HEADER_LEN - crate::wire::token_overhead(self.token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_papers_and_valid() {
        let c = FlowConfig::default();
        c.validate().unwrap();
        assert_eq!(c.update_interval_rtts, 0.5);
        assert_eq!(c.q0, 3.0);
        assert_eq!(c.target_queue_rtts, 0.04);
        assert_eq!(c.alpha, 0.8);
        assert_eq!(c.gamma, 0.5);
        assert_eq!(c.early_recovery_threshold, 4);
    }

    #[test]
    fn bad_values_are_named() {
        let c = FlowConfig {
            paths: 0,
            ..FlowConfig::default()
        };
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("`paths`"), "{e}");
        let c = FlowConfig {
            initial_window: 0.5,
            ..FlowConfig::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("initial_window"));
        let c = FlowConfig {
            alpha: 1.0,
            ..FlowConfig::default()
        };
        assert!(c.validate().is_err());
        let c = FlowConfig {
            mtu: 10,
            ..FlowConfig::default()
        };
        assert!(c.validate().is_err());
        let c = FlowConfig {
            base_rtt: Some(vec![Duration::from_us(1)]),
            ..FlowConfig::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("one per path"));
        let c = FlowConfig {
            scheduler_start_gap: Some(Duration::ZERO),
            ..FlowConfig::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("`scheduler_start_gap`"));
        let c = FlowConfig {
            scheduler_start_gap: None,
            ..FlowConfig::default()
        };
        c.validate().unwrap();
        let c = FlowConfig {
            rto_max: Some(Duration::from_us(100)),
            ..FlowConfig::default()
        };
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("`rto_max`") && e.contains(">= rto_min"), "{e}");
    }
}
