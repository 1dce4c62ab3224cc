//! The MLP actor-critic (CleanRL's `Agent`: two separate tanh MLPs) for any workload whose
//! observation is one f32 vector: as libtorch ops, as a native forward, with the PPO
//! loss's gradient written out by hand.
//!
//! - [`policy`]: the networks, their parameters in one flat tensor;
//! - [`host`]: the native forward used by `--inference fused` and evaluation;
//! - [`actor`]: the rollout's forward (eager or fused);
//! - [`update`]: PPO's minibatch gradient ([`grad`] on libtorch, [`grad_host`] on the CPU
//!   in fp32 with the critic on a helper thread);
//! - [`eval`]: the greedy policy over fresh envs;
//! - [`learner`]: PPO with it, for any such workload.

pub mod actor;
pub mod eval;
pub mod grad;
pub mod grad_host;
pub mod host;
pub mod learner;
pub mod policy;
pub mod update;

use crate::checkpoint;
use crate::exec::helper::Helper;
use crate::exec::EnvMaker;
use crate::params::Network;
use crate::torch_threads;
use crate::workload::{Evaluation, Setup, TrainedPolicy};
use anyhow::{bail, Context, Result};
use hotlab_shared::env::{EnvSpec, FieldKind};
use policy::{ActorCritic, Architecture};
use std::sync::Arc;
use tch::Device;

/// The key of the network's shape in a checkpoint's `spec.json`.
pub const CHECKPOINT_KEY: &str = "architecture";

/// The network shape for an env: one f32 observation field feeds the MLPs.
pub fn architecture(spec: &EnvSpec, hidden: &[usize]) -> Result<Architecture> {
    match spec.fields.as_slice() {
        [field] if field.kind == FieldKind::F32 => {
            Ok(Architecture { obs_dim: field.numel(), hidden: hidden.to_vec(), logits: spec.total_choices() })
        }
        _ => bail!("env '{}' has observation fields the MLP policy cannot read", spec.name),
    }
}

/// The MLP as PPO trains it: the network, the helper thread its CPU update and fused
/// rollout share (two cores or more, fp32), and the envs it plays (for evaluation).
pub struct MlpAgent {
    pub net: ActorCritic,
    pub helper: Option<Arc<Helper>>,
    pub env: Arc<dyn EnvMaker>,
}

/// A trained (or loaded) MLP and the envs it plays.
pub struct TrainedMlp {
    pub net: ActorCritic,
    pub env: Arc<dyn EnvMaker>,
}

impl TrainedMlp {
    /// A checkpoint's MLP: its shape from `spec.json`, its parameters.
    pub fn load(stored: checkpoint::Stored, env: Arc<dyn EnvMaker>) -> Result<Self> {
        let arch: Architecture = stored.shape(CHECKPOINT_KEY)?;
        // The shape the envs need, whatever a hand-edited file says.
        let want = architecture(env.vector_env(1, 0, 0).spec(), &arch.hidden)?;
        if arch.obs_dim != want.obs_dim || arch.logits != want.logits {
            bail!(
                "the checkpoint's network reads {} observations and scores {} choices; the {} env has {} and {}",
                arch.obs_dim,
                arch.logits,
                env.name(),
                want.obs_dim,
                want.logits
            );
        }
        if arch.hidden.is_empty() || arch.hidden.len() > 8 || arch.hidden.iter().any(|&h| !(1..=4096).contains(&h)) {
            bail!("the checkpoint's hidden widths {:?} are not 1 to 8 layers of 1 to 4096", arch.hidden);
        }
        let flat = stored.params(arch.num_params())?;
        Ok(Self { net: ActorCritic::from_flat(arch, flat), env })
    }
}

impl TrainedPolicy for TrainedMlp {
    fn network(&self) -> &dyn Network {
        &self.net
    }

    fn checkpoint_key(&self) -> &'static str {
        CHECKPOINT_KEY
    }

    fn evaluate(&self, episodes: usize, seed: u64) -> Result<Evaluation> {
        let report = eval::evaluate(self.env.as_ref(), &self.net, episodes, seed)?;
        let summary = format!(
            "{} greedy over {} episodes: mean return {:.1} (min {:.0}, max {:.0})",
            report.env, report.episodes, report.mean_return, report.min_return, report.max_return
        );
        Ok(Evaluation { key: "eval", json: serde_json::to_value(&report)?, summary })
    }
}

/// A second thread for the update's critic and half of a large fused rollout step, on a
/// CPU with two cores or more in fp32 (unless `--threads 1`); each side gets half of the
/// libtorch threads.
pub fn update_helper(setup: &Setup<'_>) -> Result<Option<Arc<Helper>>> {
    let (spec, precision) = (setup.spec, &setup.precision);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let host_path = setup.device == Device::Cpu && precision.kind == tch::Kind::Float && precision.scaler.is_none();
    if !host_path || spec.exec.threads == 1 || cores < 2 {
        return Ok(None);
    }
    let per_side = (torch_threads(spec) / 2).max(1) as i32;
    tch::set_num_threads(per_side);
    let helper =
        Helper::new("hotlab-helper", move || tch::set_num_threads(per_side)).context("starting the helper thread")?;
    Ok(Some(Arc::new(helper)))
}
