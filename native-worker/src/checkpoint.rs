//! Saving and loading a trained policy: `spec.json` (the run spec and the network's
//! shape) and `policy.safetensors` (the flat parameter vector, named `params`).

use crate::policy::{ActorCritic, Architecture};
use anyhow::{bail, Context, Result};
use hotlab_shared::spec::RunSpec;
use serde::{Deserialize, Serialize};
use std::path::Path;
use tch::{Device, Tensor};

pub const SPEC_FILE: &str = "spec.json";
pub const WEIGHTS_FILE: &str = "policy.safetensors";

/// What `spec.json` holds.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CheckpointMeta {
    pub spec: RunSpec,
    pub architecture: Architecture,
}

pub fn save(dir: &Path, spec: &RunSpec, net: &ActorCritic) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let meta = CheckpointMeta { spec: spec.clone(), architecture: net.arch.clone() };
    std::fs::write(dir.join(SPEC_FILE), serde_json::to_string_pretty(&meta)?)
        .with_context(|| format!("writing {}", dir.join(SPEC_FILE).display()))?;
    let host = net.flat.to_device(Device::Cpu);
    Tensor::write_safetensors(&[("params", &host)], dir.join(WEIGHTS_FILE))
        .with_context(|| format!("writing {}", dir.join(WEIGHTS_FILE).display()))?;
    Ok(())
}

/// Loads a checkpoint onto the CPU.
pub fn load(dir: &Path) -> Result<(CheckpointMeta, ActorCritic)> {
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
    if flat.size() != [meta.architecture.num_params()] {
        bail!(
            "{} holds {:?} parameters but spec.json describes {}",
            weights.display(),
            flat.size(),
            meta.architecture.num_params()
        );
    }
    let net = ActorCritic::from_flat(meta.architecture.clone(), flat);
    Ok((meta, net))
}
