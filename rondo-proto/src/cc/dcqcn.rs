//! DCQCN (Zhu et al., SIGCOMM'15): one rate per flow, cut on congestion
//! notifications, raised by a timer and a byte counter.
//!
//! The reaction point is the paper's rate machine. The notification point (the
//! receiver's CNP generator) is modelled here too: our receiver echoes each data
//! packet's ECN mark on its ACK ([`AckSample::ecn`]), and the controller turns an
//! echoed mark into a CNP unless one was taken less than the CNP interval ago (at
//! most one CNP per 50 us per flow, as the NP sends them). The ACK comes back on the
//! same path a CNP would, so the CNP's delay is the same.
//!
//! The flow is paced at the current rate R_C. RoCE NICs keep no window; the engine
//! wants one, so the flow's packets in flight are capped at [`WINDOW_BDPS`] times
//! the bandwidth-delay product at line rate (base RTT), far above what the rate
//! lets through at equilibrium: the rate is the control.
//!
//! DCQCN reacts to ECN only: losses, timeouts and "buffer full" NAKs leave the rate
//! as it is (the paper's fabric is lossless, PFC).

use super::{AckSample, CongestionControl, FlowView, Tick};
use crate::config::FlowConfig;
use crate::path::Paths;
use crate::time::{Duration, Instant};
use crate::wire::NakReason;

/// The flow's inflight cap, in bandwidth-delay products at line rate.
pub const WINDOW_BDPS: f64 = 2.0;

/// Smallest inflight cap, packets (tiny RTTs, before any is measured).
const MIN_WINDOW_PACKETS: f64 = 8.0;

/// DCQCN's parameters, rates as fractions of the line rate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DcqcnParams {
    /// Gain of the alpha EWMA, g.
    pub g: f64,
    /// Alpha decays by (1 - g) every this long without a CNP.
    pub alpha_timer: Duration,
    /// A rate-increase event every this long without a CNP.
    pub increase_timer: Duration,
    /// A rate-increase event every this many bytes sent.
    pub byte_counter: u64,
    /// Fewest microseconds between two CNPs of the flow (the NP's CNP interval).
    pub cnp_interval: Duration,
    /// Increase events of fast recovery, F.
    pub fast_recovery_events: u32,
    /// Additive increase step R_AI, fraction of the line rate.
    pub rai: f64,
    /// Hyper increase step R_HAI, fraction of the line rate.
    pub rhai: f64,
    /// Smallest rate, bits per second.
    pub min_rate_bps: f64,
}

impl Default for DcqcnParams {
    /// The paper's ("paper style", REFERENCE.md).
    fn default() -> Self {
        DcqcnParams {
            g: 1.0 / 256.0,
            alpha_timer: Duration::from_us(55),
            increase_timer: Duration::from_us(55),
            byte_counter: 10_000_000,
            cnp_interval: Duration::from_us(50),
            fast_recovery_events: 5,
            rai: 1.0 / 20.0,
            rhai: 1.0 / 10.0,
            min_rate_bps: 100e6,
        }
    }
}

/// Which increase a rate-increase event makes (paper §3.1, after QCN).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IncreaseStage {
    /// R_C = (R_T + R_C) / 2: both counters at most F.
    FastRecovery,
    /// R_T += R_AI first: one counter past F.
    Additive,
    /// R_T += R_HAI first: both counters past F.
    Hyper,
}

/// The DCQCN reaction point of one flow. Rates in packets per microsecond.
#[derive(Clone, Debug)]
pub struct Dcqcn {
    params: DcqcnParams,
    /// Line rate, packets/us.
    line_rate: f64,
    min_rate: f64,
    /// Current rate R_C.
    rate: f64,
    /// Target rate R_T.
    target: f64,
    alpha: f64,
    /// Rate-increase timer expiries since the last CNP, T.
    timer_events: u32,
    /// Byte-counter expiries since the last CNP, BC.
    byte_events: u32,
    /// Bytes sent since the last byte-counter expiry (or CNP).
    bytes: u64,
    mtu: u64,
    /// When the last CNP was taken.
    last_cnp: Option<Instant>,
    /// Next alpha decay and next timer increase; both start at the first CNP.
    alpha_next: Option<Instant>,
    increase_next: Option<Instant>,
    initial_rtt: Duration,
    cnps: u64,
    /// `FlowConfig::pacing`: off, the rate is not enforced (only the window cap
    /// holds the flow; for tests of the parts around the controller).
    paced: bool,
}

