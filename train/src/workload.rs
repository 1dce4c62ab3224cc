//! The workload seam: what a workload gives the training loop, and what the loop gives it.
//!
//! The loop ([`super::run`]) knows no workload by name. A workload is a [`Workload`]: it
//! makes its envs for every backend ([`EnvMaker`]) and builds the [`Learner`] that trains
//! it. A learner does one *iteration* at a time (PPO: one rollout and its update; a world
//! model: env steps into a replay buffer, then train steps from it) inside the loop's
//! profiler, counters, frames and telemetry, and hands back its [`TrainedPolicy`] at the
//! end (checkpoint, the lab's policy blob, evaluation).
//!
//! `docs/architecture.md` says how to add a workload.

use super::checkpoint::Stored;
use super::episodes::Episodes;
use super::frames::Frames;
use super::params::{Network, ParamSlot};
use super::precision::Precision;
use super::telemetry::Telemetry;
use crate::cuda::gpu::{Gpu, Support};
use crate::error::RunError;
use crate::exec::EnvMaker;
use crate::profiler::Profiler;
use anyhow::Result;
use hotlab_core::counters::Counters;
use hotlab_env::{Actions, Observations};
use hotlab_protocol::{Frame, Losses};
use hotlab_spec::RunSpec;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tch::{Device, Tensor};

/// A workload: its envs (for every host backend), how its rollouts look to a viewer, and
/// the learner that trains it.
pub trait Workload: EnvMaker {
    /// A frame for the viewer from host observations and the actions just chosen for
    /// them (None when the observations show nothing worth drawing).
    fn frame(&self, step: u64, obs: &Observations, actions: Actions<'_>) -> Option<Frame>;
    /// Builds the run's learner: its network, optimizer, envs and rollout.
    fn learner(self: Arc<Self>, setup: &mut Setup<'_>) -> Result<Box<dyn Learner>, RunError>;
    /// A policy this workload trained, from its checkpoint.
    fn load_policy(self: Arc<Self>, stored: Stored) -> Result<Box<dyn TrainedPolicy>>;
}

/// What the loop resolved before the learner is built, and what the learner adds.
pub struct Setup<'a> {
    pub spec: &'a RunSpec,
    pub device: Device,
    /// The update's precision; a learner that cannot honour it sets fp32 and says so.
    pub precision: Precision,
    /// libtorch intra-op threads for the run (set by the learner once its network exists:
    /// the initialization runs on one thread so that its rounding does not depend on it).
    pub threads: usize,
    /// Where a knob could not do what it says, and what happened instead.
    pub notes: Vec<String>,
    /// Whether the learner's policy has no fused rollout forward (the CNN, the combined
    /// policy, a recurrent one): set by such a learner, kept in the run's profiles.
    pub eager_only: bool,
    /// Set from another thread to end the run: a learner whose set-up waits (a user's
    /// script starting) looks at it meanwhile.
    pub stop: Option<&'a AtomicBool>,
}

impl Setup<'_> {
    /// Opens the hand-written CUDA kernels, the trainer's and a workload's `kernels`, on a
    /// CUDA device (`width`: the widest layer a kernel evaluates a warp per row); elsewhere,
    /// or if NVRTC fails, None and a note on what falls back.
    pub fn open_gpu(&mut self, width: usize, kernels: &[crate::cuda::nvrtc::Source]) -> Option<Arc<Gpu>> {
        let Device::Cuda(ordinal) = self.device else { return None };
        if let Some(why) = Support::probe().why_not() {
            self.notes.push(format!("{why}: libtorch ops only"));
            return None;
        }
        match Gpu::open(ordinal, width, kernels) {
            Ok(gpu) => Some(Arc::new(gpu)),
            Err(e) => {
                self.notes.push(format!("the CUDA kernels are unavailable ({e}): libtorch ops only"));
                None
            }
        }
    }
}

/// What one iteration may use: the loop's profiler, counters, episode tally and frames.
pub struct Iteration<'a> {
    /// 0-based.
    pub index: u64,
    pub prof: &'a mut Profiler,
    pub counters: &'a mut Counters,
    pub episodes: &'a mut Episodes,
    pub frames: &'a mut Frames,
    /// Gradient telemetry, when this iteration is due for it.
    pub telemetry: Option<&'a Telemetry>,
    /// Set from another thread to end the run; a learner checks it at least once per env
    /// step, so that a long rollout stops within a step.
    pub stop: Option<&'a AtomicBool>,
}

impl Iteration<'_> {
    /// Whether the run was asked to stop.
    pub fn stopped(&self) -> bool {
        asked_to_stop(self.stop)
    }
}

/// Whether a stop flag (if any) is set.
pub fn asked_to_stop(flag: Option<&AtomicBool>) -> bool {
    flag.is_some_and(|s| s.load(Ordering::Relaxed))
}

/// What one iteration did.
pub struct Outcome {
    /// Env steps taken.
    pub env_steps: u64,
    /// The learning rate used.
    pub lr: f64,
    /// The learner's figures by name (PPO: its last minibatch's losses; a world model: its
    /// terms averaged over the iteration's train steps). A figure that is not finite ends
    /// the run as diverged.
    pub losses: Losses,
    /// The fp16 loss scale after this iteration (fp16 only).
    pub loss_scale: Option<f64>,
    /// Steps the fp16 scalers have skipped so far (inf/NaN gradients).
    pub skipped_steps: u64,
    /// Squared gradient norms per parameter, when telemetry was due.
    pub norms: Option<Tensor>,
    /// When the learning part began (what came before it is the rollout).
    pub learn_start: Instant,
    /// Seconds of experience collection.
    pub rollout_s: f64,
    /// Lines for a person watching (the dreamer's `[PROFILE]` split).
    pub lines: Vec<String>,
}

