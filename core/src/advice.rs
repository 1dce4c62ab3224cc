//! A knob change the profile argues for, with Amdahl's bound on its gain: what the report
//! ranks, what each workload's own rules add (`Settings::recommend`), what an audit
//! re-runs to verify.

use crate::profile::Phase;
use serde::{Deserialize, Serialize};

/// A knob change the profile argues for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Recommendation {
    /// The flag(s) to change, e.g. `--backend vectorized`.
    pub knob: String,
    /// The phase it removes or shrinks.
    pub phase: Phase,
    /// What was measured that triggered it.
    pub signature: String,
    /// Amdahl: the most the run can speed up if the phase vanished (×).
    pub max_speedup: f64,
}

impl Recommendation {
    /// `knob` against a phase whose share of the wall is `share`: the most it can gain is
    /// that phase gone (Amdahl).
    pub fn new(knob: &str, phase: Phase, share: f64, signature: String) -> Self {
        Self { knob: knob.into(), phase, signature, max_speedup: amdahl(share) }
    }

    /// The spec fields to change, from the knob's flags: `--action-sync stacked` →
    /// `[("action_sync", "stacked")]`.
    pub fn overrides(&self) -> Vec<(String, String)> {
        flag_overrides(&self.knob)
    }
}

/// The spec fields that flags set: `--action-sync stacked` → `[("action_sync", "stacked")]`.
pub fn flag_overrides(flags: &str) -> Vec<(String, String)> {
    let words: Vec<&str> = flags.split_whitespace().collect();
    words
        .chunks(2)
        .filter_map(|pair| match pair {
            [flag, value] => Some((flag.strip_prefix("--")?.replace('-', "_"), value.to_string())),
            _ => None,
        })
        .collect()
}

/// The most a run can speed up when a phase of share `share` of its wall vanishes.
pub fn amdahl(share: f64) -> f64 {
    1.0 / (1.0 - share.clamp(0.0, 0.999))
}
