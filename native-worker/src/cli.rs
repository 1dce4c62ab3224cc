//! The `hotlab` subcommands and their flags.

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use hotlab::envs::worker::{self, WorkerArgs};
use hotlab::{checkpoint, eval, serve, system, train};
use hotlab_shared::spec::{ActionSync, Backend, EnvName, Inference, Precision, Preset, RunSpec, Transfer, WaitMode};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::Write;
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "hotlab",
    version,
    about = "A lab for the hot path of vectorized RL training",
    long_about = "hotlab trains PPO agents on libtorch under switchable execution strategies, \
                  measures where each step's time goes, and serves a web lab to watch and compare runs.\n\n\
                  Start with `hotlab train --preset cleanrl` or `hotlab serve`."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Train a PPO agent (CleanRL's ppo.py hyperparameters by default).
    #[command(args_override_self = true, allow_negative_numbers = true)]
    Train(Box<TrainArgs>),
    /// Run a trained policy greedily and report its mean return.
    #[command(allow_negative_numbers = true)]
    Eval(EvalArgs),
    /// Show hotlab's and libtorch's versions, devices and cores.
    System(SystemArgs),
    /// Serve the web lab and its API.
    Serve(ServeArgs),
    /// Train with the profiler's report: ranked bottlenecks, the data/forward/backward
    /// split, and the knobs to turn (same flags as `train`).
    #[command(args_override_self = true, allow_negative_numbers = true)]
    Profile(Box<ProfileArgs>),
    /// Benchmarks (`hotlab bench envs --help`).
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Compile every CUDA kernel (NVRTC; no GPU needed with --compile-only); on a CUDA GPU
    /// check every GPU path against its CPU reference, then benchmark them.
    GpuCheck(crate::gpu_cli::GpuCheckArgs),
    /// Prove a query on a knowledge base by depth-bounded SLD resolution (the proof env's
    /// successor relation) and print one shortest proof.
    Prove(crate::prove_cli::ProveArgs),
    /// Internal: one worker process of `--backend subprocess`.
    #[command(hide = true)]
    EnvWorker(EnvWorkerArgs),
}

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Env stepping only, random actions: steps/s and counters per backend and env count.
    #[command(allow_negative_numbers = true)]
    Envs(crate::bench_cli::BenchEnvsArgs),
}

/// A flag value that is not allowed (exit code 2).
#[derive(Debug, thiserror::Error)]
#[error("{flag}: {message}")]
pub struct UsageError {
    pub flag: &'static str,
    pub message: String,
}

