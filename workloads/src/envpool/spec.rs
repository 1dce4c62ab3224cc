//! `envpool`: one of EnvPool's C++ envs (`--env envpool:Breakout-v5`, `envpool:HalfCheetah-v5`),
//! a batch stepped by EnvPool's own threads inside one Python worker process that writes
//! into the same shared region as the `gym` workload's workers: the trainer does not know
//! which simulator it drives. Its settings, their knobs, its phase and presets.
//!
//! A module of `hotlab-specs`, the registry (the lab and the browser read it too): it is
//! written in `hotlab-core`'s words, names the registry `hotlab_specs`, and links no libtorch.

use hotlab_core::advice::Recommendation;
use hotlab_core::choices::{Backend, Inference, Norm};
use hotlab_core::knob::{Knob, KnobError, KnobKind::*};
use hotlab_core::preset::Preset;
use hotlab_core::profile::{Phase, PhaseInfo, PhaseKind, Profile};
use hotlab_core::run::RunContext;
use hotlab_specs::{setting, EnvName, Settings};
use serde::{Deserialize, Serialize};

/// An EnvPool env's settings: in JSON `{"envpool": {"id": …, "threads": …, "kwargs": {…}}}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EnvpoolSpec {
    /// EnvPool's id (`Breakout-v5`, `Pong-v5`, `HalfCheetah-v5`). Flag `--envpool-id`, or
    /// `--env envpool:ID`.
    pub id: String,
    /// EnvPool's threads stepping each worker's batch (0: EnvPool's default, one per core).
    /// Flag `--envpool-threads`.
    pub threads: usize,
    /// The interpreter with envpool (None: `$HOTLAB_ENVPOOL_PYTHON`, the project's
    /// `.venv-envpool`, then the `gym` workload's default). Flag `--envpool-python`.
    pub python: Option<String>,
    /// Keywords for `envpool.make_gymnasium`, a JSON object; Atari's ids get
    /// `episodic_life` and `reward_clip` on unless they say otherwise. Flag `--envpool-kwargs`.
    pub kwargs: serde_json::Map<String, serde_json::Value>,
}

impl Default for EnvpoolSpec {
    fn default() -> Self {
        Self { id: "Breakout-v5".into(), threads: 0, python: None, kwargs: serde_json::Map::new() }
    }
}

/// EnvPool's step of a worker's batch (its C++ threads, and the worker's Python around
/// them), timed in the worker process.
pub const ENVPOOL_STEP: Phase = Phase::new("envpool_step");

/// The most threads a batch may ask EnvPool for.
pub const MAX_THREADS: usize = 1024;

/// The knobs other code names (errors, hooks), declared once here and listed in `KNOBS`.
impl EnvpoolSpec {
    /// The knob of `--envpool-id`.
    pub const ID: Knob = setting(EnvName::Envpool, "envpool_id", "workload.envpool.id", Text, "envpool: one of EnvPool's C++ envs (Breakout-v5, HalfCheetah-v5)")
        .about("one of EnvPool's own C++ envs: Atari's games (Breakout-v5, Pong-v5: Atari's preprocessing is EnvPool's, a [4, 84, 84] stack), MuJoCo's (HalfCheetah-v5, Hopper-v4), classic control; --env envpool:ID says the same");

    /// The knob of `--envpool-python`.
    pub const PYTHON: Knob = setting(
        EnvName::Envpool,
        "envpool_python",
        "workload.envpool.python",
        OptionalText,
        "envpool: the Python interpreter with envpool (empty: .venv-envpool)",
        )
        .about("the Python interpreter with envpool (default: $HOTLAB_ENVPOOL_PYTHON, the project's .venv-envpool, which `cargo xtask lab --envpool` makes, then the gym workload's default)");
}

