//! The receiver-policy seam: which data arrivals the receiver takes, before its
//! reorder buffer sees them.
//!
//! [`ReceiverPolicy::SharedBuffer`] is Rondo's (paper §6.2.1): every new PSN is
//! offered to the NIC-level reorder buffer that all flows share, which holds it
//! while it has a free slot and, when full, takes only the next expected PSN
//! (the others are NAKed "buffer full" and resent). [`ReceiverPolicy::Bitmap`]
//! models a receiver that tracks a fixed number of PSNs past the next expected
//! one (MP-RDMA's 64-entry bitmap): anything further ahead is refused.
//!
//! The two RC receivers of a ConnectX NIC (docs/baselines.md, `rc-gbn` and
//! `rc-sr`): [`ReceiverPolicy::GoBackN`] drops every PSN but the expected one and
//! NAKs the expected PSN ("PSN sequence error"), at most once per `nak_interval`
//! unless the expected PSN moved ([`NakLimiter`]); [`ReceiverPolicy::SelectiveNak`]
//! places an out-of-order payload directly (in host memory, not in the shared
//! reorder buffer: [`DirectStore`]) and NAKs every such arrival with the expected
//! PSN, the hole.

use crate::receiver::RxMeta;
use crate::time::{Duration, Instant};
use crate::wire::NakReason;
use crate::Psn;
use std::collections::VecDeque;

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
    /// RC go-back-N (HPCC ns-3 `rdma-hw.cc`): only the expected PSN is taken (and
    /// old ones, answered as duplicates); anything ahead is dropped and NAKed with
    /// the expected PSN ([`NakReason::SequenceError`]), at most once per
    /// `nak_interval` unless the expected PSN moved since the last NAK.
    GoBackN {
        /// Least time between two NAKs of one expected PSN.
        nak_interval: Duration,
    },
    /// RC selective repeat with direct placement (ConnectX-7, paper App. A): a PSN
    /// ahead of the expected one, up to `window` ahead, is placed directly and
    /// NAKed with the expected PSN ([`NakReason::OutOfOrder`], one NAK per
    /// arrival); it holds no slot of the shared reorder buffer. Further ahead it
    /// is refused (out of window).
    SelectiveNak {
        /// PSNs past the expected one the receiver tracks (the NIC's PSN window).
        window: u32,
    },
}

/// What a policy decided about one arrival.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Admission {
    /// Hand it to the reorder buffer.
    Offer,
    /// Drop it and NAK it with this reason.
    Refuse(NakReason),
    /// Drop it: a PSN sequence error (go-back-N), NAKed when the limiter allows.
    OutOfSequence,
    /// Keep it outside the reorder buffer, placed directly, and NAK the hole.
    PlaceDirect,
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
            ReceiverPolicy::GoBackN { .. } => {
                if psn.diff(expected()) > 0 {
                    Admission::OutOfSequence
                } else {
                    Admission::Offer
                }
            }
            ReceiverPolicy::SelectiveNak { window } => match psn.diff(expected()) {
                ahead if ahead <= 0 => Admission::Offer,
                ahead if ahead as u32 > window.max(1) => Admission::Refuse(NakReason::OutOfWindow),
                _ => Admission::PlaceDirect,
            },
        }
    }

    /// The NAK rate limit of the policy, when it has one.
    pub(crate) fn nak_interval(self) -> Option<Duration> {
        match self {
            ReceiverPolicy::GoBackN { nak_interval } => Some(nak_interval),
            _ => None,
        }
    }
}

/// The go-back-N receiver's NAK rate limit: one NAK per expected PSN per
/// interval (HPCC ns-3's `m_nack_interval`, 500 us).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct NakLimiter {
    last: Option<(Instant, Psn)>,
}

impl NakLimiter {
    /// Whether a NAK of `expected` may go out at `now` (then it counts as sent).
    pub(crate) fn allow(&mut self, now: Instant, expected: Psn, interval: Duration) -> bool {
        let ok = self
            .last
            .is_none_or(|(at, psn)| psn != expected || at + interval <= now);
        if ok {
            self.last = Some((now, expected));
        }
        ok
    }
}

/// Out-of-order payloads a direct-placement receiver ([`ReceiverPolicy::SelectiveNak`])
/// has placed: in host memory, at their final place, outside the shared reorder
/// buffer. A message is complete, and delivered, when its hole fills; until then
/// its payloads wait here (the engine's placements take bytes in order). Entry
/// `i` is PSN `expected + i`; payload buffers are reused.
#[derive(Debug, Default)]
pub(crate) struct DirectStore {
    held: VecDeque<Option<(RxMeta, Vec<u8>)>>,
    spare: Vec<Vec<u8>>,
    /// Entries of `held` that hold a payload.
    count: usize,
    /// Highest PSN placed directly, while some are held.
    highest: Option<Psn>,
}

