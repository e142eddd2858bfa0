//! The retransmission queue of a sender.

use super::SentPacket;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// PSNs waiting for retransmission, smallest first: a min-heap that keeps its
/// capacity, so that loss episodes allocate nothing in the steady state (and a
/// connection that never loses a packet never allocates it). The sent
/// table's `queued` flag is the truth; a PSN acknowledged while queued stays in the
/// heap and is skipped when it comes up.
#[derive(Debug)]
pub(super) struct RetxQueue {
    heap: BinaryHeap<Reverse<u64>>,
    /// Entries still queued.
    live: usize,
}

impl RetxQueue {
    /// An empty queue; it allocates at its first retransmission.
    pub(super) fn new() -> RetxQueue {
        RetxQueue {
            heap: BinaryHeap::new(),
            live: 0,
        }
    }

    /// Queues `psn` (its table entry just became `queued`).
    pub(super) fn insert(&mut self, psn: u64) {
        self.heap.push(Reverse(psn));
        self.live += 1;
    }

    /// A queued PSN was acknowledged (its entry is no longer `queued`).
    pub(super) fn remove(&mut self) {
        self.live -= 1;
    }

    pub(super) fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// The smallest PSN still queued in `table` (whose first entry is PSN `base`).
    pub(super) fn pop_first(&mut self, table: &VecDeque<SentPacket>, base: u64) -> Option<u64> {
        while let Some(Reverse(psn)) = self.heap.pop() {
            let queued = psn
                .checked_sub(base)
                .and_then(|i| table.get(i as usize))
                .is_some_and(|e| e.queued);
            if queued {
                self.live -= 1;
                return Some(psn);
            }
        }
        None
    }
}
