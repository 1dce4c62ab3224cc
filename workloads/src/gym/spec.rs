//! `gym`: any Gymnasium env (`--env gym:ID`, or `gym:module:callable` for an env of the
//! user's own on the `PYTHONPATH`), stepped by Python worker processes through shared
//! memory. Its settings, their knobs and its frame.
//!
//! A module of `hotlab-specs`, the registry (the lab and the browser read it too): it is
//! written in `hotlab-core`'s words, names the registry `hotlab_specs`, and links no libtorch.

use hotlab_core::advice::Recommendation;
use hotlab_core::choice;
use hotlab_core::choices::{Backend, Inference, Norm, Rnn};
use hotlab_core::knob::{Knob, KnobError, KnobKind::*};
use hotlab_core::preset::Preset;
use hotlab_core::profile::{Phase, PhaseInfo, PhaseKind, Profile};
use hotlab_core::run::RunContext;
use hotlab_core::run::RunPart;
use hotlab_specs::{setting, EnvName, Settings};
use serde::{Deserialize, Serialize};
use std::fmt;

choice!(
    /// The wrappers around each env, applied in its worker process.
    GymWrappers, "gym wrappers" {
        /// `atari` for Atari's ids (`ALE/…`), `none` for any other.
        #[default]
        Auto = "auto",
        /// The standard Atari preprocessing (CleanRL's `ppo_atari.py`): up to 30 no-op
        /// starts, 4 frames skipped with the last two max-pooled, 84×84 grayscale, FIRE
        /// pressed after each reset, rewards clipped to their sign for learning (episode
        /// returns stay the game's score), and the last 4 frames stacked, `[4, 84, 84]`.
        Atari = "atari",
        /// The env as it is.
        None = "none",
    }
);

/// A Gymnasium env's settings: in JSON `{"gym": {"id": …, "python": …, "kwargs": {…}}}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GymSpec {
    /// A registered id (`CartPole-v1`, `Acrobot-v1`) or `module:callable` (a factory or an
    /// env class, importable from the `PYTHONPATH`). Flag `--gym-id`, or `--env gym:ID`.
    pub id: String,
    /// The interpreter that runs the envs (None: `$HOTLAB_PYTHON`, the active venv, the
    /// project's `.venv`, then `python3`). Flag `--python`.
    pub python: Option<String>,
    /// Keywords for `gymnasium.make` (or the callable), a JSON object. Flag `--gym-kwargs`.
    pub kwargs: serde_json::Map<String, serde_json::Value>,
    /// The wrappers around each env (`auto`: Atari's preprocessing for `ALE/` ids). Flag
    /// `--gym-wrappers`.
    pub wrappers: GymWrappers,
    /// Frames stacked by Atari's preprocessing (4, as CleanRL's `ppo_atari.py`; 1, as its
    /// `ppo_atari_lstm.py`, whose memory is the LSTM). Flag `--gym-frame-stack`.
    pub frame_stack: usize,
}

impl Default for GymSpec {
    fn default() -> Self {
        Self {
            id: "CartPole-v1".into(),
            python: None,
            kwargs: serde_json::Map::new(),
            wrappers: GymWrappers::Auto,
            frame_stack: 4,
        }
    }
}

impl GymSpec {
    /// Whether the envs get Atari's preprocessing.
    pub fn atari(&self) -> bool {
        match self.wrappers {
            GymWrappers::Auto => self.id.starts_with("ALE/"),
            GymWrappers::Atari => true,
            GymWrappers::None => false,
        }
    }
}

/// The envs' own Python: `env.step` and the resets, timed inside each worker process.
pub const PYTHON_STEP: Phase = Phase::new("python_step");
/// Env 0 drawn for the viewer (`render()` in `rgb_array` mode, then a PNG), at most once
/// a second, timed in its worker process.
pub const RENDER: Phase = Phase::new("render");

/// Share of the wall in the envs' Python past which one process holding every env is
/// worth splitting into worker processes.
const SPLIT_AT: f64 = 0.25;

/// Envs a one-env run is advised to collect its batch with (the `mujoco-fast` preset's).
const SPREAD_ENVS: usize = 8;

/// CleanRL's `ppo_continuous_action.py` settings (the `mujoco` preset's; `mujoco-fast`
/// collects the same batch otherwise): HalfCheetah on the CPU, one env of 2048 steps, 32
/// minibatches, 10 epochs, lr 3e-4, no entropy bonus, 1M steps.
fn cleanrl_mujoco(run: &mut RunPart, s: &mut GymSpec) {
    s.id = "HalfCheetah-v5".into();
    run.device = "cpu".into();
    run.envs = 1;
    run.steps = 2048;
    run.total_steps = 1_000_000;
    run.ppo.epochs = 10;
    run.ppo.minibatches = 32;
    run.ppo.lr = 0.0003;
    run.ppo.ent_coef = 0.0;
}

