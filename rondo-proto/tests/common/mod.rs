//! Helpers shared by the integration tests.

use proptest::test_runner::{Config as ProptestConfig, RngSeed};

/// `cases` cases from a fixed seed (the same cases every run; change the seed to
/// explore), no regression files, bounded shrinking.
pub fn proptest_config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        rng_seed: RngSeed::Fixed(0x0052_6f6e_646f),
        failure_persistence: None,
        max_shrink_iters: 64,
        ..ProptestConfig::with_cases(cases)
    }
}
