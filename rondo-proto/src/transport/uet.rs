//! UET (Ultra Ethernet, as the Rondo paper configures it, §6.2: "NSCC, a per-flow
//! congestion control that adjusts its window using both ECN and RTT ... REPS
//! path selection learns path conditions from ACKs and caches paths for packet
//! spraying ... ER and RTO with dynamic thresholds"): NSCC's window for the flow,
//! REPS over its paths, PSNs in order, selective repeat (early recovery and the
//! RTO, or the flow's `loss_recovery`), the shared reorder buffer.

use super::{Entry, Parts};
use crate::cc::{AnyCc, Nscc};
use crate::config::FlowConfig;
use crate::path::Paths;
use crate::receiver_policy::ReceiverPolicy;
use crate::recovery::AnyRecovery;
use crate::scheduler::{AnyPacketSelector, LowestFirst};
use crate::select::{AnyPathSelector, Reps};
use crate::time::Instant;

pub(super) const ENTRY: Entry = Entry {
    name: "uet",
    description: "UET: NSCC window from ECN and delay, REPS recycled paths, early recovery",
    sender,
    receiver,
};

fn sender(cfg: &FlowConfig, now: Instant, _paths: &Paths) -> Parts {
    Parts {
        cc: AnyCc::Nscc(Nscc::new(cfg, now)),
        selector: AnyPathSelector::Reps(Reps::new(cfg.seed)),
        scheduler: AnyPacketSelector::LowestFirst(LowestFirst),
        recovery: AnyRecovery::configured(cfg, now),
    }
}

fn receiver(_cfg: &FlowConfig) -> ReceiverPolicy {
    ReceiverPolicy::SharedBuffer
}
