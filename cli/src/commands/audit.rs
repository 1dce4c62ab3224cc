//! `hotlab audit`: re-runs a run with one change at a time and says whether each held.

use crate::bench::audit;
use crate::failure::{Outcome, UsageError};
use clap::Args;
use hotlab_report::audit::{AuditReport, Change, Measured, Plan};

#[derive(Args, Debug)]
pub struct AuditArgs {
    /// The baseline: the flags of `hotlab train`. Each run's budget is the baseline's
    /// `--total-steps S` (env steps) or `--seconds T` (seconds of training, a run ending
    /// after the update in progress): keep them short, an audit runs 2 + 2 × changes runs
    /// per repeat.
    #[command(flatten)]
    pub train: super::train::TrainArgs,
    /// A change to audit, KEY=VALUE with KEY a knob (a training flag in snake_case:
    /// backend=threads, lr=0.001, hidden=128,128); repeat for several, each audited alone.
    #[arg(long = "change", value_name = "KEY=VALUE", required_unless_present = "recommendations")]
    pub changes: Vec<String>,
    /// Also audit the baseline's own report's recommendations (a first baseline run
    /// profiles it), each judged against its predicted bound too.
    #[arg(long)]
    pub recommendations: bool,
    /// Pairs per change (baseline, variant), and baseline/baseline pairs for the noise.
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
}

pub fn audit(a: AuditArgs) -> Outcome<()> {
    if a.repeats < 2 {
        let message = format!("{}: at least 2 (one pair says nothing of the spread)", a.repeats);
        return Err(UsageError { flag: "--repeats", message }.into());
    }
    let baseline = a.train.spec()?;
    baseline.validate()?;
    let mut changes = Vec::new();
    for text in &a.changes {
        let change = Change::parse(text)?;
        change.apply(&baseline)?;
        changes.push(change);
    }
    if a.recommendations {
        let trained = hotlab_workloads::measure(&baseline)?;
        let report = hotlab_report::analyze(&trained.profile, &trained.config);
        for r in &report.recommendations {
            // A recommendation the baseline already follows, or that cannot be applied, is said and skipped.
            match Change::recommended(r).and_then(|c| c.apply(&baseline).map(|_| c)) {
                Ok(c) => changes.push(c),
                Err(e) => eprintln!("skipping the recommendation '{}': {e}", r.knob),
            }
        }
        if changes.is_empty() {
            let message = "the baseline's report recommends nothing that changes it; give --change KEY=VALUE".into();
            return Err(UsageError { flag: "--recommendations", message }.into());
        }
    }
    let plan = Plan::new(baseline, changes, a.repeats)?;
    let report = plan.conclude(&measure(&plan, a.train.json)?).map_err(anyhow::Error::msg)?;
    match a.train.json {
        true => println!("{}", serde_json::to_string(&report)?),
        false => print!("{}", table(&report)),
    }
    Ok(())
}

/// The plan's runs, with a progress bar unless the output is JSON.
pub(super) fn measure(plan: &Plan, json: bool) -> Outcome<Vec<Measured>> {
    let bar = super::runs_bar(json);
    let runs = audit::measure(plan, &mut super::runs_progress(&bar))?;
    bar.finish_and_clear();
    Ok(runs)
}

pub(super) fn table(r: &AuditReport) -> String {
    let n = &r.noise;
    let mut out =
        format!("noise (baseline against itself, {} pairs): {:.3} ({:.3}–{:.3})\n", r.repeats, n.median, n.low, n.high);
    out.push_str("change                      verdict       ratio (95 %)            targeted phase (or moved most)\n");
    for c in &r.changes {
        let worse = if c.learning_worse { "  LEARNING WORSE" } else { "" };
        let bound = c.bound.map_or(String::new(), |b| format!("  (predicted ≤ {b:.2}×)"));
        let moved = if c.moved != c.phase { format!("  (moved most: {})", c.moved.name()) } else { String::new() };
        out.push_str(&format!(
            "{:<27} {:<13} {:.3} ({:.3}–{:.3})   {} {:.1} % → {:.1} %{bound}{moved}{worse}\n",
            c.change,
            serde_json::to_value(c.verdict).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default(),
            c.ratio.median,
            c.ratio.low,
            c.ratio.high,
            c.phase.name(),
            100.0 * c.phase_share_before,
            100.0 * c.phase_share_after,
        ));
    }
    out
}
