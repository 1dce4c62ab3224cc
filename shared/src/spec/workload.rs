//! The workloads as a spec names them: each one's name (`--env`) and its own settings,
//! which travel inside the spec's `workload` field: `{"workload": {"proof": {"kb": …}}}`.
//!
//! Adding a workload here is one line in [`workloads!`] below and its settings struct; the
//! worker's registry (`native-worker/src/workloads/mod.rs`) maps the name to its code.

use super::choices::{
    Backend, EncoderMode, HostExec, Inference, LifecycleMode, LossRead, Precision, ReplayAt, SlotPool, StreamWait,
};
use super::{in_range, SpecError};
use serde::{Deserialize, Serialize};

/// What a workload's settings must say about themselves.
pub trait Settings: Default {
    /// The env backends its envs run on.
    const BACKENDS: &'static [Backend] = ALL_BACKENDS;
    /// Bytes of one env's observation (every field), for the memory a rollout needs.
    const OBS_BYTES: u64;
    /// The rollout inference its policy always uses, whatever `--inference` says (None:
    /// it follows `--inference`).
    const INFERENCE: Option<Inference> = None;
    /// Whether PPO trains it (the `ppo` settings apply and are checked).
    const PPO: bool = true;
    /// A buffer of its own the memory check counts: its knob, what it is, its bytes, and
    /// the fix when it does not fit.
    fn buffer(&self) -> Option<(&'static str, String, u64, &'static str)> {
        None
    }
    /// Checks every setting; the first bad one is named with what is allowed.
    fn validate(&self) -> Result<(), SpecError> {
        Ok(())
    }
    /// The settings that name files on the machine, by knob (a lab server keeps them
    /// inside its data dir).
    fn files(&mut self) -> Vec<(&'static str, &mut String)> {
        Vec::new()
    }
}

/// Every backend: an env that can live in device tensors too.
pub const ALL_BACKENDS: &[Backend] =
    &[Backend::Sequential, Backend::Threads, Backend::Subprocess, Backend::Vectorized, Backend::Device];
/// The host backends: an env that steps on the CPU only.
pub const HOST_BACKENDS: &[Backend] =
    &[Backend::Sequential, Backend::Threads, Backend::Subprocess, Backend::Vectorized];

/// The registry of workload names and settings: `EnvName` (the names) and `WorkloadSpec`
/// (a name with its settings).
macro_rules! workloads {
    ($($(#[$doc:meta])* $variant:ident = $name:literal ($settings:ty)),+ $(,)?) => {
        /// A workload's name (`--env`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum EnvName { $($(#[$doc])* $variant),+ }

        impl EnvName {
            pub const ALL: &'static [&'static str] = &[$($name),+];

            pub fn as_str(self) -> &'static str {
                match self { $(EnvName::$variant => $name),+ }
            }

            /// The env backends this workload runs on.
            pub fn backends(self) -> &'static [Backend] {
                match self { $(EnvName::$variant => <$settings as Settings>::BACKENDS),+ }
            }

            /// Bytes of one env's observation.
            pub fn obs_bytes(self) -> u64 {
                match self { $(EnvName::$variant => <$settings as Settings>::OBS_BYTES),+ }
            }

            /// Whether PPO trains this workload (the `ppo` settings apply).
            pub fn uses_ppo(self) -> bool {
                match self { $(EnvName::$variant => <$settings as Settings>::PPO),+ }
            }

            /// The inference this workload's policy always uses, if it ignores `--inference`.
            pub fn fixed_inference(self) -> Option<Inference> {
                match self { $(EnvName::$variant => <$settings as Settings>::INFERENCE),+ }
            }
        }

        impl std::fmt::Display for EnvName {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for EnvName {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($name => Ok(EnvName::$variant),)+
                    other => Err(format!("unknown env '{other}'; allowed: {}", EnvName::ALL.join(", "))),
                }
            }
        }

        /// The workload of a run with its own settings; in JSON an object with one key,
        /// the workload's name: `{"cartpole": {}}`, `{"proof": {"kb": …, "depth": …}}`.
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum WorkloadSpec { $($variant($settings)),+ }

        impl WorkloadSpec {
            pub fn name(&self) -> EnvName {
                match self { $(WorkloadSpec::$variant(_) => EnvName::$variant),+ }
            }

            /// A workload with its default settings.
            pub fn default_for(name: EnvName) -> Self {
                match name { $(EnvName::$variant => WorkloadSpec::$variant(<$settings>::default())),+ }
            }

            pub fn validate(&self) -> Result<(), SpecError> {
                match self { $(WorkloadSpec::$variant(s) => s.validate()),+ }
            }

            /// The workload's own buffer for the memory check, if it has one.
            pub fn buffer(&self) -> Option<(&'static str, String, u64, &'static str)> {
                match self { $(WorkloadSpec::$variant(s) => s.buffer()),+ }
            }

            /// The settings that name files, by knob.
            pub fn files(&mut self) -> Vec<(&'static str, &mut String)> {
                match self { $(WorkloadSpec::$variant(s) => s.files()),+ }
            }
        }
    };
}

