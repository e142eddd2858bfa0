//! Property tests: whatever the arrival order, delivery is the sent sequence, in PSN
//! order, byte for byte, and never twice.

use proptest::prelude::*;
use reorder::{BufferConfig, FlowId, HugePages, Outcome, Psn, ReorderBuffer};

const SLOT: usize = 40;

/// The payload of `psn`: up to a full slot of bytes derived from it.
fn payload(psn: Psn) -> Vec<u8> {
    let len = (psn.0 as usize).wrapping_mul(7) % (SLOT + 1);
    (0..len)
        .map(|k| (psn.0 as u8).wrapping_add((k as u8).wrapping_mul(13)))
        .collect()
}

fn buffer(slots: usize) -> ReorderBuffer<Psn> {
    let cfg = BufferConfig {
        capacity_bytes: slots * SLOT,
        slot_size: SLOT,
        huge_pages: HugePages::Never,
        ..BufferConfig::default()
    };
    ReorderBuffer::new(cfg).unwrap()
}

/// A receiver: applies arrivals the way the engine does and records what it delivers.
struct Receiver {
    buf: ReorderBuffer<Psn>,
    flow: FlowId,
    delivered: Vec<(Psn, Vec<u8>)>,
}

impl Receiver {
    fn new(slots: usize, base: Psn) -> Self {
        let mut buf = buffer(slots);
        let flow = buf.add_flow(base);
        Receiver {
            buf,
            flow,
            delivered: Vec::new(),
        }
    }

    fn arrive(&mut self, psn: Psn) -> Outcome {
        let before = self.buf.expected(self.flow).unwrap();
        let a = self.buf.arrive(self.flow, psn, psn, &payload(psn)).unwrap();
        if a.outcome == Outcome::InOrder {
            self.delivered.push((psn, payload(psn)));
            assert_eq!(self.buf.expected(self.flow).unwrap(), before.next());
        }
        assert!(self.buf.used_slots() <= self.buf.capacity_slots());
        // NIC-level OOD of a single flow is its OOD: highest - expected, clamped at 0.
        let expected = self.buf.expected(self.flow).unwrap();
        let ood = self
            .buf
            .highest(self.flow)
            .unwrap()
            .map_or(0, |h| h.diff(expected).max(0) as u64);
        assert_eq!(self.buf.nic_ood(), ood);
        a.outcome
    }

    fn drain(&mut self) {
        while let Some((psn, bytes)) = self
            .buf
            .pop_ready(self.flow, |psn, meta, bytes| {
                assert_eq!(psn, meta);
                (psn, bytes.to_vec())
            })
            .unwrap()
        {
            self.delivered.push((psn, bytes));
        }
    }

    /// Asserts that exactly `base..base + n` was delivered, in order, and nothing is held.
    fn check_complete(&self, base: Psn, n: u32) {
        let sent: Vec<_> = (0..n)
            .map(|i| (base.add(i), payload(base.add(i))))
            .collect();
        assert_eq!(self.delivered, sent);
        assert_eq!(self.buf.expected(self.flow).unwrap(), base.add(n));
        assert_eq!(self.buf.used_slots(), 0);
        assert_eq!(self.buf.nic_ood(), 0);
    }
}

fn base() -> impl Strategy<Value = Psn> {
    prop_oneof![
        Just(Psn(0)),
        (u32::MAX - 320..=u32::MAX).prop_map(Psn),
        any::<u32>().prop_map(Psn)
    ]
}

/// A permutation of `0..n`, `1 <= n < 300`.
fn permutation() -> impl Strategy<Value = Vec<u32>> {
    (1u32..300).prop_flat_map(|n| Just((0..n).collect::<Vec<_>>()).prop_shuffle())
}

