//! Swift per path (Kumar et al., SIGCOMM'20), as Falcon runs it: one delay-based
//! window per path, with Falcon's extras when asked for (a NIC window that shrinks
//! on the receiver's "buffer full" signal, and PLB re-pathing, [`super::plb`]).
//!
//! Per path p, with delay = the ACK's RTT sample and the values of REFERENCE.md
//! "Swift per path (Falcon)" ([`SwiftParams`]):
//! - target = base + hops h + clamp(fs_alpha / sqrt(cwnd) + fs_beta, 0, range),
//!   base = the path's base RTT, h = base / 6.55, range = 5 base (Swift §3.1-3.3);
//! - delay < target: cwnd += ai / cwnd per ACK (cwnd += ai when cwnd < 1);
//! - delay >= target: at most once per RTT,
//!   cwnd *= max(1 - beta (delay - target) / delay, 1 - max_mdf);
//! - a loss found by early recovery, or a packet the receiver refused ("buffer
//!   full" NAK, resent at once; not in Falcon, whose NIC window takes it):
//!   cwnd *= 1 - max_mdf, at most once per RTT (Swift's "on fast recovery",
//!   Algorithm 1);
//!   a retransmission timeout: the same, or cwnd = min_cwnd after
//!   `retx_reset_threshold` timeouts in a row;
//! - cwnd < 1 packet: the path sends one packet per RTT / cwnd (Swift's pacing
//!   below one packet), enforced by a per-path send gate.

use super::plb::Plb;
use super::{AckSample, CongestionControl, FlowView, Tick};
use crate::config::FlowConfig;
use crate::path::Paths;
use crate::time::{Duration, Instant};
use crate::wire::NakReason;

/// Swift's constants (REFERENCE.md, htsim `swift.cpp`; its author calls them guesses).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SwiftParams {
    /// Additive increase per RTT, packets.
    pub ai: f64,
    /// Multiplicative-decrease gain on the delay excess.
    pub beta: f64,
    /// Largest multiplicative decrease per RTT.
    pub max_mdf: f64,
    /// Per-hop target term as a fraction of the base RTT (h = base / 6.55).
    pub hop_scale: f64,
    /// Flow-scaling range as a multiple of the base RTT.
    pub fs_range: f64,
    /// Windows (packets) where the flow-scaling term is `range` and 0.
    pub fs_min_cwnd: f64,
    /// See `fs_min_cwnd`.
    pub fs_max_cwnd: f64,
    /// Smallest window, packets (Swift paces below one).
    pub min_cwnd: f64,
    /// Retransmission timeouts in a row that reset the window to `min_cwnd`.
    pub retx_reset_threshold: u32,
}

impl Default for SwiftParams {
    fn default() -> Self {
        SwiftParams {
            ai: 1.0,
            beta: 0.8,
            max_mdf: 0.5,
            hop_scale: 1.0 / 6.55,
            fs_range: 5.0,
            fs_min_cwnd: 0.1,
            fs_max_cwnd: 100.0,
            min_cwnd: 0.01,
            retx_reset_threshold: 5,
        }
    }
}

impl SwiftParams {
    /// The target delay of a path with base RTT `base`, `hops` switches and window
    /// `cwnd` (Swift §3.1 flow scaling, §3.2 topology scaling).
    pub fn target(&self, base: Duration, hops: u16, cwnd: f64) -> Duration {
        let base_us = base.as_us_f64();
        let range = self.fs_range * base_us;
        let fs_alpha = range / (1.0 / self.fs_min_cwnd.sqrt() - 1.0 / self.fs_max_cwnd.sqrt());
        let fs_beta = -fs_alpha / self.fs_max_cwnd.sqrt();
        let fs = (fs_alpha / cwnd.max(f64::MIN_POSITIVE).sqrt() + fs_beta).clamp(0.0, range);
        let hop = f64::from(hops) * self.hop_scale * base_us;
        Duration::from_us_f64(base_us + hop + fs)
    }
}

