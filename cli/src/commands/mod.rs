//! The `hotlab` subcommands: one file each, with its flags and its printout. Everything
//! they run is in the library.

mod audit;
mod bench;
mod bench_batch;
mod bench_growth;
mod bench_morpho;
mod env_worker;
mod eval;
mod gpu_check;
mod knob_args;
mod lab_check;
mod lesson;
mod prove;
mod prune;
mod run_worker;
mod script;
mod serve;
mod soak;
mod sweep;
mod system;
mod train;
mod tune;
mod worker;

use crate::failure::Outcome;
use clap::{Parser, Subcommand};

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
    /// split, and the knobs to turn (same flags as `train`); or profile your own training
    /// script, unmodified: `hotlab profile -- python ppo.py --num-envs 8`.
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
    Bench(bench::BenchCommand),
    /// Compile every CUDA kernel (NVRTC; no GPU needed with --compile-only); on a CUDA GPU
    /// check every GPU path against its CPU reference, then benchmark them.
    GpuCheck(gpu_check::GpuCheckArgs),
    /// The lab end to end on this machine: `hotlab serve` and a `hotlab worker` named
    /// gpu-box, a run placed on it and followed over the WebSocket, a run stopped mid-run,
    /// an audit with a verdict (`scripts/gpu-check` runs it on CUDA).
    LabCheck(lab_check::LabCheckArgs),
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

/// Runs a parsed command line.
pub fn run(cli: Cli) -> Outcome<()> {
    match cli.command {
        Command::Train(a) => train::train(*a),
        Command::Eval(a) => eval::eval(a),
        Command::System(a) => system::system(a),
        Command::Serve(a) => serve::serve(a),
        Command::Worker(a) => worker::worker(a),
        Command::Profile(a) if a.torch_trace.is_some() => script::torch_trace(*a),
        Command::Profile(a) if a.is_script() => script::profile(*a),
        Command::Profile(a) => train::profile(*a),
        Command::Bench(c) => bench::bench(c),
        Command::Prove(a) => prove::prove_cmd(a),
        Command::Audit(a) => audit::audit(*a),
        Command::Lesson(c) => lesson::lesson(c),
        Command::Tune(a) => tune::tune(*a),
        Command::Sweep(a) => sweep::sweep(*a),
        Command::Prune(a) => prune::prune(a),
        Command::GpuCheck(a) => gpu_check::gpu_check(a),
        Command::LabCheck(a) => lab_check::lab_check(a),
        Command::EnvWorker(a) => env_worker::env_worker(a),
        Command::RunWorker(a) => run_worker::run_worker(a),
    }
}
