//! `morpho` (seeds 001–003): each env is a host network learning a task while an agent
//! grows seeds into its slots. Its settings and their choices, their knobs, its frame, and
//! its report rules: what its envs' parts mean (the hosts' training, validation, Shapley
//! credit, the lifecycle) and its knobs' advice (`--lifecycle batched` where the trench
//! costs, `--slots` by device).
//!
//! A module of `hotlab-specs`, the registry (the lab and the browser read it too): it is
//! written in `hotlab-core`'s words, names the registry `hotlab_specs`, and links no libtorch.

use hotlab_core::advice::Recommendation;
use hotlab_core::choice;
use hotlab_core::choices::{Backend, Inference, Precision};
use hotlab_core::counters::{Count, CountInfo, Counters};
use hotlab_core::knob::{Knob, KnobError, KnobKind::*};
use hotlab_core::preset::Preset;
use hotlab_core::profile::{Phase, PhaseInfo, PhaseKind, Profile};
use hotlab_core::run::RunContext;
use hotlab_core::run::RunPart;
use hotlab_specs::{setting, EnvName, Settings, HOST_BACKENDS};
use serde::{Deserialize, Serialize};
use std::fmt;

choice!(
    /// How a morpho host holds its seeds (catalogue row 9, seed 003 §2.3).
    SlotPool, "slot pool" {
        /// A seed's tensors made on its graft and freed on its removal, the optimizer's
        /// state with them: the parameter set changes, so no captured graph survives.
        #[default]
        Dynamic = "dynamic",
        /// A fixed pool, one seed of each blueprint per slot, masked while asleep and reset
        /// in place on a graft: the same tensors and ops every step.
        Sleeper = "sleeper",
    }
);

choice!(
    /// How a morpho batch runs its envs' lifecycles and rewards (catalogue row 8, seed 003 §2.1).
    LifecycleMode, "lifecycle mode" {
        /// Env after env: each env's slot state read from its tensors one value at a time,
        /// its action applied and its reward computed in its own pass, written back with
        /// one small op (seed 003's "CPU trench").
        Loop = "loop",
        /// Every env's slot state in struct-of-arrays tensors: masks, transitions and
        /// rewards for the whole batch in one pass of tensor ops, read back once.
        #[default]
        Batched = "batched",
    }
);

choice!(
    /// How a morpho batch trains its envs' hosts.
    HostExec, "host exec mode" {
        /// Each host with its own sequence of ops, one host after another (seed 003's
        /// per-env control flow).
        #[default]
        PerEnv = "per_env",
        /// Every host of the batch as one model with a leading env dimension: grouped
        /// convolutions and batched matmuls, each host's epoch its own length.
        Batched = "batched",
    }
);

choice!(
    /// When a morpho host's own CUDA stream waits for the default stream (seed 002 #4),
    /// hosts on CUDA under `--host-exec per_env`.
    StreamWait, "stream wait" {
        /// Before every minibatch, whether or not anything moved (seed 002's inner wait).
        Every = "every",
        /// Once per host epoch, after the surgery and the epoch's indices reached the device.
        #[default]
        Moved = "moved",
    }
);

choice!(
    /// Who moves a germinated seed into its training stage.
    TrainingEntry, "training entry" {
        /// The agent, with its advance op, once the germinated gate has passed.
        #[default]
        Agent = "agent",
        /// The lifecycle, at the germinated gate (as seed 002's trainer does): the agent's
        /// advance then only starts a blend.
        Gate = "gate",
    }
);

choice!(
    /// Whether each training seed's contribution is probed before its blend (issue 40): the
    /// host validated with the seed at α = 1 against the same pass with it off.
    Probe, "probe" {
        /// No probe: a training seed (α = 0) reads a contribution of 0.
        #[default]
        Off = "off",
        /// The probe read as a training seed's contribution (a blended seed's stays its
        /// Shapley credit).
        Observed = "observed",
        /// Observed, and in the shaping's Φ: each live seed adds what it contributes (the
        /// probe while it trains, its credit once blended), in accuracy.
        Shaped = "shaped",
    }
);

