//! Per-path sender state that every transport shares: whether the path is in
//! rotation, its RTT and forward-delay estimates (paper §4.3), packets in flight
//! and counters. What a congestion controller keeps per path (windows, rates) is
//! its own ([`crate::cc`]).

use crate::config::FlowConfig;
use crate::time::{Duration, Instant};
use std::ops::{Deref, DerefMut};

/// The paths of a flow's sender: each path's [`PathState`] (through `Deref`),
/// and apart from them, in two dense arrays, whether each path is in rotation
/// and its packets in flight. The congestion controllers, the timers and the
/// probe checks read those two of every path on most calls: over the
/// `PathState`s such a pass reads a cache line per path, cold in an endpoint of
/// many connections; over the arrays, one or two lines for 16 paths
/// (docs/engine.md, "Many connections per endpoint").
#[derive(Clone, Debug)]
pub struct Paths {
    state: Vec<PathState>,
    status: Vec<PathStatus>,
    inflight: Vec<u32>,
    /// Paths out of rotation.
    down: usize,
    /// The sum of `inflight`.
    in_flight: u32,
}

impl Paths {
    /// The `cfg.paths` paths of a flow configured by `cfg`: in rotation, nothing
    /// in flight.
    pub(crate) fn new(cfg: &FlowConfig) -> Paths {
        Paths::from_states(
            (0..usize::from(cfg.paths))
                .map(|i| PathState::new(cfg, i))
                .collect(),
        )
    }

    /// Paths with these states, in rotation, nothing in flight.
    pub(crate) fn from_states(state: Vec<PathState>) -> Paths {
        let n = state.len();
        Paths {
            state,
            status: vec![PathStatus::Up; n],
            inflight: vec![0; n],
            down: 0,
            in_flight: 0,
        }
    }

    /// Whether path `i` is in rotation.
    pub fn status(&self, i: usize) -> PathStatus {
        self.status[i]
    }

    /// Packets in flight on path `i`.
    pub fn inflight(&self, i: usize) -> u32 {
        self.inflight[i]
    }

    /// Path `i` is in rotation.
    pub(crate) fn is_up(&self, i: usize) -> bool {
        self.status[i] == PathStatus::Up
    }

    /// Every path's status, in path order.
    pub(crate) fn statuses(&self) -> &[PathStatus] {
        &self.status
    }

    /// Every path's packets in flight, in path order.
    pub(crate) fn inflights(&self) -> &[u32] {
        &self.inflight
    }

    /// Paths out of rotation.
    pub(crate) fn down(&self) -> usize {
        self.down
    }

    /// Paths in rotation.
    pub(crate) fn up(&self) -> usize {
        self.state.len() - self.down
    }

    /// Packets in flight over every path.
    pub(crate) fn in_flight(&self) -> u32 {
        self.in_flight
    }

    /// A packet went out on path `i`: it counts in flight there.
    pub(crate) fn add_in_flight(&mut self, i: usize) {
        self.inflight[i] += 1;
        self.in_flight += 1;
    }

    /// A packet sent on path `i` is no longer in flight there.
    pub(crate) fn remove_in_flight(&mut self, i: usize) {
        self.inflight[i] -= 1;
        self.in_flight -= 1;
    }

    /// Takes path `i`, in rotation, out of it.
    pub(crate) fn take_down(&mut self, i: usize) {
        debug_assert!(self.is_up(i));
        self.status[i] = PathStatus::Down;
        self.down += 1;
    }

    /// Puts path `i`, out of rotation, back in (its congestion controller
    /// restarts it).
    pub(crate) fn rejoin(&mut self, i: usize) {
        debug_assert!(!self.is_up(i));
        self.status[i] = PathStatus::Up;
        self.down -= 1;
        self.state[i].rejoin();
    }

    /// Sets path `i`'s packets in flight (controller tests).
    #[cfg(test)]
    pub(crate) fn set_inflight(&mut self, i: usize, n: u32) {
        self.in_flight = self.in_flight - self.inflight[i] + n;
        self.inflight[i] = n;
    }

