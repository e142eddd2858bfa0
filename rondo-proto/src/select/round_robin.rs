//! Round-robin spraying (RRPS): each transmission takes the next path in turn
//! that may send, whatever the paths' rates.

use super::PathSelector;

/// Round robin over the paths with an open window, starting after the last one
/// used.
#[derive(Clone, Debug)]
pub struct RoundRobin {
    last: Option<usize>,
}

impl RoundRobin {
    /// A selector whose first pick is the lowest open path.
    pub fn new() -> RoundRobin {
        RoundRobin { last: None }
    }
}

impl Default for RoundRobin {
    fn default() -> Self {
        RoundRobin::new()
    }
}

impl PathSelector for RoundRobin {
    fn select(&mut self, open: &[f64]) -> Option<usize> {
        let n = open.len();
        let start = self.last.map_or(0, |l| l + 1);
        let pick = (0..n).map(|k| (start + k) % n).find(|&i| open[i] > 0.0)?;
        self.last = Some(pick);
        Some(pick)
    }

    fn reset(&mut self, _path: usize) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turns_over_open_paths_whatever_their_windows() {
        let mut s = RoundRobin::new();
        let open = [5.0, 0.5, 0.0, 1.0];
        let picks: Vec<usize> = (0..6).map(|_| s.select(&open).unwrap()).collect();
        assert_eq!(picks, [0, 1, 3, 0, 1, 3]);
        assert_eq!(s.select(&[0.0; 4]), None);
        // A path that opens again rejoins the turn where it stands.
        assert_eq!(s.select(&[1.0, 1.0, 1.0, 1.0]), Some(0));
        assert_eq!(s.select(&[1.0, 1.0, 1.0, 1.0]), Some(1));
    }
}
