//! ARCC: Rondo's ACK-rate-based congestion control per path (paper §4.2.1) with
//! low-priority capacity probing (§4.2.2).

use super::{AckSample, CongestionControl, FlowView, Tick};
use crate::config::{AlphaWeight, FlowConfig, MarginScope, QueueEstimate};
use crate::path::{max_base_rtt, PathStatus, Paths};
use crate::time::{Duration, Instant};
use crate::wire::NakReason;

/// Probe ACKs of a path whose shortest round trip confirms (or refutes) a
/// longer base RTT (`Arcc::confirm_base_rtt`).
const CONFIRMING_PROBES: u32 = 4;

/// Shortest ARCC update interval, whatever the RTT samples say.
const MIN_UPDATE_INTERVAL: Duration = Duration::from_us(1);

/// How much faster than its window's rate W_p / T_p a path fills a window that
/// probe ACKs opened, with `FlowConfig::probe_pacing_burst` (Linux paces TCP at
/// 1.2 cwnd / srtt in congestion avoidance for the same reason: a little above
/// the rate, so the pacer never holds the window back, without a burst).
const PROBE_PACING_GAIN: f64 = 1.25;

/// What one ARCC update saw and decided (for tests and traces).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ArccUpdate {
    /// ACK-rate sample of the interval, packets per microsecond (data and probe ACKs).
    pub sample: f64,
    /// Estimated queue Q_p in packets.
    pub queue: f64,
    /// Estimated queueing delay d_p in microseconds (infinite when r_p = 0).
    pub queue_delay_us: f64,
    /// Whether the update set W = W* directly.
    pub direct: bool,
}

/// The ARCC parameters that apply to every path of a flow.
#[derive(Clone, Copy, Debug)]
struct ArccParams {
    /// Margin ceiling of one path: q0, or q0 / P with one margin per flow.
    q0: f64,
    tau_q: Duration,
    alpha: f64,
    alpha_weight: AlphaWeight,
    gamma: f64,
    fast_correction_factor: f64,
    min_window: f64,
    queue_estimate: QueueEstimate,
    /// Excess inflight the inflight-based estimate takes for window rounding.
    rounding: f64,
    /// Host pauses to ride through (`FlowConfig::stall_allowance`), microseconds.
    stall_allowance_us: f64,
}

/// What a pass over every path reads of ARCC's state of one path (the open
/// windows, the pacing rate): kept apart from the rest ([`ArccPath`]), dense.
#[derive(Clone, Copy, Debug)]
struct Allowance {
    /// Window W_p in packets.
    window: f64,
    /// Extra data packets allowed by probe ACKs before the next update (§4.2.2).
    probe_credit: u32,
    /// The path is shut after a send until its gate opens ([`ArccPath::gate`]).
    gated: bool,
}

impl Allowance {
    /// A path's allowance at the start: W0, no credit.
    fn new(initial_window: f64) -> Allowance {
        Allowance {
            window: initial_window,
            probe_credit: 0,
            gated: false,
        }
    }

    /// O_p: what the path may send with `inflight` packets in flight.
    fn open(&self, inflight: u32) -> f64 {
        if self.gated {
            0.0
        } else {
            (self.packets() - inflight as f64).max(0.0)
        }
    }

    /// W_p plus the probe credit.
    fn packets(&self) -> f64 {
        self.window + self.probe_credit as f64
    }
}

/// ARCC's state of one path, besides its [`Allowance`].
#[derive(Clone, Debug)]
struct ArccPath {
    /// Margin q_p in packets.
    margin: f64,
    /// ACK rate r_p, packets per microsecond.
    ack_rate: f64,
    /// Data transmissions per microsecond, EWMA over update intervals.
    send_rate: f64,
    /// Sum of the interval's RTT samples, picoseconds.
    interval_rtt_sum_ps: u64,
    interval_rtt_samples: u32,
    /// Sum of the interval's data ACKs' receiver holds, picoseconds (over
    /// `acks_in_interval` of them).
    interval_hold_sum_ps: u64,
    /// H_p: how long the receiver holds a packet before acknowledging it,
    /// microseconds, smoothed as r_p. 0 with an ACK per packet; with coalesced
    /// ACKs the ACK clock runs over T_p + H_p, and so does the pipe.
    hold_us: f64,
    sent_in_interval: u32,
    updates: u64,
    acks_in_interval: u32,
    probe_acks_in_interval: u32,
    interval_start: Instant,
    /// The interval ran out with no ACK in it and runs on, with no timer,
    /// until an ACK falls into it (see `Arcc::on_tick`).
    awaiting_ack: bool,
    /// An ACK ended an interval that ran on: the update it brings counts for
    /// as many intervals as the interval lasted.
    ran_on: bool,
    /// Set once an update has folded probe ACKs into the window: from then on
    /// probe ACKs no longer grant extra packets (until the next probing phase).
    probe_absorbed: bool,
    /// Measured base RTT T_p (smallest RTT, expiring: see `on_rtt`).
    min_rtt: Option<Duration>,
    /// Smallest RTT of the current expiry window, and when that window ends.
    window_min: Option<Duration>,
    window_end: Option<Instant>,
    /// A larger base RTT the expiry rule found, waiting for a probe ACK of the
    /// path to confirm it (a probe is served only when the data queue is empty).
    base_candidate: Option<Duration>,
    /// Probe ACKs of the path since the candidate, and their shortest round
    /// trip (a probe waits for the capacity data leaves: one round trip may
    /// hold a queue draining, the shortest of several is the path's).
    candidate_probes: u32,
    candidate_probe_min: Option<Duration>,
    /// With a window W_p below one packet, the path's next send waits until
    /// its smoothed RTT / W_p after its last one: one packet in flight for a fraction W_p
    /// of the time, so the path's rate falls as its RTT grows, as a window's does
    /// (issue 12 row 6). Also the spacing of packets that probe ACKs bought
    /// (`FlowConfig::probe_pacing_burst`).
    gate: Option<Instant>,
    /// Until then the path fills what probe ACKs bought it paced
    /// (`FlowConfig::probe_pacing_burst`): one base RTT after the update that
    /// folded probe ACKs into its window (before it, while it holds probe
    /// credit).
    converting_until: Option<Instant>,
}

