//! Exact, cheap counters of what a run's hot path did (catalogue rows 1–4 and 8).

use serde::{Deserialize, Serialize};

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
            own: self.own.zip(&earlier.own, |a, b| a - b),
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
        self.own = self.own.zip(&o.own, |a, b| a + b);
    }

    /// Takes an env backend's own totals (IPC, spins, waits, the envs' own counts) into these.
    pub fn set_env(&mut self, env: &EnvCounters) {
        self.ipc_round_trips = env.ipc_round_trips;
        self.spin_iterations = env.spin_iterations;
        self.worker_wait_s = env.worker_wait_s;
        self.own = env.own;
    }
}

/// Parts of an env step an env times itself ([`crate::profile::Phase::ENV_PARTS`]).
pub const ENV_PARTS: usize = 7;
/// Counts an env keeps itself ([`EnvOwn`]).
pub const ENV_COUNTS: usize = 8;

/// What an env counts of its own work: the morpho env's hosts (their surgery, lifecycle,
/// training, streams and graphs), summed over envs, threads and worker processes. Declared
/// once: a run's [`Counters`], a backend's [`EnvCounters`] and the workers' shared memory
/// ([`EnvOwn::to_array`]) all carry it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EnvOwn {
    /// Changes to an env's set of parameter tensors (a morpho seed's tensors made or
    /// freed): each one invalidates a captured graph of its step (catalogue row 9).
    #[serde(default)]
    pub topology_changes: u64,
    /// Reads of the envs' lifecycle state (a morpho batch's slots) from its tensors: one per
    /// value under `--lifecycle loop`, one per field and batch under `batched`; each one a
    /// device sync where that state lives on a GPU (catalogue row 8).
    #[serde(default)]
    pub lifecycle_reads: u64,
    /// Host training passes (a minibatch's forward, backward and optimizer step, one host's
    /// under `--host-exec per_env`, a whole batch's under `batched`): the sequences of small
    /// ops, each a run of kernel launches on a GPU.
    #[serde(default)]
    pub host_passes: u64,
    /// Reads of the seeds' gradient norms (the morpho env's telemetry, every
    /// `--telemetry-every` host epochs; seed 001 F1): each a device sync where the hosts
    /// train on a GPU.
    #[serde(default)]
    pub seed_norm_reads: u64,
    /// Waits of a morpho host's CUDA stream for the default stream (`--stream-wait`, seed
    /// 002 #4): each one orders the host's work behind everything queued there.
    #[serde(default)]
    pub stream_waits: u64,
    /// A sleeper host's training step replayed as a captured CUDA graph (one launch for
    /// its forward, backward and optimizer; catalogue row 9).
    #[serde(default)]
    pub graph_replays: u64,
    /// fp16 host training steps the hosts' loss scalers skipped (a gradient overflowed:
    /// no weight moved and the scale halved), read with each host epoch's losses.
    #[serde(default)]
    pub host_steps_skipped: u64,
    /// Images the envs' hosts trained on (a minibatch of B images counts B per host):
    /// host samples/s is this over the run's wall time.
    #[serde(default)]
    pub host_samples: u64,
}

/// One of an env's own counts, by its position in [`EnvOwn::to_array`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Own {
    TopologyChanges,
    LifecycleReads,
    HostPasses,
    SeedNormReads,
    StreamWaits,
    GraphReplays,
    HostStepsSkipped,
    HostSamples,
}

impl EnvOwn {
    /// The counts in [`Own`]'s order (a worker process writes them so to shared memory).
    pub fn to_array(&self) -> [u64; ENV_COUNTS] {
        [
            self.topology_changes,
            self.lifecycle_reads,
            self.host_passes,
            self.seed_norm_reads,
            self.stream_waits,
            self.graph_replays,
            self.host_steps_skipped,
            self.host_samples,
        ]
    }

    pub fn from_array(counts: [u64; ENV_COUNTS]) -> Self {
        let [topology_changes, lifecycle_reads, host_passes, seed_norm_reads, stream_waits, graph_replays, host_steps_skipped, host_samples] =
            counts;
        Self {
            topology_changes,
            lifecycle_reads,
            host_passes,
            seed_norm_reads,
            stream_waits,
            graph_replays,
            host_steps_skipped,
            host_samples,
        }
    }

    /// Count by count, `f` of these and `o`'s.
    pub fn zip(&self, o: &EnvOwn, f: impl Fn(u64, u64) -> u64) -> EnvOwn {
        let (a, b) = (self.to_array(), o.to_array());
        EnvOwn::from_array(std::array::from_fn(|i| f(a[i], b[i])))
    }
}

/// What an env backend counts itself (totals since it was made).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EnvCounters {
    pub ipc_round_trips: u64,
    pub spin_iterations: u64,
    pub worker_wait_s: f64,
    /// Seconds its worker processes' envs spent in each part of their steps (summed over
    /// workers; in-process envs report theirs through their workload instead).
    #[serde(default)]
    pub parts: [f64; ENV_PARTS],
    /// Its envs' own counts.
    #[serde(flatten)]
    pub own: EnvOwn,
}

impl EnvCounters {
    /// These and an env's own (a backend's and its workload's), summed.
    pub fn plus(&self, o: &EnvCounters) -> EnvCounters {
        EnvCounters {
            ipc_round_trips: self.ipc_round_trips + o.ipc_round_trips,
            spin_iterations: self.spin_iterations + o.spin_iterations,
            worker_wait_s: self.worker_wait_s + o.worker_wait_s,
            parts: std::array::from_fn(|i| self.parts[i] + o.parts[i]),
            own: self.own.zip(&o.own, |a, b| a + b),
        }
    }

    /// A worker's parts and counts as read back from shared memory.
    pub fn from_own(parts: [f64; ENV_PARTS], counts: [u64; ENV_COUNTS]) -> Self {
        Self { parts, own: EnvOwn::from_array(counts), ..Self::default() }
    }
}