#[derive(Args, Debug)]
pub struct TrainArgs {
    /// Starting point: `cleanrl` (4 envs × 128 steps, 4 epochs, 4 minibatches, 500k steps),
    /// `wide` (1024 envs × 128 steps, 4 epochs, 32 minibatches, 5M steps) or `proof` (the
    /// proof env, 64 envs × 128 steps, lr 0.003, 1M steps); explicit flags override it.
    #[arg(long, default_value = "cleanrl")]
    pub preset: Preset,
    /// Workload [default: cartpole].
    #[arg(long)]
    pub env: Option<EnvName>,
    /// Parallel environments [cleanrl: 4].
    #[arg(long)]
    pub envs: Option<usize>,
    /// Steps per environment per rollout [cleanrl: 128].
    #[arg(long)]
    pub steps: Option<usize>,
    /// Environment steps over the whole run [cleanrl: 500000].
    #[arg(long)]
    pub total_steps: Option<u64>,
    /// Passes over each rollout [4].
    #[arg(long)]
    pub epochs: Option<usize>,
    /// Minibatches per epoch; must divide envs × steps [cleanrl: 4].
    #[arg(long)]
    pub minibatches: Option<usize>,
    /// Adam learning rate [2.5e-4].
    #[arg(long)]
    pub lr: Option<f64>,
    /// Discount factor [0.99].
    #[arg(long)]
    pub gamma: Option<f64>,
    /// GAE lambda [0.95].
    #[arg(long)]
    pub gae_lambda: Option<f64>,
    /// PPO clip range [0.2].
    #[arg(long)]
    pub clip: Option<f64>,
    /// Entropy coefficient [0.01].
    #[arg(long)]
    pub ent_coef: Option<f64>,
    /// Value loss coefficient [0.5].
    #[arg(long)]
    pub vf_coef: Option<f64>,
    /// Gradient norm clip [0.5].
    #[arg(long)]
    pub max_grad_norm: Option<f64>,
    /// Anneal the learning rate linearly to 0 (the default).
    #[arg(long, overrides_with = "no_anneal_lr")]
    pub anneal_lr: bool,
    /// Keep the learning rate constant.
    #[arg(long)]
    pub no_anneal_lr: bool,
    /// Hidden layer widths of actor and critic, comma-separated [64,64].
    #[arg(long, value_delimiter = ',')]
    pub hidden: Option<Vec<usize>>,
    /// Seed of every random stream [1].
    #[arg(long)]
    pub seed: Option<u64>,
    /// cpu, cuda, cuda:N or auto (a GPU if there is one) [auto].
    #[arg(long)]
    pub device: Option<String>,
    /// Rollout forward: `fused` (native, no per-op dispatch) or `eager` (libtorch ops) [fused].
    #[arg(long)]
    pub inference: Option<Inference>,
    /// Env backend: sequential, threads, subprocess, vectorized or device [vectorized].
    #[arg(long)]
    pub backend: Option<Backend>,
    /// Worker threads/processes for `threads` and `subprocess`; 0 = one per core [0].
    #[arg(long)]
    pub workers: Option<usize>,
    /// How to wait for `subprocess` workers: `spin` (busy-poll) or `block` (futex) [block].
    #[arg(long)]
    pub wait: Option<WaitMode>,
    /// Observations to the device for an eager forward: per_tensor, packed or pinned [packed].
    #[arg(long)]
    pub transfer: Option<Transfer>,
    /// Actions back from an eager forward: per_item (a read per element) or stacked [stacked].
    #[arg(long)]
    pub action_sync: Option<ActionSync>,
    /// libtorch intra-op threads; 0 = automatic: 1 for minibatches under 1024 rows or beside env workers (threads, subprocess), else one per core [0].
    #[arg(long)]
    pub threads: Option<usize>,
    /// The update's matmul precision: fp32, fp16 (CUDA; dynamic loss scaling), bf16, or auto
    /// (bf16 where the device supports it, else fp32); master weights stay fp32 [fp32].
    #[arg(long)]
    pub precision: Option<Precision>,
    /// Global and per-layer gradient norms every K updates, published from a background
    /// thread (telemetry.jsonl with --out); 0 = off [0].
    #[arg(long)]
    pub telemetry_every: Option<u64>,
    /// Proof env: a Prolog file (facts and Horn rules, arity 1 or 2) or a generated world,
    /// `family:people=N,seed=S` or `geography:places=N,seed=S` [family:people=200,seed=3].
    #[arg(long)]
    pub kb: Option<String>,
    /// Proof env: a query file, one ground atom per line, `% test` before the held-out
    /// ones (needed with a --kb file; generated for a world when absent).
    #[arg(long)]
    pub queries: Option<String>,
    /// Proof env: most resolution steps per episode [10].
    #[arg(long)]
    pub proof_depth: Option<usize>,
    /// Proof env: width of the policy's index embeddings [32].
    #[arg(long)]
    pub embed_dim: Option<usize>,
    /// Write the checkpoint, metrics.jsonl and report.json here.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print one JSON object (the run's summary) as the last line, no progress bar.
    #[arg(long)]
    pub json: bool,
}

impl TrainArgs {
    /// The preset with every explicit flag applied on top.
    pub fn spec(&self) -> RunSpec {
        let mut s = self.preset.spec();
        macro_rules! set {
            ($($field:ident),*) => { $( if let Some(v) = self.$field.clone() { s.$field = v; } )* };
        }
        set!(env, envs, steps, total_steps, epochs, minibatches, lr, gamma, gae_lambda, clip, ent_coef);
        set!(vf_coef, max_grad_norm, hidden, seed, device, inference, threads);
        set!(backend, workers, wait, transfer, action_sync, precision, telemetry_every);
        set!(kb, proof_depth, embed_dim);
        if self.queries.is_some() {
            s.queries = self.queries.clone();
        }
        if self.no_anneal_lr {
            s.anneal_lr = false;
        } else if self.anneal_lr {
            s.anneal_lr = true;
        }
        s
    }
}

