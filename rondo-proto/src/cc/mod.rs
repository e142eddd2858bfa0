//! The congestion-control seam: windows and rates per flow and per path, pacing.
//!
//! A controller sees every ACK with its path, RTT sample, forward delay, ECN echo
//! and probe flag, every NAK and loss verdict, the receiver's "buffer full"
//! signal, every transmission, and a periodic tick it schedules itself; it answers
//! how much each path may send now ([`CongestionControl::open_windows`]) and how
//! fast the flow is paced. Implementations: [`Arcc`] (Rondo, paper §4.2),
//! [`Aimd`] (one window per flow, halved on loss: RRPS's), [`Swift`]
//! (delay-based windows per path: swift-rps, Falcon), [`Dcqcn`] (one paced
//! rate per flow, cut on ECN echoes: the ecmp, ar and RC baselines') and
//! [`Mprdma`] (MP-RDMA's ECN window, sends granted per path by its ACKs) and
//! [`Nscc`] (UET's window from ECN and delay together).
//! [`AnyCc`] dispatches statically over them.
//!
//! Units: windows in packets (`f64`, fractional), rates in packets per
//! microsecond (`f64`), times as [`Instant`] / [`Duration`] (integer picoseconds).

mod aimd;
mod arcc;
mod dcqcn;
mod mprdma;
mod nscc;
mod plb;
mod swift;

pub use aimd::Aimd;
pub use arcc::{Arcc, ArccUpdate};
pub use dcqcn::{Dcqcn, DcqcnParams, IncreaseStage, WINDOW_BDPS};
pub use mprdma::Mprdma;
pub use nscc::{Nscc, NsccParams, NsccScale};
pub use swift::{Swift, SwiftParams};

use crate::path::Paths;
use crate::time::{Duration, Instant};
use crate::wire::NakReason;

/// What one ACK told the sender about its path.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AckSample {
    /// The path the acknowledged packet was sent on.
    pub path: usize,
    /// RTT of the packet, when the ACK gave a sample (data ACKs with a valid echo).
    pub rtt: Option<Duration>,
    /// Forward delay sample in picoseconds (receiver clock minus sender clock,
    /// so offset by their difference), with `rtt`.
    pub forward_delay_ps: Option<i64>,
    /// The ACK answers a capacity probe.
    pub probe: bool,
    /// The acknowledged packet was marked Congestion Experienced.
    pub ecn: bool,
    /// The acknowledged packet's PSN (absolute; 0 for a probe's ACK).
    pub psn: u64,
    /// How long the receiver held the packet before the ACK went out (0 with
    /// an ACK per packet; a coalesced ACK's older packets waited longer).
    pub held: Duration,
    /// A probe's round trip (the ACK of a probe, from its echoed send time).
    /// Apart from `rtt`: a probe waits for the capacity data leaves, so its
    /// round trip is no sample of the data's queueing delay.
    pub probe_rtt: Option<Duration>,
}

impl AckSample {
    /// The ACK of data packet `psn` sent on `path`, without an RTT sample yet.
    pub fn data(path: usize, psn: u64, ecn: bool) -> AckSample {
        AckSample {
            path,
            rtt: None,
            forward_delay_ps: None,
            probe: false,
            ecn,
            psn,
            held: Duration::ZERO,
            probe_rtt: None,
        }
    }
}

/// What a controller may ask of the flow it controls during a tick.
pub trait FlowView {
    /// Data waits to be sent (new PSNs the receiver can hold, or retransmissions).
    fn has_data(&self) -> bool;
    /// Every data packet sent at least `age` before `now` has been acknowledged
    /// (or is no longer in flight).
    fn sent_before_acked(&self, now: Instant, age: Duration) -> bool;
}

/// A flow view for the controllers' unit tests: data waits, and everything sent
/// was acknowledged.
#[cfg(test)]
pub(crate) struct Backlogged;

#[cfg(test)]
impl FlowView for Backlogged {
    fn has_data(&self) -> bool {
        true
    }
    fn sent_before_acked(&self, _now: Instant, _age: Duration) -> bool {
        true
    }
}

/// What a tick did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tick {
    /// At least one path's controller updated (the scheduler re-reads the rates).
    pub updated: bool,
    /// Capacity-probing phases started by this tick.
    pub probing_phases: u32,
    /// A path held shut since its last send may send again (a window below one
    /// packet).
    pub opened: bool,
}