choice!(
    /// Which of the agent's heads the masks pin to one choice (issue 40's diagnosis: pinned to
    /// the scripted grower's choices, the op and slot heads alone decide when and where to grow).
    HeadPin, "head pin" {
        /// Every head free.
        #[default]
        Free = "free",
        /// Blueprint (norm), seed rate (1×), curve, α target (1) and speed (one epoch) pinned
        /// as the scripted grower picks them, and the tempo at its longest: only the op and
        /// the slot are learned.
        Grower = "grower",
        /// The tempo alone held at its longest (16 minibatches), every other head learned:
        /// issue 40's "tempo held fixed", measured apart from the grower's other pins.
        Tempo = "tempo",
    }
);

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
    /// Heads pinned to one choice through the masks (a diagnosis: `grower` leaves the agent
    /// only when and where to grow). Flag `--pin-heads`.
    pub pin_heads: HeadPin,
    /// Who moves a germinated seed into training: the agent's advance op (`agent`) or the
    /// lifecycle at its gate (`gate`). Flag `--training-entry`.
    pub training_entry: TrainingEntry,
    /// Potential-based shaping's weight per fully grown seed (0 = off): each step's reward
    /// gains `γΦ(s′) − Φ(s)`, Φ this weight × each seed's progress through its stages.
    /// Flag `--shaping`.
    pub shaping: f64,
    /// Each training seed's contribution probed before its blend: off, observed, or
    /// observed and in Φ. Flag `--probe`.
    pub probe: Probe,
    /// Decisions of the scripted grower's play the agent is fitted to before PPO starts
    /// (0 = none: PPO from a fresh agent). Flag `--clone-grower`.
    pub clone_grower: usize,
    /// Entropy coefficients of single heads, `HEAD=C,…` (heads by [`HEADS`]' names); the
    /// heads not named keep `--ent-coef`. Empty: one `--ent-coef` for their sum. Flag
    /// `--head-ent-coef`.
    pub head_ent_coef: String,
    /// A curriculum over episode lengths: each env's first episode lasts this many host
    /// epochs, and its later ones move evenly to `epochs` over `curriculum_episodes`
    /// episodes (0 = off: every episode `epochs` long). Flag `--curriculum-from`.
    pub curriculum_from: u32,
    /// Episodes per env over which the curriculum reaches `epochs`. Flag
    /// `--curriculum-episodes`.
    pub curriculum_episodes: u32,
}

/// The agent's eight heads, in their order (the op first: it picks which others are read).
pub const HEADS: [&str; 8] = ["op", "slot", "blueprint", "curve", "alpha_target", "alpha_speed", "tempo", "seed_lr"];

/// A curriculum over episode lengths: an env's episode `n` lasts `from` host epochs moving
/// evenly to `to` over `episodes` episodes, rounded to whole epochs, then `to`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Curriculum {
    pub from: u32,
    pub to: u32,
    pub episodes: u32,
}

impl Curriculum {
    /// Host epochs of episode `n` (from 0).
    pub fn epochs(&self, n: u64) -> u32 {
        let ramp = self.episodes.max(1) as f64;
        let along = n.min(ramp as u64) as f64 / ramp;
        let (from, to) = (self.from as f64, self.to as f64);
        (from + (to - from) * along).round() as u32
    }
}

impl MorphoSpec {
    /// The curriculum over episode lengths, None when it is off.
    pub fn curriculum(&self) -> Option<Curriculum> {
        let c = Curriculum { from: self.curriculum_from, to: self.epochs, episodes: self.curriculum_episodes };
        (self.curriculum_from > 0).then_some(c)
    }

    /// Host epochs of an env's episode `n` (from 0): `--host-epochs`, or under a curriculum
    /// the way from `--curriculum-from` to it, `n` episodes of `--curriculum-episodes` along.
    pub fn episode_epochs(&self, n: u64) -> u32 {
        self.curriculum().map_or(self.epochs, |c| c.epochs(n))
    }

    /// Each head's entropy coefficient under `--head-ent-coef`, `ent_coef` where it names
    /// none; None when it is empty (the heads' summed entropy weighs `ent_coef`).
    pub fn head_entropy(&self, ent_coef: f64) -> Result<Option<[f64; 8]>, KnobError> {
        let text = self.head_ent_coef.trim();
        if text.is_empty() {
            return Ok(None);
        }
        let bad = |m: String| KnobError::new(Self::HEAD_ENT_COEF.name, m);
        let mut coefs = [ent_coef; 8];
        let mut named = [false; 8];
        for item in text.split(',') {
            let Some((name, value)) = item.split_once('=') else {
                return Err(bad(format!("'{}': write HEAD=COEF, e.g. op=0.02,slot=0.005", item.trim())));
            };
            let name = name.trim();
            let Some(h) = HEADS.iter().position(|&n| n == name) else {
                return Err(bad(format!("'{name}' is not a head; the heads: {}", HEADS.join(", "))));
            };
            if std::mem::replace(&mut named[h], true) {
                return Err(bad(format!("'{name}' is named twice")));
            }
            coefs[h] = match value.trim().parse::<f64>() {
                Ok(c) if (0.0..=10.0).contains(&c) => c,
                _ => return Err(bad(format!("{name}'s '{}' must be a number from 0 to 10", value.trim()))),
            };
        }
        Ok(Some(coefs))
    }
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
            pin_heads: HeadPin::Free,
            training_entry: TrainingEntry::Agent,
            shaping: 0.0,
            probe: Probe::Off,
            clone_grower: 0,
            head_ent_coef: String::new(),
            curriculum_from: 0,
            curriculum_episodes: 24,
        }
    }
}