/// CleanRL's `ppo_atari.py` settings (the `atari` preset's, and `atari-lstm`'s under its
/// own two): ALE's Breakout with the standard preprocessing, 8 envs in 2 worker processes,
/// clip 0.1, no normalizers, libtorch's forward.
fn cleanrl_atari(run: &mut RunPart, s: &mut GymSpec) {
    s.id = "ALE/Breakout-v5".into();
    s.wrappers = GymWrappers::Atari;
    run.envs = 8;
    run.total_steps = 10_000_000;
    run.exec.backend = Backend::Subprocess;
    run.exec.workers = 2;
    run.exec.inference = Inference::Eager;
    run.ppo.clip = 0.1;
    run.ppo.obs_norm = Norm::Off;
    run.ppo.reward_norm = Norm::Off;
}

/// The knobs other code names (errors, hooks), declared once here and listed in `KNOBS`.
impl GymSpec {
    /// The knob of `--gym-id`.
    pub const ID: Knob = setting(EnvName::Gym, "gym_id", "workload.gym.id", Text, "gym: a Gymnasium id (CartPole-v1) or module:callable")
        .about("a registered Gymnasium id (CartPole-v1, Acrobot-v1, MountainCar-v0) or module:callable for your own env on the PYTHONPATH; --env gym:ID says the same");

    /// The knob of `--python`.
    pub const PYTHON: Knob = setting(
        EnvName::Gym,
        "python",
        "workload.gym.python",
        OptionalText,
        "gym: the Python interpreter with gymnasium (empty: the project's venv)",
        )
        .about("the Python interpreter that runs the envs, with gymnasium and your env's dependencies (default: $HOTLAB_PYTHON, the active venv, the project's .venv, then python3)");
}

