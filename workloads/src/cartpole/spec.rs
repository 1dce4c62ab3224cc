//! `cartpole`: Gymnasium's CartPole-v1, to the letter (the scalar reference and the
//! struct-of-arrays batch are [`crate::cartpole`]). No settings of its own: its network is
//! `ppo.hidden`.
//!
//! Compiled into `hotlab-shared` from the registry (the lab and the browser read it too):
//! `crate` here is that crate, and nothing here links libtorch.

use crate::knobs::Knob;
use crate::spec::{PpoSpec, Preset, RunSpec};
use crate::workloads::Settings;
use serde::{Deserialize, Serialize};

/// CartPole has no settings of its own.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CartpoleSpec {}

impl Settings for CartpoleSpec {
    const KNOBS: &'static [Knob] = &[];
    /// `[x, ẋ, θ, θ̇]` in f32.
    const OBS_BYTES: u64 = 4 * 4;
    const PRESETS: &'static [Preset] = &[
        Preset::new(
            "cleanrl",
            "CartPole with CleanRL's ppo.py settings: 4 envs × 128 steps, 500k steps; solves it (return 500) in a few seconds",
            RunSpec::default,
        ),
        Preset::new(
            "wide",
            "CartPole at throughput: 1024 envs × 128 steps, 32 minibatches, 5M steps; solves it in about 10–30 s",
            wide,
        ),
    ];
}

/// The throughput run: many envs, the same update per sample.
fn wide() -> RunSpec {
    RunSpec {
        envs: 1024,
        steps: 128,
        total_steps: 5_000_000,
        ppo: PpoSpec { epochs: 4, minibatches: 32, ..PpoSpec::default() },
        ..RunSpec::default()
    }
}

/// What the viewer draws: the first few envs' states `[x, ẋ, θ, θ̇]` and the actions taken.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CartpoleFrame {
    pub states: Vec<[f32; 4]>,
    pub actions: Vec<i64>,
}
