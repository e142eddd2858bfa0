//! UET's NSCC (Ultra Ethernet network-signal congestion control, as coded in the
//! Ultra Ethernet edition of htsim): one window for the flow, driven by ECN and
//! queueing delay together.
//!
//! With T the network base RTT, BDP = line rate x T, a = BDP / ref_BDP,
//! b = target / ref_RTT (reference point 100 Gbit/s x 12 us) and the values of
//! REFERENCE.md "UET NSCC" ([`NsccParams`]), on each data ACK
//! (delay = RTT - the flow's base RTT, the smallest of its paths'):
//! 1. quick adapt, at most once per T + target: after an ACK with delay above
//!    4 target (or a NACK), if fewer than maxwnd / 8 were acknowledged in the
//!    period, cwnd = max(acknowledged, 1 packet);
//! 2. no ECN, delay >= target: fair increase, inc += fi x acked;
//! 3. no ECN, delay < target: proportional increase,
//!    inc += alpha x acked x (target - delay), or, once the delay stayed under
//!    1 us for more than a window of ACKs, fast increase cwnd += acked x fi_scale;
//! 4. ECN, delay >= target: at most once per T,
//!    cwnd *= max(1 - gamma (avg_delay - target) / avg_delay, 0.5);
//! 5. ECN, delay < target: no change (REPS moves off the path);
//! 6. fulfil, every 8 packets acknowledged or T elapsed: cwnd += inc / cwnd,
//!    plus eta when T elapsed;
//! 7. NACK: cwnd -= the NACKed packet, quick adapt armed.
//!
//! Windows are in packets here (MSS = 1 packet), bounded to 1 packet .. maxwnd.

use super::{AckSample, CongestionControl, FlowView, Tick};
use crate::config::FlowConfig;
use crate::path::Paths;
use crate::time::{Duration, Instant};
use crate::wire::NakReason;

/// NSCC's constants (REFERENCE.md "UET NSCC", htsim `uec.cpp`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NsccParams {
    /// Reference BDP, bytes (100 Gbit/s x 12 us).
    pub ref_bdp_bytes: f64,
    /// Reference RTT.
    pub ref_rtt: Duration,
    /// Target queueing delay as a multiple of the network base RTT (1 without
    /// packet trimming, 0.75 with it; the simulator does not trim).
    pub target_rtts: f64,
    /// alpha = `alpha_mss` MSS a b / target.
    pub alpha_mss: f64,
    /// Fair increase fi = `fair_increase_mss` MSS a.
    pub fair_increase_mss: f64,
    /// eta = `eta_mss` MSS a, added once per adjust period.
    pub eta_mss: f64,
    /// Multiplicative-decrease gain gamma.
    pub gamma: f64,
    /// Largest multiplicative decrease (the factor's floor is 1 - this).
    pub max_md: f64,
    /// Fast-increase scale fi_scale = `fast_increase_scale` a.
    pub fast_increase_scale: f64,
    /// Delay under which the fast increase counts an ACK.
    pub fast_increase_delay: Duration,
    /// Gain of the delay EWMA avg_delay.
    pub delay_gain: f64,
    /// Quick adapt triggers on a delay above this many targets.
    pub quick_adapt_targets: f64,
    /// Quick adapt cuts only when less than this fraction of maxwnd was
    /// acknowledged in its period.
    pub quick_adapt_fraction: f64,
    /// Largest window, in BDPs.
    pub max_window_bdps: f64,
    /// Initial window, in BDPs.
    pub initial_window_bdps: f64,
    /// Packets acknowledged that end an adjust period early.
    pub adjust_packets: f64,
}

