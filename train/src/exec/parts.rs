//! The clock an env times the parts of its step with (the morpho env's host training,
//! validation, credit, lifecycle, reward: its workload's `ENV_PARTS`) and keeps its own
//! counts on (its workload's `COUNTS`). One per workload instance, shared by every env it
//! made in this process, whichever thread steps them; the trainer reads its totals around
//! each env step and carves the span ([`crate::profiler`]); a worker process copies its own
//! totals into shared memory.

use hotlab_core::counters::{Count, CountInfo, EnvCounters, ENV_COUNTS, ENV_PARTS};
use hotlab_core::profile::Phase;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Nanoseconds per part and the envs' own counts, summed over every env and thread, each
/// in a slot: the position of its phase or count in the lists the clock was made with.
#[derive(Debug)]
pub struct PartClock {
    parts: &'static [Phase],
    counts: &'static [CountInfo],
    nanos: [AtomicU64; ENV_PARTS],
    totals: [AtomicU64; ENV_COUNTS],
}

impl PartClock {
    /// A clock for these parts and counts (a workload's `ENV_PARTS` and `COUNTS`: at most
    /// [`ENV_PARTS`] and [`ENV_COUNTS`]; the rest are not kept).
    pub fn new(parts: &'static [Phase], counts: &'static [CountInfo]) -> Self {
        Self { parts, counts, nanos: Default::default(), totals: Default::default() }
    }

    /// Adds the time since `since` to `part` (one of its parts; another phase is not
    /// kept); returns now, the next part's start.
    pub fn lap(&self, part: Phase, since: Instant) -> Instant {
        let now = Instant::now();
        if let Some(i) = self.parts.iter().take(ENV_PARTS).position(|&p| p == part) {
            self.nanos[i].fetch_add((now - since).as_nanos() as u64, Ordering::Relaxed);
        }
        now
    }

    /// Seconds per part so far.
    pub fn totals(&self) -> [f64; ENV_PARTS] {
        std::array::from_fn(|i| self.nanos[i].load(Ordering::Relaxed) as f64 * 1e-9)
    }

    /// `n` more of one of the envs' own counts (one the clock was not made with is not kept).
    pub fn count(&self, what: Count, n: u64) {
        if let Some(i) = self.counts.iter().take(ENV_COUNTS).position(|c| c.count == what) {
            self.totals[i].fetch_add(n, Ordering::Relaxed);
        }
    }

    /// One count's total so far.
    pub fn total(&self, what: Count) -> u64 {
        let i = self.counts.iter().take(ENV_COUNTS).position(|c| c.count == what);
        i.map_or(0, |i| self.totals[i].load(Ordering::Relaxed))
    }

    /// The totals as an env backend's counters.
    pub fn counters(&self) -> EnvCounters {
        let counts = std::array::from_fn(|i| self.totals[i].load(Ordering::Relaxed));
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
        const PARTS: [Phase; 2] = [Phase::new("part_a"), Phase::new("part_b")];
        const COUNTS: [CountInfo; 1] = [CountInfo::new(Count::new("a_count"), "a count", "")];
        let clock = std::sync::Arc::new(PartClock::new(&PARTS, &COUNTS));
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let c = clock.clone();
                std::thread::spawn(move || {
                    let t = Instant::now();
                    std::thread::sleep(std::time::Duration::from_millis(2));
                    c.lap(PARTS[1], t);
                    c.count(COUNTS[0].count, 2);
                })
            })
            .collect();
        handles.into_iter().for_each(|h| h.join().unwrap());
        clock.lap(Phase::ENV_STEP, Instant::now()); // not a part: ignored
        let t = clock.totals();
        assert!(t[1] >= 0.004, "both threads' laps: {t:?}");
        assert_eq!((clock.total(COUNTS[0].count), clock.counters().counts[0]), (4, 4));
        clock.count(Count::new("not_its_count"), 1);
        assert_eq!(clock.counters().counts.iter().sum::<u64>(), 4, "not kept");
        assert_eq!(t.iter().filter(|&&s| s > 0.0).count(), 1);
        assert_eq!(since(&t, &t), [0.0; ENV_PARTS]);
    }
}
