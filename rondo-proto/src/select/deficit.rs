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

/// Up to this many paths one pass with a branch per path picks fastest; above,
/// four branchless lanes ([`grow_lanes`]; `cargo bench -p rondo-benches --bench
/// selection`, path plus packet selection at skip 0: the lanes took 24 / 41 / 84
/// ns at P = 4 / 16 / 64, the scan 18 / 36 / 112; docs/perf.md).
const SCAN_PATHS: usize = 16;

/// Adds every open path's share `open[p] * inv` to its deficit and returns the
/// first open path with the largest deficit (a closed path, `open[p] <= 0`, is
/// left alone and never picked).
fn grow_scan(open: &[f64], deficit: &mut [f64], inv: f64) -> Option<usize> {
    let mut best = None;
    let mut best_z = f64::NEG_INFINITY;
    for (p, (&o, z)) in open.iter().zip(deficit.iter_mut()).enumerate() {
        if o <= 0.0 {
            continue;
        }
        *z += o * inv;
        if *z > best_z {
            best_z = *z;
            best = Some(p);
        }
    }
    best
}

/// [`grow_scan`] without a branch per path, for many paths: lane k takes paths
/// k, k + 4, ..., keeping its largest deficit of an open path and the first path
/// that had it; the lanes' answers are merged, the lower path winning a tie, so
/// the pick and every deficit are the scan's, bit for bit
/// (`tests::the_lanes_pick_as_the_scan`; a deficit is never -0, so adding 0 for
/// a closed path changes nothing; a NaN window, which the scan would add, is
/// taken as closed).
fn grow_lanes(open: &[f64], deficit: &mut [f64], inv: f64) -> Option<usize> {
    let n = open.len().min(deficit.len());
    let (open, deficit) = (&open[..n], &mut deficit[..n]);
    let mut top = [f64::NEG_INFINITY; 4];
    let mut at = [usize::MAX; 4];
    let mut os = open.chunks_exact(4);
    let mut zs = deficit.chunks_exact_mut(4);
    let mut base = 0;
    for (oc, zc) in (&mut os).zip(&mut zs) {
        for k in 0..4 {
            lane(&mut top[k], &mut at[k], base + k, oc[k], &mut zc[k], inv);
        }
        base += 4;
    }
    for (k, (&o, z)) in os.remainder().iter().zip(zs.into_remainder()).enumerate() {
        lane(&mut top[k], &mut at[k], base + k, o, z, inv);
    }
    let (mut best, mut best_z) = (at[0], top[0]);
    for k in 1..4 {
        if top[k] > best_z || (top[k] == best_z && at[k] < best) {
            (best, best_z) = (at[k], top[k]);
        }
    }
    (best != usize::MAX).then_some(best)
}

/// Path `p`'s step in a lane of [`grow_lanes`]: an open path's deficit grows by
/// its share (a closed one's by 0), and the lane keeps the largest deficit of
/// an open path (`top`) and the first path that had it (`at`).
#[inline(always)]
fn lane(top: &mut f64, at: &mut usize, p: usize, o: f64, z: &mut f64, inv: f64) {
    *z += o.max(0.0) * inv;
    let candidate = if o > 0.0 { *z } else { f64::NEG_INFINITY };
    let better = candidate > *top;
    *top = if better { candidate } else { *top };
    *at = if better { p } else { *at };
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
        let mut best = if open.len() > SCAN_PATHS {
            grow_lanes(open, &mut self.deficit, inv)
        } else {
            grow_scan(open, &mut self.deficit, inv)
        }?;
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

    /// Many paths take the branchless lanes: the same pick and the same deficits,
    /// bit for bit, as the scan, over closed paths, ties (equal windows from
    /// equal deficits) and every remainder of four.
    #[test]
    fn the_lanes_pick_as_the_scan() {
        let mut rng = crate::rng::Rng::new(7);
        let mut rand = move |m: u64| rng.gen_range(0..m);
        for n in 1..=70 {
            let (mut a, mut b) = (vec![0.0f64; n], vec![0.0f64; n]);
            for step in 0..300 {
                let open: Vec<f64> = (0..n)
                    .map(|_| match rand(5) {
                        0 => 0.0,
                        1 => 1.0, // ties
                        _ => rand(17) as f64 * 0.25,
                    })
                    .collect();
                let total = sum(&open);
                if total <= 0.0 {
                    continue;
                }
                let inv = 1.0 / total;
                let (pa, pb) = (
                    grow_scan(&open, &mut a, inv),
                    grow_lanes(&open, &mut b, inv),
                );
                assert_eq!(pa, pb, "n = {n}, step {step}");
                let p = pa.expect("an open path");
                a[p] -= 1.0;
                b[p] -= 1.0;
                assert!(
                    a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()),
                    "n = {n}, step {step}"
                );
            }
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
