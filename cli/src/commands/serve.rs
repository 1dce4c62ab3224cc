//! `hotlab serve`: the web lab and its API.

use crate::failure::{Outcome, UsageError};
use anyhow::Context;
use clap::Args;
use hotlab_lab::server;
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
    /// Runs at once on this machine, the rest wait in its queue; 0 = one per GPU, one on
    /// a CPU-only machine.
    #[arg(long, default_value_t = 0)]
    pub max_runs: usize,
    /// Whether this server trains runs itself (as the machine `--local-name`) besides
    /// the workers that connect to it; `off` for a lab on a small host that only serves.
    #[arg(long, default_value = "on", value_parser = ["on", "off"])]
    pub local_worker: String,
    /// This machine's name in the lab (the launch form's machine choice).
    #[arg(long, default_value = "local", value_name = "NAME")]
    pub local_name: String,
    /// The token workers connect with (`hotlab worker --worker-token`), 16 characters or
    /// more, not the operator token [$HOTLAB_WORKER_TOKEN, else generated and printed].
    #[arg(long, env = "HOTLAB_WORKER_TOKEN", hide_env_values = true)]
    pub worker_token: Option<String>,
    /// Seconds a worker may be away (a network hiccup, a restart of the lab) before its
    /// runs end `interrupted`; it resends what it kept meanwhile.
    #[arg(long, default_value_t = 60.0, value_name = "SECONDS")]
    pub worker_grace: f64,
    /// A Ray head's job API, http://HEAD:8265: runs (and audits, lessons) go to the
    /// machine `ray` by default, each a Ray job whose `hotlab worker --once` connects back.
    #[arg(long, value_name = "URL")]
    pub ray: Option<String>,
    /// Where a Ray job's worker finds this lab [http:// and the address it listens on].
    #[arg(long, value_name = "URL")]
    pub ray_lab_url: Option<String>,
    /// The hotlab binary a Ray job runs, as a path on the Ray nodes [this binary].
    #[arg(long, value_name = "PATH")]
    pub ray_hotlab: Option<String>,
    /// Rollout frames a run keeps in the history per minute of its wall time once it has
    /// ended (live runs keep one a second; 0 keeps none). Metrics are always kept.
    #[arg(long, default_value_t = 6.0, value_name = "N")]
    pub finished_frames_per_minute: f64,
    /// Token checks a second a client gets back once its burst of 60 is spent (`GET
    /// /api/auth`, and every request with a wrong token); 0 gives none back.
    #[arg(long, default_value_t = hotlab_lab::limit::PER_SECOND, value_name = "N")]
    pub auth_checks_per_second: f64,
    /// Each local run's process may use at most this much memory (MiB): past it the kernel's
    /// out-of-memory killer ends that run alone, and the run fails saying so. A memory
    /// cgroup per run, which the lab must be allowed to make (root, or a delegated cgroup).
    /// Unset: no limit but the machine's.
    #[arg(long, value_name = "MIB", value_parser = clap::value_parser!(u64).range(1..))]
    pub run_memory: Option<u64>,
    /// Let runs start the commands their specs name: a user's own training script,
    /// profiled under hotlab's probe (`--env external`, the launch form's "Your script").
    /// Off by default: with it, anyone with the operator token runs any command on this
    /// machine and its workers.
    #[arg(long)]
    pub allow_scripts: bool,
}

/// Shortest operator token accepted: anyone who guesses it can launch and stop runs.
const MIN_TOKEN: usize = 16;

/// Refuses a given token that is too short (an empty one means none: one is generated).
fn check_token(token: Option<&str>, flag: &'static str, rights: &str) -> Outcome<()> {
    match token.filter(|t| !t.is_empty() && t.chars().count() < MIN_TOKEN) {
        Some(t) => {
            let message = format!(
                "must be at least {MIN_TOKEN} characters (got {}): anyone who guesses it {rights}; leave it out to have one generated",
                t.chars().count()
            );
            Err(UsageError { flag, message }.into())
        }
        None => Ok(()),
    }
}

pub fn serve(a: ServeArgs) -> Outcome<()> {
    check_token(a.token.as_deref(), "--token", "gets operator rights")?;
    check_token(a.worker_token.as_deref(), "--worker-token", "can connect a worker and report runs")?;
    if a.token.is_some() && a.token == a.worker_token {
        let message = "must differ from --token: a worker's token gives no operator rights".to_string();
        return Err(UsageError { flag: "--worker-token", message }.into());
    }
    if !(a.worker_grace.is_finite() && a.worker_grace >= 0.0) {
        let message = format!("{}: allowed a number of seconds ≥ 0", a.worker_grace);
        return Err(UsageError { flag: "--worker-grace", message }.into());
    }
    hotlab_lab::wire::link::check_name(&a.local_name)
        .map_err(|message| UsageError { flag: "--local-name", message })?;
    let ray = a
        .ray
        .as_deref()
        .map(hotlab_lab::ray::Head::parse)
        .transpose()
        .map_err(|message| UsageError { flag: "--ray", message })?;
    if ray.is_some() && a.local_name == hotlab_lab::machines::RAY {
        let message = "'ray' is the Ray cluster's name in a lab with --ray: give this machine another".to_string();
        return Err(UsageError { flag: "--local-name", message }.into());
    }
    let rate = a.finished_frames_per_minute;
    if !(rate.is_finite() && rate >= 0.0) {
        let message = format!("{rate}: allowed a number of frames per minute ≥ 0");
        return Err(UsageError { flag: "--finished-frames-per-minute", message }.into());
    }
    let checks = a.auth_checks_per_second;
    if !(checks.is_finite() && (0.0..=1000.0).contains(&checks)) {
        let message = format!("{checks}: allowed 0 to 1000 checks a second");
        return Err(UsageError { flag: "--auth-checks-per-second", message }.into());
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
        local_worker: (a.local_worker == "on").then_some(a.local_name),
        worker_token: a.worker_token,
        worker_grace: std::time::Duration::from_secs_f64(a.worker_grace),
        ray,
        ray_lab_url: a.ray_lab_url,
        ray_hotlab: a.ray_hotlab,
        finished_frames_per_minute: rate,
        auth_checks_per_second: checks,
        run_memory: a.run_memory,
        trainer: std::sync::Arc::new(crate::trainer::Trainer),
        allow_scripts: a.allow_scripts,
    };
    Ok(runtime.block_on(server::serve(cfg))?)
}