workloads! {
    /// Gymnasium's CartPole-v1.
    Cartpole = "cartpole" (CartpoleSpec),
    /// Seed 000's proof search over a Prolog knowledge base.
    Proof = "proof" (ProofSpec),
    /// Seeds 001–003's morphogenetic trainer: hosts that grow seeds while they learn.
    Morpho = "morpho" (MorphoSpec),
    /// Seed 004's DreamerV3-style learner on CartPole rendered to pixels.
    Dreamer = "dreamer" (DreamerSpec),
}

#[allow(clippy::derivable_impls)] // the registry's macro cannot mark one variant `#[default]`
impl Default for EnvName {
    fn default() -> Self {
        EnvName::Cartpole
    }
}

impl Default for WorkloadSpec {
    fn default() -> Self {
        WorkloadSpec::Cartpole(CartpoleSpec {})
    }
}

impl EnvName {
    /// The workloads that run on `backend`, for messages.
    pub fn running_on(backend: Backend) -> Vec<&'static str> {
        Self::ALL
            .iter()
            .filter(|n| n.parse::<EnvName>().is_ok_and(|e| e.backends().contains(&backend)))
            .copied()
            .collect()
    }
}

/// CartPole has no settings of its own (its network is `ppo.hidden`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CartpoleSpec {}

impl Settings for CartpoleSpec {
    /// `[x, ẋ, θ, θ̇]` in f32.
    const OBS_BYTES: u64 = 4 * 4;
}

/// The proof env's settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProofSpec {
    /// The knowledge base: a Prolog file or a generated world (`family:people=N,seed=S`,
    /// `geography:places=N,seed=S`). Flag `--kb`.
    pub kb: String,
    /// A query file (ground atoms; `% test` starts the held-out part); for a generated
    /// world the queries are generated when this is absent. Flag `--queries`.
    pub queries: Option<String>,
    /// Most resolution steps in an episode (the depth limit). Flag `--proof-depth`.
    pub depth: usize,
    /// Width of the policy's index embeddings (its hidden width is `ppo.hidden`'s first).
    /// Flag `--embed-dim`.
    pub embed_dim: usize,
}

impl Default for ProofSpec {
    fn default() -> Self {
        Self { kb: "family:people=200,seed=3".into(), queries: None, depth: 10, embed_dim: 32 }
    }
}

impl Settings for ProofSpec {
    /// Resolution is symbolic: the envs step on the host.
    const BACKENDS: &'static [Backend] = HOST_BACKENDS;
    /// The goal list (10 × 3), 20 successors (20 × 10 × 3) and the mask (20), in i64.
    const OBS_BYTES: u64 = (10 * 3 + 20 * 10 * 3 + 20) * 8;

    fn validate(&self) -> Result<(), SpecError> {
        in_range("proof_depth", self.depth, 1, 64)?;
        in_range("embed_dim", self.embed_dim, 1, 1024)
    }

    /// The knowledge base unless it names a generated world (`family:…`, `geography:…`;
    /// the proof workload parses the rest), and the query file.
    fn files(&mut self) -> Vec<(&'static str, &mut String)> {
        let kind = self.kb.split_once(':').map_or(self.kb.as_str(), |(kind, _)| kind);
        let world = matches!(kind, "family" | "geography");
        let kb = (!world).then_some(("kb", &mut self.kb));
        kb.into_iter().chain(self.queries.as_mut().map(|q| ("queries", q))).collect()
    }
}

