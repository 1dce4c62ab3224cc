//! Execution: where a batch of envs steps and how the trainer talks to it (catalogue rows
//! 1, 2, 4 and 8), whatever the workload.
//!
//! Every host backend implements [`BatchEnv`], so the trainer does not know where its envs
//! live; all of them give the same trajectories for the same seed and actions, because
//! every env owns its random stream (keyed by its global index) and runs the same code.
//! A workload tells the backends how to make its envs through [`EnvMaker`].
//!
//! | backend | file | where the envs step |
//! |---|---|---|
//! | `sequential` | [`sequential`] | one scalar env object per env, in a loop on the trainer thread |
//! | `threads` | [`threads`] | worker threads, each owning a slice (struct of arrays) |
//! | `subprocess` | [`subprocess`] | worker processes (`hotlab env-worker`, [`worker`]), buffers in shared memory ([`shm`]) |
//! | `vectorized` | the workload's own batch env | the batch on the trainer thread |
//! | `device` | the workload's own, where it has one (its folder's `device/`) | tensors on the trainer's device |
//!
//! Beside them: [`transfer`] (observations to the device, actions back, every copy
//! counted), [`helper`] (a second thread for halves of the work), [`device`] (resolving
//! `--device`), [`alloc`] (the allocator's settings) and [`parts`] (the clock an env times
//! its own parts with).

pub mod alloc;
pub mod device;
pub mod helper;
pub mod parts;
pub mod sequential;
pub mod shm;
pub mod subprocess;
pub mod threads;
pub mod transfer;
pub mod worker;

use anyhow::Result;
use hotlab_core::choices::{Backend, WaitMode};
use hotlab_core::counters::EnvCounters;
use hotlab_env::{BatchEnv, FieldData, ScalarEnv};
use hotlab_spec::RunSpec;
use hotlab_specs::WorkloadSpec;

/// How a workload's envs are made: what every host backend needs to know of a workload.
/// Cheap to share: one per run, used by every backend thread.
pub trait EnvMaker: Send + Sync {
    /// The workload's name (`--env`).
    fn name(&self) -> &'static str;
    /// A batch of `count` envs on one thread whose streams start at global index `first`.
    fn vector_env(&self, count: usize, seed: u64, first: u64) -> Box<dyn BatchEnv>;
    /// One scalar env with the stream of global index `index`.
    fn scalar_env(&self, seed: u64, index: u64) -> Box<dyn ScalarEnv>;
    /// The flags that make a worker process (`hotlab env-worker`) load the same workload
    /// ([`worker_flags`]), and what to write to its standard input (data too large or too
    /// costly to rebuild).
    fn worker_flags(&self) -> (Vec<String>, Option<String>);
    /// What this process's envs of this maker counted themselves, totals: seconds in each
    /// part of their steps ([`hotlab_core::counters::ENV_PARTS`]) and changes to
    /// their parameter sets; nothing for envs that count nothing.
    fn env_counters(&self) -> EnvCounters {
        EnvCounters::default()
    }
    /// Worker processes of the workload's own for `--backend subprocess`, `envs` split
    /// among `workers` (the `gym` workload's Python workers); None: `hotlab env-worker`
    /// processes, which make their envs with [`EnvMaker::vector_env`].
    fn worker_processes(
        &self,
        _envs: usize,
        _seed: u64,
        _workers: usize,
        _wait: WaitMode,
    ) -> Option<Result<subprocess::Subprocess>> {
        None
    }
}

/// A worker process's flags for a workload: `--workload` and the workload as JSON.
pub fn worker_flags(workload: WorkloadSpec) -> Vec<String> {
    vec!["--workload".into(), serde_json::to_string(&workload).unwrap_or_default()]
}

/// Splits `envs` into `workers` contiguous slices as even as possible: `(first, count)`.
pub fn partition(envs: usize, workers: usize) -> Vec<(usize, usize)> {
    let (base, extra) = (envs / workers, envs % workers);
    let mut first = 0;
    (0..workers)
        .map(|w| {
            let count = base + usize::from(w < extra);
            let slice = (first, count);
            first += count;
            slice
        })
        .collect()
}

/// The host backend a spec asks for (`device` is not a host backend: see [`device`]).
pub fn host_backend(spec: &RunSpec, env: &dyn EnvMaker) -> Result<Box<dyn BatchEnv>> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let workers = spec.resolved_workers(cores);
    Ok(match spec.exec.backend {
        Backend::Vectorized | Backend::Device => env.vector_env(spec.envs, spec.seed, 0),
        Backend::Sequential => Box::new(sequential::Sequential::new(env, spec.envs, spec.seed)),
        Backend::Threads => Box::new(threads::Threads::new(env, spec.envs, spec.seed, workers)),
        Backend::Subprocess => {
            let timeout = std::time::Duration::from_secs_f64(spec.exec.worker_timeout_s);
            let (envs, seed, wait) = (spec.envs, spec.seed, spec.exec.wait);
            let sub = match env.worker_processes(envs, seed, workers, wait) {
                Some(own) => own?,
                None => subprocess::Subprocess::spawn(env, envs, seed, workers, wait)?,
            };
            Box::new(sub.with_timeout(timeout))
        }
    })
}

/// Copies one env's row of a field into a batch field at env `e`.
pub fn write_row(dst: &mut FieldData, e: usize, row: &FieldData) {
    debug_assert_eq!(std::mem::discriminant(dst), std::mem::discriminant(row), "field kinds come from the same spec");
    let r = row.as_bytes();
    dst.as_bytes_mut()[e * r.len()..(e + 1) * r.len()].copy_from_slice(r);
}

/// Copies rows `[first, first + count)` of `src` into `dst` at the same rows.
pub fn copy_rows(dst: &mut FieldData, src: &FieldData, first: usize, count: usize) {
    debug_assert_eq!(std::mem::discriminant(dst), std::mem::discriminant(src), "field kinds come from the same spec");
    let s = src.as_bytes();
    let w = s.len() / count.max(1);
    dst.as_bytes_mut()[first * w..(first + count) * w].copy_from_slice(&s[..count * w]);
}

/// Whether a wait mode spins (for reports).
pub fn spins(wait: WaitMode) -> bool {
    wait == WaitMode::Spin
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_are_contiguous_and_cover_everything() {
        assert_eq!(partition(10, 3), vec![(0, 4), (4, 3), (7, 3)]);
        assert_eq!(partition(2, 2), vec![(0, 1), (1, 1)]);
        let p = partition(4097, 8);
        assert_eq!(p.iter().map(|s| s.1).sum::<usize>(), 4097);
        assert!(p.windows(2).all(|w| w[0].0 + w[0].1 == w[1].0));
    }
}