impl Dcqcn {
    /// The controller of a flow configured by `cfg` (its MTU, line rate and
    /// `dcqcn` parameters). It starts at line rate.
    pub fn new(cfg: &FlowConfig) -> Dcqcn {
        Dcqcn::with_params(cfg, cfg.dcqcn)
    }

    /// The controller with `params`.
    pub fn with_params(cfg: &FlowConfig, params: DcqcnParams) -> Dcqcn {
        let line_rate = cfg.line_rate_bps as f64 / (8.0 * cfg.mtu as f64) / 1e6;
        let min_rate = (params.min_rate_bps / (8.0 * cfg.mtu as f64) / 1e6).min(line_rate);
        Dcqcn {
            params,
            line_rate,
            min_rate,
            rate: line_rate,
            target: line_rate,
            alpha: 1.0,
            timer_events: 0,
            byte_events: 0,
            bytes: 0,
            mtu: cfg.mtu as u64,
            last_cnp: None,
            alpha_next: None,
            increase_next: None,
            initial_rtt: cfg.initial_rtt,
            cnps: 0,
            paced: cfg.pacing,
        }
    }

    /// Current rate R_C, packets/us.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// Target rate R_T, packets/us.
    pub fn target_rate(&self) -> f64 {
        self.target
    }

    /// Line rate, packets/us.
    pub fn line_rate(&self) -> f64 {
        self.line_rate
    }

    /// The congestion estimate alpha.
    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// CNPs taken so far.
    pub fn cnps(&self) -> u64 {
        self.cnps
    }

    /// The stage the counters stand in now: the last increase event ran in it.
    pub fn stage(&self) -> IncreaseStage {
        let f = self.params.fast_recovery_events;
        let (lo, hi) = (
            self.timer_events.min(self.byte_events),
            self.timer_events.max(self.byte_events),
        );
        if hi <= f {
            IncreaseStage::FastRecovery
        } else if lo <= f {
            IncreaseStage::Additive
        } else {
            IncreaseStage::Hyper
        }
    }

    /// A CNP arrived at `now`: the rate cut (paper §3.1, Alg. RP).
    pub fn on_cnp(&mut self, now: Instant) {
        self.cnps += 1;
        self.last_cnp = Some(now);
        self.target = self.rate;
        self.rate = (self.rate * (1.0 - self.alpha / 2.0)).max(self.min_rate);
        self.alpha = (1.0 - self.params.g) * self.alpha + self.params.g;
        self.timer_events = 0;
        self.byte_events = 0;
        self.bytes = 0;
        self.alpha_next = Some(now + self.params.alpha_timer);
        self.increase_next = Some(now + self.params.increase_timer);
    }

    /// One rate-increase event, after its counter moved.
    fn increase(&mut self) {
        match self.stage() {
            IncreaseStage::FastRecovery => {}
            IncreaseStage::Additive => self.target += self.params.rai * self.line_rate,
            IncreaseStage::Hyper => self.target += self.params.rhai * self.line_rate,
        }
        self.target = self.target.min(self.line_rate);
        self.rate = ((self.target + self.rate) / 2.0).min(self.line_rate);
    }

    /// The flow's inflight cap, packets: from the largest base RTT of the
    /// paths in use (a sprayed flow's packets take every path, and a cap from the
    /// shortest bound below an RC NIC's PSN window under a delay difference).
    fn window_cap(&self, paths: &Paths) -> f64 {
        let rtt = paths
            .iter()
            .filter_map(|p| p.base_rtt())
            .max()
            .unwrap_or(self.initial_rtt);
        (WINDOW_BDPS * self.line_rate * rtt.as_us_f64()).max(MIN_WINDOW_PACKETS)
    }

    fn open(&self, paths: &Paths) -> f64 {
        let inflight = paths.in_flight();
        (self.window_cap(paths) - f64::from(inflight)).max(0.0)
    }
}

impl CongestionControl for Dcqcn {
    fn open_windows(&self, paths: &Paths, open: &mut [f64]) {
        super::open_on_paths_up(self.open(paths), paths, open);
    }

    fn any_open(&self, paths: &Paths) -> bool {
        super::any_open_on_paths_up(self.open(paths), paths)
    }

    fn paced(&self) -> bool {
        self.paced
    }

    fn pacing_rate(&self, _paths: &Paths) -> f64 {
        self.rate
    }

    fn window(&self, _path: usize) -> f64 {
        self.rate
    }

