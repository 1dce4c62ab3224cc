//! The audit's arithmetic: a change to a run (`KEY=VALUE`, by knob) and what interleaved
//! repeats of the baseline and its variant say about it.
//!
//! Each repeat is a pair (baseline, variant) run back to back, so that drift on a shared
//! machine hits both alike; a pair gives one steps/s ratio, variant over baseline. Pairs of
//! the baseline against itself (A/A) give this machine's noise now. A change is judged by
//! where its ratios' 95 % interval lies against the noise's.

use crate::knobs::{self, Knob};
use crate::report::Recommendation;
use crate::spec::{json, RunSpec, SpecError};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Knobs set to values: one (`--change KEY=VALUE`), or a recommendation's (which may set
/// two together, e.g. `--backend subprocess --wait spin`).
#[derive(Clone, Debug)]
pub struct Change {
    pub settings: Vec<(&'static Knob, Value)>,
    /// As written (`lr=0.001`, or the recommendation's flags).
    pub text: String,
    /// The most the run can speed up by it, when a report predicted it (×).
    pub bound: Option<f64>,
}

fn knob(key: &str) -> Result<&'static Knob, SpecError> {
    knobs::find(key.trim()).ok_or_else(|| {
        let names: Vec<&str> = knobs::KNOBS.iter().map(|k| k.name).collect();
        SpecError::new("change", format!("'{}' is not a knob; the knobs: {}", key.trim(), names.join(", ")))
    })
}

impl Change {
    /// `KEY=VALUE`, KEY a knob's name (the flag in snake_case: `backend`, `lr`).
    pub fn parse(text: &str) -> Result<Self, SpecError> {
        let Some((key, value)) = text.split_once('=') else {
            return Err(SpecError::new("change", format!("'{text}': write KEY=VALUE, e.g. backend=threads")));
        };
        let knob = knob(key)?;
        Ok(Self { settings: vec![(knob, knob.kind.value(value))], text: text.trim().to_string(), bound: None })
    }

    /// A report's recommendation, with its Amdahl bound.
    pub fn recommended(r: &Recommendation) -> Result<Self, SpecError> {
        let settings = r
            .overrides()
            .iter()
            .map(|(key, value)| knob(key).map(|k| (k, k.kind.value(value))))
            .collect::<Result<Vec<_>, _>>()?;
        if settings.is_empty() {
            return Err(SpecError::new("change", format!("the recommendation '{}' sets no knob", r.knob)));
        }
        Ok(Self { settings, text: r.knob.clone(), bound: Some(r.max_speedup) })
    }

    /// The variant: `base` with this change, validated; refused (naming the field) when
    /// the spec refuses a value, a knob is not the workload's, or nothing changes.
    pub fn apply(&self, base: &RunSpec) -> Result<RunSpec, SpecError> {
        let env = base.env();
        let Ok(Value::Object(mut fields)) = serde_json::to_value(base) else {
            return Err(SpecError::new("change", "the baseline's spec does not serialize"));
        };
        for (knob, value) in &self.settings {
            if !knob.applies_to(env) {
                return Err(SpecError::new(knob.name, format!("{} is not a setting of the {env} workload", knob.name)));
            }
            knob.set(&mut fields, value.clone());
        }
        let variant = json::parse(Value::Object(fields)).map_err(|r| r.error)?;
        variant.validate()?;
        if variant == *base {
            let field = self.settings.first().map_or("change", |(k, _)| k.name);
            return Err(SpecError::new(field, format!("{}: the baseline already has it", self.text)));
        }
        Ok(variant)
    }
}

/// A median and its 95 % interval.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub median: f64,
    pub low: f64,
    pub high: f64,
}

/// Student's t at 97.5 % for 1 to 30 degrees of freedom.
const T_975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120,
    2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
];

/// The ratios' median and a 95 % t interval on their logarithms (a ratio of 2 and one of
/// 0.5 are equally far from 1); None for fewer than two, or any not positive and finite.
pub fn interval(ratios: &[f64]) -> Option<Interval> {
    if ratios.len() < 2 || ratios.iter().any(|r| !(r.is_finite() && *r > 0.0)) {
        return None;
    }
    let logs: Vec<f64> = ratios.iter().map(|r| r.ln()).collect();
    let n = logs.len() as f64;
    let mean = logs.iter().sum::<f64>() / n;
    let sd = (logs.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    let t = T_975.get(logs.len() - 2).copied().unwrap_or(1.96);
    let half = t * sd / n.sqrt();
    let mut sorted = ratios.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    let median = if sorted.len() % 2 == 1 { sorted[mid] } else { (sorted[mid - 1] * sorted[mid]).sqrt() };
    Some(Interval { median, low: (mean - half).exp(), high: (mean + half).exp() })
}

/// What the measurement says of a change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Faster beyond this machine's noise.
    Confirmed,
    /// Within the noise.
    NoEffect,
    /// Slower beyond the noise.
    Regression,
    /// Faster than the report's bound allows: its model missed something.
    BeyondBound,
}

