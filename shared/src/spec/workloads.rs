//! The workloads as the spec, the lab and the browser know them: each one's declarations
//! are the `spec.rs` of its folder (`workloads/src/<name>/spec.rs`, compiled into this
//! crate, so the browser has them too): its settings (the spec's `workload` field) and their
//! knobs (flag, JSON path, help, range), its choices, its phases and its envs' counts, its
//! rollout frame, and its report rules (what its phases mean, its knobs' advice). The
//! same folder holds its native code (`hotlab-workloads`) and its view (`web.rs`,
//! `hotlab-web`).
//!
//! The registry ([`workload_list!`](crate::workload_list), `shared/src/registry.rs`) is one line per workload: its name (`--env`),
//! its folder and its settings type. From it come [`EnvName`], [`WorkloadSpec`] (in JSON an
//! object with one key, the workload's name: `{"proof": {"kb": …}}`), the workloads' knobs
//! in the spec's knob table, and every phase and count ([`PHASES`], [`COUNTS`]).

pub mod knob;

use crate::advice::Recommendation;
use crate::counters::{Count, CountInfo};
use crate::profile::{Phase, PhaseInfo, Profile};
use crate::spec::{Backend, ExecSpec, Inference, Preset, RunContext, SpecError};
use knob::Knob;
use serde::{Deserialize, Serialize};