    /// Sets path `i`'s status (controller tests).
    #[cfg(test)]
    pub(crate) fn set_status(&mut self, i: usize, status: PathStatus) {
        match (self.status[i], status) {
            (PathStatus::Up, PathStatus::Down) => self.take_down(i),
            (PathStatus::Down, PathStatus::Up) => {
                self.status[i] = PathStatus::Up;
                self.down -= 1;
            }
            _ => {}
        }
    }
}

impl Deref for Paths {
    type Target = [PathState];

    fn deref(&self) -> &[PathState] {
        &self.state
    }
}

impl DerefMut for Paths {
    fn deref_mut(&mut self) -> &mut [PathState] {
        &mut self.state
    }
}

/// Whether a path is in rotation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathStatus {
    /// In rotation.
    Up,
    /// Taken out of rotation after repeated losses; probed until a probe is answered.
    Down,
}

/// Sender-side measurements of one logical path (whether it is in rotation and
/// its packets in flight are [`Paths`]'s).
#[derive(Clone, Debug)]
pub struct PathState {
    /// RTT deviation estimate.
    rttvar: Duration,
    configured_base_rtt: Option<Duration>,
    min_rtt: Option<Duration>,
    pub(crate) srtt: Option<Duration>,
    /// Forward delay estimate in picoseconds (signed: it is offset by the unknown
    /// difference of the two clocks).
    pub(crate) fwd_delay_ps: Option<i64>,
    pub(crate) fwd_stable_samples: u32,
    /// The packets in flight on the path when the packets of the forward-delay
    /// samples were sent, averaged as `fwd_delay_ps` is (the same gain, the
    /// same samples): what the estimate's packets found ahead of them.
    pub(crate) fwd_ahead: Option<f64>,
    /// When this path last sent a data packet.
    pub(crate) last_sent: Option<Instant>,
    pub(crate) consecutive_losses: u32,
    pub(crate) next_down_probe: Instant,
    /// When an ACK or NAK last came back on this path (a data packet's or a
    /// probe's): a path silent since before its lost packets were sent, while
    /// others answer, is black-holed.
    pub(crate) last_feedback: Option<Instant>,
    /// The send time (as echoed, ns) and PSN of the packet whose ACK gave this
    /// path's last RTT sample: only later ones give another (Karn, and replays).
    pub(crate) last_sample: Option<(u64, u64)>,
    /// PSNs of the probes sent on this path whose ACK has not come back, oldest
    /// first (at most [`MAX_PROBES_OUTSTANDING`]): only their ACKs are believed.
    pub(crate) probes_outstanding: std::collections::VecDeque<u32>,
    /// Send time of the latest-sent data packet acknowledged by its own ACK on
    /// this path (`FlowConfig::path_order_loss`).
    pub(crate) newest_acked_sent: Option<Instant>,
    pub(crate) counters: PathCounters,
}

