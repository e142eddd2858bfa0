//! The `sealed_transfer` fuzz target's harness (`tests/sealed_harness`) as a
//! bounded, seeded test on stable: a transfer between two authenticated engines,
//! attacked by outsiders (replayed and mangled sealed datagrams) and by a peer
//! holding the key (forged headers behind the check), never stalls.

mod sealed_harness;

use proptest::prelude::*;
use sealed_harness::{run, Outcome, Run};

#[test]
fn a_clean_transfer_completes() {
    assert_eq!(
        run(&[]),
        Ok(Run {
            outcome: Outcome::Completed,
            auth_dropped: 0,
            behind_the_check: 0
        })
    );
}

#[test]
fn outsider_replays_and_mangles_change_nothing() {
    // Every record replays (op 0) or mangles (op 1) a captured datagram.
    let input: Vec<u8> = (0..64u32)
        .flat_map(|i| [(i % 2) as u8, (i * 7) as u8, (i * 13) as u8, 0, 0x5a])
        .collect();
    let r = run(&input).unwrap();
    assert_eq!(r.outcome, Outcome::Completed);
    // Most were dropped by a check (a replay or a bad tag; a replay that arrives
    // before its original takes the original's place), none reached an engine.
    assert!(r.auth_dropped >= 48 && r.behind_the_check == 0, "{r:?}");
}

#[test]
fn forged_headers_behind_the_check_reach_the_engine_and_do_not_stall_it() {
    // Ops 2 and 3: header bytes and PSNs an insider changed.
    let input: Vec<u8> = (0..64u32)
        .flat_map(|i| {
            [
                2 + (i % 2) as u8,
                (i * 5) as u8,
                (i * 3 % 40) as u8,
                0,
                0x41,
            ]
        })
        .collect();
    let r = run(&input).unwrap();
    assert!(r.behind_the_check >= 60, "{r:?}");
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 48,
        failure_persistence: None,
        // The same cases every run (CI must not depend on luck); change it to explore.
        rng_seed: proptest::test_runner::RngSeed::Fixed(0x0052_6f6e_646f),
        ..ProptestConfig::default()
    })]

    #[test]
    fn no_input_stalls_a_sealed_transfer(input in prop::collection::vec(any::<u8>(), 0..320)) {
        if let Err(e) = run(&input) {
            prop_assert!(false, "{}", e);
        }
    }
}
