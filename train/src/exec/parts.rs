//! The clock an env times the parts of its step with (the morpho env's host training,
//! validation, credit, lifecycle, reward: [`Phase::ENV_PARTS`]). One per workload instance,
//! shared by every env it made in this process, whichever thread steps them; the trainer
//! reads its totals around each env step and carves the span ([`crate::profiler`]); a
//! worker process copies its own totals into shared memory.

use hotlab_shared::counters::{EnvCounters, Own, ENV_COUNTS, ENV_PARTS};
use hotlab_shared::profile::Phase;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Nanoseconds per part and the envs' own counts ([`Own`]: changes to their parameter
/// sets, reads of their lifecycle state, their hosts' training passes, seed-norm reads,
/// stream waits, graph replays, skipped fp16 steps and images trained on), summed over
/// every env and thread.
#[derive(Debug, Default)]
pub struct PartClock {
    nanos: [AtomicU64; ENV_PARTS],
    counts: [AtomicU64; ENV_COUNTS],
}

impl PartClock {
    /// Adds the time since `since` to `part` (one of [`Phase::ENV_PARTS`]); returns now,
    /// the next part's start.
    pub fn lap(&self, part: Phase, since: Instant) -> Instant {
        let now = Instant::now();
        if let Some(i) = Phase::ENV_PARTS.iter().position(|&p| p == part) {
            self.nanos[i].fetch_add((now - since).as_nanos() as u64, Ordering::Relaxed);
        }
        now
    }

    /// Seconds per part so far.
    pub fn totals(&self) -> [f64; ENV_PARTS] {
        std::array::from_fn(|i| self.nanos[i].load(Ordering::Relaxed) as f64 * 1e-9)
    }

    /// `n` more of one of the envs' own counts.
    pub fn count(&self, what: Own, n: u64) {
        self.counts[what as usize].fetch_add(n, Ordering::Relaxed);
    }

    /// The totals as an env backend's counters.
    pub fn counters(&self) -> EnvCounters {
        let counts = std::array::from_fn(|i| self.counts[i].load(Ordering::Relaxed));
        EnvCounters::from_own(self.totals(), counts)
    }
}

/// The parts `after` has that `before` had not, per part.
pub fn since(after: &[f64; ENV_PARTS], before: &[f64; ENV_PARTS]) -> [f64; ENV_PARTS] {
    std::array::from_fn(|i| after[i] - before[i])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn laps_add_up_per_part_across_threads() {
        let clock = std::sync::Arc::new(PartClock::default());
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let c = clock.clone();
                std::thread::spawn(move || {
                    let t = Instant::now();
                    std::thread::sleep(std::time::Duration::from_millis(2));
                    c.lap(Phase::Validation, t);
                })
            })
            .collect();
        handles.into_iter().for_each(|h| h.join().unwrap());
        clock.lap(Phase::EnvStep, Instant::now()); // not a part: ignored
        let t = clock.totals();
        assert!(t[3] >= 0.004, "both threads' laps: {t:?}");
        assert_eq!(t.iter().filter(|&&s| s > 0.0).count(), 1);
        assert_eq!(since(&t, &t), [0.0; ENV_PARTS]);
    }
}
