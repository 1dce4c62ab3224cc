//! `hotlab worker`: this machine joins a lab, connecting out to it.

use crate::failure::{Outcome, UsageError};
use clap::Args;
use hotlab_lab::worker::{self, WorkerConfig};
use std::path::PathBuf;

#[derive(Args, Debug)]
#[command(after_help = "The lab prints its worker token at start (`hotlab serve`). The worker needs no inbound \
port: it connects to the lab, trains the runs the lab sends, and streams them back; while the lab is \
unreachable it keeps their events (spilling to --data-dir) and resends them when it is back.")]
pub struct WorkerArgs {
    /// The lab's address: http://HOST:PORT, or https://HOST behind a TLS proxy.
    #[arg(long, value_name = "URL")]
    pub lab: String,
    /// The lab's worker token (not the operator token) [$HOTLAB_WORKER_TOKEN].
    #[arg(long, env = "HOTLAB_WORKER_TOKEN", hide_env_values = true)]
    pub worker_token: String,
    /// This machine's name in the lab [the host name].
    #[arg(long)]
    pub name: Option<String>,
    /// Runs at once; 0 = one per GPU, one on a CPU-only machine.
    #[arg(long, default_value_t = 0)]
    pub max_runs: usize,
    /// Where the worker keeps what the lab has not acknowledged yet (past the memory
    /// limit) and the files runs bring.
    #[arg(long, default_value = "hotlab-worker-data")]
    pub data_dir: PathBuf,
    /// MiB of unacknowledged events held in memory before the rest spills to disk.
    #[arg(long, default_value_t = 64, value_name = "MIB")]
    pub memory_mib: usize,
    /// Each run's process may use at most this much memory (MiB): past it the kernel's
    /// out-of-memory killer ends that run alone, and the run fails saying so. A memory
    /// cgroup per run, which the worker must be allowed to make (root, or a delegated
    /// cgroup). Unset: no limit but the machine's.
    #[arg(long, value_name = "MIB", value_parser = clap::value_parser!(u64).range(1..))]
    pub run_memory: Option<u64>,
    /// Take one run only (`--run`), and end once the lab has all of it: how a lab with
    /// `--ray` starts the worker of each Ray job.
    #[arg(long, requires = "run")]
    pub once: bool,
    /// The run a `--once` worker takes.
    #[arg(long, value_name = "ID", requires = "once")]
    pub run: Option<u64>,
}

pub fn worker(a: WorkerArgs) -> Outcome<()> {
    let name = a.name.unwrap_or_else(host_name);
    hotlab_lab::wire::link::check_name(&name).map_err(|message| UsageError { flag: "--name", message })?;
    if a.worker_token.is_empty() {
        let message = "empty: give the token the lab printed at start".to_string();
        return Err(UsageError { flag: "--worker-token", message }.into());
    }
    let system = hotlab_train::system::info();
    let max_runs = match a.max_runs {
        0 => system.devices.iter().filter(|d| d.id.starts_with("cuda")).count().max(1),
        n => n,
    };
    Ok(worker::run(WorkerConfig {
        lab: a.lab,
        token: a.worker_token,
        name,
        max_runs,
        data_dir: a.data_dir,
        memory_limit: a.memory_mib.max(1) << 20,
        once: a.run.filter(|_| a.once),
        run_memory: a.run_memory,
        system,
    })?)
}

/// The machine's host name, made a valid worker name.
fn host_name() -> String {
    let raw = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let name: String =
        raw.trim().chars().filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')).take(64).collect();
    if name.is_empty() {
        "worker".into()
    } else {
        name
    }
}
