//! `dreamer` (seed 004): a DreamerV3-style world model on CartPole rendered to pixels, an
//! actor-critic in imagination. Its settings and their choices, their knobs, its frame,
//! and its report rules: what its phases hold (the replay, the encoder, the RSSM,
//! imagination) and seed 004's common optimizations, each where its signature shows.
//!
//! A module of `hotlab-specs`, the registry (the lab and the browser read it too): it is
//! written in `hotlab-core`'s words, names the registry `hotlab_specs`, and links no libtorch.

use hotlab_core::advice::Recommendation;
use hotlab_core::choice;
use hotlab_core::choices::{Backend, Inference, UpdateMode};
use hotlab_core::knob::{Knob, KnobError, KnobKind::*};
use hotlab_core::preset::Preset;
use hotlab_core::profile::{Phase, PhaseInfo, PhaseKind, Profile};
use hotlab_core::run::{ExecSpec, RunContext};
use hotlab_specs::{setting, EnvName, Settings, HOST_BACKENDS};
use serde::{Deserialize, Serialize};
use std::fmt;

choice!(
    /// How the dreamer's world model encodes a replayed sequence's frames (seed 004).
    EncoderMode, "encoder mode" {
        /// One encoder call per timestep inside the RSSM loop: T small convolutions.
        PerStep = "per_step",
        /// One encoder call on every frame of the batch, `[B·T, C, H, W]`; only the RSSM loops.
        #[default]
        Batched = "batched",
    }
);

choice!(
    /// When the dreamer reads its loss terms back to the host (seed 004's `.item()`).
    LossRead, "loss read" {
        /// `.item()` on every loss term every train step: a host sync each.
        PerItem = "per_item",
        /// The terms summed as tensors and read once per iteration.
        #[default]
        Deferred = "deferred",
    }
);

choice!(
    /// Where the dreamer's replay buffer lives and how a batch reaches the model (row 11).
    ReplayAt, "replay location" {
        /// Host memory; each batch is gathered there and copied to the model's device.
        Host = "host",
        /// Page-locked host memory; each batch copied without blocking (needs CUDA).
        Pinned = "pinned",
        /// A tensor on the model's device; a batch is one gather there, no copy.
        #[default]
        Device = "device",
    }
);

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

/// A world model's batch: sampling the replay buffer and bringing it to the model.
pub const REPLAY: Phase = Phase::new("replay");
/// The world model's encoder over a replayed batch's frames,
pub const ENCODER: Phase = Phase::new("encoder");
/// its recurrent state-space model stepping through the sequences,
pub const RSSM: Phase = Phase::new("rssm");
/// its decoder, reward and continue heads and losses,
pub const DECODER: Phase = Phase::new("decoder");
/// and the actor and critic's imagined trajectories, returns and losses.
pub const IMAGINE: Phase = Phase::new("imagine");
/// The world model's backward pass,
pub const WORLD_BACKWARD: Phase = Phase::new("world_backward");
/// and its actor's and critic's.
pub const ACTOR_CRITIC_BACKWARD: Phase = Phase::new("actor_critic_backward");

/// What the world model's phases count: train steps, which start after the prefill.
const TRAIN_STEP: &str = "train step (none during the prefill)";

/// The knobs other code names (errors, hooks), declared once here and listed in `KNOBS`.
impl DreamerSpec {
    /// The knob of `--replay`.
    pub const REPLAY: Knob = setting(
        EnvName::Dreamer,
        "replay",
        "workload.dreamer.replay",
        Choice(ReplayAt::ALL),
        "dreamer: the replay buffer in host memory, pinned host memory (CUDA) or on the model's device",
    )
    .about("where the replay buffer lives: `host` (gathered in host memory, copied to the model), `pinned` (page-locked, copied without blocking; CUDA only) or `device` (a tensor beside the model; a batch is one gather)");
}

