//! Receive-ring accounting: which receive buffers are posted, and reposting them
//! in batches (one `ibv_post_recv` chain per batch).
//!
//! The ring has `slots` buffers of `GRH_LEN + mtu` bytes. At the start every slot
//! is due for posting; a completion returns its slot, and slots are reposted once
//! `batch` of them are due, or at once when fewer than a quarter of the ring is
//! still posted (so that a slow trickle of arrivals cannot starve the queue).

use thiserror::Error;

/// A receive completion that does not match a posted slot.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum RxRingError {
    /// The slot is out of range or was not posted.
    #[error("receive completion for slot {0}, which is not posted: a completion from another QP or a driver bug")]
    NotPosted(usize),
    /// A ring with no slots or batches.
    #[error("receive ring needs at least one slot and a batch of 1..=slots")]
    Config,
}

/// Posted / due state of each receive slot.
#[derive(Clone, Debug)]
pub struct RxRing {
    posted: Vec<bool>,
    posted_count: usize,
    due: Vec<usize>,
    batch: usize,
    reposts: u64,
}

impl RxRing {
    /// A ring of `slots` buffers, reposted `batch` at a time.
    pub fn new(slots: usize, batch: usize) -> Result<RxRing, RxRingError> {
        if slots == 0 || batch == 0 || batch > slots {
            return Err(RxRingError::Config);
        }
        Ok(RxRing {
            posted: vec![false; slots],
            posted_count: 0,
            due: (0..slots).rev().collect(),
            batch,
            reposts: 0,
        })
    }

    /// Slots in the ring.
    pub fn slots(&self) -> usize {
        self.posted.len()
    }

    /// Slots posted to the NIC now.
    pub fn posted(&self) -> usize {
        self.posted_count
    }

    /// Batches handed out for posting so far.
    pub fn batches(&self) -> u64 {
        self.reposts
    }

    /// A receive into `slot` completed: the slot becomes due for reposting.
    pub fn complete(&mut self, slot: usize) -> Result<(), RxRingError> {
        match self.posted.get_mut(slot) {
            Some(p) if *p => {
                *p = false;
                self.posted_count -= 1;
                self.due.push(slot);
                Ok(())
            }
            _ => Err(RxRingError::NotPosted(slot)),
        }
    }

    /// True when a batch should be posted now.
    pub fn batch_due(&self) -> bool {
        self.due.len() >= self.batch
            || (!self.due.is_empty() && self.posted_count < self.slots() / 4)
    }

    /// When a batch is due, moves up to `batch` due slots into `out` (cleared
    /// first) and counts them as posted; returns how many.
    pub fn take_batch(&mut self, out: &mut Vec<usize>) -> usize {
        out.clear();
        if !self.batch_due() {
            return 0;
        }
        let n = self.batch.min(self.due.len());
        for _ in 0..n {
            if let Some(slot) = self.due.pop() {
                self.posted[slot] = true;
                self.posted_count += 1;
                out.push(slot);
            }
        }
        self.reposts += 1;
        out.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn posts_everything_in_batches_then_reposts_in_batches() {
        let mut ring = RxRing::new(128, 32).unwrap();
        let mut out = Vec::new();
        let mut first = Vec::new();
        while ring.take_batch(&mut out) > 0 {
            assert_eq!(out.len(), 32);
            first.extend_from_slice(&out);
        }
        assert_eq!(ring.posted(), 128);
        assert_eq!(ring.batches(), 4);
        first.sort_unstable();
        assert_eq!(first, (0..128).collect::<Vec<_>>());
        // 31 completions: not yet a batch (96 still posted, above a quarter).
        for slot in 0..31 {
            ring.complete(slot).unwrap();
        }
        assert_eq!(ring.take_batch(&mut out), 0);
        ring.complete(31).unwrap();
        assert_eq!(ring.take_batch(&mut out), 32);
        assert_eq!(ring.posted(), 128);
    }

    #[test]
    fn reposts_early_when_the_ring_runs_low() {
        // A batch as large as the ring: the low-water mark (a quarter posted)
        // reposts what is due before a whole batch is.
        let mut ring = RxRing::new(8, 8).unwrap();
        let mut out = Vec::new();
        assert_eq!(ring.take_batch(&mut out), 8);
        for slot in 0..6 {
            ring.complete(slot).unwrap();
        }
        assert_eq!(
            ring.take_batch(&mut out),
            0,
            "2 still posted: not below 8/4"
        );
        ring.complete(6).unwrap();
        assert!(ring.batch_due());
        assert_eq!(ring.take_batch(&mut out), 7);
        assert_eq!(ring.posted(), 8);
    }

    #[test]
    fn unknown_completions_are_errors() {
        let mut ring = RxRing::new(4, 2).unwrap();
        assert_eq!(
            ring.complete(0),
            Err(RxRingError::NotPosted(0)),
            "not posted yet"
        );
        let mut out = Vec::new();
        ring.take_batch(&mut out);
        let slot = out[0];
        ring.complete(slot).unwrap();
        assert_eq!(
            ring.complete(slot),
            Err(RxRingError::NotPosted(slot)),
            "twice"
        );
        assert_eq!(ring.complete(99), Err(RxRingError::NotPosted(99)));
        assert!(matches!(RxRing::new(0, 1), Err(RxRingError::Config)));
        assert!(matches!(RxRing::new(4, 5), Err(RxRingError::Config)));
    }
}
