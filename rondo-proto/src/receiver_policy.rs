//! The receiver-policy seam: which data arrivals the receiver takes, before its
//! reorder buffer sees them.
//!
//! [`ReceiverPolicy::SharedBuffer`] is Rondo's (paper §6.2.1): every new PSN is
//! offered to the NIC-level reorder buffer that all flows share, which holds it
//! while it has a free slot and, when full, takes only the next expected PSN
//! (the others are NAKed "buffer full" and resent). [`ReceiverPolicy::Bitmap`]
//! models a receiver that tracks a fixed number of PSNs past the next expected
//! one (MP-RDMA's 64-entry bitmap): anything further ahead is refused.

use crate::wire::NakReason;
use crate::Psn;

/// How a receiver admits data packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReceiverPolicy {
    /// Offer every arrival to the shared reorder buffer.
    SharedBuffer,
    /// Track at most `entries` PSNs from the next expected one on: a PSN at or
    /// beyond `expected + entries` is refused (NAKed out of window).
    Bitmap {
        /// Bitmap entries (1 or more).
        entries: u32,
    },
}

/// What a policy decided about one arrival.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Admission {
    /// Hand it to the reorder buffer.
    Offer,
    /// Drop it and NAK it with this reason.
    Refuse(NakReason),
}

impl ReceiverPolicy {
    /// The decision for a data packet with PSN `psn`; `expected` gives the flow's
    /// next expected PSN (asked only by policies that need it).
    pub(crate) fn admit(self, psn: Psn, expected: impl FnOnce() -> Psn) -> Admission {
        match self {
            ReceiverPolicy::SharedBuffer => Admission::Offer,
            ReceiverPolicy::Bitmap { entries } => {
                let ahead = psn.diff(expected());
                if ahead >= 0 && ahead as u32 >= entries.max(1) {
                    Admission::Refuse(NakReason::OutOfWindow)
                } else {
                    Admission::Offer
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bitmap_refuses_what_lies_beyond_its_entries() {
        let policy = ReceiverPolicy::Bitmap { entries: 64 };
        let expected = || Psn(u32::MAX - 10); // across the wrap
        assert_eq!(policy.admit(Psn(u32::MAX - 10), expected), Admission::Offer);
        assert_eq!(policy.admit(Psn(52), expected), Admission::Offer); // 63 ahead
        assert_eq!(
            policy.admit(Psn(53), expected),
            Admission::Refuse(NakReason::OutOfWindow)
        );
        // Old PSNs (duplicates) are the reorder buffer's business.
        assert_eq!(policy.admit(Psn(u32::MAX - 20), expected), Admission::Offer);
        let shared = ReceiverPolicy::SharedBuffer;
        assert_eq!(shared.admit(Psn(1 << 30), || Psn(0)), Admission::Offer);
    }
}
