//! A transfer between two engines behind `Authenticated` with a valid connection
//! key, attacked by the input: replayed and mangled sealed datagrams (outsiders)
//! and forged headers handed behind the authentication check (a peer holding the
//! key), then run clean. A panic, a stall (the transfer neither completes nor fails
//! within 200 ms of simulated clean network) or, from outsiders alone, a failed
//! connection or other bytes delivered, is a finding. The harness is
//! `rondo-ud/tests/sealed_harness`, which `rondo-ud/tests/sealed_fuzz.rs` also runs
//! on stable for a bounded number of seeded cases.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../rondo-ud/tests/sealed_harness/mod.rs"]
mod sealed_harness;

fuzz_target!(|input: &[u8]| {
    if let Err(e) = sealed_harness::run(input) {
        panic!("{e}");
    }
});
