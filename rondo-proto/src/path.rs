//! Per-path sender state: ACK-rate-based congestion control (ARCC, paper §4.2.1),
//! RTT and forward-delay estimates (§4.3), and accounting.

use crate::config::{AlphaWeight, FlowConfig, QueueEstimate};
use crate::time::{Duration, Instant};

/// Whether a path is in rotation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathStatus {
    /// In rotation.
    Up,
    /// Taken out of rotation after repeated losses; probed until a probe is answered.
    Down,
}

/// The ARCC parameters that apply to every path of a flow.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ArccParams {
    pub q0: f64,
    pub tau_q: Duration,
    pub alpha: f64,
    pub alpha_weight: AlphaWeight,
    pub gamma: f64,
    pub fast_correction_factor: f64,
    pub min_window: f64,
    pub queue_estimate: QueueEstimate,
}

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

/// Sender-side state of one logical path.
#[derive(Clone, Debug)]
pub struct PathState {
    pub(crate) status: PathStatus,
    /// Window W_p in packets.
    pub(crate) window: f64,
    /// Margin q_p in packets.
    pub(crate) margin: f64,
    /// ACK rate r_p, packets per microsecond.
    pub(crate) ack_rate: f64,
    /// Data transmissions per microsecond, EWMA over update intervals.
    pub(crate) send_rate: f64,
    interval_rtt_sum_ps: f64,
    rttvar_ps: f64,
    interval_rtt_samples: u32,
    pub(crate) sent_in_interval: u32,
    /// When this path last sent a data packet.
    pub(crate) last_sent: Option<Instant>,
    pub(crate) updates: u64,
    pub(crate) acks_in_interval: u32,
    pub(crate) probe_acks_in_interval: u32,
    pub(crate) interval_start: Instant,
    pub(crate) next_update: Option<Instant>,
    /// Extra data packets allowed by probe ACKs before the next update (§4.2.2).
    pub(crate) probe_credit: u32,
    /// Set once an update has folded probe ACKs into the window: from then on
    /// probe ACKs no longer grant extra packets (until the next probing phase).
    pub(crate) probe_absorbed: bool,
    configured_base_rtt: Option<Duration>,
    min_rtt: Option<Duration>,
    pub(crate) srtt: Option<Duration>,
    /// Forward delay estimate in ns, offset by the unknown clock difference.
    pub(crate) fwd_delay_ns: Option<f64>,
    pub(crate) fwd_stable_samples: u32,
    pub(crate) inflight: u32,
    pub(crate) skip: u32,
    pub(crate) consecutive_losses: u32,
    pub(crate) last_queue_delay_us: f64,
    pub(crate) next_down_probe: Instant,
    pub(crate) counters: PathCounters,
}

/// Counters of one path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PathCounters {
    /// Data packets sent (first transmissions and retransmissions).
    pub data_sent: u64,
    /// Data ACKs received.
    pub data_acked: u64,
    /// Packets sent here that were declared lost.
    pub lost: u64,
    /// Probes sent.
    pub probes_sent: u64,
    /// Probe ACKs received.
    pub probes_acked: u64,
    /// Times the path was taken out of rotation.
    pub downs: u64,
}

impl PathState {
    pub(crate) fn new(cfg: &FlowConfig, index: usize, now: Instant) -> PathState {
        PathState {
            status: PathStatus::Up,
            window: cfg.initial_window,
            margin: cfg.q0 / 4.0, // paper App. C.3: q starts at a = q0/4
            ack_rate: 0.0,
            send_rate: 0.0,
            interval_rtt_sum_ps: 0.0,
            rttvar_ps: 0.0,
            interval_rtt_samples: 0,
            sent_in_interval: 0,
            last_sent: None,
            updates: 0,
            acks_in_interval: 0,
            probe_acks_in_interval: 0,
            interval_start: now,
            next_update: None,
            probe_credit: 0,
            probe_absorbed: false,
            configured_base_rtt: cfg.base_rtt.as_ref().map(|v| v[index]),
            min_rtt: None,
            srtt: None,
            fwd_delay_ns: None,
            fwd_stable_samples: 0,
            inflight: 0,
            skip: 0,
            consecutive_losses: 0,
            last_queue_delay_us: 0.0,
            next_down_probe: Instant::MAX,
            counters: PathCounters::default(),
        }
    }

    /// Base RTT T_p: configured, else the smallest measured RTT, else `fallback`.
    pub(crate) fn base_rtt_or(&self, fallback: Duration) -> Duration {
        self.configured_base_rtt
            .or(self.min_rtt)
            .unwrap_or(fallback)
    }

    /// Base RTT when known (configured or measured).
    pub fn base_rtt(&self) -> Option<Duration> {
        self.configured_base_rtt.or(self.min_rtt)
    }