#[derive(Args, Debug)]
pub struct ProfileArgs {
    #[command(flatten)]
    pub train: TrainArgs,
    /// Report format: `md` (Markdown) or `json`.
    #[arg(long, default_value = "md", value_parser = ["md", "json"])]
    pub report: String,
    /// Also write Chrome trace-event JSON (opens in Perfetto and chrome://tracing) here.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Rollout steps to trace, `A..B` (a step = every env once).
    #[arg(long, default_value = "0..64")]
    pub trace_steps: hotlab::profiler::TraceWindow,
}

pub fn profile(a: ProfileArgs) -> Result<()> {
    let trace = a.trace.as_ref().map(|_| a.trace_steps);
    let json = a.report == "json" || a.train.json;
    let trained = run_training(&a.train, trace, json)?;
    let report = hotlab_shared::report::analyze(&trained.report.profile, &trained.report.config);
    if let (Some(path), Some(events)) = (&a.trace, &trained.trace) {
        std::fs::write(path, serde_json::to_string(events)?)
            .with_context(|| format!("--trace: cannot write {}", path.display()))?;
    }
    if json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{}", report.markdown());
        if let Some(path) = &a.trace {
            println!(
                "
trace of steps {}..{} written to {}",
                a.trace_steps.first,
                a.trace_steps.end,
                path.display()
            );
        }
    }
    Ok(())
}

pub fn train(a: TrainArgs) -> Result<()> {
    let trained = run_training(&a, None, a.json)?;
    let report = &trained.report;
    if a.json {
        println!("{}", serde_json::to_string(report)?);
    } else {
        let ret = report.mean_return_last_100.map_or("n/a".into(), |r| format!("{r:.1}"));
        println!(
            "{} on {} ({} backend): {} steps in {:.1} s = {:.0} steps/s (set-up {:.2} s before); {} episodes, mean return of the last 100: {ret}",
            report.env, report.device, report.backend, report.total_steps, report.wall_s, report.sps, report.setup_s, report.episodes
        );
        let k = &report.counters;
        println!(
            "counters: {} host syncs, {} h2d copies ({} B), {} d2h copies ({} B), {} IPC round-trips, {} spins, {:.2} s waiting on workers",
            k.host_syncs, k.h2d_copies, k.h2d_bytes, k.d2h_copies, k.d2h_bytes, k.ipc_round_trips, k.spin_iterations, k.worker_wait_s
        );
        if let Some(p) = &report.proof {
            println!("{}", p.summary());
        }
        for note in &report.notes {
            println!("note: {note}");
        }
        if let Some(dir) = &a.out {
            println!("checkpoint and metrics written to {}", dir.display());
        }
    }
    Ok(())
}

/// Trains with a progress bar (unless `quiet`), writing `--out` if asked.
fn run_training(a: &TrainArgs, trace: Option<hotlab::profiler::TraceWindow>, quiet: bool) -> Result<train::Trained> {
    let spec = a.spec();
    spec.validate()?;
    let mut metrics = match &a.out {
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("--out: cannot create {}", dir.display()))?;
            let path = dir.join("metrics.jsonl");
            let file =
                std::fs::File::create(&path).with_context(|| format!("--out: cannot write {}", path.display()))?;
            Some(std::io::BufWriter::new(file))
        }
        None => None,
    };
    let bar = if quiet { ProgressBar::hidden() } else { ProgressBar::new(spec.updates() * spec.batch_size() as u64) };
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {human_pos}/{human_len} steps  {msg}")
            .expect("valid template"),
    );
    let sink: Option<hotlab::telemetry::Sink> = match (&a.out, spec.telemetry_every) {
        (Some(dir), k) if k > 0 => {
            let path = dir.join("telemetry.jsonl");
            let mut file = std::io::BufWriter::new(
                std::fs::File::create(&path).with_context(|| format!("--out: cannot create {}", path.display()))?,
            );
            Some(Box::new(move |e: &hotlab::telemetry::GradNorms| {
                if let Ok(line) = serde_json::to_string(e) {
                    let _ = writeln!(file, "{line}");
                    let _ = file.flush();
                }
            }))
        }
        _ => None,
    };
    let opts = train::TrainOptions { trace, telemetry_sink: sink, ..Default::default() };
    let trained = train::train_with(&spec, opts, &mut |m| {
        bar.set_position(m.point.global_step);
        let ret = m.point.mean_return_last_100.map_or("-".into(), |r| format!("{r:.1}"));
        bar.set_message(format!("{:.0} SPS  return {ret}", m.point.sps));
        if let Some(w) = metrics.as_mut() {
            let _ = writeln!(w, "{}", serde_json::to_string(m).unwrap_or_default());
        }
    })?;
    bar.finish_and_clear();
    if let Some(dir) = &a.out {
        if let Some(mut w) = metrics.take() {
            w.flush().context("writing metrics.jsonl")?;
        }
        checkpoint::save(dir, &spec, &trained.model, trained.task.as_deref())?;
        std::fs::write(dir.join("report.json"), serde_json::to_string_pretty(&trained.report)?)?;
    }
    Ok(trained)
}