impl Default for NsccParams {
    fn default() -> Self {
        NsccParams {
            ref_bdp_bytes: 100e9 / 8.0 * 12e-6,
            ref_rtt: Duration::from_us(12),
            target_rtts: 1.0,
            alpha_mss: 4.0,
            fair_increase_mss: 5.0,
            eta_mss: 0.15,
            gamma: 0.8,
            max_md: 0.5,
            fast_increase_scale: 0.25,
            fast_increase_delay: Duration::from_us(1),
            delay_gain: 0.0125,
            quick_adapt_targets: 4.0,
            quick_adapt_fraction: 1.0 / 8.0,
            max_window_bdps: 1.5,
            initial_window_bdps: 1.5,
            adjust_packets: 8.0,
        }
    }
}

/// The values NSCC derives from the network base RTT T.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NsccScale {
    /// T.
    pub network_rtt: Duration,
    /// target_Qdelay.
    pub target: Duration,
    /// BDP at line rate over T, packets.
    pub bdp: f64,
    /// a = BDP / ref_BDP.
    pub a: f64,
    /// b = target / ref_RTT.
    pub b: f64,
    /// alpha, packets per us of delay below target.
    pub alpha: f64,
    /// Fair increase fi, packets.
    pub fi: f64,
    /// eta, packets.
    pub eta: f64,
    /// fi_scale.
    pub fi_scale: f64,
    /// maxwnd, packets.
    pub max_window: f64,
}

impl NsccParams {
    /// The derived values for a network base RTT `t`, line rate `line_rate_bps`
    /// and `mtu`-byte packets.
    pub fn scale(&self, t: Duration, line_rate_bps: u64, mtu: usize) -> NsccScale {
        let bdp_bytes = line_rate_bps as f64 / 8.0 * t.as_secs_f64();
        let a = bdp_bytes / self.ref_bdp_bytes;
        let target = t.mul_f64(self.target_rtts);
        let b = target.as_us_f64() / self.ref_rtt.as_us_f64();
        let bdp = bdp_bytes / mtu as f64;
        NsccScale {
            network_rtt: t,
            target,
            bdp,
            a,
            b,
            alpha: self.alpha_mss * a * b / target.as_us_f64().max(f64::MIN_POSITIVE),
            fi: self.fair_increase_mss * a,
            eta: self.eta_mss * a,
            fi_scale: self.fast_increase_scale * a,
            max_window: (self.max_window_bdps * bdp).max(1.0),
        }
    }
}

/// NSCC's window for one flow over all its paths.
#[derive(Clone, Debug)]
pub struct Nscc {
    params: NsccParams,
    line_rate_bps: u64,
    mtu: usize,
    /// The configured network base RTT (`FlowConfig::network_base_rtt`), if any.
    configured_rtt: Option<Duration>,
    initial_rtt: Duration,
    scale: NsccScale,
    cwnd: f64,
    /// Increase owed by the ACKs of this adjust period (packets squared).
    inc: f64,
    avg_delay_us: Option<f64>,
    last_decrease: Option<Instant>,
    /// Packets acknowledged in a row with a delay under `fast_increase_delay`.
    low_delay_run: f64,
    last_adjust: Instant,
    acked_since_adjust: f64,
    /// Packets acknowledged in the current quick-adapt period.
    achieved: f64,
    qa_deadline: Instant,
    qa_armed: bool,
    /// ACKs still to ignore after a quick adapt (the packets then in flight).
    ignore: u32,
    quick_adapts: u64,
    decreases: u64,
}

impl Nscc {
    /// The controller of a flow configured by `cfg`, starting at `now`: T is
    /// `network_base_rtt`, else the largest configured base RTT of its paths, else
    /// `initial_rtt` until the paths measure theirs.
    pub fn new(cfg: &FlowConfig, now: Instant) -> Nscc {
        Nscc::with_params(cfg, now, NsccParams::default())
    }