impl ArccPath {
    /// A path whose margin ceiling is `q0` packets.
    fn new(q0: f64, now: Instant) -> ArccPath {
        ArccPath {
            margin: q0 / 4.0, // paper App. C.3: q starts at a = q0/4
            ack_rate: 0.0,
            send_rate: 0.0,
            interval_rtt_sum_ps: 0,
            interval_rtt_samples: 0,
            interval_hold_sum_ps: 0,
            hold_us: 0.0,
            sent_in_interval: 0,
            updates: 0,
            acks_in_interval: 0,
            probe_acks_in_interval: 0,
            interval_start: now,
            awaiting_ack: false,
            ran_on: false,
            probe_absorbed: false,
            min_rtt: None,
            window_min: None,
            window_end: None,
            base_candidate: None,
            candidate_probes: 0,
            candidate_probe_min: None,
            gate: None,
            converting_until: None,
        }
    }

    /// An RTT sample at `now`. The base RTT follows a smaller sample at once; at
    /// the end of each window of `window_rtts` base RTTs, the window's smallest
    /// sample replaces it when it exceeds it by more than `grown` (the path's
    /// delay grew: a queue that large ARCC would have drained). With `confirm`
    /// (a flow that probes) it becomes a candidate instead, which a probe served
    /// on the path confirms ([`Arcc::confirm_base_rtt`]): a queue standing at a
    /// busy bottleneck looks the same in the RTT, but there no probe is served.
    /// Returns whether it holds a candidate that wants probes to confirm it.
    fn on_rtt(
        &mut self,
        now: Instant,
        rtt: Duration,
        window_rtts: Option<f64>,
        grown: Duration,
        confirm: bool,
    ) -> bool {
        let base = *self.min_rtt.get_or_insert(rtt);
        let base = if rtt < base {
            self.min_rtt = Some(rtt);
            self.clear_candidate();
            rtt
        } else {
            base
        };
        let Some(window_rtts) = window_rtts else {
            return false;
        };
        // A candidate is as long as the shortest RTT since it was found: where
        // a queue drains while probes are out, the samples shorten it.
        if let Some(c) = &mut self.base_candidate {
            *c = (*c).min(rtt);
        }
        let mut wants_probe = false;
        let wmin = self.window_min.map_or(rtt, |m| m.min(rtt));
        self.window_min = Some(wmin);
        match self.window_end {
            None => self.window_end = Some(now + base.mul_f64(window_rtts)),
            Some(end) if now >= end => {
                if wmin > base + grown {
                    if confirm {
                        self.base_candidate = Some(wmin);
                        wants_probe = true;
                    } else {
                        self.min_rtt = Some(wmin);
                    }
                } else {
                    self.clear_candidate();
                }
                self.window_min = None;
                let base = self.min_rtt.unwrap_or(rtt);
                self.window_end = Some(now + base.mul_f64(window_rtts));
            }
            Some(_) => {}
        }
        wants_probe
    }

    fn clear_candidate(&mut self) {
        self.base_candidate = None;
        self.candidate_probes = 0;
        self.candidate_probe_min = None;
    }

