//! One path per flow, chosen by hash (an RC queue pair's: ECMP hashes its
//! five-tuple, so all its packets take one path).

use super::PathSelector;
use crate::rng::Rng;

/// Every transmission takes the flow's one path, picked from the flow's seed;
/// nothing is sent while that path's window is closed (or it is out of rotation).
#[derive(Clone, Debug)]
pub struct SinglePath {
    path: usize,
}

impl SinglePath {
    /// The path of a flow with seed `seed` over `paths` paths (1 or more).
    pub fn new(seed: u64, paths: u16) -> SinglePath {
        let n = u64::from(paths.max(1));
        SinglePath {
            path: Rng::new(seed).gen_range(0..n) as usize,
        }
    }

    /// The flow's path.
    pub fn path(&self) -> usize {
        self.path
    }
}

impl PathSelector for SinglePath {
    fn select(&mut self, open: &[f64]) -> Option<usize> {
        open.get(self.path).is_some_and(|&w| w > 0.0).then_some(self.path)
    }

    fn reset(&mut self, _path: usize) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_path_per_seed_and_only_that_one() {
        let mut s = SinglePath::new(7, 4);
        let p = s.path();
        assert!(p < 4);
        let mut open = [1.0; 4];
        assert_eq!(s.select(&open), Some(p));
        open[p] = 0.0;
        assert_eq!(s.select(&open), None, "another open path is not taken");
        // Seeds spread flows over the paths.
        let used: std::collections::BTreeSet<usize> =
            (0..64).map(|seed| SinglePath::new(seed, 4).path()).collect();
        assert_eq!(used.len(), 4);
    }
}