/// The hosts' forward passes and losses (an env part).
pub const HOST_FORWARD: Phase = Phase::new("host_forward");
/// Their backward passes.
pub const HOST_BACKWARD: Phase = Phase::new("host_backward");
/// Their optimizer steps.
pub const HOST_OPTIMIZER: Phase = Phase::new("host_optimizer");
/// Each host's validation after its epoch.
pub const VALIDATION: Phase = Phase::new("validation");
/// Validations with live seeds switched off, for each seed's credit.
pub const COUNTERFACTUAL: Phase = Phase::new("counterfactual");
/// The per-env, per-slot bookkeeping of a decision: lifecycle transitions, grafting and
/// removing modules, gradient norms (seed 003's "CPU trench").
pub const LIFECYCLE: Phase = Phase::new("lifecycle");
/// The reward.
pub const REWARD: Phase = Phase::new("reward");

/// Changes to an env's set of parameter tensors (a seed's tensors made or freed): each one
/// invalidates a captured graph of its step (catalogue row 9).
pub const TOPOLOGY_CHANGES: Count = Count::new("topology_changes");
/// Reads of the envs' lifecycle state (a batch's slots) from its tensors: one per value
/// under `--lifecycle loop`, one per field and batch under `batched`; each one a device
/// sync where that state lives on a GPU (catalogue row 8).
pub const LIFECYCLE_READS: Count = Count::new("lifecycle_reads");
/// Host training passes (a minibatch's forward, backward and optimizer step, one host's
/// under `--host-exec per_env`, a whole batch's under `batched`): the sequences of small
/// ops, each a run of kernel launches on a GPU.
pub const HOST_PASSES: Count = Count::new("host_passes");
/// Reads of the seeds' gradient norms (one per host epoch with a live seed, one fused
/// reduction each; seed 001 F1): each a device sync where the hosts train on a GPU.
pub const SEED_NORM_READS: Count = Count::new("seed_norm_reads");
/// Waits of a host's CUDA stream for the default stream (`--stream-wait`, seed 002 #4):
/// each one orders the host's work behind everything queued there.
pub const STREAM_WAITS: Count = Count::new("stream_waits");
/// A sleeper host's training step replayed as a captured CUDA graph (one launch for its
/// forward, backward and optimizer; catalogue row 9).
pub const GRAPH_REPLAYS: Count = Count::new("graph_replays");
/// fp16 host training steps the hosts' loss scalers skipped (a gradient overflowed: no
/// weight moved and the scale halved).
pub const HOST_STEPS_SKIPPED: Count = Count::new("host_steps_skipped");
/// Images the hosts trained on (a minibatch of B images counts B per host): host
/// samples/s is this over the run's wall time.
pub const HOST_SAMPLES: Count = Count::new("host_samples");

/// Both presets' batch: 8 hosts stepped on 2 threads, PPO's update in 2 minibatches.
fn eight_hosts_on_two_threads(run: &mut RunPart) {
    run.envs = 8;
    run.exec.backend = Backend::Threads;
    run.exec.workers = 2;
    run.ppo.minibatches = 2;
}

/// The knobs other code names (errors, hooks), declared once here and listed in `KNOBS`.
impl MorphoSpec {
    /// The knob of `--head-ent-coef`.
    pub const HEAD_ENT_COEF: Knob = setting(
        EnvName::Morpho,
        "head_ent_coef",
        "workload.morpho.head_ent_coef",
        Text,
        "morpho: entropy coefficients of single heads, HEAD=C,…; the rest keep --ent-coef",
    )
    .about("each named head's entropy weighs its own coefficient in the PPO loss, HEAD=C,… (heads: op, slot, blueprint, curve, alpha_target, alpha_speed, tempo, seed_lr; C from 0 to 10); the heads not named keep --ent-coef. Empty: --ent-coef weighs the heads' summed entropy");
}

