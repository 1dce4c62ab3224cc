//! `hotlab bench envs`: env stepping only, random actions, per backend and env count.

use anyhow::{Context, Result};
use hotlab_core::choices::{Backend, WaitMode};
use hotlab_core::counters::Counters;
use hotlab_core::run::ExecSpec;
use hotlab_env::rng::HostRng;
use hotlab_env::{Observations, StepBatch};
use hotlab_spec::RunSpec;
use hotlab_train::exec;
use hotlab_train::workload::Workload;
use hotlab_workloads::cartpole::device::env::DeviceCartPole;
use serde::Serialize;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tch::{Device, Kind, Tensor};

/// One (backend, envs) measurement.
#[derive(Clone, Debug, Serialize)]
pub struct EnvBench {
    pub env: String,
    pub backend: String,
    pub envs: usize,
    /// Threads or processes (threads/subprocess only).
    pub workers: Option<usize>,
    /// Wait mode (subprocess only).
    pub wait: Option<String>,
    pub device: String,
    pub seconds: f64,
    pub steps_per_s: f64,
    pub counters: Counters,
}

/// What to measure.
#[derive(Clone)]
pub struct EnvBenchSpec {
    /// The workload whose envs step (the `device` backend is CartPole's).
    pub env: Arc<dyn Workload>,
    pub backend: Backend,
    pub envs: usize,
    pub workers: usize,
    pub wait: WaitMode,
    pub seconds: f64,
    pub device: Device,
    pub seed: u64,
}

/// Steps the envs with random actions for about `seconds` (after a short warm-up).
pub fn run(s: &EnvBenchSpec) -> Result<EnvBench> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let exec = ExecSpec { backend: s.backend, workers: s.workers, wait: s.wait, ..ExecSpec::default() };
    let spec = RunSpec { envs: s.envs, seed: s.seed, exec, ..RunSpec::default() };
    let budget = Duration::from_secs_f64(s.seconds);
    let mut counters = Counters::default();
    let (steps, elapsed) = if s.backend == Backend::Device {
        let mut env = DeviceCartPole::new(s.envs, s.seed, s.device);
        let _ = env.reset();
        let step = |env: &mut DeviceCartPole| {
            let a = Tensor::randint(2, [s.envs as i64], (Kind::Int64, s.device));
            env.step(&a)
        };
        for _ in 0..5 {
            step(&mut env);
        }
        let start = Instant::now();
        let mut steps = 0u64;
        while start.elapsed() < budget {
            let out = step(&mut env);
            steps += s.envs as u64;
            if steps.is_multiple_of(64 * s.envs as u64) && s.device != Device::Cpu {
                // Keep the queue of launched work from running far ahead of the clock.
                let _ = out.done.any().int64_value(&[]);
            }
        }
        if s.device != Device::Cpu {
            tch::Cuda::synchronize(0);
        }
        (steps, start.elapsed())
    } else {
        let mut env = exec::host_backend(&spec, s.env.as_ref())?;
        let mut obs = Observations::zeros(env.spec(), s.envs);
        env.reset(&mut obs).context("reset")?;
        let mut out = StepBatch::new(env.spec(), s.envs);
        let heads = env.spec().heads.clone();
        let mut rng = HostRng::new(s.seed);
        let mut actions: Vec<Vec<i64>> = (0..64).map(|_| Vec::with_capacity(s.envs * heads.len())).collect();
        for row in &mut actions {
            for _ in 0..s.envs {
                row.extend(heads.iter().map(|h| rng.below(h.n as u64) as i64));
            }
        }
        for a in actions.iter().take(5) {
            env.step(a, &mut out).context("warm-up step")?;
        }
        let warm = env.counters();
        let start = Instant::now();
        let mut steps = 0u64;
        let mut i = 0;
        while start.elapsed() < budget {
            env.step(&actions[i % 64], &mut out).context("step")?;
            steps += s.envs as u64;
            i += 1;
        }
        let elapsed = start.elapsed();
        let after = env.counters();
        counters.ipc_round_trips = after.ipc_round_trips - warm.ipc_round_trips;
        counters.spin_iterations = after.spin_iterations - warm.spin_iterations;
        counters.worker_wait_s = after.worker_wait_s - warm.worker_wait_s;
        (steps, elapsed)
    };
    counters.env_steps = steps;
    let pooled = matches!(s.backend, Backend::Threads | Backend::Subprocess);
    Ok(EnvBench {
        env: s.env.name().into(),
        backend: s.backend.to_string(),
        envs: s.envs,
        workers: pooled.then(|| spec.resolved_workers(cores)),
        wait: (s.backend == Backend::Subprocess).then(|| s.wait.to_string()),
        device: hotlab_train::exec::device::label(if s.backend == Backend::Device { s.device } else { Device::Cpu }),
        seconds: elapsed.as_secs_f64(),
        steps_per_s: steps as f64 / elapsed.as_secs_f64(),
        counters,
    })
}
