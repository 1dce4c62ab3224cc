//! A preset: a named starting point, the knobs it sets over the default spec, declared by
//! the workload it runs (its `Settings::PRESETS`). `hotlab_spec::presets` makes
//! its spec and its flags.
//!
//! A preset is checked when its constant is evaluated, so a typo does not compile: each
//! name it sets is `env`, one of the run's knobs or one of its workload's own, at most once,
//! and each value is of its knob's kind (a whole number, a number, yes or no, one of its
//! choices). Ranges and the rules between knobs are the spec's validation's, which a test
//! runs on every preset.

use crate::knob::{find, of_kind, same, Knob};
use crate::run_knobs::RUN;

/// A named spec with a line on what it shows.
#[derive(Clone, Copy, Debug)]
pub struct Preset {
    /// Its name (`--preset NAME`).
    pub name: &'static str,
    /// One line: what it runs and what a user sees, with its time on 2 CPU cores.
    pub about: &'static str,
    /// What it sets over the default spec: each a knob's name and its value as a flag
    /// takes it (`("envs", "1024")`); `env` first where it names another workload.
    pub knobs: &'static [(&'static str, &'static str)],
}

impl Preset {
    /// The preset `name` of the workload whose own knobs are `own`, setting `knobs`;
    /// refused at compile time where a name is not a knob, is set twice, or its value is
    /// not of its knob's kind.
    pub const fn new(
        name: &'static str,
        about: &'static str,
        knobs: &'static [(&'static str, &'static str)],
        own: &[Knob],
    ) -> Self {
        let mut i = 0;
        while i < knobs.len() {
            let (knob, value) = knobs[i];
            let mut j = 0;
            while j < i {
                assert!(!same(knobs[j].0, knob), "a preset sets a knob twice");
                j += 1;
            }
            if !same(knob, "env") {
                let kind = match find(knob, RUN) {
                    Some(k) => k.kind,
                    None => match find(knob, own) {
                        Some(k) => k.kind,
                        None => panic!("a preset sets a name that is neither the run's knob nor its workload's"),
                    },
                };
                assert!(of_kind(kind, value), "a preset's value is not of its knob's kind");
            }
            i += 1;
        }
        Self { name, about, knobs }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A preset with a misspelt knob, a value not of its kind or a knob set twice is
    /// refused (here at run time; in a `const`, the same check fails the build).
    #[test]
    fn a_misspelt_preset_is_refused() {
        let ok = Preset::new("ok", "", &[("envs", "8"), ("backend", "threads")], &[]);
        assert_eq!(ok.knobs.len(), 2);
        for knobs in
            [&[("envz", "8")][..], &[("envs", "eight")], &[("backend", "thread")], &[("envs", "8"), ("envs", "16")]]
        {
            let made = std::panic::catch_unwind(|| Preset::new("bad", "", knobs, &[]));
            assert!(made.is_err(), "{knobs:?} was taken");
        }
    }
}