impl Settings for EnvpoolSpec {
    /// The shared policy (the MLP, or the CNN for images): `--rnn` gives it a recurrent core.
    const RECURRENT: bool = true;
    const PHASES: &'static [PhaseInfo] = &[PhaseInfo::new(
        ENVPOOL_STEP,
        PhaseKind::EnvPart,
        "#76a5af",
        "EnvPool's step of the batch (its C++ threads, and the worker's Python around them), timed in its worker process",
    )];
    const ENV_PARTS: &'static [Phase] = &[ENVPOOL_STEP];
    /// `--env envpool:ID`.
    const ARGUMENT: Option<&'static str> = Some(Self::ID.name);
    const SUGGESTED: Option<&'static str> = Some(Self::ID.name);

    const KNOBS: &'static [Knob] = &[
        Self::ID,
        setting(EnvName::Envpool, "envpool_threads", "workload.envpool.threads", Int, "envpool: EnvPool's threads per worker (0: one per core)")
            .range(0.0, MAX_THREADS as f64)
            .about("the threads EnvPool steps each worker's batch with (its num_threads); 0 is EnvPool's default, one per core"),
        Self::PYTHON,
        setting(EnvName::Envpool, "envpool_kwargs", "workload.envpool.kwargs", Object, "envpool: make_gymnasium()'s keywords, a JSON object")
            .about("keywords for envpool.make_gymnasium, a JSON object ('{\"repeat_action_probability\": 0.25}', '{\"max_episode_steps\": 1000}'); Atari's ids get CleanRL's ppo_atari_envpool.py settings, episodic_life and reward_clip on, unless these say otherwise")];
    /// One worker process holds each slice of the envs as one EnvPool batch: all of them
    /// (`vectorized`) or a slice per process (`subprocess`).
    const BACKENDS: &'static [Backend] = &[Backend::Vectorized, Backend::Subprocess];

    const PRESETS: &'static [Preset<Self>] = &[
        // CleanRL's `ppo_atari_envpool.py`: `ppo_atari.py`'s settings (8 envs × 128 steps, 4
        // minibatches, 4 epochs, lr 2.5e-4 annealed, clip 0.1, entropy 0.01) with EnvPool's
        // Breakout-v5, episodic life and clipped rewards; one worker process holds the
        // batch. The CNN's forward is libtorch's (it has no fused form).
        Preset::new(
            "atari-envpool",
            "Breakout with CleanRL's ppo_atari_envpool.py settings: EnvPool's C++ Atari (episodic life, rewards clipped), the Nature CNN, 8 envs × 128 steps, 4 minibatches, 4 epochs, lr 2.5e-4 annealed, clip 0.1, entropy 0.01, 10M steps; needs envpool",
            |run, _| {
                run.envs = 8;
                run.total_steps = 10_000_000;
                run.exec.inference = Inference::Eager;
                run.ppo.clip = 0.1;
                run.ppo.obs_norm = Norm::Off;
                run.ppo.reward_norm = Norm::Off;
            },
        ),
        // The throughput preset for a GPU box with many cores: 64 envs (EnvPool's threads on
        // every core) × 128 steps, a batch of 8,192 in 8 minibatches, on the GPU where there
        // is one. Designed from PufferLib's and EnvPool's Atari settings, not yet measured
        // on a card.
        Preset::new(
            "atari-gpu",
            "Breakout for a many-core GPU box: EnvPool's batch of 64 envs × 128 steps on every core, 8 minibatches of 1,024, 4 epochs, on the GPU; needs envpool",
            |run, _| {
                run.envs = 64;
                run.total_steps = 10_000_000;
                run.exec.inference = Inference::Eager;
                run.ppo.minibatches = 8;
                run.ppo.clip = 0.1;
                run.ppo.obs_norm = Norm::Off;
                run.ppo.reward_norm = Norm::Off;
            },
        ),
    ];
    /// Atari's `[4, 84, 84]` stack of bytes, for the memory estimate.
    const OBS_BYTES: u64 = 4 * 84 * 84;

    fn validate(&self) -> Result<(), KnobError> {
        let id = self.id.trim();
        if id.is_empty() {
            return Err(KnobError::new(
                "envpool_id",
                "is empty: give one of EnvPool's ids (Breakout-v5, HalfCheetah-v5)",
            ));
        }
        if id.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(KnobError::new(
                "envpool_id",
                format!("'{id}' has spaces or control characters: an id has none"),
            ));
        }
        if self.python.as_deref().is_some_and(|p| p.trim().is_empty()) {
            return Err(KnobError::new(Self::PYTHON.name, "is empty: give an interpreter's path, or leave it out"));
        }
        Ok(())
    }

    fn diagnosis(&self, phase: Phase, profile: &Profile, _run: &RunContext) -> Option<String> {
        (phase == ENVPOOL_STEP).then(|| {
            let per_env = 1e6 * profile.phase(ENVPOOL_STEP) / profile.counters.env_steps.max(1) as f64;
            format!("EnvPool's {}, {per_env:.1} µs per env step on its own threads", self.id)
        })
    }

    fn recommend(&self, _profile: &Profile, _run: &RunContext, _out: &mut Vec<Recommendation>) {}
}
