//! Deficit-based path selection (paper §4.2.3, eq. (6)).

use super::PathSelector;

/// Per-path deficits Z_p. Each transmission adds every open path's normalised open
/// window `O_p / sum_j O_j` to its deficit, picks the largest deficit, and takes one
/// from it: paths receive transmissions in proportion to their open windows,
/// without bursts.
#[derive(Clone, Debug, Default)]
pub struct DeficitSelector {
    deficit: Vec<f64>,
}

/// The sum of `open`, in four running sums (one per path modulo 4) added
/// pairwise: a sequential sum waits for each addition before the next, four
/// times as long at 64 paths. Below four paths it is the sequential sum; above,
/// its last bit may differ from it (every built-in and scenario report stayed
/// identical, `tools/scripts/compare-sim-reports.sh`).
fn sum(open: &[f64]) -> f64 {
    let mut lanes = [0.0f64; 4];
    let chunks = open.chunks_exact(4);
    let rest: f64 = chunks.remainder().iter().sum();
    for c in chunks {
        for (l, &o) in lanes.iter_mut().zip(c) {
            *l += o;
        }
    }
    (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]) + rest
}

impl DeficitSelector {
    /// A selector for `paths` paths, all deficits zero.
    pub fn new(paths: usize) -> DeficitSelector {
        DeficitSelector {
            deficit: vec![0.0; paths],
        }
    }

    /// Deficit of a path.
    pub fn deficit(&self, path: usize) -> f64 {
        self.deficit[path]
    }

    /// Forgets a path's deficit (it left rotation).
    pub fn reset(&mut self, path: usize) {
        self.deficit[path] = 0.0;
    }

    /// Picks the path of the next transmission from the open windows `open[p]`
    /// (packets; 0 for a path that cannot send); `None` when every window is closed.
    pub fn select(&mut self, open: &[f64]) -> Option<usize> {
        let total = sum(open);
        if total <= 0.0 {
            return None;
        }
        let inv = 1.0 / total;
        let mut best = None;
        let mut best_z = f64::NEG_INFINITY;
        for (p, (&o, z)) in open.iter().zip(self.deficit.iter_mut()).enumerate() {
            if o <= 0.0 {
                continue;
            }
            *z += o * inv;
            if *z > best_z {
                best_z = *z;
                best = Some(p);
            }
        }
        let best = best?;
        self.deficit[best] -= 1.0;
        Some(best)
    }
}

impl PathSelector for DeficitSelector {
    fn select(&mut self, open: &[f64]) -> Option<usize> {
        DeficitSelector::select(self, open)
    }

    fn reset(&mut self, path: usize) {
        DeficitSelector::reset(self, path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_follow_open_windows_smoothly() {
        let mut s = DeficitSelector::new(3);
        let open = [4.0, 2.0, 2.0];
        let picks: Vec<usize> = (0..8).map(|_| s.select(&open).unwrap()).collect();
        let count = |p| picks.iter().filter(|&&x| x == p).count();
        assert_eq!((count(0), count(1), count(2)), (4, 2, 2));
        // Never two picks of a half-share path in a row.
        assert!(picks.windows(2).all(|w| !(w[0] == w[1] && w[0] != 0)));
    }

    #[test]
    fn closed_windows_are_never_picked() {
        let mut s = DeficitSelector::new(2);
        assert_eq!(s.select(&[0.0, 0.0]), None);
        for _ in 0..10 {
            assert_eq!(s.select(&[0.0, 3.0]), Some(1));
        }
    }

    #[test]
    fn the_lane_sum_is_the_sum() {
        let open: Vec<f64> = (1..=64).map(f64::from).collect();
        assert_eq!(sum(&open), 2080.0);
        assert_eq!(sum(&open[..7]), 28.0);
        // Below four paths, bit for bit the sequential sum.
        let odd = [0.1, 0.7, 1e-9];
        for n in 0..=3 {
            let sequential: f64 = odd[..n].iter().sum();
            assert_eq!(sum(&odd[..n]).to_bits(), (0.0 + sequential).to_bits());
        }
    }
}