impl Settings for MorphoSpec {
    const PRESETS: &'static [Preset<Self>] = &[
        // A run of about a minute on 2 cores: small tasks (256 images, 6 host epochs), the
        // envs on 2 threads.
        Preset::new(
            "morpho",
            "Seeds 001–003's growing hosts: 8 envs × 6 decisions, 1,344 in all, about a minute; where a morpho run's time goes (the hosts' training, the lifecycle, the update), no learning claimed: `grow` is the preset that learns growth",
            |run, s| {
                s.images = 256;
                s.epochs = 6;
                run.steps = 6;
                run.total_steps = 1344;
                eight_hosts_on_two_threads(run);
            },
        ),
        // Growth on 12-epoch episodes of 512-image tasks (where it pays +16 points): the
        // agent fitted to the grower's play, then PPO; the op and slot heads alone learned,
        // seeds entering training at their gate, the progress shaped.
        Preset::new(
            "grow",
            "Morpho hosts that grow: 12-epoch episodes, the op and slot heads learned (the others pinned to the scripted grower's choices), seeds entering training at their gate, shaped progress, the agent starting from 384 decisions of the grower's play, then 4,608 of PPO, about 3 minutes on 2 CPU cores; it grows in every held-out episode and beats waiting at the best tempo by playing as the grower (PPO keeps that growth and moves the clone little; PPO alone finds it on 1 or 2 training seeds of 3)",
            |run, s| {
                s.images = 512;
                s.pin_heads = HeadPin::Grower;
                s.training_entry = TrainingEntry::Gate;
                s.shaping = 0.05;
                s.clone_grower = 384;
                run.steps = 12;
                run.total_steps = 4608;
                eight_hosts_on_two_threads(run);
            },
        ),
    ];
    const KNOBS: &'static [Knob] = &[
    setting(
        EnvName::Morpho,
        "task_seed", "workload.morpho.task_seed", Int, "morpho: the first training task's seed")
    .about("the first training task's seed; evaluation's held-out tasks come after the training ones"),
    setting(
        EnvName::Morpho,
        "tasks", "workload.morpho.tasks", Int, "morpho: training tasks the envs cycle through")
    .range(1.0, 1024.0),
    setting(
        EnvName::Morpho,
        "task_images", "workload.morpho.images", Int, "morpho: training images per task (validation: a quarter)")
    .range(64.0, 65_536.0)
    .about("training images per task; validation gets a quarter as many"),
    setting(
        EnvName::Morpho,
        "host_epochs", "workload.morpho.epochs", Int, "morpho: host epochs per episode, one decision each")
    .range(1.0, 1000.0)
    .about("host epochs per episode, one agent decision each"),
    setting(
        EnvName::Morpho,
        "host_width", "workload.morpho.width", Int, "morpho: the host's first-stage channels")
    .range(1.0, 256.0)
    .about("the host's first-stage channels (2× and 4× in the next stages)"),
    setting(
        EnvName::Morpho,
        "rent", "workload.morpho.rent", Float, "morpho: reward lost per host's worth of added parameters")
    .range(0.0, 10.0)
    .about("reward lost over an episode per host's worth of parameters the seeds add"),
    setting(
        EnvName::Morpho,
        "slots",
        "workload.morpho.slots",
        Choice(SlotPool::ALL),
        "morpho: seeds made and freed per graft (dynamic), or a fixed masked pool (sleeper)",
    )
    .about("how hosts hold their seeds: `dynamic` makes a seed's tensors on its graft and frees them (and its optimizer state) on removal; `sleeper` keeps one of each blueprint per slot, masked, reset in place (catalogue row 9)"),
    setting(
        EnvName::Morpho,
        "lifecycle",
        "workload.morpho.lifecycle",
        Choice(LifecycleMode::ALL),
        "morpho: lifecycles and rewards env after env (loop) or in one pass of tensor ops (batched)",
    )
    .about("how a batch of envs runs its lifecycles and rewards: `loop` env after env, each env's slot state read one value at a time and written back with one small op (seed 003's \"CPU trench\", catalogue row 8); `batched` every env in one pass of tensor ops, read back once. Identical trajectories"),
    setting(
        EnvName::Morpho,
        "host_exec",
        "workload.morpho.host_exec",
        Choice(HostExec::ALL),
        "morpho: hosts trained one after another (per_env) or as one model with an env dimension (batched)",
    )
    .about("how a batch of envs trains its hosts: `per_env` one host after another, each with its own ops; `batched` every host as one model with a leading env dimension (grouped convolutions, batched matmuls), each host's epoch its own length. The same hosts to rounding. On a CPU batching measured slower (oneDNN runs each host's small convolutions about as well as a grouped one, and the batch adds gathers): per_env"),
    setting(
        EnvName::Morpho,
        "host_precision",
        "workload.morpho.host_precision",
        Choice(Precision::ALL),
        "morpho: the hosts' convolutions and matmuls in fp32, bf16, fp16 (CUDA, loss-scaled) or auto",
    )
    .about("what the hosts' convolutions and matmuls compute in: `fp32`, `bf16` (fp32 master weights; norms, softmax, loss and Adam in fp32), `fp16` (the same with a dynamic loss scaler on the device; hosts on CUDA under --host-exec per_env only) or `auto` (bf16 where the device has it)"),
    setting(
        EnvName::Morpho,
        "stream_wait",
        "workload.morpho.stream_wait",
        Choice(StreamWait::ALL),
        "morpho, hosts on CUDA: each host's stream waits before every minibatch (every) or once per epoch (moved)",
    )
    .about("Hosts on CUDA (`--device cuda`) under `--host-exec per_env`, each on its own stream: `every` makes a host's stream wait for the default stream before every minibatch (seed 002 #4's redundant wait); `moved` once per epoch, after the surgery and the epoch's indices reached the device. Refused with hosts on the CPU, which have no streams"),
    setting(
        EnvName::Morpho,
        "pin_heads",
        "workload.morpho.pin_heads",
        Choice(HeadPin::ALL),
        "morpho: heads the masks pin to one choice (free; grower: only the op and the slot learned; tempo: the tempo held at 16)",
    )
    .about("a diagnosis of what the agent learns: `free` every head learned; `grower` pins the blueprint (norm), the seed's rate (1×), the blend's curve, target (α = 1) and speed (one epoch) to the scripted grower's choices and the tempo to its longest (16 minibatches) through the masks, so that the op and slot heads alone decide when and where to grow; `tempo` holds the tempo alone at its longest and leaves every other head learned, so that training the hosts longer cannot be what the agent learns"),
    setting(
        EnvName::Morpho,
        "training_entry",
        "workload.morpho.training_entry",
        Choice(TrainingEntry::ALL),
        "morpho: who moves a germinated seed into training: the agent's advance op, or the lifecycle at its gate",
    )
    .about("who moves a germinated seed into its training stage (α = 0, learning without changing the host's output): `agent` its advance op once the germinated gate has passed; `gate` the lifecycle itself at that gate, as seed 002's trainer does, so that the agent's advance only starts a blend"),
    setting(
        EnvName::Morpho,
        "shaping", "workload.morpho.shaping", Float, "morpho: potential-based shaping's weight per grown seed; 0 = off")
    .range(0.0, 10.0)
    .about("potential-based shaping (Ng, Harada and Russell, 1999): each step's reward gains γΦ(s′) − Φ(s), with γ PPO's and Φ = 0 at the episode's end, Φ this weight × each seed's progress (a quarter per stage from germinated to holding; fossilized counts whole). It leaves the optimal policies as they were; the evaluation's score is never shaped. 0 = off"),
    setting(
        EnvName::Morpho,
        "probe",
        "workload.morpho.probe",
        Choice(Probe::ALL),
        "morpho: probe each training seed's contribution (α = 1 against off): off, observed, or observed and in Φ",
    )
    .about("a training seed learns at α = 0, so its contribution reads 0 until it blends and the agent cannot tell a good seed from a bad one. `observed` validates the host with each training seed at α = 1 against the pass with it off (one more validation per training seed per epoch) and shows the difference as that seed's contribution; `shaped` also adds each live seed's contribution (the probe while it trains, its Shapley credit once blended) to the shaping's Φ, in accuracy (it works with or without `--shaping`). The evaluation's score is never shaped"),
    setting(
        EnvName::Morpho,
        "clone_grower",
        "workload.morpho.clone_grower",
        Int,
        "morpho: decisions of the scripted grower's play the agent is fitted to before PPO; 0 = none",
    )
    .range(0.0, 100_000.0)
    .about("a diagnosis (issue 40, b): the grower plays this many decisions (whole episodes) on the training tasks, the actor is fitted to its actions under their masks and the critic to the discounted returns that followed, and PPO starts from that agent. Does it keep growing or drift back to waiting? 0 = PPO from a fresh agent"),
    setting(
        EnvName::Morpho,
        "shapley_perms",
        "workload.morpho.shapley_perms",
        Int,
        "morpho: orderings sampled for Shapley credit; 0 = exact",
    )
    .range(0.0, 10_000.0)
    .about("orderings sampled for each step's Shapley credit; 0 = exact, every ordering"),
        Self::HEAD_ENT_COEF,
    setting(
        EnvName::Morpho,
        "curriculum_from",
        "workload.morpho.curriculum_from",
        Int,
        "morpho: a curriculum: host epochs of each env's first episode, moving to --host-epochs; 0 = off",
    )
    .range(0.0, 1000.0)
    .about("a curriculum over episode lengths: each env's first episode lasts this many host epochs, and its later episodes move evenly to --host-epochs over --curriculum-episodes episodes (then stay there); evaluation plays --host-epochs. 0 = off, every episode --host-epochs long"),
    setting(
        EnvName::Morpho,
        "curriculum_episodes",
        "workload.morpho.curriculum_episodes",
        Int,
        "morpho: episodes per env over which the curriculum reaches --host-epochs",
    )
    .range(1.0, 1_000_000.0)];

    fn validate(&self) -> Result<(), KnobError> {
        self.head_entropy(0.0).map(|_| ())
    }

    /// A host trains beside its env, on the run's device (no `device` backend).
    const BACKENDS: &'static [Backend] = HOST_BACKENDS;
    /// The features (5 + 3 slots × 19 f32) and the mask table (6 ops × 30 choices, i64).
    const OBS_BYTES: u64 = (5 + 3 * 19) * 4 + 6 * 30 * 8;
    /// Features and a mask of integers: `--obs-norm on` is refused.
    const FLOAT_OBS: bool = false;
    /// The 8-head agent's forward is libtorch ops (the run's notes say so).
    const INFERENCE: Option<Inference> = Some(Inference::Eager);
    const PHASES: &'static [PhaseInfo] = &[
        PhaseInfo::new(
            HOST_FORWARD,
            PhaseKind::EnvPart,
            "#f7c948",
            "the envs' host networks: forward passes and losses",
        ),
        PhaseInfo::new(HOST_BACKWARD, PhaseKind::EnvPart, "#e0a526", "the envs' host networks: backward passes"),
        PhaseInfo::new(HOST_OPTIMIZER, PhaseKind::EnvPart, "#c98a1a", "the envs' host networks: optimizer steps"),
        PhaseInfo::new(VALIDATION, PhaseKind::EnvPart, "#f4d58d", "each host's validation after its epoch"),
        PhaseInfo::new(
            COUNTERFACTUAL,
            PhaseKind::EnvPart,
            "#e8b4a0",
            "validations with parts of the model switched off",
        ),
        PhaseInfo::new(
            LIFECYCLE,
            PhaseKind::EnvPart,
            "#ff8f5a",
            "decisions, slot ticks and each host's surgery (the CPU trench)",
        ),
        PhaseInfo::new(REWARD, PhaseKind::EnvPart, "#d9825b", "each env's reward"),
    ];
    const ENV_PARTS: &'static [Phase] =
        &[HOST_FORWARD, HOST_BACKWARD, HOST_OPTIMIZER, VALIDATION, COUNTERFACTUAL, LIFECYCLE, REWARD];
    const COUNTS: &'static [CountInfo] = &[
        CountInfo::new(TOPOLOGY_CHANGES, "topology changes", "changes to an env's set of parameter tensors"),
        CountInfo::new(LIFECYCLE_READS, "lifecycle reads", "reads of the envs' lifecycle state from its tensors"),
        CountInfo::new(HOST_PASSES, "host passes", "host training passes (forward, backward, optimizer step)"),
        CountInfo::new(SEED_NORM_READS, "seed norm reads", "reads of the seeds' gradient norms"),
        CountInfo::new(STREAM_WAITS, "stream waits", "waits of a host's CUDA stream for the default stream"),
        CountInfo::new(GRAPH_REPLAYS, "graph replays", "host training steps replayed as captured CUDA graphs"),
        CountInfo::new(HOST_STEPS_SKIPPED, "fp16 host steps skipped", "fp16 host steps skipped on overflow"),
        CountInfo::new(HOST_SAMPLES, "host samples", "images the hosts trained on"),
    ];

    fn diagnosis(&self, phase: Phase, profile: &Profile, run: &RunContext) -> Option<String> {
        let c = &profile.counters;
        Some(match phase {
            HOST_FORWARD | HOST_BACKWARD | HOST_OPTIMIZER => {
                let pool = match self.slots {
                    SlotPool::Sleeper if c.own.get(GRAPH_REPLAYS) > 0 => format!(
                        "; every sleeper seed runs, masked; {} steps replayed as captured CUDA graphs, one launch \
                         each (timed as forward)",
                        c.own.get(GRAPH_REPLAYS)
                    ),
                    SlotPool::Sleeper => "; every sleeper seed runs, masked".into(),
                    SlotPool::Dynamic if hosts_on_cuda(run, c) => format!(
                        "; not captured as CUDA graphs: the seeds' parameter sets changed {} times, which no graph \
                         survives (--slots sleeper can be captured)",
                        c.own.get(TOPOLOGY_CHANGES)
                    ),
                    SlotPool::Dynamic => String::new(),
                };
                let scaler = match self.host_precision {
                    Precision::Fp16 => format!(
                        "; fp16 with a loss scaler per host: {} steps skipped on overflowing gradients",
                        c.own.get(HOST_STEPS_SKIPPED)
                    ),
                    _ => String::new(),
                };
                format!("the envs' host networks training ({} envs; the env's own compute{pool}{scaler})", run.envs)
            }
            COUNTERFACTUAL => match self.shapley_perms {
                0 => "validations with live seeds switched off: exact Shapley values (2^live subsets)".into(),
                n => format!("validations with live seeds switched off: {n} sampled orderings per step"),
            },
            LIFECYCLE => {
                let pool = match self.slots {
                    SlotPool::Dynamic => {
                        format!("; {} seeds made or freed with their optimizer state", c.own.get(TOPOLOGY_CHANGES))
                    }
                    SlotPool::Sleeper => "; sleeper seeds reset in place".into(),
                };
                let how = match self.lifecycle {
                    LifecycleMode::Loop => {
                        format!("env after env, {} state reads one value at a time", c.own.get(LIFECYCLE_READS))
                    }
                    LifecycleMode::Batched => {
                        format!("one pass of tensor ops per batch, {} bulk reads", c.own.get(LIFECYCLE_READS))
                    }
                };
                let norms = format!("; {} reads of the seeds' gradient norms", c.own.get(SEED_NORM_READS));
                format!("decisions, slot ticks and each host's surgery over {} envs ({how}{pool}{norms})", run.envs)
            }
            _ => return None,
        })
    }

    fn recommend(&self, profile: &Profile, run: &RunContext, out: &mut Vec<Recommendation>) {
        let c = &profile.counters;
        // The trench: env-by-env lifecycles whose time is a real share of the wall.
        let trench = profile.share(LIFECYCLE) + profile.share(REWARD);
        if self.lifecycle == LifecycleMode::Loop && trench >= 0.10 {
            let signature = format!(
                "{:.0}% of wall in lifecycles and rewards run env after env ({:.0} state reads per env step)",
                100.0 * trench,
                c.own.get(LIFECYCLE_READS) as f64 / c.env_steps.max(1) as f64
            );
            out.push(Recommendation::new("--lifecycle batched", LIFECYCLE, trench, signature));
        }
        // A sleeper pool buys graph capture with the masked sleepers' compute: on the CPU
        // nothing is captured, so there it is pure cost; on CUDA a dynamic pool's hosts launch
        // every op of every step, which a captured sleeper step replaces with one launch.
        let hosts = profile.share(HOST_FORWARD) + profile.share(HOST_BACKWARD);
        match self.slots {
            SlotPool::Sleeper if !hosts_on_cuda(run, c) && hosts >= 0.10 => {
                let signature = format!(
                    "{:.0}% of wall in host forward and backward, every sleeper seed computed masked; hosts on the \
                     CPU are never captured as a graph",
                    100.0 * hosts
                );
                out.push(Recommendation::new("--slots dynamic", HOST_BACKWARD, hosts, signature));
            }
            SlotPool::Dynamic if hosts_on_cuda(run, c) && hosts >= 0.10 => {
                let signature = format!(
                    "{:.0}% of wall in host steps launched op by op on CUDA, {} parameter-set changes that no \
                     captured graph survives",
                    100.0 * hosts,
                    c.own.get(TOPOLOGY_CHANGES)
                );
                out.push(Recommendation::new("--slots sleeper", HOST_FORWARD, hosts, signature));
            }
            _ => {}
        }
    }
}