/// One path's Swift state.
#[derive(Clone, Debug)]
struct SwiftPath {
    cwnd: f64,
    last_decrease: Option<Instant>,
    /// Retransmission timeouts since the last ACK.
    retx_count: u32,
    /// The RTT the path last measured (spaces decreases and paces below one packet).
    rtt: Duration,
    /// Below one packet of window: no send before this.
    gate: Option<Instant>,
}

/// Falcon's NIC window: a flow-level window that the receiver's "buffer full"
/// signal shrinks multiplicatively and ACKs grow back additively; it goes away
/// once it no longer binds (above the sum of the path windows).
#[derive(Clone, Debug, Default)]
struct NicWindow {
    window: Option<f64>,
    last_cut: Option<Instant>,
    cuts: u64,
}

/// Per-path Swift windows of one flow.
#[derive(Clone, Debug)]
pub struct Swift {
    params: SwiftParams,
    paths: Vec<SwiftPath>,
    hops: u16,
    initial_rtt: Duration,
    initial_window: f64,
    max_cwnd: f64,
    nic: Option<NicWindow>,
    plb: Option<Plb>,
}

impl Swift {
    /// Swift per path for a flow configured by `cfg` (swift-rps), with its
    /// `swift` parameters. Each path starts at an equal share of one host BDP
    /// (line rate times `initial_rtt`), since Swift has no slow start; a path's
    /// window is capped at two host BDPs.
    pub fn new(cfg: &FlowConfig) -> Swift {
        let params = cfg.swift;
        let bdp = cfg.line_rate_bps as f64 / 8.0 / cfg.mtu as f64 * cfg.initial_rtt.as_secs_f64();
        let initial_window = (bdp / f64::from(cfg.paths)).max(1.0);
        Swift {
            params,
            paths: vec![
                SwiftPath {
                    cwnd: initial_window,
                    last_decrease: None,
                    retx_count: 0,
                    rtt: cfg.initial_rtt,
                    gate: None,
                };
                usize::from(cfg.paths)
            ],
            hops: cfg.hops.unwrap_or(0),
            initial_rtt: cfg.initial_rtt,
            initial_window,
            max_cwnd: (2.0 * bdp).max(initial_window),
            nic: None,
            plb: None,
        }
    }

    /// Falcon's controller: Swift per path plus the NIC window and PLB re-pathing.
    pub fn falcon(cfg: &FlowConfig) -> Swift {
        Swift {
            nic: Some(NicWindow::default()),
            plb: Some(Plb::new(usize::from(cfg.paths), cfg.seed)),
            ..Swift::new(cfg)
        }
    }

    /// The window of a path, packets.
    pub fn cwnd(&self, path: usize) -> f64 {
        self.paths[path].cwnd
    }

    /// The NIC window while it binds (Falcon), packets.
    pub fn nic_window(&self) -> Option<f64> {
        self.nic.as_ref().and_then(|n| n.window)
    }

    /// Times PLB moved a path (Falcon), over all paths.
    pub fn repaths(&self) -> u64 {
        self.plb.as_ref().map_or(0, |p| p.repaths())
    }

    /// The target delay of `path` now.
    pub fn target(&self, path: usize, paths: &Paths) -> Duration {
        let base = paths[path].base_rtt_or(self.initial_rtt);
        self.params.target(base, self.hops, self.paths[path].cwnd)
    }

    fn clamp(&mut self, path: usize) {
        let s = &mut self.paths[path];
        s.cwnd = s.cwnd.clamp(self.params.min_cwnd, self.max_cwnd);
    }

    /// Multiplies the window by `factor` unless it was cut less than an RTT ago.
    fn decrease(&mut self, now: Instant, path: usize, factor: f64) -> bool {
        let s = &mut self.paths[path];
        if s.last_decrease.is_some_and(|t| now < t + s.rtt) {
            return false;
        }
        s.last_decrease = Some(now);
        s.cwnd *= factor;
        self.clamp(path);
        true
    }

