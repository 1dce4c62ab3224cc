//! A lesson's quick check: its slow setting and each fix trained once, briefly, and
//! whether the signature shows (`hotlab lesson check`; CI runs it for every lesson). A
//! lesson whose bottleneck needs a GPU is skipped, saying so, where CUDA is missing.

use crate::failure::Outcome;
use anyhow::Context;
use hotlab_report::audit::Plan;
use hotlab_report::lessons;
use hotlab_report::lessons::{Budget, Check, Figure, GpuResult, Lesson, Params, RecordedVerdict};
use std::path::Path;

/// Why `lesson` cannot run as `plan` says on this machine, if it cannot: its runs are on
/// CUDA and this machine has none.
pub fn unrunnable(lesson: &Lesson, plan: &Plan) -> Option<String> {
    (plan.baseline.device.starts_with("cuda") && !tch::Cuda::is_available()).then(|| {
        let why = if lesson.needs_gpu() { " (its bottleneck does not exist on a CPU)" } else { "" };
        format!("lesson {} needs a CUDA GPU{why}, and this machine has none", lesson.id)
    })
}

/// Trains the lesson's slow setting and each fix once under `params`' budget.
pub fn check(lesson: &'static Lesson, params: &Params) -> Outcome<Check> {
    let plan = lesson.plan(params)?;
    if let Some(why) = unrunnable(lesson, &plan) {
        return Ok(Check {
            lesson: lesson.id.into(),
            measure: lesson.signature.text.into(),
            figures: Vec::new(),
            shows: false,
            skipped: Some(why),
            error: None,
        });
    }
    let mut figures = Vec::new();
    for (label, spec) in std::iter::once(("baseline", &plan.baseline))
        .chain(plan.changes.iter().map(|c| c.text.as_str()).zip(&plan.variants))
    {
        let report = hotlab_workloads::measure(spec).with_context(|| format!("{}: {label}", lesson.id))?;
        let value = lesson.signature.measure.of(&report.profile);
        figures.push(Figure { setting: label.to_string(), value });
    }
    let shows = figures[1..].iter().all(|f| lesson.signature.shows(figures[0].value, f.value));
    Ok(Check {
        lesson: lesson.id.into(),
        measure: lesson.signature.text.into(),
        figures,
        shows,
        skipped: None,
        error: None,
    })
}

/// A check as a record: this machine's device (its GPU where it has one), today's date,
/// the signature; with `verdicts` (the verdict runs' parameters, their budget filled in),
/// the lesson run as `lesson run` runs it, and its verdicts.
pub fn record(lesson: &'static Lesson, c: &Check, verdicts: Option<&Params>) -> Outcome<GpuResult> {
    let info = hotlab_train::system::info();
    let device = info.devices.iter().find(|d| d.id.starts_with("cuda")).or(info.devices.first());
    let mut r = GpuResult {
        lesson: lesson.id.into(),
        device: device.map_or_else(|| "unknown device".into(), |d| d.name.clone()),
        date: today(),
        measure: c.measure.clone(),
        figures: c.figures.clone(),
        shows: c.shows,
        verdicts: Vec::new(),
    };
    if let Some(params) = verdicts {
        let plan = lesson.plan(params)?;
        let measured =
            super::audit::measure(&plan, &mut |what, i, n| eprintln!("{}: run {} of {n}: {what}", lesson.id, i + 1))?;
        let outcome = lesson.conclude(&plan, &measured).map_err(anyhow::Error::msg)?;
        r.verdicts = outcome
            .audit
            .changes
            .iter()
            .map(|c| RecordedVerdict {
                change: c.change.clone(),
                verdict: c.verdict,
                ratio: c.ratio,
                noise: outcome.audit.noise,
                budget: Some(Budget { seconds: plan.baseline.seconds, repeats: plan.repeats }),
            })
            .collect();
    }
    Ok(r)
}

/// The record in `file` (none yet where it is missing); a file that does not read as a
/// record is refused, before anything is measured for it.
pub fn read_records(file: &Path) -> Outcome<Vec<GpuResult>> {
    match std::fs::read_to_string(file) {
        Ok(text) => Ok(lessons::gpu_results(Some(&text)).map_err(|e| crate::failure::UsageError {
            flag: "--record",
            message: format!("{}: {e}", file.display()),
        })?),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e).with_context(|| format!("--record: reading {}", file.display()))?,
    }
}

/// Writes `new` into the record `file` (made if missing): an entry per lesson, in catalogue
/// order, the new ones replacing the old.
pub fn merge_records(file: &Path, new: Vec<GpuResult>) -> Outcome<()> {
    let mut all = read_records(file)?;
    all.retain(|r| !new.iter().any(|n| n.lesson == r.lesson));
    all.extend(new);
    let order = |id: &str| lessons::LESSONS.iter().position(|l| l.id == id).unwrap_or(usize::MAX);
    all.sort_by_key(|r| order(&r.lesson));
    std::fs::write(file, serde_json::to_string_pretty(&all)? + "\n")
        .with_context(|| format!("writing {}", file.display()))?;
    Ok(())
}

/// Today's date (UTC), `YYYY-MM-DD`.
fn today() -> String {
    let days = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() / 86_400);
    // Howard Hinnant's civil_from_days.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}