    /// The same with other constants.
    pub fn with_params(cfg: &FlowConfig, now: Instant, params: NsccParams) -> Nscc {
        let t = cfg
            .network_base_rtt
            .or_else(|| cfg.base_rtt.as_ref().and_then(|v| v.iter().max().copied()))
            .unwrap_or(cfg.initial_rtt);
        let scale = params.scale(t, cfg.line_rate_bps, cfg.mtu);
        let cwnd = (params.initial_window_bdps * scale.bdp).clamp(1.0, scale.max_window);
        Nscc {
            params,
            line_rate_bps: cfg.line_rate_bps,
            mtu: cfg.mtu,
            configured_rtt: cfg.network_base_rtt,
            initial_rtt: cfg.initial_rtt,
            scale,
            cwnd,
            inc: 0.0,
            avg_delay_us: None,
            last_decrease: None,
            low_delay_run: 0.0,
            last_adjust: now,
            acked_since_adjust: 0.0,
            achieved: 0.0,
            qa_deadline: now + scale.network_rtt + scale.target,
            qa_armed: false,
            ignore: 0,
            quick_adapts: 0,
            decreases: 0,
        }
    }

    /// The flow's window, packets.
    pub fn cwnd(&self) -> f64 {
        self.cwnd
    }

    /// The derived values now.
    pub fn scale(&self) -> NsccScale {
        self.scale
    }

    /// The delay EWMA, us.
    pub fn avg_delay_us(&self) -> Option<f64> {
        self.avg_delay_us
    }

    /// Quick adapts so far.
    pub fn quick_adapts(&self) -> u64 {
        self.quick_adapts
    }

    /// Multiplicative decreases so far.
    pub fn decreases(&self) -> u64 {
        self.decreases
    }

    fn clamp(&mut self) {
        self.cwnd = self.cwnd.clamp(1.0, self.scale.max_window);
    }

    fn inflight(paths: &Paths) -> u32 {
        paths.in_flight()
    }

    /// T from the configuration, else the largest base RTT the paths know.
    fn refresh_scale(&mut self, paths: &Paths) {
        let t = self.configured_rtt.unwrap_or_else(|| {
            paths
                .iter()
                .filter_map(|p| p.base_rtt())
                .max()
                .unwrap_or(self.initial_rtt)
        });
        if t != self.scale.network_rtt {
            self.scale = self.params.scale(t, self.line_rate_bps, self.mtu);
        }
    }

    /// Rule 1: at the end of a period, cut to what was acknowledged in it if
    /// the period saw a NACK or a delay over the threshold. True when it cut.
    fn quick_adapt(&mut self, now: Instant, paths: &Paths) -> bool {
        if now < self.qa_deadline {
            return false;
        }
        let cut = self.qa_armed
            && self.achieved < self.params.quick_adapt_fraction * self.scale.max_window;
        if cut {
            self.cwnd = self.achieved.max(1.0);
            self.clamp();
            self.inc = 0.0;
            self.ignore = Self::inflight(paths);
            self.quick_adapts += 1;
        }
        self.qa_armed = false;
        self.achieved = 0.0;
        self.qa_deadline = now + self.scale.network_rtt + self.scale.target;
        cut
    }

    /// Rule 6: apply the increase owed, and eta once per period of T.
    fn fulfil(&mut self, now: Instant) {
        self.acked_since_adjust += 1.0;
        let elapsed = now.saturating_since(self.last_adjust) >= self.scale.network_rtt;
        if self.acked_since_adjust >= self.params.adjust_packets || elapsed {
            self.cwnd += self.inc / self.cwnd;
            if elapsed {
                self.cwnd += self.scale.eta;
                self.last_adjust = now;
            }
            self.inc = 0.0;
            self.acked_since_adjust = 0.0;
            self.clamp();
        }
    }

    /// Rule 7: a NACKed (or lost) packet comes off the window and arms quick adapt.
    fn nack(&mut self) {
        self.cwnd -= 1.0;
        self.clamp();
        self.qa_armed = true;
    }
}

impl CongestionControl for Nscc {
    fn open_windows(&self, paths: &Paths, open: &mut [f64]) {
        let flow = (self.cwnd - f64::from(Self::inflight(paths))).max(0.0);
        super::open_on_paths_up(flow, paths, open);
    }