/// The morphogenetic workload's settings: the tasks its hosts learn, the hosts, the
/// episode and the reward.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MorphoSpec {
    /// The first training task's seed: envs learn tasks `task_seed ..= task_seed + tasks − 1`
    /// in turn; evaluation draws held-out tasks past them. Flag `--task-seed`.
    pub task_seed: u64,
    /// Training tasks the envs cycle through. Flag `--tasks`.
    pub tasks: usize,
    /// Training images per task (validation: a quarter as many). Flag `--task-images`.
    pub images: usize,
    /// Host epochs per episode, one agent decision each. Flag `--host-epochs`.
    pub epochs: u32,
    /// The host's first-stage channels (2× and 4× in the next two stages). Flag `--host-width`.
    pub width: usize,
    /// Reward lost per host's worth of parameters added, over an episode. Flag `--rent`.
    pub rent: f64,
    /// Orderings sampled for each step's Shapley values; 0 = exact (every ordering).
    /// Flag `--shapley-perms`.
    pub shapley_perms: usize,
    /// How hosts hold their seeds: made and freed per graft, or a fixed masked pool.
    /// Flag `--slots`.
    pub slots: SlotPool,
    /// How a batch of envs runs their lifecycles and rewards: env after env, one value at
    /// a time (`loop`), or in one pass of tensor ops (`batched`). Flag `--lifecycle`.
    pub lifecycle: LifecycleMode,
    /// How a batch of envs trains its hosts: one after another (`per_env`), or as one model
    /// with a leading env dimension (`batched`). Flag `--host-exec`.
    pub host_exec: HostExec,
    /// What the hosts' convolutions and matmuls compute in: `fp32`, `bf16` (fp32 master
    /// weights, norms, loss and Adam), `fp16` (the same with a loss scaler; hosts on CUDA
    /// under `per_env` only) or `auto` (bf16 where the device has it). Flag `--host-precision`.
    pub host_precision: Precision,
    /// Hosts on CUDA, each on its own stream: wait for the default stream before every
    /// minibatch (`every`, seed 002 #4) or once per epoch (`moved`); hosts on the CPU have
    /// no streams and refuse `every`. Flag `--stream-wait`.
    pub stream_wait: StreamWait,
}

impl Default for MorphoSpec {
    fn default() -> Self {
        Self {
            task_seed: 1,
            tasks: 8,
            images: 2048,
            epochs: 12,
            width: 16,
            rent: 0.02,
            shapley_perms: 0,
            slots: SlotPool::Dynamic,
            lifecycle: LifecycleMode::Batched,
            host_exec: HostExec::PerEnv,
            host_precision: Precision::Fp32,
            stream_wait: StreamWait::Moved,
        }
    }
}

impl Settings for MorphoSpec {
    /// A host trains beside its env, on the run's device (no `device` backend).
    const BACKENDS: &'static [Backend] = HOST_BACKENDS;
    /// The features (5 + 3 slots × 19 f32) and the mask table (6 ops × 30 choices, i64).
    const OBS_BYTES: u64 = (5 + 3 * 19) * 4 + 6 * 30 * 8;
    /// The 8-head agent's forward is libtorch ops (the run's notes say so).
    const INFERENCE: Option<Inference> = Some(Inference::Eager);

    fn validate(&self) -> Result<(), SpecError> {
        in_range("tasks", self.tasks, 1, 1024)?;
        in_range("task_images", self.images, 64, 65_536)?;
        in_range("host_epochs", self.epochs, 1, 1000)?;
        in_range("host_width", self.width, 1, 256)?;
        if !(self.rent.is_finite() && (0.0..=10.0).contains(&self.rent)) {
            return Err(SpecError::new("rent", format!("must be between 0 and 10 (got {})", self.rent)));
        }
        in_range("shapley_perms", self.shapley_perms, 0, 10_000)
    }
}

