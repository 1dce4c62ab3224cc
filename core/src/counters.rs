//! Exact, cheap counters of what a run's hot path did (catalogue rows 1–4 and 8).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Counts since the start of a run (or of a window: see [`Counters::since`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Counters {
    /// Env transitions (one per env per step).
    pub env_steps: u64,
    /// Scalar reads of device data by the host (each one a device sync on a GPU).
    pub host_syncs: u64,
    /// Host→device copy calls and bytes.
    pub h2d_copies: u64,
    pub h2d_bytes: u64,
    /// Device→host copy calls and bytes.
    pub d2h_copies: u64,
    pub d2h_bytes: u64,
    /// Step requests sent to worker processes and answered.
    pub ipc_round_trips: u64,
    /// Polls of a worker's ready flag by a spinning waiter.
    pub spin_iterations: u64,
    /// Seconds the trainer thread spent blocked or spinning on workers.
    pub worker_wait_s: f64,
    /// Replays of a captured CUDA graph (`--update graph`: one per update or train step).
    #[serde(default)]
    pub update_replays: u64,
    /// Kernels, copies and fills those replays launched (the captured graph's nodes per
    /// replay): what the host would have dispatched op by op without the graph.
    #[serde(default)]
    pub update_launches: u64,
    /// What the envs counted of their own work (beside these keys in JSON).
    #[serde(flatten)]
    pub own: EnvOwn,
}

impl Counters {
    /// The counts accumulated after `earlier` was taken.
    pub fn since(&self, earlier: &Counters) -> Counters {
        Counters {
            env_steps: self.env_steps - earlier.env_steps,
            host_syncs: self.host_syncs - earlier.host_syncs,
            h2d_copies: self.h2d_copies - earlier.h2d_copies,
            h2d_bytes: self.h2d_bytes - earlier.h2d_bytes,
            d2h_copies: self.d2h_copies - earlier.d2h_copies,
            d2h_bytes: self.d2h_bytes - earlier.d2h_bytes,
            ipc_round_trips: self.ipc_round_trips - earlier.ipc_round_trips,
            spin_iterations: self.spin_iterations - earlier.spin_iterations,
            worker_wait_s: self.worker_wait_s - earlier.worker_wait_s,
            update_replays: self.update_replays - earlier.update_replays,
            update_launches: self.update_launches - earlier.update_launches,
            own: self.own.zip(&earlier.own, u64::saturating_sub),
        }
    }

    /// Adds another window's counts to these.
    pub fn add(&mut self, o: &Counters) {
        self.env_steps += o.env_steps;
        self.host_syncs += o.host_syncs;
        self.h2d_copies += o.h2d_copies;
        self.h2d_bytes += o.h2d_bytes;
        self.d2h_copies += o.d2h_copies;
        self.d2h_bytes += o.d2h_bytes;
        self.ipc_round_trips += o.ipc_round_trips;
        self.spin_iterations += o.spin_iterations;
        self.worker_wait_s += o.worker_wait_s;
        self.update_replays += o.update_replays;
        self.update_launches += o.update_launches;
        self.own = self.own.zip(&o.own, |a, b| a + b);
    }

    /// Takes an env backend's own totals (IPC, spins, waits, the envs' own counts, named
    /// by `counts`: the workload's list) into these.
    pub fn set_env(&mut self, env: &EnvCounters, counts: &[Count]) {
        self.ipc_round_trips = env.ipc_round_trips;
        self.spin_iterations = env.spin_iterations;
        self.worker_wait_s = env.worker_wait_s;
        self.own = EnvOwn::from_slots(counts, &env.counts);
    }
}

/// Parts of an env step an env can time itself, at most (its workload's
/// `Settings::ENV_PARTS`, in that order).
pub const ENV_PARTS: usize = 7;
/// Counts an env can keep itself, at most (its workload's `Settings::COUNTS`, in that order).
pub const ENV_COUNTS: usize = 8;

crate::names::name_type!(
    /// One of an env's own counts, by name (its key in a run's counters). A workload declares
    /// its counts in its module (`Settings::COUNTS`) with what each one is ([`CountInfo`]).
    Count
);

/// A count with what it is: its label in the run view and its whole meaning.
#[derive(Clone, Copy, Debug)]
pub struct CountInfo {
    pub count: Count,
    /// A short label ("topology changes").
    pub label: &'static str,
    /// What it counts and why it matters.
    pub about: &'static str,
}

