//! Env backends: the same batch of envs stepped in different places (catalogue rows 1, 3, 8).
//!
//! Every host backend implements [`BatchEnv`], so the trainer does not know where its envs
//! live; all of them give the same trajectories for the same seed and actions, because
//! every env owns its random stream (keyed by its global index) and runs the same f32 code.
//!
//! | backend | file | where the envs step |
//! |---|---|---|
//! | `sequential` | [`sequential`] | one scalar env object per env, in a loop on the trainer thread |
//! | `threads` | [`threads`] | worker threads, each owning a slice (struct of arrays) |
//! | `subprocess` | [`subprocess`] | worker processes (`hotlab env-worker`), buffers in shared memory |
//! | `vectorized` | `CartPoleBatch`, `ProofBatch` (shared crate) | the batch on the trainer thread |
//! | `device` | [`device`] | tensors on the trainer's device, stepped by tensor ops |

pub mod device;
pub mod sequential;
pub mod shm;
pub mod subprocess;
pub mod threads;
pub mod worker;

use anyhow::Result;
use hotlab_shared::cartpole::{CartPoleBatch, CartPoleF32};
use hotlab_shared::env::{BatchEnv, FieldData, ScalarEnv};
use hotlab_shared::proof::{ProofBatch, ProofScalar, ProofTask};
use hotlab_shared::spec::{Backend, EnvName, RunSpec, SpecError, WaitMode};
use std::sync::Arc;

/// A workload ready to instantiate: cheap to clone, shared by every env of a run.
#[derive(Clone, Debug)]
pub enum EnvDef {
    Cartpole,
    /// The knowledge base, queries and limits, loaded once.
    Proof(Arc<ProofTask>),
}

impl EnvDef {
    /// The workload of a spec (for `proof`: its `kb`, `queries` and `proof_depth`).
    pub fn new(env: EnvName, kb: &str, queries: Option<&str>, depth: usize) -> Result<Self, SpecError> {
        Ok(match env {
            EnvName::Cartpole => EnvDef::Cartpole,
            EnvName::Proof => EnvDef::Proof(Arc::new(
                ProofTask::load(kb, queries, depth).map_err(|(field, m)| SpecError::new(field, m))?,
            )),
        })
    }

    pub fn from_spec(spec: &RunSpec) -> Result<Self, SpecError> {
        Self::new(spec.env, &spec.kb, spec.queries.as_deref(), spec.proof_depth)
    }

    pub fn name(&self) -> EnvName {
        match self {
            EnvDef::Cartpole => EnvName::Cartpole,
            EnvDef::Proof(_) => EnvName::Proof,
        }
    }

    /// The flags that make a worker process load the same workload, and what to write
    /// to its standard input: a proof task's training queries (`--queries -`), so that
    /// no worker generates and labels them again.
    pub fn worker_flags(&self) -> (Vec<String>, Option<String>) {
        let mut flags = vec!["--env".to_string(), self.name().as_str().to_string()];
        let mut stdin = None;
        if let EnvDef::Proof(task) = self {
            flags.extend(["--kb".into(), task.source.clone(), "--proof-depth".into(), task.depth.to_string()]);
            flags.extend(["--queries".into(), "-".into()]);
            stdin = Some(task.train_text());
        }
        (flags, stdin)
    }
}

/// A batch of `count` envs on one thread whose streams start at global index `first`
/// (CartPole's struct of arrays; a vector of proof envs).
pub fn vector_env(env: &EnvDef, count: usize, seed: u64, first: u64) -> Box<dyn BatchEnv> {
    match env {
        EnvDef::Cartpole => Box::new(CartPoleBatch::new(count, seed, first)),
        EnvDef::Proof(task) => Box::new(ProofBatch::new(Arc::clone(task), count, seed, first)),
    }
}

/// One scalar env with the stream of global index `index`.
pub fn scalar_env(env: &EnvDef, seed: u64, index: u64) -> Box<dyn ScalarEnv> {
    match env {
        EnvDef::Cartpole => Box::new(CartPoleF32::new(seed, index)),
        EnvDef::Proof(task) => Box::new(ProofScalar::new(Arc::clone(task), seed, index)),
    }
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
pub fn host_backend(spec: &RunSpec, env: &EnvDef) -> Result<Box<dyn BatchEnv>> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let workers = spec.resolved_workers(cores);
    Ok(match spec.backend {
        Backend::Vectorized | Backend::Device => vector_env(env, spec.envs, spec.seed, 0),
        Backend::Sequential => Box::new(sequential::Sequential::new(env, spec.envs, spec.seed)),
        Backend::Threads => Box::new(threads::Threads::new(env, spec.envs, spec.seed, workers)),
        Backend::Subprocess => Box::new(subprocess::Subprocess::spawn(env, spec.envs, spec.seed, workers, spec.wait)?),
    })
}

/// Copies one env's row of a field into a batch field at env `e`.
pub fn write_row(dst: &mut FieldData, e: usize, row: &FieldData) {
    match (dst, row) {
        (FieldData::F32(d), FieldData::F32(r)) => d[e * r.len()..(e + 1) * r.len()].copy_from_slice(r),
        (FieldData::I64(d), FieldData::I64(r)) => d[e * r.len()..(e + 1) * r.len()].copy_from_slice(r),
        _ => unreachable!("field kinds come from the same spec"),
    }
}

/// Copies rows `[first, first + count)` of `src` into `dst` at the same rows.
pub fn copy_rows(dst: &mut FieldData, src: &FieldData, first: usize, count: usize) {
    match (dst, src) {
        (FieldData::F32(d), FieldData::F32(s)) => {
            let w = s.len() / count.max(1);
            d[first * w..(first + count) * w].copy_from_slice(&s[..count * w]);
        }
        (FieldData::I64(d), FieldData::I64(s)) => {
            let w = s.len() / count.max(1);
            d[first * w..(first + count) * w].copy_from_slice(&s[..count * w]);
        }
        _ => unreachable!("field kinds come from the same spec"),
    }
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
