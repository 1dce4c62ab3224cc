//! `hotlab audit`'s runs on this machine, in process, in the plan's interleaved order
//! (`hotlab_report::audit` has the plan, the pairing and the verdicts; the lab runs the same
//! plan with each run in its own process).

use crate::failure::Outcome;
use hotlab_report::audit::{Measured, Plan};
use hotlab_train::TrainReport;

/// What an audit needs of a finished run.
pub fn measured(r: &TrainReport) -> Measured {
    // The steady window's rate where the run went past its warm-up: start-up stays out.
    let sps = r.steady.as_ref().map_or(r.sps, |s| s.sps);
    Measured { sps, profile: r.profile.clone(), mean_return: r.mean_return_last_100 }
}

/// Runs the plan's runs in order; `progress` hears of each before it starts (what, run i of n).
pub fn measure(plan: &Plan, progress: &mut dyn FnMut(&str, usize, usize)) -> Outcome<Vec<Measured>> {
    let slots = plan.schedule();
    let mut runs = Vec::with_capacity(slots.len());
    for (i, &slot) in slots.iter().enumerate() {
        progress(plan.label(slot), i, slots.len());
        runs.push(measured(&hotlab_workloads::measure(plan.spec(slot))?));
    }
    Ok(runs)
}
