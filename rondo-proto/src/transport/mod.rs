//! Transports: named combinations of the seams' implementations.
//!
//! A transport picks one congestion controller ([`crate::cc`]), one path selector
//! ([`crate::select`]), one packet selector ([`crate::scheduler`]), one
//! loss-recovery scheme ([`crate::recovery`]) and one receiver policy
//! ([`crate::receiver_policy`]) for a flow. Adding one is a file that builds its
//! parts plus one line in [`REGISTRY`]; it then runs in the simulator, over UDP
//! and over verbs, chosen by name (`--transport NAME`, `FlowConfig::transport`).
//!
//! ```
//! use rondo_proto::{FlowConfig, Transport};
//!
//! let rrps = Transport::from_name("rrps")?;
//! let cfg = FlowConfig { transport: rrps, ..FlowConfig::default() };
//! assert_eq!(cfg.transport.name(), "rrps");
//! assert_eq!(FlowConfig::default().transport, Transport::RONDO);
//! assert!(Transport::all().any(|t| t.name() == "rondo"));
//! # Ok::<(), rondo_proto::transport::UnknownTransport>(())
//! ```

mod ar;
mod ecmp;
mod falcon;
mod mprdma;
pub mod rc;
mod rondo;
mod rrps;
mod swift_rps;
mod uet;

use crate::cc::AnyCc;
use crate::config::FlowConfig;
use crate::path::Paths;
use crate::receiver_policy::ReceiverPolicy;
use crate::recovery::AnyRecovery;
use crate::scheduler::AnyPacketSelector;
use crate::select::AnyPathSelector;
use crate::time::Instant;
use std::fmt;

/// The parts of one flow's transport.
#[derive(Debug)]
pub(crate) struct Parts {
    pub(crate) cc: AnyCc,
    pub(crate) selector: AnyPathSelector,
    pub(crate) scheduler: AnyPacketSelector,
    pub(crate) recovery: AnyRecovery,
}

/// One registered transport.
pub(crate) struct Entry {
    /// The name `--transport` takes.
    name: &'static str,
    /// One line for `--list` and help texts.
    description: &'static str,
    /// The sender's parts for a flow configured by `cfg`, with paths `paths`, at `now`.
    sender: fn(cfg: &FlowConfig, now: Instant, paths: &Paths) -> Parts,
    /// The receiver's policy.
    receiver: fn(cfg: &FlowConfig) -> ReceiverPolicy,
}

/// Every transport, by index: one line per transport.
const REGISTRY: &[Entry] = &[
    rondo::ENTRY,
    rrps::ENTRY,
    swift_rps::ENTRY,
    falcon::ENTRY,
    ecmp::ENTRY,
    ar::ENTRY,
    rc::GBN,
    rc::SR,
    mprdma::ENTRY,
    uet::ENTRY,
];

/// A transport, chosen by name.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Transport(u8);

impl Transport {
    /// Rondo (paper §4): ARCC with capacity probing, deficit path selection, the
    /// skip scheduler, selective repeat, the shared reorder buffer.
    pub const RONDO: Transport = Transport(0);

    /// The transport called `name`.
    pub fn from_name(name: &str) -> Result<Transport, UnknownTransport> {
        REGISTRY
            .iter()
            .position(|e| e.name == name)
            .map(|i| Transport(i as u8))
            .ok_or_else(|| UnknownTransport(name.to_owned()))
    }

    /// Every transport, in registration order.
    pub fn all() -> impl Iterator<Item = Transport> {
        (0..REGISTRY.len()).map(|i| Transport(i as u8))
    }

    fn entry(self) -> &'static Entry {
        &REGISTRY[usize::from(self.0)]
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        self.entry().name
    }

    /// A one-line description.
    pub fn description(self) -> &'static str {
        self.entry().description
    }

    /// READ requests a requester may have outstanding on one connection, if its
    /// NIC model limits them: ConnectX-7's 16 for the RC models (paper App. A,
    /// [`rc::MAX_OUTSTANDING_READS`]); `None`: no limit. The engine carries
    /// messages, not operations: the driver that issues READs (the simulator)
    /// holds the 17th until one completes.
    pub fn max_outstanding_reads(self) -> Option<u32> {
        rc::max_outstanding_reads(self.entry())
    }

    /// Whether this transport holds new data within the receiver-limited span
    /// after a "reorder buffer full" NAK, unless `FlowConfig::receiver_span`
    /// says otherwise: Rondo only. The baselines' papers have nothing like it;
    /// each reacts to the receiver's refusals with its own rules
    /// (docs/baselines.md, "The receiver-limited span").
    pub fn receiver_span(self) -> bool {
        self == Transport::RONDO
    }

    /// How this transport's receiver acknowledges unless `FlowConfig::ack_coalesce`
    /// says otherwise: an ACK per data packet for every transport (the
    /// baselines' rules are per ACK: MP-RDMA's ACK clocking, DCQCN's CNPs,
    /// Swift's per-ACK increase; Rondo's choice is measured in docs/engine.md,
    /// "Coalesced ACKs").
    pub fn ack_coalesce(self) -> crate::config::AckCoalesce {
        crate::config::AckCoalesce::PER_PACKET
    }

    /// The sender's parts of a flow configured by `cfg` (its `transport`).
    pub(crate) fn parts(cfg: &FlowConfig, now: Instant, paths: &Paths) -> Parts {
        (cfg.transport.entry().sender)(cfg, now, paths)
    }

    /// The receiver's policy of a flow configured by `cfg` (its `transport`).
    pub(crate) fn receiver_policy(cfg: &FlowConfig) -> ReceiverPolicy {
        (cfg.transport.entry().receiver)(cfg)
    }
}

impl Default for Transport {
    fn default() -> Self {
        Transport::RONDO
    }
}

impl fmt::Debug for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Transport {
    type Err = UnknownTransport;

    fn from_str(s: &str) -> Result<Transport, UnknownTransport> {
        Transport::from_name(s)
    }
}

/// No transport has this name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown transport `{0}`; the transports are: {known}", known = names())]
pub struct UnknownTransport(pub String);

fn names() -> String {
    Transport::all()
        .map(|t| t.name())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_list_the_known_ones() {
        for t in Transport::all() {
            assert_eq!(Transport::from_name(t.name()), Ok(t));
            assert!(!t.description().is_empty());
        }
        let e = Transport::from_name("tcp").unwrap_err().to_string();
        assert!(
            e.contains("`tcp`") && e.contains("rondo") && e.contains("rrps"),
            "{e}"
        );
    }

    #[test]
    fn only_rondo_keeps_the_receiver_limited_span() {
        for t in Transport::all() {
            assert_eq!(t.receiver_span(), t == Transport::RONDO, "{t}");
        }
    }

    #[test]
    fn only_the_rc_models_limit_outstanding_reads() {
        for t in Transport::all() {
            let want = matches!(t.name(), "rc-gbn" | "rc-sr").then_some(16);
            assert_eq!(t.max_outstanding_reads(), want, "{t}");
        }
    }
}
