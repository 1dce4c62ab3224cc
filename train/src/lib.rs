//! hotlab's trainer, whatever the workload: the loop, top to bottom, the seam a workload
//! plugs into, and everything under it. It names no workload (`hotlab-workloads` has
//! them) and knows nothing of the lab (`hotlab-lab`).
//!
//! [`run`] resolves the device, precision and threads, has the workload build its
//! [`Learner`], then repeats iterations (PPO: rollout → GAE → update) inside the
//! profiler's spans, the counters, rollout frames, gradient telemetry and the stop flag,
//! and reports after each one. See [`workload`] for the seam.
//!
//! - [`ppo`]: PPO as a learner (the rollout, the update, the loss, the advantages);
//! - [`rollout`], [`gae`], [`adam`], [`distribution`]: its buffer, advantages, optimizer,
//!   and the multi-head masked categorical;
//! - [`precision`], [`telemetry`], [`frames`], [`episodes`], [`params`], [`checkpoint`]:
//!   the update's precision, gradient norms off the hot path, frames for viewers, the
//!   episode tally, parameter layouts and checkpoint files;
//! - [`models`]: networks more than one workload trains (the MLP actor-critic);
//! - [`exec`]: where envs step (the host backends), host↔device transfers, the helper
//!   thread, `--device`;
//! - [`cuda`], [`kernels`], [`profiler`], [`system`]: CUDA kernels, events and the shim,
//!   host f32 kernels, the phase profiler, the machine.

pub mod adam;
pub mod checkpoint;
pub mod cuda;
pub mod distribution;
pub mod episodes;
pub mod exec;
pub mod frames;
pub mod gae;
pub mod kernels;
pub mod models;
pub mod normalize;
pub mod params;
pub mod ppo;
pub mod precision;
pub mod profiler;
pub mod rollout;
pub mod system;
pub mod telemetry;
/// Helpers for unit tests (here and in the workloads).
#[doc(hidden)]
pub mod testing;
pub mod workload;

use crate::cuda::events::EventTimer;
use crate::exec::device;
use crate::profiler::{Profiler, TraceWindow};
use anyhow::{bail, Result};
use episodes::Episodes;
use frames::{FrameFeed, Frames};
use hotlab_shared::counters::Counters;
use hotlab_shared::profile::{Phase, Profile};
use hotlab_shared::protocol::MetricsPoint;
use hotlab_shared::spec::{Backend, RunSpec};
use serde::Serialize;
use std::sync::Arc;
use std::time::Instant;
use telemetry::{Sink, Telemetry, TelemetrySummary};
use workload::{Iteration, Setup, TrainedPolicy, Workload};

/// What is known after each update (streamed to the progress bar and `metrics.jsonl`).
#[derive(Clone, Debug, Serialize)]
pub struct UpdateMetrics {
    /// The figures the lab streams (the same keys in `metrics.jsonl`).
    #[serde(flatten)]
    pub point: MetricsPoint,
    /// The fp16 loss scale after this update (fp16 only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loss_scale: Option<f64>,
    /// Steps the fp16 scaler has skipped so far (inf/NaN gradients).
    pub skipped_steps: u64,
    /// This update's counts.
    pub counters: Counters,
    /// This update's phases.
    pub profile: Profile,
    /// Lines the learner has for a person watching (printed by `hotlab train`).
    #[serde(skip)]
    pub lines: Vec<String>,
}

/// The summary of a finished run (`hotlab train --json` prints it).
#[derive(Clone, Debug, Serialize)]
pub struct TrainReport {
    pub env: String,
    pub device: String,
    pub backend: String,
    pub total_steps: u64,
    /// Seconds of training (rollouts and updates), what `sps` divides by.
    pub wall_s: f64,
    pub sps: f64,
    /// Seconds before the first step: loading the workload (a proof world's queries are
    /// generated and labelled), starting workers, the network.
    pub setup_s: f64,
    pub episodes: u64,
    pub mean_return_last_100: Option<f64>,
    pub updates: u64,
    /// libtorch intra-op threads used.
    pub threads: usize,
    /// Counts over the whole run.
    pub counters: Counters,
    /// Phase totals over the whole run.
    pub profile: Profile,
    /// The update's resolved precision: fp32, fp16 or bf16.
    pub precision: String,
    /// Gradient telemetry: events sent, dropped, published.
    pub telemetry: TelemetrySummary,
    /// Where a knob could not do what it says here, and what happened instead.
    pub notes: Vec<String>,
    /// The steady window, when the run went past its warm-up.
    pub steady: Option<Steady>,
    /// The fully resolved spec.
    pub config: RunSpec,
    /// The workload's own evaluation of the trained policy, under its key (the proof env:
    /// `proof`, the held-out proof rate against random choice).
    #[serde(flatten)]
    pub evaluation: serde_json::Map<String, serde_json::Value>,
    /// That evaluation in one line for people.
    #[serde(skip)]
    pub evaluation_summary: Option<String>,
}

