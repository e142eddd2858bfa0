//! One AIMD window for the whole flow, as RRPS runs it: slow start, then one
//! packet more per window of ACKs, halved at most once per RTT on a loss or a
//! "buffer full" NAK, back to the initial window on a timeout.

use super::{AckSample, CongestionControl};
use crate::config::FlowConfig;
use crate::path::Paths;
use crate::time::{Duration, Instant};
use crate::wire::NakReason;

/// A per-flow additive-increase, multiplicative-decrease window in packets.
///
/// Every path in rotation may send while the flow's packets in flight are below
/// the window, so the path selector alone decides how the window is spread (RRPS:
/// in turn). The flow is not paced: the window clocks it.
#[derive(Clone, Debug)]
pub struct Aimd {
    window: f64,
    /// Slow start while the window is below this.
    ssthresh: f64,
    initial_window: f64,
    min_window: f64,
    initial_rtt: Duration,
    last_cut: Option<Instant>,
}

impl Aimd {
    /// The controller of a flow configured by `cfg`: the initial window is
    /// `initial_window` per path.
    pub fn new(cfg: &FlowConfig) -> Aimd {
        let initial = cfg.initial_window * f64::from(cfg.paths);
        Aimd {
            window: initial,
            ssthresh: f64::INFINITY,
            initial_window: initial,
            min_window: cfg.min_window,
            initial_rtt: cfg.initial_rtt,
            last_cut: None,
        }
    }

    /// The flow's window, packets.
    pub fn flow_window(&self) -> f64 {
        self.window
    }

    fn open(&self, paths: &Paths) -> f64 {
        let inflight = paths.in_flight();
        (self.window - f64::from(inflight)).max(0.0)
    }

    /// Halves the window unless it was cut less than an RTT ago.
    fn cut(&mut self, now: Instant, rtt: Duration) -> bool {
        if self.last_cut.is_some_and(|t| now < t + rtt) {
            return false;
        }
        self.last_cut = Some(now);
        self.ssthresh = (self.window / 2.0).max(self.min_window);
        self.window = self.ssthresh;
        true
    }

    /// The largest smoothed RTT of the flow's paths, the RTT that spaces cuts.
    fn rtt(&self, paths: &Paths) -> Duration {
        paths
            .iter()
            .filter_map(|p| p.srtt)
            .max()
            .unwrap_or(self.initial_rtt)
    }
}

impl CongestionControl for Aimd {
    fn open_windows(&self, paths: &Paths, open: &mut [f64]) {
        super::open_on_paths_up(self.open(paths), paths, open);
    }

    fn any_open(&self, paths: &Paths) -> bool {
        super::any_open_on_paths_up(self.open(paths), paths)
    }

    fn window(&self, _path: usize) -> f64 {
        self.window
    }

    fn on_ack(&mut self, _now: Instant, ack: &AckSample, _paths: &Paths) {
        if ack.probe {
            return;
        }
        self.window += if self.window < self.ssthresh {
            1.0
        } else {
            1.0 / self.window
        };
    }

    fn on_nak(&mut self, _now: Instant, _path: usize, _reason: NakReason) {}

    fn on_loss(&mut self, now: Instant, _path: usize, _by_timeout: bool, paths: &Paths) {
        let rtt = self.rtt(paths);
        self.cut(now, rtt);
    }

    fn on_receiver_full(&mut self, now: Instant, paths: &Paths) -> bool {
        let rtt = self.rtt(paths);
        self.cut(now, rtt)
    }

    fn on_rto(&mut self, now: Instant, _paths: &Paths) {
        self.ssthresh = (self.window / 2.0).max(self.min_window);
        self.window = self.initial_window;
        self.last_cut = Some(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup(paths: u16) -> (Aimd, Paths) {
        let cfg = FlowConfig {
            paths,
            initial_window: 1.0,
            ..FlowConfig::default()
        };
        (Aimd::new(&cfg), Paths::new(&cfg))
    }

    fn ack(a: &mut Aimd, paths: &Paths, n: u32) {
        let s = AckSample::data(0, 0, false);
        for _ in 0..n {
            a.on_ack(Instant::ZERO, &s, paths);
        }
    }

    #[test]
    fn slow_start_then_one_packet_per_window() {
        let (mut a, paths) = setup(4);
        assert_eq!(a.flow_window(), 4.0); // W0 per path
        ack(&mut a, &paths, 4);
        assert_eq!(a.flow_window(), 8.0); // slow start: +1 per ACK
        a.on_loss(Instant::from_us(100), 0, false, &paths);
        assert_eq!(a.flow_window(), 4.0); // halved
        ack(&mut a, &paths, 4);
        let w = a.flow_window(); // about +1 per window of ACKs: 4.92
        assert!(w > 4.9 && w < 5.0, "{w}");
    }

    #[test]
    fn cuts_at_most_once_per_rtt() {
        let (mut a, mut paths) = setup(2);
        paths[1].on_rtt_sample(Duration::from_us(50), 0.125);
        ack(&mut a, &paths, 30);
        assert_eq!(a.flow_window(), 32.0);
        a.on_loss(Instant::from_us(1000), 0, false, &paths);
        a.on_loss(Instant::from_us(1010), 1, false, &paths);
        assert!(!a.on_receiver_full(Instant::from_us(1049), &paths));
        assert_eq!(a.flow_window(), 16.0, "one cut within the 50 us RTT");
        assert!(a.on_receiver_full(Instant::from_us(1050), &paths));
        assert_eq!(a.flow_window(), 8.0);
        a.on_rto(Instant::from_us(2000), &paths);
        assert_eq!(a.flow_window(), 2.0); // back to W0, slow start up to 4
        ack(&mut a, &paths, 3);
        assert!(a.flow_window() > 4.0 && a.flow_window() < 4.5);
    }

    #[test]
    fn the_flow_window_opens_every_path_in_rotation() {
        let (mut a, mut paths) = setup(3);
        ack(&mut a, &paths, 2); // window 5
        paths.set_inflight(0, 2);
        paths.set_inflight(1, 1);
        paths.set_status(2, crate::path::PathStatus::Down);
        let mut open = [0.0; 3];
        a.open_windows(&paths, &mut open);
        assert_eq!(open, [2.0, 2.0, 0.0]);
        assert!(a.any_open(&paths));
        paths.set_inflight(2, 2);
        a.open_windows(&paths, &mut open);
        assert_eq!(open, [0.0, 0.0, 0.0]);
        assert!(!a.any_open(&paths));
        assert!(!a.paced() && !a.probing(Instant::ZERO) && a.poll_timeout().is_none());
    }
}
