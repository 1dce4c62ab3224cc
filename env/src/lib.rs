//! `hotlab-env`: what an env is to the trainer, and the reference env. This root is the
//! environment traits and their batch buffers; [`rng`] the per-env random streams (32-bit,
//! so a GPU shader can run the same ones); [`cartpole`] Gymnasium's CartPole-v1 as a scalar
//! f64 reference and an f32 struct-of-arrays batch with same-step autoreset.
//!
//! Environment traits and the buffers a batch of envs fills.
//!
//! Shapes are general from the start, because the scenarios after CartPole need them:
//! an observation is one or more named fields (f32, integer indices, or an image's bytes),
//! an action is one
//! index per categorical head and, for a Box action space, its real-valued components
//! ([`Actions`]), and an env may publish a mask of the allowed actions (its last field).
//! CartPole has one f32 field of 4, one head of 2, no real components and no mask.

pub mod cartpole;
pub mod rng;

use serde::{Deserialize, Serialize};

/// Element type of an observation field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FieldKind {
    /// Real-valued features.
    F32,
    /// Integer indices (for embedding lookups).
    I64,
    /// An image's pixels as bytes (uint8): kept as bytes until the policy reads them as
    /// features scaled by 1/255, once per batch.
    U8,
    /// A grid of flags (bool), one byte each (0 or 1), read as features 0.0 and 1.0.
    Bool,
}

impl FieldKind {
    /// Bytes of one element.
    pub fn size(self) -> usize {
        match self {
            FieldKind::F32 => 4,
            FieldKind::I64 => 8,
            FieldKind::U8 | FieldKind::Bool => 1,
        }
    }

    /// Whether the field is bytes (an image or a grid of flags).
    pub fn is_bytes(self) -> bool {
        matches!(self, FieldKind::U8 | FieldKind::Bool)
    }
}

/// One observation field: its name, per-env shape and element type.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldSpec {
    pub name: String,
    pub shape: Vec<usize>,
    pub kind: FieldKind,
    /// An index field's choices per element (a `Discrete` leaf's `n`, a `MultiDiscrete`'s
    /// `nvec`), where its values are categories a policy one-hot encodes; empty elsewhere.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<usize>,
}

impl FieldSpec {
    /// A field of `kind` elements in `shape` (no categories).
    pub fn new(name: impl Into<String>, shape: Vec<usize>, kind: FieldKind) -> Self {
        Self { name: name.into(), shape, kind, classes: Vec::new() }
    }

    /// Elements per env.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// Bytes per env.
    pub fn row_bytes(&self) -> usize {
        self.numel() * self.kind.size()
    }
}

/// One categorical action head with `n` choices.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeadSpec {
    pub name: String,
    pub n: usize,
}

/// What an env observes and accepts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvSpec {
    pub name: String,
    pub fields: Vec<FieldSpec>,
    pub heads: Vec<HeadSpec>,
    /// Whether the last field is a mask of allowed actions: `total_choices` integers per
    /// env, 1 = allowed (a field like any other, so every backend carries it).
    pub masked: bool,
    /// Real-valued action components per env (a Box action space, flattened): the policy
    /// samples them from a diagonal Gaussian head; 0 when the env has none.
    #[serde(default)]
    pub continuous: usize,
}

/// Most real-valued action components an env may have (MuJoCo's Humanoid has 17).
pub const MAX_CONTINUOUS: usize = 64;

/// One step's actions for a batch, env first: an index per categorical head (`index`,
/// `num_envs × heads`) and the real-valued components (`real`, `num_envs × continuous`,
/// empty for an env without them). What the policy sampled: an env with bounds clips its
/// own copy.
#[derive(Clone, Copy, Debug, Default)]
pub struct Actions<'a> {
    pub index: &'a [i64],
    pub real: &'a [f32],
}

impl<'a> Actions<'a> {
    /// Categorical actions only.
    pub fn index(index: &'a [i64]) -> Self {
        Self { index, real: &[] }
    }
}

impl EnvSpec {
    /// Total number of choices over all heads (the width of the policy's logits).
    pub fn total_choices(&self) -> usize {
        self.heads.iter().map(|h| h.n).sum()
    }
}

/// The data of one observation field for a batch of envs (row-major, env first).
#[derive(Clone, Debug, PartialEq)]
pub enum FieldData {
    F32(Vec<f32>),
    I64(Vec<i64>),
    /// Pixels, as the env gave them.
    U8(Vec<u8>),
    /// Flags, 0 or 1.
    Bool(Vec<u8>),
}

impl FieldData {
    pub fn zeros(spec: &FieldSpec, envs: usize) -> Self {
        match spec.kind {
            FieldKind::F32 => FieldData::F32(vec![0.0; spec.numel() * envs]),
            FieldKind::I64 => FieldData::I64(vec![0; spec.numel() * envs]),
            FieldKind::U8 => FieldData::U8(vec![0; spec.numel() * envs]),
            FieldKind::Bool => FieldData::Bool(vec![0; spec.numel() * envs]),
        }
    }