/// A congestion controller of one flow over its paths.
pub trait CongestionControl {
    /// How many packets each path may send now, into `open` (one entry per path;
    /// 0 for none, and for every path out of rotation).
    fn open_windows(&self, paths: &Paths, open: &mut [f64]);
    /// Whether any path may send now.
    fn any_open(&self, paths: &Paths) -> bool;
    /// Whether the flow is paced at [`CongestionControl::pacing_rate`] (default:
    /// not paced, window-limited only).
    fn paced(&self) -> bool {
        false
    }
    /// Flow pacing rate, packets per microsecond (0: no rate known yet; the
    /// default, for a controller that does not pace).
    fn pacing_rate(&self, _paths: &Paths) -> f64 {
        0.0
    }
    /// Whether capacity probes fill the line now when the windows block data
    /// (default: a controller that never probes).
    fn probing(&self, _now: Instant) -> bool {
        false
    }
    /// Whether capacity probes should go out now: in a probing phase, or to
    /// measure only (ARCC confirming a longer base RTT; default: as `probing`).
    fn sends_probes(&self, now: Instant) -> bool {
        self.probing(now)
    }
    /// Whether a capacity probe may go on `path` now (default: every path in
    /// rotation; ARCC sends the probes that confirm a path's longer base RTT,
    /// and the probing that follows, on that path alone).
    fn probes_path(&self, _now: Instant, _path: usize) -> bool {
        true
    }
    /// Whether the transport has Rondo's low-priority probe class (paper §4.2:
    /// probes served after data, dropped early), so that a path out of rotation
    /// can ask for spare capacity while others carry the flow. A transport
    /// without it (every baseline) has nothing below data: its checks of a path
    /// out of rotation are header-sized and travel as data, or a queue its own
    /// controller keeps deep would drop every one and the path never rejoin.
    fn low_priority_probes(&self) -> bool {
        false
    }
    /// End of the current probing phase, if one runs or waits for its first ACK
    /// (`Instant::MAX`).
    fn probing_until(&self) -> Option<Instant> {
        None
    }
    /// Measured data transmission rate of a path, packets per microsecond (0 when
    /// the controller does not measure one, the default).
    fn path_rate(&self, _path: usize) -> f64 {
        0.0
    }
    /// The window of a path in packets, for reports (a per-flow window for
    /// controllers that keep one).
    fn window(&self, path: usize) -> f64;
    /// A data packet was sent on `path` (default: nothing to count).
    fn on_sent(&mut self, _now: Instant, _path: usize, _paths: &Paths) {}
    /// An ACK arrived (data or probe); `paths` already holds its samples.
    fn on_ack(&mut self, now: Instant, ack: &AckSample, paths: &Paths);
    /// A NAK arrived for a packet sent on `path`.
    fn on_nak(&mut self, now: Instant, path: usize, reason: NakReason);
    /// A packet sent on `path` was declared lost (`by_timeout`: by the RTO or a
    /// path failure, not by early recovery).
    fn on_loss(&mut self, now: Instant, path: usize, by_timeout: bool, paths: &Paths);
    /// The receiver's reorder buffer refused a packet for lack of room. Returns
    /// whether the windows were cut (default: not).
    fn on_receiver_full(&mut self, _now: Instant, _paths: &Paths) -> bool {
        false
    }
    /// The retransmission timer fired.
    fn on_rto(&mut self, now: Instant, paths: &Paths);
    /// Path `path` came back into rotation (default: nothing to restart).
    fn on_path_up(&mut self, _now: Instant, _path: usize, _paths: &Paths) {}
    /// The next tick the controller wants, if any (default: none, a controller
    /// without timers).
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
    /// For a flow with data waiting and every window shut: the time before
    /// which the controller's ticks change nothing that a send, a probe or the
    /// flow's deadlines read until the flow's next event (an ACK, a NAK, a
    /// post, another timer), so that the sender may run them at that event,
    /// each at its own time, instead of waking for each (`Sender::catch_up`).
    /// The horizon is a tick's due time (the first that may matter) or
    /// `Instant::MAX`. Default: `None`, every tick wakes the flow.
    fn ticks_idle_until(&self, _paths: &Paths, _flow: &dyn FlowView) -> Option<Instant> {
        None
    }
    /// Runs the controller's timers due at `now` (default: none).
    fn on_tick(&mut self, _now: Instant, _paths: &Paths, _flow: &dyn FlowView) -> Tick {
        Tick::default()
    }
}

/// The open windows of a controller that keeps one allowance for the whole flow:
/// `flow_open` packets on every path in rotation, 0 on the others.
pub(crate) fn open_on_paths_up(flow_open: f64, paths: &Paths, open: &mut [f64]) {
    for (o, s) in open.iter_mut().zip(paths.statuses()) {
        *o = if *s == crate::path::PathStatus::Up {
            flow_open
        } else {
            0.0
        };
    }
}

/// Whether a flow-wide allowance of `flow_open` packets lets anything out: it is
/// positive and some path is in rotation.
pub(crate) fn any_open_on_paths_up(flow_open: f64, paths: &Paths) -> bool {
    flow_open > 0.0 && paths.up() > 0
}