impl Settings for GymSpec {
    /// The shared policy (the MLP, or the CNN for images): `--rnn` gives it a recurrent core.
    const RECURRENT: bool = true;
    const PHASES: &'static [PhaseInfo] = &[
        PhaseInfo::new(
            PYTHON_STEP,
            PhaseKind::EnvPart,
            "#6fa8dc",
            "the envs' own Python (env.step and resets), timed in their worker processes",
        ),
        PhaseInfo::new(
            RENDER,
            PhaseKind::EnvPart,
            "#b4a7d6",
            "env 0 drawn for the viewer (render() in rgb_array mode, then a PNG), at most once a second",
        ),
    ];
    const ENV_PARTS: &'static [Phase] = &[PYTHON_STEP, RENDER];
    /// `--env gym:ID`.
    const ARGUMENT: Option<&'static str> = Some(Self::ID.name);
    const SUGGESTED: Option<&'static str> = Some(Self::ID.name);

    const KNOBS: &'static [Knob] = &[
        Self::ID,
        Self::PYTHON,
        setting(EnvName::Gym, "gym_kwargs", "workload.gym.kwargs", Object, "gym: make()'s keywords, a JSON object")
            .about("keywords for gymnasium.make (or your callable), a JSON object: '{\"continuous\": true}' for LunarLander's continuous mode, '{\"max_episode_steps\": 200}', a MuJoCo env's options ('{\"forward_reward_weight\": 2.0}'); the env is probed with them before the run starts"),
        setting(
            EnvName::Gym,
            "gym_wrappers",
            "workload.gym.wrappers",
            Choice(GymWrappers::ALL),
            "gym: the wrappers around each env (auto: Atari's preprocessing for ALE/ ids)",
        )
        .about("the wrappers around each env, in its worker: `atari`, the standard Atari preprocessing (CleanRL's ppo_atari.py: up to 30 no-op starts, 4 frames skipped and the last two max-pooled, 84×84 grayscale, FIRE after each reset, rewards clipped to their sign for learning while episode returns stay the game's score, the last 4 frames stacked); `none`, the env as it is; `auto`, atari for ALE/ ids"),
        setting(EnvName::Gym, "gym_frame_stack", "workload.gym.frame_stack", Int, "gym: frames Atari's preprocessing stacks (4; 1 with a recurrent policy)")
            .range(1.0, 16.0)
            .about("the last frames Atari's preprocessing stacks into each observation: 4, as CleanRL's ppo_atari.py; 1, as its ppo_atari_lstm.py, whose LSTM remembers instead; only with --gym-wrappers atari (or an ALE/ id)")];
    /// The envs step in Python processes: one holding them all (`vectorized`) or several
    /// (`subprocess`); no scalar env lives in this process.
    const BACKENDS: &'static [Backend] = &[Backend::Subprocess, Backend::Vectorized];

    const PRESETS: &'static [Preset<Self>] = &[
        // CleanRL's `ppo_continuous_action.py` defaults: one env of 2048 steps a rollout, 32
        // minibatches, 10 epochs, lr 3e-4 annealed, γ 0.99, λ 0.95, clip 0.2, no entropy
        // bonus, the value loss at 0.5, grad-norm 0.5, both normalizers (`auto`: on for a
        // Box action), 1M steps (what is not listed is the default spec's). Another MuJoCo
        // env is `--gym-id`.
        Preset::new(
            "mujoco",
            "HalfCheetah-v5 with CleanRL's ppo_continuous_action.py settings: 1 env × 2048 steps, 32 minibatches, 10 epochs, normalizers on, 1M steps; needs gymnasium[mujoco]",
            cleanrl_mujoco,
        ),
        // CleanRL's `ppo_atari.py`: its defaults, on ALE's Breakout (v5, sticky actions) with
        // the standard preprocessing; 8 envs in 2 worker processes. ppo.py's defaults (4
        // epochs of 4 minibatches, lr 2.5e-4 annealed, entropy 0.01, vf 0.5, grad-norm 0.5)
        // with ppo_atari.py's clip of 0.1; frames are not normalized. The CNN's forward is
        // libtorch's (it has no fused form).
        Preset::new(
            "atari",
            "Breakout with CleanRL's ppo_atari.py settings: Atari's preprocessing, the Nature CNN, 8 envs × 128 steps, 4 minibatches, 4 epochs, lr 2.5e-4 annealed, clip 0.1, entropy 0.01, 10M steps; needs gymnasium[atari]",
            cleanrl_atari,
        ),
        // The throughput preset: mujoco's update on the same 2048-step batch, collected by
        // 8 envs (SPREAD_ENVS) × 256 steps over one worker process per core (`--workers 0`),
        // so that the envs' Python, 3/4 of mujoco's wall on one core, runs on all of them,
        // and each worker's round trip carries 4 envs' steps instead of one.
        Preset::new(
            "mujoco-fast",
            "mujoco's batch of 2048 steps from 8 envs × 256 steps, stepped by one worker process per core: the same update, the envs' Python on every core; needs gymnasium[mujoco]",
            |run, s| {
                cleanrl_mujoco(run, s);
                run.envs = SPREAD_ENVS;
                run.steps = 2048 / SPREAD_ENVS;
                run.exec.backend = Backend::Subprocess;
            },
        ),
        // CleanRL's `ppo_atari_lstm.py`: ppo_atari.py's settings with one frame a step (its
        // memory is the LSTM of 128 after the Nature CNN), 8 envs × 128 steps, 4 minibatches
        // of 2 whole envs, 4 epochs, clip 0.1, 10M steps.
        Preset::new(
            "atari-lstm",
            "Breakout with CleanRL's ppo_atari_lstm.py settings: Atari's preprocessing with one frame a step, the Nature CNN then an LSTM of 128, 8 envs × 128 steps, 4 minibatches of whole envs, 4 epochs, lr 2.5e-4 annealed, clip 0.1, entropy 0.01, 10M steps; needs gymnasium[atari]",
            |run, s| {
                cleanrl_atari(run, s);
                s.frame_stack = 1;
                run.ppo.rnn = Rnn::Lstm;
            },
        ),
        // A small memory task that every Python with gymnasium has (the worker's own
        // `hotlab/CueRecall-v0`): an LSTM of 32 learns it in 40,960 steps, a few seconds on
        // 2 cores, where no memoryless policy beats chance (`--rnn none` shows it).
        Preset::new(
            "memory",
            "hotlab's cue-recall task (a cue once, four blank steps, then a choice that pays +1 only if it matches the cue) with an LSTM of 32 after a tanh layer of 32: 16 envs × 32 steps, lr 1e-3, 40,960 steps, seconds here; with --rnn none no policy beats chance",
            |run, s| {
                s.id = "hotlab/CueRecall-v0".into();
                run.ppo.rnn = Rnn::Lstm;
                run.ppo.rnn_width = 32;
                run.ppo.hidden = vec![32];
                run.envs = 16;
                run.steps = 32;
                run.total_steps = 40_960;
                run.ppo.lr = 0.001;
            },
        ),
    ];
    /// Unknown until the env is probed: room for 64 floats, for the memory estimate.
    const OBS_BYTES: u64 = 64 * 4;

    fn gymnasium_id(&self) -> Option<String> {
        Some(self.id.clone())
    }

    fn validate(&self) -> Result<(), KnobError> {
        let id = self.id.trim();
        if id.is_empty() {
            return Err(KnobError::new(
                Self::ID.name,
                "is empty: give a Gymnasium id (CartPole-v1) or module:callable",
            ));
        }
        if id.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(KnobError::new(
                Self::ID.name,
                format!("'{id}' has spaces or control characters: an id has none"),
            ));
        }
        if self.python.as_deref().is_some_and(|p| p.trim().is_empty()) {
            return Err(KnobError::new(Self::PYTHON.name, "is empty: give an interpreter's path, or leave it out"));
        }
        Ok(())
    }

    fn diagnosis(&self, phase: Phase, profile: &Profile, run: &RunContext) -> Option<String> {
        (phase == PYTHON_STEP).then(|| {
            let per_env = 1e6 * profile.phase(PYTHON_STEP) / profile.counters.env_steps.max(1) as f64;
            let processes = match run.exec.backend {
                Backend::Subprocess => "worker processes (their time shares the span)".to_string(),
                _ => "one process: every env under one GIL".to_string(),
            };
            format!("{}'s Python, {per_env:.1} µs per env step, in {processes}", self.id)
        })
    }

    fn recommend(&self, profile: &Profile, run: &RunContext, out: &mut Vec<Recommendation>) {
        // One interpreter steps every env in turn: worker processes step their slices at
        // once, on as many cores as there are (seed 000's phenomenon, on the user's env).
        let python = profile.share(PYTHON_STEP);
        if run.exec.backend == Backend::Vectorized && run.envs >= 2 && python >= SPLIT_AT {
            let signature = format!(
                "{:.0}% of wall in {}'s Python, {} envs stepped one after another in one process",
                100.0 * python,
                self.id,
                run.envs
            );
            out.push(Recommendation::new("--backend subprocess", PYTHON_STEP, python, signature));
        }
        // One env (CleanRL's MuJoCo setting): a single env's Python runs on one core, one
        // round trip per env step, while the trainer waits. The same batch from 8 envs
        // over worker processes (the mujoco-fast preset) runs it on every core.
        if run.envs == 1 && python >= SPLIT_AT {
            let signature = format!(
                "{:.0}% of wall in {}'s Python with one env: one core steps it, a round trip per env step",
                100.0 * python,
                self.id
            );
            let knob =
                format!("--envs {SPREAD_ENVS} --steps {} --backend subprocess", (run.steps / SPREAD_ENVS).max(1));
            out.push(Recommendation::new(&knob, PYTHON_STEP, python, signature));
        }
    }
}

