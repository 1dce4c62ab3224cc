//! `hotlab env-worker` (hidden): one worker process of `--backend subprocess`.

use crate::failure::Outcome;
use clap::Args;
use hotlab_core::choices::WaitMode;
use hotlab_core::run::PpoSpec;
use hotlab_spec::RunSpec;
use hotlab_specs::WorkloadSpec;
use hotlab_train::exec::worker::{self, WorkerArgs};

#[derive(Args, Debug)]
pub struct EnvWorkerArgs {
    #[arg(long)]
    pub shm_fd: i32,
    #[arg(long)]
    pub worker: usize,
    #[arg(long)]
    pub workers: usize,
    #[arg(long)]
    pub envs: usize,
    #[arg(long)]
    pub first: usize,
    #[arg(long)]
    pub count: usize,
    /// The workload and its settings as JSON (the trainer's `EnvMaker::worker_flags`).
    #[arg(long, value_parser = parse_workload)]
    pub workload: WorkloadSpec,
    #[arg(long)]
    pub seed: u64,
    #[arg(long)]
    pub wait: WaitMode,
    #[arg(long)]
    pub parent: u32,
    /// The run's device, resolved, for envs whose own compute runs there (morpho's hosts).
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// The run's PPO discount, for envs whose rewards use it (morpho's shaping).
    #[arg(long, default_value_t = 0.99)]
    pub gamma: f64,
}

pub fn env_worker(a: EnvWorkerArgs) -> Outcome<()> {
    let args = WorkerArgs {
        shm_fd: a.shm_fd,
        worker: a.worker,
        workers: a.workers,
        envs: a.envs,
        first: a.first,
        count: a.count,
        seed: a.seed,
        wait: a.wait,
        parent: a.parent,
    };
    let ppo = PpoSpec { gamma: a.gamma, ..PpoSpec::default() };
    let spec = RunSpec { workload: a.workload, device: a.device, ppo, ..RunSpec::default() };
    Ok(worker::run(args, || Ok(hotlab_workloads::load(&spec)?))?)
}

fn parse_workload(text: &str) -> Result<WorkloadSpec, String> {
    serde_json::from_str(text).map_err(|e| format!("not a workload as JSON: {e}"))
}