    /// Back to the initial state (a path back in rotation, or moved by PLB).
    fn restart(&mut self, path: usize) {
        let s = &mut self.paths[path];
        s.cwnd = self.initial_window;
        s.last_decrease = None;
        s.retx_count = 0;
        s.gate = None;
    }

    fn flow_open(&self, paths: &Paths) -> f64 {
        match self.nic_window() {
            Some(w) => {
                let inflight = paths.in_flight();
                (w - f64::from(inflight)).max(0.0)
            }
            None => f64::INFINITY,
        }
    }

    fn path_open(&self, path: usize, paths: &Paths) -> f64 {
        let s = &self.paths[path];
        if !paths.is_up(path) || s.gate.is_some() {
            return 0.0;
        }
        (s.cwnd - f64::from(paths.inflight(path))).max(0.0)
    }
}

impl CongestionControl for Swift {
    fn open_windows(&self, paths: &Paths, open: &mut [f64]) {
        let flow = self.flow_open(paths);
        for (p, o) in open.iter_mut().enumerate().take(paths.len()) {
            *o = self.path_open(p, paths).min(flow);
        }
    }

    fn any_open(&self, paths: &Paths) -> bool {
        self.flow_open(paths) > 0.0 && (0..paths.len()).any(|p| self.path_open(p, paths) > 0.0)
    }

    fn window(&self, path: usize) -> f64 {
        self.paths[path].cwnd
    }

    fn on_sent(&mut self, now: Instant, path: usize, _paths: &Paths) {
        let s = &mut self.paths[path];
        if s.cwnd < 1.0 {
            s.gate = Some(now + s.rtt.mul_f64(1.0 / s.cwnd));
        }
    }

    fn on_ack(&mut self, now: Instant, ack: &AckSample, paths: &Paths) {
        if ack.probe {
            return;
        }
        let p = ack.path;
        let Some(delay) = ack.rtt.or(paths[p].srtt) else {
            return;
        };
        let target = self.target(p, paths);
        let s = &mut self.paths[p];
        s.retx_count = 0;
        s.rtt = paths[p].srtt.unwrap_or(delay);
        if delay < target {
            // Swift Algorithm 1: additive increase, ai per RTT.
            s.cwnd += if s.cwnd >= 1.0 {
                self.params.ai / s.cwnd
            } else {
                self.params.ai
            };
            self.clamp(p);
        } else {
            let excess = (delay - target).as_us_f64() / delay.as_us_f64();
            let factor = (1.0 - self.params.beta * excess).max(1.0 - self.params.max_mdf);
            self.decrease(now, p, factor);
        }
        if let Some(nic) = &mut self.nic {
            if let Some(w) = nic.window {
                let sum: f64 = self.paths.iter().map(|s| s.cwnd).sum();
                let grown = w + 1.0 / w;
                nic.window = (grown < sum).then_some(grown);
            }
        }
        if let Some(plb) = &mut self.plb {
            let rtt = paths[p].srtt.unwrap_or(delay);
            if plb.on_ack(now, p, delay >= target, rtt) {
                self.restart(p);
            }
        }
    }

    /// A refused packet is a loss recovered at once, without the timer: Swift's
    /// fast-recovery decrease on the path it took. (The engine tells `on_loss`
    /// of it as a loss without a path verdict, which Swift leaves to `on_rto`.)
    /// Falcon keeps the receiver's congestion apart from the fabric's: a refusal
    /// cuts its NIC window (`on_receiver_full`), not the path windows.
    fn on_nak(&mut self, now: Instant, path: usize, reason: NakReason) {
        if reason == NakReason::BufferFull && self.nic.is_none() {
            let factor = 1.0 - self.params.max_mdf;
            self.decrease(now, path, factor);
        }
    }

