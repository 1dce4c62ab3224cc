//! The run's settings that every workload shares, besides its own: PPO's hyperparameters,
//! where and how the hot path runs, gradient telemetry, and the context a workload's
//! report rules read. `RunSpec` (`hotlab-spec`) holds them with the workload's settings.

use crate::choices::{
    ActionSync, Backend, ConvLayout, Frames, Inference, Norm, Precision, Rnn, RnnUpdate, RolloutCopy, Transfer,
    UpdateMode, WaitMode,
};
use serde::{Deserialize, Serialize};

/// The run's settings around its workload's own: what a workload's report rules read
/// (`Settings::diagnosis`, `Settings::recommend`) besides its settings. It names no
/// workload, so those rules need no `RunSpec` (which holds every workload's settings).
#[derive(Clone, Copy, Debug)]
pub struct RunContext<'a> {
    /// `--device`, as given (`cpu`, `cuda:0`, `auto`).
    pub device: &'a str,
    /// Parallel environments.
    pub envs: usize,
    /// Steps per environment per rollout.
    pub steps: usize,
    pub ppo: &'a PpoSpec,
    pub exec: &'a ExecSpec,
    pub telemetry: &'a TelemetrySpec,
}

/// The run's part of a spec: everything beside its workload's own settings, as a preset
/// edits it (`Preset`'s `edit`). `RunSpec` (`hotlab-spec`) holds the same fields beside the
/// workload's, and its defaults are these with CartPole.
#[derive(Clone, Debug, PartialEq)]
pub struct RunPart {
    /// Parallel environments.
    pub envs: usize,
    /// Steps per environment per rollout.
    pub steps: usize,
    /// Environment steps over the whole run.
    pub total_steps: u64,
    /// Most seconds of training; 0 = no limit.
    pub seconds: f64,
    /// Seed of every random stream.
    pub seed: u64,
    /// `cpu`, `cuda`, `cuda:N` or `auto`.
    pub device: String,
    pub ppo: PpoSpec,
    pub exec: ExecSpec,
    pub telemetry: TelemetrySpec,
}

impl Default for RunPart {
    /// CleanRL's `ppo.py` run: 4 envs × 128 steps, 500k steps, seed 1, the first GPU if any.
    fn default() -> Self {
        Self {
            envs: 4,
            steps: 128,
            total_steps: 500_000,
            seconds: 0.0,
            seed: 1,
            device: "auto".into(),
            ppo: PpoSpec::default(),
            exec: ExecSpec::default(),
            telemetry: TelemetrySpec::default(),
        }
    }
}

/// PPO's hyperparameters (CleanRL's `ppo.py` defaults for CartPole).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PpoSpec {
    /// Passes over each rollout in the update.
    pub epochs: usize,
    /// Minibatches per epoch; must divide `envs × steps`.
    pub minibatches: usize,
    /// Adam learning rate.
    pub lr: f64,
    /// Anneal the learning rate linearly to 0 over the run.
    pub anneal_lr: bool,
    /// Discount factor γ.
    pub gamma: f64,
    /// GAE λ.
    pub gae_lambda: f64,
    /// PPO clip range for the ratio and the value function.
    pub clip: f64,
    /// Entropy bonus coefficient.
    pub ent_coef: f64,
    /// Value loss coefficient.
    pub vf_coef: f64,
    /// Global gradient norm clip.
    pub max_grad_norm: f64,
    /// Hidden layer widths of the actor and of the critic (each its own tanh MLP).
    pub hidden: Vec<usize>,
    /// Observations normalized by their running mean and variance, then clipped at ±10
    /// (Gymnasium's `NormalizeObservation`, run by the trainer on each step's batch).
    pub obs_norm: Norm,
    /// Rewards divided by the running std of the discounted return, then clipped at ±10
    /// (Gymnasium's `NormalizeReward`, run by the trainer on each step's batch).
    pub reward_norm: Norm,
    /// A recurrent core between the encoder and the heads (`none`, `lstm`, `gru`): its
    /// state is reset where an episode starts, and the update's minibatches are whole envs.
    pub rnn: Rnn,
    /// The recurrent core's width (its state's size).
    pub rnn_width: usize,
}

