//! The audit's arithmetic: a change to a run (`KEY=VALUE`, by knob) and what interleaved
//! repeats of the baseline and its variant say about it.
//!
//! Each repeat is a pair (baseline, variant) run back to back, so that drift on a shared
//! machine hits both alike; a pair gives one steps/s ratio, variant over baseline. Pairs of
//! the baseline against itself (A/A) give this machine's noise now. A change is judged by
//! where its ratios' 95 % interval lies against the noise's.

use hotlab_core::advice::Recommendation;
use hotlab_core::knob::Knob;
use hotlab_core::profile::{Phase, Profile};
use hotlab_spec::knobs;
use hotlab_spec::{json, RunSpec, SpecError};
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
    /// The phase it targets, when a report recommended it.
    pub target: Option<Phase>,
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
        let settings = vec![(knob, knob.kind.value(value))];
        Ok(Self { settings, text: text.trim().to_string(), bound: None, target: None })
    }

    /// A report's recommendation, with its Amdahl bound.
    pub fn recommended(r: &Recommendation) -> Result<Self, SpecError> {
        Ok(Self { target: Some(r.phase), ..Self::flags(&r.knob, Some(r.max_speedup))? })
    }

    /// Flags and values (`--backend subprocess --wait spin`), as a recommendation writes them.
    pub fn flags(text: &str, bound: Option<f64>) -> Result<Self, SpecError> {
        let settings = hotlab_core::advice::flag_overrides(text)
            .iter()
            .map(|(key, value)| knob(key).map(|k| (k, k.kind.value(value))))
            .collect::<Result<Vec<_>, _>>()?;
        if settings.is_empty() {
            return Err(SpecError::new("change", format!("'{text}' sets no knob")));
        }
        Ok(Self { settings, text: text.to_string(), bound, target: None })
    }

    /// A change as [`Change::text`] wrote it (either form), with its bound: how a stored
    /// audit is read back.
    pub fn restore(text: &str, bound: Option<f64>) -> Result<Self, SpecError> {
        match text.trim_start().starts_with("--") {
            true => Self::flags(text, bound),
            false => Ok(Self { bound, ..Self::parse(text)? }),
        }
    }

    /// The variant: `base` with this change, validated; refused (naming the field) when
    /// the spec refuses a value, a knob is not the workload's, or nothing changes.
    pub fn apply(&self, base: &RunSpec) -> Result<RunSpec, SpecError> {
        let env = base.env();
        let Ok(Value::Object(mut fields)) = serde_json::to_value(base) else {
            return Err(SpecError::new("change", "the baseline's spec does not serialize"));
        };
        for (knob, value) in &self.settings {
            if !knob.applies_to(env.as_str()) {
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

/// What one run of an audit measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    /// Env steps per second of training.
    pub sps: f64,
    /// The run's phase totals and counters.
    pub profile: Profile,
    /// Mean return of the last 100 episodes, when any ended.
    pub mean_return: Option<f64>,
}

/// Which spec one run of an audit trains.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Slot {
    Baseline,
    /// The baseline with change `i` applied.
    Variant(usize),
}

/// The order of an audit's runs: per repeat, `A A` (the noise now), then `V A` for each
/// change: the variant paired with the baseline run just before it, and a fresh baseline
/// for the next change's pair. Drift on a shared machine hits both runs of a pair alike.
pub fn schedule(changes: usize, repeats: usize) -> Vec<Slot> {
    let mut out = Vec::with_capacity(repeats * (2 + 2 * changes));
    for _ in 0..repeats {
        out.extend([Slot::Baseline, Slot::Baseline]);
        for i in 0..changes {
            out.extend([Slot::Variant(i), Slot::Baseline]);
        }
    }
    out
}

/// One change's measurement.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChangeResult {
    /// As written (`backend=threads`, or a recommendation's flags).
    pub change: String,
    pub verdict: Verdict,
    /// Variant steps/s over baseline steps/s, over the pairs.
    pub ratio: Interval,
    /// The report's predicted ratio at most, when the change came from it.
    pub bound: Option<f64>,
    /// The phase the change targets (a recommendation's), else the one whose share moved
    /// most, and its share of the time before and after (medians).
    pub phase: Phase,
    pub phase_share_before: f64,
    pub phase_share_after: f64,
    /// The phase whose share moved most (what a `beyond_bound` change moved besides its target).
    pub moved: Phase,
    /// Mean return of the last 100 episodes, baseline and variant (medians over repeats).
    pub learning: Learning,
    /// The variant's return fell below the baseline's by more than a tenth.
    pub learning_worse: bool,
}

/// Learning parity: the baseline's and the variant's median return.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Learning {
    pub baseline: Option<f64>,
    pub variant: Option<f64>,
}