impl Settings for DreamerSpec {
    // The smallest run measured to learn CartPole in imagination (seeds 1 and 2, tests/
    // dreamer.rs): 4,096 env steps after a 1,024-step prefill, 1,024 train steps of 16 × 16,
    // at learning rates about 7 and 6 times the defaults' (which need 16,384 steps).
    const PRESETS: &'static [Preset<Self>] = &[Preset::new(
        "dreamer",
        "Seed 004's world model on pixel CartPole: 4 envs, 4,096 steps, about 4 minutes of one core; its actor learns to balance in the model's imagination (over 10x random actions' return) and its prior predicts frames better than repeating the last one",
        |run, s| {
            run.steps = 64;
            run.total_steps = 4096;
            s.wm_lr = 0.002;
            s.ac_lr = 0.0006;
        },
    )];
    const KNOBS: &'static [Knob] = &[
    setting(
        EnvName::Dreamer,
        "size", "workload.dreamer.size", Int, "dreamer: width multiplier of every network (1 for a CPU)")
    .range(1.0, 16.0)
    .about("width multiplier of every network: 1 = conv depth 8, GRU 128, MLPs 128 (a CPU); 4–8 for a GPU box"),
    setting(
        EnvName::Dreamer,
        "batch_size", "workload.dreamer.batch", Int, "dreamer: replayed sequences per train step")
    .range(1.0, 4096.0)
    .about("replayed sequences per train step (`hotlab bench batch` sweeps it)"),
    setting(
        EnvName::Dreamer,
        "seq_len", "workload.dreamer.seq_len", Int, "dreamer: steps per replayed sequence")
    .range(2.0, 1024.0),
    setting(
        EnvName::Dreamer,
        "train_ratio", "workload.dreamer.train_ratio", Float, "dreamer: replayed steps per env step")
    .above(0.0, 100_000.0)
    .about("replayed steps per env step; train steps = env steps × ratio ÷ (batch × seq-len)"),
    setting(
        EnvName::Dreamer,
        "horizon", "workload.dreamer.horizon", Int, "dreamer: steps of each imagined trajectory")
    .range(1.0, 256.0)
    .about("steps of each imagined trajectory the actor and critic learn from"),
    setting(
        EnvName::Dreamer,
        "replay_capacity", "workload.dreamer.capacity", Int, "dreamer: env steps the replay buffer holds")
    .range(64.0, 10_000_000.0)
    .about("env steps the replay buffer holds; the oldest are overwritten"),
    setting(
        EnvName::Dreamer,
        "prefill", "workload.dreamer.prefill", Int, "dreamer: random env steps before the first train step")
    .range(0.0, 10_000_000.0)
    .about("env steps of random actions before the first train step"),
    setting(
        EnvName::Dreamer,
        "wm_lr", "workload.dreamer.wm_lr", Float, "dreamer: the world model's learning rate")
    .above(0.0, 1.0)
    .about("the world model's Adam learning rate"),
    setting(
        EnvName::Dreamer,
        "ac_lr", "workload.dreamer.ac_lr", Float, "dreamer: the actor's and critic's learning rate")
    .above(0.0, 1.0)
    .about("the actor's and critic's Adam learning rate"),
    setting(
        EnvName::Dreamer,
        "encoder",
        "workload.dreamer.encoder",
        Choice(EncoderMode::ALL),
        "dreamer: the encoder once per timestep (per_step) or once on the whole batch (batched)",
    )
    .about("the encoder once per timestep inside the RSSM loop (`per_step`, seed 004's loop) or once on every frame of the batch, `[B·T, C, H, W]` (`batched`). The same losses to rounding"),
    setting(
        EnvName::Dreamer,
        "loss_read",
        "workload.dreamer.loss_read",
        Choice(LossRead::ALL),
        "dreamer: loss terms read every train step (per_item) or once per iteration (deferred)",
    )
    .about("every loss term read with `.item()` each train step (`per_item`, a host sync each, seed 004) or summed as tensors and read once per iteration (`deferred`). The same training"),
        Self::REPLAY];
    /// CartPole's state: the frames are rendered from it beside the learner.
    const OBS_BYTES: u64 = 4 * 4;
    /// The actor reads the world model's state, not `--inference`'s network.
    const INFERENCE: Option<Inference> = Some(Inference::Eager);
    /// The envs step on the host; their frames are drawn there.
    const BACKENDS: &'static [Backend] = HOST_BACKENDS;
    /// A world model and an actor-critic in imagination: its own learning rates.
    const PPO: bool = false;
    const PHASES: &'static [PhaseInfo] = &[
        PhaseInfo::new(REPLAY, PhaseKind::Data, "#e6a86a", "sampling the replay buffer").per(TRAIN_STEP),
        PhaseInfo::new(ENCODER, PhaseKind::Model, "#3fb27f", "the encoder").per(TRAIN_STEP),
        PhaseInfo::new(RSSM, PhaseKind::Model, "#5fc99a", "the recurrent state-space model")
            .per("step of a train step's sequences (none during the prefill)"),
        PhaseInfo::new(DECODER, PhaseKind::Model, "#86d9b0", "the decoder, reward and continue heads, their losses")
            .per(TRAIN_STEP),
        PhaseInfo::new(IMAGINE, PhaseKind::Model, "#a8e6c6", "imagined trajectories").per(TRAIN_STEP),
        PhaseInfo::new(WORLD_BACKWARD, PhaseKind::Backward, "#3f7fd0", "the world model's backward pass")
            .per(TRAIN_STEP),
        PhaseInfo::new(ACTOR_CRITIC_BACKWARD, PhaseKind::Backward, "#6f9fe0", "the actor's and critic's backward")
            .per(TRAIN_STEP),
    ];

    /// `--update graph` replays the whole train step, its batch gathered on the device;
    /// `graph_fused`'s kernels are PPO's loss and Adam, which the dreamer does not run.
    fn validate_exec(&self, exec: &ExecSpec) -> Result<(), KnobError> {
        if exec.update == UpdateMode::GraphFused {
            return Err(KnobError::new(
                "update",
                "graph_fused puts PPO's loss gradient and Adam step in hotlab's kernels, and the dreamer's train step has neither; allowed: eager, graph",
            ));
        }
        if exec.update == UpdateMode::Graph && self.replay != ReplayAt::Device {
            return Err(KnobError::new(
                "update",
                format!(
                    "graph gathers each train step's batch from the replay on the device; allowed with --replay {}: eager (or --replay device with graph)",
                    self.replay
                ),
            ));
        }
        Ok(())
    }

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

    fn diagnosis(&self, phase: Phase, profile: &Profile, _run: &RunContext) -> Option<String> {
        let c = &profile.counters;
        let (batch, seq) = (self.batch, self.seq_len);
        Some(match phase {
            Phase::OPTIMIZER => "the world model's, the actor's and the critic's gradient clips and Adam steps".into(),
            REPLAY => format!(
                "sampling {batch} sequences × {seq} steps from the replay buffer ({}): {} host→device copies, {:.1} MB",
                self.replay,
                c.h2d_copies,
                c.h2d_bytes as f64 / 1e6
            ),
            ENCODER => match self.encoder {
                EncoderMode::PerStep => format!("the encoder once per timestep: {seq} calls on {batch} frames each"),
                EncoderMode::Batched => format!("the encoder once on all {} frames", batch * seq),
            },
            RSSM => format!("the RSSM's GRU and latents, {seq} steps of {batch} sequences"),
            IMAGINE => format!(
                "imagined trajectories of {} steps from every replayed state; actor and critic losses",
                self.horizon
            ),
            _ => return None,
        })
    }

    /// Seed 004's common optimizations, each where its signature shows.
    fn recommend(&self, profile: &Profile, _run: &RunContext, out: &mut Vec<Recommendation>) {
        let c = &profile.counters;
        let encoder = profile.share(ENCODER);
        if self.encoder == EncoderMode::PerStep && encoder >= 0.10 {
            let signature = format!(
                "{:.0}% of wall in the encoder, called once per timestep ({} calls per batch)",
                100.0 * encoder,
                self.seq_len
            );
            out.push(Recommendation::new("--encoder batched", ENCODER, encoder, signature));
        }
        let syncs = c.host_syncs as f64 / c.env_steps.max(1) as f64;
        let reads = profile.share(DECODER);
        if self.loss_read == LossRead::PerItem && reads >= 0.05 && syncs >= 0.5 {
            let signature = format!(
                "{syncs:.1} host syncs per env step reading loss terms one at a time, {:.0}% of wall in the losses",
                100.0 * reads
            );
            out.push(Recommendation::new("--loss-read deferred", DECODER, reads, signature));
        }
        let replay = profile.share(REPLAY);
        if self.replay == ReplayAt::Host && replay >= 0.05 {
            let signature = format!(
                "{:.0}% of wall gathering batches in host memory, {} copies ({:.1} MB) to the model",
                100.0 * replay,
                c.h2d_copies,
                c.h2d_bytes as f64 / 1e6
            );
            out.push(Recommendation::new("--replay device", REPLAY, replay, signature));
        }
    }
}

/// What the viewer draws of env 0: the frame it sees, the world model's reconstruction of
/// it (once the actor acts on the model's state), and frames the model imagines ahead
/// under the actor, `every` steps apart; each `side × side` grey bytes in base64
/// (`hotlab_protocol::pixels`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DreamerFrame {
    pub side: u32,
    pub observed: String,
    pub reconstruction: Option<String>,
    pub imagined: Vec<String>,
    pub every: u32,
}
