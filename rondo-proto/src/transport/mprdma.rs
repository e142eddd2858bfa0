//! MP-RDMA (Lu et al., NSDI'18): one ECN-driven window for the flow, packets sent
//! on the paths whose ACKs come back (up to two per ACK, now and then a random
//! path), paths with late ACKs pruned, PSNs in order, selective repeat, a
//! 64-entry receiver bitmap (anything further ahead is refused and resent).

use super::{Entry, Parts};
use crate::cc::{AnyCc, Mprdma};
use crate::config::FlowConfig;
use crate::path::Paths;
use crate::receiver_policy::ReceiverPolicy;
use crate::recovery::{AnyRecovery, SelectiveRepeat};
use crate::scheduler::{AnyPacketSelector, LowestFirst};
use crate::select::{AnyPathSelector, RoundRobin};
use crate::time::Instant;

/// Entries of MP-RDMA's receiver bitmap.
pub(crate) const BITMAP_ENTRIES: u32 = 64;

pub(super) const ENTRY: Entry = Entry {
    name: "mprdma",
    description: "MP-RDMA: ECN window, ACK-clocked path choice with pruning, 64-entry bitmap",
    sender,
    receiver,
};

fn sender(cfg: &FlowConfig, now: Instant, _paths: &Paths) -> Parts {
    Parts {
        cc: AnyCc::Mprdma(Mprdma::new(cfg)),
        selector: AnyPathSelector::RoundRobin(RoundRobin::new()),
        scheduler: AnyPacketSelector::LowestFirst(LowestFirst),
        recovery: AnyRecovery::SelectiveRepeat(SelectiveRepeat::new(cfg, now)),
    }
}

fn receiver(_cfg: &FlowConfig) -> ReceiverPolicy {
    ReceiverPolicy::Bitmap {
        entries: BITMAP_ENTRIES,
    }
}
