//! Rondo (paper §4): ARCC with capacity probing, deficit path selection (or the
//! random ablation), the skip scheduler, selective repeat (or RACK-TLP: `FlowConfig::loss_recovery`), the shared reorder
//! buffer.

use super::{Entry, Parts};
use crate::cc::{AnyCc, Arcc};
use crate::config::{FlowConfig, PathSelection};
use crate::path::Paths;
use crate::receiver_policy::ReceiverPolicy;
use crate::recovery::AnyRecovery;
use crate::scheduler::{AnyPacketSelector, SkipScheduler};
use crate::select::{AnyPathSelector, DeficitSelector, RandomSelector};
use crate::time::Instant;

pub(super) const ENTRY: Entry = Entry {
    name: "rondo",
    description: "Rondo: ARCC + probing, deficit path selection, skip scheduler, selective repeat",
    sender,
    receiver,
};

fn sender(cfg: &FlowConfig, now: Instant, paths: &Paths) -> Parts {
    Parts {
        cc: AnyCc::Arcc(Arcc::new(cfg, now, paths)),
        selector: match cfg.path_selection {
            PathSelection::Deficit => AnyPathSelector::Deficit(DeficitSelector::with_burst(
                usize::from(cfg.paths),
                cfg.path_burst,
            )),
            PathSelection::Random => AnyPathSelector::Random(RandomSelector::new(cfg.seed)),
        },
        scheduler: AnyPacketSelector::Skip(SkipScheduler::new(cfg)),
        recovery: AnyRecovery::configured(cfg, now),
    }
}

fn receiver(_cfg: &FlowConfig) -> ReceiverPolicy {
    ReceiverPolicy::SharedBuffer
}