    fn on_sent(&mut self, _now: Instant, _path: usize, _paths: &Paths) {
        self.bytes += self.mtu;
        if self.bytes >= self.params.byte_counter {
            self.bytes -= self.params.byte_counter;
            self.byte_events += 1;
            self.increase();
        }
    }

    fn on_ack(&mut self, now: Instant, ack: &AckSample, _paths: &Paths) {
        // The NP's CNP generator: one CNP per interval at most.
        if ack.ecn
            && !ack.probe
            && self
                .last_cnp
                .is_none_or(|t| now >= t + self.params.cnp_interval)
        {
            self.on_cnp(now);
        }
    }

    fn on_nak(&mut self, _now: Instant, _path: usize, _reason: NakReason) {}

    fn on_loss(&mut self, _now: Instant, _path: usize, _by_timeout: bool, _paths: &Paths) {}

    fn on_rto(&mut self, _now: Instant, _paths: &Paths) {}

    fn poll_timeout(&self) -> Option<Instant> {
        match (self.alpha_next, self.increase_next) {
            (Some(a), Some(i)) => Some(a.min(i)),
            (a, i) => a.or(i),
        }
    }

    fn on_tick(&mut self, now: Instant, _paths: &Paths, _flow: &dyn FlowView) -> Tick {
        let before = self.rate;
        while let Some(t) = self.alpha_next.filter(|&t| t <= now) {
            self.alpha *= 1.0 - self.params.g;
            self.alpha_next = Some(t + self.params.alpha_timer);
        }
        while let Some(t) = self.increase_next.filter(|&t| t <= now) {
            self.timer_events += 1;
            self.increase();
            self.increase_next = Some(t + self.params.increase_timer);
        }
        Tick {
            updated: self.rate != before,
            ..Tick::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (Dcqcn, Paths) {
        let cfg = FlowConfig {
            paths: 1,
            mtu: 1250, // 100 Gbit/s = 10 packets/us
            ..FlowConfig::default()
        };
        (Dcqcn::new(&cfg), Paths::new(&cfg))
    }

    fn ecn_ack(d: &mut Dcqcn, paths: &Paths, us: u64) {
        let s = AckSample::data(0, 0, true);
        d.on_ack(Instant::from_us(us), &s, paths);
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn starts_at_line_rate_and_a_cnp_cuts_by_half_alpha() {
        let (mut d, paths) = setup();
        assert!(close(d.rate(), 10.0) && d.paced() && close(d.pacing_rate(&paths), 10.0));
        assert_eq!(d.poll_timeout(), None, "no timer before the first CNP");
        ecn_ack(&mut d, &paths, 100);
        // alpha = 1: R_T = 10, R_C = 10 (1 - 1/2) = 5, alpha stays 1.
        assert!(close(d.target_rate(), 10.0) && close(d.rate(), 5.0));
        assert!(close(d.alpha(), 1.0));
        // Marks within 50 us of the CNP make no CNP.
        ecn_ack(&mut d, &paths, 149);
        assert_eq!(d.cnps(), 1);
        assert!(close(d.rate(), 5.0));
        ecn_ack(&mut d, &paths, 150);
        assert_eq!(d.cnps(), 2);
        assert!(close(d.target_rate(), 5.0) && close(d.rate(), 2.5));
        // An unmarked ACK does nothing.
        let mut clean = AckSample::data(0, 0, false);
        d.on_ack(Instant::from_us(400), &clean, &paths);
        clean.probe = true;
        clean.ecn = true;
        d.on_ack(Instant::from_us(400), &clean, &paths);
        assert_eq!(d.cnps(), 2);
    }

    #[test]
    fn alpha_decays_every_timer_without_a_cnp() {
        let (mut d, paths) = setup();
        ecn_ack(&mut d, &paths, 0);
        let g: f64 = 1.0 / 256.0;
        d.on_tick(Instant::from_us(54), &paths, &crate::cc::Backlogged);
        assert!(close(d.alpha(), 1.0));
        d.on_tick(Instant::from_us(55 * 3), &paths, &crate::cc::Backlogged);
        assert!(close(d.alpha(), (1.0 - g).powi(3)));
        // The next CNP cuts with the decayed alpha, then raises it.
        let a = d.alpha();
        let r = d.rate();
        ecn_ack(&mut d, &paths, 200);
        assert!(close(d.rate(), r * (1.0 - a / 2.0)));
        assert!(close(d.alpha(), (1.0 - g) * a + g));
        // ... and restarts the alpha timer: no decay at 220, where the old one was due.
        d.on_tick(Instant::from_us(254), &paths, &crate::cc::Backlogged);
        assert!(close(d.alpha(), (1.0 - g) * a + g));
    }

    #[test]
    fn timer_increase_runs_fast_recovery_then_additive() {
        let (mut d, paths) = setup();
        ecn_ack(&mut d, &paths, 0); // R_T = 10, R_C = 5
        let mut rc = 5.0;
        for k in 1..=5u64 {
            d.on_tick(Instant::from_us(55 * k), &paths, &crate::cc::Backlogged);
            rc = (10.0 + rc) / 2.0;
            assert!(close(d.rate(), rc), "fast recovery event {k}");
            assert!(close(d.target_rate(), 10.0));
        }
        assert_eq!(d.stage(), IncreaseStage::FastRecovery);
        // Bring R_T down to test the additive step: a CNP, then 6 timer events.
        let (mut d, paths) = setup();
        ecn_ack(&mut d, &paths, 0); // R_T 10, R_C 5
        ecn_ack(&mut d, &paths, 50); // R_T 5, R_C 2.5
        let mut rc = 2.5;
        for k in 1..=5u64 {
            d.on_tick(
                Instant::from_us(50 + 55 * k),
                &paths,
                &crate::cc::Backlogged,
            );
            rc = (5.0 + rc) / 2.0;
        }
        assert!(close(d.rate(), rc));
        d.on_tick(
            Instant::from_us(50 + 55 * 6),
            &paths,
            &crate::cc::Backlogged,
        );
        // R_T = 5 + 10/20 = 5.5; R_C = (5.5 + rc) / 2.
        assert!(close(d.target_rate(), 5.5));
        assert!(close(d.rate(), (5.5 + rc) / 2.0));
        assert_eq!(d.stage(), IncreaseStage::Additive);
    }

    #[test]
    fn both_counters_past_f_give_hyper_increase() {
        let cfg = FlowConfig {
            paths: 1,
            mtu: 1250,
            ..FlowConfig::default()
        };
        let params = DcqcnParams {
            byte_counter: 1250, // one byte-counter event per packet
            ..DcqcnParams::default()
        };
        let mut d = Dcqcn::with_params(&cfg, params);
        let paths = Paths::new(&cfg);
        ecn_ack(&mut d, &paths, 0);
        ecn_ack(&mut d, &paths, 50); // R_T 5, R_C 2.5, counters 0
        for _ in 0..6 {
            d.on_sent(Instant::from_us(60), 0, &paths); // BC = 6: additive from the 6th
        }
        assert_eq!(d.stage(), IncreaseStage::Additive);
        let target = d.target_rate();
        assert!(close(target, 5.5), "{target}");
        for k in 1..=6u64 {
            d.on_tick(
                Instant::from_us(50 + 55 * k),
                &paths,
                &crate::cc::Backlogged,
            );
        }
        // T = 6 at the last: hyper, R_T += 10/10 after 5 additive steps of the timer.
        assert_eq!(d.stage(), IncreaseStage::Hyper);
        assert!(close(d.target_rate(), 5.5 + 5.0 * 0.5 + 1.0));
    }

    #[test]
    fn rates_stay_between_the_minimum_and_line_rate() {
        let (mut d, paths) = setup();
        for k in 0..200u64 {
            ecn_ack(&mut d, &paths, 50 * k);
        }
        let min = 100e6 / (8.0 * 1250.0) / 1e6;
        assert!(close(d.rate(), min), "{}", d.rate());
        d.on_tick(Instant::from_us(1_000_000), &paths, &crate::cc::Backlogged);
        assert!(close(d.rate(), 10.0) && close(d.target_rate(), 10.0));
    }

    #[test]
    fn inflight_is_capped_at_two_bdps_and_losses_do_not_cut() {
        let (mut d, mut paths) = setup();
        paths[0].on_rtt_sample(Duration::from_us(10), 0.125);
        // 2 x 10 packets/us x 10 us = 200 packets.
        paths.set_inflight(0, 150);
        let mut open = [0.0];
        d.open_windows(&paths, &mut open);
        assert!(close(open[0], 50.0), "{open:?}");
        paths.set_inflight(0, 200);
        assert!(!d.any_open(&paths));
        d.on_loss(Instant::from_us(5), 0, true, &paths);
        d.on_rto(Instant::from_us(5), &paths);
        assert!(!d.on_receiver_full(Instant::from_us(5), &paths));
        assert!(close(d.rate(), 10.0));
    }
}
