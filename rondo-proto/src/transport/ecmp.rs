//! ECMP over RoCE as deployed: each flow stays on the one path a hash of the flow
//! chose (its seed), DCQCN paces it, PSNs go out in order, selective repeat, the
//! shared reorder buffer (which sees out-of-order arrivals only after a loss).

use super::{Entry, Parts};
use crate::cc::{AnyCc, Dcqcn};
use crate::config::FlowConfig;
use crate::path::Paths;
use crate::receiver_policy::ReceiverPolicy;
use crate::recovery::{AnyRecovery, SelectiveRepeat};
use crate::scheduler::{AnyPacketSelector, LowestFirst};
use crate::select::{AnyPathSelector, FixedSelector};
use crate::time::Instant;

pub(super) const ENTRY: Entry = Entry {
    name: "ecmp",
    description: "one hashed path per flow, DCQCN, selective repeat",
    sender,
    receiver,
};

/// The parts of an ECMP flow (also the hosts' parts of `ar`).
pub(super) fn sender(cfg: &FlowConfig, now: Instant, _paths: &Paths) -> Parts {
    Parts {
        cc: AnyCc::Dcqcn(Dcqcn::new(cfg)),
        selector: AnyPathSelector::Fixed(FixedSelector::new(usize::from(cfg.paths), cfg.seed)),
        scheduler: AnyPacketSelector::LowestFirst(LowestFirst),
        recovery: AnyRecovery::SelectiveRepeat(SelectiveRepeat::new(cfg, now)),
    }
}

pub(super) fn receiver(_cfg: &FlowConfig) -> ReceiverPolicy {
    ReceiverPolicy::SharedBuffer
}
