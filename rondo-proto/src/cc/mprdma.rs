//! MP-RDMA's congestion control and ACK-clocked path choice (Lu et al., NSDI'18):
//! one ECN-driven window in packets for all the flow's paths, and sends granted
//! per path by the ACKs that return on it, with out-of-order-aware pruning.

use super::{AckSample, CongestionControl};
use crate::config::FlowConfig;
use crate::path::{PathStatus, Paths};
use crate::rng::Rng;
use crate::time::Instant;
use crate::wire::NakReason;

/// An ACK whose PSN lies more than this below the highest PSN acknowledged so far
/// prunes its path (MP-RDMA's delta; half the 64-entry receiver bitmap).
pub const PRUNE_DELTA: u64 = 32;

/// Sends one ACK grants on its path (MP-RDMA sends up to two per ACK).
pub const SENDS_PER_ACK: f64 = 2.0;

/// Probability that an ACK's sends go to a random path instead of the ACK's own
/// (MP-RDMA's exploration of new virtual paths).
pub const EXPLORE_PROBABILITY: f64 = 0.01;

/// MP-RDMA's per-flow window and per-path send credits.
///
/// Per data ACK: without ECN `cwnd += 1/cwnd` (`+1` in slow start, until the
/// first ECN echo), with ECN `cwnd -= 1/2`, floor `min_window`. The ACK grants its
/// path up to [`SENDS_PER_ACK`] sends (with probability [`EXPLORE_PROBABILITY`] a
/// random path in rotation gets them instead); a path may send while it holds a
/// credit and the flow's available window `awnd = cwnd - inflight` is at least one
/// packet. `inflight` counts the packets sent and not yet acknowledged by their own
/// ACK, which is MP-RDMA's `snd_nxt - snd_una - inflate`. An ACK whose PSN lies
/// more than [`PRUNE_DELTA`] below the highest acknowledged PSN is late: it prunes
/// its path (`cwnd -= 1`, its credits dropped, nothing sent). Until the first ACK,
/// and whenever nothing is in flight to clock the flow (after a timeout, or when
/// every packet in flight was refused), every path in rotation may send up to the
/// window, in turn.
#[derive(Clone, Debug)]
pub struct Mprdma {
    cwnd: f64,
    min_window: f64,
    slow_start: bool,
    /// Sends granted to each path by its ACKs and not yet spent.
    credits: Vec<f64>,
    /// Highest PSN acknowledged by a data ACK so far.
    highest_acked: Option<u64>,
    /// An ACK has arrived since the start or the last timeout.
    clocked: bool,
    rng: Rng,
    pruned: u64,
    explored: u64,
}

impl Mprdma {
    /// The controller of a flow configured by `cfg`: the initial window is
    /// `initial_window` per path.
    pub fn new(cfg: &FlowConfig) -> Mprdma {
        Mprdma {
            cwnd: cfg.initial_window * f64::from(cfg.paths),
            min_window: cfg.min_window,
            slow_start: true,
            credits: vec![0.0; usize::from(cfg.paths)],
            highest_acked: None,
            clocked: false,
            rng: Rng::new(cfg.seed ^ 0x6d70_7264_6d61),
            pruned: 0,
            explored: 0,
        }
    }

    /// The flow's window, packets.
    pub fn cwnd(&self) -> f64 {
        self.cwnd
    }

    /// Unspent sends granted to `path`.
    pub fn credits(&self, path: usize) -> f64 {
        self.credits[path]
    }

    /// ACKs that pruned their path.
    pub fn pruned(&self) -> u64 {
        self.pruned
    }

    /// ACKs whose sends went to a random path.
    pub fn explored(&self) -> u64 {
        self.explored
    }

    /// The available window `awnd`, whole packets (0 below one).
    fn awnd(&self, paths: &Paths) -> f64 {
        let inflight = paths.in_flight();
        let a = self.cwnd - f64::from(inflight);
        if a >= 1.0 {
            a.floor()
        } else {
            0.0
        }
    }

    /// Whether every path in rotation sends on the window alone (no ACK clock).
    fn unclocked(&self, paths: &Paths) -> bool {
        !self.clocked || paths.in_flight() == 0
    }
}

