//! RRPS: round-robin packet spraying over every path, one AIMD window per flow
//! (halved on loss), PSNs in order, selective repeat, the shared reorder buffer.
//! It ignores path rates, so a flow is bounded by its slowest path times the
//! number of paths.

use super::{Entry, Parts};
use crate::cc::{Aimd, AnyCc};
use crate::config::FlowConfig;
use crate::path::Paths;
use crate::receiver_policy::ReceiverPolicy;
use crate::recovery::{AnyRecovery, SelectiveRepeat};
use crate::scheduler::{AnyPacketSelector, LowestFirst};
use crate::select::{AnyPathSelector, RoundRobin};
use crate::time::Instant;

pub(super) const ENTRY: Entry = Entry {
    name: "rrps",
    description: "round-robin packet spraying, per-flow AIMD window, selective repeat",
    sender,
    receiver,
};

fn sender(cfg: &FlowConfig, now: Instant, _paths: &Paths) -> Parts {
    Parts {
        cc: AnyCc::Aimd(Aimd::new(cfg)),
        selector: AnyPathSelector::RoundRobin(RoundRobin::new()),
        scheduler: AnyPacketSelector::LowestFirst(LowestFirst),
        recovery: AnyRecovery::SelectiveRepeat(SelectiveRepeat::new(cfg, now)),
    }
}

fn receiver(_cfg: &FlowConfig) -> ReceiverPolicy {
    ReceiverPolicy::SharedBuffer
}