    /// One ARCC update of the path's `allow` at the end of an interval (paper
    /// §4.2.1, eqs. (5) and (19)), with `inflight` packets in flight on the path
    /// and update interval `tu`. Returns `None` when the path has had no ACK yet
    /// (no update before the first ACK).
    fn update(
        &mut self,
        allow: &mut Allowance,
        now: Instant,
        base_rtt: Duration,
        inflight: u32,
        p: &ArccParams,
        tu: Duration,
    ) -> Option<ArccUpdate> {
        let elapsed = now.saturating_since(self.interval_start);
        if elapsed == Duration::ZERO {
            return None;
        }
        // An interval that ran on until an ACK fell into it stands for the
        // `spans` intervals it lasted: the ACK-rate EWMA forgets and the
        // margin moves as over that many updates (each step as the last one's).
        let spans = if std::mem::take(&mut self.ran_on) && tu > Duration::ZERO {
            (elapsed.as_us_f64() / tu.as_us_f64()).max(1.0)
        } else {
            1.0
        };
        let acks = self.acks_in_interval + self.probe_acks_in_interval;
        if self.updates == 0 && acks == 0 {
            // Not a single ACK yet: keep W0 and wait.
            return None;
        }
        let sample = acks as f64 / elapsed.as_us_f64();
        let sent = self.sent_in_interval as f64 / elapsed.as_us_f64();
        self.send_rate = if self.updates == 0 {
            sent
        } else {
            smooth(self.send_rate, sent, p.alpha, 1.0 - p.alpha, spans)
        };
        self.sent_in_interval = 0;
        self.ack_rate = if self.updates == 0 {
            sample // start r_p from the first sample, not from 0
        } else {
            let (kept, taken) = match p.alpha_weight {
                AlphaWeight::History => (p.alpha, 1.0 - p.alpha),
                AlphaWeight::Sample => (1.0 - p.alpha, p.alpha),
            };
            smooth(self.ack_rate, sample, kept, taken, spans)
        };
        if self.acks_in_interval > 0 {
            let sample = self.interval_hold_sum_ps as f64 / self.acks_in_interval as f64 / 1e6;
            self.hold_us = if self.updates == 0 {
                sample
            } else {
                smooth(self.hold_us, sample, p.alpha, 1.0 - p.alpha, spans)
            };
            self.interval_hold_sum_ps = 0;
        }
        let t_us = base_rtt.as_us_f64();
        let tau_us = p.tau_q.as_us_f64();
        // C_p = r_p T, over T + H_p when the receiver holds its ACKs.
        let pipe = self.ack_rate * (t_us + self.hold_us);
        let queue = inflight as f64 - pipe; // Q_p = inflight_p - C_p
                                            // The window is held at packet granularity (a path may have ceil(W_p)
                                            // packets in flight), so with `rounding` = 1 an excess below one packet is
                                            // taken for rounding, not a queue: a path of one or two packets, whose
                                            // intervals often hold no RTT sample and fall back to this estimate,
                                            // otherwise reads its rounding as a queue of a third of an RTT and loses
                                            // its margin (issue 12 row 2).
        let excess = queue - p.rounding;
        let by_inflight = if self.ack_rate > 0.0 {
            (excess / self.ack_rate).max(0.0)
        } else if excess > 0.0 {
            f64::INFINITY
        } else {
            0.0
        };
        // Queueing delay d_p. The paper derives it from the excess inflight, Q_p / r_p;
        // with an EWMA-smoothed r_p that estimate lags when a flow's share changes
        // (a shrinking flow sees no queue and keeps its margin, a growing one sees
        // a large queue and cuts it), which stalls convergence to fairness. The
        // interval's mean RTT minus the base RTT measures the same queue without the
        // lag and is the same for every flow crossing it (App. C's assumption).
        // Q_p / r_p remains the fallback for intervals without RTT samples.
        let delay_us = if self.interval_rtt_samples > 0 {
            let avg = self.interval_rtt_sum_ps as f64 / self.interval_rtt_samples as f64 / 1e6;
            match p.queue_estimate {
                QueueEstimate::Rtt => (avg - t_us).max(0.0),
                QueueEstimate::Inflight => by_inflight,
            }
        } else {
            by_inflight
        };
        self.interval_rtt_sum_ps = 0;
        self.interval_rtt_samples = 0;
        // The margin's ceiling: q0, or what the ACK rate brings in the host's
        // stall allowance when that is more (0 unless configured).
        let q0 = p.q0.max(self.ack_rate * p.stall_allowance_us);
        if delay_us < tau_us {
            self.margin = (self.margin + spans * q0 / 4.0).min(q0);
        } else if delay_us.is_finite() {
            self.margin *= (tau_us / delay_us).powf(spans); // eq. (19), per interval
        } else {
            self.margin = q0 / 4.0;
        }
        let target = pipe + self.margin; // eq. (5): W* = r T + q
        let direct = self.updates == 0 || delay_us > p.fast_correction_factor * tau_us;
        allow.window = if direct {
            target
        } else {
            (1.0 - p.gamma) * allow.window + p.gamma * target
        };
        allow.window = allow.window.max(p.min_window);
        self.updates += 1;
        if self.probe_acks_in_interval > 0 {
            self.probe_absorbed = true;
            self.converting_until = Some(now + base_rtt);
        }
        self.acks_in_interval = 0;
        self.probe_acks_in_interval = 0;
        allow.probe_credit = 0;
        self.interval_start = now;
        Some(ArccUpdate {
            sample,
            queue,
            queue_delay_us: delay_us,
            direct,
        })
    }

    /// A fresh controller for a path back in rotation, with margin ceiling `q0`.
    fn restart(&mut self, allow: &mut Allowance, cfg: &Restart, q0: f64, now: Instant) {
        allow.window = cfg.initial_window;
        self.margin = q0 / 4.0;
        self.ack_rate = 0.0;
        self.awaiting_ack = false;
        self.ran_on = false;
        self.updates = 0;
        self.acks_in_interval = 0;
        self.interval_hold_sum_ps = 0;
        self.probe_acks_in_interval = 0;
        self.interval_start = now;
        allow.probe_credit = 0;
        self.probe_absorbed = false;
        allow.gated = false;
        self.gate = None;
        self.converting_until = None;
    }
}

/// One EWMA step, `kept` x `old` + `taken` x `new`; over an interval that ran
/// on for `spans` > 1 update intervals, as that many steps of the same sample
/// (`old` keeps `kept`^`spans`).
fn smooth(old: f64, new: f64, kept: f64, taken: f64, spans: f64) -> f64 {
    if spans > 1.0 {
        let kept = kept.powf(spans);
        kept * old + (1.0 - kept) * new
    } else {
        kept * old + taken * new
    }
}

/// What ARCC keeps of the flow configuration.
#[derive(Clone, Copy, Debug)]
struct Restart {
    initial_window: f64,
    /// The configured q0 (of a path or of the flow, by `margin_scope`).
    q0: f64,
    margin_scope: MarginScope,
}

impl Restart {
    /// Margin ceiling of one path of `paths` (counted only when the margin is
    /// the flow's, shared by the paths in rotation).
    fn path_q0(&self, paths: &Paths) -> f64 {
        match self.margin_scope {
            MarginScope::Path => self.q0,
            MarginScope::Flow => self.q0 / paths.up().max(1) as f64,
        }
    }
}

