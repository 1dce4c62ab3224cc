//! `hotlab tune`: the fastest configuration that still learns, found by audits.

use crate::failure::{Outcome, UsageError};
use clap::Args;
use hotlab_lab::tune::TuneReport;
use indicatif::{ProgressBar, ProgressStyle};

#[derive(Args, Debug)]
pub struct TuneArgs {
    /// The start: the flags of `hotlab train`. Each run's budget is its `--total-steps` or
    /// `--seconds` (keep them short: every step audits its candidates with 2 + 2 × n runs
    /// per repeat).
    #[command(flatten)]
    pub train: super::train::TrainArgs,
    /// Pairs per candidate in each step's audit.
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// The most steps (changes kept) before it stops.
    #[arg(long, default_value_t = 5)]
    pub max_steps: usize,
}

pub fn tune(a: TuneArgs) -> Outcome<()> {
    if a.repeats < 2 {
        let message = format!("{}: at least 2 (one pair says nothing of the spread)", a.repeats);
        return Err(UsageError { flag: "--repeats", message }.into());
    }
    if a.max_steps == 0 {
        return Err(UsageError { flag: "--max-steps", message: "0: at least 1".into() }.into());
    }
    let start = a.train.spec()?;
    start.validate()?;
    let bar = if a.train.json { ProgressBar::hidden() } else { ProgressBar::new(1) };
    bar.set_style(
        ProgressStyle::with_template("[{elapsed_precise}] step {prefix}: {bar:30} run {pos}/{len}: {msg}")
            .expect("template"),
    );
    let report = crate::bench::tune::tune(&start, a.repeats, a.max_steps, &mut |step, what, done, total| {
        bar.set_prefix(step.to_string());
        bar.set_length(total as u64);
        bar.set_position(done as u64);
        bar.set_message(what.to_string());
    })?;
    bar.finish_and_clear();
    match a.train.json {
        true => println!("{}", serde_json::to_string(&report)?),
        false => print!("{}", text(&report)),
    }
    Ok(())
}

fn text(r: &TuneReport) -> String {
    let mut out = String::new();
    for (i, step) in r.path.iter().enumerate() {
        out.push_str(&format!("step {}:\n{}", i + 1, super::audit::table(&step.audit)));
        match (&step.kept, step.ratio) {
            (Some(k), Some(x)) => out.push_str(&format!("  kept {k} (×{x:.2})\n\n")),
            _ => out.push_str("  nothing confirmed that still learns: stopping\n\n"),
        }
    }
    if r.path.is_empty() {
        out.push_str("the start's report recommends nothing to change\n");
    }
    out.push_str(&format!("faster by ×{:.2}; the configuration: hotlab train {}\n", r.speedup, r.flags));
    out
}
