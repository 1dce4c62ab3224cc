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
    /// The catalogue's row it is an instance of, where the rule knows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row: Option<u8>,
    /// The lesson that teaches the fix (its id: `hotlab lesson run ID`, `#/lesson/ID`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lesson: Option<String>,
    /// Where in the code it happens (`train.py:120 (main)`), for advice about a user's script.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub site: Option<String>,
    /// The change in words, where no flag makes it (a change to the script's code): then
    /// `knob` is empty and an audit needs a variant command that makes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Recommendation {
    /// `knob` against a phase whose share of the wall is `share`: the most it can gain is
    /// that phase gone (Amdahl).
    pub fn new(knob: &str, phase: Phase, share: f64, signature: String) -> Self {
        Self::bounded(knob, phase, amdahl(share), signature)
    }

    /// `knob` with a bound already known (×).
    pub fn bounded(knob: &str, phase: Phase, max_speedup: f64, signature: String) -> Self {
        Self { knob: knob.into(), phase, signature, max_speedup, row: None, lesson: None, site: None, fix: None }
    }

    /// Names its catalogue row and the lesson that teaches it.
    pub fn teaching(self, row: u8, lesson: &str) -> Self {
        Self { row: Some(row), lesson: Some(lesson.into()), ..self }
    }

    /// Where in the script it happens.
    pub fn at(self, site: Option<String>) -> Self {
        Self { site, ..self }
    }

    /// The change in words, when it is a change to the script's code.
    pub fn fixing(self, fix: impl Into<String>) -> Self {
        Self { fix: Some(fix.into()), ..self }
    }

    /// Whether flags make it (an audit can re-run it), or it is a change to the code.
    pub fn auditable(&self) -> bool {
        !self.knob.trim().is_empty()
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
