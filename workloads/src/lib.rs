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
//! | `gym` | [`gym`] | any Gymnasium env, in Python worker processes over shared memory, the MLP or CNN actor-critic |
//! | `envpool` | [`envpool`] | EnvPool's C++ envs, a batch on EnvPool's threads in a worker process, through gym's region |
//!
//! Adding a workload: a folder here and a line in the registry (`registry.rs`; see
//! `docs/architecture.md`). Three crates read the folder, each its part, as its `mod.rs`
//! says: its native code (`native.rs` and the modules it declares) is this crate's,
//! implementing [`Workload`], with its settings implementing [`Native`] (the `load` the
//! registry calls, and its hooks); its declarations (`spec.rs`: settings, knobs, phases,
//! counts, frame, report rules) are `hotlab-specs`' (`specs.rs`: the lab and the browser
//! know them), and its view (`web.rs`) is `hotlab-views`' (`views.rs`).

/// The registry as this crate reads it: each workload's folder (its native code) and its
/// [`Native`] hooks.
macro_rules! registry {
    ($($(#[$doc:meta])* $variant:ident = $name:literal in $module:ident ($settings:ident)),+ $(,)?) => {
        /// The workload a spec names, loaded (a proof world's queries generated and
        /// labelled, a knowledge-base file parsed); a bad setting is refused naming its field.
        pub fn load(spec: &RunSpec) -> Result<Arc<dyn Workload>, SpecError> {
            match &spec.workload {
                $(WorkloadSpec::$variant(settings) => <hotlab_specs::$settings as Native>::load(settings, spec),)+
            }
        }

        /// What this machine offers for a workload's suggested knob (`Settings::SUGGESTED`);
        /// None where the workload lists nothing. Blocks while the list is made.
        pub fn suggestions(env: EnvName) -> Option<Suggestions> {
            match env { $(EnvName::$variant => <hotlab_specs::$settings as Native>::suggestions(),)+ }
        }

        /// Every workload's own CUDA kernels (`Native::kernels`), in the registry's order.
        pub fn kernels() -> Vec<hotlab_train::cuda::nvrtc::Source> {
            [$(<hotlab_specs::$settings as Native>::kernels()),+].concat()
        }

        /// Every workload's own GPU checks on `target` (`hotlab gpu-check`).
        pub fn gpu_checks(target: &Target) -> Vec<serde_json::Value> {
            [$(<hotlab_specs::$settings as Native>::gpu_checks(target)),+].concat()
        }

        /// Every workload's GPU benchmarks on `target`, each a named JSON row.
        pub fn gpu_benches(target: &Target, max_log2_envs: u32) -> Vec<(&'static str, serde_json::Value)> {
            [$(<hotlab_specs::$settings as Native>::gpu_benches(target, max_log2_envs)),+].concat()
        }
    };
}

hotlab_specs::workload_list!(registry);

// The workload folders, whose `mod.rs` give this crate their `native.rs`.
#[path = "registry.rs"]
mod registry;
pub use registry::*;

/// A workload's native side as the registry calls it: `load`, and hooks each with a
/// default for the workloads that have nothing to add.
pub trait Native {
    /// The registry's entry: the workload these settings describe, ready to train.
    fn load(settings: &Self, spec: &RunSpec) -> Result<Arc<dyn Workload>, SpecError>;
    /// The values this machine offers for the workload's suggested knob.
    fn suggestions() -> Option<Suggestions> {
        None
    }
    /// Its own CUDA kernels, compiled at run time with the trainer's (`hotlab gpu-check`
    /// compiles every workload's; its runs open them through `Setup::open_gpu`).
    fn kernels() -> Vec<hotlab_train::cuda::nvrtc::Source> {
        Vec::new()
    }
    /// Its own GPU checks on `target`, each a JSON row (those with GPU paths of their own;
    /// `hotlab_train::gpu_check` holds the trainer's).
    fn gpu_checks(_target: &Target) -> Vec<serde_json::Value> {
        Vec::new()
    }
    /// Its GPU benchmarks on `target`, each a named JSON row; the stepping benchmarks go up
    /// to 2^`max_log2_envs` envs.
    fn gpu_benches(_target: &Target, _max_log2_envs: u32) -> Vec<(&'static str, serde_json::Value)> {
        Vec::new()
    }
}

use anyhow::Result;
use hotlab_protocol::suggestions::Suggestions;
use hotlab_spec::{RunSpec, SpecError};
use hotlab_specs::EnvName;
use hotlab_specs::WorkloadSpec;
use hotlab_train::checkpoint;
use hotlab_train::error::RunError;
use hotlab_train::gpu_check::Target;
use hotlab_train::workload::{TrainedPolicy, Workload};
use hotlab_train::{TrainOptions, Trained, UpdateMetrics};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// Trains a policy as `spec` says; `observe` is called after every update.
pub fn train(spec: &RunSpec, observe: &mut dyn FnMut(&UpdateMetrics)) -> Result<Trained, RunError> {
    train_with(spec, TrainOptions::default(), observe)
}

/// [`train`] for its speed and profile alone: no held-out evaluation after it (what
/// audits, lessons, the tuner and the benchmarks read is the run itself).
pub fn measure(spec: &RunSpec) -> Result<hotlab_train::TrainReport, RunError> {
    let opts = TrainOptions { skip_evaluation: true, ..TrainOptions::default() };
    Ok(train_with(spec, opts, &mut |_| {})?.report)
}

/// [`train`] with a trace window, a telemetry sink, a stop flag or a frame feed.
///
/// Refused ([`RunError::Refused`]) before anything runs when the spec is not allowed: by
/// its ranges, this machine's memory or its workload.
pub fn train_with(
    spec: &RunSpec,
    opts: TrainOptions,
    observe: &mut dyn FnMut(&UpdateMetrics),
) -> Result<Trained, RunError> {
    let begin = Instant::now();
    spec.validate()?;
    hotlab_train::system::check_memory(spec)?;
    let workload = load(spec)?;
    hotlab_train::run(spec, workload, begin, opts, observe)
}

/// A checkpoint written by `hotlab train --out`, on the CPU, with its workload; refused
/// when its spec is not one this build's workload loads.
pub fn load_checkpoint(dir: &Path) -> Result<Box<dyn TrainedPolicy>, RunError> {
    let stored = checkpoint::read(dir)?;
    let workload = load(&stored.spec)?;
    Ok(workload.load_policy(stored)?)
}
