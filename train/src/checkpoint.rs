//! Checkpoint files: `spec.json` (the run spec and the network's shape under the
//! workload's key: `architecture` for the MLP, `proof` for the proof policy) and
//! `policy.safetensors` (the flat parameter vector, named `params`). What the shape means
//! is the workload's business; this module only writes and reads the files.

use anyhow::{bail, Context, Result};
use hotlab_spec::RunSpec;
use serde::de::DeserializeOwned;
use std::path::{Path, PathBuf};
use tch::{Device, Tensor};

pub const SPEC_FILE: &str = "spec.json";
pub const WEIGHTS_FILE: &str = "policy.safetensors";

/// Writes `spec.json` with `shape` under `key`, and the flat parameters.
pub fn save(dir: &Path, spec: &RunSpec, key: &str, shape: serde_json::Value, flat: &Tensor) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut meta = serde_json::Map::new();
    meta.insert("spec".into(), serde_json::to_value(spec)?);
    meta.insert(key.into(), shape);
    std::fs::write(dir.join(SPEC_FILE), serde_json::to_string_pretty(&meta)?)
        .with_context(|| format!("writing {}", dir.join(SPEC_FILE).display()))?;
    let host = flat.to_device(Device::Cpu);
    Tensor::write_safetensors(&[("params", &host)], dir.join(WEIGHTS_FILE))
        .with_context(|| format!("writing {}", dir.join(WEIGHTS_FILE).display()))?;
    Ok(())
}

/// A checkpoint as read from its directory, on the CPU.
pub struct Stored {
    pub spec: RunSpec,
    /// Everything in `spec.json` beside the spec: the network's shape under its key.
    pub meta: serde_json::Map<String, serde_json::Value>,
    flat: Tensor,
    spec_path: PathBuf,
    weights_path: PathBuf,
}

impl Stored {
    /// The network's shape under `key`.
    pub fn shape<T: DeserializeOwned>(&self, key: &str) -> Result<T> {
        let Some(v) = self.meta.get(key) else {
            let found: Vec<&str> = self.meta.keys().map(String::as_str).collect();
            bail!(
                "{} describes no '{key}' network (the {} workload's); it has: {}",
                self.spec_path.display(),
                self.spec.env().as_str(),
                found.join(", ")
            );
        };
        serde_json::from_value(v.clone()).with_context(|| format!("{}: '{key}' is not valid", self.spec_path.display()))
    }

    /// The flat parameters, checked to number `expected`.
    pub fn params(self, expected: i64) -> Result<Tensor> {
        if self.flat.size() != [expected] {
            bail!(
                "{} holds {:?} parameters but spec.json describes {expected}",
                self.weights_path.display(),
                self.flat.size()
            );
        }
        Ok(self.flat)
    }
}

/// Reads a checkpoint directory.
pub fn read(dir: &Path) -> Result<Stored> {
    let spec_path = dir.join(SPEC_FILE);
    let text = std::fs::read_to_string(&spec_path)
        .with_context(|| format!("{} is not a checkpoint: cannot read {}", dir.display(), spec_path.display()))?;
    let mut meta: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a valid checkpoint spec", spec_path.display()))?;
    let spec = meta.remove("spec").with_context(|| format!("{} has no 'spec'", spec_path.display()))?;
    let spec: RunSpec = serde_json::from_value(spec)
        .with_context(|| format!("{} is not a valid checkpoint spec", spec_path.display()))?;
    // A hand-edited spec is checked as a launched one is, before anything is built from it.
    if let Err(e) = spec.validate() {
        bail!("{} holds a spec that is not valid: {e}", spec_path.display());
    }
    let weights_path = dir.join(WEIGHTS_FILE);
    let tensors = Tensor::read_safetensors(&weights_path)
        .with_context(|| format!("cannot read weights {}", weights_path.display()))?;
    let Some((_, flat)) = tensors.into_iter().find(|(name, _)| name == "params") else {
        bail!("{} has no tensor named 'params'", weights_path.display());
    };
    Ok(Stored { spec, meta, flat, spec_path, weights_path })
}
