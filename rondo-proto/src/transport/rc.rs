//! The RC baselines, ConnectX-7 models (paper App. A, docs/baselines.md):
//! `rc-gbn`, RoCE go-back-N (the receiver drops every out-of-order PSN and NAKs
//! the expected one at most once per 500 us; the sender resends from it), and
//! `rc-sr`, selective repeat with direct placement (the receiver places an
//! out-of-order WRITE payload in host memory, outside the shared reorder buffer,
//! and NAKs every such arrival with the expected PSN; the sender resends that
//! PSN), which stalls at 512 outstanding PSNs. Both allow 16 outstanding READs
//! ([`crate::Transport::max_outstanding_reads`]). One path per flow, by hash;
//! `path_selection = random` sprays every packet instead (a spraying switch's
//! stand-in).

use super::{Entry, Parts};
use crate::cc::{AnyCc, Dcqcn};
use crate::config::{FlowConfig, PathSelection};
use crate::path::Paths;
use crate::receiver_policy::ReceiverPolicy;
use crate::recovery::{AnyRecovery, GoBackN, NakRecovery};
use crate::scheduler::{AnyPacketSelector, LowestFirst};
use crate::select::{AnyPathSelector, FixedSelector, RandomSelector};
use crate::time::{Duration, Instant};

/// ConnectX-7's outstanding PSN range of an RC queue pair for WRITE (paper
/// App. A): new PSNs stall beyond it.
pub const WRITE_PSN_WINDOW: u32 = 512;

/// ConnectX-7's outstanding READ requests per RC queue pair (paper App. A).
pub const MAX_OUTSTANDING_READS: u32 = 16;

/// The READ limit of a transport: [`MAX_OUTSTANDING_READS`] for both RC models
/// (the limit belongs to the ConnectX-7 queue pair, whatever its recovery).
pub(super) fn max_outstanding_reads(e: &Entry) -> Option<u32> {
    [GBN.name, SR.name]
        .contains(&e.name)
        .then_some(MAX_OUTSTANDING_READS)
}

/// Least time between two NAKs of one expected PSN at a go-back-N receiver
/// (HPCC ns-3 `rdma-hw.cc`, REFERENCE.md "RC NIC go-back-N").
pub const GBN_NAK_INTERVAL: Duration = Duration::from_us(500);

pub(super) const GBN: Entry = Entry {
    name: "rc-gbn",
    description: "RC (ConnectX-7) go-back-N: one path per flow, NAK once per 500 us, resend from the NAKed PSN",
    sender: gbn_sender,
    receiver: gbn_receiver,
};

pub(super) const SR: Entry = Entry {
    name: "rc-sr",
    description: "RC (ConnectX-7) selective repeat: NAK per out-of-order arrival, direct placement, 512-PSN window",
    sender: sr_sender,
    receiver: sr_receiver,
};

/// The congestion controller of both RC models: DCQCN, as RoCE NICs run it.
fn cc(cfg: &FlowConfig) -> AnyCc {
    AnyCc::Dcqcn(Dcqcn::new(cfg))
}

fn selector(cfg: &FlowConfig) -> AnyPathSelector {
    match cfg.path_selection {
        PathSelection::Random => AnyPathSelector::Random(RandomSelector::new(cfg.seed)),
        PathSelection::Deficit => {
            AnyPathSelector::Fixed(FixedSelector::new(usize::from(cfg.paths), cfg.seed))
        }
    }
}

fn gbn_sender(cfg: &FlowConfig, now: Instant, _paths: &Paths) -> Parts {
    Parts {
        cc: cc(cfg),
        selector: selector(cfg),
        scheduler: AnyPacketSelector::LowestFirst(LowestFirst),
        recovery: AnyRecovery::GoBackN(GoBackN::new(cfg, now, NakRecovery::GoBackN, None)),
    }
}

fn gbn_receiver(_cfg: &FlowConfig) -> ReceiverPolicy {
    ReceiverPolicy::GoBackN {
        nak_interval: GBN_NAK_INTERVAL,
    }
}

fn sr_sender(cfg: &FlowConfig, now: Instant, _paths: &Paths) -> Parts {
    let window = Some(u64::from(WRITE_PSN_WINDOW));
    Parts {
        cc: cc(cfg),
        selector: selector(cfg),
        scheduler: AnyPacketSelector::LowestFirst(LowestFirst),
        recovery: AnyRecovery::GoBackN(GoBackN::new(cfg, now, NakRecovery::Selective, window)),
    }
}

fn sr_receiver(_cfg: &FlowConfig) -> ReceiverPolicy {
    ReceiverPolicy::SelectiveNak {
        window: WRITE_PSN_WINDOW,
    }
}
