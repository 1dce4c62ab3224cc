//! The values of the spec's choice knobs, each a snake_case enum that is a CLI value and a
//! JSON string, and that lists its values when it refuses one.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Rollout inference modes (catalogue row 5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Inference {
    /// libtorch ops under no_grad, one dispatch per op.
    Eager,
    /// A native Rust forward of the MLP with the weights copied once per update; with
    /// `--backend device` on CUDA, the envs step in one fused kernel per step.
    #[default]
    Fused,
    /// `--backend device` on CUDA: the rollout (forward, sampling, env step, storage in
    /// one kernel per step) captured once as a CUDA graph and replayed per rollout.
    Graph,
}

impl Inference {
    pub const ALL: &'static [&'static str] = &["eager", "fused", "graph"];

    pub fn as_str(self) -> &'static str {
        match self {
            Inference::Eager => "eager",
            Inference::Fused => "fused",
            Inference::Graph => "graph",
        }
    }
}

impl std::str::FromStr for Inference {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "eager" => Ok(Inference::Eager),
            "fused" => Ok(Inference::Fused),
            "graph" => Ok(Inference::Graph),
            other => Err(format!("unknown inference mode '{other}'; allowed: {}", Inference::ALL.join(", "))),
        }
    }
}

/// A snake_case enum usable as a CLI value and a JSON string, listing its values in errors,
/// its default marked `#[default]` (workloads declare theirs with it too: `hotlab_core::choice!`,
/// with `serde::{Deserialize, Serialize}` and `std::fmt` in scope).
#[macro_export]
macro_rules! choice {
    ($(#[$doc:meta])* $name:ident, $what:literal { $($(#[$vdoc:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $($(#[$vdoc])* $variant),+ }

        impl $name {
            pub const ALL: &'static [&'static str] = &[$($text),+];
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
        }

        impl std::str::FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($text => Ok($name::$variant),)+
                    other => Err(format!(concat!("unknown ", $what, " '{}'; allowed: {}"), other, Self::ALL.join(", "))),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

choice!(
    /// Env backends (catalogue rows 1, 3 and 8).
    Backend, "backend" {
        /// One scalar env object per env, stepped in a loop on the trainer thread.
        Sequential = "sequential",
        /// Worker threads, each owning a slice of envs, woken once per step.
        Threads = "threads",
        /// Worker processes with shared-memory buffers.
        Subprocess = "subprocess",
        /// The struct-of-arrays batch on the trainer thread.
        #[default]
        Vectorized = "vectorized",
        /// Env state in tensors on the trainer's device, stepped by tensor ops.
        Device = "device",
    }
);

choice!(
    /// How the trainer waits for worker processes.
    WaitMode, "wait mode" {
        /// Busy-polls the workers' ready flags.
        Spin = "spin",
        /// Sleeps on a futex until a worker wakes it.
        #[default]
        Block = "block",
    }
);

choice!(
    /// How observations are copied to the device (catalogue row 2).
    Transfer, "transfer mode" {
        /// One copy per observation field per env.
        PerTensor = "per_tensor",
        /// One contiguous copy per step, split into views.
        #[default]
        Packed = "packed",
        /// Staged in page-locked memory, copied without blocking.
        Pinned = "pinned",
    }
);

choice!(
    /// How the rollout reaches the device for the update (catalogue row 11).
    RolloutCopy, "rollout copy mode" {
        /// Each step's rows of each field copied on their own, concatenated on the device
        /// (seed 002's many small copies at update time).
        PerStep = "per_step",
        /// Each field in one copy.
        Whole = "whole",
        /// Nothing copied for what an eager forward already moved: each step's observation
        /// and sampled actions are kept on the device where the forward put them, so only
        /// what the host computed (advantages and returns) crosses at update time. A forward
        /// on the host (`--inference fused`) has nothing there: its rollout moves `whole`.
        #[default]
        Kept = "kept",
    }
);

choice!(
    /// How an image observation travels to the device (catalogue row 2, on pixels).
    Frames, "frames mode" {
        /// Its bytes, converted to float (and scaled) by the CNN's encoder on the device,
        /// once per batch.
        #[default]
        Bytes = "bytes",
        /// Converted to float32 (and scaled) on the host first: four times the bytes to
        /// move, and a host pass over every frame.
        Float = "float",
    }
);

choice!(
    /// How a CNN's convolutions lay out their images in memory (catalogue row 6, as the
    /// `conv-layout` lesson: the same products in other kernels).
    ConvLayout, "conv layout" {
        /// `nhwc` on the CPU (oneDNN's convolutions run channels-last without reordering),
        /// `nchw` on a GPU (cuDNN's default; not measured there yet).
        #[default]
        Auto = "auto",
        /// Channels first in memory (`[B, C, H, W]` contiguous), libtorch's default.
        Nchw = "nchw",
        /// Channels last in memory (`[B, H, W, C]` contiguous): PyTorch's `channels_last`.
        Nhwc = "nhwc",
    }
);

choice!(
    /// How sampled actions are read back to the host (catalogue row 4).
    ActionSync, "action sync mode" {
        /// One scalar read per env per head.
        PerItem = "per_item",
        /// All heads stacked, one read.
        #[default]
        Stacked = "stacked",
    }
);

choice!(
    /// How the PPO update runs (catalogue row 5).
    UpdateMode, "update mode" {
        /// Op by op: each minibatch's forward, backward, clip and Adam dispatched from the host.
        #[default]
        Eager = "eager",
        /// CUDA: the whole update (every epoch's shuffle drawn on the device and its gather,
        /// every minibatch's forward, backward, clip and Adam, its step count and learning rate
        /// on the device) captured once as a CUDA graph and replayed per iteration.
        Graph = "graph",
        /// CUDA: `graph`, with the loss's gradient and the clipped Adam step in hotlab's own
        /// kernels (`ppo_loss_grad`, `clip_adam`) instead of about 65 libtorch ops per
        /// minibatch. PPO with the MLP only; `hotlab gpu-check` holds it to `graph`.
        GraphFused = "graph_fused",
    }
);

impl UpdateMode {
    /// Whether the update is captured as a CUDA graph (`graph` or `graph_fused`).
    pub fn captured(self) -> bool {
        matches!(self, UpdateMode::Graph | UpdateMode::GraphFused)
    }
}

choice!(
    /// The update's precision (catalogue row 6).
    Precision, "precision" {
        /// Everything in fp32.
        #[default]
        Fp32 = "fp32",
        /// Matmuls in fp16 with a dynamic loss scaler (CUDA only).
        Fp16 = "fp16",
        /// Matmuls in bf16, no scaler.
        Bf16 = "bf16",
        /// bf16 where the device supports it (CUDA ≥ 8.0, ROCm, AVX512-BF16), fp16 on older CUDA GPUs, else fp32.
        Auto = "auto",
    }
);

choice!(
    /// The policy's recurrent core between its encoder and its heads (`--rnn`).
    Rnn, "recurrent core" {
        /// None: the policy sees one observation at a time.
        #[default]
        None = "none",
        /// An LSTM (PyTorch's `nn.LSTM` gate layout), state `(h, c)`.
        Lstm = "lstm",
        /// A GRU (PyTorch's `nn.GRU` gate layout), state `h`.
        Gru = "gru",
    }
);

choice!(
    /// How a recurrent policy's update runs its core over each env's segment (catalogue
    /// row 12).
    RnnUpdate, "recurrent update" {
        /// One sequence call per stretch of the segment between episode starts.
        #[default]
        Sequence = "sequence",
        /// The cell stepped once per step, as a loop over the segment (CleanRL's
        /// `ppo_atari_lstm.py` `get_states`).
        Stepped = "stepped",
    }
);

choice!(
    /// Whether a normalizer runs (`--obs-norm`, `--reward-norm`).
    Norm, "normalizer setting" {
        /// On for an env with a Box action space (continuous control, as CleanRL's
        /// `ppo_continuous_action.py` has it), off for the others.
        #[default]
        Auto = "auto",
        On = "on",
        Off = "off",
    }
);

impl Norm {
    /// Gymnasium's `epsilon` under the square root of both normalizers: an input becomes
    /// `(x − mean) / √(var + EPSILON)` (the trainer, eval and the playground alike).
    pub const EPSILON: f64 = 1e-8;

    /// Whether it runs for an env that has (`box_actions`) or has not a Box action space.
    pub fn on(self, box_actions: bool) -> bool {
        match self {
            Norm::Auto => box_actions,
            Norm::On => true,
            Norm::Off => false,
        }
    }
}
