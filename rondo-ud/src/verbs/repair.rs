//! In-order placement with repair (DESIGN.md, "Receive placement: in order means
//! zero copy"), as plain data: which receive to post next, and what to copy when a
//! completion shows that another PSN arrived than the one expected.
//!
//! Receive WRs are posted in expected-PSN order, each with a two-entry scatter
//! list: the GRH and Rondo header go to entry `wr % header_slots` of a header ring,
//! the payload straight to the final place of the PSN the WR expects
//! (`(psn - first) * payload_len` in the destination region). A UD receive queue
//! is consumed in arrival order, so a completion of the WR expecting `e` whose
//! header says PSN `a`:
//! - `a == e`: the payload is already in place ([`RepairCounters::in_place`]);
//! - `a < e`: the WR of `a` was consumed earlier (by another packet), nothing
//!   will write `a`'s place any more: copy the payload from `e`'s place to `a`'s;
//! - `a > e`: `a`'s place still belongs to a posted WR that the NIC may fill at
//!   any time: copy the payload into a reorder slot, and from there to `a`'s place
//!   once `a`'s WR is consumed.
//!
//! The last two count as [`RepairCounters::repaired`]. The driver carries out the
//! [`RepairCopy`] actions in the order given, before it handles the next completion.

use thiserror::Error;

/// A copy the driver must make, in bytes of the destination region and slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RepairCopy {
    /// Payload of PSN `psn`, now at the final place of PSN `from`, to reorder slot `slot`.
    PlaceToSlot {
        /// The PSN whose final place holds the payload.
        from: u64,
        /// The reorder slot to copy it to.
        slot: usize,
        /// The PSN the payload belongs to.
        psn: u64,
        /// Payload bytes.
        len: usize,
    },
    /// Payload of PSN `to`, now at the final place of PSN `from`, to its own place.
    PlaceToPlace {
        /// The PSN whose final place holds the payload.
        from: u64,
        /// The PSN whose place it goes to.
        to: u64,
        /// Payload bytes.
        len: usize,
    },
    /// Payload of PSN `psn`, waiting in reorder slot `slot`, to its own place.
    SlotToPlace {
        /// The slot holding it.
        slot: usize,
        /// The PSN.
        psn: u64,
        /// Payload bytes.
        len: usize,
    },
}

/// What became of one completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The expected PSN: in place, nothing to copy.
    InPlace,
    /// Another PSN: the copies returned with it repair it.
    Repaired,
    /// A PSN that already arrived: dropped.
    Duplicate,
    /// A PSN outside the region, or no reorder slot free: dropped (the sender
    /// retransmits it).
    Dropped,
}

/// Counters of placed-in-place versus repaired packets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RepairCounters {
    /// Payloads that landed at their final place.
    pub in_place: u64,
    /// Payloads that landed elsewhere and were moved.
    pub repaired: u64,
    /// Of those, payloads that went through a reorder slot.
    pub via_slot: u64,
    /// Duplicates dropped.
    pub duplicates: u64,
    /// Payloads dropped (out of the region, or no slot free).
    pub dropped: u64,
}

/// A placement that cannot be set up or a completion without a posted WR.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum RepairError {
    /// No receive is posted, so nothing can have completed.
    #[error(
        "receive completion with no receive posted: a completion from another QP or a driver bug"
    )]
    NothingPosted,
    /// Bad parameters.
    #[error("placement needs a region of at least one packet, a payload size above 0 and at least one header slot")]
    Config,
}

/// One receive WR to post: where its header and payload go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvPost {
    /// The PSN it expects.
    pub psn: u64,
    /// Header-ring entry for the GRH and Rondo header.
    pub header_slot: usize,
    /// Byte offset of the payload's final place in the destination region.
    pub payload_offset: usize,
}

/// Expected-PSN receive posting and repair for one flow's destination region of
/// `packets` payloads of `payload_len` bytes, PSNs `first..first + packets`.
#[derive(Clone, Debug)]
pub struct InOrderPlacement {
    first: u64,
    packets: u64,
    payload_len: usize,
    header_slots: usize,
    /// Next PSN to post a WR for.
    next_post: u64,
    /// PSN expected by the oldest posted WR (WRs complete in post order).
    next_complete: u64,
    /// For each PSN of the region: arrived (in place, repaired or waiting in a slot).
    arrived: Vec<bool>,
    /// PSN -> (slot, len) for payloads waiting for their WR to be consumed.
    waiting: std::collections::HashMap<u64, (usize, usize)>,
    free_slots: Vec<usize>,
    counters: RepairCounters,
}

