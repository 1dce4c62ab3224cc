//! The `hotlab` subcommands: one file each, with its flags and its printout. Everything
//! they run is in the library.

mod audit;
mod bench;
mod bench_batch;
mod bench_morpho;
mod env_worker;
mod eval;
mod gpu_check;
mod lesson;
mod prove;
mod prune;
mod run_worker;
mod serve;
mod soak;
mod sweep;
mod system;
mod train;
mod tune;
mod worker;

use anyhow::Result;
use clap::{Parser, Subcommand};
use hotlab_shared::knobs;
use hotlab_shared::spec::{
    EncoderMode, HostExec, LifecycleMode, LossRead, Precision, ReplayAt, RunSpec, SlotPool, SpecError, StreamWait,
};
use serde_json::Value;

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
    Train(Box<train::TrainArgs>),
    /// Run a trained policy greedily and report its mean return.
    #[command(allow_negative_numbers = true)]
    Eval(eval::EvalArgs),
    /// Show hotlab's and libtorch's versions, devices and cores.
    System(system::SystemArgs),
    /// Serve the web lab and its API.
    Serve(serve::ServeArgs),
    /// Join a lab as one of its machines: connect out to it, train the runs it sends.
    Worker(worker::WorkerArgs),
    /// Train with the profiler's report: ranked bottlenecks, the data/forward/backward
    /// split, and the knobs to turn (same flags as `train`).
    #[command(args_override_self = true, allow_negative_numbers = true)]
    Profile(Box<train::ProfileArgs>),
    /// Re-run a run with each change (KEY=VALUE) applied alone, interleaved with the
    /// baseline, and say whether it held: confirmed, no effect, or a regression.
    #[command(args_override_self = true, allow_negative_numbers = true)]
    Audit(Box<audit::AuditArgs>),
    /// Find the fastest configuration that still learns: audit the report's
    /// recommendations, keep the fastest confirmed one, repeat until nothing helps.
    #[command(args_override_self = true, allow_negative_numbers = true)]
    Tune(Box<tune::TuneArgs>),
    /// Train every combination of a grid of settings and rank them: steps/s and return per
    /// cell, the best cell; here, or on a lab's workers or Ray.
    #[command(args_override_self = true, allow_negative_numbers = true)]
    Sweep(Box<sweep::SweepArgs>),
    /// The catalogue's lessons: each bottleneck shown and removed, with the audit's verdicts
    /// (`hotlab lesson list`, `hotlab lesson run ID`).
    #[command(subcommand)]
    Lesson(lesson::LessonCommand),
    /// Benchmarks (`hotlab bench envs --help`).
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Compile every CUDA kernel (NVRTC; no GPU needed with --compile-only); on a CUDA GPU
    /// check every GPU path against its CPU reference, then benchmark them.
    GpuCheck(gpu_check::GpuCheckArgs),
    /// Delete old ended runs from a lab's store (the lab never deletes by itself).
    Prune(prune::PruneArgs),
    /// Prove a query on a knowledge base by depth-bounded SLD resolution (the proof env's
    /// successor relation) and print one shortest proof.
    Prove(prove::ProveArgs),
    /// Internal: one worker process of `--backend subprocess`.
    #[command(hide = true)]
    EnvWorker(env_worker::EnvWorkerArgs),
    /// Internal: one run of the lab, in its own process.
    #[command(hide = true)]
    RunWorker(run_worker::RunWorkerArgs),
}

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Env stepping only, random actions: steps/s and counters per backend and env count.
    #[command(allow_negative_numbers = true)]
    Envs(bench::BenchEnvsArgs),
    /// A lab under many viewers for minutes: the server's memory over time, steps/s and
    /// the trainer's publishing share with and without viewers, events stored and dropped.
    Soak(soak::BenchSoakArgs),
    /// The morpho env's host training alone, bare and with each blueprint grown in every
    /// slot: minibatches/s, samples/s and GFLOP/s against this machine's sgemm.
    Host(bench::BenchHostArgs),
    /// The dreamer's train step at each batch size: samples/s, the data / forward /
    /// backward split, memory against the device's, GFLOP/s against sgemm, and where
    /// throughput stops growing.
    Batch(bench_batch::BenchBatchArgs),
    /// The morpho trainer at each env count: decisions/s, host samples/s and where the time
    /// went for its defaults, each knob flipped alone and every knob flipped, interleaved.
    Morpho(bench_morpho::BenchMorphoArgs),
}

