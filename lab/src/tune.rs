//! `hotlab tune`'s decisions: which changes to try next (the report's recommendations the
//! configuration does not follow yet, each tried once), which one to keep (the fastest
//! confirmed one whose learning did not get worse), and the result as flags to launch.
//!
//! The loop itself runs wherever runs run (the CLI in process): profile, audit the
//! candidates, keep one, repeat from the kept variant's own profile until nothing helps.

use hotlab_report::audit::{AuditReport, Change, ChangeResult, Verdict};
use hotlab_report::Report;
use hotlab_spec::knobs;
use hotlab_spec::RunSpec;
use serde::{Deserialize, Serialize};

/// One step of the search: what was audited and what was kept.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub audit: AuditReport,
    /// The change kept, and its measured steps/s ratio (median).
    pub kept: Option<String>,
    pub ratio: Option<f64>,
}

/// The search's path and where it ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TuneReport {
    pub start: RunSpec,
    pub path: Vec<Step>,
    pub best: RunSpec,
    /// The kept ratios multiplied: how much faster `best` is than `start` (×).
    pub speedup: f64,
    /// `best` as `hotlab train` flags (those that differ from the defaults).
    pub flags: String,
}

/// The recommendations that change `spec` and were not tried before.
pub fn candidates(report: &Report, spec: &RunSpec, tried: &[String]) -> Vec<Change> {
    let mut out: Vec<Change> = Vec::new();
    for r in &report.recommendations {
        let Ok(c) = Change::recommended(r) else { continue };
        let new = !tried.contains(&c.text) && !out.iter().any(|o| o.text == c.text);
        if new && c.apply(spec).is_ok() {
            out.push(c);
        }
    }
    out
}

/// The change worth keeping: faster beyond the noise (confirmed, or beyond the report's
/// bound) with learning not worse; the fastest of those.
pub fn keep(audit: &AuditReport) -> Option<&ChangeResult> {
    audit
        .changes
        .iter()
        .filter(|c| matches!(c.verdict, Verdict::Confirmed | Verdict::BeyondBound) && !c.learning_worse)
        .max_by(|a, b| a.ratio.median.total_cmp(&b.ratio.median))
}

/// A spec as the `hotlab train` flags that differ from the default spec.
pub fn flags(spec: &RunSpec) -> String {
    let (Ok(serde_json::Value::Object(s)), Ok(serde_json::Value::Object(d))) =
        (serde_json::to_value(spec), serde_json::to_value(RunSpec::default()))
    else {
        return String::new();
    };
    let mut out = Vec::new();
    for k in knobs::KNOBS.iter() {
        let (mine, default) = (k.get(&s), k.get(&d));
        let Some(v) = mine.filter(|v| Some(v) != default.as_ref()) else { continue };
        let text = match &v {
            serde_json::Value::String(t) => t.clone(),
            serde_json::Value::Array(items) => items.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(","),
            other => other.to_string(),
        };
        out.push(format!("--{} {text}", k.name.replace('_', "-")));
    }
    out.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use hotlab_core::advice::Recommendation;
    use hotlab_core::profile::Phase;
    use hotlab_report::audit::{Interval, Learning};

    fn result(change: &str, verdict: Verdict, median: f64, learning_worse: bool) -> ChangeResult {
        ChangeResult {
            change: change.into(),
            verdict,
            ratio: Interval { median, low: median * 0.9, high: median * 1.1 },
            bound: None,
            phase: Phase::ENV_WAIT,
            phase_share_before: 0.0,
            phase_share_after: 0.0,
            moved: Phase::ENV_WAIT,
            learning: Learning { baseline: None, variant: None },
            learning_worse,
        }
    }

    #[test]
    fn the_fastest_confirmed_change_that_learns_is_kept() {
        let noise = Interval { median: 1.0, low: 0.95, high: 1.05 };
        let audit = |changes| AuditReport { baseline: RunSpec::default(), repeats: 3, noise, changes };
        let a = audit(vec![
            result("a", Verdict::Confirmed, 1.5, false),
            result("b", Verdict::Confirmed, 3.0, true),
            result("c", Verdict::BeyondBound, 2.0, false),
            result("d", Verdict::NoEffect, 4.0, false),
        ]);
        assert_eq!(keep(&a).map(|c| c.change.as_str()), Some("c"));
        assert_eq!(keep(&audit(vec![result("a", Verdict::Regression, 0.5, false)])), None);
    }

    #[test]
    fn candidates_are_new_recommendations_that_change_the_spec() {
        let mut spec = RunSpec::default();
        spec.exec.backend = hotlab_core::choices::Backend::Subprocess;
        spec.exec.wait = hotlab_core::choices::WaitMode::Spin;
        let rec = |knob: &str| Recommendation::bounded(knob, Phase::ENV_WAIT, 2.0, String::new());
        let report = Report {
            wall_s: 1.0,
            env_steps: 1,
            steps_per_s: 1.0,
            steady_sps: None,
            notes: Vec::new(),
            rows: vec![],
            split: hotlab_report::Split {
                data_pct: 0.0,
                forward_pct: 0.0,
                backward_pct: 0.0,
                verdict: String::new(),
                next_action: String::new(),
            },
            recommendations: vec![rec("--backend vectorized"), rec("--wait block"), rec("--backend subprocess")],
            profiler_overhead_pct: 0.0,
        };
        let texts = |cs: Vec<Change>| cs.into_iter().map(|c| c.text).collect::<Vec<_>>();
        assert_eq!(texts(candidates(&report, &spec, &[])), ["--backend vectorized", "--wait block"]);
        assert_eq!(texts(candidates(&report, &spec, &["--wait block".into()])), ["--backend vectorized"]);
    }

    #[test]
    fn flags_name_what_differs_from_the_defaults() {
        let mut spec = RunSpec::default();
        assert_eq!(flags(&spec), "");
        spec.exec.backend = hotlab_core::choices::Backend::Threads;
        spec.ppo.hidden = vec![128, 128];
        spec.envs = 16;
        assert_eq!(flags(&spec), "--envs 16 --backend threads --hidden 128,128");
    }
}