impl InOrderPlacement {
    /// A placement for PSNs `first..first + packets`, with `header_slots` entries
    /// in the header ring (the most WRs posted at once) and `reorder_slots` slots.
    pub fn new(
        first: u64,
        packets: u64,
        payload_len: usize,
        header_slots: usize,
        reorder_slots: usize,
    ) -> Result<InOrderPlacement, RepairError> {
        if packets == 0 || payload_len == 0 || header_slots == 0 {
            return Err(RepairError::Config);
        }
        let region = usize::try_from(packets).map_err(|_| RepairError::Config)?;
        Ok(InOrderPlacement {
            first,
            packets,
            payload_len,
            header_slots,
            next_post: first,
            next_complete: first,
            arrived: vec![false; region],
            waiting: std::collections::HashMap::new(),
            free_slots: (0..reorder_slots).rev().collect(),
            counters: RepairCounters::default(),
        })
    }

    /// Counters so far.
    pub fn counters(&self) -> RepairCounters {
        self.counters
    }

    /// Byte offset of PSN `psn`'s final place.
    pub fn offset(&self, psn: u64) -> usize {
        (psn - self.first) as usize * self.payload_len
    }

    /// Receive WRs posted and not completed.
    pub fn posted(&self) -> usize {
        (self.next_post - self.next_complete) as usize
    }

    /// The next WR to post, while the header ring has room and the region PSNs.
    pub fn post_next(&mut self) -> Option<RecvPost> {
        if self.posted() >= self.header_slots || self.next_post >= self.first + self.packets {
            return None;
        }
        let psn = self.next_post;
        self.next_post += 1;
        Some(RecvPost {
            psn,
            header_slot: ((psn - self.first) % self.header_slots as u64) as usize,
            payload_offset: self.offset(psn),
        })
    }

    /// Number of PSNs from `first` that are all at their final place (the bytes
    /// `0..in_order() * payload_len` of the region are complete).
    pub fn in_order(&self) -> u64 {
        let done = self.arrived.iter().take_while(|&&a| a).count() as u64;
        // A PSN waiting in a slot has arrived but is not in place yet.
        (0..done)
            .find(|i| self.waiting.contains_key(&(self.first + i)))
            .unwrap_or(done)
    }

    /// The oldest posted WR completed; its header says PSN `psn` with `len`
    /// payload bytes. Appends the copies to make, in order, to `copies`.
    pub fn complete(
        &mut self,
        psn: u64,
        len: usize,
        copies: &mut Vec<RepairCopy>,
    ) -> Result<Outcome, RepairError> {
        if self.posted() == 0 {
            return Err(RepairError::NothingPosted);
        }
        let expected = self.next_complete;
        self.next_complete += 1;
        let outcome = self.place(expected, psn, len.min(self.payload_len), copies);
        // The WR of `expected` is consumed: a payload of `expected` that waited
        // in a slot can go to its place now.
        if let Some((slot, len)) = self.waiting.remove(&expected) {
            copies.push(RepairCopy::SlotToPlace {
                slot,
                psn: expected,
                len,
            });
            self.free_slots.push(slot);
        }
        Ok(outcome)
    }

    fn place(
        &mut self,
        expected: u64,
        psn: u64,
        len: usize,
        copies: &mut Vec<RepairCopy>,
    ) -> Outcome {
        let Some(i) = psn
            .checked_sub(self.first)
            .filter(|&i| i < self.packets)
            .map(|i| i as usize)
        else {
            self.counters.dropped += 1;
            return Outcome::Dropped;
        };
        if self.arrived[i] {
            self.counters.duplicates += 1;
            return Outcome::Duplicate;
        }
        if psn == expected {
            self.arrived[i] = true;
            self.counters.in_place += 1;
            return Outcome::InPlace;
        }
        if psn < self.next_complete {
            copies.push(RepairCopy::PlaceToPlace {
                from: expected,
                to: psn,
                len,
            });
        } else {
            let Some(slot) = self.free_slots.pop() else {
                self.counters.dropped += 1;
                return Outcome::Dropped;
            };
            copies.push(RepairCopy::PlaceToSlot {
                from: expected,
                slot,
                psn,
                len,
            });
            self.waiting.insert(psn, (slot, len));
            self.counters.via_slot += 1;
        }
        self.arrived[i] = true;
        self.counters.repaired += 1;
        Outcome::Repaired
    }
}

#[cfg(test)]
#[path = "repair_tests.rs"]
mod tests;
