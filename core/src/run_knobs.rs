//! The run's own knobs (every workload's, besides its own settings): the spec's fields
//! as the CLI's flags and the launch form's fields name them, in the order the launch
//! panel shows them. The whole table (`hotlab_spec::knobs::KNOBS`) is `env`, then each
//! workload's settings, then these.

use crate::choices::{
    ActionSync, Backend, ConvLayout, Frames, Inference, Norm, Precision, Rnn, RnnUpdate, RolloutCopy, Transfer,
    UpdateMode, WaitMode,
};
use crate::knob::{Knob, KnobKind};
use crate::run::{MAX_ENVS, MAX_STEPS};

/// The groups, in order (the syllabus's knobs each have their own).
pub const GROUPS: &[&str] = &[
    "Scenario",
    "Envs and steps",
    "Backend, workers and wait",
    "Transfer",
    "Action read-back",
    "Inference",
    "Precision",
    "PPO hyperparameters",
];

/// A run knob (no workload's own).
pub const fn knob(
    name: &'static str,
    path: &'static str,
    group: &'static str,
    kind: KnobKind,
    help: &'static str,
) -> Knob {
    Knob::new(name, path, group, kind, help)
}

use KnobKind::*;

pub const DEVICE: Knob = knob("device", "device", "Scenario", Text, "cpu, cuda, cuda:N or auto")
    .about("cpu, cuda, cuda:N or auto (a GPU if there is one)");

pub const SEED: Knob = knob("seed", "seed", "Scenario", Int, "seed of every random stream");

pub const ENVS: Knob = knob("envs", "envs", "Envs and steps", Int, "parallel environments").range(1.0, MAX_ENVS as f64);

pub const STEPS: Knob = knob("steps", "steps", "Envs and steps", Int, "steps per env per rollout")
    .range(1.0, MAX_STEPS as f64)
    .about("Steps per environment per rollout");

pub const TOTAL_STEPS: Knob = knob("total_steps", "total_steps", "Envs and steps", Int, "env steps over the whole run")
    .about("Environment steps over the whole run");

pub const SECONDS: Knob = knob(
        "seconds",
        "seconds",
        "Envs and steps",
        Float,
        "most seconds of training; 0 = no limit (total_steps ends the run)",
    )
    .range(0.0, 30.0 * 86_400.0)
    .about("Most seconds of training (rollouts and updates): the run ends after the update in progress once they are spent; 0 = no limit");

pub const BACKEND: Knob = knob(
    "backend",
    "exec.backend",
    "Backend, workers and wait",
    Choice(Backend::ALL),
    "where and how the envs are stepped",
)
.about("Env backend: sequential, threads, subprocess, vectorized or device");

pub const WORKERS: Knob = knob(
    "workers",
    "exec.workers",
    "Backend, workers and wait",
    Int,
    "threads or processes for threads/subprocess; 0 = one per core",
)
.range(0.0, 256.0)
.about("Worker threads/processes for `threads` and `subprocess`; 0 = one per core");

pub const WAIT: Knob = knob(
    "wait",
    "exec.wait",
    "Backend, workers and wait",
    Choice(WaitMode::ALL),
    "how the trainer waits for worker processes",
)
.about("How to wait for `subprocess` workers: `spin` (busy-poll) or `block` (futex)");

pub const WORKER_TIMEOUT: Knob = knob(
        "worker_timeout",
        "exec.worker_timeout_s",
        "Backend, workers and wait",
        Float,
        "seconds a subprocess worker may stay silent before the run fails naming it",
    )
    .above(0.0, 86_400.0)
    .about("Seconds a `subprocess` worker may stay silent in one step before the run fails naming it, its pid and how long it was silent");

pub const THREADS: Knob = knob("threads", "exec.threads", "Backend, workers and wait", Int, "libtorch intra-op threads; 0 = automatic")
    .range(0.0, 1024.0)
    .about("libtorch intra-op threads; 0 = automatic: for the MLP 1 for minibatches under 1024 rows or beside env workers (threads, subprocess), else one per core; for the CNN (an image) one per core; OMP_NUM_THREADS, where set, caps one per core");

pub const TRANSFER: Knob = knob(
    "transfer",
    "exec.transfer",
    "Transfer",
    Choice(Transfer::ALL),
    "how observations reach the device for an eager forward",
)
.about("Observations to the device for an eager forward: per_tensor, packed or pinned");

