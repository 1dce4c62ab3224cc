//! `hotlab serve`: the web lab and its API.

use crate::cli::UsageError;
use anyhow::{Context, Result};
use clap::Args;
use hotlab::lab::server;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port (0 = any free port; the URL is printed).
    #[arg(long, default_value_t = 8080)]
    pub port: u16,
    /// The web app's files [./static, or the repository's static/].
    #[arg(long)]
    pub static_dir: Option<PathBuf>,
    /// Where the run history (SQLite) and knowledge-base files for API runs live.
    #[arg(long, default_value = "hotlab-data")]
    pub data_dir: PathBuf,
    /// The operator token needed to launch and stop runs, 16 characters or more
    /// [$HOTLAB_TOKEN, else generated and printed].
    #[arg(long, env = "HOTLAB_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// A host name the lab may be reached by besides its IP addresses and localhost (the
    /// name in the browser's address bar); repeat for several. Other names are refused, a
    /// guard against DNS rebinding.
    #[arg(long = "allow-host", value_name = "NAME")]
    pub allow_hosts: Vec<String>,
    /// Runs at once, the rest wait in a queue; 0 = one per GPU, one on a CPU-only machine.
    #[arg(long, default_value_t = 0)]
    pub max_runs: usize,
    /// Rollout frames a run keeps in the history per minute of its wall time once it has
    /// ended (live runs keep one a second; 0 keeps none). Metrics are always kept.
    #[arg(long, default_value_t = 6.0, value_name = "N")]
    pub finished_frames_per_minute: f64,
}

/// Shortest operator token accepted: anyone who guesses it can launch and stop runs.
const MIN_TOKEN: usize = 16;

pub fn serve(a: ServeArgs) -> Result<()> {
    // An empty token (an empty $HOTLAB_TOKEN) means none: one is generated.
    if let Some(t) = a.token.as_deref().filter(|t| !t.is_empty() && t.chars().count() < MIN_TOKEN) {
        let message = format!(
            "must be at least {MIN_TOKEN} characters (got {}): anyone who guesses it gets operator rights; leave it out to have one generated",
            t.chars().count()
        );
        return Err(UsageError { flag: "--token", message }.into());
    }
    let rate = a.finished_frames_per_minute;
    if !(rate.is_finite() && rate >= 0.0) {
        let message = format!("{rate}: allowed a number of frames per minute ≥ 0");
        return Err(UsageError { flag: "--finished-frames-per-minute", message }.into());
    }
    let static_dir = server::find_static_dir(a.static_dir);
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    let cfg = server::ServeConfig {
        host: a.host,
        port: a.port,
        static_dir,
        data_dir: a.data_dir,
        token: a.token,
        allow_hosts: a.allow_hosts,
        max_runs: a.max_runs,
        finished_frames_per_minute: rate,
    };
    runtime.block_on(server::serve(cfg))
}