/// The world-model workload's settings: the model's size, what a train step replays, and
/// seed 004's knobs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DreamerSpec {
    /// Width multiplier of every network (1: conv depth 8, GRU 128, for a CPU; 4–8 for a
    /// GPU box). Flag `--size`.
    pub size: usize,
    /// Replayed sequences per train step. Flag `--batch-size`.
    pub batch: usize,
    /// Steps per replayed sequence. Flag `--seq-len`.
    pub seq_len: usize,
    /// Replayed steps per env step (train steps = env steps × ratio ÷ (batch × seq_len)).
    /// Flag `--train-ratio`.
    pub train_ratio: f64,
    /// Steps of each imagined trajectory the actor and critic learn from. Flag `--horizon`.
    pub horizon: usize,
    /// Env steps the replay buffer holds (the oldest are overwritten). Flag `--replay-capacity`.
    pub capacity: usize,
    /// Env steps of random actions before the first train step. Flag `--prefill`.
    pub prefill: usize,
    /// The world model's Adam learning rate. Flag `--wm-lr`.
    pub wm_lr: f64,
    /// The actor's and critic's Adam learning rate. Flag `--ac-lr`.
    pub ac_lr: f64,
    /// The encoder's frames: one call per timestep (`per_step`) or one call on the whole
    /// batch (`batched`). Flag `--encoder`.
    pub encoder: EncoderMode,
    /// The loss terms read with `.item()` every train step (`per_item`) or once per
    /// iteration (`deferred`). Flag `--loss-read`.
    pub loss_read: LossRead,
    /// Where the replay buffer lives: `host`, `pinned` (CUDA) or `device`. Flag `--replay`.
    pub replay: ReplayAt,
}

impl Default for DreamerSpec {
    fn default() -> Self {
        Self {
            size: 1,
            batch: 16,
            seq_len: 16,
            train_ratio: 64.0,
            horizon: 15,
            capacity: 100_000,
            prefill: 1024,
            wm_lr: 3e-4,
            ac_lr: 1e-4,
            encoder: EncoderMode::Batched,
            loss_read: LossRead::Deferred,
            replay: ReplayAt::Device,
        }
    }
}

/// Pixels per side of the frames the world model reads.
pub const DREAMER_IMAGE: usize = 64;

impl Settings for DreamerSpec {
    /// CartPole's state: the frames are rendered from it beside the learner.
    const OBS_BYTES: u64 = 4 * 4;
    /// The actor reads the world model's state, not `--inference`'s network.
    const INFERENCE: Option<Inference> = Some(Inference::Eager);
    /// The envs step on the host; their frames are drawn there.
    const BACKENDS: &'static [Backend] = HOST_BACKENDS;
    /// A world model and an actor-critic in imagination: its own learning rates.
    const PPO: bool = false;

    /// The replay buffer: a frame and 17 bytes of step per slot.
    fn buffer(&self) -> Option<(&'static str, String, u64, &'static str)> {
        let bytes = self.capacity as u64 * (DREAMER_IMAGE * DREAMER_IMAGE + 17) as u64;
        let what = format!(
            "the replay buffer {:.1} GiB ({} steps of {DREAMER_IMAGE}×{DREAMER_IMAGE} frames)",
            bytes as f64 / (1u64 << 30) as f64,
            self.capacity
        );
        Some(("replay_capacity", what, bytes, "a smaller --replay-capacity"))
    }

    fn validate(&self) -> Result<(), SpecError> {
        in_range("size", self.size, 1, 16)?;
        in_range("batch_size", self.batch, 1, 4096)?;
        in_range("seq_len", self.seq_len, 2, 1024)?;
        in_range("horizon", self.horizon, 1, 256)?;
        in_range("replay_capacity", self.capacity, 64, 10_000_000)?;
        in_range("prefill", self.prefill, 0, 10_000_000)?;
        for (field, v, hi) in
            [("train_ratio", self.train_ratio, 100_000.0), ("wm_lr", self.wm_lr, 1.0), ("ac_lr", self.ac_lr, 1.0)]
        {
            if !(v.is_finite() && v > 0.0 && v <= hi) {
                return Err(SpecError::new(field, format!("must be above 0 and at most {hi} (got {v})")));
            }
        }
        Ok(())
    }
}