/// Rondo's congestion controller: per path, every update interval Tu = 0.5 T_p
/// (paper §4.2.1), the ACK rate r_p sets the pipe r_p T_p and the margin q_p
/// follows the queueing delay against tau_q (eq. (19)); the window tends to
/// W*_p = r_p T_p + q_p (eq. (5)). The flow is paced at sum_p W_p / T_p. Capacity
/// probing (§4.2.2) runs at start and after quiet periods: probe ACKs count into
/// the ACK rate and each grants one extra data packet before the update that
/// absorbs them.
#[derive(Clone, Debug)]
pub struct Arcc {
    params: ArccParams,
    restart: Restart,
    initial_rtt: Duration,
    update_interval_rtts: f64,
    target_queue_rtts: f64,
    network_base_rtt: Option<Duration>,
    min_target_queue: Option<Duration>,
    base_rtt_window_rtts: Option<f64>,
    pacing: bool,
    probing_enabled: bool,
    /// `FlowConfig::intervals_run_on`.
    intervals_run_on: bool,
    probe_pacing_burst: Option<f64>,
    /// `FlowConfig::probe_pacing_after_refusal`: the burst `probe_pacing_burst`
    /// takes at the receiver's first refusal when it is not set.
    probe_pacing_after_refusal: Option<f64>,
    probe_duration_rtts: f64,
    probe_trigger_updates: u32,
    paths: Vec<ArccPath>,
    allowance: Vec<Allowance>,
    /// Each path's base RTT ([`Arcc::base_rtt`]), measured again with every RTT
    /// sample of the path (which is when its inputs move): the pacing rate and
    /// the largest base RTT read every path's.
    base_rtts: Vec<Duration>,
    /// The largest of `base_rtts` ([`Arcc::max_base_rtt`]), measured again when one
    /// of them moves: every per-path update's probe trigger reads it.
    max_base: Duration,
    /// When each path's next update is due (`None`: frozen until its next ACK),
    /// apart from the rest of its state: `on_tick` reads every path's, and a
    /// many-connection endpoint finds them cold.
    path_due: Vec<Option<Instant>>,
    /// The earliest `path_due` of any path: `poll_timeout`, and whether
    /// `on_tick` has anything to update, without a pass over the paths (a paced
    /// sender's every transmission wakes it, and in the all-to-all most wake-ups
    /// update nothing).
    next_update: Option<Instant>,
    /// The current probing phase ends then (`Instant::MAX`: startup probing,
    /// waiting for its first ACK).
    probing_until: Option<Instant>,
    /// The current or last probing phase, `[from, until)` (empty: none has
    /// run), kept after it ends: a probe ACK's send time tells which kind of
    /// phase sent it.
    probe_span: (Instant, Instant),
    /// The current or last confirming phase, `[from, until)`: probes go out
    /// only to confirm a longer base RTT (see `ArccPath::on_rtt`), and the
    /// ACKs of probes sent in it change nothing else.
    confirm_span: Option<(Instant, Instant)>,
    /// The next confirming phase may not start before then; phases in a row
    /// that confirmed nothing.
    confirm_next: Option<Instant>,
    confirm_tries: u32,
    /// The one path the current probing phase probes (one a confirmed base
    /// RTT started); `None`: every path.
    probe_scope: Option<usize>,
    /// The earliest send gate of any path ([`ArccPath::gate`]).
    next_gate: Option<Instant>,
    quiet_updates: u32,
    last_nak_cut: Option<Instant>,
}

impl Arcc {
    /// The controller of a flow configured by `cfg` over `paths`, at `now`.
    pub fn new(cfg: &FlowConfig, now: Instant, paths: &Paths) -> Arcc {
        let restart = Restart {
            initial_window: cfg.initial_window,
            q0: cfg.q0,
            margin_scope: cfg.margin_scope,
        };
        let q0 = restart.path_q0(paths);
        let mut a = Arcc {
            params: ArccParams {
                q0,
                tau_q: Duration::ZERO,
                alpha: cfg.alpha,
                alpha_weight: cfg.alpha_weight,
                gamma: cfg.gamma,
                fast_correction_factor: cfg.fast_correction_factor,
                min_window: cfg.min_window,
                queue_estimate: cfg.queue_estimate,
                rounding: cfg.queue_rounding_packets,
                stall_allowance_us: cfg.stall_allowance.as_us_f64(),
            },
            restart,
            initial_rtt: cfg.initial_rtt,
            update_interval_rtts: cfg.update_interval_rtts,
            target_queue_rtts: cfg.target_queue_rtts,
            network_base_rtt: cfg.network_base_rtt,
            min_target_queue: cfg.min_target_queue,
            base_rtt_window_rtts: cfg.base_rtt_window_rtts,
            pacing: cfg.pacing,
            probing_enabled: cfg.probing,
            intervals_run_on: cfg.intervals_run_on,
            probe_pacing_burst: cfg.probe_pacing_burst,
            probe_pacing_after_refusal: cfg.probe_pacing_after_refusal.then_some(0.0),
            probe_duration_rtts: cfg.probe_duration_rtts,
            probe_trigger_updates: cfg.probe_trigger_updates,
            paths: (0..paths.len()).map(|_| ArccPath::new(q0, now)).collect(),
            allowance: vec![Allowance::new(cfg.initial_window); paths.len()],
            base_rtts: Vec::new(),
            max_base: Duration::ZERO,
            path_due: vec![None; paths.len()],
            next_update: None,
            probing_until: cfg.probing.then_some(Instant::MAX),
            probe_span: if cfg.probing {
                (now, Instant::MAX)
            } else {
                (Instant::MAX, Instant::MAX)
            },
            confirm_span: None,
            confirm_next: None,
            confirm_tries: 0,
            probe_scope: None,
            next_gate: None,
            quiet_updates: 0,
            last_nak_cut: None,
        };
        if a.configured_base_rtt_expires() {
            for (i, p) in a.paths.iter_mut().enumerate() {
                p.min_rtt = paths[i].configured_base_rtt();
            }
        }
        a.base_rtts = (0..paths.len())
            .map(|i| a.measure_base_rtt(i, paths))
            .collect();
        a.max_base = a.measure_max_base_rtt(paths);
        a.refresh_tau(paths);
        a
    }

    /// Margin q_p of a path, packets.
    pub fn margin(&self, path: usize) -> f64 {
        self.paths[path].margin
    }

    /// ACK rate r_p of a path, packets per microsecond.
    pub fn ack_rate(&self, path: usize) -> f64 {
        self.paths[path].ack_rate
    }

    /// Measured data transmission rate of a path, packets per microsecond (EWMA).
    pub fn send_rate(&self, path: usize) -> f64 {
        self.paths[path].send_rate
    }

    /// Target queueing delay tau_q = `target_queue_rtts` x the largest base RTT
    /// (the network's when configured, else the flow's own paths').
    pub fn tau_q(&self) -> Duration {
        self.params.tau_q
    }

    /// ARCC update interval Tu = 0.5 T of a path (paper §4.2.1), floored.
    fn update_interval(&self, base_rtt: Duration) -> Duration {
        base_rtt
            .mul_f64(self.update_interval_rtts)
            .max(MIN_UPDATE_INTERVAL)
    }

