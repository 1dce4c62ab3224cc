//! The fuzz targets' budget and seed. CI runs each target at its own small budget and a
//! fixed seed; `cargo xtask fuzz --cases N` sets both through the environment, so the same
//! tests run at scale, and every target prints the seed that replays what it tried.

/// How many inputs each loop of a target tries (unset: the target's CI budget).
pub const CASES_VAR: &str = "HOTLAB_FUZZ_CASES";
/// The seed of a target's random inputs (unset: the target's fixed CI seed).
pub const SEED_VAR: &str = "HOTLAB_FUZZ_SEED";

/// [`CASES_VAR`], or `default` where it is unset.
///
/// # Panics
/// Where it is set to anything but a whole number from 1 up: a mistake of whoever runs
/// the fuzzers, named, rather than a target that quietly runs its CI budget.
pub fn cases(default: u32) -> u32 {
    const ALLOWED: &str = "a whole number of cases from 1 up";
    match read(CASES_VAR, ALLOWED) {
        Some(0) => panic!("{CASES_VAR}: {ALLOWED}, got 0"),
        Some(n) => n,
        None => default,
    }
}

/// [`SEED_VAR`], or `default` where it is unset; printed, so that a failing target's
/// output says how to replay it.
///
/// # Panics
/// Where it is set to anything but a whole number.
pub fn seed(default: u64) -> u64 {
    let seed = read(SEED_VAR, "a whole number").unwrap_or(default);
    eprintln!("fuzz seed {seed} (replay with {SEED_VAR}={seed})");
    seed
}

fn read<T: std::str::FromStr>(var: &str, allowed: &str) -> Option<T> {
    let text = std::env::var(var).ok()?;
    Some(text.trim().parse().unwrap_or_else(|_| panic!("{var}: {allowed}, got '{text}'")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_variables_give_the_ci_budget_and_seed() {
        // The variables are set only by `cargo xtask fuzz`, never for the unit tests.
        if std::env::var_os(CASES_VAR).is_none() && std::env::var_os(SEED_VAR).is_none() {
            assert_eq!(cases(300), 300);
            assert_eq!(seed(7), 7);
        }
    }
}
