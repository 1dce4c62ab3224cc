//! `hotlab tune`: from a configuration, audit the report's recommendations, keep the
//! fastest confirmed one that still learns, and repeat from there until nothing helps
//! (`hotlab_lab::tune` makes the choices).

use super::audit::measure;
use crate::failure::Outcome;
use hotlab_lab::tune::{candidates, flags, keep, Step, TuneReport};
use hotlab_report::analyze;
use hotlab_report::audit::{Plan, Slot};
use hotlab_spec::RunSpec;

/// Searches from `start`: at most `max_steps` audits of `repeats` pairs each; `progress`
/// hears of each run (step, what, run i of n).
pub fn tune(
    start: &RunSpec,
    repeats: usize,
    max_steps: usize,
    progress: &mut dyn FnMut(usize, &str, usize, usize),
) -> Outcome<TuneReport> {
    progress(0, "profiling the start", 0, 1);
    let first = hotlab_workloads::measure(start)?;
    let mut profile = first.profile;
    let mut spec = start.clone();
    let (mut path, mut tried, mut speedup) = (Vec::new(), Vec::<String>::new(), 1.0);
    for step in 1..=max_steps {
        let changes = candidates(&analyze(&profile, &spec), &spec, &tried);
        if changes.is_empty() {
            break;
        }
        tried.extend(changes.iter().map(|c| c.text.clone()));
        let plan = Plan::new(spec.clone(), changes, repeats)?;
        let runs = measure(&plan, &mut |what, i, n| progress(step, what, i, n))?;
        let audit = plan.conclude(&runs).map_err(anyhow::Error::msg)?;
        let Some(kept) = keep(&audit).cloned() else {
            path.push(Step { audit, kept: None, ratio: None });
            break;
        };
        let i = plan.changes.iter().position(|c| c.text == kept.change).expect("a change of the plan");
        // The next step starts from the kept variant's own profile.
        profile = plan.runs_of(Slot::Variant(i), &runs).last().map(|m| m.profile.clone()).unwrap_or_default();
        spec = plan.variants[i].clone();
        speedup *= kept.ratio.median;
        path.push(Step { audit, kept: Some(kept.change.clone()), ratio: Some(kept.ratio.median) });
    }
    Ok(TuneReport { start: start.clone(), path, flags: flags(&spec), best: spec, speedup })
}