    /// Base RTT T_p of path `i`: configured, else ARCC's expiring measurement,
    /// else the path's smallest RTT, else the initial RTT (as last measured by
    /// `measure_base_rtt`).
    fn base_rtt(&self, i: usize) -> Duration {
        self.base_rtts[i]
    }

    /// Whether a configured base RTT (the topology's) is only where the
    /// measurement starts: with an expiring base RTT that probes confirm, a
    /// longer one is taken when probes show the path's delay grew (a link
    /// whose delay changed, fig20), as from a measured one. Without probes to
    /// confirm it the configured one stands (a longer RTT may be a queue).
    fn configured_base_rtt_expires(&self) -> bool {
        self.base_rtt_window_rtts.is_some() && self.probing_enabled
    }

    /// Path `i`'s base RTT from what it is made of: only RTT samples move it.
    fn measure_base_rtt(&self, i: usize, paths: &Paths) -> Duration {
        let measured = self.paths[i].min_rtt;
        let configured = paths[i].configured_base_rtt();
        let base = if self.configured_base_rtt_expires() {
            measured.or(configured)
        } else {
            configured.or(measured)
        };
        base.unwrap_or_else(|| paths[i].base_rtt_or(self.initial_rtt))
    }

    /// The largest base RTT over the flow's paths.
    fn max_base_rtt(&self) -> Duration {
        self.max_base
    }

    /// The largest base RTT over the flow's paths, from `base_rtts`.
    fn measure_max_base_rtt(&self, paths: &Paths) -> Duration {
        self.base_rtts
            .iter()
            .take(paths.len())
            .max()
            .copied()
            .unwrap_or_else(|| max_base_rtt(paths, self.initial_rtt))
    }

    /// Measures `path`'s base RTT again (its inputs moved), and the largest and
    /// tau_q with it when it changed.
    fn remeasure_base_rtt(&mut self, path: usize, paths: &Paths) {
        let base = self.measure_base_rtt(path, paths);
        if std::mem::replace(&mut self.base_rtts[path], base) == base {
            // tau_q reads only the base RTTs (and settings that recompute it
            // where they change): the same as before, without its float work.
            self.refresh_q0(paths);
        } else {
            self.max_base = self.measure_max_base_rtt(paths);
            self.refresh_tau(paths);
        }
    }

    fn refresh_tau(&mut self, paths: &Paths) {
        // One network-wide tau_q makes every flow crossing a queue agree on when
        // it is too long (paper App. E, Proposition 1); a flow's own largest base
        // RTT is the fallback when the network's is not known.
        let t = self.network_base_rtt.unwrap_or_else(|| self.max_base_rtt());
        let tau = t.mul_f64(self.target_queue_rtts);
        let tau = self.min_target_queue.map_or(tau, |floor| tau.max(floor));
        self.params.tau_q = tau.max(Duration::from_us_f64(self.params.stall_allowance_us));
        self.refresh_q0(paths);
    }

    /// The margin's ceiling for the paths in rotation now.
    fn refresh_q0(&mut self, paths: &Paths) {
        self.params.q0 = self.restart.path_q0(paths);
    }

    /// A window W_p below one packet is one packet per round trip / W_p: when
    /// the ACK of the path's latest data packet brings its round trip `rtt`,
    /// the next send waits until `rtt` / W_p after that packet went out. The
    /// gate `on_sent` set from the smoothed RTT is only a stand-in until then:
    /// a path that sends once every few round trips takes an RTT sample as
    /// rarely, so its smoothed RTT lags the queue by many of them, and paced by
    /// it the path kept sending slowly after the queue had drained (fig18's
    /// 40 flows: utilization 0.90 during the join, issue 12 row 6).
    /// (The round trip is the ACK's, the receiver's hold included, as a
    /// window's ACK clock runs; the send time is the echoed one, whole
    /// nanoseconds.)
    fn clock_gate(&mut self, now: Instant, ack: &AckSample, rtt: Duration, paths: &Paths) {
        let path = ack.path;
        let w = self.allowance[path].packets();
        let round_trip = rtt + ack.held;
        let sent = now - round_trip;
        if w >= 1.0
            || paths[path]
                .last_sent
                .is_some_and(|t| t.as_ns() > sent.as_ns())
        {
            return;
        }
        let gate = sent + round_trip.mul_f64(1.0 / w); // after `now`: W_p < 1
        self.paths[path].gate = Some(gate);
        self.allowance[path].gated = true;
        self.next_gate = Some(self.next_gate.map_or(gate, |t| t.min(gate)));
    }

    /// Opens the send gates due at `now`; whether any opened.
    fn open_gates(&mut self, now: Instant) -> bool {
        let mut opened = false;
        let mut next = None::<Instant>;
        for (p, allow) in self.paths.iter_mut().zip(&mut self.allowance) {
            match p.gate {
                Some(g) if g <= now => {
                    p.gate = None;
                    allow.gated = false;
                    opened = true;
                }
                Some(g) => next = Some(next.map_or(g, |t| t.min(g))),
                None => {}
            }
        }
        self.next_gate = next;
        opened
    }

    fn refresh_next_update(&mut self) {
        self.next_update = self.path_due.iter().flatten().min().copied();
    }

    /// The length of a probing phase: `probe_duration_rtts` of the flow's
    /// largest base RTT.
    fn probe_phase(&self) -> Duration {
        self.max_base_rtt().mul_f64(self.probe_duration_rtts)
    }

    /// Whether a probe sent at `sent` went out only to confirm a base RTT: in
    /// the last confirming phase, and in no probing phase. (Its ACK may come
    /// after the phase ended, or in a probing phase the confirmation started.)
    fn sent_to_confirm(&self, sent: Instant) -> bool {
        let confirming = self
            .confirm_span
            .is_some_and(|(from, until)| from <= sent && sent < until);
        let (from, until) = self.probe_span;
        confirming && !(from <= sent && sent < until)
    }