impl CongestionControl for Mprdma {
    fn open_windows(&self, paths: &Paths, open: &mut [f64]) {
        let awnd = self.awnd(paths);
        let unclocked = self.unclocked(paths);
        for (p, (o, s)) in open.iter_mut().zip(paths.statuses()).enumerate() {
            *o = if *s != PathStatus::Up {
                0.0
            } else if unclocked {
                awnd
            } else {
                awnd.min(self.credits[p])
            };
        }
    }

    fn any_open(&self, paths: &Paths) -> bool {
        let awnd = self.awnd(paths);
        let unclocked = self.unclocked(paths);
        awnd > 0.0
            && paths
                .statuses()
                .iter()
                .enumerate()
                .any(|(p, s)| *s == PathStatus::Up && (unclocked || self.credits[p] > 0.0))
    }

    fn window(&self, _path: usize) -> f64 {
        self.cwnd
    }

    fn on_sent(&mut self, _now: Instant, path: usize, _paths: &Paths) {
        let c = &mut self.credits[path];
        *c = (*c - 1.0).max(0.0);
    }

    fn on_ack(&mut self, _now: Instant, ack: &AckSample, paths: &Paths) {
        if ack.probe {
            return;
        }
        self.clocked = true;
        let highest = self.highest_acked.map_or(ack.psn, |h| h.max(ack.psn));
        self.highest_acked = Some(highest);
        if ack.psn + PRUNE_DELTA < highest {
            // A late ACK: its path reorders too much.
            self.pruned += 1;
            self.cwnd = (self.cwnd - 1.0).max(self.min_window);
            self.credits[ack.path] = 0.0;
            return;
        }
        if ack.ecn {
            self.slow_start = false;
            self.cwnd = (self.cwnd - 0.5).max(self.min_window);
        } else if self.slow_start {
            self.cwnd += 1.0;
        } else {
            self.cwnd += 1.0 / self.cwnd;
        }
        let mut path = ack.path;
        if self.rng.chance(EXPLORE_PROBABILITY) {
            let up: Vec<usize> = (0..paths.len()).filter(|&i| paths.is_up(i)).collect();
            if !up.is_empty() {
                path = up[self.rng.gen_range(0..up.len() as u64) as usize];
                self.explored += 1;
            }
        }
        // Up to two sends on the chosen path; unspent ones do not pile up.
        self.credits[path] = SENDS_PER_ACK;
    }

    fn on_nak(&mut self, _now: Instant, _path: usize, _reason: NakReason) {}

    fn on_loss(&mut self, _now: Instant, _path: usize, _by_timeout: bool, _paths: &Paths) {}