    /// How long after sending a packet on this path its ACK is overdue: the
    /// smoothed RTT plus the larger of four RTT deviations and a quarter RTT
    /// (RACK-style reordering window, per path).
    pub(crate) fn ack_deadline(&self, fallback: Duration) -> Duration {
        let srtt = self.srtt.unwrap_or(fallback);
        let slack = (4.0 * self.rttvar_ps).max(srtt.as_ps() as f64 / 4.0);
        srtt + Duration::from_ps(slack as u64)
    }

    /// Smoothed RTT.
    pub fn srtt(&self) -> Option<Duration> {
        self.srtt
    }

    /// Window W_p in packets.
    pub fn window(&self) -> f64 {
        self.window
    }

    /// Margin q_p in packets.
    pub fn margin(&self) -> f64 {
        self.margin
    }

    /// ACK rate r_p in packets per microsecond.
    pub fn ack_rate(&self) -> f64 {
        self.ack_rate
    }

    /// Packets in flight on this path.
    pub fn inflight(&self) -> u32 {
        self.inflight
    }

    /// Current skip of the packet scheduler for this path.
    pub fn skip(&self) -> u32 {
        self.skip
    }

    /// Status (in rotation or not).
    pub fn status(&self) -> PathStatus {
        self.status
    }

    /// Forward delay estimate in ns (includes the sender/receiver clock offset).
    pub fn forward_delay_ns(&self) -> Option<f64> {
        self.fwd_delay_ns
    }

    /// Measured data transmission rate, packets per microsecond (EWMA).
    pub fn send_rate(&self) -> f64 {
        self.send_rate
    }

    /// Consecutive forward-delay samples within tolerance of the estimate.
    pub fn stable_samples(&self) -> u32 {
        self.fwd_stable_samples
    }

    /// Counters.
    pub fn counters(&self) -> PathCounters {
        self.counters
    }

    /// Open window O_p = max(0, W_p + probe credit - inflight_p) (paper §4.2.3).
    pub(crate) fn open_window(&self) -> f64 {
        if self.status != PathStatus::Up {
            return 0.0;
        }
        (self.window + self.probe_credit as f64 - self.inflight as f64).max(0.0)
    }

    /// An RTT sample from an ACK (data or probe).
    pub(crate) fn on_rtt_sample(&mut self, rtt: Duration, gain: f64) {
        self.interval_rtt_sum_ps += rtt.as_ps() as f64;
        self.interval_rtt_samples += 1;
        self.min_rtt = Some(self.min_rtt.map_or(rtt, |m| m.min(rtt)));
        if let Some(s) = self.srtt {
            let dev = (s.as_ps() as f64 - rtt.as_ps() as f64).abs();
            self.rttvar_ps += 0.25 * (dev - self.rttvar_ps);
        } else {
            self.rttvar_ps = rtt.as_ps() as f64 / 2.0;
        }
        self.srtt = Some(match self.srtt {
            None => rtt,
            Some(s) => {
                let s = s.as_ps() as f64;
                Duration::from_ps((s + gain * (rtt.as_ps() as f64 - s)).round() as u64)
            }
        });
    }

    /// A forward-delay sample (receiver clock minus sender clock, ns).
    pub(crate) fn on_forward_delay_sample(
        &mut self,
        sample_ns: f64,
        gain: f64,
        tolerance: Duration,
    ) {
        match self.fwd_delay_ns {
            None => {
                self.fwd_delay_ns = Some(sample_ns);
                self.fwd_stable_samples = 1;
            }
            Some(d) => {
                if (sample_ns - d).abs() <= tolerance.as_ps() as f64 / 1e3 {
                    self.fwd_stable_samples = self.fwd_stable_samples.saturating_add(1);
                } else {
                    self.fwd_stable_samples = 0;
                }
                self.fwd_delay_ns = Some(d + gain * (sample_ns - d));
            }
        }
    }

