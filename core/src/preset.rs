//! A preset: a named starting point, declared by the workload it runs (its
//! `Settings::PRESETS`) as a typed edit of the default spec: a function that sets fields
//! of the run's part ([`RunPart`]) and of the workload's own settings. A misspelt field or
//! a value of the wrong type does not compile; ranges and the rules between knobs are the
//! spec's validation's, which a test runs on every preset. The registry
//! (`hotlab_specs::presets`) lists every workload's; `hotlab_spec::PresetSpec` makes each
//! one's spec and, from what it changed, its flags.

use crate::run::RunPart;

/// A named spec of the workload whose settings are `S`, with a line on what it shows.
pub struct Preset<S: 'static> {
    /// Its name (`--preset NAME`).
    pub name: &'static str,
    /// One line: what it runs and what a user sees, with its time on 2 CPU cores.
    pub about: &'static str,
    /// What it sets over the default spec (the run's part and `S::default()`); it states
    /// only what differs, which a test checks.
    pub edit: fn(&mut RunPart, &mut S),
}

impl<S> Preset<S> {
    pub const fn new(name: &'static str, about: &'static str, edit: fn(&mut RunPart, &mut S)) -> Self {
        Self { name, about, edit }
    }

    /// The run's part and the settings it makes.
    pub fn make(&self) -> (RunPart, S)
    where
        S: Default,
    {
        let (mut run, mut settings) = (RunPart::default(), S::default());
        (self.edit)(&mut run, &mut settings);
        (run, settings)
    }
}
