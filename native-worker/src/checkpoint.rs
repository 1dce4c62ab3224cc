//! Saving and loading a trained policy: `spec.json` (the run spec and the network's
//! shape) and `policy.safetensors` (the flat parameter vector, named `params`).
//!
//! A proof policy's checkpoint also names every token of its vocabulary: the indices mean
//! something only with the knowledge base they were built from, so loading rebuilds the
//! task from the spec and refuses a knowledge base that no longer gives the same tokens.

use crate::model::Model;
use crate::policy::{ActorCritic, Architecture};
use crate::proof_policy::{ProofArch, ProofNet};
use anyhow::{bail, Context, Result};
use hotlab_shared::proof::ProofTask;
use hotlab_shared::spec::RunSpec;
use serde::{Deserialize, Serialize};
use std::path::Path;
use tch::{Device, Tensor};

pub const SPEC_FILE: &str = "spec.json";
pub const WEIGHTS_FILE: &str = "policy.safetensors";

/// What `spec.json` holds: the spec and one of the two shapes.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CheckpointMeta {
    pub spec: RunSpec,
    /// The MLP actor-critic's shape.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub architecture: Option<Architecture>,
    /// The proof policy's shape and vocabulary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proof: Option<ProofMeta>,
}

/// The proof policy's shape and the token of every vocabulary index past the fixed ones
/// (predicates as `name/arity`, then constants).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProofMeta {
    pub arch: ProofArch,
    pub predicates: Vec<String>,
    pub constants: Vec<String>,
}

impl ProofMeta {
    pub fn of(task: &ProofTask, arch: &ProofArch) -> Self {
        Self {
            arch: arch.clone(),
            predicates: task.kb.preds.iter().map(|(name, arity)| format!("{name}/{arity}")).collect(),
            constants: task.kb.consts.clone(),
        }
    }
}

/// Writes `model` (with the proof task it was trained on, for a proof policy).
pub fn save(dir: &Path, spec: &RunSpec, model: &Model, task: Option<&ProofTask>) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let meta = match (model, task) {
        (Model::Mlp(net), _) => {
            CheckpointMeta { spec: spec.clone(), architecture: Some(net.arch.clone()), proof: None }
        }
        (Model::Proof(net), Some(task)) => {
            CheckpointMeta { spec: spec.clone(), architecture: None, proof: Some(ProofMeta::of(task, &net.arch)) }
        }
        (Model::Proof(_), None) => bail!("a proof policy's checkpoint needs its task (the vocabulary)"),
    };
    std::fs::write(dir.join(SPEC_FILE), serde_json::to_string_pretty(&meta)?)
        .with_context(|| format!("writing {}", dir.join(SPEC_FILE).display()))?;
    let host = model.flat().to_device(Device::Cpu);
    Tensor::write_safetensors(&[("params", &host)], dir.join(WEIGHTS_FILE))
        .with_context(|| format!("writing {}", dir.join(WEIGHTS_FILE).display()))?;
    Ok(())
}

/// A loaded checkpoint, on the CPU: the network and, for a proof policy, its task rebuilt
/// from the spec.
pub struct Loaded {
    pub meta: CheckpointMeta,
    pub model: Model,
    pub task: Option<std::sync::Arc<ProofTask>>,
}

/// Loads a checkpoint onto the CPU.
pub fn load(dir: &Path) -> Result<Loaded> {
    let spec_path = dir.join(SPEC_FILE);
    let text = std::fs::read_to_string(&spec_path)
        .with_context(|| format!("{} is not a checkpoint: cannot read {}", dir.display(), spec_path.display()))?;
    let meta: CheckpointMeta = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a valid checkpoint spec", spec_path.display()))?;
    let weights = dir.join(WEIGHTS_FILE);
    let tensors =
        Tensor::read_safetensors(&weights).with_context(|| format!("cannot read weights {}", weights.display()))?;
    let Some((_, flat)) = tensors.into_iter().find(|(name, _)| name == "params") else {
        bail!("{} has no tensor named 'params'", weights.display());
    };
    let expected = match (&meta.architecture, &meta.proof) {
        (Some(arch), None) => arch.num_params(),
        (None, Some(p)) => p.arch.layout().iter().map(|s| s.numel()).sum(),
        _ => bail!("{} must describe exactly one network ('architecture' or 'proof')", spec_path.display()),
    };
    if flat.size() != [expected] {
        bail!("{} holds {:?} parameters but spec.json describes {expected}", weights.display(), flat.size());
    }
    match (&meta.architecture, &meta.proof) {
        (Some(arch), _) => {
            let model = Model::Mlp(ActorCritic::from_flat(arch.clone(), flat));
            Ok(Loaded { meta, model, task: None })
        }
        (None, Some(p)) => {
            let s = &meta.spec;
            let task = ProofTask::load(&s.kb, s.queries.as_deref(), s.proof_depth)
                .map_err(|(field, m)| anyhow::anyhow!("rebuilding the checkpoint's proof task: {field}: {m}"))?;
            if ProofMeta::of(&task, &p.arch) != *p {
                bail!("the knowledge base '{}' no longer gives the vocabulary this policy was trained with", s.kb);
            }
            let model = Model::Proof(ProofNet::from_flat(p.arch.clone(), flat));
            Ok(Loaded { meta, model, task: Some(std::sync::Arc::new(task)) })
        }
        (None, None) => unreachable!("checked above"),
    }
}
