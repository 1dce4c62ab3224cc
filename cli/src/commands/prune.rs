//! `hotlab prune`: deletes old runs from a lab's store, on request only (a lab never
//! deletes by itself).

use crate::failure::{Outcome, UsageError};
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct PruneArgs {
    /// The lab's data dir (as given to `hotlab serve`).
    #[arg(long, default_value = "hotlab-data")]
    pub data_dir: PathBuf,
    /// Delete the runs created more than this many days ago that have ended (queued and
    /// running runs are kept, so this is safe beside a lab that is serving).
    #[arg(long, value_name = "DAYS")]
    pub older_than_days: f64,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn prune(a: PruneArgs) -> Outcome<()> {
    let days = a.older_than_days;
    if !(days.is_finite() && days >= 0.0) {
        return Err(UsageError { flag: "--older-than-days", message: format!("{days}: allowed a number ≥ 0") }.into());
    }
    let now_ms =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_err(anyhow::Error::from)?.as_millis()
            as u64;
    let before_ms = now_ms.saturating_sub((days * 86_400_000.0) as u64);
    let pruned = hotlab_lab::store::prune_dir(&a.data_dir, before_ms)?;
    match a.json {
        true => println!("{}", serde_json::json!({ "pruned": pruned })),
        false => println!(
            "pruned {} run(s) created over {days} day(s) ago from {}{}",
            pruned.len(),
            a.data_dir.display(),
            match pruned.is_empty() {
                true => String::new(),
                false => format!(": {pruned:?}"),
            }
        ),
    }
    Ok(())
}
