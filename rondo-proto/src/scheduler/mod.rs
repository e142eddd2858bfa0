//! The packet-selection seam (paper §4.3): which unsent PSN a transmission on a
//! given path carries.
//!
//! A packet selector answers with a rank k: the transmission sends the k-th
//! smallest unsent PSN ([`UnsentSet::kth`], or the largest unsent one when fewer
//! remain; retransmissions always go first, lowest PSN first). [`SkipScheduler`]
//! is Rondo's (skip_p + 1, eq. (7)); [`LowestFirst`] sends PSNs in order.
//! [`AnyPacketSelector`] dispatches statically.

mod skip;
mod unsent;

pub use skip::{
    delay_now, phase_skip, skips, SkipScheduler, AHEAD_DEADBAND_PACKETS, AHEAD_MIN_PACKETS,
    AHEAD_MOST_FRACTION,
};
pub use unsent::UnsentSet;

use crate::cc::AnyCc;
use crate::event::Event;
use crate::path::Paths;
use crate::time::Instant;
use std::collections::VecDeque;

/// A packet selector of one flow.
pub trait PacketSelector {
    /// The rank (1 = the lowest unsent PSN) of the PSN a transmission on `path`
    /// carries now.
    fn rank(&mut self, now: Instant, path: usize, paths: &Paths) -> u64;
    /// The congestion controller updated its rates and windows.
    fn on_update(&mut self, now: Instant, paths: &Paths, cc: &AnyCc, events: &mut VecDeque<Event>);
    /// A path left rotation.
    fn on_paths_changed(&mut self, paths: &Paths, cc: &AnyCc);
    /// When the selector started reordering transmissions, if it has.
    fn enabled_at(&self) -> Option<Instant>;
    /// The current skip of a path (0 for selectors without one), for reports.
    fn skip(&self, path: usize) -> u32;
}

/// PSN order: every transmission carries the lowest unsent PSN.
#[derive(Clone, Copy, Debug, Default)]
pub struct LowestFirst;

impl PacketSelector for LowestFirst {
    fn rank(&mut self, _: Instant, _: usize, _: &Paths) -> u64 {
        1
    }
    fn on_update(&mut self, _: Instant, _: &Paths, _: &AnyCc, _: &mut VecDeque<Event>) {}
    fn on_paths_changed(&mut self, _: &Paths, _: &AnyCc) {}
    fn enabled_at(&self) -> Option<Instant> {
        None
    }
    fn skip(&self, _: usize) -> u32 {
        0
    }
}

/// Every packet selector, dispatched statically.
#[derive(Clone, Debug)]
pub enum AnyPacketSelector {
    /// Rondo's skip scheduler.
    Skip(SkipScheduler),
    /// PSN order.
    LowestFirst(LowestFirst),
}

macro_rules! dispatch {
    ($self:ident, $s:ident => $e:expr) => {
        match $self {
            AnyPacketSelector::Skip($s) => $e,
            AnyPacketSelector::LowestFirst($s) => $e,
        }
    };
}

impl PacketSelector for AnyPacketSelector {
    fn rank(&mut self, now: Instant, path: usize, paths: &Paths) -> u64 {
        dispatch!(self, s => s.rank(now, path, paths))
    }
    fn on_update(&mut self, now: Instant, paths: &Paths, cc: &AnyCc, events: &mut VecDeque<Event>) {
        dispatch!(self, s => s.on_update(now, paths, cc, events))
    }
    fn on_paths_changed(&mut self, paths: &Paths, cc: &AnyCc) {
        dispatch!(self, s => s.on_paths_changed(paths, cc))
    }
    fn enabled_at(&self) -> Option<Instant> {
        dispatch!(self, s => s.enabled_at())
    }
    fn skip(&self, path: usize) -> u32 {
        dispatch!(self, s => s.skip(path))
    }
}
