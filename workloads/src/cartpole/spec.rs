//! `cartpole`: Gymnasium's CartPole-v1, to the letter (the scalar reference and the
//! struct-of-arrays batch are [`crate::cartpole`]). No settings of its own: its network is
//! `ppo.hidden`.
//!
//! Compiled into `hotlab-shared` from the registry (the lab and the browser read it too):
//! `crate` here is that crate, and nothing here links libtorch.

use crate::knobs::Knob;
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
}

/// What the viewer draws: the first few envs' states `[x, ẋ, θ, θ̇]` and the actions taken.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CartpoleFrame {
    pub states: Vec<[f32; 4]>,
    pub actions: Vec<i64>,
}
