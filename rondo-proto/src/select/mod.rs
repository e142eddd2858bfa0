//! The path-selection seam: which path the next transmission takes, given how
//! much each path may send ([`crate::cc::CongestionControl::open_windows`]).
//!
//! [`DeficitSelector`] is Rondo's (paper §4.2.3); [`RoundRobin`] sprays over the
//! open paths in turn (RRPS); [`RandomSelector`] picks an open path at random
//! (the ablation of Fig. 21); [`FixedSelector`] keeps the flow on one path
//! (ECMP). [`AnyPathSelector`] dispatches statically.

mod deficit;
mod fixed;
mod random;
mod round_robin;

pub use deficit::DeficitSelector;
pub use fixed::FixedSelector;
pub use random::RandomSelector;
pub use round_robin::RoundRobin;

/// A path selector of one flow.
pub trait PathSelector {
    /// The path of the next transmission from the open windows `open[p]`
    /// (packets; 0 for a path that cannot send); `None` when every window is closed.
    fn select(&mut self, open: &[f64]) -> Option<usize>;
    /// Forgets what it knows of a path (it left rotation).
    fn reset(&mut self, path: usize);
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
    /// The flow's one path.
    Fixed(FixedSelector),
}

impl PathSelector for AnyPathSelector {
    fn select(&mut self, open: &[f64]) -> Option<usize> {
        match self {
            AnyPathSelector::Deficit(s) => PathSelector::select(s, open),
            AnyPathSelector::RoundRobin(s) => s.select(open),
            AnyPathSelector::Random(s) => s.select(open),
            AnyPathSelector::Fixed(s) => s.select(open),
        }
    }

    fn reset(&mut self, path: usize) {
        match self {
            AnyPathSelector::Deficit(s) => PathSelector::reset(s, path),
            AnyPathSelector::RoundRobin(s) => s.reset(path),
            AnyPathSelector::Random(s) => s.reset(path),
            AnyPathSelector::Fixed(s) => s.reset(path),
        }
    }
}