/// A bar over a series of runs ("run i/n: what"), hidden where the output is JSON; feed it
/// with [`runs_progress`].
pub(crate) fn runs_bar(json: bool) -> indicatif::ProgressBar {
    let bar = if json { indicatif::ProgressBar::hidden() } else { indicatif::ProgressBar::new(1) };
    bar.set_style(
        indicatif::ProgressStyle::with_template("[{elapsed_precise}] {bar:30} run {pos}/{len}: {msg}")
            .expect("template"),
    );
    bar
}

/// What a series of runs reports before each run (`what`, run `done` of `total`), shown on `bar`.
pub(crate) fn runs_progress(bar: &indicatif::ProgressBar) -> impl FnMut(&str, usize, usize) + '_ {
    |what, done, total| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
        bar.set_message(what.to_string());
    }
}

/// A flag value that is not allowed (exit code 2).
#[derive(Debug, thiserror::Error)]
#[error("{flag}: {message}")]
pub struct UsageError {
    pub flag: &'static str,
    pub message: String,
}

/// Runs a parsed command line.
pub fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Train(a) => train::train(*a),
        Command::Eval(a) => eval::eval(a),
        Command::System(a) => system::system(a),
        Command::Serve(a) => serve::serve(a),
        Command::Worker(a) => worker::worker(a),
        Command::Profile(a) => train::profile(*a),
        Command::Bench(BenchCommand::Envs(a)) => bench::envs(a),
        Command::Bench(BenchCommand::Soak(a)) => soak::soak(a),
        Command::Bench(BenchCommand::Host(a)) => bench::host(a),
        Command::Bench(BenchCommand::Batch(a)) => bench_batch::batch(a),
        Command::Bench(BenchCommand::Morpho(a)) => bench_morpho::morpho(a),
        Command::Prove(a) => prove::prove_cmd(a),
        Command::Audit(a) => audit::audit(*a),
        Command::Lesson(c) => lesson::lesson(c),
        Command::Tune(a) => tune::tune(*a),
        Command::Sweep(a) => sweep::sweep(*a),
        Command::Prune(a) => prune::prune(a),
        Command::GpuCheck(a) => gpu_check::gpu_check(a),
        Command::EnvWorker(a) => env_worker::env_worker(a),
        Command::RunWorker(a) => run_worker::run_worker(a),
    }
}

/// The proof env's own flags (`hotlab train` and `hotlab bench envs`), each a knob of its
/// settings; given for another workload, they are refused.
#[derive(clap::Args, Debug, Default)]
pub struct ProofFlags {
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
}

impl ProofFlags {
    /// The flags given, by knob.
    pub fn given(&self) -> Vec<(&'static str, Option<Value>)> {
        vec![
            ("kb", self.kb.clone().map(Value::from)),
            ("queries", self.queries.clone().map(Value::from)),
            ("proof_depth", self.proof_depth.map(Value::from)),
        ]
    }
}

