//! Falcon's path choice: each transmission takes the path with the largest open
//! window; ties go round robin, starting after the last path picked.

use super::PathSelector;

/// The path with the maximum open window.
#[derive(Clone, Debug, Default)]
pub struct MaxOpen {
    last: usize,
}

impl MaxOpen {
    /// A selector with no path picked yet.
    pub fn new() -> MaxOpen {
        MaxOpen::default()
    }
}

impl PathSelector for MaxOpen {
    fn select(&mut self, open: &[f64]) -> Option<usize> {
        let n = open.len();
        let mut best: Option<usize> = None;
        for k in 1..=n {
            let p = (self.last + k) % n;
            if open[p] > 0.0 && best.is_none_or(|b| open[p] > open[b]) {
                best = Some(p);
            }
        }
        let best = best?;
        self.last = best;
        Some(best)
    }

    fn reset(&mut self, _path: usize) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_largest_open_window_wins_and_ties_rotate() {
        let mut s = MaxOpen::new();
        assert_eq!(s.select(&[1.0, 3.0, 2.5, 0.0]), Some(1));
        assert_eq!(s.select(&[0.0; 4]), None);
        let picks: Vec<_> = (0..4)
            .map(|_| s.select(&[2.0, 2.0, 0.0, 2.0]).unwrap())
            .collect();
        assert_eq!(picks, [3, 0, 1, 3]);
        assert_eq!(s.select(&[0.0, 0.0, 0.5, 0.0]), Some(2));
    }
}