/// Most probes per path remembered as outstanding; the oldest is forgotten (as
/// lost) beyond that.
pub(crate) const MAX_PROBES_OUTSTANDING: usize = 256;

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
    pub(crate) fn new(cfg: &FlowConfig, index: usize) -> PathState {
        PathState {
            rttvar: Duration::ZERO,
            configured_base_rtt: cfg.base_rtt.as_ref().map(|v| v[index]),
            min_rtt: None,
            srtt: None,
            fwd_delay_ps: None,
            fwd_stable_samples: 0,
            fwd_ahead: None,
            last_sent: None,
            consecutive_losses: 0,
            next_down_probe: Instant::MAX,
            last_feedback: None,
            last_sample: None,
            probes_outstanding: std::collections::VecDeque::new(),
            newest_acked_sent: None,
            counters: PathCounters::default(),
        }
    }

    /// Base RTT T_p: configured, else the smallest measured RTT, else `fallback`.
    pub(crate) fn base_rtt_or(&self, fallback: Duration) -> Duration {
        self.configured_base_rtt
            .or(self.min_rtt)
            .unwrap_or(fallback)
    }

    /// Base RTT given by the configuration (the topology), if any.
    pub(crate) fn configured_base_rtt(&self) -> Option<Duration> {
        self.configured_base_rtt
    }

    /// Base RTT when known (configured or measured).
    pub fn base_rtt(&self) -> Option<Duration> {
        self.configured_base_rtt.or(self.min_rtt)
    }

    /// How long after sending a packet on this path its ACK is overdue: the
    /// smoothed RTT plus the larger of four RTT deviations and a quarter RTT
    /// (RACK-style reordering window, per path). `None` before the path's first
    /// RTT sample: its delay is unknown, so nothing is overdue on it yet. (A
    /// configured initial RTT of 20 us declared every first-RTT packet lost on
    /// paths slower than 25 us: 17,175 spurious retransmissions in fig13-delay.)
    pub(crate) fn ack_deadline(&self) -> Option<Duration> {
        let srtt = self.srtt?;
        let slack = self
            .rttvar
            .saturating_mul(4)
            .max(Duration::from_ps(srtt.as_ps() / 4));
        Some(srtt + slack)
    }

    /// Smoothed RTT.
    pub fn srtt(&self) -> Option<Duration> {
        self.srtt
    }

    /// Forward delay estimate in ns (includes the sender/receiver clock offset).
    pub fn forward_delay_ns(&self) -> Option<f64> {
        self.fwd_delay_ps.map(|d| d as f64 / 1e3)
    }

    /// Consecutive forward-delay samples within tolerance of the estimate.
    pub fn stable_samples(&self) -> u32 {
        self.fwd_stable_samples
    }

    /// Counters.
    pub fn counters(&self) -> PathCounters {
        self.counters
    }

    /// An RTT sample from an ACK.
    pub(crate) fn on_rtt_sample(&mut self, rtt: Duration, gain: f64) {
        self.min_rtt = Some(self.min_rtt.map_or(rtt, |m| m.min(rtt)));
        self.rttvar = match self.srtt {
            // rttvar += (|srtt - rtt| - rttvar) / 4, in whole picoseconds.
            Some(s) => {
                let dev = s.as_ps().abs_diff(rtt.as_ps()) as i128;
                let var = self.rttvar.as_ps() as i128;
                Duration::from_ps((var + (dev - var) / 4) as u64)
            }
            None => Duration::from_ps(rtt.as_ps() / 2),
        };
        self.srtt = Some(match self.srtt {
            None => rtt,
            Some(s) => {
                let s = s.as_ps() as f64;
                Duration::from_ps(crate::time::round_u64(s + gain * (rtt.as_ps() as f64 - s)))
            }
        });
    }

    /// A forward-delay sample (receiver clock minus sender clock, picoseconds)
    /// of a packet sent with `ahead` packets in flight on the path (`None`:
    /// not known).
    pub(crate) fn on_forward_delay_sample(
        &mut self,
        sample_ps: i64,
        ahead: Option<u16>,
        gain: f64,
        tolerance: Duration,
    ) {
        if let Some(a) = ahead.map(f64::from) {
            self.fwd_ahead = Some(self.fwd_ahead.map_or(a, |x| x + gain * (a - x)));
        }
        match self.fwd_delay_ps {
            None => {
                self.fwd_delay_ps = Some(sample_ps);
                self.fwd_stable_samples = 1;
            }
            Some(d) => {
                if sample_ps.abs_diff(d) <= tolerance.as_ps() {
                    self.fwd_stable_samples = self.fwd_stable_samples.saturating_add(1);
                } else {
                    self.fwd_stable_samples = 0;
                }
                let step = (sample_ps.saturating_sub(d) as f64 * gain).round() as i64;
                self.fwd_delay_ps = Some(d.saturating_add(step));
            }
        }
    }

    /// The path is back in rotation ([`Paths::rejoin`]).
    fn rejoin(&mut self) {
        self.consecutive_losses = 0;
        self.fwd_stable_samples = 0;
        self.next_down_probe = Instant::MAX;
    }
}

/// The largest base RTT over `paths` (each falling back to `fallback`).
pub(crate) fn max_base_rtt(paths: &[PathState], fallback: Duration) -> Duration {
    paths
        .iter()
        .map(|p| p.base_rtt_or(fallback))
        .max()
        .unwrap_or(fallback)
}