/// The morphogenetic workload's own flags (`hotlab train`, `hotlab bench envs`).
#[derive(clap::Args, Debug, Default)]
pub struct MorphoFlags {
    /// Morpho: the first training task's seed; evaluation's held-out tasks come after the training ones [1].
    #[arg(long)]
    pub task_seed: Option<u64>,
    /// Morpho: training tasks the envs cycle through [8].
    #[arg(long)]
    pub tasks: Option<usize>,
    /// Morpho: training images per task; validation gets a quarter as many [2048].
    #[arg(long)]
    pub task_images: Option<usize>,
    /// Morpho: host epochs per episode, one agent decision each [12].
    #[arg(long)]
    pub host_epochs: Option<u32>,
    /// Morpho: the host's first-stage channels (2× and 4× in the next stages) [16].
    #[arg(long)]
    pub host_width: Option<usize>,
    /// Morpho: reward lost over an episode per host's worth of parameters the seeds add [0.02].
    #[arg(long)]
    pub rent: Option<f64>,
    /// Morpho: orderings sampled for each step's Shapley credit; 0 = exact, every ordering [0].
    #[arg(long)]
    pub shapley_perms: Option<usize>,
    /// Morpho: how hosts hold their seeds: `dynamic` makes a seed's tensors on its graft and frees them (and its optimizer state) on removal; `sleeper` keeps one of each blueprint per slot, masked, reset in place (catalogue row 9) [dynamic].
    #[arg(long)]
    pub slots: Option<SlotPool>,
    /// Morpho: how a batch of envs runs its lifecycles and rewards: `loop` env after env, each env's slot state read one value at a time and written back with one small op (seed 003's "CPU trench", catalogue row 8); `batched` every env in one pass of tensor ops, read back once. Identical trajectories [batched].
    #[arg(long)]
    pub lifecycle: Option<LifecycleMode>,
    /// Morpho: how a batch of envs trains its hosts: `per_env` one host after another, each with its own ops; `batched` every host as one model with a leading env dimension (grouped convolutions, batched matmuls), each host's epoch its own length. The same hosts to rounding. On a CPU batching measured slower (oneDNN runs each host's small convolutions about as well as a grouped one, and the batch adds gathers): per_env [per_env].
    #[arg(long)]
    pub host_exec: Option<HostExec>,
    /// Morpho: what the hosts' convolutions and matmuls compute in: `fp32`, `bf16` (fp32 master weights; norms, softmax, loss and Adam in fp32), `fp16` (the same with a dynamic loss scaler on the device; hosts on CUDA under --host-exec per_env only) or `auto` (bf16 where the device has it) [fp32].
    #[arg(long)]
    pub host_precision: Option<Precision>,
    /// Morpho, hosts on CUDA (`--device cuda`) under `--host-exec per_env`, each on its own stream: `every` makes a host's stream wait for the default stream before every minibatch (seed 002 #4's redundant wait); `moved` once per epoch, after the surgery and the epoch's indices reached the device. Refused with hosts on the CPU, which have no streams [moved].
    #[arg(long)]
    pub stream_wait: Option<StreamWait>,
}

impl MorphoFlags {
    /// The flags given, by knob.
    pub fn given(&self) -> Vec<(&'static str, Option<Value>)> {
        vec![
            ("task_seed", self.task_seed.map(Value::from)),
            ("tasks", self.tasks.map(Value::from)),
            ("task_images", self.task_images.map(Value::from)),
            ("host_epochs", self.host_epochs.map(Value::from)),
            ("host_width", self.host_width.map(Value::from)),
            ("rent", self.rent.map(Value::from)),
            ("shapley_perms", self.shapley_perms.map(Value::from)),
            ("slots", self.slots.map(|s| Value::from(s.as_str()))),
            ("lifecycle", self.lifecycle.map(|s| Value::from(s.as_str()))),
            ("host_exec", self.host_exec.map(|s| Value::from(s.as_str()))),
            ("host_precision", self.host_precision.map(|s| Value::from(s.as_str()))),
            ("stream_wait", self.stream_wait.map(|s| Value::from(s.as_str()))),
        ]
    }
}