/// The iterations of a learner that runs until its trainer ends (a user's script, whose
/// length hotlab cannot know): the loop ends when [`Learner::ended`] says so.
pub const OPEN_ENDED: u64 = u64::MAX;

/// A workload's trainer: the part of the loop that differs between workloads.
pub trait Learner {
    /// Iterations in the run ([`OPEN_ENDED`] where only the trainer knows).
    fn iterations(&self) -> u64;
    /// Whether the trainer has ended on its own (a user's script that finished): the loop
    /// stops after the iteration that said so.
    fn ended(&self) -> bool {
        false
    }
    /// The parameters' layout (gradient telemetry names them).
    fn layout(&self) -> &[ParamSlot];
    /// Iterations whose time is start-up rather than training (first-use allocations,
    /// kernel compilation, a graph's capture, a replay buffer's prefill): the report's
    /// steady window ([`crate::Steady`]) starts after them.
    fn warmup(&self) -> u64 {
        2
    }
    /// One iteration: collect experience and learn from it; None when a stop request
    /// ended it part-way (nothing of it is learned).
    fn iterate(&mut self, it: &mut Iteration<'_>) -> Result<Option<Outcome>>;
    /// After the last iteration, outside the run's timed wall: a trainer that runs apart
    /// (a user's script exiting) is waited for here, and its failure fails the run.
    fn end(&mut self) -> Result<()> {
        Ok(())
    }
    /// The trained policy.
    fn finish(self: Box<Self>) -> Box<dyn TrainedPolicy>;
}

/// A workload's evaluation of a policy: a JSON object and a line for people.
#[derive(Clone, Debug)]
pub struct Evaluation {
    /// Its key in the run's report (`proof`), if it goes there.
    pub key: &'static str,
    pub json: serde_json::Value,
    pub summary: String,
}

/// Which tasks an evaluation plays: the held-out ones that a result is reported on, or a
/// separate validation set to tune on, so that tuning never sees the held-out tasks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TaskSet {
    #[default]
    HeldOut,
    Validation,
}

impl TaskSet {
    pub const NAMES: [&'static str; 2] = ["held-out", "validation"];

    pub fn name(self) -> &'static str {
        match self {
            TaskSet::HeldOut => "held-out",
            TaskSet::Validation => "validation",
        }
    }
}

impl std::str::FromStr for TaskSet {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "held-out" => Ok(TaskSet::HeldOut),
            "validation" => Ok(TaskSet::Validation),
            _ => Err(format!("unknown task set '{s}'; allowed: held-out, validation")),
        }
    }
}

/// A trained (or loaded) policy.
pub trait TrainedPolicy: Send {
    /// Its parameters.
    fn network(&self) -> &dyn Network;
    /// Its key in the checkpoint's `spec.json` (the network's shape is stored under it).
    fn checkpoint_key(&self) -> &'static str;
    /// The network's shape as JSON (what the lab serves beside the parameters).
    fn shape(&self) -> serde_json::Value {
        self.network().shape()
    }
    fn layout(&self) -> &[ParamSlot] {
        self.network().layout()
    }
    /// The flat parameters on the host.
    fn host_params(&self) -> Vec<f32> {
        self.network().host_params()
    }
    /// What the lab serves as `GET /api/runs/{id}/policy` (the browser's playground plays
    /// it): the env's name, the shape (with the observation normalizer, where the run had
    /// one), the parameters' layout and the flat parameters.
    fn policy_json(&self, env: &str) -> String {
        let layout: Vec<serde_json::Value> = self
            .layout()
            .iter()
            .map(|s| serde_json::json!({"name": s.name, "shape": s.shape, "offset": s.offset}))
            .collect();
        let (shape, params) = (self.shape(), self.host_params());
        serde_json::json!({"env": env, "shape": shape, "layout": layout, "params": params}).to_string()
    }
    /// Writes the checkpoint (`spec.json` and `policy.safetensors`).
    fn save(&self, dir: &Path, spec: &RunSpec) -> Result<()> {
        super::checkpoint::save(dir, spec, self.checkpoint_key(), self.shape(), self.network().flat())
    }
    /// The evaluation that goes into the run's report, when the workload has one.
    fn report_evaluation(&self, _seed: u64) -> Option<Evaluation> {
        None
    }
    /// `hotlab eval`: the policy over `episodes` episodes (or tries) from `seed`.
    fn evaluate(&self, episodes: usize, seed: u64) -> Result<Evaluation>;
    /// `hotlab eval --sample`: [`TrainedPolicy::evaluate`] with actions drawn from the
    /// policy's distribution rather than its most likely (or mean) ones.
    fn evaluate_sampled(&self, _episodes: usize, _seed: u64) -> Result<Evaluation> {
        anyhow::bail!("--sample: this workload's evaluation plays its own way (greedy, or both ways in one report); leave --sample out")
    }
    /// `hotlab eval --no-baselines`: [`TrainedPolicy::evaluate_on`] without the baselines
    /// the workload's evaluation plays beside the policy (its scores alone, nothing
    /// compared); None where it plays none.
    fn evaluate_alone(&self, _tasks: TaskSet, _episodes: usize, _seed: u64) -> Option<Result<Evaluation>> {
        None
    }
    /// [`TrainedPolicy::evaluate`] on `tasks`; a workload without tasks of its own has
    /// no validation set.
    fn evaluate_on(&self, tasks: TaskSet, episodes: usize, seed: u64) -> Result<Evaluation> {
        match tasks {
            TaskSet::HeldOut => self.evaluate(episodes, seed),
            TaskSet::Validation => anyhow::bail!(
                "--task-set validation: this workload has no validation tasks (morpho has; here every evaluation \
                 draws fresh episodes from --seed)"
            ),
        }
    }
}