    fn on_loss(&mut self, now: Instant, path: usize, by_timeout: bool, _paths: &Paths) {
        // Timeout losses are the RTO's (`on_rto`) or a path failure's.
        if !by_timeout {
            let factor = 1.0 - self.params.max_mdf;
            self.decrease(now, path, factor);
        }
    }

    fn on_receiver_full(&mut self, now: Instant, paths: &Paths) -> bool {
        let Some(nic) = &mut self.nic else {
            return false;
        };
        let rtt = paths
            .iter()
            .filter_map(|p| p.srtt)
            .max()
            .unwrap_or(self.initial_rtt);
        if nic.last_cut.is_some_and(|t| now < t + rtt) {
            return false;
        }
        let inflight = paths.in_flight();
        let current = nic.window.unwrap_or(f64::from(inflight));
        nic.window = Some((current * (1.0 - self.params.max_mdf)).max(1.0));
        nic.last_cut = Some(now);
        nic.cuts += 1;
        true
    }

    fn on_rto(&mut self, now: Instant, _paths: &Paths) {
        for p in 0..self.paths.len() {
            let s = &mut self.paths[p];
            s.retx_count += 1;
            if s.retx_count >= self.params.retx_reset_threshold {
                s.cwnd = self.params.min_cwnd;
            } else {
                s.cwnd *= 1.0 - self.params.max_mdf;
            }
            s.last_decrease = Some(now);
            self.clamp(p);
        }
    }

    fn on_path_up(&mut self, _now: Instant, path: usize, _paths: &Paths) {
        self.restart(path);
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.paths.iter().filter_map(|s| s.gate).min()
    }

