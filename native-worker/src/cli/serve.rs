//! `hotlab serve`: the web lab and its API.

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
    /// The operator token needed to launch and stop runs [$HOTLAB_TOKEN, else generated and printed].
    #[arg(long, env = "HOTLAB_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Runs at once, the rest wait in a queue; 0 = one per GPU, one on a CPU-only machine.
    #[arg(long, default_value_t = 0)]
    pub max_runs: usize,
}

pub fn serve(a: ServeArgs) -> Result<()> {
    let static_dir = server::find_static_dir(a.static_dir);
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    let cfg = server::ServeConfig {
        host: a.host,
        port: a.port,
        static_dir,
        data_dir: a.data_dir,
        token: a.token,
        max_runs: a.max_runs,
    };
    runtime.block_on(server::serve(cfg))
}
