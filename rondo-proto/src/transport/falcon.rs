//! Falcon (Singhvi et al., SIGCOMM'25, as the Rondo paper configures it): Swift
//! per path, the path with the largest open window for each packet, PLB moving
//! persistently congested paths, a NIC window cut by the receiver's "buffer full"
//! signal, per-path RACK-TLP, PSNs in order, the shared reorder buffer.

use super::{Entry, Parts};
use crate::cc::{AnyCc, Swift};
use crate::config::FlowConfig;
use crate::path::Paths;
use crate::receiver_policy::ReceiverPolicy;
use crate::recovery::{AnyRecovery, RackScope, RackTlp};
use crate::scheduler::{AnyPacketSelector, LowestFirst};
use crate::select::{AnyPathSelector, MaxOpen};
use crate::time::Instant;

pub(super) const ENTRY: Entry = Entry {
    name: "falcon",
    description: "Falcon: Swift per path, max open window, PLB, NIC window, per-path RACK-TLP",
    sender,
    receiver,
};

fn sender(cfg: &FlowConfig, now: Instant, _paths: &Paths) -> Parts {
    Parts {
        cc: AnyCc::Swift(Swift::falcon(cfg)),
        selector: AnyPathSelector::MaxOpen(MaxOpen::new()),
        scheduler: AnyPacketSelector::LowestFirst(LowestFirst),
        recovery: AnyRecovery::RackTlp(RackTlp::new(cfg, now, RackScope::Path)),
    }
}

fn receiver(_cfg: &FlowConfig) -> ReceiverPolicy {
    ReceiverPolicy::SharedBuffer
}