/// What a workload's settings say about themselves, and the report rules it brings.
pub trait Settings: Default {
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
    /// Whether its observation is one vector of floats, which `--obs-norm on` normalizes.
    const FLOAT_OBS: bool = true;
    /// Its own phases (the loop's and PPO's are `profile::CORE_PHASES`).
    const PHASES: &'static [PhaseInfo] = &[];
    /// The phases its envs time themselves inside an env step, in the order its envs'
    /// part clock keeps them (at most `counters::ENV_PARTS`; each one of `PHASES`).
    const ENV_PARTS: &'static [Phase] = &[];
    /// What its envs count of their own work (at most `counters::ENV_COUNTS`).
    const COUNTS: &'static [CountInfo] = &[];
    /// Its presets: named whole specs that run it, each with a line on what it shows.
    const PRESETS: &'static [Preset] = &[];
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
    /// A buffer of its own the memory check counts: its knob, what it is, its bytes, and
    /// the fix when it does not fit.
    fn buffer(&self) -> Option<(&'static str, String, u64, &'static str)> {
        None
    }
    /// Checks every setting; the first bad one is named with what is allowed.
    fn validate(&self) -> Result<(), SpecError> {
        Ok(())
    }
    /// Checks what the run's execution settings ask of its own (an `exec` knob it honours
    /// only with one of its settings); the knob is named with what is allowed.
    fn validate_exec(&self, _exec: &ExecSpec) -> Result<(), SpecError> {
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

/// A workload's settings type as the registry knows it: found in a run's workload by its
/// type (`RunSpec::settings::<MorphoSpec>()`), so no workload needs an accessor of its own.
pub trait Registered: Settings + Sized {
    /// These settings, when `workload` is their workload.
    fn of(workload: &WorkloadSpec) -> Option<&Self>;
}

/// Every backend: an env that can live in device tensors too.
pub const ALL_BACKENDS: &[Backend] =
    &[Backend::Sequential, Backend::Threads, Backend::Subprocess, Backend::Vectorized, Backend::Device];
/// The host backends: an env that steps on the CPU only.
pub const HOST_BACKENDS: &[Backend] =
    &[Backend::Sequential, Backend::Threads, Backend::Subprocess, Backend::Vectorized];

/// The registry ([`workload_list!`](crate::workload_list), one line per workload) as this crate
/// reads it: each workload's `spec.rs`, its settings, and what the spec and report need of
/// them.
macro_rules! registry {
    ($($(#[$doc:meta])* $variant:ident = $name:literal in $module:ident ($settings:ident)),+ $(,)?) => {
        // Each workload's declarations live in its folder, beside its native code: the
        // path is from this file's folder (`shared/src/spec/`).
        #[path = "../../../workloads/src"]
        mod folders {
            $(pub mod $module { pub mod spec; })+
        }
        $(pub use folders::$module::spec as $module;)+
        $(pub use $module::$settings;)+

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

            /// Whether its observation is one vector of floats (`--obs-norm on` applies).
            pub fn float_obs(self) -> bool {
                match self { $(EnvName::$variant => <$settings as Settings>::FLOAT_OBS),+ }
            }

            /// The inference this workload's policy always uses, if it ignores `--inference`.
            pub fn fixed_inference(self) -> Option<Inference> {
                match self { $(EnvName::$variant => <$settings as Settings>::INFERENCE),+ }
            }

            /// Its settings' knobs.
            pub fn knobs(self) -> &'static [Knob] {
                match self { $(EnvName::$variant => <$settings as Settings>::KNOBS),+ }
            }

            /// The phases its envs time themselves, in their part clock's order.
            pub fn env_parts(self) -> &'static [Phase] {
                match self { $(EnvName::$variant => <$settings as Settings>::ENV_PARTS),+ }
            }

            /// The knob `--env NAME:VALUE` sets, for a workload named with an argument.
            pub fn argument(self) -> Option<&'static Knob> {
                let name = match self { $(EnvName::$variant => <$settings as Settings>::ARGUMENT),+ }?;
                self.knobs().iter().find(|k| k.name == name)
            }

            /// The knob whose values the machine lists for the launch form, if it has one.
            pub fn suggested(self) -> Option<&'static Knob> {
                let name = match self { $(EnvName::$variant => <$settings as Settings>::SUGGESTED),+ }?;
                self.knobs().iter().find(|k| k.name == name)
            }

            /// Its envs' own counts, in their slots' order.
            pub fn counts(self) -> Vec<Count> {
                match self { $(EnvName::$variant => <$settings as Settings>::COUNTS.iter().map(|c| c.count).collect()),+ }
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

        $(impl Registered for $settings {
            fn of(workload: &WorkloadSpec) -> Option<&Self> {
                match workload {
                    WorkloadSpec::$variant(s) => Some(s),
                    _ => None,
                }
            }
        })+

        impl WorkloadSpec {
            pub fn name(&self) -> EnvName {
                match self { $(WorkloadSpec::$variant(_) => EnvName::$variant),+ }
            }

            /// A workload with its default settings.
            pub fn default_for(name: EnvName) -> Self {
                match name { $(EnvName::$variant => WorkloadSpec::$variant(<$settings>::default())),+ }
            }

            /// Checks its settings: each knob's range, then the settings' own checks.
            pub fn validate(&self) -> Result<(), SpecError> {
                let json = serde_json::json!({ "workload": self });
                if let Some(json) = json.as_object() {
                    for knob in self.name().knobs() {
                        if let Some(v) = knob.get(json) {
                            knob.check(&v)?;
                        }
                    }
                }
                match self { $(WorkloadSpec::$variant(s) => s.validate()),+ }
            }

            /// Checks the run's execution settings against its settings.
            pub fn validate_exec(&self, exec: &ExecSpec) -> Result<(), SpecError> {
                match self { $(WorkloadSpec::$variant(s) => s.validate_exec(exec)),+ }
            }

            /// The Gymnasium id of its env, where its env is one.
            pub fn gymnasium_id(&self) -> Option<String> {
                match self { $(WorkloadSpec::$variant(s) => s.gymnasium_id()),+ }
            }

            /// The workload's own buffer for the memory check, if it has one.
            pub fn buffer(&self) -> Option<(&'static str, String, u64, &'static str)> {
                match self { $(WorkloadSpec::$variant(s) => s.buffer()),+ }
            }

            /// The settings that name files, by knob.
            pub fn files(&mut self) -> Vec<(&'static str, &mut String)> {
                match self { $(WorkloadSpec::$variant(s) => s.files()),+ }
            }

            /// The workload's diagnosis of a phase, where it has one.
            pub fn diagnosis(&self, phase: Phase, profile: &Profile, run: &RunContext) -> Option<String> {
                match self { $(WorkloadSpec::$variant(s) => s.diagnosis(phase, profile, run)),+ }
            }

            /// The workload's knobs' recommendations.
            pub fn recommend(&self, profile: &Profile, run: &RunContext, out: &mut Vec<Recommendation>) {
                match self { $(WorkloadSpec::$variant(s) => s.recommend(profile, run, out)),+ }
            }
        }

        /// Every workload's knobs, in the registry's order.
        pub fn knobs() -> impl Iterator<Item = &'static Knob> {
            [$(<$settings as Settings>::KNOBS),+].into_iter().flatten()
        }

        /// Every phase: the loop's and PPO's, then each workload's, ordered by kind (the
        /// order of a profile's phases and of the phase chart's stack).
        pub static PHASES: std::sync::LazyLock<Vec<PhaseInfo>> = std::sync::LazyLock::new(|| {
            let mut all: Vec<PhaseInfo> = crate::profile::CORE_PHASES.to_vec();
            $(all.extend_from_slice(<$settings as Settings>::PHASES);)+
            all.sort_by_key(|i| i.kind);
            all
        });

        /// Every workload's suggested knob (whose values the machine lists), in the
        /// registry's order.
        pub fn suggested_knobs() -> impl Iterator<Item = (EnvName, &'static Knob)> {
            [$(EnvName::$variant),+].into_iter().filter_map(|env| Some((env, env.suggested()?)))
        }

        /// Every workload's presets, in the registry's order.
        pub fn presets() -> impl Iterator<Item = &'static Preset> {
            [$(<$settings as Settings>::PRESETS),+].into_iter().flatten()
        }