pub const ROLLOUT_COPY: Knob = knob(
        "rollout_copy",
        "exec.rollout_copy",
        "Transfer",
        Choice(RolloutCopy::ALL),
        "how the rollout reaches the device for the update: kept there by the forward, a copy per field, or per step and field",
    )
    .about("The rollout to the device for the update: kept (what an eager forward moved stays on the device: each observation crosses once), whole (a copy per field from the host's buffer) or per_step (a copy per step and field, concatenated there)");

pub const FRAMES: Knob = knob(
        "frames",
        "exec.frames",
        "Transfer",
        Choice(Frames::ALL),
        "how an image observation reaches the device: its bytes, or floats made on the host",
    )
    .about("An image observation (the CNN policy's) to the device: bytes (its bytes, converted to float and scaled by the encoder there, once per batch) or float (converted to float32 on the host first: 4× the bytes moved, and a host pass over every frame); no effect on other observations");

pub const ACTION_SYNC: Knob = knob(
    "action_sync",
    "exec.action_sync",
    "Action read-back",
    Choice(ActionSync::ALL),
    "how an eager forward's actions come back",
)
.about("Actions back from an eager forward: per_item (a read per element) or stacked");

pub const INFERENCE: Knob = knob(
    "inference",
    "exec.inference",
    "Inference",
    Choice(Inference::ALL),
    "the rollout's forward: libtorch ops, a native one, or a CUDA graph",
)
.about("Rollout forward: `fused` (native, no per-op dispatch) or `eager` (libtorch ops)");

pub const UPDATE: Knob = knob(
        "update",
        "exec.update",
        "Inference",
        Choice(UpdateMode::ALL),
        "the PPO update: op by op from the host, or one CUDA graph replayed per iteration (with hotlab's own loss and Adam kernels: graph_fused)",
    )
    .about("The PPO update: `eager` (each minibatch's ops dispatched from the host), `graph` (CUDA: the whole update captured once and replayed, its Adam step count and learning rate on the device) or `graph_fused` (graph, with the loss's gradient and the clipped Adam step in hotlab's own kernels; PPO's MLP only)");

pub const RNN_UPDATE: Knob = knob(
        "rnn_update",
        "exec.rnn_update",
        "Inference",
        Choice(RnnUpdate::ALL),
        "a recurrent policy's update: one core call per stretch between episode starts, or a cell call per step",
    )
    .about("How a recurrent policy's update (--rnn lstm|gru) runs its core over each env's segment: `sequence` (one call over each stretch between episode starts, libtorch's whole-sequence RNN) or `stepped` (the cell called once per step, as CleanRL's ppo_atari_lstm.py loops); the same outputs, other kernels");

pub const PRECISION: Knob = knob("precision", "exec.precision", "Precision", Choice(Precision::ALL), "the update's matmul precision")
    .about("The update's matmul precision: fp32, fp16 (CUDA; dynamic loss scaling), bf16, or auto (bf16 where the device supports it, else fp32); master weights stay fp32");

pub const CONV_LAYOUT: Knob = knob(
        "conv_layout",
        "exec.conv_layout",
        "Precision",
        Choice(ConvLayout::ALL),
        "how the CNN's convolutions lay out images in memory: nchw, nhwc (channels last) or auto",
    )
    .about("How the CNN policy's convolutions lay out their images in memory: nchw (channels first, libtorch's default), nhwc (channels last: oneDNN's CPU convolutions run without reordering) or auto (nhwc on the CPU, nchw on a GPU); the same products, other kernels; no effect on the MLP");

pub const EPOCHS: Knob =
    knob("epochs", "ppo.epochs", "PPO hyperparameters", Int, "passes over each rollout").range(1.0, 1000.0);

pub const MINIBATCHES: Knob = knob(
    "minibatches",
    "ppo.minibatches",
    "PPO hyperparameters",
    Int,
    "minibatches per epoch; must divide envs × steps",
);

pub const LR: Knob = knob("lr", "ppo.lr", "PPO hyperparameters", Float, "Adam learning rate").above(0.0, 1.0);

pub const ANNEAL_LR: Knob =
    knob("anneal_lr", "ppo.anneal_lr", "PPO hyperparameters", Bool, "anneal the learning rate linearly to 0")
        .about("Anneal the learning rate linearly to 0 (`--no-anneal-lr` keeps it constant)");

pub const GAMMA: Knob = knob("gamma", "ppo.gamma", "PPO hyperparameters", Float, "discount factor γ")
    .range(0.0, 1.0)
    .about("Discount factor");

