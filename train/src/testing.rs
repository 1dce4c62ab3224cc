//! Helpers for the unit tests.

use std::sync::{Mutex, MutexGuard};

static TORCH_RNG: Mutex<()> = Mutex::new(());

/// Seeds libtorch's global generator and keeps it to the caller until the guard drops:
/// unit tests run on parallel threads, and one test's draws between another's seed and
/// its initialization made that test's network depend on the schedule.
pub fn torch_seed(seed: i64) -> MutexGuard<'static, ()> {
    let guard = TORCH_RNG.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    tch::manual_seed(seed);
    guard
}