#[derive(Args, Debug)]
pub struct EvalArgs {
    /// A directory written by `hotlab train --out`.
    #[arg(long)]
    pub checkpoint: PathBuf,
    /// Episodes to play (1 to 100000); for a proof policy, tries per held-out query (at most 1000).
    #[arg(long, default_value_t = 100)]
    pub episodes: usize,
    /// Seed of the evaluation envs.
    #[arg(long, default_value_t = 12_345)]
    pub seed: u64,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

pub fn eval(a: EvalArgs) -> Result<()> {
    if !(1..=100_000).contains(&a.episodes) {
        return Err(UsageError {
            flag: "--episodes",
            message: format!("must be between 1 and 100000 (got {})", a.episodes),
        }
        .into());
    }
    if !a.checkpoint.join(checkpoint::SPEC_FILE).exists() {
        return Err(UsageError {
            flag: "--checkpoint",
            message: format!("{} is not a checkpoint directory (no {})", a.checkpoint.display(), checkpoint::SPEC_FILE),
        }
        .into());
    }
    let loaded = checkpoint::load(&a.checkpoint)?;
    if let (hotlab::model::Model::Proof(net), Some(task)) = (&loaded.model, &loaded.task) {
        // A proof policy: its held-out proof rate against random choice, `--episodes`
        // tries per query for the sampled policy and the baseline.
        let mut policy = hotlab::proof_fused::ProofHost::new(net.arch.clone(), &net.host_params());
        let report = hotlab::proof_eval::evaluate(task, &mut policy, a.episodes.min(1000), a.seed);
        match a.json {
            true => println!("{}", serde_json::to_string(&report)?),
            false => println!("{}", report.summary()),
        }
        return Ok(());
    }
    let report = eval::evaluate(&loaded.meta.spec, loaded.model.mlp(), a.episodes, a.seed)?;
    if a.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        println!(
            "{} greedy over {} episodes: mean return {:.1} (min {:.0}, max {:.0})",
            report.env, report.episodes, report.mean_return, report.min_return, report.max_return
        );
    }
    Ok(())
}

#[derive(Args, Debug)]
pub struct SystemArgs {
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

pub fn system(a: SystemArgs) -> Result<()> {
    let info = system::info();
    if a.json {
        println!("{}", serde_json::to_string(&info)?);
        return Ok(());
    }
    println!("hotlab {} (libtorch {})", info.version, info.torch_version);
    println!("CPU cores: {}, libtorch threads: {}", info.cpu_cores, info.torch_threads);
    println!("CUDA available: {}", info.cuda_available);
    for d in &info.devices {
        let mem = d.memory_bytes.map_or(String::new(), |b| format!(", {:.1} GiB", b as f64 / (1u64 << 30) as f64));
        println!("  {}: {}{mem}", d.id, d.name);
    }
    Ok(())
}

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
    let static_dir = serve::find_static_dir(a.static_dir);
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    let cfg = serve::ServeConfig {
        host: a.host,
        port: a.port,
        static_dir,
        data_dir: a.data_dir,
        token: a.token,
        max_runs: a.max_runs,
    };
    runtime.block_on(serve::serve(cfg))
}

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
    worker::run(WorkerArgs {
        shm_fd: a.shm_fd,
        worker: a.worker,
        workers: a.workers,
        envs: a.envs,
        first: a.first,
        count: a.count,
        env: a.env,
        kb: a.kb,
        queries: a.queries,
        proof_depth: a.proof_depth,
        seed: a.seed,
        wait: a.wait,
        parent: a.parent,
    })
}
