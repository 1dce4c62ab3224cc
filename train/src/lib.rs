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
//!   host f32 kernels, the phase profiler, the machine;
//! - [`gpu_check`]: the trainer's checks on a GPU against its CPU references (`hotlab
//!   gpu-check`), and what every check reports;
//! - [`error`]: why a run did not come, refused (its field named) or failed.

pub mod adam;
pub mod checkpoint;
pub mod cuda;
pub mod distribution;
pub mod episodes;
pub mod error;
pub mod exec;
pub mod frames;
pub mod gae;
pub mod gpu_check;
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
use crate::error::RunError;
use crate::exec::device;
use crate::profiler::{Profiler, TraceWindow};
use anyhow::{bail, Result};
use episodes::Episodes;
use frames::{FrameFeed, Frames};
use hotlab_core::choices::Backend;
use hotlab_core::counters::Counters;
use hotlab_core::profile::{Phase, Profile};
use hotlab_protocol::MetricsPoint;
use hotlab_spec::RunSpec;
use serde::Serialize;
use std::sync::Arc;
use std::time::Instant;
use telemetry::{Sink, Telemetry, TelemetrySummary};
use workload::{Iteration, Learner, Outcome, Setup, TrainedPolicy, Workload};

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
/// ([`workload::Learner::warmup`]), timed from the end of the last
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
/// is when the run started (loading the workload counts as set-up). Refused
/// ([`RunError::Refused`]) before anything trains when its device or precision is not one
/// this machine has.
pub fn run(
    spec: &RunSpec,
    workload: Arc<dyn Workload>,
    begin: Instant,
    opts: TrainOptions,
    observe: &mut dyn FnMut(&UpdateMetrics),
) -> Result<Trained, RunError> {
    let env = workload.name();
    let ready = ready(spec, workload, opts.stop.as_deref())?;
    Ok(train_ready(spec, env, ready, begin, opts, observe)?)
}

