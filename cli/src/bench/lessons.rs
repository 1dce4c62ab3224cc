//! A lesson's quick check: its slow setting and each fix trained once, briefly, and
//! whether the signature shows (`hotlab lesson check`; CI runs it for every lesson). A
//! lesson whose bottleneck needs a GPU is skipped, saying so, where CUDA is missing.

use anyhow::{Context, Result};
use hotlab_shared::audit::Plan;
use hotlab_shared::lessons::{Check, Figure, Lesson, Params};

/// Why `lesson` cannot run as `plan` says on this machine, if it cannot: its runs are on
/// CUDA and this machine has none.
pub fn unrunnable(lesson: &Lesson, plan: &Plan) -> Option<String> {
    (plan.baseline.device.starts_with("cuda") && !tch::Cuda::is_available()).then(|| {
        let why = if lesson.needs_gpu() { " (its bottleneck does not exist on a CPU)" } else { "" };
        format!("lesson {} needs a CUDA GPU{why}, and this machine has none", lesson.id)
    })
}

/// Trains the lesson's slow setting and each fix once under `params`' budget.
pub fn check(lesson: &'static Lesson, params: &Params) -> Result<Check> {
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
