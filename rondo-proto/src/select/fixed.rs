//! One path for the whole flow (ECMP as a RoCE NIC sees it): the flow's packets
//! all take the path its hash chose, whatever the others offer.

use super::PathSelector;
use crate::rng::Rng;

/// Always the flow's path, while its window is open.
#[derive(Clone, Debug)]
pub struct FixedSelector {
    path: usize,
}

impl FixedSelector {
    /// The selector of a flow with `paths` logical paths and seed `seed`: its path
    /// is a hash of the seed, so flows spread over the paths as ECMP spreads them.
    pub fn new(paths: usize, seed: u64) -> FixedSelector {
        let path = (Rng::new(seed).next_u64() % paths.max(1) as u64) as usize;
        FixedSelector { path }
    }

    /// The flow's path.
    pub fn path(&self) -> usize {
        self.path
    }
}

impl PathSelector for FixedSelector {
    fn select(&mut self, open: &[f64]) -> Option<usize> {
        (open.get(self.path).copied().unwrap_or(0.0) > 0.0).then_some(self.path)
    }

    fn reset(&mut self, _path: usize) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_path_per_flow_and_flows_spread_over_paths() {
        let mut s = FixedSelector::new(4, 7);
        let p = s.path();
        let mut open = [1.0; 4];
        for _ in 0..10 {
            assert_eq!(s.select(&open), Some(p));
        }
        open[p] = 0.0;
        assert_eq!(s.select(&open), None, "never another path");
        let mut used = [0u32; 4];
        for seed in 0..400 {
            used[FixedSelector::new(4, seed).path()] += 1;
        }
        assert!(used.iter().all(|&n| n > 60), "{used:?}");
        assert_eq!(FixedSelector::new(1, 3).path(), 0);
    }
}
