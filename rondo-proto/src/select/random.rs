//! Random spraying: each transmission takes a path chosen uniformly among those
//! with an open window (the `path_selection = random` ablation, Fig. 21).

use super::PathSelector;
use crate::rng::Rng;

/// Uniformly random among open paths, from a seeded RNG.
#[derive(Clone, Debug)]
pub struct RandomSelector {
    rng: Rng,
}

impl RandomSelector {
    /// A selector drawing from `seed`.
    pub fn new(seed: u64) -> RandomSelector {
        RandomSelector {
            rng: Rng::new(seed),
        }
    }
}

impl PathSelector for RandomSelector {
    fn select(&mut self, open: &[f64]) -> Option<usize> {
        let n = open.iter().filter(|&&o| o > 0.0).count() as u64;
        if n == 0 {
            return None;
        }
        let k = self.rng.gen_range(0..n) as usize;
        open.iter()
            .enumerate()
            .filter(|(_, &o)| o > 0.0)
            .nth(k)
            .map(|(i, _)| i)
    }

    fn reset(&mut self, _path: usize) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_open_paths_and_all_of_them() {
        let mut s = RandomSelector::new(3);
        let mut seen = [0u32; 4];
        for _ in 0..400 {
            seen[s.select(&[1.0, 0.0, 2.5, 0.5]).unwrap()] += 1;
        }
        assert_eq!(seen[1], 0);
        assert!(seen[0] > 80 && seen[2] > 80 && seen[3] > 80, "{seen:?}");
        assert_eq!(s.select(&[0.0; 4]), None);
    }
}