impl Default for PpoSpec {
    fn default() -> Self {
        Self {
            epochs: 4,
            minibatches: 4,
            lr: 2.5e-4,
            anneal_lr: true,
            gamma: 0.99,
            gae_lambda: 0.95,
            clip: 0.2,
            ent_coef: 0.01,
            vf_coef: 0.5,
            max_grad_norm: 0.5,
            hidden: vec![64, 64],
            obs_norm: Norm::Auto,
            reward_norm: Norm::Auto,
            rnn: Rnn::None,
            rnn_width: 128,
        }
    }
}

/// Where and how the hot path runs: each field a knob of the syllabus.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ExecSpec {
    /// Where and how the envs are stepped.
    pub backend: Backend,
    /// Worker threads or processes for `threads` and `subprocess`; 0 = one per core.
    pub workers: usize,
    /// How the trainer waits for `subprocess` workers.
    pub wait: WaitMode,
    /// Seconds a `subprocess` worker may stay silent during one step or reset before the
    /// run fails naming it (a worker alive but stuck would otherwise hang the run).
    pub worker_timeout_s: f64,
    /// How observations reach the device for an eager forward.
    pub transfer: Transfer,
    /// How an eager forward's actions are read back to the host.
    pub action_sync: ActionSync,
    /// How the rollout reaches the device for the update: `kept` (an eager forward's
    /// inputs and actions stay where it put them), `whole` (a copy per field) or `per_step`
    /// (a copy per step and field, concatenated there).
    pub rollout_copy: RolloutCopy,
    /// How an image observation reaches the device (the CNN policy's): `bytes` (converted
    /// there by the encoder) or `float` (converted to float32 on the host first).
    pub frames: Frames,
    /// How the CNN's convolutions lay out their images in memory: `nchw`, `nhwc`
    /// (channels last), or `auto` (nhwc on the CPU, nchw on a GPU).
    pub conv_layout: ConvLayout,
    /// How the rollout's policy forward runs: `eager` (libtorch ops), `fused` (a native
    /// forward; on CUDA with `--backend device`, a fused env kernel) or `graph` (CUDA graph replay).
    pub inference: Inference,
    /// How a recurrent policy's update runs its core over each env's segment: `sequence`
    /// (one call per stretch between episode starts) or `stepped` (a cell call per step).
    pub rnn_update: RnnUpdate,
    /// How the PPO update runs: `eager` (op by op from the host) or `graph` (CUDA: the
    /// whole update captured once as a CUDA graph and replayed per iteration).
    pub update: UpdateMode,
    /// libtorch intra-op threads; 0 = automatic (for the MLP, 1 for minibatches under 1024 rows or beside env worker threads or processes, else one per core; for the CNN one per core; `OMP_NUM_THREADS`, where set, caps "one per core").
    pub threads: usize,
    /// The update's matmul precision: `fp32`, `fp16` (CUDA, with a dynamic loss scaler),
    /// `bf16`, or `auto` (bf16 on CUDA compute capability ≥ 8.0, ROCm and AVX512-BF16 CPUs; fp16 on older
    /// CUDA GPUs; fp32 elsewhere). Master weights stay fp32.
    pub precision: Precision,
}

impl Default for ExecSpec {
    fn default() -> Self {
        Self {
            backend: Backend::Vectorized,
            workers: 0,
            wait: WaitMode::Block,
            worker_timeout_s: 60.0,
            transfer: Transfer::Packed,
            action_sync: ActionSync::Stacked,
            rollout_copy: RolloutCopy::Kept,
            frames: Frames::Bytes,
            conv_layout: ConvLayout::Auto,
            inference: Inference::Fused,
            rnn_update: RnnUpdate::Sequence,
            update: UpdateMode::Eager,
            threads: 0,
            precision: Precision::Fp32,
        }
    }
}

/// Gradient telemetry.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetrySpec {
    /// Gradient norms (global and per layer) every K updates, published off the hot path; 0 = off.
    pub every: u64,
}

/// Upper bounds, so a typo cannot ask for a terabyte of rollout.
pub const MAX_ENVS: usize = 1 << 20;
pub const MAX_STEPS: usize = 1 << 16;