    fn any_open(&self, paths: &Paths) -> bool {
        let flow = (self.cwnd - f64::from(Self::inflight(paths))).max(0.0);
        super::any_open_on_paths_up(flow, paths)
    }

    fn window(&self, _path: usize) -> f64 {
        self.cwnd
    }

    fn on_ack(&mut self, now: Instant, ack: &AckSample, paths: &Paths) {
        if ack.probe {
            return;
        }
        self.refresh_scale(paths);
        let s = self.scale;
        // One base RTT for the flow, as NSCC keeps (a path slower by design
        // shows its extra delay as queueing: docs/baselines.md, "uet").
        let base = paths
            .iter()
            .filter_map(|q| q.base_rtt())
            .min()
            .unwrap_or(s.network_rtt);
        let delay = ack
            .rtt
            .or(paths[ack.path].srtt)
            .map(|rtt| rtt.saturating_sub(base));
        self.achieved += 1.0;
        if let Some(d) = delay {
            let g = self.params.delay_gain;
            let d_us = d.as_us_f64();
            self.avg_delay_us = Some(self.avg_delay_us.map_or(d_us, |a| (1.0 - g) * a + g * d_us));
            if d_us > self.params.quick_adapt_targets * s.target.as_us_f64() {
                self.qa_armed = true;
            }
        }
        if self.quick_adapt(now, paths) {
            return;
        }
        if self.ignore > 0 {
            // The ACK of a packet sent under the window quick adapt replaced.
            self.ignore -= 1;
            return;
        }
        let Some(delay) = delay else {
            self.fulfil(now);
            return;
        };
        if delay < self.params.fast_increase_delay {
            self.low_delay_run += 1.0;
        } else {
            self.low_delay_run = 0.0;
        }
        match (ack.ecn, delay >= s.target) {
            // Rule 2: fair increase.
            (false, true) => self.inc += s.fi,
            // Rule 3: fast or proportional increase.
            (false, false) => {
                if self.low_delay_run > self.cwnd {
                    self.cwnd += s.fi_scale;
                    self.clamp();
                } else {
                    self.inc += s.alpha * (s.target - delay).as_us_f64();
                }
            }
            // Rule 4: multiplicative decrease, once per T.
            (true, true) => {
                if self.last_decrease.is_none_or(|t| now >= t + s.network_rtt) {
                    let avg = self.avg_delay_us.unwrap_or(delay.as_us_f64());
                    let excess = (avg - s.target.as_us_f64()) / avg.max(f64::MIN_POSITIVE);
                    let factor =
                        (1.0 - self.params.gamma * excess).clamp(1.0 - self.params.max_md, 1.0);
                    self.cwnd *= factor;
                    self.clamp();
                    self.last_decrease = Some(now);
                    self.decreases += 1;
                }
            }
            // Rule 5: marked below target: the path, not the window, is at fault.
            (true, false) => {}
        }
        self.fulfil(now);
    }

    fn on_nak(&mut self, _now: Instant, _path: usize, _reason: NakReason) {}

    fn on_loss(&mut self, _now: Instant, _path: usize, by_timeout: bool, _paths: &Paths) {
        // Losses by the timer or a path failure are the RTO's (`on_rto`); a packet
        // the receiver refused is `on_receiver_full`'s.
        if !by_timeout {
            self.nack();
        }
    }

    fn on_receiver_full(&mut self, _now: Instant, _paths: &Paths) -> bool {
        self.nack();
        true
    }

    fn on_rto(&mut self, _now: Instant, _paths: &Paths) {
        self.nack();
    }

    fn on_path_up(&mut self, _now: Instant, _path: usize, _paths: &Paths) {}

    fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    fn on_tick(&mut self, _now: Instant, _paths: &Paths, _flow: &dyn FlowView) -> Tick {
        Tick::default()
    }
}

#[cfg(test)]
mod tests;
