//! The path-selection seam: which path the next transmission takes, given how
//! much each path may send ([`crate::cc::CongestionControl::open_windows`]).
//!
//! [`DeficitSelector`] is Rondo's (paper §4.2.3); [`RoundRobin`] sprays over the
//! open paths in turn (RRPS); [`RandomSelector`] picks an open path at random
//! (the ablation of Fig. 21); [`MaxOpen`] takes the path with the largest
//! open window (Falcon); [`FixedSelector`] keeps the flow on one path (ECMP);
//! [`Reps`] reuses the paths whose ACKs came back unmarked (UET).
//! [`AnyPathSelector`] dispatches statically.

mod deficit;
mod fixed;
mod max_open;
mod random;
mod reps;
mod round_robin;

pub use deficit::DeficitSelector;
pub use fixed::FixedSelector;
pub use max_open::MaxOpen;
pub use random::RandomSelector;
pub use reps::Reps;
pub use round_robin::RoundRobin;

use crate::time::Instant;

/// A path selector of one flow.
pub trait PathSelector {
    /// The path of the next transmission from the open windows `open[p]`
    /// (packets; 0 for a path that cannot send); `None` when every window is closed.
    fn select(&mut self, open: &[f64]) -> Option<usize>;
    /// Forgets what it knows of a path (it left rotation).
    fn reset(&mut self, path: usize);
    /// A data ACK of a packet sent on `path` arrived at `now`, with `ecn` its
    /// echoed mark. Selectors that learn from feedback (REPS) use it.
    fn on_ack(&mut self, _now: Instant, _path: usize, _ecn: bool) {}
    /// The retransmission timer fired at `now`.
    fn on_rto(&mut self, _now: Instant) {}
}

/// Every path selector, dispatched statically.
#[derive(Clone, Debug)]
pub enum AnyPathSelector {
    /// Deficit-based selection over open windows.
    Deficit(DeficitSelector),
    /// Round robin over open paths.
    RoundRobin(RoundRobin),
    /// Uniformly random among open paths.
    Random(RandomSelector),
    /// The path with the largest open window (Falcon).
    MaxOpen(MaxOpen),
    /// The flow's one path.
    Fixed(FixedSelector),
    /// Recycled unmarked paths, else random (UET's REPS).
    Reps(Reps),
}

impl PathSelector for AnyPathSelector {
    fn select(&mut self, open: &[f64]) -> Option<usize> {
        match self {
            AnyPathSelector::Deficit(s) => PathSelector::select(s, open),
            AnyPathSelector::RoundRobin(s) => s.select(open),
            AnyPathSelector::Random(s) => s.select(open),
            AnyPathSelector::MaxOpen(s) => s.select(open),
            AnyPathSelector::Fixed(s) => s.select(open),
            AnyPathSelector::Reps(s) => s.select(open),
        }
    }

    fn reset(&mut self, path: usize) {
        match self {
            AnyPathSelector::Deficit(s) => PathSelector::reset(s, path),
            AnyPathSelector::RoundRobin(s) => s.reset(path),
            AnyPathSelector::Random(s) => s.reset(path),
            AnyPathSelector::MaxOpen(s) => s.reset(path),
            AnyPathSelector::Fixed(s) => s.reset(path),
            AnyPathSelector::Reps(s) => s.reset(path),
        }
    }

    fn on_ack(&mut self, now: Instant, path: usize, ecn: bool) {
        match self {
            AnyPathSelector::Deficit(s) => PathSelector::on_ack(s, now, path, ecn),
            AnyPathSelector::RoundRobin(s) => s.on_ack(now, path, ecn),
            AnyPathSelector::Random(s) => s.on_ack(now, path, ecn),
            AnyPathSelector::MaxOpen(s) => s.on_ack(now, path, ecn),
            AnyPathSelector::Fixed(s) => s.on_ack(now, path, ecn),
            AnyPathSelector::Reps(s) => s.on_ack(now, path, ecn),
        }
    }

    fn on_rto(&mut self, now: Instant) {
        match self {
            AnyPathSelector::Deficit(s) => PathSelector::on_rto(s, now),
            AnyPathSelector::RoundRobin(s) => s.on_rto(now),
            AnyPathSelector::Random(s) => s.on_rto(now),
            AnyPathSelector::MaxOpen(s) => s.on_rto(now),
            AnyPathSelector::Fixed(s) => s.on_rto(now),
            AnyPathSelector::Reps(s) => s.on_rto(now),
        }
    }
}