impl CountInfo {
    pub const fn new(count: Count, label: &'static str, about: &'static str) -> Self {
        Self { count, label, about }
    }
}

/// What the envs counted of their own work, by name (the morpho env's hosts: their surgery,
/// lifecycle, training, streams and graphs), summed over envs, threads and worker
/// processes; in a run's JSON, keys beside the run's own counters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct EnvOwn(BTreeMap<Count, u64>);

impl EnvOwn {
    /// One count (0 when the envs never counted it).
    pub fn get(&self, count: Count) -> u64 {
        self.0.get(&count).copied().unwrap_or(0)
    }

    /// The counts with their names, in name order.
    pub fn iter(&self) -> impl Iterator<Item = (Count, u64)> + '_ {
        self.0.iter().map(|(&c, &n)| (c, n))
    }

    /// Counts kept positionally (an env backend's, a worker's shared memory), named by
    /// their workload's list.
    pub fn from_slots(names: &[Count], slots: &[u64; ENV_COUNTS]) -> EnvOwn {
        EnvOwn(names.iter().zip(slots).map(|(&c, &n)| (c, n)).collect())
    }

    /// Count by count (a count one side lacks is 0 there), `f` of these and `o`'s.
    pub fn zip(&self, o: &EnvOwn, f: impl Fn(u64, u64) -> u64) -> EnvOwn {
        let names: std::collections::BTreeSet<Count> = self.0.keys().chain(o.0.keys()).copied().collect();
        EnvOwn(names.into_iter().map(|c| (c, f(self.get(c), o.get(c)))).collect())
    }
}

impl FromIterator<(Count, u64)> for EnvOwn {
    fn from_iter<I: IntoIterator<Item = (Count, u64)>>(counts: I) -> Self {
        EnvOwn(counts.into_iter().collect())
    }
}

/// What an env backend counts itself (totals since it was made).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct EnvCounters {
    pub ipc_round_trips: u64,
    pub spin_iterations: u64,
    pub worker_wait_s: f64,
    /// Seconds its worker processes' envs spent in each part of their steps (summed over
    /// workers, in the workload's `ENV_PARTS` order; in-process envs report theirs
    /// through their workload instead).
    pub parts: [f64; ENV_PARTS],
    /// Its envs' own counts, in the workload's `COUNTS` order.
    pub counts: [u64; ENV_COUNTS],
}

impl EnvCounters {
    /// These and an env's own (a backend's and its workload's), summed.
    pub fn plus(&self, o: &EnvCounters) -> EnvCounters {
        EnvCounters {
            ipc_round_trips: self.ipc_round_trips + o.ipc_round_trips,
            spin_iterations: self.spin_iterations + o.spin_iterations,
            worker_wait_s: self.worker_wait_s + o.worker_wait_s,
            parts: std::array::from_fn(|i| self.parts[i] + o.parts[i]),
            counts: std::array::from_fn(|i| self.counts[i] + o.counts[i]),
        }
    }

    /// A worker's parts and counts as read back from shared memory.
    pub fn from_own(parts: [f64; ENV_PARTS], counts: [u64; ENV_COUNTS]) -> Self {
        Self { parts, counts, ..Self::default() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_counts_sit_beside_the_run_s_keys_and_read_back() {
        let names = [Count::new("topology_changes"), Count::new("host_passes")];
        let mut c = Counters { env_steps: 4, ..Counters::default() };
        c.set_env(&EnvCounters { counts: [3, 5, 0, 0, 0, 0, 0, 0], ..EnvCounters::default() }, &names);
        let json = serde_json::to_value(&c).unwrap();
        assert_eq!((json["topology_changes"].as_u64(), json["host_passes"].as_u64()), (Some(3), Some(5)));
        let back: Counters = serde_json::from_value(json).unwrap();
        assert_eq!(back, c);
        assert_eq!(back.own.get(Count::new("host_passes")), 5);
        let later = Counters { own: EnvOwn::from_slots(&names[..1], &[7, 0, 0, 0, 0, 0, 0, 0]), ..c.clone() };
        assert_eq!(later.since(&c).own.get(names[0]), 4);
        assert_eq!(later.since(&c).own.get(names[1]), 0, "a count one side lacks is 0 there");
    }
}
