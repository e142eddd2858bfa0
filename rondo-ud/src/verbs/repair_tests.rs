use super::*;
use proptest::prelude::*;

/// Simulated memory: the destination region (one value per PSN place) and slots.
/// A completion of the WR expecting `e` writes the arriving PSN into `e`'s place,
/// as the NIC would, then the copies run.
struct Sim {
    places: Vec<Option<u64>>,
    slots: Vec<Option<u64>>,
    p: InOrderPlacement,
    copies: Vec<RepairCopy>,
}

impl Sim {
    fn new(packets: u64, header_slots: usize, reorder_slots: usize) -> Sim {
        Sim {
            places: vec![None; packets as usize],
            slots: vec![None; reorder_slots],
            p: InOrderPlacement::new(0, packets, 1, header_slots, reorder_slots).unwrap(),
            copies: Vec::new(),
        }
    }

    fn post_all(&mut self) {
        while self.p.post_next().is_some() {}
    }

    /// The NIC delivers `psn` into the oldest posted WR.
    fn arrive(&mut self, psn: u64) -> Outcome {
        let expected = self.p.next_complete;
        if let Some(place) = self.places.get_mut(expected as usize) {
            *place = Some(psn);
        }
        self.copies.clear();
        let out = self.p.complete(psn, 1, &mut self.copies).unwrap();
        for c in self.copies.clone() {
            match c {
                RepairCopy::PlaceToSlot { from, slot, .. } => {
                    self.slots[slot] = self.places[from as usize]
                }
                RepairCopy::PlaceToPlace { from, to, .. } => {
                    self.places[to as usize] = self.places[from as usize]
                }
                RepairCopy::SlotToPlace { slot, psn, .. } => {
                    self.places[psn as usize] = self.slots[slot].take()
                }
            }
        }
        self.post_all();
        out
    }
}

#[test]
fn in_order_arrivals_are_all_in_place() {
    let mut sim = Sim::new(16, 4, 2);
    sim.post_all();
    assert_eq!(sim.p.posted(), 4);
    for psn in 0..16 {
        assert_eq!(sim.arrive(psn), Outcome::InPlace);
    }
    assert_eq!(sim.p.counters().in_place, 16);
    assert_eq!(sim.p.counters().repaired, 0);
    assert_eq!(sim.p.in_order(), 16);
    assert!(sim
        .places
        .iter()
        .enumerate()
        .all(|(i, v)| *v == Some(i as u64)));
}

#[test]
fn a_swap_is_repaired_through_a_slot() {
    let mut sim = Sim::new(4, 4, 1);
    sim.post_all();
    // 1 arrives first, into 0's place: to a slot (1's WR is still posted).
    assert_eq!(sim.arrive(1), Outcome::Repaired);
    assert!(matches!(
        sim.copies[..],
        [RepairCopy::PlaceToSlot {
            from: 0,
            slot: 0,
            psn: 1,
            ..
        }]
    ));
    assert_eq!(sim.p.in_order(), 0);
    // 0 arrives into 1's place: back to its own place (its WR is consumed), then
    // 1 leaves the slot for its place (its WR is consumed now).
    assert_eq!(sim.arrive(0), Outcome::Repaired);
    assert!(matches!(
        sim.copies[..],
        [
            RepairCopy::PlaceToPlace { from: 1, to: 0, .. },
            RepairCopy::SlotToPlace {
                slot: 0,
                psn: 1,
                ..
            }
        ]
    ));
    assert_eq!(sim.p.in_order(), 2);
    assert_eq!(sim.arrive(2), Outcome::InPlace);
    assert_eq!(sim.arrive(2), Outcome::Duplicate);
    let c = sim.p.counters();
    assert_eq!(
        (c.in_place, c.repaired, c.via_slot, c.duplicates),
        (1, 2, 1, 1)
    );
    assert_eq!(&sim.places[..3], &[Some(0), Some(1), Some(2)]);
}

#[test]
fn no_free_slot_or_out_of_region_drops() {
    let mut sim = Sim::new(4, 4, 0);
    sim.post_all();
    assert_eq!(sim.arrive(2), Outcome::Dropped, "no reorder slot");
    assert_eq!(sim.arrive(9), Outcome::Dropped, "outside the region");
    assert_eq!(sim.p.counters().dropped, 2);
    let mut p = InOrderPlacement::new(0, 1, 8, 1, 0).unwrap();
    let mut copies = Vec::new();
    assert_eq!(
        p.complete(0, 8, &mut copies),
        Err(RepairError::NothingPosted)
    );
    assert_eq!(
        p.post_next(),
        Some(RecvPost {
            psn: 0,
            header_slot: 0,
            payload_offset: 0
        })
    );
    assert_eq!(p.post_next(), None, "region of one packet");
    assert!(matches!(
        InOrderPlacement::new(0, 0, 8, 1, 0),
        Err(RepairError::Config)
    ));
}

#[test]
fn header_ring_limits_posted_receives_and_offsets_follow_psns() {
    let mut p = InOrderPlacement::new(100, 10, 4096, 3, 0).unwrap();
    let posts: Vec<RecvPost> = std::iter::from_fn(|| p.post_next()).collect();
    assert_eq!(posts.len(), 3);
    assert_eq!(
        posts[2],
        RecvPost {
            psn: 102,
            header_slot: 2,
            payload_offset: 2 * 4096
        }
    );
    let mut copies = Vec::new();
    assert_eq!(p.complete(100, 4096, &mut copies), Ok(Outcome::InPlace));
    assert_eq!(
        p.post_next().map(|r| (r.psn, r.header_slot)),
        Some((103, 0))
    );
}

proptest! {
    /// Any arrival order of the region's PSNs, with enough slots, ends with every
    /// payload at its own place, and the counters add up.
    #[test]
    fn any_arrival_order_ends_in_place(
        order in Just((0u64..48).collect::<Vec<_>>()).prop_shuffle(),
        header_slots in 1usize..16,
    ) {
        let mut sim = Sim::new(48, header_slots, 48);
        sim.post_all();
        for &psn in &order {
            let out = sim.arrive(psn);
            prop_assert!(out == Outcome::InPlace || out == Outcome::Repaired);
        }
        for (i, v) in sim.places.iter().enumerate() {
            prop_assert_eq!(*v, Some(i as u64));
        }
        let c = sim.p.counters();
        prop_assert_eq!(c.in_place + c.repaired, 48);
        prop_assert_eq!(sim.p.in_order(), 48);
    }
}