/// What the viewer draws: the first few envs' observation vectors, the actions taken and
/// the returns of their episodes so far.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GymFrame {
    /// The env's id.
    pub id: String,
    pub obs: Vec<Vec<f32>>,
    /// Per env, its categorical heads' choices (empty rows for a Box action space).
    pub actions: Vec<Vec<i64>>,
    /// Per env, its Box action's components as sampled (before the env clips them); empty
    /// for a Discrete or MultiDiscrete action space.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub real: Vec<Vec<f32>>,
    /// Env 0 as the env draws itself, where it has an `rgb_array` mode: the newest picture,
    /// taken at most once a second (absent in frames stored before pictures were taken).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<GymImage>,
    /// Env 0's observation as the policy sees it, where it is an image: each channel (a
    /// stack's frames, oldest first) a grey plane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seen: Option<GymSeen>,
    /// Env 0's observation leaf by leaf, where it is a Dict's or Tuple's (its rows in `obs`
    /// then empty): each leaf's key, and its values listed or its image painted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub leaves: Vec<GymLeaf>,
}

/// One leaf of env 0's structured observation: its key, its values (floats, or indices
/// from 0) where it is a vector, its channels where it is an image.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GymLeaf {
    pub key: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<f32>,
    /// Each index's choices (a Discrete's or MultiDiscrete's), where the leaf is indices.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seen: Option<GymSeen>,
}

/// An image observation's channels, each `width × height` grey bytes in base64
/// (`hotlab_protocol::pixels`); flags drawn as 0 and 255.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GymSeen {
    pub width: u32,
    pub height: u32,
    pub planes: Vec<String>,
}

/// Env 0's picture: what its `render()` returned in `rgb_array` mode, each side shrunk by
/// one whole factor to at most [`GymImage::MAX_SIDE`] pixels (every k-th pixel), as a PNG;
/// or why it could not be drawn.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GymImage {
    /// The PNG (8-bit RGB), base64; empty when `error` says why there is none.
    pub png: String,
    pub width: u32,
    pub height: u32,
    /// The batch's steps when it was drawn (1: after the first step).
    pub at_step: u64,
    /// Milliseconds the drawing took (render, shrink, PNG), in the env's worker.
    pub render_ms: f64,
    /// Why env 0 could not be drawn (a missing pygame, a render that returned nothing).
    pub error: Option<String>,
}

impl GymImage {
    /// The longest side a picture keeps.
    pub const MAX_SIDE: u32 = 200;
}