    /// How far above the base RTT a path's RTTs must stay to be its own, not a
    /// queue: `fast_correction_factor` x tau_q, a queue ARCC would have drained.
    fn grown_rtt_bar(&self) -> Duration {
        self.params
            .tau_q
            .mul_f64(self.params.fast_correction_factor)
    }

    /// A probe of `path` came back after `probe_rtt`. A probe is served only
    /// when the path's data queue is empty, so the path has room, and the
    /// probe's round trip (which includes any queue it met) bounds the path's
    /// own: a longer base RTT the expiry rule found is taken, up to that round
    /// trip. Where the longer RTTs were a queue that has drained since, the
    /// probe's is short and the base RTT stays.
    fn confirm_base_rtt(&mut self, now: Instant, path: usize, probe_rtt: Duration, paths: &Paths) {
        let grown = self.grown_rtt_bar();
        let a = &mut self.paths[path];
        let (Some(c), Some(base)) = (a.base_candidate, a.min_rtt) else {
            return;
        };
        a.candidate_probes += 1;
        let shortest = a
            .candidate_probe_min
            .map_or(probe_rtt, |m| m.min(probe_rtt));
        a.candidate_probe_min = Some(shortest);
        if a.candidate_probes < CONFIRMING_PROBES {
            return;
        }
        a.clear_candidate();
        let longer = c.min(shortest);
        if longer <= base + grown {
            // The probes came back about as fast as before: what the window
            // saw was a queue, drained since.
            return;
        }
        a.min_rtt = Some(longer);
        self.confirm_tries = 0;
        self.remeasure_base_rtt(path, paths);
        // The path had room, and its window, sized for the shorter RTT while
        // it was taken for a queue, has shrunk: capacity probing takes it back
        // up ("when a path appears to have spare capacity", §4.2.2), on that
        // path alone, where the margins would add a quarter of q0 per update.
        if self.probing_enabled && !self.probing(now) {
            let t = self.probe_phase();
            self.start_probing(now, now + t);
            self.probe_scope = Some(path);
        }
    }

    fn start_probing(&mut self, now: Instant, until: Instant) {
        self.probe_span = (now, until);
        self.probing_until = Some(until);
        self.probe_scope = None;
        for p in &mut self.paths {
            p.probe_absorbed = false;
        }
    }

    /// Whether path `i`'s update due at `due` may open its window (shut now):
    /// one with ACKs in its interval may; one without may unless it cuts the
    /// margin and leaves every window to come shut ([`Arcc::ticks_idle_until`]).
    fn update_may_open(&self, i: usize, due: Instant, paths: &Paths) -> bool {
        let a = &self.paths[i];
        if a.acks_in_interval + a.probe_acks_in_interval > 0 {
            return true;
        }
        let allow = self.allowance[i];
        if allow.packets() < 1.0 {
            return false; // the tick re-arms without an update (`on_tick`)
        }
        let base_rtt = self.base_rtt(i);
        let inflight = paths.inflight(i);
        let tu = self.update_interval(base_rtt);
        let (mut next, mut after) = (a.clone(), allow);
        let Some(u) = next.update(&mut after, due, base_rtt, inflight, &self.params, tu) else {
            return false; // no update: nothing moves
        };
        let target = next.ack_rate * (base_rtt.as_us_f64() + next.hold_us) + next.margin;
        let most = allow.window.max(after.window).max(target);
        let cuts = next.ack_rate > 0.0
            && u.queue_delay_us.is_finite()
            && u.queue_delay_us >= self.params.tau_q.as_us_f64();
        !cuts || most > f64::from(inflight)
    }

    /// A probing phase starts after `probe_trigger_updates` updates per path in a
    /// row in which everything sent at least one base RTT ago was acknowledged and
    /// data waited. Returns whether one started.
    fn check_probe_trigger(&mut self, now: Instant, paths: &Paths, flow: &dyn FlowView) -> bool {
        if !self.probing_enabled || self.probing(now) {
            self.quiet_updates = 0;
            return false;
        }
        let t = self.max_base_rtt();
        // Whether data waits first: it reads the sender's core, the other its
        // table of packets sent.
        if flow.has_data() && flow.sent_before_acked(now, t) {
            self.quiet_updates += 1;
        } else {
            self.quiet_updates = 0;
        }
        let up = paths.up().max(1) as u32;
        if self.quiet_updates >= self.probe_trigger_updates * up {
            self.quiet_updates = 0;
            self.start_probing(now, now + self.probe_phase());
            return true;
        }
        false
    }
}

impl CongestionControl for Arcc {
    /// O_p = max(0, W_p + probe credit - inflight_p) (paper §4.2.3).
    fn open_windows(&self, paths: &Paths, open: &mut [f64]) {
        let each = paths.statuses().iter().zip(paths.inflights());
        for ((o, (status, inflight)), a) in open.iter_mut().zip(each).zip(&self.allowance) {
            *o = if *status != PathStatus::Up {
                0.0
            } else {
                a.open(*inflight)
            };
        }
    }

    fn any_open(&self, paths: &Paths) -> bool {
        // `a.open(inflight) > 0.0` without its subtraction and clamp: for doubles,
        // `w - i > 0` exactly when `w > i`.
        let each = paths.statuses().iter().zip(paths.inflights());
        each.zip(&self.allowance).any(|((status, &inflight), a)| {
            *status == PathStatus::Up && !a.gated && a.packets() > f64::from(inflight)
        })
    }

    fn paced(&self) -> bool {
        self.pacing
    }

    /// sum_p (W_p + probe credit) / T_p over the paths in rotation.
    fn pacing_rate(&self, paths: &Paths) -> f64 {
        paths
            .statuses()
            .iter()
            .zip(&self.allowance)
            .enumerate()
            .filter(|(_, (status, _))| **status == PathStatus::Up)
            .map(|(i, (_, a))| a.packets() / self.base_rtt(i).as_us_f64())
            .sum()
    }

