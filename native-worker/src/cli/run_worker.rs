//! `hotlab run-worker` (hidden): one run of the lab, in its own process
//! (`hotlab::wire::process`).

use anyhow::{Context, Result};
use clap::Args;
use hotlab_shared::spec::RunSpec;

#[derive(Args, Debug)]
pub struct RunWorkerArgs {
    /// The run's spec as JSON (validated by the lab).
    #[arg(long)]
    pub spec: String,
}

pub fn run_worker(a: RunWorkerArgs) -> Result<()> {
    let spec: RunSpec = serde_json::from_str(&a.spec).context("--spec: not a run spec")?;
    hotlab::wire::process::serve(&spec)
}