pub const GAE_LAMBDA: Knob =
    knob("gae_lambda", "ppo.gae_lambda", "PPO hyperparameters", Float, "GAE λ").range(0.0, 1.0).about("GAE lambda");

pub const CLIP: Knob = knob("clip", "ppo.clip", "PPO hyperparameters", Float, "PPO clip range").above(0.0, 10.0);

pub const ENT_COEF: Knob = knob("ent_coef", "ppo.ent_coef", "PPO hyperparameters", Float, "entropy bonus coefficient")
    .range(0.0, 10.0)
    .about("Entropy coefficient");

pub const VF_COEF: Knob =
    knob("vf_coef", "ppo.vf_coef", "PPO hyperparameters", Float, "value loss coefficient").range(0.0, 100.0);

pub const MAX_GRAD_NORM: Knob =
    knob("max_grad_norm", "ppo.max_grad_norm", "PPO hyperparameters", Float, "global gradient norm clip")
        .above(0.0, 1e6)
        .about("Gradient norm clip");

pub const HIDDEN: Knob =
    knob("hidden", "ppo.hidden", "PPO hyperparameters", IntList, "hidden widths of actor and critic, e.g. 64,64")
        .range(1.0, 4096.0)
        .about("Hidden layer widths of actor and critic, comma-separated");

pub const RNN: Knob = knob("rnn", "ppo.rnn", "PPO hyperparameters", Choice(Rnn::ALL), "a recurrent core between encoder and heads: none, lstm or gru")
    .about("A recurrent core between the encoder and the heads (CleanRL's ppo_atari_lstm.py): none, lstm or gru. Its state is reset where an episode starts; the rollout keeps each env's state at its start; the update re-runs each env's whole segment (as --rnn-update says), its minibatches whole envs (--minibatches must divide --envs)");

pub const RNN_WIDTH: Knob =
    knob("rnn_width", "ppo.rnn_width", "PPO hyperparameters", Int, "the recurrent core's width (its state's size)")
        .range(1.0, 4096.0)
        .about("The recurrent core's width: the size of its state (h, and an LSTM's c); only with --rnn lstm or gru");

pub const OBS_NORM: Knob = knob("obs_norm", "ppo.obs_norm", "PPO hyperparameters", Choice(Norm::ALL), "normalize observations (auto: on for Box actions)")
    .about("Observations normalized by their running mean and variance (Gymnasium's NormalizeObservation, its update rule, run by the trainer on each step's whole batch), then clipped at ±10; the statistics go into the checkpoint and eval uses them. auto: on for an env with a Box action space and a vector of floats to observe (as CleanRL's ppo_continuous_action.py), off for the others (pixels among them)");

pub const REWARD_NORM: Knob = knob("reward_norm", "ppo.reward_norm", "PPO hyperparameters", Choice(Norm::ALL), "normalize rewards (auto: on for Box actions)")
    .about("Rewards divided by the running standard deviation of each env's discounted return (Gymnasium's NormalizeReward with --gamma, run by the trainer on each step's whole batch), then clipped at ±10; episode returns are reported unnormalized. auto: on for an env with a Box action space, off for the others");

pub const TELEMETRY_EVERY: Knob = knob("telemetry_every", "telemetry.every", "PPO hyperparameters", Int, "gradient norms every K updates; 0 = off")
    .range(0.0, 1_000_000.0)
    .about("Global and per-layer gradient norms every K updates, published from a background thread (telemetry.jsonl with --out); 0 = off. (The morpho env reads its seeds' gradient norms, which its agent observes, after every host epoch whatever this says)");

/// The run's own knobs, after `env`, in the launch panel's order.
pub const RUN: &[Knob] = &[
    DEVICE,
    SEED,
    ENVS,
    STEPS,
    TOTAL_STEPS,
    SECONDS,
    BACKEND,
    WORKERS,
    WAIT,
    WORKER_TIMEOUT,
    THREADS,
    TRANSFER,
    ROLLOUT_COPY,
    FRAMES,
    ACTION_SYNC,
    INFERENCE,
    UPDATE,
    RNN_UPDATE,
    PRECISION,
    CONV_LAYOUT,
    EPOCHS,
    MINIBATCHES,
    LR,
    ANNEAL_LR,
    GAMMA,
    GAE_LAMBDA,
    CLIP,
    ENT_COEF,
    VF_COEF,
    MAX_GRAD_NORM,
    HIDDEN,
    RNN,
    RNN_WIDTH,
    OBS_NORM,
    REWARD_NORM,
    TELEMETRY_EVERY,
];
