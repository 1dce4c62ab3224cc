//! `hotlab-core`: the words every layer of hotlab shares, and that a workload's declarations
//! (its folder's `spec.rs`, compiled into `hotlab-specs`) are written in: what a knob is
//! ([`knob`]) and the run's own knobs ([`run_knobs`]), the run's settings besides the
//! workload's ([`run`]) and their choices ([`choices`]), what a workload's settings say of
//! themselves ([`settings`]), presets ([`preset`]), phases and profiles ([`profile`]),
//! counters ([`counters`]), what a probe measured of a user's script ([`script`]) and the
//! report's advice ([`advice`]).
//!
//! It names no workload: the registry above it (`hotlab-specs`) does, and `hotlab-spec`
//! above that holds `RunSpec`, which carries a workload's settings. The fuzz targets'
//! budget and seed are here too ([`fuzz`]), for every crate's fuzz tests.

pub mod advice;
pub mod choices;
pub mod counters;
pub mod fuzz;
pub mod knob;
pub mod names;
pub mod preset;
pub mod profile;
pub mod run;
pub mod run_knobs;
pub mod script;
pub mod settings;
