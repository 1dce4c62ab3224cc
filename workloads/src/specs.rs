//! `hotlab-specs`: the registry. Each workload is a folder (`workloads/src/<name>/`) and a
//! line of `registry.rs` (`pub mod name;`), which this crate's build script reads into
//! [`workload_list!`]: its variant, its name as `--env` and as its key in a spec's JSON, its
//! folder, its settings type. Every crate that knows the workloads invokes that list with a
//! macro of its own, and reads `registry.rs` as a module of its own: this crate takes each
//! folder's `spec.rs` (its declarations: settings, knobs, choices, phases, counts, presets,
//! rollout frame, report rules), `hotlab-workloads` its native code (`native.rs`),
//! `hotlab-views` its view (`web.rs`); each folder's `mod.rs` says which is which.
//!
//! From the list come [`EnvName`], [`WorkloadSpec`] (in JSON an object with one key, the
//! workload's name: `{"proof": {"kb": …}}`), every workload's knobs ([`knobs`]), presets,
//! phases ([`PHASES`]) and counts ([`COUNTS`]). A `spec.rs` is written in `hotlab-core`'s
//! words and names this crate as the other crates do: `hotlab_specs::…`.
//!
//! This file is the crate's root, beside the workload folders (its `Cargo.toml` is
//! `workloads/specs/`). The crates above name it as `hotlab_specs`.

// A folder's declarations name this crate as the other crates are named: `hotlab_specs::…`.
extern crate self as hotlab_specs;

pub use hotlab_core::settings::{Settings, ALL_BACKENDS, HOST_BACKENDS};

use hotlab_core::advice::Recommendation;
use hotlab_core::choices::{Backend, Inference};
use hotlab_core::counters::{Count, CountInfo};
use hotlab_core::knob::{Knob, KnobError, KnobKind};
use hotlab_core::profile::{Phase, PhaseInfo, Profile};
use hotlab_core::run::RunPart;
use hotlab_core::run::{ExecSpec, RunContext};
use serde::{Deserialize, Serialize};

// `workload_list!`: the registry's list (`registry.rs`), as its build script reads it.
include!(concat!(env!("OUT_DIR"), "/workload_list.rs"));

// The workload folders, whose `mod.rs` give this crate their `spec.rs`.
#[path = "registry.rs"]
mod registry;
pub use registry::*;

/// A workload's settings type as the registry knows it: found in a run's workload by its
/// type (`RunSpec::settings::<MorphoSpec>()`), so no workload needs an accessor of its own.
pub trait Registered: Settings + Sized {
    /// These settings, when `workload` is their workload.
    fn of(workload: &WorkloadSpec) -> Option<&Self>;
    /// The same, to change them.
    fn of_mut(workload: &mut WorkloadSpec) -> Option<&mut Self>;
    /// Their workload, with them.
    fn into_workload(self) -> WorkloadSpec;
}

