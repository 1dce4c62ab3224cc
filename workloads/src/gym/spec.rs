//! `gym`: any Gymnasium env (`--env gym:ID`, or `gym:module:callable` for an env of the
//! user's own on the `PYTHONPATH`), stepped by Python worker processes through shared
//! memory. Its settings, their knobs and its frame.
//!
//! Compiled into `hotlab-shared` from the registry (the lab and the browser read it too):
//! `crate` here is that crate, and nothing here links libtorch.

use crate::knobs::{Knob, KnobKind::*};
use crate::spec::{Backend, SpecError};
use crate::workloads::{setting, EnvName, Settings};
use serde::{Deserialize, Serialize};

/// A Gymnasium env's settings: in JSON `{"gym": {"id": …, "python": …, "kwargs": {…}}}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GymSpec {
    /// A registered id (`CartPole-v1`, `Acrobot-v1`) or `module:callable` (a factory or an
    /// env class, importable from the `PYTHONPATH`). Flag `--gym-id`, or `--env gym:ID`.
    pub id: String,
    /// The interpreter that runs the envs (None: `$HOTLAB_PYTHON`, the active venv, the
    /// project's `.venv`, then `python3`). Flag `--python`.
    pub python: Option<String>,
    /// Keywords for `gymnasium.make` (or the callable), JSON only.
    pub kwargs: serde_json::Map<String, serde_json::Value>,
}

impl Default for GymSpec {
    fn default() -> Self {
        Self { id: "CartPole-v1".into(), python: None, kwargs: serde_json::Map::new() }
    }
}

impl GymSpec {
    /// `gym:ID` (a value of `--env`) as settings, or None for any other name.
    pub fn from_env_value(value: &str) -> Option<Self> {
        let id = value.strip_prefix("gym:")?;
        Some(Self { id: id.to_string(), ..Self::default() })
    }
}

impl Settings for GymSpec {
    const KNOBS: &'static [Knob] = &[
        setting(EnvName::Gym, "gym_id", "workload.gym.id", Text, "gym: a Gymnasium id (CartPole-v1) or module:callable")
            .about("a registered Gymnasium id (CartPole-v1, Acrobot-v1, MountainCar-v0) or module:callable for your own env on the PYTHONPATH; --env gym:ID says the same"),
        setting(
            EnvName::Gym,
            "python",
            "workload.gym.python",
            OptionalText,
            "gym: the Python interpreter with gymnasium (empty: the project's venv)",
        )
        .about("the Python interpreter that runs the envs, with gymnasium and your env's dependencies (default: $HOTLAB_PYTHON, the active venv, the project's .venv, then python3)"),
    ];
    /// The envs step in Python processes: one holding them all (`vectorized`) or several
    /// (`subprocess`); no scalar env lives in this process.
    const BACKENDS: &'static [Backend] = &[Backend::Subprocess, Backend::Vectorized];
    /// Unknown until the env is probed: room for 64 floats, for the memory estimate.
    const OBS_BYTES: u64 = 64 * 4;

    fn validate(&self) -> Result<(), SpecError> {
        let id = self.id.trim();
        if id.is_empty() {
            return Err(SpecError::new("gym_id", "is empty: give a Gymnasium id (CartPole-v1) or module:callable"));
        }
        if id.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(SpecError::new("gym_id", format!("'{id}' has spaces or control characters: an id has none")));
        }
        if self.python.as_deref().is_some_and(|p| p.trim().is_empty()) {
            return Err(SpecError::new("python", "is empty: give an interpreter's path, or leave it out"));
        }
        Ok(())
    }
}

/// What the viewer draws: the first few envs' observation vectors, the actions taken and
/// the returns of their episodes so far.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GymFrame {
    /// The env's id.
    pub id: String,
    pub obs: Vec<Vec<f32>>,
    pub actions: Vec<Vec<i64>>,
}
