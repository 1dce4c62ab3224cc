//! `dreamer` (seed 004, issue 22): a DreamerV3-style learner on CartPole drawn to 64×64
//! frames. Not PPO: it implements [`Learner`](hotlab_train::workload::Learner) itself, stepping its envs into a replay
//! buffer and training a world model and an actor-critic in imagination from it.
//!
//! - [`render`](crate::dreamer::render): the frames, drawn from the batch env's state beside the learner;
//! - [`replay`](crate::dreamer::replay): the replay buffer (`--replay host|pinned|device`);
//! - [`layers`](hotlab_train::models::layers): the layers over one flat parameter tensor per network;
//! - [`world`](crate::dreamer::world): encoder, RSSM, decoder, heads and the world model's loss
//!   (`--encoder per_step|batched`);
//! - [`behavior`](crate::dreamer::behavior): imagination, λ-returns, the actor and the critic;
//! - [`collect`](crate::dreamer::collect): env steps into the buffer, the actor acting on the model's state;
//! - [`step`](crate::dreamer::step): one train step, the loss figures as `--loss-read` says, seed 004's split;
//! - [`captured`](crate::dreamer::captured): `--update graph`, the train step on static buffers replayed as a CUDA graph;
//! - [`learner`](crate::dreamer::learner): an iteration: env steps, then the train steps the ratio asks for;
//! - [`view`](crate::dreamer::view): the lab's frame: the frame seen, its reconstruction, frames imagined;
//! - [`eval`](crate::dreamer::eval): the actor against random actions;
//! - [`bench`](mod@bench): `hotlab bench batch`, the train step at each batch size.
//!
//! Sizes at `--size 1` (a CPU): encoder channels 8-16-32-64 (4×4×64 = 1,024 features),
//! GRU 128, 8 categoricals of 8 classes, MLPs 128 wide; `--size k` multiplies the widths
//! by k (latents up to 32 × 32).

pub mod behavior;
pub mod bench;
pub mod captured;
pub mod collect;
pub mod eval;
mod fill;
pub mod gpu;
pub mod learner;
pub mod open_loop;
pub mod render;
pub mod replay;
pub mod step;
pub mod view;
pub mod world;

use anyhow::{bail, Result};
use behavior::Behavior;
use hotlab_env::{Actions, BatchEnv, Observations, ScalarEnv};
use hotlab_protocol::Frame;
use hotlab_spec::{RunSpec, SpecError};
use hotlab_specs::dreamer::ReplayAt;
use hotlab_specs::DreamerSpec;
use hotlab_specs::WorkloadSpec;
use hotlab_train::checkpoint::Stored;
use hotlab_train::error::RunError;
use hotlab_train::exec::{worker_flags, EnvMaker};
use hotlab_train::gpu_check::Target;
use hotlab_train::params::{Network, ParamSlot};
use hotlab_train::workload::{Evaluation, Learner, Setup, TrainedPolicy, Workload};
use std::sync::Arc;
use tch::{Device, Tensor};
use world::{Dims, WorldModel};

/// The key of the networks' sizes in a checkpoint's `spec.json`.
pub const CHECKPOINT_KEY: &str = "dreamer";
/// Episodes of the run report's evaluation.
const REPORT_EPISODES: usize = 8;

/// The workload: its settings (its envs are CartPole's).
pub struct Dreamer {
    pub settings: DreamerSpec,
}

impl Dreamer {
    pub fn load(settings: &DreamerSpec) -> Result<Self, SpecError> {
        hotlab_specs::Settings::validate(settings)?;
        Ok(Self { settings: settings.clone() })
    }

    pub fn dims(&self) -> Dims {
        Dims::new(self.settings.size)
    }
}

impl EnvMaker for Dreamer {
    fn name(&self) -> &'static str {
        "dreamer"
    }

    fn vector_env(&self, count: usize, seed: u64, first: u64) -> Box<dyn BatchEnv> {
        crate::cartpole::CartPole.vector_env(count, seed, first)
    }

    fn scalar_env(&self, seed: u64, index: u64) -> Box<dyn ScalarEnv> {
        crate::cartpole::CartPole.scalar_env(seed, index)
    }

    fn worker_flags(&self) -> (Vec<String>, Option<String>) {
        (worker_flags(WorkloadSpec::Dreamer(self.settings.clone())), None)
    }
}

/// The registry's entry: this workload for a run (a bad setting is refused, named).
impl crate::Native for DreamerSpec {
    fn load(settings: &Self, _spec: &RunSpec) -> Result<Arc<dyn Workload>, SpecError> {
        Ok(Arc::new(Dreamer::load(settings)?))
    }

    fn gpu_checks(target: &Target) -> Vec<serde_json::Value> {
        target.cuda().map(|_| gpu::checks()).unwrap_or_default()
    }

    fn gpu_benches(target: &Target, _max_log2_envs: u32) -> Vec<(&'static str, serde_json::Value)> {
        match target.cuda() {
            Some(_) => vec![
                ("dreamer_batch", gpu::bench()),
                ("dreamer_batch_precision", gpu::bench_precisions()),
                ("dreamer_update_graph", gpu::bench_graph()),
            ],
            None => Vec::new(),
        }
    }
}

