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

/// A snake_case enum usable as a CLI value and a JSON string, listing its values in errors.
macro_rules! knob {
    ($(#[$doc:meta])* $name:ident, $what:literal { $($(#[$vdoc:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
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

knob!(
    /// Env backends (catalogue rows 1, 3 and 8).
    Backend, "backend" {
        /// One scalar env object per env, stepped in a loop on the trainer thread.
        Sequential = "sequential",
        /// Worker threads, each owning a slice of envs, woken once per step.
        Threads = "threads",
        /// Worker processes with shared-memory buffers.
        Subprocess = "subprocess",
        /// The struct-of-arrays batch on the trainer thread.
        Vectorized = "vectorized",
        /// Env state in tensors on the trainer's device, stepped by tensor ops.
        Device = "device",
    }
);

knob!(
    /// How the trainer waits for worker processes.
    WaitMode, "wait mode" {
        /// Busy-polls the workers' ready flags.
        Spin = "spin",
        /// Sleeps on a futex until a worker wakes it.
        Block = "block",
    }
);

knob!(
    /// How a morpho host holds its seeds (catalogue row 9, seed 003 §2.3).
    SlotPool, "slot pool" {
        /// A seed's tensors made on its graft and freed on its removal, the optimizer's
        /// state with them: the parameter set changes, so no captured graph survives.
        Dynamic = "dynamic",
        /// A fixed pool, one seed of each blueprint per slot, masked while asleep and reset
        /// in place on a graft: the same tensors and ops every step.
        Sleeper = "sleeper",
    }
);

knob!(
    /// How a morpho batch runs its envs' lifecycles and rewards (catalogue row 8, seed 003 §2.1).
    LifecycleMode, "lifecycle mode" {
        /// Env after env: each env's slot state read from its tensors one value at a time,
        /// its action applied and its reward computed in its own pass, written back with
        /// one small op (seed 003's "CPU trench").
        Loop = "loop",
        /// Every env's slot state in struct-of-arrays tensors: masks, transitions and
        /// rewards for the whole batch in one pass of tensor ops, read back once.
        Batched = "batched",
    }
);

knob!(
    /// How a morpho batch trains its envs' hosts.
    HostExec, "host exec mode" {
        /// Each host with its own sequence of ops, one host after another (seed 003's
        /// per-env control flow).
        PerEnv = "per_env",
        /// Every host of the batch as one model with a leading env dimension: grouped
        /// convolutions and batched matmuls, each host's epoch its own length.
        Batched = "batched",
    }
);

knob!(
    /// How the dreamer's world model encodes a replayed sequence's frames (seed 004).
    EncoderMode, "encoder mode" {
        /// One encoder call per timestep inside the RSSM loop: T small convolutions.
        PerStep = "per_step",
        /// One encoder call on every frame of the batch, `[B·T, C, H, W]`; only the RSSM loops.
        Batched = "batched",
    }
);

knob!(
    /// When the dreamer reads its loss terms back to the host (seed 004's `.item()`).
    LossRead, "loss read" {
        /// `.item()` on every loss term every train step: a host sync each.
        PerItem = "per_item",
        /// The terms summed as tensors and read once per iteration.
        Deferred = "deferred",
    }
);

knob!(
    /// Where the dreamer's replay buffer lives and how a batch reaches the model (row 11).
    ReplayAt, "replay location" {
        /// Host memory; each batch is gathered there and copied to the model's device.
        Host = "host",
        /// Page-locked host memory; each batch copied without blocking (needs CUDA).
        Pinned = "pinned",
        /// A tensor on the model's device; a batch is one gather there, no copy.
        Device = "device",
    }
);

#[allow(clippy::derivable_impls)]
impl Default for EncoderMode {
    fn default() -> Self {
        EncoderMode::Batched
    }
}

#[allow(clippy::derivable_impls)]
impl Default for LossRead {
    fn default() -> Self {
        LossRead::Deferred
    }
}

#[allow(clippy::derivable_impls)]
impl Default for ReplayAt {
    fn default() -> Self {
        ReplayAt::Device
    }
}

#[allow(clippy::derivable_impls)]
impl Default for HostExec {
    fn default() -> Self {
        HostExec::PerEnv
    }
}

#[allow(clippy::derivable_impls)]
impl Default for LifecycleMode {
    fn default() -> Self {
        LifecycleMode::Batched
    }
}

knob!(
    /// When a morpho host's own CUDA stream waits for the default stream (seed 002 #4),
    /// hosts on CUDA under `--host-exec per_env`.
    StreamWait, "stream wait" {
        /// Before every minibatch, whether or not anything moved (seed 002's inner wait).
        Every = "every",
        /// Once per host epoch, after the surgery and the epoch's indices reached the device.
        Moved = "moved",
    }
);

#[allow(clippy::derivable_impls)]
impl Default for StreamWait {
    fn default() -> Self {
        StreamWait::Moved
    }
}

#[allow(clippy::derivable_impls)] // the knob macro cannot mark one variant `#[default]`
impl Default for SlotPool {
    fn default() -> Self {
        SlotPool::Dynamic
    }
}

knob!(
    /// How observations are copied to the device (catalogue row 2).
    Transfer, "transfer mode" {
        /// One copy per observation field per env.
        PerTensor = "per_tensor",
        /// One contiguous copy per step, split into views.
        Packed = "packed",
        /// Staged in page-locked memory, copied without blocking.
        Pinned = "pinned",
    }
);

knob!(
    /// How the rollout reaches the device for the update (catalogue row 11).
    RolloutCopy, "rollout copy mode" {
        /// Each step's rows of each field copied on their own, concatenated on the device
        /// (seed 002's many small copies at update time).
        PerStep = "per_step",
        /// Each field in one copy.
        Whole = "whole",
    }
);

knob!(
    /// How sampled actions are read back to the host (catalogue row 4).
    ActionSync, "action sync mode" {
        /// One scalar read per env per head.
        PerItem = "per_item",
        /// All heads stacked, one read.
        Stacked = "stacked",
    }
);

knob!(
    /// The update's precision (catalogue row 6).
    Precision, "precision" {
        /// Everything in fp32.
        Fp32 = "fp32",
        /// Matmuls in fp16 with a dynamic loss scaler (CUDA only).
        Fp16 = "fp16",
        /// Matmuls in bf16, no scaler.
        Bf16 = "bf16",
        /// bf16 where the device supports it (CUDA ≥ 8.0, ROCm, AVX512-BF16), fp16 on older CUDA GPUs, else fp32.
        Auto = "auto",
    }
);
