//! The benchmarks' workloads: path-plus-packet selection ([`SelectionFlow`], shared
//! by `benches/selection.rs` and the `selection_cycles` binary) and the engine alone
//! ([`EnginePair`], `benches/engine.rs` and rondo-proto's steady-state allocation
//! test).
//!
//! ```
//! use rondo_benches::{EnginePair, SelectionFlow, Skips};
//!
//! let mut flow = SelectionFlow::new(4, Skips::Heterogeneous);
//! let (path, psn) = flow.send_one();
//! assert!(path < 4 && psn < 20_000);
//!
//! let mut pair = EnginePair::new(4, 4096, 64 * 1024);
//! pair.run_messages(3);
//! assert_eq!(pair.messages().0, 3);
//! ```

mod engine;

pub use engine::EnginePair;

use rondo_proto::scheduler::UnsentSet;
use rondo_proto::select::DeficitSelector;
use std::hint::black_box;

/// Rows of precomputed open windows and skips; the workload cycles through them.
const ROWS: usize = 64;
/// Packets sent between changes of the skips (they are recomputed every Tu, not
/// every packet).
const PACKETS_PER_SKIP_ROW: u64 = 64;
/// The set always holds at least this many unsent PSNs.
pub const MIN_UNSENT: u64 = 10_000;
/// PSNs made available at a time when the set runs low.
const EXTEND_CHUNK: u64 = 1024;

/// The skips a [`SelectionFlow`] uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skips {
    /// A heterogeneous flow: path 0 the slowest with skip 30-60, the others 0-5.
    Heterogeneous,
    /// Skip 0 on every path: plain PSN order (the baseline).
    Zero,
}

/// The sender's per-packet critical path (paper App. D) in isolation: a
/// [`DeficitSelector`] picks the path from open windows, then an [`UnsentSet`] with
/// at least [`MIN_UNSENT`] unsent PSNs gives that path's PSN, the
/// (skip_p + 1)-th smallest unsent one, which is marked sent.
pub struct SelectionFlow {
    selector: DeficitSelector,
    unsent: UnsentSet,
    /// Unsent PSNs, tracked here so that topping up costs O(1) (`UnsentSet::len`
    /// scans the sent-out-of-order window).
    remaining: u64,
    /// `ROWS` rows of P open windows, in packets: W_p - inflight_p, small and
    /// fractional as under ACK clocking, now and then 0 (closed).
    open: Vec<Vec<f64>>,
    /// `ROWS` rows of P skips.
    skips: Vec<Vec<u64>>,
    sent: u64,
}

/// xorshift64: deterministic table contents without an RNG dependency.
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

impl SelectionFlow {
    /// A flow over `paths` paths (at least 1) with nothing sent yet.
    pub fn new(paths: usize, skips: Skips) -> SelectionFlow {
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        let open = (0..ROWS)
            .map(|_| {
                let mut row: Vec<f64> = (0..paths)
                    .map(|_| (next(&mut rng) % 17) as f64 * 0.25) // 0 to 4 packets
                    .collect();
                if row.iter().all(|&o| o == 0.0) {
                    row[paths - 1] = 1.0;
                }
                row
            })
            .collect();
        let skips = (0..ROWS)
            .map(|_| {
                (0..paths)
                    .map(|p| match (skips, p) {
                        (Skips::Zero, _) => 0,
                        (Skips::Heterogeneous, 0) => 30 + next(&mut rng) % 31,
                        (Skips::Heterogeneous, _) => next(&mut rng) % 6,
                    })
                    .collect()
            })
            .collect();
        let mut unsent = UnsentSet::new(0);
        unsent.extend_to(MIN_UNSENT + EXTEND_CHUNK);
        SelectionFlow {
            selector: DeficitSelector::new(paths),
            unsent,
            remaining: MIN_UNSENT + EXTEND_CHUNK,
            open,
            skips,
            sent: 0,
        }
    }

    /// Sends one packet: returns its path and PSN.
    pub fn send_one(&mut self) -> (usize, u64) {
        let i = self.sent;
        self.sent += 1;
        let open = black_box(&self.open[i as usize % ROWS]);
        let path = self.selector.select(open).expect("a window is open");
        let skip = black_box(self.skips[(i / PACKETS_PER_SKIP_ROW) as usize % ROWS][path]);
        let psn = self.unsent.kth(skip + 1).expect("unsent PSNs left");
        self.unsent.mark_sent(psn);
        self.remaining -= 1;
        if self.remaining < MIN_UNSENT {
            self.unsent.extend_to(self.unsent.end() + EXTEND_CHUNK);
            self.remaining += EXTEND_CHUNK;
        }
        (path, psn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn every_psn_is_sent_once_and_the_set_stays_full() {
        for skips in [Skips::Heterogeneous, Skips::Zero] {
            let mut flow = SelectionFlow::new(4, skips);
            let mut seen = HashSet::new();
            let mut per_path = [0u32; 4];
            for _ in 0..50_000 {
                let (path, psn) = flow.send_one();
                assert!(seen.insert(psn), "{psn} sent twice");
                per_path[path] += 1;
            }
            assert_eq!(flow.unsent.len(), flow.remaining);
            assert!(flow.remaining >= MIN_UNSENT);
            assert!(per_path.iter().all(|&n| n > 5_000), "{per_path:?}");
        }
    }
}