impl Workload for Dreamer {
    /// None: the learner draws its own frames ([`view`]): what the world model sees,
    /// reconstructs and imagines, which the observations alone do not show.
    fn frame(&self, _step: u64, _obs: &Observations, _actions: Actions<'_>) -> Option<Frame> {
        None
    }

    fn learner(self: Arc<Self>, setup: &mut Setup<'_>) -> Result<Box<dyn Learner>, RunError> {
        if self.settings.replay == ReplayAt::Pinned && setup.device == Device::Cpu {
            let message = "pinned: page-locked memory speeds copies to a GPU, and this run's device is the CPU; \
                           allowed here: host, device";
            return Err(SpecError::of(&DreamerSpec::REPLAY, message).into());
        }
        Ok(Box::new(learner::DreamerLearner::new(setup, self)?))
    }

    fn load_policy(self: Arc<Self>, stored: Stored) -> Result<Box<dyn TrainedPolicy>> {
        let dims: Dims = stored.shape(CHECKPOINT_KEY)?;
        if dims != self.dims() {
            bail!("the checkpoint's networks ({dims:?}) are not the ones its spec's --size makes ({:?})", self.dims());
        }
        let world = WorldModel::new(dims, Device::Cpu, tch::Kind::Float);
        let behavior = Behavior::new(&dims, Device::Cpu, tch::Kind::Float);
        let flat = stored.params(joint_numel(&world, &behavior))?;
        let mut trained = TrainedDreamer::new(world, behavior, self);
        trained.load(&flat);
        Ok(Box::new(trained))
    }
}

/// Parameters of the three networks together: the world model, the actor and the critic.
pub(crate) fn joint_numel(world: &WorldModel, behavior: &Behavior) -> i64 {
    world.p.numel() + behavior.actor.numel() + behavior.critic.numel()
}

/// Every network's parameters, world model first, as one layout.
fn joint_layout(world: &WorldModel, behavior: &Behavior) -> Vec<ParamSlot> {
    let mut offset = 0;
    let mut out = Vec::new();
    for (net, params) in [("world", &world.p), ("actor", &behavior.actor), ("critic", &behavior.critic)] {
        for slot in &params.layout {
            out.push(ParamSlot {
                name: format!("{net}.{}", slot.name),
                shape: slot.shape.clone(),
                offset: offset + slot.offset,
            });
        }
        offset += params.numel();
    }
    out
}

/// A trained (or loaded) world model and actor-critic.
pub struct TrainedDreamer {
    world: WorldModel,
    behavior: Behavior,
    layout: Vec<ParamSlot>,
    /// The three networks' parameters as one flat vector on the host, in `layout`'s order
    /// (what the lab serves and a checkpoint stores).
    joint: Tensor,
    workload: Arc<Dreamer>,
}

impl TrainedDreamer {
    pub fn new(world: WorldModel, behavior: Behavior, workload: Arc<Dreamer>) -> Self {
        let layout = joint_layout(&world, &behavior);
        let mut trained = Self { world, behavior, layout, joint: Tensor::new(), workload };
        trained.joint = trained.joint();
        trained
    }

    fn flats(&self) -> [&Tensor; 3] {
        [&self.world.p.flat, &self.behavior.actor.flat, &self.behavior.critic.flat]
    }

    /// The three networks' parameters from one flat vector in [`joint_layout`]'s order.
    fn load(&mut self, flat: &Tensor) {
        let mut offset = 0;
        tch::no_grad(|| {
            for net in [&mut self.world.p, &mut self.behavior.actor, &mut self.behavior.critic] {
                let n = net.numel();
                net.flat.copy_(&flat.narrow(0, offset, n));
                offset += n;
            }
        });
        self.joint = self.joint();
    }

    fn joint(&self) -> Tensor {
        Tensor::cat(&self.flats().map(|t| t.to_device(Device::Cpu)), 0)
    }

    fn evaluation(&self, episodes: usize, seed: u64) -> Evaluation {
        let e = eval::evaluate(&self.world, &self.behavior, episodes, seed);
        Evaluation { key: CHECKPOINT_KEY, json: serde_json::to_value(&e).unwrap_or_default(), summary: e.summary() }
    }
}

/// The world model, the actor and the critic as one network: their joint parameters.
impl Network for TrainedDreamer {
    fn flat(&self) -> &Tensor {
        &self.joint
    }

    fn layout(&self) -> &[ParamSlot] {
        &self.layout
    }

    fn shape(&self) -> serde_json::Value {
        serde_json::to_value(self.workload.dims()).unwrap_or_default()
    }
}

impl TrainedPolicy for TrainedDreamer {
    fn network(&self) -> &dyn Network {
        self
    }

    fn checkpoint_key(&self) -> &'static str {
        CHECKPOINT_KEY
    }

    fn report_evaluation(&self, seed: u64) -> Option<Evaluation> {
        Some(self.evaluation(REPORT_EPISODES, seed))
    }

    /// The actor and random actions over `episodes` episodes (at most 1000).
    fn evaluate(&self, episodes: usize, seed: u64) -> Result<Evaluation> {
        Ok(self.evaluation(episodes.clamp(1, 1000), seed))
    }
}
