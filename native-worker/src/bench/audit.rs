//! `hotlab audit`'s runs: the baseline and each variant (the baseline with one change),
//! interleaved on this machine so that drift hits both alike, and the verdicts
//! (`hotlab_shared::audit` has the arithmetic).
//!
//! One repeat runs `A A` (a pair of the baseline against itself: the noise now), then for
//! each change `V A`: the variant paired with the baseline just before it, and a fresh
//! baseline for the next change's pair.

use crate::train::TrainReport;
use anyhow::Result;
use hotlab_shared::audit::{interval, verdict, Change, Interval, Verdict};
use hotlab_shared::profile::Phase;
use hotlab_shared::spec::RunSpec;
use serde::Serialize;

/// What to audit.
pub struct AuditSpec {
    pub baseline: RunSpec,
    pub changes: Vec<Change>,
    /// Pairs per change (and A/A pairs), at least 2.
    pub repeats: usize,
}

/// One change's measurement.
#[derive(Clone, Debug, Serialize)]
pub struct ChangeResult {
    pub change: String,
    pub verdict: Verdict,
    /// Variant steps/s over baseline steps/s, over the pairs.
    pub ratio: Interval,
    /// The report's predicted ratio at most, when the change came from it.
    pub bound: Option<f64>,
    /// The phase whose share of the time moved most, and its share before and after (medians).
    pub phase: &'static str,
    pub phase_share_before: f64,
    pub phase_share_after: f64,
    /// Mean return of the last 100 episodes, baseline and variant (medians over repeats).
    pub learning: Learning,
    pub learning_worse: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct Learning {
    pub baseline: Option<f64>,
    pub variant: Option<f64>,
}

/// The audit's result (`--json`'s last line).
#[derive(Clone, Debug, Serialize)]
pub struct AuditReport {
    pub baseline: RunSpec,
    pub repeats: usize,
    /// The baseline against itself.
    pub noise: Interval,
    pub changes: Vec<ChangeResult>,
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    Some(if v.len() % 2 == 1 { v[mid] } else { (v[mid - 1] + v[mid]) / 2.0 })
}

/// Runs the audit; `progress` hears of each run before it starts (what, run i of n).
pub fn audit(spec: &AuditSpec, progress: &mut dyn FnMut(&str, usize, usize)) -> Result<AuditReport> {
    anyhow::ensure!(spec.repeats >= 2, "--repeats: at least 2 (one pair says nothing of the spread)");
    let variants: Vec<RunSpec> = spec.changes.iter().map(|c| c.apply(&spec.baseline)).collect::<Result<_, _>>()?;
    let total = spec.repeats * (2 + 2 * variants.len());
    let mut done = 0;
    let mut run = |what: &str, s: &RunSpec| -> Result<TrainReport> {
        progress(what, done, total);
        done += 1;
        Ok(crate::workloads::train(s, &mut |_| {})?.report)
    };
    let mut noise = Vec::new();
    let mut pairs: Vec<Vec<(TrainReport, TrainReport)>> = vec![Vec::new(); variants.len()];
    for _ in 0..spec.repeats {
        let first = run("baseline", &spec.baseline)?;
        let mut before = run("baseline", &spec.baseline)?;
        noise.push(before.sps / first.sps);
        for (i, v) in variants.iter().enumerate() {
            let after = run(&spec.changes[i].text, v)?;
            let next = run("baseline", &spec.baseline)?;
            pairs[i].push((before, after));
            before = next;
        }
    }
    let noise = interval(&noise).ok_or_else(|| anyhow::anyhow!("the baseline's steps/s were not measurable"))?;
    let changes = spec
        .changes
        .iter()
        .zip(pairs)
        .map(|(change, pairs)| judge(change, &pairs, &noise))
        .collect::<Result<Vec<_>>>()?;
    Ok(AuditReport { baseline: spec.baseline.clone(), repeats: spec.repeats, noise, changes })
}

/// A pair's baseline run, and its variant's.
type Pick = fn(&(TrainReport, TrainReport)) -> &TrainReport;

fn before(pair: &(TrainReport, TrainReport)) -> &TrainReport {
    &pair.0
}

fn after(pair: &(TrainReport, TrainReport)) -> &TrainReport {
    &pair.1
}

fn judge(change: &Change, pairs: &[(TrainReport, TrainReport)], noise: &Interval) -> Result<ChangeResult> {
    let ratios: Vec<f64> = pairs.iter().map(|(a, b)| b.sps / a.sps).collect();
    let ratio = interval(&ratios).ok_or_else(|| anyhow::anyhow!("{}: steps/s were not measurable", change.text))?;
    let shares =
        |pick: Pick, p: Phase| median(pairs.iter().map(|pair| pick(pair).profile.share(p)).collect()).unwrap_or(0.0);
    let phase = Phase::ALL
        .into_iter()
        .max_by(|&p, &q| {
            let moved = |x: Phase| (shares(after, x) - shares(before, x)).abs();
            moved(p).total_cmp(&moved(q))
        })
        .expect("phases");
    let returns = |pick: Pick| median(pairs.iter().filter_map(|pair| pick(pair).mean_return_last_100).collect());
    let learning = Learning { baseline: returns(before), variant: returns(after) };
    // Worse when the variant's median return falls below the baseline's by more than a tenth.
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
        phase: phase.name(),
        phase_share_before: shares(before, phase),
        phase_share_after: shares(after, phase),
        learning,
        learning_worse,
    })
}
