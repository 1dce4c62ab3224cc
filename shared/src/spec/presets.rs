//! Presets: named starting points, each a whole spec declared by the workload it runs
//! (its `Settings::PRESETS`), with one line on what it shows. The CLI's `--preset`, the
//! launch form and the lab's home read the same list ([`all`]); explicit values override
//! a preset's.

use super::RunSpec;

/// A named spec with a line on what it shows.
#[derive(Clone, Copy, Debug)]
pub struct Preset {
    /// Its name (`--preset NAME`).
    pub name: &'static str,
    /// One line: what it runs and what a user sees, with its time on 2 CPU cores.
    pub about: &'static str,
    spec: fn() -> RunSpec,
}

impl Preset {
    pub const fn new(name: &'static str, about: &'static str, spec: fn() -> RunSpec) -> Self {
        Self { name, about, spec }
    }

    pub fn spec(&self) -> RunSpec {
        (self.spec)()
    }

    /// The preset named `name`; an unknown name is refused with the list.
    pub fn find(name: &str) -> Result<&'static Preset, String> {
        all().find(|p| p.name == name).ok_or_else(|| {
            let names: Vec<&str> = all().map(|p| p.name).collect();
            format!("unknown preset '{name}'; allowed: {}", names.join(", "))
        })
    }
}

/// Every workload's presets, in the registry's order (the first is the default).
pub fn all() -> impl Iterator<Item = &'static Preset> {
    crate::workloads::presets()
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