    pub fn as_f32(&self) -> Option<&[f32]> {
        match self {
            FieldData::F32(v) => Some(v),
            _ => None,
        }
    }

    /// The field as the policy's features: f32 as it is, pixels scaled by 1/255, flags as
    /// 0.0 and 1.0 (a copy, once per batch); None for indices.
    pub fn features(&self) -> Option<std::borrow::Cow<'_, [f32]>> {
        use std::borrow::Cow;
        match self {
            FieldData::F32(v) => Some(Cow::Borrowed(v)),
            FieldData::U8(v) => Some(Cow::Owned(v.iter().map(|&b| f32::from(b) * (1.0 / 255.0)).collect())),
            FieldData::Bool(v) => Some(Cow::Owned(v.iter().map(|&b| f32::from(b)).collect())),
            FieldData::I64(_) => None,
        }
    }

    /// Writes the field as features into `out` (its length), as [`FieldData::features`]
    /// reads them; false for indices.
    pub fn features_into(&self, out: &mut [f32]) -> bool {
        match self {
            FieldData::F32(v) => out.copy_from_slice(v),
            FieldData::U8(v) => out.iter_mut().zip(v).for_each(|(o, &b)| *o = f32::from(b) * (1.0 / 255.0)),
            FieldData::Bool(v) => out.iter_mut().zip(v).for_each(|(o, &b)| *o = f32::from(b)),
            FieldData::I64(_) => return false,
        }
        true
    }

    pub fn len(&self) -> usize {
        match self {
            FieldData::F32(v) => v.len(),
            FieldData::I64(v) => v.len(),
            FieldData::U8(v) | FieldData::Bool(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The data as bytes (native endianness), for copies that do not care about the kind.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            // SAFETY: f32 and i64 have no padding and every byte pattern is a valid u8.
            FieldData::F32(v) => unsafe { std::slice::from_raw_parts(v.as_ptr().cast(), v.len() * 4) },
            FieldData::I64(v) => unsafe { std::slice::from_raw_parts(v.as_ptr().cast(), v.len() * 8) },
            FieldData::U8(v) | FieldData::Bool(v) => v,
        }
    }

    /// The data as mutable bytes; any bytes written are a valid f32 or i64 (a flag field's
    /// writer keeps to 0 and 1).
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        match self {
            // SAFETY: as in `as_bytes`; every byte pattern is a valid f32 and i64.
            FieldData::F32(v) => unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast(), v.len() * 4) },
            FieldData::I64(v) => unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast(), v.len() * 8) },
            FieldData::U8(v) | FieldData::Bool(v) => v,
        }
    }
}

/// Observations of a batch of envs: every field (a masked env's last field is its mask).
#[derive(Clone, Debug, PartialEq)]
pub struct Observations {
    pub fields: Vec<FieldData>,
}

impl Observations {
    pub fn zeros(spec: &EnvSpec, envs: usize) -> Self {
        Self { fields: spec.fields.iter().map(|f| FieldData::zeros(f, envs)).collect() }
    }
}

/// How one episode ended, reported at the step it ended (before the autoreset).
#[derive(Clone, Debug, PartialEq)]
pub struct EpisodeEnd {
    /// Index of the env in its batch.
    pub env: usize,
    /// Sum of rewards over the episode.
    pub episode_return: f64,
    /// Steps in the episode.
    pub length: u32,
    /// True when the env reached a terminal state; false when it was truncated.
    pub terminated: bool,
}

/// What one step of a batch returns.
#[derive(Clone, Debug)]
pub struct StepBatch {
    /// Observations after the step; for envs that finished, the first of their next episode.
    pub obs: Observations,
    pub reward: Vec<f32>,
    pub terminated: Vec<bool>,
    pub truncated: Vec<bool>,
    /// Episodes that ended at this step.
    pub episodes: Vec<EpisodeEnd>,
    /// The last observation of each episode that ended, at its env's row (other rows are
    /// stale): `obs` already holds the first observation of the next episode there.
    pub final_obs: Observations,
}

impl StepBatch {
    pub fn new(spec: &EnvSpec, envs: usize) -> Self {
        Self {
            obs: Observations::zeros(spec, envs),
            reward: vec![0.0; envs],
            terminated: vec![false; envs],
            truncated: vec![false; envs],
            episodes: Vec::new(),
            final_obs: Observations::zeros(spec, envs),
        }
    }