/// Judges a change's interval against the A/A noise's: beyond it only when the two do not
/// overlap; beyond `bound` (the report's predicted ratio at most) only when its whole
/// interval is.
pub fn verdict(change: &Interval, noise: &Interval, bound: Option<f64>) -> Verdict {
    if change.low > noise.high {
        match bound {
            Some(b) if change.low > b => Verdict::BeyondBound,
            _ => Verdict::Confirmed,
        }
    } else if change.high < noise.low {
        Verdict::Regression
    } else {
        Verdict::NoEffect
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-3
    }

    #[test]
    fn the_interval_is_symmetric_in_log_and_widens_with_spread() {
        let same = interval(&[1.2, 1.2, 1.2]).unwrap();
        assert_eq!((same.median, same.low, same.high), (1.2, 1.2, 1.2));
        let i = interval(&[0.5, 2.0]).unwrap();
        assert!(close(i.median, 1.0) && close(i.low * i.high, 1.0), "{i:?}");
        // ln(0.5) and ln(2): mean 0, sd ln(2)·√2, half = 12.706 · ln 2.
        assert!(close(i.high.ln(), 12.706 * 2f64.ln()), "{i:?}");
        let narrow = interval(&[1.10, 1.11, 1.09, 1.10]).unwrap();
        let wide = interval(&[1.30, 0.90, 1.10, 1.10]).unwrap();
        assert!(narrow.high - narrow.low < wide.high - wide.low);
        assert!(narrow.low > 1.05 && narrow.high < 1.15, "{narrow:?}");
        assert_eq!(interval(&[1.0]), None, "one pair says nothing of the spread");
        assert_eq!(interval(&[1.0, 0.0]), None);
        assert_eq!(interval(&[1.0, f64::NAN]), None);
    }

    #[test]
    fn a_change_is_judged_against_the_noise_and_the_bound() {
        let noise = Interval { median: 1.0, low: 0.97, high: 1.03 };
        let at = |low, high| Interval { median: (low + high) / 2.0, low, high };
        assert_eq!(verdict(&at(1.10, 1.30), &noise, None), Verdict::Confirmed);
        assert_eq!(verdict(&at(1.10, 1.30), &noise, Some(1.5)), Verdict::Confirmed);
        assert_eq!(verdict(&at(1.60, 1.80), &noise, Some(1.5)), Verdict::BeyondBound);
        assert_eq!(verdict(&at(1.40, 1.80), &noise, Some(1.5)), Verdict::Confirmed, "the bound within the interval");
        assert_eq!(verdict(&at(1.00, 1.20), &noise, None), Verdict::NoEffect, "overlaps the noise");
        assert_eq!(verdict(&at(0.60, 0.90), &noise, None), Verdict::Regression);
    }

    #[test]
    fn changes_name_a_knob_and_a_value_the_spec_accepts_and_that_differs() {
        let base = RunSpec::default();
        let v = Change::parse("backend=threads").unwrap().apply(&base).unwrap();
        assert_eq!(v.exec.backend.to_string(), "threads");
        assert_eq!(Change::parse(" lr = 0.001 ").unwrap().apply(&base).unwrap().ppo.lr, 0.001);
        assert_eq!(Change::parse("hidden=128,128").unwrap().apply(&base).unwrap().ppo.hidden, vec![128, 128]);
        let e = Change::parse("backend").unwrap_err();
        assert_eq!(e.field, "change");
        let e = Change::parse("speed=11").unwrap_err();
        assert!(e.field == "change" && e.message.contains("'speed' is not a knob"), "{e}");
        let e = Change::parse("envs=0").unwrap().apply(&base).unwrap_err();
        assert_eq!(e.field, "envs", "the spec's own refusal: {e}");
        let e = Change::parse("backend=fast").unwrap().apply(&base).unwrap_err();
        assert_eq!(e.field, "backend", "{e}");
        let e = Change::parse("envs=4").unwrap().apply(&base).unwrap_err();
        assert!(e.field == "envs" && e.message.contains("already has it"), "{e}");
        let e = Change::parse("proof_depth=6").unwrap().apply(&base).unwrap_err();
        assert!(e.field == "proof_depth" && e.message.contains("cartpole"), "{e}");
    }

    #[test]
    fn a_recommendation_is_a_change_with_its_bound() {
        let r = Recommendation {
            knob: "--backend subprocess --wait spin".into(),
            phase: crate::profile::Phase::EnvWait,
            signature: String::new(),
            max_speedup: 1.8,
        };
        let c = Change::recommended(&r).unwrap();
        assert_eq!(c.bound, Some(1.8));
        let base = RunSpec::default();
        let v = c.apply(&base).unwrap();
        assert_eq!((v.exec.backend.to_string(), v.exec.wait.to_string()), ("subprocess".into(), "spin".into()));
        let none = Recommendation { knob: "fewer envs".into(), ..r };
        assert_eq!(Change::recommended(&none).unwrap_err().field, "change");
    }
}