impl DirectStore {
    /// Places `psn`, `ahead` PSNs past the expected one (1 or more). False when it
    /// is already there (a duplicate).
    pub(crate) fn place(&mut self, psn: Psn, ahead: usize, meta: RxMeta, bytes: &[u8]) -> bool {
        if self.held.len() <= ahead {
            self.held.resize_with(ahead + 1, || None);
        }
        if self.held[ahead].is_some() {
            return false;
        }
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(bytes);
        self.held[ahead] = Some((meta, buf));
        self.count += 1;
        self.highest = Some(self.highest.map_or(psn, |h| h.max_of(psn)));
        true
    }

    /// The expected PSN arrived (it was not held here): entry 0 goes.
    pub(crate) fn advance(&mut self) {
        self.held.pop_front();
    }

    /// When the (new) expected PSN is held here: it leaves, with its payload
    /// (hand the buffer back with [`DirectStore::recycle`]).
    pub(crate) fn pop_expected(&mut self) -> Option<(RxMeta, Vec<u8>)> {
        let held = self.held.front_mut()?.take()?;
        self.held.pop_front();
        self.count -= 1;
        if self.held.is_empty() {
            self.highest = None;
        }
        Some(held)
    }

    /// A payload buffer from [`DirectStore::pop_expected`], for reuse.
    pub(crate) fn recycle(&mut self, buf: Vec<u8>) {
        self.spare.push(buf);
    }

    /// Highest PSN held, if any.
    pub(crate) fn highest(&self) -> Option<Psn> {
        self.highest
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

    #[test]
    fn go_back_n_takes_only_the_expected_psn_and_old_ones() {
        let policy = ReceiverPolicy::GoBackN {
            nak_interval: Duration::from_us(500),
        };
        let expected = || Psn(u32::MAX); // across the wrap
        assert_eq!(policy.admit(Psn(u32::MAX), expected), Admission::Offer);
        assert_eq!(policy.admit(Psn(0), expected), Admission::OutOfSequence);
        assert_eq!(policy.admit(Psn(700), expected), Admission::OutOfSequence);
        assert_eq!(policy.admit(Psn(u32::MAX - 1), expected), Admission::Offer);
    }

    #[test]
    fn selective_nak_places_ahead_within_its_window() {
        let policy = ReceiverPolicy::SelectiveNak { window: 512 };
        let expected = || Psn(100);
        assert_eq!(policy.admit(Psn(100), expected), Admission::Offer);
        assert_eq!(policy.admit(Psn(99), expected), Admission::Offer);
        assert_eq!(policy.admit(Psn(101), expected), Admission::PlaceDirect);
        assert_eq!(policy.admit(Psn(612), expected), Admission::PlaceDirect);
        assert_eq!(
            policy.admit(Psn(613), expected),
            Admission::Refuse(NakReason::OutOfWindow)
        );
    }

    #[test]
    fn one_nak_per_expected_psn_per_interval_unless_it_moved() {
        let mut l = NakLimiter::default();
        let i = Duration::from_us(500);
        assert!(l.allow(Instant::from_us(10), Psn(5), i));
        assert!(!l.allow(Instant::from_us(11), Psn(5), i));
        assert!(!l.allow(Instant::from_us(509), Psn(5), i));
        assert!(l.allow(Instant::from_us(510), Psn(5), i)); // 500 us later
        assert!(l.allow(Instant::from_us(511), Psn(6), i)); // the expected PSN moved
        assert!(!l.allow(Instant::from_us(600), Psn(6), i));
    }

    #[test]
    fn the_direct_store_gives_back_the_run_after_the_hole() {
        let meta = |offset| RxMeta {
            msg_id: 1,
            msg_len: 10,
            offset,
        };
        let mut s = DirectStore::default();
        assert!(s.place(Psn(12), 2, meta(2), b"c"));
        assert!(s.place(Psn(11), 1, meta(1), b"b"));
        assert!(!s.place(Psn(11), 1, meta(1), b"b"), "a duplicate");
        assert!(s.place(Psn(14), 4, meta(4), b"e"));
        assert_eq!((s.count, s.highest()), (3, Some(Psn(14))));
        assert!(s.pop_expected().is_none(), "PSN 10 is the hole");
        s.advance(); // PSN 10 arrived in order
        let mut run = Vec::new();
        while let Some((m, b)) = s.pop_expected() {
            run.push((m.offset, b.clone()));
            s.recycle(b);
        }
        assert_eq!(run, [(1, b"b".to_vec()), (2, b"c".to_vec())]);
        assert_eq!(s.count, 1); // PSN 14 waits for 13
    }
}