/// An audit's result (`hotlab audit --json`'s last line, and what the lab stores).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AuditReport {
    pub baseline: RunSpec,
    pub repeats: usize,
    /// The baseline against itself.
    pub noise: Interval,
    pub changes: Vec<ChangeResult>,
}

/// The middle value (the mean of the two middle ones for an even count); None for none.
pub fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    Some(if v.len() % 2 == 1 { v[mid] } else { (v[mid - 1] + v[mid]) / 2.0 })
}

/// What to audit: a baseline, its changes (each applied and validated) and the repeats.
#[derive(Clone, Debug)]
pub struct Plan {
    pub baseline: RunSpec,
    pub changes: Vec<Change>,
    /// The baseline with each change applied, in `changes`' order.
    pub variants: Vec<RunSpec>,
    /// Pairs per change, and A/A pairs.
    pub repeats: usize,
}

/// The fewest repeats: one pair says nothing of the spread.
pub const MIN_REPEATS: usize = 2;
/// The most repeats an audit may ask for.
pub const MAX_REPEATS: usize = 30;

impl Plan {
    /// Refuses (naming the field) fewer than two repeats, no change, and a change the
    /// spec refuses or that leaves the baseline as it is.
    pub fn new(baseline: RunSpec, changes: Vec<Change>, repeats: usize) -> Result<Self, SpecError> {
        if !(MIN_REPEATS..=MAX_REPEATS).contains(&repeats) {
            return Err(SpecError::new(
                "repeats",
                format!("must be between {MIN_REPEATS} and {MAX_REPEATS} (got {repeats}); one pair says nothing of the spread"),
            ));
        }
        if changes.is_empty() {
            return Err(SpecError::new("change", "no change to audit: give at least one KEY=VALUE"));
        }
        baseline.validate()?;
        let variants = changes.iter().map(|c| c.apply(&baseline)).collect::<Result<_, _>>()?;
        Ok(Self { baseline, changes, variants, repeats })
    }

    /// The runs in order.
    pub fn schedule(&self) -> Vec<Slot> {
        schedule(self.changes.len(), self.repeats)
    }

    /// The spec a slot trains.
    pub fn spec(&self, slot: Slot) -> &RunSpec {
        match slot {
            Slot::Baseline => &self.baseline,
            Slot::Variant(i) => &self.variants[i],
        }
    }

    /// What a slot is, for people: `baseline` or the change.
    pub fn label(&self, slot: Slot) -> &str {
        match slot {
            Slot::Baseline => "baseline",
            Slot::Variant(i) => &self.changes[i].text,
        }
    }

    /// The measurements of one slot's runs, in order (`measured` in the schedule's order).
    pub fn runs_of<'a>(&self, slot: Slot, measured: &'a [Measured]) -> Vec<&'a Measured> {
        self.schedule().into_iter().zip(measured).filter(|(s, _)| *s == slot).map(|(_, m)| m).collect()
    }

    /// The audit's result from its runs' measurements, in [`Plan::schedule`]'s order.
    pub fn conclude(&self, measured: &[Measured]) -> Result<AuditReport, String> {
        let n = self.changes.len();
        if measured.len() != self.schedule().len() {
            return Err(format!("{} runs measured, the audit has {}", measured.len(), self.schedule().len()));
        }
        let mut noise = Vec::new();
        let mut pairs: Vec<Vec<(&Measured, &Measured)>> = vec![Vec::new(); n];
        for repeat in measured.chunks(2 + 2 * n) {
            noise.push(repeat[1].sps / repeat[0].sps);
            let mut before = &repeat[1];
            for (i, vs) in repeat[2..].chunks(2).enumerate() {
                pairs[i].push((before, &vs[0]));
                before = &vs[1];
            }
        }
        let noise = interval(&noise).ok_or("the baseline's steps/s were not measurable")?;
        let changes =
            self.changes.iter().zip(pairs).map(|(c, p)| judge(c, &p, &noise)).collect::<Result<Vec<_>, _>>()?;
        Ok(AuditReport { baseline: self.baseline.clone(), repeats: self.repeats, noise, changes })
    }
}