    /// One ARCC update at the end of an interval (paper §4.2.1, eqs. (5) and (19)).
    /// Returns `None` when the path has had no ACK yet (no update before the first ACK).
    pub(crate) fn arcc_update(
        &mut self,
        now: Instant,
        base_rtt: Duration,
        p: &ArccParams,
    ) -> Option<ArccUpdate> {
        let elapsed = now.saturating_since(self.interval_start);
        if elapsed == Duration::ZERO {
            return None;
        }
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
            p.alpha * self.send_rate + (1.0 - p.alpha) * sent
        };
        self.sent_in_interval = 0;
        self.ack_rate = if self.updates == 0 {
            sample // start r_p from the first sample, not from 0
        } else {
            match p.alpha_weight {
                AlphaWeight::History => p.alpha * self.ack_rate + (1.0 - p.alpha) * sample,
                AlphaWeight::Sample => (1.0 - p.alpha) * self.ack_rate + p.alpha * sample,
            }
        };
        let t_us = base_rtt.as_us_f64();
        let tau_us = p.tau_q.as_us_f64();
        let pipe = self.ack_rate * t_us; // C_p = r_p T
        let queue = self.inflight as f64 - pipe; // Q_p = inflight_p - C_p
        let by_inflight = if self.ack_rate > 0.0 {
            (queue / self.ack_rate).max(0.0)
        } else if queue > 0.0 {
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
            let avg = self.interval_rtt_sum_ps / self.interval_rtt_samples as f64 / 1e6;
            match p.queue_estimate {
                QueueEstimate::Rtt => (avg - t_us).max(0.0),
                QueueEstimate::Inflight => by_inflight,
            }
        } else {
            by_inflight
        };
        self.interval_rtt_sum_ps = 0.0;
        self.interval_rtt_samples = 0;
        if delay_us < tau_us {
            self.margin = (self.margin + p.q0 / 4.0).min(p.q0);
        } else if delay_us.is_finite() {
            self.margin *= tau_us / delay_us; // eq. (19)
        } else {
            self.margin = p.q0 / 4.0;
        }
        let target = pipe + self.margin; // eq. (5): W* = r T + q
        let direct = self.updates == 0 || delay_us > p.fast_correction_factor * tau_us;
        self.window = if direct {
            target
        } else {
            (1.0 - p.gamma) * self.window + p.gamma * target
        };
        self.window = self.window.max(p.min_window);
        self.updates += 1;
        if self.probe_acks_in_interval > 0 {
            self.probe_absorbed = true;
        }
        self.acks_in_interval = 0;
        self.probe_acks_in_interval = 0;
        self.probe_credit = 0;
        self.interval_start = now;
        self.last_queue_delay_us = delay_us;
        Some(ArccUpdate {
            sample,
            queue,
            queue_delay_us: delay_us,
            direct,
        })
    }

    /// Puts the path back in rotation with a fresh controller.
    pub(crate) fn reset_for_rejoin(&mut self, cfg: &FlowConfig, now: Instant) {
        self.status = PathStatus::Up;
        self.window = cfg.initial_window;
        self.margin = cfg.q0 / 4.0;
        self.ack_rate = 0.0;
        self.updates = 0;
        self.acks_in_interval = 0;
        self.probe_acks_in_interval = 0;
        self.interval_start = now;
        self.probe_credit = 0;
        self.probe_absorbed = false;
        self.consecutive_losses = 0;
        self.fwd_stable_samples = 0;
        self.next_down_probe = Instant::MAX;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> ArccParams {
        ArccParams {
            q0: 3.0,
            tau_q: Duration::from_ns(800),
            alpha: 0.8,
            alpha_weight: AlphaWeight::History,
            gamma: 0.5,
            fast_correction_factor: 4.0,
            min_window: 1.0,
            queue_estimate: QueueEstimate::Rtt,
        }
    }

    #[test]
    fn no_update_before_the_first_ack() {
        let cfg = FlowConfig::default();
        let mut p = PathState::new(&cfg, 0, Instant::ZERO);
        assert!(p
            .arcc_update(Instant::from_us(10), Duration::from_us(20), &params())
            .is_none());
        assert_eq!(p.window, 1.0);
    }

    #[test]
    fn first_update_sets_the_window_to_the_target() {
        let cfg = FlowConfig::default();
        let mut p = PathState::new(&cfg, 0, Instant::ZERO);
        // 20 ACKs in 10 us = 2 packets/us; T = 20 us -> pipe 40 packets.
        p.acks_in_interval = 20;
        p.inflight = 40;
        let u = p
            .arcc_update(Instant::from_us(10), Duration::from_us(20), &params())
            .unwrap();
        assert!(u.direct);
        assert_eq!(p.ack_rate, 2.0);
        // queue 0 < tau: margin grows from 0.75 to 1.5
        assert!((p.margin - 1.5).abs() < 1e-9);
        assert!((p.window - 41.5).abs() < 1e-9);
    }

    #[test]
    fn large_queue_cuts_the_margin_multiplicatively() {
        let cfg = FlowConfig::default();
        let mut p = PathState::new(&cfg, 0, Instant::ZERO);
        p.acks_in_interval = 20;
        p.inflight = 40;
        p.arcc_update(Instant::from_us(10), Duration::from_us(20), &params())
            .unwrap();
        // Next interval: same rate, but 44 in flight: Q = 4 packets, d = 2 us > tau 0.8 us.
        p.acks_in_interval = 20;
        p.inflight = 44;
        let m = p.margin;
        let u = p
            .arcc_update(Instant::from_us(20), Duration::from_us(20), &params())
            .unwrap();
        assert!((u.queue - 4.0).abs() < 1e-9);
        assert!((u.queue_delay_us - 2.0).abs() < 1e-9);
        assert!((p.margin - m * 0.8 / 2.0).abs() < 1e-9);
        // 2 us < 4 tau = 3.2 us: smoothed, not direct.
        assert!(!u.direct);
    }
}