    fn probing(&self, now: Instant) -> bool {
        self.probing_until.is_some_and(|t| now < t)
    }

    fn sends_probes(&self, now: Instant) -> bool {
        self.probing(now) || self.confirm_span.is_some_and(|(_, until)| now < until)
    }

    fn probes_path(&self, now: Instant, path: usize) -> bool {
        if self.probing(now) {
            // A probing phase that a confirmed base RTT started probes that
            // path alone; any other, every path.
            self.probe_scope.is_none_or(|p| p == path)
        } else {
            // Probes to confirm: on the paths that wait for a confirmation.
            self.paths[path].base_candidate.is_some()
        }
    }

    fn low_priority_probes(&self) -> bool {
        true
    }

    fn probing_until(&self) -> Option<Instant> {
        self.probing_until
    }

    fn path_rate(&self, path: usize) -> f64 {
        self.paths[path].send_rate
    }

    fn window(&self, path: usize) -> f64 {
        self.allowance[path].window
    }

    fn on_sent(&mut self, now: Instant, path: usize, paths: &Paths) {
        let a = &mut self.paths[path];
        a.sent_in_interval += 1;
        let allow = &mut self.allowance[path];
        let w = allow.packets();
        let wait = if w < 1.0 {
            let rtt = paths[path].srtt.unwrap_or(self.base_rtts[path]);
            Some(rtt.mul_f64(1.0 / w))
        } else {
            // Probe-bought packets beyond the burst go at 1.25 W_p / T_p.
            let converting = allow.probe_credit > 0 || a.converting_until.is_some_and(|t| now < t);
            self.probe_pacing_burst
                .filter(|&burst| converting && allow.open(paths.inflight(path)) > burst)
                .map(|_| self.base_rtts[path].mul_f64(1.0 / (w * PROBE_PACING_GAIN)))
        };
        if let Some(wait) = wait {
            let gate = now + wait;
            a.gate = Some(gate);
            allow.gated = true;
            self.next_gate = Some(self.next_gate.map_or(gate, |t| t.min(gate)));
        }
    }

    fn on_ack(&mut self, now: Instant, ack: &AckSample, paths: &Paths) {
        if let (true, Some(probe_rtt)) = (ack.probe, ack.probe_rtt) {
            self.confirm_base_rtt(now, ack.path, probe_rtt, paths);
            if self.sent_to_confirm(now - probe_rtt) {
                // A probe sent to confirm a base RTT: nothing else to learn.
                return;
            }
        }
        if let Some(rtt) = ack.rtt {
            let grown = self.grown_rtt_bar();
            let window = self.base_rtt_window_rtts;
            let a = &mut self.paths[ack.path];
            a.interval_rtt_sum_ps = a.interval_rtt_sum_ps.saturating_add(rtt.as_ps());
            a.interval_rtt_samples += 1;
            if a.on_rtt(now, rtt, window, grown, self.probing_enabled)
                && self.confirm_next.is_none_or(|t| now >= t)
            {
                // Probes to confirm it, for as long as a probing phase, but
                // only to measure: their ACKs buy no data (`on_ack` above).
                // A phase that confirmed nothing doubles the wait before the
                // next (a queue standing at a busy bottleneck serves no probe).
                let t = self.probe_phase();
                self.confirm_span = Some((now, now + t));
                self.confirm_next =
                    Some(now + t.mul_f64(f64::from(2u32 << self.confirm_tries.min(6))));
                self.confirm_tries += 1;
            }
            self.remeasure_base_rtt(ack.path, paths);
            self.clock_gate(now, ack, rtt, paths);
        }
        let tu = self.update_interval(self.base_rtt(ack.path));
        let a = &mut self.paths[ack.path];
        let due = if std::mem::take(&mut a.awaiting_ack) {
            // The interval that ran on ends with this ACK in it: its update
            // runs now.
            a.ran_on = true;
            Some(now)
        } else if self.path_due[ack.path].is_none() {
            // First ACK of the path: its first ARCC interval starts now.
            a.interval_start = now;
            Some(now + tu)
        } else {
            None
        };
        if let Some(due) = due {
            self.path_due[ack.path] = Some(due);
            self.next_update = Some(self.next_update.map_or(due, |t| t.min(due)));
        }
        if ack.probe {
            a.probe_acks_in_interval += 1;
            if !a.probe_absorbed {
                self.allowance[ack.path].probe_credit += 1; // one extra data packet per probe ACK (§4.2.2)
            }
        } else {
            a.acks_in_interval += 1;
            a.interval_hold_sum_ps = a.interval_hold_sum_ps.saturating_add(ack.held.as_ps());
        }
        if self.probing_until == Some(Instant::MAX) {
            // Startup probing lasts three base RTTs from the first ACK.
            let t = self.probe_phase();
            self.probing_until = Some(now + t);
            self.probe_span.1 = now + t;
        }
    }

    fn on_nak(&mut self, _now: Instant, _path: usize, _reason: NakReason) {}

    /// ARCC reacts to rates and delays, not to losses.
    fn on_loss(&mut self, _now: Instant, _path: usize, _by_timeout: bool, _paths: &Paths) {}

    /// Halves every window and margin, at most once per RTT, toward what the
    /// receiver can hold (docs/engine.md, "Loss recovery").
    fn on_receiver_full(&mut self, now: Instant, paths: &Paths) -> bool {
        // The flow overran the receiver's buffer: from now on what probe ACKs
        // buy goes paced (`FlowConfig::probe_pacing_after_refusal`).
        self.probe_pacing_burst = self.probe_pacing_burst.or(self.probe_pacing_after_refusal);
        let rtt = paths
            .iter()
            .filter_map(|p| p.srtt)
            .max()
            .unwrap_or(self.initial_rtt);
        if self.last_nak_cut.is_some_and(|t| now < t + rtt) {
            return false;
        }
        self.last_nak_cut = Some(now);
        let min_w = self.params.min_window;
        for (p, a) in self.paths.iter_mut().zip(&mut self.allowance) {
            a.window = (a.window / 2.0).max(min_w);
            p.margin /= 2.0;
        }
        // The stall allowance's queue reorders more than this receiver can hold:
        // halve it too (it does not grow back; docs/engine.md, "Hosts that pause").
        if self.params.stall_allowance_us > 0.0 {
            self.params.stall_allowance_us /= 2.0;
            self.refresh_tau(paths);
        }
        true
    }

