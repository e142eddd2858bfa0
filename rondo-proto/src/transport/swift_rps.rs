//! swift-rps (the Fig. 21 ablation baseline): Swift per path, random packet
//! spraying over the paths with an open window, PSNs in order, selective repeat
//! and the shared reorder buffer.

use super::{Entry, Parts};
use crate::cc::{AnyCc, Swift};
use crate::config::FlowConfig;
use crate::path::Paths;
use crate::receiver_policy::ReceiverPolicy;
use crate::recovery::AnyRecovery;
use crate::scheduler::{AnyPacketSelector, LowestFirst};
use crate::select::{AnyPathSelector, RandomSelector};
use crate::time::Instant;

pub(super) const ENTRY: Entry = Entry {
    name: "swift-rps",
    description: "Swift per path, random packet spraying over open windows, selective repeat",
    sender,
    receiver,
};

fn sender(cfg: &FlowConfig, now: Instant, _paths: &Paths) -> Parts {
    Parts {
        cc: AnyCc::Swift(Swift::new(cfg)),
        selector: AnyPathSelector::Random(RandomSelector::new(cfg.seed)),
        scheduler: AnyPacketSelector::LowestFirst(LowestFirst),
        recovery: AnyRecovery::configured(cfg, now),
    }
}

fn receiver(_cfg: &FlowConfig) -> ReceiverPolicy {
    ReceiverPolicy::SharedBuffer
}