        /// Every workload's own counts.
        pub static COUNTS: std::sync::LazyLock<Vec<CountInfo>> = std::sync::LazyLock::new(|| {
            [$(<$settings as Settings>::COUNTS),+].into_iter().flatten().copied().collect()
        });
    };
}

crate::workload_list!(registry);

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
    /// `NAME:VALUE` (a value of `--env`) as the workload named and its argument's knob with
    /// the value; None where NAME takes no argument or there is no `:`.
    pub fn with_argument(value: &str) -> Option<(EnvName, &'static Knob, &str)> {
        let (name, argument) = value.split_once(':')?;
        let env = name.parse::<EnvName>().ok()?;
        Some((env, env.argument()?, argument))
    }

    /// The workloads that run on `backend`, for messages.
    pub fn running_on(backend: Backend) -> Vec<&'static str> {
        Self::ALL
            .iter()
            .filter(|n| n.parse::<EnvName>().is_ok_and(|e| e.backends().contains(&backend)))
            .copied()
            .collect()
    }
}

/// What a phase is (its kind, colour and line), where the registry knows it.
pub fn phase_info(phase: Phase) -> Option<&'static PhaseInfo> {
    PHASES.iter().find(|i| i.phase == phase)
}

/// A count's label, where the registry knows it (else its name).
pub fn count_label(count: Count) -> &'static str {
    COUNTS.iter().find(|i| i.count == count).map_or(count.name(), |i| i.label)
}

/// A setting of `workload`'s own, as a knob: the launch form shows it for that workload
/// only, and the CLI lists it under the workload's name.
pub const fn setting(
    workload: EnvName,
    name: &'static str,
    path: &'static str,
    kind: knob::KnobKind,
    help: &'static str,
) -> Knob {
    Knob { name, path, workload: Some(workload), group: "Scenario", kind, help, about: "", range: None }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::{ENV_COUNTS, ENV_PARTS};

    /// A suggested knob names one of its workload's own knobs (a misspelt one would drop
    /// the launch form's list without a word).
    #[test]
    fn the_suggested_knobs_are_the_workloads_own() {
        let found: Vec<(EnvName, &str)> = suggested_knobs().map(|(env, k)| (env, k.name)).collect();
        assert_eq!(found, [(EnvName::Gym, "gym_id"), (EnvName::Envpool, "envpool_id")]);
        assert!(suggested_knobs().all(|(env, k)| k.workload == Some(env)));
    }

    #[test]
    fn each_workload_s_phases_and_counts_fit_the_slots_and_no_name_is_taken_twice() {
        for name in EnvName::ALL.iter().map(|n| n.parse::<EnvName>().unwrap()) {
            let parts = name.env_parts();
            assert!(parts.len() <= ENV_PARTS, "{name}: {} env parts, {ENV_PARTS} slots", parts.len());
            for p in parts {
                let info = phase_info(*p).unwrap_or_else(|| panic!("{name}'s env part {p} is not a phase"));
                assert_eq!(info.kind, crate::profile::PhaseKind::EnvPart, "{name}: {p}");
            }
            assert!(name.counts().len() <= ENV_COUNTS, "{name}: {} counts, {ENV_COUNTS} slots", name.counts().len());
        }
        let mut phases: Vec<&str> = PHASES.iter().map(|i| i.phase.name()).collect();
        phases.sort();
        phases.dedup();
        assert_eq!(phases.len(), PHASES.len(), "a phase name is declared twice");
        let mut counts: Vec<&str> = COUNTS.iter().map(|i| i.count.name()).collect();
        counts.sort();
        counts.dedup();
        assert_eq!(counts.len(), COUNTS.len(), "a count name is declared twice");
    }

    /// The envs' own counts sit beside the run's counters in JSON: a count named as one of
    /// those would make every message that carries both unreadable (a duplicate key), so a
    /// run of that workload would lose its metrics on the way to the lab.
    #[test]
    fn no_workload_count_is_named_as_a_run_counter() {
        let own = COUNTS.iter().map(|i| (i.count, 1)).collect();
        let c = crate::counters::Counters { own, ..Default::default() };
        let json = serde_json::to_string(&c).unwrap();
        let back: crate::counters::Counters = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"));
        assert_eq!(back, c);
    }
}