/// Whether a morpho run's hosts trained on CUDA: its device says so, or (`--device auto`)
/// its hosts' streams waited or their graphs replayed.
fn hosts_on_cuda(run: &RunContext, c: &Counters) -> bool {
    run.device.starts_with("cuda") || c.own.get(STREAM_WAITS) > 0 || c.own.get(GRAPH_REPLAYS) > 0
}

/// What the viewer draws: the first few envs, each its host's epoch and validation
/// accuracy, its slots, and the decision just taken on them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MorphoFrame {
    pub envs: Vec<MorphoView>,
}

/// One morpho env as the viewer draws it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MorphoView {
    pub env: usize,
    /// Host epochs done in this episode, of `epochs`.
    pub epoch: u32,
    pub epochs: u32,
    /// Validation accuracy after the last epoch.
    pub accuracy: f32,
    pub slots: Vec<SlotView>,
    /// The eight heads' choices, in order.
    pub decision: Vec<HeadChoice>,
}

/// A slot: its stage (`dormant`, `training`, …), blend and blueprint, and what its seed is
/// seen to contribute: its Shapley credit in validation accuracy (or, while it trains under
/// `--probe`, its probe); frames stored before it was shown read 0.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SlotView {
    pub stage: String,
    pub alpha: f32,
    pub blueprint: Option<String>,
    #[serde(default)]
    pub credit: f32,
}