/// The registry ([`workload_list!`], one line per workload) as this crate reads it: each
/// workload's `spec.rs`, its settings, and what the spec and report need of them.
macro_rules! registry {
    ($($(#[$doc:meta])* $variant:ident = $name:literal in $module:ident ($settings:ident)),+ $(,)?) => {
        $(pub use $module::$settings;)+

        /// A workload's name (`--env`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum EnvName { $($(#[$doc])* $variant),+ }

        impl EnvName {
            pub const ALL: &'static [&'static str] = &[$($name),+];

            pub const fn as_str(self) -> &'static str {
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

            /// Whether a run of it starts a command its settings name (a user's script).
            pub fn runs_commands(self) -> bool {
                match self { $(EnvName::$variant => <$settings as Settings>::RUNS_COMMANDS),+ }
            }

            /// Whether the run's length is its trainer's own (a user's script): `total_steps`
            /// does not bound it, and its updates are not known ahead.
            pub fn open_ended(self) -> bool {
                match self { $(EnvName::$variant => <$settings as Settings>::OPEN_ENDED),+ }
            }

            /// Whether PPO trains this workload (the `ppo` settings apply).
            pub fn uses_ppo(self) -> bool {
                match self { $(EnvName::$variant => <$settings as Settings>::PPO),+ }
            }

            /// Whether its observation is one vector of floats (`--obs-norm on` applies).
            pub fn float_obs(self) -> bool {
                match self { $(EnvName::$variant => <$settings as Settings>::FLOAT_OBS),+ }
            }

            /// Whether its policy takes a recurrent core (`--rnn`).
            pub fn recurrent(self) -> bool {
                match self { $(EnvName::$variant => <$settings as Settings>::RECURRENT),+ }
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

            fn of_mut(workload: &mut WorkloadSpec) -> Option<&mut Self> {
                match workload {
                    WorkloadSpec::$variant(s) => Some(s),
                    _ => None,
                }
            }

            fn into_workload(self) -> WorkloadSpec {
                WorkloadSpec::$variant(self)
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
            pub fn validate(&self) -> Result<(), KnobError> {
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
            pub fn validate_exec(&self, exec: &ExecSpec) -> Result<(), KnobError> {
                match self { $(WorkloadSpec::$variant(s) => s.validate_exec(exec)),+ }
            }

            /// The Gymnasium id of its env, where its env is one.
            pub fn gymnasium_id(&self) -> Option<String> {
                match self { $(WorkloadSpec::$variant(s) => s.gymnasium_id()),+ }
            }

            /// The run in a line, where the workload's settings say it better than the run's.
            pub fn summary(&self) -> Option<String> {
                match self { $(WorkloadSpec::$variant(s) => s.summary()),+ }
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
            let mut all: Vec<PhaseInfo> = hotlab_core::profile::CORE_PHASES.to_vec();
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
        pub fn presets() -> impl Iterator<Item = &'static AnyPreset> {
            static ALL: std::sync::LazyLock<Vec<AnyPreset>> = std::sync::LazyLock::new(|| {
                let mut all = Vec::new();
                $(for (index, p) in <$settings as Settings>::PRESETS.iter().enumerate() {
                    let make = |i: usize| {
                        let (run, settings) = <$settings as Settings>::PRESETS[i].make();
                        (run, WorkloadSpec::$variant(settings))
                    };
                    all.push(AnyPreset { name: p.name, about: p.about, index, make });
                })+
                all
            });
            ALL.iter()
        }

        /// Every workload's own counts.
        pub static COUNTS: std::sync::LazyLock<Vec<CountInfo>> = std::sync::LazyLock::new(|| {
            [$(<$settings as Settings>::COUNTS),+].into_iter().flatten().copied().collect()
        });
    };
}

workload_list!(registry);

/// A preset of any workload (its `Settings::PRESETS`' entry, [`hotlab_core::preset::Preset`]):
/// its name, its line, and the run's part and workload it makes.
pub struct AnyPreset {
    /// Its name (`--preset NAME`).
    pub name: &'static str,
    /// One line: what it runs and what a user sees, with its time on 2 CPU cores.
    pub about: &'static str,
    /// Its place in its workload's `PRESETS`.
    index: usize,
    make: fn(usize) -> (RunPart, WorkloadSpec),
}

impl AnyPreset {
    /// The run's part and the workload (with its settings) it makes.
    pub fn make(&self) -> (RunPart, WorkloadSpec) {
        (self.make)(self.index)
    }
}

impl std::fmt::Debug for AnyPreset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnyPreset").field("name", &self.name).finish_non_exhaustive()
    }
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
    /// `NAME:VALUE` (a value of `--env`) as the workload named and its argument's knob with
    /// the value; None where NAME takes no argument or there is no `:`.
    pub fn with_argument(value: &str) -> Option<(EnvName, &'static Knob, &str)> {
        let (name, argument) = value.split_once(':')?;
        let env = name.parse::<EnvName>().ok()?;
        Some((env, env.argument()?, argument))
    }

    /// The workload whose own setting `knob` is (None: every workload's).
    pub fn of(knob: &Knob) -> Option<EnvName> {
        knob.workload.and_then(|w| w.parse().ok())
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
    kind: KnobKind,
    help: &'static str,
) -> Knob {
    Knob { workload: Some(workload.as_str()), ..Knob::new(name, path, "Scenario", kind, help) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hotlab_core::counters::{ENV_COUNTS, ENV_PARTS};

    /// A folder the registry's list does not name is compiled by no crate: every workload
    /// folder (one with a `mod.rs`) is a line of `registry.rs`, and each line a folder.
    #[test]
    fn every_workload_folder_is_a_line_of_the_registry() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../src");
        let mut folders: Vec<String> = std::fs::read_dir(&src)
            .unwrap()
            .flatten()
            .filter(|e| e.path().join("mod.rs").is_file())
            .map(|e| e.file_name().to_string_lossy().to_string())
            .collect();
        folders.sort();
        let mut listed = EnvName::ALL.to_vec();
        listed.sort();
        assert_eq!(folders, listed, "a workload folder needs its line in workloads/src/registry.rs: `pub mod NAME;`");
    }

    /// A suggested knob names one of its workload's own knobs (a misspelt one would drop
    /// the launch form's list without a word).
    #[test]
    fn the_suggested_knobs_are_the_workloads_own() {
        let found: Vec<(EnvName, &str)> = suggested_knobs().map(|(env, k)| (env, k.name)).collect();
        assert_eq!(found, [(EnvName::Gym, "gym_id"), (EnvName::Envpool, "envpool_id")]);
        assert!(suggested_knobs().all(|(env, k)| k.workload == Some(env.as_str())));
    }

    #[test]
    fn each_workload_s_phases_and_counts_fit_the_slots_and_no_name_is_taken_twice() {
        for name in EnvName::ALL.iter().map(|n| n.parse::<EnvName>().unwrap()) {
            let parts = name.env_parts();
            assert!(parts.len() <= ENV_PARTS, "{name}: {} env parts, {ENV_PARTS} slots", parts.len());
            for p in parts {
                let info = phase_info(*p).unwrap_or_else(|| panic!("{name}'s env part {p} is not a phase"));
                assert_eq!(info.kind, hotlab_core::profile::PhaseKind::EnvPart, "{name}: {p}");
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
        let c = hotlab_core::counters::Counters { own, ..Default::default() };
        let json = serde_json::to_string(&c).unwrap();
        let back: hotlab_core::counters::Counters =
            serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"));
        assert_eq!(back, c);
    }
}