/// [`run`] once its learner is built.
fn train_ready(
    spec: &RunSpec,
    env: &str,
    ready: Ready,
    begin: Instant,
    opts: TrainOptions,
    observe: &mut dyn FnMut(&UpdateMetrics),
) -> Result<Trained> {
    let Ready { mut learner, device, precision, threads, mut notes, eager_only } = ready;
    let sink = opts.telemetry_sink.unwrap_or_else(|| Box::new(|_| {}));
    let mut telemetry = Telemetry::new(spec.telemetry.every, learner.layout(), device, sink);

    let (mut prof, device_timing) = profiler(spec, device, opts.trace, &mut notes);
    if eager_only {
        prof.set_eager_only();
    }
    if let Some(kind) = precision.emulated_on(device) {
        // Said at the start, where a newcomer looks, and in the run's notes.
        let (device_is, auto) = match device.is_cuda() {
            true => ("a GPU before Ampere (compute capability 8.0)", "fp16 with its loss scaler"),
            false => ("a CPU without AVX512-BF16", "fp32"),
        };
        let note = format!(
            "--precision {kind} on {device_is}: its products are emulated, several times slower than native ones (about 10× fp32's on a CPU); --precision auto picks {auto} here"
        );
        eprintln!("warning: {note}");
        notes.push(note);
        prof.set_emulated(Some(kind));
    }
    // Like CleanRL's SPS, the clock starts at the first step; the set-up is its own figure.
    let setup_s = begin.elapsed().as_secs_f64();
    let start = Instant::now();
    let mut c = Counters::default();
    let mut frames = Frames::new(opts.frames);
    let mut episodes = Episodes::default();
    let iterations = learner.iterations();
    let warmup = learner.warmup();
    let mut tally = Tally::default();
    for index in 0..iterations {
        if index == 0 {
            slow_start();
        }
        if let Some(why) = ended_early(spec, opts.stop.as_deref(), start, index, iterations) {
            notes.push(why);
            break;
        }
        let before = c.clone();
        let mut it = Iteration {
            index,
            prof: &mut prof,
            counters: &mut c,
            episodes: &mut episodes,
            frames: &mut frames,
            telemetry: telemetry.due(index + 1).then_some(&telemetry),
            stop: opts.stop.as_deref(),
        };
        let Some(out) = learner.iterate(&mut it)? else {
            notes.push(format!("stopped during update {} of {iterations}, after {index} complete", index + 1));
            break;
        };
        tally.add(out.env_steps);
        if index + 1 == warmup {
            sync(device, &mut c);
            tally.warm();
        }
        if let Some(norms) = &out.norms {
            let s = prof.start();
            telemetry.publish(index + 1, norms, &mut c);
            prof.stop(Phase::TELEMETRY, s);
        }
        if let Some((name, v)) = out.losses.first_not_finite() {
            bail!("training diverged: {name} is {v} at update {} of {iterations}", index + 1);
        }
        let (update, wall_s) = (index + 1, start.elapsed().as_secs_f64());
        // An open-ended run's length is unknown: 0 says so to viewers.
        let updates = if iterations == workload::OPEN_ENDED { 0 } else { iterations };
        let at = At { update, updates, global_step: tally.global_step, wall_s };
        if device_timing {
            c.host_syncs += 1; // the device timer waits for the window's last event
        }
        let window = prof.take_window(&c.since(&before));
        let s = prof.start();
        observe(&UpdateMetrics::of(out, at, &episodes, c.since(&before), window));
        prof.stop(Phase::PUBLISH, s);
        if learner.ended() {
            break;
        }
    }

    if tally.has_steady() {
        sync(device, &mut c);
    }
    let steady = tally.steady(warmup);
    let wall_s = start.elapsed().as_secs_f64();
    learner.end()?;
    let policy = learner.finish();
    let evaluation = if opts.skip_evaluation { None } else { policy.report_evaluation(spec.seed) };
    let global_step = tally.global_step;
    let report = TrainReport {
        env: env.into(),
        device: device::label(device),
        backend: spec.exec.backend.to_string(),
        total_steps: global_step,
        wall_s,
        sps: global_step as f64 / wall_s,
        episodes: episodes.count,
        mean_return_last_100: episodes.mean(),
        updates: if iterations == workload::OPEN_ENDED { tally.updates } else { iterations },
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
    Ok(Trained { policy, report, trace: opts.trace.map(|_| prof.trace_json()) })
}

/// The learner the workload builds for `spec`, on its device and precision, and the set-up's
/// notes.
struct Ready {
    learner: Box<dyn Learner>,
    device: tch::Device,
    precision: precision::Precision,
    /// libtorch's threads in the update.
    threads: usize,
    notes: Vec<String>,
    /// [`Setup::eager_only`].
    eager_only: bool,
}

fn ready(
    spec: &RunSpec,
    workload: Arc<dyn Workload>,
    stop: Option<&std::sync::atomic::AtomicBool>,
) -> Result<Ready, RunError> {
    crate::exec::alloc::tune();
    let device = device::resolve(&spec.device)?;
    let precision = precision::resolve(spec.exec.precision, device)?;
    // The network's initialization runs on one thread: its rounding depends on the thread
    // count, and the same seed must give the same run whatever `--threads` says.
    tch::set_num_threads(1);
    tch::manual_seed(spec.seed as i64);
    let mut setup =
        Setup { spec, device, precision, threads: torch_threads(spec), notes: Vec::new(), eager_only: false, stop };
    let learner = workload.learner(&mut setup)?;
    let Setup { precision, threads, notes, eager_only, .. } = setup;
    Ok(Ready { learner, device, precision, threads, notes, eager_only })
}

/// Waits for a CUDA device's queued work (counted as a host sync); nothing elsewhere.
fn sync(device: tch::Device, c: &mut Counters) {
    if let tch::Device::Cuda(ordinal) = device {
        tch::Cuda::synchronize(ordinal as i64);
        c.host_syncs += 1;
    }
}

/// The run's profiler: its env parts, and on a CUDA device every phase timed with CUDA
/// events too (true), or a note saying why not.
fn profiler(
    spec: &RunSpec,
    device: tch::Device,
    trace: Option<TraceWindow>,
    notes: &mut Vec<String>,
) -> (Profiler, bool) {
    let mut prof = Profiler::new(trace);
    prof.set_env_parts(spec.env().env_parts());
    let timer = match device {
        tch::Device::Cuda(ordinal) => EventTimer::open(ordinal)
            .map_err(|why| notes.push(format!("{why}: phases are timed on the host only")))
            .ok(),
        _ => None,
    };
    let timed = timer.is_some();
    if let Some(timer) = timer {
        prof.set_device_timer(Box::new(timer));
    }
    (prof, timed)
}

/// Why the loop ends before iteration `index`, if it does: a stop asked for, or the run's
/// budget of seconds spent since `start`.
fn ended_early(
    spec: &RunSpec,
    stop: Option<&std::sync::atomic::AtomicBool>,
    start: Instant,
    index: u64,
    iterations: u64,
) -> Option<String> {
    if workload::asked_to_stop(stop) {
        return Some(format!("stopped after {index} of {iterations} updates"));
    }
    if spec.seconds > 0.0 && start.elapsed().as_secs_f64() >= spec.seconds {
        return Some(format!("the budget of {} s was spent after {index} of {iterations} updates", spec.seconds));
    }
    None
}

/// The loop's env steps so far, and its steady window: the iterations after the warm-up.
#[derive(Default)]
struct Tally {
    global_step: u64,
    /// Iterations done.
    updates: u64,
    /// (when, env steps then): the end of the warm-up.
    steady_from: Option<(Instant, u64)>,
    steady_updates: u64,
}

impl Tally {
    /// An iteration's env steps, counted in the steady window once it has begun.
    fn add(&mut self, env_steps: u64) {
        self.global_step += env_steps;
        self.updates += 1;
        if self.steady_from.is_some() {
            self.steady_updates += 1;
        }
    }

    /// The warm-up ends now.
    fn warm(&mut self) {
        self.steady_from = Some((Instant::now(), self.global_step));
    }

    /// Whether an iteration ran after the warm-up.
    fn has_steady(&self) -> bool {
        self.steady_from.is_some() && self.steady_updates > 0
    }

    /// The steady window up to now, when there is one.
    fn steady(&self, warmup_updates: u64) -> Option<Steady> {
        let (from, steps_then) = self.steady_from.filter(|_| self.steady_updates > 0)?;
        let seconds = from.elapsed().as_secs_f64();
        let env_steps = self.global_step - steps_then;
        let sps = env_steps as f64 / seconds;
        Some(Steady { warmup_updates, updates: self.steady_updates, env_steps, seconds, sps })
    }
}

/// Where the run is as an iteration ends: its number, of how many, the env steps and the
/// seconds of training so far.
struct At {
    update: u64,
    updates: u64,
    global_step: u64,
    wall_s: f64,
}

impl UpdateMetrics {
    /// An iteration's metrics: what it gave (`out`), where the run is, its episodes so far,
    /// and the iteration's counts and phases.
    fn of(out: Outcome, at: At, episodes: &Episodes, counters: Counters, profile: Profile) -> Self {
        let wall_s = at.wall_s;
        UpdateMetrics {
            point: MetricsPoint {
                update: at.update,
                updates: at.updates,
                global_step: at.global_step,
                wall_s,
                sps: at.global_step as f64 / wall_s,
                episodes: episodes.count,
                mean_return_last_100: episodes.mean(),
                lr: out.lr,
                losses: out.losses,
                rollout_s: out.rollout_s,
                update_s: out.learn_start.elapsed().as_secs_f64(),
            },
            loss_scale: out.loss_scale,
            skipped_steps: out.skipped_steps,
            counters,
            profile,
            lines: out.lines,
        }
    }
}
