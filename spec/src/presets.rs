//! Presets: named starting points, each a list of knobs over the default spec (as a
//! lesson's baseline is), declared by the workload it runs (its `Settings::PRESETS`), with
//! one line on what it shows. The CLI's `--preset`, the launch form and the lab's home read
//! the same list ([`all`]); explicit values override a preset's.

use super::knobs;
use super::RunSpec;
use hotlab_core::knob::KnobKind;
use hotlab_core::preset::Preset;

/// What the spec makes of a [`Preset`] (a workload's declaration, in `hotlab-core`): its
/// whole spec, its flags, and the preset of a name.
pub trait PresetSpec {
    /// The whole spec: its knobs over the default one. The presets are the workloads' own
    /// declarations, each checked by this module's test, so a bad one is a bug, not input.
    fn spec(&self) -> RunSpec;
    /// Its knobs as `hotlab train` arguments (`["--envs", "1024", "--minibatches", "32"]`):
    /// a yes/no knob is `--X` or `--no-X`. With no `--preset`, they make the same spec.
    fn flags(&self) -> Vec<String>;
    /// Its flags as a shell line shows them (a value with a space or a quote quoted): what
    /// the home's card says the preset sets.
    fn flags_line(&self) -> String;
    /// The preset named `name`; an unknown name is refused with the list.
    fn find(name: &str) -> Result<&'static Preset, String>;
}

impl PresetSpec for Preset {
    fn spec(&self) -> RunSpec {
        knobs::apply_text(RunSpec::default(), self.knobs)
            .unwrap_or_else(|e| panic!("preset {}: {}: {}", self.name, e.field, e.message))
    }

    fn flags(&self) -> Vec<String> {
        let mut args = Vec::new();
        for (name, value) in self.knobs {
            let flag = hotlab_core::knob::flag_of(name);
            match knobs::find(name).map(|k| k.kind) {
                Some(KnobKind::Bool) if *value == "false" => args.push(flag.replacen("--", "--no-", 1)),
                Some(KnobKind::Bool) => args.push(flag),
                _ => args.extend([flag, value.to_string()]),
            }
        }
        args
    }

    fn flags_line(&self) -> String {
        let quoted = |a: String| {
            if a.is_empty() || a.contains([' ', '\'', '"']) {
                format!("'{}'", a.replace('\'', r"'\''"))
            } else {
                a
            }
        };
        self.flags().into_iter().map(quoted).collect::<Vec<_>>().join(" ")
    }

    fn find(name: &str) -> Result<&'static Preset, String> {
        all().find(|p| p.name == name).ok_or_else(|| {
            let names: Vec<&str> = all().map(|p| p.name).collect();
            format!("unknown preset '{name}'; allowed: {}", names.join(", "))
        })
    }
}

/// Every workload's presets, in the registry's order (the first is the default).
pub fn all() -> impl Iterator<Item = &'static Preset> {
    hotlab_specs::presets()
}

/// The default preset (CleanRL's CartPole run).
pub fn default() -> &'static Preset {
    all().next().expect("the registry declares presets")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn every_preset_is_a_valid_spec_of_its_workload_with_a_unique_name() {
        let mut names = HashSet::new();
        for p in all() {
            assert!(names.insert(p.name), "{} declared twice", p.name);
            p.spec().validate().unwrap_or_else(|e| panic!("{}: {}", p.name, e.message));
            assert!(!p.about.is_empty() && !p.about.contains('\n'), "{}: one line", p.name);
            assert_eq!(Preset::find(p.name).unwrap().name, p.name);
        }
        for env in ["cartpole", "proof", "morpho", "dreamer", "gym"] {
            assert!(all().any(|p| p.spec().env().as_str() == env), "a preset runs {env}");
        }
        for p in all() {
            let spec = p.spec();
            for (i, (name, _)) in p.knobs.iter().enumerate() {
                let knob = knobs::find(name).unwrap_or_else(|| panic!("{}: '{name}' is not a knob", p.name));
                if *name == "env" {
                    assert_eq!(i, 0, "{}: env first", p.name);
                    continue;
                }
                // Each knob changes the spec: a preset states only what differs.
                let without: Vec<_> = p.knobs.iter().filter(|(k, _)| k != name).copied().collect();
                let other = knobs::apply_text(RunSpec::default(), &without).unwrap();
                assert_ne!(other, spec, "{}: '{}' sets the default", p.name, knob.name);
            }
        }
        assert_eq!(default().name, "cleanrl");
        assert_eq!(default().spec(), RunSpec::default(), "the defaults are the cleanrl preset");
        let e = Preset::find("huge").unwrap_err();
        assert!(
            e.contains("'huge'")
                && e.contains("allowed: cleanrl, wide, gpu, proof, morpho, grow, dreamer, mujoco, atari, mujoco-fast"),
            "{e}"
        );
    }
}
