//! What a small WRITE costs the verbs layer in allocations (issue 16: per-message
//! costs out of the way of small messages): a counting global allocator over a
//! window of one-entry 4 KiB WRITEs between two QPs of the in-process fabric,
//! after a warm-up, everything (both hosts and the fabric) on the test's thread.

mod common;
// The engine's memory tests' counter: allocations of the whole process, which
// is this binary's one test thread (the fabric and both hosts run on it).
#[path = "../../rondo-proto/tests/common/counting_alloc.rs"]
mod counting_alloc;
use common::*;
use counting_alloc::allocations;
use rondo_verbs::*;

#[global_allocator]
static ALLOC: counting_alloc::Counting = counting_alloc::Counting;

const SIZE: usize = 4096;
const DEPTH: usize = 16;

/// Posts `n` WRITEs of one entry, at most `DEPTH` outstanding, and waits for all.
fn writes(p: &Pair, first: u64, n: u64) {
    let mut posted = 0;
    let mut done = 0;
    while done < n {
        while posted < n && posted - done < DEPTH as u64 {
            let slot = (posted as usize % DEPTH) * SIZE;
            let wr = SendWr::write(
                first + posted,
                vec![Sge::new(&p.a.mr, slot, SIZE as u32)],
                RemoteAddr {
                    addr: p.b.mr.addr() + slot as u64,
                    rkey: p.b.mr.rkey(),
                },
            );
            p.a.qp.post_send_owned(wr).unwrap();
            posted += 1;
        }
        let wc = one(&p.a.cq);
        assert_eq!(wc.status, WcStatus::Success);
        done += 1;
    }
}

#[test]
fn a_small_write_costs_a_few_allocations() {
    let p = pair(DEPTH * SIZE);
    writes(&p, 0, 500);
    let n = 2000;
    let before = allocations();
    writes(&p, 500, n);
    let per = (allocations() - before) as f64 / n as f64;
    eprintln!("{per:.2} allocations per 4 KiB WRITE (both hosts and the fabric)");
    // Measured 5.86, the test's own gather list and `poll_n`'s vector included
    // (the request's gather list, the responder's header for the engine event and
    // the fabric's share make the rest); 7.73 while the verbs header of the
    // request and of the answer each had a vector of its own, 8.73 with the
    // resolved gather list of one entry in a vector of its own.
    assert!(per <= 6.5, "{per:.2} allocations per WRITE");
}