/// The run's steady window: its iterations after the learner's warm-up
/// ([`Learner::warmup`](workload::Learner::warmup)), timed from the end of the last
/// warm-up iteration to the end of the run, on a GPU with the device synchronized at both
/// edges. What an audit compares: start-up, compilation, capture and prefill stay out.
#[derive(Clone, Debug, Serialize)]
pub struct Steady {
    /// Iterations left out at the start.
    pub warmup_updates: u64,
    /// Iterations timed.
    pub updates: u64,
    pub env_steps: u64,
    pub seconds: f64,
    pub sps: f64,
}

/// A deliberately slow start-up: `HOTLAB_SLOW_START_MS` milliseconds of sleep in the first
/// iteration, standing for compilation or capture (tests and demonstrations of the steady
/// window); unset, nothing.
fn slow_start() {
    if let Some(ms) = std::env::var("HOTLAB_SLOW_START_MS").ok().and_then(|v| v.parse::<u64>().ok()) {
        std::thread::sleep(std::time::Duration::from_millis(ms.min(60_000)));
    }
}

/// A trained policy, the run's summary, and the trace of the traced window (if any).
pub struct Trained {
    pub policy: Box<dyn TrainedPolicy>,
    pub report: TrainReport,
    pub trace: Option<serde_json::Value>,
}

/// What a caller can attach to a run besides its spec.
#[derive(Default)]
pub struct TrainOptions {
    /// Record Chrome trace events for these rollout steps.
    pub trace: Option<TraceWindow>,
    /// Where gradient telemetry goes (with `telemetry_every` > 0); without one it is counted only.
    pub telemetry_sink: Option<Sink>,
    /// Set from another thread to end the run after the update in progress.
    pub stop: Option<Arc<std::sync::atomic::AtomicBool>>,
    /// Where rollout frames go (none are taken without a feed).
    pub frames: Option<FrameFeed>,
    /// No held-out evaluation in the report (a benchmark times the run, not those games).
    pub skip_evaluation: bool,
}

/// libtorch threads: `--threads`, or for 0 one per core, except for small minibatches,
/// where a second thread only adds synchronization to ops too small to split (measured:
/// the same wall time at the cleanrl preset, twice the CPU time), and beside env worker
/// threads or processes: libtorch's OpenMP threads spin for a while after each parallel
/// op, on the cores the workers step on (the proof env at 64 envs under `threads`:
/// 39,000 steps/s with two libtorch threads, 100,000 with one).
pub fn torch_threads(spec: &RunSpec) -> usize {
    let workers_share_the_cores = matches!(spec.exec.backend, Backend::Threads | Backend::Subprocess);
    match spec.exec.threads {
        0 if spec.minibatch_size() < 1024 || workers_share_the_cores => 1,
        0 => cores(),
        n => n,
    }
}

