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
use crate::normalize::ObsNorm;
use crate::params::Network;
use crate::torch_threads;
use crate::workload::{Evaluation, Setup, TrainedPolicy};
use anyhow::{bail, Context, Result};
use hotlab_env::{EnvSpec, FieldKind};
use policy::{ActorCritic, Architecture};
use std::sync::Arc;
use tch::Device;

/// The key of the network's shape in a checkpoint's `spec.json`.
pub const CHECKPOINT_KEY: &str = "architecture";

/// The network shape for an env: one f32 observation field feeds the MLPs; the actor
/// scores each categorical head's choices and gives a Gaussian mean per real component.
pub fn architecture(spec: &EnvSpec, hidden: &[usize]) -> Result<Architecture> {
    match spec.fields.as_slice() {
        [field] if field.kind != FieldKind::I64 => Ok(Architecture {
            obs_dim: field.numel(),
            hidden: hidden.to_vec(),
            logits: spec.total_choices(),
            gaussian: spec.continuous,
        }),
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

/// A trained (or loaded) MLP, the statistics its inputs are normalized by (`--obs-norm`),
/// and the envs it plays.
pub struct TrainedMlp {
    pub net: ActorCritic,
    pub obs_norm: Option<ObsNorm>,
    pub env: Arc<dyn EnvMaker>,
}

/// Where a checkpoint keeps the observation normalizer, beside the network's shape.
const OBS_NORM_KEY: &str = "obs_norm";

impl TrainedMlp {
    /// A checkpoint's MLP: its shape from `spec.json`, its parameters.
    pub fn load(stored: checkpoint::Stored, env: Arc<dyn EnvMaker>) -> Result<Self> {
        let arch: Architecture = stored.shape(CHECKPOINT_KEY)?;
        // The shape the envs need, whatever a hand-edited file says.
        let want = architecture(env.vector_env(1, 0, 0).spec(), &arch.hidden)?;
        if (arch.obs_dim, arch.logits, arch.gaussian) != (want.obs_dim, want.logits, want.gaussian) {
            bail!(
                "the checkpoint's network reads {} observations, scores {} choices and gives {} real action components; the {} env has {}, {} and {}",
                arch.obs_dim,
                arch.logits,
                arch.gaussian,
                env.name(),
                want.obs_dim,
                want.logits,
                want.gaussian
            );
        }
        if arch.hidden.is_empty() || arch.hidden.len() > 8 || arch.hidden.iter().any(|&h| !(1..=4096).contains(&h)) {
            bail!("the checkpoint's hidden widths {:?} are not 1 to 8 layers of 1 to 4096", arch.hidden);
        }
        let obs_norm = read_obs_norm(&stored, CHECKPOINT_KEY, arch.obs_dim)?;
        let flat = stored.params(arch.num_params())?;
        Ok(Self { net: ActorCritic::from_flat(arch, flat), obs_norm, env })
    }

    fn play(&self, episodes: usize, seed: u64, play: eval::Play) -> Result<Evaluation> {
        eval::evaluate(self.env.as_ref(), &self.net, self.obs_norm.as_ref(), (episodes, seed), play)?.evaluation(play)
    }
}

/// A network's `shape` with the normalizer its inputs go through beside it (where the run
/// had one), as a checkpoint keeps them.
pub(crate) fn with_obs_norm(mut shape: serde_json::Value, norm: Option<&ObsNorm>) -> serde_json::Value {
    if let (Some(norm), Some(map)) = (norm, shape.as_object_mut()) {
        map.insert(OBS_NORM_KEY.into(), serde_json::to_value(norm).unwrap_or_default());
    }
    shape
}

/// The observation normalizer a checkpoint keeps beside the network's shape (under `key`;
/// None where the run had none), checked: one finite mean and non-negative variance per
/// observation, a positive count and clip.
pub(crate) fn read_obs_norm(stored: &checkpoint::Stored, key: &str, obs_dim: usize) -> Result<Option<ObsNorm>> {
    let Some(v) = stored.meta.get(key).and_then(|a| a.get(OBS_NORM_KEY)) else { return Ok(None) };
    let norm: ObsNorm = serde_json::from_value(v.clone())
        .map_err(|e| anyhow::anyhow!("the checkpoint's {key}.{OBS_NORM_KEY} is not valid: {e}"))?;
    let rms = &norm.rms;
    let fine = rms.mean.len() == obs_dim
        && rms.var.len() == obs_dim
        && rms.mean.iter().all(|m| m.is_finite())
        && rms.var.iter().all(|v| v.is_finite() && *v >= 0.0)
        && rms.count.is_finite()
        && rms.count > 0.0
        && norm.clip.is_finite()
        && norm.clip > 0.0;
    if !fine {
        bail!(
            "the checkpoint's {key}.{OBS_NORM_KEY} must hold {obs_dim} finite means and variances ≥ 0, a count > 0 and a clip > 0"
        );
    }
    Ok(Some(norm))
}

impl TrainedPolicy for TrainedMlp {
    fn network(&self) -> &dyn Network {
        &self.net
    }

    fn checkpoint_key(&self) -> &'static str {
        CHECKPOINT_KEY
    }

    /// The network's shape, with the normalizer its inputs go through.
    fn shape(&self) -> serde_json::Value {
        with_obs_norm(self.net.shape(), self.obs_norm.as_ref())
    }

    fn evaluate(&self, episodes: usize, seed: u64) -> Result<Evaluation> {
        self.play(episodes, seed, eval::Play::Greedy)
    }

    fn evaluate_sampled(&self, episodes: usize, seed: u64) -> Result<Evaluation> {
        self.play(episodes, seed, eval::Play::Sampled)
    }
}

/// A second thread for the update's critic and half of a large fused rollout step, on a
/// CPU with two cores or more ([`crate::cores`]: `OMP_NUM_THREADS` caps them) in fp32
/// (unless `--threads 1`); each side gets half of the libtorch threads.
pub fn update_helper(setup: &Setup<'_>) -> Result<Option<Arc<Helper>>> {
    let (spec, precision) = (setup.spec, &setup.precision);
    // `--threads N` asks for N; automatic, the cores there are to take.
    let cores = match spec.exec.threads {
        0 => crate::cores(),
        n => n,
    };
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
