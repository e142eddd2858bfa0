//! Runs that used to spin: a host whose timer stays due while its transport
//! sends nothing makes the simulator move it on by 1 ns at a time
//! (`sim.stuck_timers`), so the run crawls and, in practice, never ends.

use rondo_sim::scenario::{parse, run, Override, RunOptions};

/// 32-to-1 incast of 500 KB flows on `clos3` under `ecmp` (one hashed path per
/// flow, DCQCN). Losses at the incast take flows' pinned paths down while
/// their other logical paths stay in rotation: the controller then had open
/// windows the fixed path selector could not use, and the sender reported its
/// send deadline as due for ever (before the fix this run did not finish in 40
/// minutes; it now takes a fraction of a second). Every flow must complete, with
/// no stuck timer.
#[test]
fn ecmp_incast_whose_pinned_paths_go_down_completes_without_spinning() {
    let text = r#"
        name = "ecmp-incast-path-down"
        seed = 1
        duration_us = 20000
        mtu = 1500
        [topology]
        kind = "clos3"
        [transport]
        kind = "ecmp"
        [workload]
        kind = "incast"
        senders = 32
        receiver = 0
        first_sender = 64
        bytes = 500000
    "#;
    let scenario = parse("ecmp-incast.toml", text, &[] as &[Override]).unwrap();
    let out = run(
        &scenario,
        "ecmp-incast.toml",
        RunOptions::default(),
        &mut |_| {},
    )
    .unwrap();
    let r = &out.report;
    assert_eq!(
        r.sim.stuck_timers, 0,
        "no timer stayed due without progress"
    );
    assert_eq!(r.flows_completed, 32, "every flow completed: {r:?}");
    assert!(
        r.drops.reorder_buffer > 0,
        "the case needs buffer-full drops"
    );
}
