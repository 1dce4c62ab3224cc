//! `cartpole`: Gymnasium's CartPole-v1, to the letter (the scalar reference and the
//! struct-of-arrays batch are `hotlab_env::cartpole`). No settings of its own: its network is
//! `ppo.hidden`.
//!
//! A module of `hotlab-specs`, the registry (the lab and the browser read it too): it is
//! written in `hotlab-core`'s words, names the registry `hotlab_specs`, and links no libtorch.

use hotlab_core::advice::Recommendation;
use hotlab_core::choices::{Backend, Inference, Precision, UpdateMode};
use hotlab_core::knob::Knob;
use hotlab_core::preset::Preset;
use hotlab_core::profile::{Phase, Profile};
use hotlab_core::run::RunContext;
use hotlab_specs::Settings;
use serde::{Deserialize, Serialize};

/// CartPole has no settings of its own.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CartpoleSpec {}

impl Settings for CartpoleSpec {
    /// The shared policy (the MLP, or the CNN for images): `--rnn` gives it a recurrent core.
    const RECURRENT: bool = true;
    const KNOBS: &'static [Knob] = &[];

    fn gymnasium_id(&self) -> Option<String> {
        Some("CartPole-v1".into())
    }

    /// `[x, ẋ, θ, θ̇]` in f32.
    const OBS_BYTES: u64 = 4 * 4;
    const PRESETS: &'static [Preset<Self>] = &[
        Preset::new(
            "cleanrl",
            "CartPole with CleanRL's ppo.py settings: 4 envs × 128 steps, 500k steps; solves it (return 500) in a few seconds",
            |_, _| {},
        ),
        // The throughput run: many envs, the same update per sample.
        Preset::new(
            "wide",
            "CartPole at throughput: 1024 envs × 128 steps, 32 minibatches, 5M steps; solves it in about 10–30 s",
            |run, _| {
                run.envs = 1024;
                run.total_steps = 5_000_000;
                run.ppo.minibatches = 32;
            },
        ),
        // The GPU run: envs, policy and update on the device, short rollouts over many envs
        // (many samples per update), two large minibatches at a larger learning rate, the
        // rollout and the whole update each one CUDA graph. Chosen on an H100
        // (docs/gpu-results.md, 2026-11-27): of six settings it reached a mean return of 475
        // soonest; with the update captured it runs at about 4.9M steps/s and ends at 500.
        Preset::new(
            "gpu",
            "CartPole on one CUDA GPU: 4096 envs on the device, the rollout and the update CUDA graphs, 20M steps; return 500 in about 4 s on an H100; refused without CUDA",
            |run, _| {
                run.device = "cuda".into();
                run.envs = 4096;
                run.steps = 16;
                run.total_steps = 20_000_000;
                run.exec.backend = Backend::Device;
                run.exec.inference = Inference::Graph;
                run.exec.update = UpdateMode::Graph;
                run.ppo.minibatches = 2;
                run.ppo.lr = 0.0025;
            },
        ),
    ];

    fn recommend(&self, profile: &Profile, run: &RunContext, out: &mut Vec<Recommendation>) {
        // On a GPU the eager update dispatches every minibatch's ops from the host; captured
        // (the MLP's update is capturable), the whole update is one launch.
        let update =
            profile.share(Phase::UPDATE_FORWARD) + profile.share(Phase::BACKWARD) + profile.share(Phase::OPTIMIZER);
        if run.device.starts_with("cuda")
            && run.exec.update == UpdateMode::Eager
            && run.exec.precision != Precision::Fp16
            && run.telemetry.every == 0
            && update >= 0.20
        {
            let steps = run.ppo.epochs * run.ppo.minibatches;
            let signature = format!(
                "{:.0}% of wall in the update's {steps} minibatch steps, each dispatched op by op from the host",
                100.0 * update
            );
            out.push(Recommendation::new("--update graph", Phase::BACKWARD, update, signature));
        }
    }
}

/// What the viewer draws: the first few envs' states `[x, ẋ, θ, θ̇]` and the actions taken.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CartpoleFrame {
    pub states: Vec<[f32; 4]>,
    pub actions: Vec<i64>,
}