/// One head's choice; `read`: whether the op chosen uses this head.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HeadChoice {
    pub head: String,
    pub choice: String,
    pub read: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(text: &str) -> MorphoSpec {
        MorphoSpec { head_ent_coef: text.into(), ..MorphoSpec::default() }
    }

    /// Named heads get their coefficient, the rest `--ent-coef`; empty means the one
    /// coefficient on the heads' sum.
    #[test]
    fn head_entropy_coefficients_name_their_heads() {
        assert_eq!(with("").head_entropy(0.01).unwrap(), None);
        assert_eq!(with("  ").head_entropy(0.01).unwrap(), None);
        let c = with("op=0.05, tempo = 0").head_entropy(0.01).unwrap().unwrap();
        assert_eq!(c, [0.05, 0.01, 0.01, 0.01, 0.01, 0.01, 0.0, 0.01]);
        let all: Vec<String> = HEADS.iter().enumerate().map(|(i, h)| format!("{h}={i}")).collect();
        assert_eq!(with(&all.join(",")).head_entropy(0.01).unwrap().unwrap(), [0., 1., 2., 3., 4., 5., 6., 7.]);
    }

    /// A curriculum moves each env's episodes evenly from its first length to
    /// `--host-epochs`, rounding to whole epochs, then stays there; off, every episode is
    /// `--host-epochs` long.
    #[test]
    fn a_curriculum_lengthens_or_shortens_episodes_evenly() {
        let s = |from, episodes| MorphoSpec {
            epochs: 12,
            curriculum_from: from,
            curriculum_episodes: episodes,
            ..MorphoSpec::default()
        };
        let lengths = |spec: MorphoSpec| (0..8).map(|n| spec.episode_epochs(n)).collect::<Vec<_>>();
        assert_eq!(lengths(s(0, 4)), [12; 8]);
        assert_eq!(lengths(s(16, 4)), [16, 15, 14, 13, 12, 12, 12, 12]);
        assert_eq!(lengths(s(4, 2)), [4, 8, 12, 12, 12, 12, 12, 12]);
        assert_eq!(lengths(s(6, 4)), [6, 8, 9, 11, 12, 12, 12, 12]);
        assert_eq!(lengths(s(12, 1)), [12; 8]);
    }

    /// Each bad form is refused naming the flag and what is allowed.
    #[test]
    fn bad_head_entropy_coefficients_are_refused_saying_why() {
        for (text, says) in [
            ("op", "write HEAD=COEF"),
            ("opp=0.1", "the heads: op, slot, blueprint"),
            ("op=0.1,op=0.2", "named twice"),
            ("slot=-1", "from 0 to 10"),
            ("slot=11", "from 0 to 10"),
            ("slot=NaN", "from 0 to 10"),
            ("slot=", "from 0 to 10"),
            ("op=0.1,", "write HEAD=COEF"),
        ] {
            let e = with(text).validate().unwrap_err();
            assert_eq!(e.knob, "head_ent_coef", "{text}");
            assert!(e.to_string().contains(says), "{text}: {e}");
        }
    }
}
