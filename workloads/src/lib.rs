//! The workloads, each in its own folder behind the seam of [`hotlab_train::workload`],
//! and the registry that maps a spec's `env` to one. Each folder holds all of its
//! workload's native code: its env (on libtorch and, where it has one, its scalar rules:
//! the proof env's Prolog, the morpho env's lifecycle and tasks), its policy, its learner,
//! its evaluation and its benchmarks.
//!
//! | workload | folder | what it is |
//! |---|---|---|
//! | `cartpole` | [`cartpole`] | Gymnasium's CartPole-v1, the MLP actor-critic, and a device backend |
//! | `proof` | [`proof`] | seed 000's proof search over a Prolog knowledge base, an embedding policy |
//! | `morpho` | [`morpho`] | seeds 001–003: hosts that grow seeds while they learn, an 8-head agent |
//! | `dreamer` | [`dreamer`] | seed 004: a world model and an actor-critic in imagination, on pixel CartPole |
//! | `gym` | [`gym`] | any Gymnasium env, in Python worker processes over shared memory, the MLP actor-critic |
//!
//! Adding a workload: a folder here and a line in `registry.rs` (see
//! `docs/architecture.md`). The folder's `mod.rs` and its modules are its native code,
//! implementing [`Workload`] with a `load` the registry calls; two files of the folder are
//! compiled elsewhere: `spec.rs`, its declarations (settings, knobs, phases, counts, frame,
//! report rules), into `hotlab-shared` (so the lab and the browser know them), and `web.rs`,
//! its view, into `hotlab-web`.

/// The registry as this crate reads it: each workload's folder (its native code) and its
/// `load`.
macro_rules! registry {
    ($($(#[$doc:meta])* $variant:ident = $name:literal in $module:ident ($settings:ident)),+ $(,)?) => {
        $($(#[$doc])* pub mod $module;)+

        /// The workload a spec names, loaded (a proof world's queries generated and
        /// labelled, a knowledge-base file parsed); a bad setting is refused naming its field.
        pub fn load(spec: &RunSpec) -> Result<Arc<dyn Workload>, SpecError> {
            match &spec.workload {
                $(WorkloadSpec::$variant(settings) => $module::load(settings, spec),)+
            }
        }
    };
}

include!("registry.rs");

pub mod gpu_check;

/// Every workload's own GPU checks (the workloads with GPU paths of their own).
pub fn gpu_checks() -> Vec<serde_json::Value> {
    [dreamer::gpu::checks(), morpho::gpu::checks()].concat()
}

use anyhow::Result;
use hotlab_shared::spec::{RunSpec, SpecError, WorkloadSpec};
use hotlab_train::checkpoint;
use hotlab_train::workload::{TrainedPolicy, Workload};
use hotlab_train::{TrainOptions, Trained, UpdateMetrics};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// Trains a policy as `spec` says; `observe` is called after every update.
pub fn train(spec: &RunSpec, observe: &mut dyn FnMut(&UpdateMetrics)) -> Result<Trained> {
    train_with(spec, TrainOptions::default(), observe)
}

/// [`train`] for its speed and profile alone: no held-out evaluation after it (what
/// audits, lessons, the tuner and the benchmarks read is the run itself).
pub fn measure(spec: &RunSpec) -> Result<hotlab_train::TrainReport> {
    let opts = TrainOptions { skip_evaluation: true, ..TrainOptions::default() };
    Ok(train_with(spec, opts, &mut |_| {})?.report)
}

/// [`train`] with a trace window, a telemetry sink, a stop flag or a frame feed.
pub fn train_with(spec: &RunSpec, opts: TrainOptions, observe: &mut dyn FnMut(&UpdateMetrics)) -> Result<Trained> {
    let begin = Instant::now();
    spec.validate()?;
    hotlab_train::system::check_memory(spec)?;
    let workload = load(spec)?;
    hotlab_train::run(spec, workload, begin, opts, observe)
}

/// A checkpoint written by `hotlab train --out`, on the CPU, with its workload.
pub fn load_checkpoint(dir: &Path) -> Result<Box<dyn TrainedPolicy>> {
    let stored = checkpoint::read(dir)?;
    let workload = load(&stored.spec)?;
    workload.load_policy(stored)
}