/// The cores an automatic thread count takes: `OMP_NUM_THREADS` where it is set (the usual
/// cap on OpenMP's threads, for a machine shared with other jobs; `cargo xtask test` gives
/// each of its lanes its share), else one per core. More OpenMP threads than free cores
/// wait on each other at every barrier.
pub fn cores() -> usize {
    let capped = std::env::var("OMP_NUM_THREADS").ok().and_then(|v| v.trim().parse::<usize>().ok());
    capped.filter(|n| *n > 0).unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Trains `workload` as `spec` says; `observe` is called after every iteration. `begin`
/// is when the run started (loading the workload counts as set-up).
pub fn run(
    spec: &RunSpec,
    workload: Arc<dyn Workload>,
    begin: Instant,
    opts: TrainOptions,
    observe: &mut dyn FnMut(&UpdateMetrics),
) -> Result<Trained> {
    let trace = opts.trace;
    crate::exec::alloc::tune();
    let device = device::resolve(&spec.device)?;
    let precision = precision::resolve(spec.exec.precision, device)?;
    // The network's initialization runs on one thread: its rounding depends on the thread
    // count, and the same seed must give the same run whatever `--threads` says.
    tch::set_num_threads(1);
    tch::manual_seed(spec.seed as i64);
    let env = workload.name();
    let mut setup = Setup { spec, device, precision, threads: torch_threads(spec), notes: Vec::new() };
    let mut learner = workload.learner(&mut setup)?;
    let Setup { precision, threads, mut notes, .. } = setup;
    // On a CUDA device the profiler times every phase with CUDA events too.
    let timer = match device {
        tch::Device::Cuda(ordinal) => EventTimer::open(ordinal)
            .map_err(|why| notes.push(format!("{why}: phases are timed on the host only")))
            .ok(),
        _ => None,
    };
    let device_timing = timer.is_some();
    let sink = opts.telemetry_sink.unwrap_or_else(|| Box::new(|_| {}));
    let mut telemetry = Telemetry::new(spec.telemetry.every, learner.layout(), device, sink);

    // Like CleanRL's SPS, the clock starts at the first step; the set-up is its own figure.
    let setup_s = begin.elapsed().as_secs_f64();
    let start = Instant::now();
    let mut prof = Profiler::new(trace);
    prof.set_env_parts(spec.env().env_parts());
    if let Some(timer) = timer {
        prof.set_device_timer(Box::new(timer));
    }
    let mut c = Counters::default();
    let mut frames = Frames::new(opts.frames);
    let mut episodes = Episodes::default();
    let iterations = learner.iterations();
    let warmup = learner.warmup();
    let sync = |c: &mut Counters| {
        if let tch::Device::Cuda(ordinal) = device {
            tch::Cuda::synchronize(ordinal as i64);
            c.host_syncs += 1;
        }
    };
    // (when, env steps then): the end of the warm-up.
    let mut steady_from: Option<(Instant, u64)> = None;
    let mut steady_updates = 0u64;
    let mut global_step = 0u64;
    for index in 0..iterations {
        if index == 0 {
            slow_start();
        }
        if opts.stop.as_ref().is_some_and(|s| s.load(std::sync::atomic::Ordering::Relaxed)) {
            notes.push(format!("stopped after {index} of {iterations} updates"));
            break;
        }
        if spec.seconds > 0.0 && start.elapsed().as_secs_f64() >= spec.seconds {
            notes.push(format!("the budget of {} s was spent after {index} of {iterations} updates", spec.seconds));
            break;
        }
        let before = c.clone();
        let due = telemetry.due(index + 1);
        let mut it = Iteration {
            index,
            prof: &mut prof,
            counters: &mut c,
            episodes: &mut episodes,
            frames: &mut frames,
            telemetry: due.then_some(&telemetry),
            stop: opts.stop.as_deref(),
        };
        let Some(out) = learner.iterate(&mut it)? else {
            notes.push(format!("stopped during update {} of {iterations}, after {index} complete", index + 1));
            break;
        };
        global_step += out.env_steps;
        if steady_from.is_some() {
            steady_updates += 1;
        }
        if index + 1 == warmup {
            sync(&mut c);
            steady_from = Some((Instant::now(), global_step));
        }
        if let Some(norms) = &out.norms {
            let s = prof.start();
            telemetry.publish(index + 1, norms, &mut c);
            prof.stop(Phase::TELEMETRY, s);
        }
        if let Some((name, v)) = out.losses.first_not_finite() {
            bail!("training diverged: {name} is {v} at update {} of {iterations}", index + 1);
        }
        let wall_s = start.elapsed().as_secs_f64();
        if device_timing {
            c.host_syncs += 1; // the device timer waits for the window's last event
        }
        let window = prof.take_window(&c.since(&before));
        let s = prof.start();
        observe(&UpdateMetrics {
            point: MetricsPoint {
                update: index + 1,
                updates: iterations,
                global_step,
                wall_s,
                sps: global_step as f64 / wall_s,
                episodes: episodes.count,
                mean_return_last_100: episodes.mean(),
                lr: out.lr,
                losses: out.losses,
                rollout_s: out.rollout_s,
                update_s: out.learn_start.elapsed().as_secs_f64(),
            },
            loss_scale: out.loss_scale,
            skipped_steps: out.skipped_steps,
            counters: c.since(&before),
            profile: window,
            lines: out.lines,
        });
        prof.stop(Phase::PUBLISH, s);
    }

    let steady = steady_from.filter(|_| steady_updates > 0).map(|(from, steps_then)| {
        sync(&mut c);
        let seconds = from.elapsed().as_secs_f64();
        let env_steps = global_step - steps_then;
        Steady { warmup_updates: warmup, updates: steady_updates, env_steps, seconds, sps: env_steps as f64 / seconds }
    });
    let wall_s = start.elapsed().as_secs_f64();
    let policy = learner.finish();
    let evaluation = if opts.skip_evaluation { None } else { policy.report_evaluation(spec.seed) };
    let report = TrainReport {
        env: env.into(),
        device: device::label(device),
        backend: spec.exec.backend.to_string(),
        total_steps: global_step,
        wall_s,
        sps: global_step as f64 / wall_s,
        episodes: episodes.count,
        mean_return_last_100: episodes.mean(),
        updates: iterations,
        threads,
        profile: prof.total(&c),
        precision: precision.label().into(),
        telemetry: telemetry.finish(),
        counters: c,
        notes,
        steady,
        config: spec.clone(),
        setup_s,
        evaluation: evaluation.iter().map(|e| (e.key.to_string(), e.json.clone())).collect(),
        evaluation_summary: evaluation.map(|e| e.summary),
    };
    let trace = trace.map(|_| prof.trace_json());
    Ok(Trained { policy, report, trace })
}
