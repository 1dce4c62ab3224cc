//! The proptest set-up of this crate's fuzz targets: the budget and seed from the
//! environment (`cargo xtask fuzz`), a failing case kept beside its test file.

use hotlab_core::fuzz;
use proptest::test_runner::{Config, FileFailurePersistence, RngSeed};

/// `ci_cases` cases from seed 1 unless `cargo xtask fuzz` says otherwise; failures go to
/// `<test file>.regressions` and are tried first from then on.
pub fn config(ci_cases: u32) -> Config {
    Config {
        cases: fuzz::cases(ci_cases),
        rng_seed: RngSeed::Fixed(fuzz::seed(1)),
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("regressions"))),
        ..Config::default()
    }
}
