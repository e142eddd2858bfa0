//! Deficit-based path selection (paper §4.2.3, eq. (6)).

use super::PathSelector;

/// Per-path deficits Z_p. Each transmission adds every open path's normalised open
/// window `O_p / sum_j O_j` to its deficit, picks the largest deficit, and takes one
/// from it: paths receive transmissions in proportion to their open windows,
/// without bursts.
///
/// With a burst of n (`FlowConfig::path_burst`), the path picked stays picked
/// for up to n transmissions in a row while its window is open; the deficits
/// are kept as for every pick, so the shares over many bursts are the same.
#[derive(Clone, Debug, Default)]
pub struct DeficitSelector {
    deficit: Vec<f64>,
    burst: u32,
    /// The path of the current run and the picks it has had.
    run: Option<(usize, u32)>,
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
        DeficitSelector::with_burst(paths, 1)
    }

    /// A selector for `paths` paths that gives a path up to `burst` picks in a
    /// row (at least 1).
    pub fn with_burst(paths: usize, burst: u32) -> DeficitSelector {
        DeficitSelector {
            deficit: vec![0.0; paths],
            burst: burst.max(1),
            run: None,
        }
    }

    /// Deficit of a path.
    pub fn deficit(&self, path: usize) -> f64 {
        self.deficit[path]
    }

    /// Forgets a path's deficit (it left rotation).
    pub fn reset(&mut self, path: usize) {
        self.deficit[path] = 0.0;
        if self.run.is_some_and(|(p, _)| p == path) {
            self.run = None;
        }
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
        let mut best = best?;
        if self.burst > 1 {
            best = match self.run {
                Some((p, n)) if n < self.burst && open.get(p).is_some_and(|&o| o > 0.0) => {
                    self.run = Some((p, n + 1));
                    p
                }
                _ => {
                    self.run = Some((best, 1));
                    best
                }
            };
        }
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
    fn a_burst_keeps_a_path_while_its_window_is_open_and_the_shares() {
        let mut s = DeficitSelector::with_burst(3, 4);
        let open = [4.0, 2.0, 2.0];
        let picks: Vec<usize> = (0..64).map(|_| s.select(&open).unwrap()).collect();
        // Runs of four picks of one path (path 0, with twice the share, has two
        // runs back to back).
        let mut runs = vec![(picks[0], 1usize)];
        for w in picks.windows(2) {
            match runs.last_mut() {
                Some((_, n)) if w[0] == w[1] => *n += 1,
                _ => runs.push((w[1], 1)),
            }
        }
        let whole = &runs[..runs.len() - 1];
        assert_eq!(whole[0], (0, 4), "{picks:?}");
        assert!(
            whole[1..]
                .iter()
                .all(|&(p, n)| n == if p == 0 { 8 } else { 4 }),
            "{picks:?}"
        );
        // The shares follow the open windows, as without bursts.
        let count = |p| picks.iter().filter(|&&x| x == p).count();
        assert!((30..=34).contains(&count(0)), "{picks:?}");
        assert!((14..=18).contains(&count(1)) && (14..=18).contains(&count(2)));
        // A run ends when its path's window closes.
        let mut s = DeficitSelector::with_burst(2, 16);
        assert_eq!(s.select(&[1.0, 1.0]), Some(0));
        assert_eq!(s.select(&[0.0, 1.0]), Some(1));
        assert_eq!(s.select(&[5.0, 1.0]), Some(1));
        // Burst 1 is the packet-by-packet selector.
        let (mut a, mut b) = (DeficitSelector::new(3), DeficitSelector::with_burst(3, 1));
        for _ in 0..32 {
            assert_eq!(a.select(&open), b.select(&open));
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