/// Every congestion controller, dispatched statically.
#[derive(Clone, Debug)]
pub enum AnyCc {
    /// Rondo's ACK-rate-based control with capacity probing.
    Arcc(Arcc),
    /// One AIMD window for the flow.
    Aimd(Aimd),
    /// Swift per path (swift-rps; Falcon with its NIC window and PLB).
    Swift(Swift),
    /// DCQCN: one paced rate for the flow, cut on ECN echoes.
    Dcqcn(Dcqcn),
    /// MP-RDMA's ECN-driven window with ACK-clocked per-path sends.
    Mprdma(Mprdma),
    /// UET's NSCC: one window from ECN and queueing delay.
    Nscc(Nscc),
}

impl AnyCc {
    /// The window of `path` in packets (a per-flow window for controllers that
    /// keep one), for reports.
    pub fn window(&self, path: usize) -> f64 {
        CongestionControl::window(self, path)
    }

    /// Rondo's controller, when this is it (its per-path state for reports).
    pub fn arcc(&self) -> Option<&Arcc> {
        match self {
            AnyCc::Arcc(a) => Some(a),
            _ => None,
        }
    }

    /// The Swift controller, when this is it.
    pub fn swift(&self) -> Option<&Swift> {
        match self {
            AnyCc::Swift(s) => Some(s),
            _ => None,
        }
    }
}

macro_rules! dispatch {
    ($self:ident, $c:ident => $e:expr) => {
        match $self {
            AnyCc::Arcc($c) => $e,
            AnyCc::Aimd($c) => $e,
            AnyCc::Swift($c) => $e,
            AnyCc::Dcqcn($c) => $e,
            AnyCc::Mprdma($c) => $e,
            AnyCc::Nscc($c) => $e,
        }
    };
}

impl CongestionControl for AnyCc {
    fn open_windows(&self, paths: &Paths, open: &mut [f64]) {
        dispatch!(self, c => c.open_windows(paths, open))
    }
    fn any_open(&self, paths: &Paths) -> bool {
        dispatch!(self, c => c.any_open(paths))
    }
    fn paced(&self) -> bool {
        dispatch!(self, c => c.paced())
    }
    fn pacing_rate(&self, paths: &Paths) -> f64 {
        dispatch!(self, c => c.pacing_rate(paths))
    }
    fn probing(&self, now: Instant) -> bool {
        dispatch!(self, c => c.probing(now))
    }
    fn sends_probes(&self, now: Instant) -> bool {
        dispatch!(self, c => c.sends_probes(now))
    }
    fn probes_path(&self, now: Instant, path: usize) -> bool {
        dispatch!(self, c => c.probes_path(now, path))
    }
    fn low_priority_probes(&self) -> bool {
        dispatch!(self, c => c.low_priority_probes())
    }
    fn probing_until(&self) -> Option<Instant> {
        dispatch!(self, c => c.probing_until())
    }
    fn path_rate(&self, path: usize) -> f64 {
        dispatch!(self, c => c.path_rate(path))
    }
    fn window(&self, path: usize) -> f64 {
        dispatch!(self, c => c.window(path))
    }
    fn on_sent(&mut self, now: Instant, path: usize, paths: &Paths) {
        dispatch!(self, c => c.on_sent(now, path, paths))
    }
    fn on_ack(&mut self, now: Instant, ack: &AckSample, paths: &Paths) {
        dispatch!(self, c => c.on_ack(now, ack, paths))
    }
    fn on_nak(&mut self, now: Instant, path: usize, reason: NakReason) {
        dispatch!(self, c => c.on_nak(now, path, reason))
    }
    fn on_loss(&mut self, now: Instant, path: usize, by_timeout: bool, paths: &Paths) {
        dispatch!(self, c => c.on_loss(now, path, by_timeout, paths))
    }
    fn on_receiver_full(&mut self, now: Instant, paths: &Paths) -> bool {
        dispatch!(self, c => c.on_receiver_full(now, paths))
    }
    fn on_rto(&mut self, now: Instant, paths: &Paths) {
        dispatch!(self, c => c.on_rto(now, paths))
    }
    fn on_path_up(&mut self, now: Instant, path: usize, paths: &Paths) {
        dispatch!(self, c => c.on_path_up(now, path, paths))
    }
    fn poll_timeout(&self) -> Option<Instant> {
        dispatch!(self, c => c.poll_timeout())
    }
    fn ticks_idle_until(&self, paths: &Paths, flow: &dyn FlowView) -> Option<Instant> {
        dispatch!(self, c => c.ticks_idle_until(paths, flow))
    }
    fn on_tick(&mut self, now: Instant, paths: &Paths, flow: &dyn FlowView) -> Tick {
        dispatch!(self, c => c.on_tick(now, paths, flow))
    }
}