    fn on_rto(&mut self, _now: Instant, _paths: &Paths) {
        self.cwnd = (self.cwnd / 2.0).max(self.min_window);
        self.slow_start = false;
        self.clocked = false;
        self.credits.iter_mut().for_each(|c| *c = 0.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup(paths: u16) -> (Mprdma, Paths) {
        let cfg = FlowConfig {
            paths,
            initial_window: 1.0,
            ..FlowConfig::default()
        };
        (Mprdma::new(&cfg), Paths::new(&cfg))
    }

    fn sample(path: usize, psn: u64, ecn: bool) -> AckSample {
        AckSample::data(path, psn, ecn)
    }

    /// Leaves slow start with one ECN echo, then sets the window to `w`.
    fn steady(m: &mut Mprdma, paths: &Paths, w: f64) {
        m.on_ack(Instant::ZERO, &sample(0, 0, true), paths);
        m.cwnd = w;
    }

    #[test]
    fn ecn_takes_half_a_packet_and_no_ecn_adds_one_per_window() {
        let (mut m, paths) = setup(4);
        assert_eq!(m.cwnd(), 4.0);
        m.on_ack(Instant::ZERO, &sample(0, 0, false), &paths);
        assert_eq!(m.cwnd(), 5.0, "slow start before the first ECN echo");
        m.on_ack(Instant::ZERO, &sample(0, 1, true), &paths);
        assert_eq!(m.cwnd(), 4.5);
        m.cwnd = 10.0;
        m.on_ack(Instant::ZERO, &sample(1, 2, false), &paths);
        assert!((m.cwnd() - 10.1).abs() < 1e-12, "{}", m.cwnd());
        for psn in 3..100 {
            m.on_ack(Instant::ZERO, &sample(1, psn, true), &paths);
        }
        assert_eq!(m.cwnd(), 1.0, "floor of one packet");
    }

    #[test]
    fn an_ack_grants_at_most_two_sends_on_its_path() {
        let (mut m, mut paths) = setup(3);
        steady(&mut m, &paths, 20.0);
        m.credits = vec![0.0; 3];
        paths.set_inflight(0, 5);
        paths.set_inflight(1, 5);
        paths.set_inflight(2, 5);
        let mut open = [0.0; 3];
        m.on_ack(Instant::ZERO, &sample(1, 10, false), &paths);
        m.on_ack(Instant::ZERO, &sample(1, 11, false), &paths);
        m.open_windows(&paths, &mut open);
        assert_eq!(
            open,
            [0.0, 2.0, 0.0],
            "two ACKs of one path still grant two"
        );
        m.on_sent(Instant::ZERO, 1, &paths);
        paths.set_inflight(1, paths.inflight(1) + 1);
        m.on_sent(Instant::ZERO, 1, &paths);
        paths.set_inflight(1, paths.inflight(1) + 1);
        m.open_windows(&paths, &mut open);
        assert_eq!(open, [0.0; 3]);
        assert!(!m.any_open(&paths));
        // The available window bounds what a credit may send.
        m.on_ack(Instant::ZERO, &sample(2, 12, false), &paths);
        paths.set_inflight(0, 20 - 17 + 5 - 1); // awnd = 20.2 - 19 = 1
        m.open_windows(&paths, &mut open);
        assert_eq!(open, [0.0, 0.0, 1.0]);
    }

    #[test]
    fn a_late_ack_prunes_its_path() {
        let (mut m, mut paths) = setup(2);
        steady(&mut m, &paths, 10.0);
        paths.set_inflight(0, 3);
        paths.set_inflight(1, 3);
        m.on_ack(Instant::ZERO, &sample(0, 100, false), &paths);
        m.on_ack(Instant::ZERO, &sample(1, 68, false), &paths); // exactly delta behind
        let mut open = [0.0; 2];
        m.open_windows(&paths, &mut open);
        assert_eq!(open, [2.0, 2.0]);
        let w = m.cwnd();
        m.on_ack(Instant::ZERO, &sample(1, 67, false), &paths); // beyond delta
        assert_eq!(m.pruned(), 1);
        assert!((m.cwnd() - (w - 1.0)).abs() < 1e-12);
        m.open_windows(&paths, &mut open);
        assert_eq!(
            open,
            [2.0, 0.0],
            "the late ACK sends nothing, its path pruned"
        );
    }

    #[test]
    fn without_acks_every_path_sends_up_to_the_window() {
        let (mut m, mut paths) = setup(4);
        let mut open = [0.0; 4];
        m.open_windows(&paths, &mut open);
        assert_eq!(open, [4.0; 4]);
        paths.set_inflight(0, 2);
        paths.set_status(3, PathStatus::Down);
        m.open_windows(&paths, &mut open);
        assert_eq!(open, [2.0, 2.0, 2.0, 0.0]);
        m.on_ack(Instant::ZERO, &sample(0, 0, false), &paths);
        m.open_windows(&paths, &mut open);
        assert_eq!(open, [2.0, 0.0, 0.0, 0.0], "clocked by ACKs from now on");
        m.on_rto(Instant::ZERO, &paths);
        m.open_windows(&paths, &mut open);
        assert_eq!(
            open,
            [0.0, 0.0, 0.0, 0.0],
            "cwnd halved to 2.5, 2 in flight"
        );
        paths.set_inflight(0, 0);
        m.open_windows(&paths, &mut open);
        assert_eq!(open, [2.0, 2.0, 2.0, 0.0]);
    }

    #[test]
    fn exploration_sends_about_one_ack_in_a_hundred_elsewhere() {
        let (mut m, paths) = setup(4);
        steady(&mut m, &paths, 50.0);
        for psn in 0..20_000 {
            m.on_ack(Instant::ZERO, &sample(0, psn, false), &paths);
        }
        let e = m.explored();
        assert!(e > 120 && e < 290, "{e}");
    }
}
