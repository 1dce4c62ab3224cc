//! `hotlab env-worker` (hidden): one worker process of `--backend subprocess`.

use anyhow::Result;
use clap::Args;
use hotlab::exec::worker::{self, WorkerArgs};
use hotlab::workloads;
use hotlab_shared::spec::{EnvName, RunSpec, WaitMode};

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
    #[arg(long)]
    pub env: EnvName,
    #[arg(long, default_value = "")]
    pub kb: String,
    #[arg(long)]
    pub queries: Option<String>,
    #[arg(long, default_value_t = 10)]
    pub proof_depth: usize,
    #[arg(long)]
    pub seed: u64,
    #[arg(long)]
    pub wait: WaitMode,
    #[arg(long)]
    pub parent: u32,
}

pub fn env_worker(a: EnvWorkerArgs) -> Result<()> {
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
    // The workload as the trainer's spec has it (its `worker_flags`).
    let spec = RunSpec { env: a.env, kb: a.kb, queries: a.queries, proof_depth: a.proof_depth, ..RunSpec::default() };
    worker::run(args, || Ok(workloads::load(&spec)?))
}