    /// Everything is silent: every path is suspect; keep them up but restart them
    /// from W0 so the resends go out gently.
    fn on_rto(&mut self, _now: Instant, paths: &Paths) {
        for (a, status) in self.allowance.iter_mut().zip(paths.statuses()) {
            if *status == PathStatus::Up {
                a.window = self.restart.initial_window;
            }
        }
    }

    fn on_path_up(&mut self, now: Instant, path: usize, paths: &Paths) {
        let restart = self.restart;
        let q0 = restart.path_q0(paths);
        self.paths[path].restart(&mut self.allowance[path], &restart, q0, now);
        self.path_due[path] = None;
        self.refresh_next_update();
        if self.probing_enabled {
            let t = self.probe_phase();
            self.start_probing(now, now + t);
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        match (self.next_update, self.next_gate) {
            (Some(u), Some(g)) => Some(u.min(g)),
            (u, g) => u.or(g),
        }
    }

    /// The first due tick that may open a window or start a probing phase,
    /// when it is not the next one; every tick before it, of a path whose
    /// interval holds no ACK, only shrinks what it shuts. Such an update sees
    /// no RTT sample, so its queueing delay is the inflight estimate
    /// (Q_p - rounding) / r_p with r_p decaying: once it reaches tau_q (a
    /// multiplicative decrease) it grows with every later empty update, the
    /// margin and W* = r T + q only fall, and W_p stays at most the largest of
    /// W_p, W_p after the first update and W* after it. The probe trigger
    /// counts quiet updates only while every packet in flight left within T of
    /// the update, which, with none leaving or sent, stops holding once it
    /// fails. None while a probing or confirming phase is under way or kept,
    /// with a gate pending, a path out of rotation or a window open.
    fn ticks_idle_until(&self, paths: &Paths, flow: &dyn FlowView) -> Option<Instant> {
        if self.probing_until.is_some()
            || self.confirm_span.is_some()
            || self.next_gate.is_some()
            || self.intervals_run_on
            || paths.up() != self.paths.len()
        {
            return None;
        }
        let first = self.next_update?;
        // The next tick first (a flow whose ACKs flow stops here), then the
        // windows (a pass over the paths).
        let next = self.path_due.iter().position(|&d| d == Some(first))?;
        if self.update_may_open(next, first, paths) || self.any_open(paths) {
            return None;
        }
        let mut horizon = Instant::MAX;
        for (i, due) in self.path_due.iter().enumerate() {
            match *due {
                // `next` was asked above.
                Some(due) if i != next && due < horizon && self.update_may_open(i, due, paths) => {
                    if due == first {
                        return None; // the next tick matters: nothing waits
                    }
                    horizon = due;
                }
                _ => {}
            }
        }
        // Last, as it reads the sent table.
        if self.probing_enabled && flow.sent_before_acked(first, self.max_base_rtt()) {
            return None;
        }
        Some(horizon)
    }

    fn on_tick(&mut self, now: Instant, paths: &Paths, flow: &dyn FlowView) -> Tick {
        if self.probing_until.is_some_and(|end| end <= now) {
            self.probing_until = None;
        }
        let mut tick = Tick::default();
        if self.next_gate.is_some_and(|t| t <= now) {
            tick.opened = self.open_gates(now);
        }
        if self.next_update.is_none_or(|t| t > now) {
            return tick;
        }
        // The earliest due time after this tick, gathered on the way (the loop
        // is the only writer of `path_due` meanwhile, each path its own).
        let mut next: Option<Instant> = None;
        let mut note = |due: Instant| next = Some(next.map_or(due, |n| n.min(due)));
        for i in 0..self.paths.len() {
            let Some(due) = self.path_due[i] else {
                continue;
            };
            if due > now {
                note(due);
                continue;
            }
            let base_rtt = self.base_rtt(i);
            if paths.inflight(i) == 0 && !flow.has_data() {
                // Idle: freeze the controller; the next ACK restarts its interval.
                self.path_due[i] = None;
                self.paths[i].awaiting_ack = false;
                continue;
            }
            let a = &mut self.paths[i];
            if a.acks_in_interval + a.probe_acks_in_interval == 0 {
                if self.intervals_run_on {
                    // `FlowConfig::intervals_run_on`: the interval runs on until
                    // an ACK falls into it, which brings the update (`on_ack`),
                    // and no timer wakes the path meanwhile.
                    self.path_due[i] = None;
                    a.awaiting_ack = true;
                    continue;
                }
                if self.allowance[i].packets() < 1.0 {
                    // A window below one packet sends less than once per update
                    // interval: the interval runs on until an ACK falls into
                    // it, so that it measures a rate and a queueing delay, not
                    // an empty interval's nothing.
                    let due = now + self.update_interval(base_rtt);
                    self.path_due[i] = Some(due);
                    note(due);
                    continue;
                }
            }
            let params = self.params;
            let tu = self.update_interval(base_rtt);
            self.paths[i].update(
                &mut self.allowance[i],
                now,
                base_rtt,
                paths.inflight(i),
                &params,
                tu,
            );
            self.path_due[i] = Some(now + tu);
            note(now + tu);
            tick.updated = true;
            if self.check_probe_trigger(now, paths, flow) {
                tick.probing_phases += 1;
            }
        }
        if tick.updated {
            // An update moves no base RTT: only q0 (which follows the paths up).
            self.refresh_q0(paths);
        }
        self.next_update = next;
        tick
    }
}

#[cfg(test)]
mod tests;
