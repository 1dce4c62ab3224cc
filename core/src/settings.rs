//! What a workload's settings say about themselves (its `spec.rs` implements [`Settings`]):
//! its knobs, backends, phases, counts, presets and checks, and the report rules it brings.
//! The registry (`hotlab_specs`) reads them for every workload.

use crate::advice::Recommendation;
use crate::choices::{Backend, Inference};
use crate::counters::CountInfo;
use crate::knob::{Knob, KnobError};
use crate::preset::Preset;
use crate::profile::{Phase, PhaseInfo, Profile};
use crate::run::{ExecSpec, RunContext};

/// What a workload's settings say about themselves, and the report rules it brings.
pub trait Settings: Default + 'static {
    /// Its settings as knobs, in the order the launch form shows them.
    const KNOBS: &'static [Knob];
    /// The env backends its envs run on.
    const BACKENDS: &'static [Backend] = ALL_BACKENDS;
    /// Bytes of one env's observation (every field), for the memory a rollout needs.
    const OBS_BYTES: u64;
    /// The rollout inference its policy always uses, whatever `--inference` says (None:
    /// it follows `--inference`).
    const INFERENCE: Option<Inference> = None;
    /// Whether PPO trains it (the `ppo` settings apply and are checked).
    const PPO: bool = true;
    /// Whether a run of it starts a command its settings name (a user's script): a lab
    /// runs such commands only when it was started allowing them.
    const RUNS_COMMANDS: bool = false;
    /// Whether the run's length is its trainer's own (a user's script that runs until it
    /// ends): `total_steps` does not bound it.
    const OPEN_ENDED: bool = false;
    /// Whether its observation is one vector of floats, which `--obs-norm on` normalizes.
    const FLOAT_OBS: bool = true;
    /// Whether its policy is the shared one (the MLP or the CNN), which takes a recurrent
    /// core (`--rnn`); a workload with a policy of its own says no.
    const RECURRENT: bool = false;
    /// Its own phases (the loop's and PPO's are `profile::CORE_PHASES`).
    const PHASES: &'static [PhaseInfo] = &[];
    /// The phases its envs time themselves inside an env step, in the order its envs'
    /// part clock keeps them (at most `counters::ENV_PARTS`; each one of `PHASES`).
    const ENV_PARTS: &'static [Phase] = &[];
    /// What its envs count of their own work (at most `counters::ENV_COUNTS`).
    const COUNTS: &'static [CountInfo] = &[];
    /// Its presets: named whole specs that run it, each with a line on what it shows.
    const PRESETS: &'static [Preset<Self>] = &[];
    /// The knob that `--env NAME:VALUE` sets to VALUE (gym's `gym_id`, for `--env
    /// gym:Acrobot-v1`); None: it is named by its name alone.
    const ARGUMENT: Option<&'static str> = None;
    /// The knob whose values the machine lists for the launch form (gym's `gym_id`: the
    /// ids its Python can make), through its native hooks; None: no list.
    const SUGGESTED: Option<&'static str> = None;
    /// The Gymnasium id of the env it steps, where its env is one (a peer then steps the
    /// same env: `bench envs --peer`).
    fn gymnasium_id(&self) -> Option<String> {
        None
    }
    /// The run in a line, where its settings say more than the run's own (a script: its
    /// command); None: the run's envs, steps and backend say it.
    fn summary(&self) -> Option<String> {
        None
    }
    /// A buffer of its own the memory check counts: its knob, what it is, its bytes, and
    /// the fix when it does not fit.
    fn buffer(&self) -> Option<(&'static str, String, u64, &'static str)> {
        None
    }
    /// Checks every setting; the first bad one is named with what is allowed.
    fn validate(&self) -> Result<(), KnobError> {
        Ok(())
    }
    /// Checks what the run's execution settings ask of its own (an `exec` knob it honours
    /// only with one of its settings); the knob is named with what is allowed.
    fn validate_exec(&self, _exec: &ExecSpec) -> Result<(), KnobError> {
        Ok(())
    }
    /// The settings that name files on the machine, by knob (a lab server keeps them
    /// inside its data dir).
    fn files(&mut self) -> Vec<(&'static str, &mut String)> {
        Vec::new()
    }
    /// The report's diagnosis of a phase where this workload knows more than the report's
    /// own line (what its envs' parts are, what its settings make of them), read with the
    /// run's other settings.
    fn diagnosis(&self, _phase: Phase, _profile: &Profile, _run: &RunContext) -> Option<String> {
        None
    }
    /// Its knobs' recommendations, each where its signature shows in the profile.
    fn recommend(&self, _profile: &Profile, _run: &RunContext, _out: &mut Vec<Recommendation>) {}
}

/// Every backend: an env that can live in device tensors too.
pub const ALL_BACKENDS: &[Backend] =
    &[Backend::Sequential, Backend::Threads, Backend::Subprocess, Backend::Vectorized, Backend::Device];
/// The host backends: an env that steps on the CPU only.
pub const HOST_BACKENDS: &[Backend] =
    &[Backend::Sequential, Backend::Threads, Backend::Subprocess, Backend::Vectorized];