fn judge(change: &Change, pairs: &[(&Measured, &Measured)], noise: &Interval) -> Result<ChangeResult, String> {
    let ratios: Vec<f64> = pairs.iter().map(|(a, b)| b.sps / a.sps).collect();
    let ratio = interval(&ratios).ok_or_else(|| format!("{}: steps/s were not measurable", change.text))?;
    let share = |after: bool, p: Phase| {
        median(pairs.iter().map(|(a, b)| if after { b } else { a }.profile.share(p)).collect()).unwrap_or(0.0)
    };
    let moved = |p: Phase| (share(true, p) - share(false, p)).abs();
    let most = hotlab_specs::PHASES
        .iter()
        .map(|i| i.phase)
        .max_by(|&p, &q| moved(p).total_cmp(&moved(q)))
        .unwrap_or(Phase::OTHER);
    let phase = change.target.unwrap_or(most);
    let returns =
        |after: bool| median(pairs.iter().filter_map(|(a, b)| if after { b } else { a }.mean_return).collect());
    let learning = Learning { baseline: returns(false), variant: returns(true) };
    let learning_worse = match (learning.baseline, learning.variant) {
        (Some(b), Some(v)) => v < b - 0.1 * b.abs().max(1.0),
        (Some(_), None) => true,
        _ => false,
    };
    Ok(ChangeResult {
        change: change.text.clone(),
        verdict: verdict(&ratio, noise, change.bound),
        ratio,
        bound: change.bound,
        phase,
        phase_share_before: share(false, phase),
        phase_share_after: share(true, phase),
        moved: most,
        learning,
        learning_worse,
    })
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

    fn measured(sps: f64, env_wait: f64) -> Measured {
        let phase = |p, wall_s| hotlab_core::profile::PhaseTime { phase: p, wall_s, calls: 1, device_s: None };
        let profile = Profile {
            wall_s: 1.0,
            phases: vec![phase(Phase::ENV_WAIT, env_wait), phase(Phase::ENV_STEP, 1.0 - env_wait)],
            ..Profile::default()
        };
        Measured { sps, profile, mean_return: Some(sps / 10.0) }
    }

    #[test]
    fn runs_are_paired_in_schedule_order() {
        use Slot::*;
        assert_eq!(schedule(2, 1), vec![Baseline, Baseline, Variant(0), Baseline, Variant(1), Baseline]);
        assert_eq!(schedule(1, 3).len(), 12);
        // Per repeat: A A V0 A V1 A. Change 0 doubles steps/s and removes the wait; change 1 halves them.
        let repeat = |drift: f64| {
            vec![
                measured(100.0 * drift, 0.5),
                measured(101.0 * drift, 0.5),
                measured(200.0 * drift, 0.0),
                measured(100.0 * drift, 0.5),
                measured(50.0 * drift, 0.5),
                measured(99.0 * drift, 0.5),
            ]
        };
        let runs: Vec<Measured> = [1.0, 0.7, 1.3].into_iter().flat_map(repeat).collect();
        let changes = vec![Change::parse("backend=threads").unwrap(), Change::parse("envs=8").unwrap()];
        let plan = Plan::new(RunSpec::default(), changes, 3).unwrap();
        let r = plan.conclude(&runs).unwrap();
        assert!(close(r.noise.median, 1.01), "{:?}", r.noise);
        let (faster, slower) = (&r.changes[0], &r.changes[1]);
        assert!(close(faster.ratio.median, 200.0 / 101.0), "paired with the A just before: {faster:?}");
        assert!(close(slower.ratio.median, 0.5), "{slower:?}");
        assert_eq!((faster.verdict, slower.verdict), (Verdict::Confirmed, Verdict::Regression));
        assert_eq!(faster.phase, Phase::ENV_WAIT);
        assert_eq!((faster.phase_share_before, faster.phase_share_after), (0.5, 0.0));
        assert!(!faster.learning_worse && slower.learning_worse, "{slower:?}");
        assert!(plan.conclude(&runs[1..]).is_err(), "a run missing");
        assert_eq!(plan.label(Slot::Variant(1)), "envs=8");
        assert_eq!(plan.spec(Slot::Variant(1)).envs, 8);
        let e = Plan::new(RunSpec::default(), vec![Change::parse("envs=8").unwrap()], 1).unwrap_err();
        assert_eq!(e.field, "repeats");
        assert_eq!(Plan::new(RunSpec::default(), vec![], 3).unwrap_err().field, "change");
    }

    #[test]
    fn a_recommendation_is_a_change_with_its_bound() {
        let r = Recommendation::bounded(
            "--backend subprocess --wait spin",
            hotlab_core::profile::Phase::ENV_WAIT,
            1.8,
            String::new(),
        );
        let c = Change::recommended(&r).unwrap();
        assert_eq!((c.bound, c.target), (Some(1.8), Some(hotlab_core::profile::Phase::ENV_WAIT)));
        let base = RunSpec::default();
        let v = c.apply(&base).unwrap();
        assert_eq!((v.exec.backend.to_string(), v.exec.wait.to_string()), ("subprocess".into(), "spin".into()));
        let none = Recommendation { knob: "fewer envs".into(), ..r };
        assert_eq!(Change::recommended(&none).unwrap_err().field, "change");
        let back = Change::restore(&c.text, c.bound).unwrap();
        assert_eq!((back.text, back.bound, back.settings.len()), (c.text, c.bound, 2));
        assert_eq!(Change::restore("lr=0.001", None).unwrap().settings[0].0.name, "lr");
    }
}