/// The world-model workload's own flags (`hotlab train --env dreamer`).
#[derive(clap::Args, Debug, Default)]
pub struct DreamerFlags {
    /// Dreamer: width multiplier of every network: 1 = conv depth 8, GRU 128, MLPs 128 (a CPU); 4–8 for a GPU box [1].
    #[arg(long)]
    pub size: Option<usize>,
    /// Dreamer: replayed sequences per train step (`hotlab bench batch` sweeps it) [16].
    #[arg(long)]
    pub batch_size: Option<usize>,
    /// Dreamer: steps per replayed sequence [16].
    #[arg(long)]
    pub seq_len: Option<usize>,
    /// Dreamer: replayed steps per env step; train steps = env steps × ratio ÷ (batch × seq-len) [64].
    #[arg(long)]
    pub train_ratio: Option<f64>,
    /// Dreamer: steps of each imagined trajectory the actor and critic learn from [15].
    #[arg(long)]
    pub horizon: Option<usize>,
    /// Dreamer: env steps the replay buffer holds; the oldest are overwritten [100000].
    #[arg(long)]
    pub replay_capacity: Option<usize>,
    /// Dreamer: env steps of random actions before the first train step [1024].
    #[arg(long)]
    pub prefill: Option<usize>,
    /// Dreamer: the world model's Adam learning rate [3e-4].
    #[arg(long)]
    pub wm_lr: Option<f64>,
    /// Dreamer: the actor's and critic's Adam learning rate [1e-4].
    #[arg(long)]
    pub ac_lr: Option<f64>,
    /// Dreamer: the encoder once per timestep inside the RSSM loop (`per_step`, seed 004's loop) or once on every frame of the batch, `[B·T, C, H, W]` (`batched`). The same losses to rounding [batched].
    #[arg(long)]
    pub encoder: Option<EncoderMode>,
    /// Dreamer: every loss term read with `.item()` each train step (`per_item`, a host sync each, seed 004) or summed as tensors and read once per iteration (`deferred`). The same training [deferred].
    #[arg(long)]
    pub loss_read: Option<LossRead>,
    /// Dreamer: where the replay buffer lives: `host` (gathered in host memory, copied to the model), `pinned` (page-locked, copied without blocking; CUDA only) or `device` (a tensor beside the model; a batch is one gather) [device].
    #[arg(long)]
    pub replay: Option<ReplayAt>,
}

impl DreamerFlags {
    /// The flags given, by knob.
    pub fn given(&self) -> Vec<(&'static str, Option<Value>)> {
        vec![
            ("size", self.size.map(Value::from)),
            ("batch_size", self.batch_size.map(Value::from)),
            ("seq_len", self.seq_len.map(Value::from)),
            ("train_ratio", self.train_ratio.map(Value::from)),
            ("horizon", self.horizon.map(Value::from)),
            ("replay_capacity", self.replay_capacity.map(Value::from)),
            ("prefill", self.prefill.map(Value::from)),
            ("wm_lr", self.wm_lr.map(Value::from)),
            ("ac_lr", self.ac_lr.map(Value::from)),
            ("encoder", self.encoder.map(|s| Value::from(s.as_str()))),
            ("loss_read", self.loss_read.map(|s| Value::from(s.as_str()))),
            ("replay", self.replay.map(|s| Value::from(s.as_str()))),
        ]
    }
}

/// `spec` with the workload settings given as flags (knob name, value), each at its knob's
/// JSON path; a setting of another workload than the spec's is refused, naming its flag.
pub fn with_own_settings(spec: RunSpec, given: &[(&str, Option<Value>)]) -> Result<RunSpec, SpecError> {
    let given: Vec<_> = given.iter().filter_map(|(name, v)| Some((knobs::find(name)?, v.clone()?))).collect();
    if given.is_empty() {
        return Ok(spec);
    }
    let env = spec.env();
    let mut json = serde_json::to_value(&spec).ok().and_then(|v| v.as_object().cloned()).unwrap_or_default();
    for (knob, v) in given {
        if !knob.applies_to(env) {
            let owner = knob.workload.map_or("another workload", |w| w.as_str());
            return Err(SpecError::new(
                knob.name,
                format!("is a setting of --env {owner}, and this run's env is {env}"),
            ));
        }
        if v.is_null() {
            // JSON has no NaN or infinity: `Value::from` made them null.
            return Err(SpecError::new(knob.name, "must be a finite number"));
        }
        knob.set(&mut json, v);
    }
    serde_json::from_value(Value::Object(json)).map_err(|e| SpecError::new("env", e.to_string()))
}
