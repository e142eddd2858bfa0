//! Runs independent jobs on every core: `rondo sweep` and `rondo reproduce` hand it
//! their simulator runs.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// `f` of every item on `jobs` threads (default: every core), the results in item
/// order; `done(n, item, result)` runs as each finishes (`n` of `items.len()`).
pub fn map<T: Sync, R: Send>(
    items: &[T],
    jobs: Option<usize>,
    f: impl Fn(&T) -> R + Sync,
    done: impl Fn(usize, &T, &R) + Sync,
) -> Vec<R> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let jobs = jobs.unwrap_or(cores).clamp(1, items.len().max(1));
    let next = AtomicUsize::new(0);
    let finished = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<R>>> = Mutex::new((0..items.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(i) else { break };
                let r = f(item);
                done(finished.fetch_add(1, Ordering::Relaxed) + 1, item, &r);
                results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
            });
        }
    });
    results
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .map(|r| r.expect("every job ran: the threads take every index"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_back_in_item_order_and_every_job_reports() {
        let items: Vec<u64> = (0..50).collect();
        let seen = AtomicUsize::new(0);
        let out = map(
            &items,
            Some(3),
            |x| x * x,
            |_, _, _| {
                seen.fetch_add(1, Ordering::Relaxed);
            },
        );
        assert_eq!(out, items.iter().map(|x| x * x).collect::<Vec<_>>());
        assert_eq!(seen.load(Ordering::Relaxed), 50);
    }
}