    fn on_tick(&mut self, now: Instant, _paths: &Paths, _flow: &dyn FlowView) -> Tick {
        let mut tick = Tick::default();
        for s in &mut self.paths {
            if s.gate.is_some_and(|g| g <= now) {
                s.gate = None;
                tick.opened = true;
            }
        }
        tick
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::PathState;

    fn setup(paths: u16) -> (Swift, Paths) {
        let cfg = FlowConfig {
            paths,
            hops: Some(2),
            base_rtt: Some(vec![Duration::from_us(20); usize::from(paths)]),
            ..FlowConfig::default()
        };
        let states = Paths::from_states(
            (0..usize::from(paths))
                .map(|i| {
                    let mut p = PathState::new(&cfg, i);
                    p.on_rtt_sample(Duration::from_us(20), 0.125);
                    p
                })
                .collect(),
        );
        (Swift::new(&cfg), states)
    }

    fn ack(path: usize, rtt_us: f64) -> AckSample {
        AckSample {
            rtt: Some(Duration::from_us_f64(rtt_us)),
            ..AckSample::data(path, 0, false)
        }
    }

    #[test]
    fn target_is_base_plus_hops_plus_flow_scaling() {
        let p = SwiftParams::default();
        let base = Duration::from_us(20);
        // At cwnd 100 the flow-scaling term is 0: base + 2 hops x 20/6.55.
        let t = p.target(base, 2, 100.0).as_us_f64();
        assert!((t - (20.0 + 40.0 / 6.55)).abs() < 1e-3, "{t}");
        // At cwnd 0.1 (and below) it is the whole range, 5 x base.
        let t = p.target(base, 0, 0.1).as_us_f64();
        assert!((t - 120.0).abs() < 1e-3, "{t}");
        assert_eq!(p.target(base, 0, 0.01), p.target(base, 0, 0.1));
        // At cwnd 1: alpha (1 - 1/10), alpha = 100 / (sqrt(10) - 0.1).
        let t = p.target(base, 0, 1.0).as_us_f64();
        let fs = 100.0 / (10f64.sqrt() - 0.1) * 0.9;
        assert!((t - 20.0 - fs).abs() < 1e-3, "{t}");
    }

    #[test]
    fn below_target_adds_one_packet_per_window_of_acks() {
        let (mut s, paths) = setup(4);
        // 100 G x 20 us / 1500 B = 166.7 packets, a quarter per path.
        let w0 = s.cwnd(0);
        assert!((w0 - 166.666 / 4.0).abs() < 0.01, "{w0}");
        for _ in 0..42 {
            s.on_ack(Instant::from_us(100), &ack(0, 21.0), &paths);
        }
        let w = s.cwnd(0);
        assert!(w > w0 + 0.99 && w < w0 + 1.01, "{w}");
        assert_eq!(s.cwnd(1), w0, "other paths untouched");
    }

    #[test]
    fn above_target_cuts_by_the_excess_at_most_once_per_rtt() {
        let (mut s, paths) = setup(2);
        let w0 = s.cwnd(0);
        let target = s.target(0, &paths).as_us_f64();
        let delay = target + 10.0;
        s.on_ack(Instant::from_us(100), &ack(0, delay), &paths);
        let expect = w0 * (1.0 - 0.8 * 10.0 / delay);
        assert!(
            (s.cwnd(0) - expect).abs() < 1e-3,
            "{} vs {expect}",
            s.cwnd(0)
        );
        // Within the path's smoothed RTT (20 us): no second cut.
        s.on_ack(Instant::from_us(110), &ack(0, delay), &paths);
        assert!((s.cwnd(0) - expect).abs() < 1e-3);
        // A huge excess cuts by max_mdf only.
        let w = s.cwnd(0);
        s.on_ack(Instant::from_us(200), &ack(0, 10_000.0), &paths);
        assert!((s.cwnd(0) - w * 0.5).abs() < 1e-6);
    }

    #[test]
    fn losses_and_timeouts() {
        let (mut s, paths) = setup(2);
        let w0 = s.cwnd(1);
        s.on_loss(Instant::from_us(100), 1, false, &paths);
        assert_eq!(s.cwnd(1), w0 * 0.5);
        s.on_loss(Instant::from_us(101), 1, false, &paths); // same RTT
        s.on_loss(Instant::from_us(102), 1, true, &paths); // the RTO's business
        assert_eq!(s.cwnd(1), w0 * 0.5);
        for _ in 0..4 {
            s.on_rto(Instant::from_us(1000), &paths);
        }
        assert_eq!(s.cwnd(1), w0 / 32.0, "halved per timeout");
        s.on_rto(Instant::from_us(2000), &paths);
        assert_eq!(s.cwnd(1), 0.01, "reset to the minimum after 5 in a row");
        s.on_path_up(Instant::from_us(3000), 1, &paths);
        assert_eq!(s.cwnd(1), w0);
    }

    #[test]
    fn a_refused_packet_is_a_fast_recovery_cut_of_its_path() {
        let (mut s, _) = setup(2);
        let w0 = s.cwnd(0);
        s.on_nak(Instant::from_us(100), 0, NakReason::BufferFull);
        assert_eq!(s.cwnd(0), w0 * 0.5);
        assert_eq!(s.cwnd(1), w0, "other paths untouched");
        s.on_nak(Instant::from_us(110), 0, NakReason::BufferFull); // same RTT
        s.on_nak(Instant::from_us(200), 1, NakReason::OutOfWindow); // no refusal
        assert_eq!((s.cwnd(0), s.cwnd(1)), (w0 * 0.5, w0));
        s.on_nak(Instant::from_us(200), 0, NakReason::BufferFull);
        assert_eq!(s.cwnd(0), w0 * 0.25);
        // Falcon: the NIC window takes the refusal, the path windows do not.
        let cfg = FlowConfig {
            paths: 2,
            ..FlowConfig::default()
        };
        let mut f = Swift::falcon(&cfg);
        let w = f.cwnd(0);
        f.on_nak(Instant::from_us(100), 0, NakReason::BufferFull);
        assert_eq!(f.cwnd(0), w);
    }

    #[test]
    fn below_one_packet_the_path_sends_once_per_rtt_over_cwnd() {
        let (mut s, mut paths) = setup(1);
        for _ in 0..10 {
            s.on_rto(Instant::from_us(1000), &paths);
        }
        // cwnd 0.01 < 1: +ai per ACK below target.
        s.on_ack(Instant::from_us(1100), &ack(0, 20.0), &paths);
        assert!((s.cwnd(0) - 1.01).abs() < 1e-9);
        s.on_rto(Instant::from_us(1200), &paths);
        let w = s.cwnd(0);
        assert!(w < 1.0);
        let mut open = [0.0];
        s.open_windows(&paths, &mut open);
        assert!(open[0] > 0.0);
        s.on_sent(Instant::from_us(2000), 0, &paths);
        paths.set_inflight(0, 0); // acked at once: the gate still holds
        s.open_windows(&paths, &mut open);
        assert_eq!(open[0], 0.0);
        let gate = s.poll_timeout().unwrap();
        let expect = Instant::from_us(2000) + Duration::from_us(20).mul_f64(1.0 / w);
        assert_eq!(gate, expect);
        s.on_tick(gate, &paths, &crate::cc::Backlogged);
        s.open_windows(&paths, &mut open);
        assert!(open[0] > 0.0);
    }

    #[test]
    fn the_nic_window_shrinks_on_buffer_full_and_grows_back() {
        let cfg = FlowConfig {
            paths: 2,
            ..FlowConfig::default()
        };
        let mut paths = Paths::new(&cfg);
        let mut s = Swift::falcon(&cfg);
        let plain = Swift::new(&cfg);
        let mut plain_paths = paths.clone();
        assert!(!Swift::new(&cfg).on_receiver_full(Instant::ZERO, &plain_paths));
        plain_paths.set_inflight(0, 1);
        paths.set_inflight(0, 30);
        paths.set_inflight(1, 10);
        assert!(s.on_receiver_full(Instant::from_us(10), &paths));
        assert_eq!(s.nic_window(), Some(20.0));
        assert!(
            !s.on_receiver_full(Instant::from_us(15), &paths),
            "once per RTT"
        );
        let mut open = [0.0; 2];
        s.open_windows(&paths, &mut open);
        assert_eq!(open, [0.0, 0.0], "40 in flight over a NIC window of 20");
        paths.set_inflight(0, 12);
        paths.set_inflight(1, 2);
        s.open_windows(&paths, &mut open);
        assert_eq!(open, [6.0, 6.0]);
        plain.open_windows(&plain_paths, &mut open);
        assert!(open[0] > 40.0);
        for _ in 0..20 {
            s.on_ack(Instant::from_us(20), &ack(0, 21.0), &paths);
        }
        let w = s.nic_window().unwrap();
        assert!(w > 20.9 && w < 21.0, "+1 per window of ACKs: {w}");
    }

    #[test]
    fn falcon_moves_a_path_that_stays_over_target_and_restarts_it() {
        let cfg = FlowConfig {
            paths: 2,
            ..FlowConfig::default()
        };
        let mut paths = Paths::new(&cfg);
        paths[0].on_rtt_sample(Duration::from_us(20), 0.125);
        let mut s = Swift::falcon(&cfg);
        let w0 = s.cwnd(0);
        let mut moved = None;
        for us in 0..400u64 {
            s.on_ack(Instant::from_us(us), &ack(0, 200.0), &paths);
            if s.repaths() == 1 {
                moved = Some(us);
                break;
            }
            assert!(s.cwnd(0) < w0, "cut while over target");
        }
        // Rounds of 20 us: moved after 5 to 7 of them, back at the initial window.
        let us = moved.expect("PLB moved the path");
        assert!((100..=140).contains(&us), "{us}");
        assert_eq!(s.cwnd(0), w0);
        assert_eq!(Swift::new(&cfg).repaths(), 0);
    }
}
