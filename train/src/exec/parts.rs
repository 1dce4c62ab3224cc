//! The clock an env times the parts of its step with (the morpho env's host training,
//! validation, credit, lifecycle, reward: [`Phase::ENV_PARTS`]). One per workload instance,
//! shared by every env it made in this process, whichever thread steps them; the trainer
//! reads its totals around each env step and carves the span ([`crate::profiler`]); a
//! worker process copies its own totals into shared memory.

use hotlab_shared::counters::{EnvCounters, ENV_PARTS};
use hotlab_shared::profile::Phase;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Nanoseconds per part, summed over every env and thread, the changes to the envs'
/// parameter sets, the reads of their lifecycle state, their hosts' training passes and
/// the reads of their seeds' gradient norms, their hosts' stream waits, graph replays,
/// skipped fp16 steps and images trained on.
#[derive(Debug, Default)]
pub struct PartClock {
    nanos: [AtomicU64; ENV_PARTS],
    topology_changes: AtomicU64,
    lifecycle_reads: AtomicU64,
    host_passes: AtomicU64,
    seed_norm_reads: AtomicU64,
    stream_waits: AtomicU64,
    graph_replays: AtomicU64,
    host_steps_skipped: AtomicU64,
    host_samples: AtomicU64,
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

    /// An env's set of parameter tensors changed.
    pub fn topology_changed(&self) {
        self.topology_changes.fetch_add(1, Ordering::Relaxed);
    }

    /// `n` reads of the envs' lifecycle state from its tensors.
    pub fn lifecycle_read(&self, n: u64) {
        self.lifecycle_reads.fetch_add(n, Ordering::Relaxed);
    }

    /// One host training pass (a minibatch of one host, or of a batch of hosts).
    pub fn host_pass(&self) {
        self.host_passes.fetch_add(1, Ordering::Relaxed);
    }

    /// One read of a host's seeds' gradient norms.
    pub fn seed_norm_read(&self) {
        self.seed_norm_reads.fetch_add(1, Ordering::Relaxed);
    }

    /// A host's stream waited for the default stream.
    pub fn stream_wait(&self) {
        self.stream_waits.fetch_add(1, Ordering::Relaxed);
    }

    /// A host's captured training step replayed.
    pub fn graph_replay(&self) {
        self.graph_replays.fetch_add(1, Ordering::Relaxed);
    }

    /// `n` more fp16 host steps skipped by a host's loss scaler.
    pub fn host_steps_skipped(&self, n: u64) {
        self.host_steps_skipped.fetch_add(n, Ordering::Relaxed);
    }

    /// `n` more images trained on by the hosts.
    pub fn host_samples(&self, n: u64) {
        self.host_samples.fetch_add(n, Ordering::Relaxed);
    }

    /// The totals as an env backend's counters.
    pub fn counters(&self) -> EnvCounters {
        EnvCounters {
            parts: self.totals(),
            topology_changes: self.topology_changes.load(Ordering::Relaxed),
            lifecycle_reads: self.lifecycle_reads.load(Ordering::Relaxed),
            host_passes: self.host_passes.load(Ordering::Relaxed),
            seed_norm_reads: self.seed_norm_reads.load(Ordering::Relaxed),
            stream_waits: self.stream_waits.load(Ordering::Relaxed),
            graph_replays: self.graph_replays.load(Ordering::Relaxed),
            host_steps_skipped: self.host_steps_skipped.load(Ordering::Relaxed),
            host_samples: self.host_samples.load(Ordering::Relaxed),
            ..EnvCounters::default()
        }
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
