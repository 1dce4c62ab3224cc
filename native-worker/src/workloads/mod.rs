//! The workloads, each in its own folder behind the seam of [`crate::train::workload`],
//! and the registry that maps a spec's `env` to one.
//!
//! | workload | folder | what it is |
//! |---|---|---|
//! | `cartpole` | [`cartpole`] | Gymnasium's CartPole-v1, the MLP actor-critic, and a device backend |
//! | `proof` | [`proof`] | seed 000's proof search over a Prolog knowledge base, an embedding policy |
//!
//! Adding a workload: a folder here that implements [`Workload`], and one line in
//! [`load`]; its settings are one line in `hotlab_shared::spec`'s registry (see
//! `docs/architecture.md`).

pub mod cartpole;
pub mod proof;

use crate::train::checkpoint;
use crate::train::workload::{TrainedPolicy, Workload};
use crate::train::{self, TrainOptions, Trained, UpdateMetrics};
use anyhow::Result;
use hotlab_shared::spec::{RunSpec, SpecError, WorkloadSpec};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// The registry: the workload a spec names, loaded (a proof world's queries generated and
/// labelled, a knowledge-base file parsed); a bad setting is refused naming its field.
pub fn load(spec: &RunSpec) -> Result<Arc<dyn Workload>, SpecError> {
    Ok(match &spec.workload {
        WorkloadSpec::Cartpole(_) => Arc::new(cartpole::CartPole),
        WorkloadSpec::Proof(settings) => Arc::new(proof::Proof::load(settings)?),
    })
}

/// Trains a policy as `spec` says; `observe` is called after every update.
pub fn train(spec: &RunSpec, observe: &mut dyn FnMut(&UpdateMetrics)) -> Result<Trained> {
    train_with(spec, TrainOptions::default(), observe)
}

/// [`train`] with a trace window, a telemetry sink, a stop flag or a frame feed.
pub fn train_with(spec: &RunSpec, opts: TrainOptions, observe: &mut dyn FnMut(&UpdateMetrics)) -> Result<Trained> {
    let begin = Instant::now();
    spec.validate()?;
    crate::system::check_memory(spec)?;
    let workload = load(spec)?;
    train::run(spec, workload, begin, opts, observe)
}

/// A checkpoint written by `hotlab train --out`, on the CPU, with its workload.
pub fn load_checkpoint(dir: &Path) -> Result<Box<dyn TrainedPolicy>> {
    let stored = checkpoint::read(dir)?;
    let workload = load(&stored.spec)?;
    workload.load_policy(stored)
}
