//! Presets: named starting points, each a typed edit of the default spec declared by the
//! workload it runs (its `Settings::PRESETS`, [`hotlab_specs::AnyPreset`]), with one
//! line on what it shows. The CLI's `--preset`, the launch form and the lab's home read the
//! same list ([`all`]); explicit values override a preset's. Its flags are what its edit
//! changed, read from the knob table.

use super::knobs;
use super::RunSpec;
use hotlab_core::knob::KnobKind;
use hotlab_specs::AnyPreset;

/// What the spec makes of a preset (a workload's declaration): its whole spec, its flags,
/// and the preset of a name.
pub trait PresetSpec {
    /// The whole spec: the run's part and the workload its edit made.
    fn spec(&self) -> RunSpec;
    /// What it changed as `hotlab train` arguments (`["--envs", "1024", "--minibatches",
    /// "32"]`), in the knob table's order, `--env` first where it names another workload: a
    /// yes/no knob is `--X` or `--no-X`. With no `--preset`, they make the same spec.
    fn flags(&self) -> Vec<String>;
    /// Its flags as a shell line shows them (a value with a space or a quote quoted): what
    /// the home's card says the preset sets.
    fn flags_line(&self) -> String;
    /// The preset named `name`; an unknown name is refused with the list.
    fn find(name: &str) -> Result<&'static AnyPreset, String>;
}

impl PresetSpec for AnyPreset {
    fn spec(&self) -> RunSpec {
        let (run, workload) = self.make();
        RunSpec::from_parts(run, workload)
    }

    fn flags(&self) -> Vec<String> {
        let mut args = Vec::new();
        for (knob, value) in knobs::changed(&RunSpec::default(), &self.spec()) {
            let flag = hotlab_core::knob::flag_of(knob.name);
            match knob.kind {
                KnobKind::Bool if value == "false" => args.push(flag.replacen("--", "--no-", 1)),
                KnobKind::Bool => args.push(flag),
                _ => args.extend([flag, value]),
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

    fn find(name: &str) -> Result<&'static AnyPreset, String> {
        all().find(|p| p.name == name).ok_or_else(|| {
            let names: Vec<&str> = all().map(|p| p.name).collect();
            format!("unknown preset '{name}'; allowed: {}", names.join(", "))
        })
    }
}

/// Every workload's presets, in the registry's order.
pub fn all() -> impl Iterator<Item = &'static AnyPreset> {
    hotlab_specs::presets()
}

/// The default preset (CleanRL's CartPole run).
pub fn default() -> &'static AnyPreset {
    all().next().expect("the registry declares presets")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// `--name value`, `--flag` and `--no-flag` as knob names and text values.
    fn flag_pairs(flags: &[String]) -> Vec<(String, String)> {
        let mut pairs = Vec::new();
        let mut it = flags.iter().peekable();
        while let Some(f) = it.next() {
            let name = f.trim_start_matches("--").replace('-', "_");
            let knob = knobs::find(&name).or_else(|| knobs::find(name.trim_start_matches("no_")));
            match knob.map(|k| k.kind) {
                Some(KnobKind::Bool) if knobs::find(&name).is_none() => {
                    pairs.push((name.trim_start_matches("no_").to_string(), "false".into()))
                }
                Some(KnobKind::Bool) => pairs.push((name, "true".into())),
                _ => pairs.push((name, it.next().cloned().unwrap_or_default())),
            }
        }
        pairs
    }

    #[test]
    fn every_preset_is_a_valid_spec_of_its_workload_with_a_unique_name() {
        let mut names = HashSet::new();
        for p in all() {
            assert!(names.insert(p.name), "{} declared twice", p.name);
            p.spec().validate().unwrap_or_else(|e| panic!("{}: {}", p.name, e.message));
            assert!(!p.about.is_empty() && !p.about.contains('\n'), "{}: one line", p.name);
            assert_eq!(AnyPreset::find(p.name).unwrap().name, p.name);
        }
        for env in ["cartpole", "proof", "morpho", "dreamer", "gym"] {
            assert!(all().any(|p| p.spec().env().as_str() == env), "a preset runs {env}");
        }
        for p in all() {
            // Its flags make its spec, and each one changes it: a preset states only what
            // differs from the default.
            let flags = p.flags();
            let pairs: Vec<(String, String)> = flag_pairs(&flags);
            let as_text: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            assert_eq!(knobs::apply_text(RunSpec::default(), &as_text).unwrap(), p.spec(), "{}", p.name);
            for (i, (name, _)) in as_text.iter().enumerate() {
                if *name == "env" {
                    assert_eq!(i, 0, "{}: env first", p.name);
                    continue;
                }
                let without: Vec<_> = as_text.iter().filter(|(k, _)| k != name).copied().collect();
                let other = knobs::apply_text(RunSpec::default(), &without).unwrap();
                assert_ne!(other, p.spec(), "{}: '{name}' sets the default", p.name);
            }
        }
        assert_eq!(default().name, "cleanrl");
        assert_eq!(default().spec(), RunSpec::default(), "the defaults are the cleanrl preset");
        let e = AnyPreset::find("huge").unwrap_err();
        assert!(
            e.contains("'huge'")
                && e.contains("allowed: cleanrl, wide, gpu, proof, morpho, grow, dreamer, mujoco, atari, mujoco-fast"),
            "{e}"
        );
    }
}