proptest! {
    #[test]
    fn any_order_delivers_the_sent_sequence(
        base in base(),
        order in permutation(),
        dups in prop::collection::vec((any::<usize>(), any::<usize>()), 0..40),
        drain_after in prop::collection::vec(any::<bool>(), 1..64),
    ) {
        let n = order.len() as u32;
        // Resend copies of earlier arrivals at random later positions.
        let mut arrivals: Vec<u32> = order;
        for (at, of) in dups {
            let at = 1 + at % arrivals.len();
            arrivals.insert(at, arrivals[of % at]);
        }
        let mut rx = Receiver::new(n as usize, base);
        let mut seen = std::collections::HashSet::new();
        for (i, &off) in arrivals.iter().enumerate() {
            let psn = base.add(off);
            let outcome = rx.arrive(psn);
            if !seen.insert(off) {
                prop_assert_eq!(outcome, Outcome::Duplicate);
            } else {
                prop_assert!(matches!(outcome, Outcome::InOrder | Outcome::Buffered), "{:?}", outcome);
            }
            prop_assert!(rx.buf.is_received(rx.flow, psn).unwrap());
            if drain_after[i % drain_after.len()] {
                rx.drain();
            }
        }
        rx.drain();
        rx.check_complete(base, n);
        let stats = rx.buf.stats().all_flows;
        prop_assert_eq!(stats.in_order + stats.buffered, u64::from(n));
        prop_assert_eq!(stats.duplicates, (arrivals.len() - n as usize) as u64);
    }

    #[test]
    fn small_buffer_with_resends_delivers_in_order(
        base in base(),
        n in 1u32..200,
        slots in 0usize..5,
        picks in prop::collection::vec((any::<prop::sample::Index>(), any::<bool>()), 0..1500),
    ) {
        let mut rx = Receiver::new(slots, base);
        // The network: packets in flight, picked in random order; a dropped one is resent.
        let mut in_flight: Vec<u32> = (0..n).collect();
        let mut picks = picks.into_iter();
        while !in_flight.is_empty() {
            let (i, duplicate) = match picks.next() {
                Some((i, dup)) => (i.index(in_flight.len()), dup),
                None => (0, false), // random choices spent: the lowest PSN goes first
            };
            let off = if duplicate { in_flight[i] } else { in_flight.swap_remove(i) };
            let psn = base.add(off);
            let expected = rx.buf.expected(rx.flow).unwrap();
            match rx.arrive(psn) {
                Outcome::Full => {
                    prop_assert_ne!(psn, expected, "the expected PSN was refused");
                    if !duplicate {
                        in_flight.push(off);
                    }
                }
                Outcome::OutOfWindow => prop_assert!(false, "in-window PSN rejected"),
                _ => {}
            }
            if picks.len() == 0 {
                in_flight.sort_unstable();
            }
            rx.drain();
        }
        rx.check_complete(base, n);
        prop_assert!(rx.buf.peak_used_slots() <= slots);
    }

    /// PSNs held more than the buffer's slot count ahead are kept apart from the
    /// ring (so that one far-ahead PSN costs one entry); they deliver the same.
    #[test]
    fn packets_held_beyond_the_ring_deliver_in_order(
        base in base(),
        n in 300u32..1200,
        slots in 256usize..300,
        picks in prop::collection::vec((any::<prop::sample::Index>(), any::<bool>()), 0..3000),
    ) {
        let mut rx = Receiver::new(slots, base);
        // The network: packets in flight, picked in random order; a dropped one is resent.
        let mut in_flight: Vec<u32> = (0..n).collect();
        let mut picks = picks.into_iter();
        while !in_flight.is_empty() {
            let (i, duplicate) = match picks.next() {
                Some((i, dup)) => (i.index(in_flight.len()), dup),
                None => (0, false), // random choices spent: the lowest PSN goes first
            };
            let off = if duplicate { in_flight[i] } else { in_flight.swap_remove(i) };
            let psn = base.add(off);
            let expected = rx.buf.expected(rx.flow).unwrap();
            match rx.arrive(psn) {
                Outcome::Full => {
                    prop_assert_ne!(psn, expected, "the expected PSN was refused");
                    if !duplicate {
                        in_flight.push(off);
                    }
                }
                Outcome::OutOfWindow => prop_assert!(false, "in-window PSN rejected"),
                _ => {}
            }
            if picks.len() == 0 {
                in_flight.sort_unstable();
            }
            rx.drain();
        }
        rx.check_complete(base, n);
        prop_assert!(rx.buf.peak_used_slots() <= slots);
    }
}
