//! A preset: a named starting point, the knobs it sets over the default spec, declared by
//! the workload it runs (its `Settings::PRESETS`). `hotlab_spec::presets` makes
//! its spec and its flags.

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
    pub const fn new(name: &'static str, about: &'static str, knobs: &'static [(&'static str, &'static str)]) -> Self {
        Self { name, about, knobs }
    }
}