    /// The envs whose step ended the learner's episode (terminated or truncated): the rows
    /// of `final_obs` that hold a final observation. A superset of `episodes`' envs: under
    /// Atari's episodic life a lost life ends the learner's episode, not the game's.
    pub fn ends(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.reward.len()).filter(|&e| self.terminated[e] || self.truncated[e])
    }

    /// Row `env` of f32 field `field` of the final observations.
    pub fn final_row(&self, field: usize, env: usize) -> &[f32] {
        let data = self.final_obs.fields[field].as_f32().expect("an f32 field");
        let width = data.len() / self.reward.len().max(1);
        &data[env * width..(env + 1) * width]
    }
}

/// Why a batch of envs could not step (a worker died, a worker hung, …).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct EnvError(pub String);

/// A batch of envs stepped together, with same-step autoreset.
///
/// `actions` holds `num_envs × heads` indices, env first. Backends that run envs
/// elsewhere (threads, processes) implement the same trait, so the trainer does not
/// know where its envs live.
pub trait BatchEnv: Send {
    fn spec(&self) -> &EnvSpec;
    fn num_envs(&self) -> usize;
    /// Resets every env and writes the first observations into `out`.
    fn reset(&mut self, out: &mut Observations) -> Result<(), EnvError>;
    /// Steps every env once; envs that finish are reset in the same step.
    fn step(&mut self, actions: &[i64], out: &mut StepBatch) -> Result<(), EnvError>;
    /// [`BatchEnv::step`] with real-valued components beside the indices, for an env whose
    /// spec has them (`continuous`); an env without them refuses any.
    fn step_actions(&mut self, actions: Actions<'_>, out: &mut StepBatch) -> Result<(), EnvError> {
        if !actions.real.is_empty() {
            return Err(EnvError(format!("env '{}' takes no real-valued actions", self.spec().name)));
        }
        self.step(actions.index, out)
    }
    /// The backend's own counts (IPC round-trips, spins, time waiting on workers).
    fn counters(&self) -> hotlab_core::counters::EnvCounters {
        hotlab_core::counters::EnvCounters::default()
    }
}

/// One env stepped on its own (the per-env loop of the seeds, and the references).
pub trait ScalarEnv: Send {
    fn spec(&self) -> &EnvSpec;
    /// Starts a new episode and writes its first observation (one row per field).
    fn reset(&mut self, obs: &mut [FieldData]);
    /// Applies one action per head; returns (reward, terminated, truncated) and writes
    /// the next observation.
    fn step(&mut self, action: &[i64], obs: &mut [FieldData]) -> (f64, bool, bool);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(kind: FieldKind, shape: Vec<usize>) -> FieldSpec {
        FieldSpec::new("obs", shape, kind)
    }

    /// Pixels are one byte each and read as value/255; flags as 0.0 and 1.0; floats as
    /// they are; indices are not features. Over shapes, and both ways of reading.
    #[test]
    fn bytes_are_one_byte_each_and_read_as_scaled_features() {
        for shape in [vec![1], vec![3, 5], vec![4, 7, 6], vec![84, 84, 4]] {
            let n: usize = shape.iter().product();
            for (kind, size) in [(FieldKind::U8, 1), (FieldKind::Bool, 1), (FieldKind::F32, 4), (FieldKind::I64, 8)] {
                let f = field(kind, shape.clone());
                assert_eq!(f.row_bytes(), n * size, "{kind:?} {shape:?}");
                let mut data = FieldData::zeros(&f, 2);
                assert_eq!((data.len(), data.as_bytes().len()), (2 * n, 2 * n * size));
                // Every byte value a pixel can have (a flag field only ever holds 0 and 1).
                let top = if kind == FieldKind::Bool { 2 } else { 256 };
                for (i, b) in data.as_bytes_mut().iter_mut().enumerate().filter(|_| kind.is_bytes()) {
                    *b = (i * 37 % top) as u8;
                }
                let want: Option<Vec<f32>> = match &data {
                    FieldData::U8(v) => Some(v.iter().map(|&b| b as f32 / 255.0).collect()),
                    FieldData::Bool(v) => Some(v.iter().map(|&b| b as f32).collect()),
                    FieldData::F32(v) => Some(v.clone()),
                    FieldData::I64(_) => None,
                };
                let got = data.features().map(|c| c.into_owned());
                assert_eq!(got.is_some(), want.is_some());
                if let (Some(got), Some(want)) = (got, want) {
                    for (g, w) in got.iter().zip(&want) {
                        assert!((g - w).abs() <= 1e-7, "{kind:?}: {g} against {w}");
                    }
                    let mut into = vec![f32::NAN; 2 * n];
                    assert!(data.features_into(&mut into));
                    assert_eq!(into, got);
                    if kind == FieldKind::U8 {
                        assert!(got.iter().all(|v| (0.0..=1.0).contains(v)));
                    }
                } else {
                    assert!(!data.features_into(&mut vec![0.0; 2 * n]));
                }
            }
        }
    }
}
