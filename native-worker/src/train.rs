//! The training loop, top to bottom: rollout → GAE → PPO update, repeated.

use crate::actor::Actor;
use crate::adam::FlatAdam;
use crate::cuda::events::EventTimer;
use crate::cuda::gpu::{Gpu, Support};
use crate::cuda::graph::GraphRollout;
use crate::device;
use crate::device_rollout::DeviceRollout;
use crate::envs::{self, device::DeviceCartPole, EnvDef};
use crate::frames::{FrameFeed, Frames};
use crate::gae::{gae, GaeInput};
use crate::helper::Helper;
use crate::model::Model;
use crate::policy::{ActorCritic, Architecture};
use crate::ppo::{self, UpdateCtx};
use crate::profiler::{Profiler, TraceWindow};
use crate::proof_eval::{evaluate, ProofEval};
use crate::proof_fused::ProofHost;
use crate::proof_policy::{ProofArch, ProofNet};
use crate::rollout::{Batch, Rollout};
use crate::telemetry::{Sink, Telemetry, TelemetrySummary};
use crate::transfer::Mover;
use anyhow::{bail, Context, Result};
use hotlab_shared::counters::Counters;
use hotlab_shared::env::{BatchEnv, EnvSpec, FieldKind, Observations, StepBatch};
use hotlab_shared::profile::{Phase, Profile};
use hotlab_shared::protocol::MetricsPoint;
use hotlab_shared::rng::HostRng;
use hotlab_shared::spec::{Backend, Inference, RunSpec, SpecError, GRAPH_NEEDS_CUDA};
use serde::Serialize;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;
use tch::Device;

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
    /// The fully resolved spec.
    pub config: RunSpec,
    /// The proof env: the trained policy's held-out proof rate against random choice.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proof: Option<ProofEval>,
}

/// Episodes per held-out query for the sampled policy and the random baseline.
const EVAL_TRIES: usize = 16;

/// A trained network, the run's summary, and the trace of the traced window (if any).
pub struct Trained {
    pub model: Model,
    /// The proof env's task (its vocabulary goes into the checkpoint).
    pub task: Option<Arc<hotlab_shared::proof::ProofTask>>,
    pub report: TrainReport,
    pub trace: Option<serde_json::Value>,
}

/// The network shape for an env: one f32 observation field feeds the MLPs.
pub fn architecture(spec: &EnvSpec, hidden: &[usize]) -> Result<Architecture> {
    match spec.fields.as_slice() {
        [field] if field.kind == FieldKind::F32 => {
            Ok(Architecture { obs_dim: field.numel(), hidden: hidden.to_vec(), logits: spec.total_choices() })
        }
        _ => bail!("env '{}' has observation fields the MLP policy cannot read", spec.name),
    }
}

/// The CUDA kernels for a run on a CUDA GPU (events time its phases; the device backend
/// steps with them). Elsewhere, or if NVRTC fails, None and a note on what falls back.
fn open_gpu(device: Device, arch: Option<&Architecture>, notes: &mut Vec<String>) -> Option<Arc<Gpu>> {
    let Device::Cuda(ordinal) = device else { return None };
    if let Some(why) = Support::probe().why_not() {
        notes.push(format!("{why}: libtorch ops only, and no device timing"));
        return None;
    }
    let width = arch.map_or(4, |a| a.hidden.iter().copied().chain([a.obs_dim, a.logits]).max().unwrap_or(4));
    match Gpu::open(ordinal, width) {
        Ok(gpu) => Some(Arc::new(gpu)),
        Err(e) => {
            notes.push(format!("the CUDA kernels are unavailable ({e}): libtorch ops only, and no device timing"));
            None
        }
    }
}

/// The `device` backend: CartPole state in device tensors, stepped by tensor ops
/// (`eager`, or anywhere without CUDA), by one fused kernel per step (`fused` on CUDA),
/// or inside the captured rollout graph (`graph`, CUDA only).
fn device_envs(
    spec: &RunSpec,
    device: Device,
    gpu: Option<&Arc<Gpu>>,
    arch: &Architecture,
    heads: usize,
    notes: &mut Vec<String>,
) -> Result<Envs> {
    let mut env = DeviceCartPole::new(spec.envs, spec.seed, device);
    let mut rollout = DeviceRollout::new(&mut env, spec.steps, arch.obs_dim, heads);
    match (spec.inference, gpu) {
        (Inference::Eager, _) => {}
        (Inference::Fused, Some(gpu)) => {
            env.use_kernel(Arc::clone(gpu)).map_err(anyhow::Error::msg)?;
            notes.push("inference fused, backend device: the envs step in one fused CUDA kernel per step; the policy runs as libtorch ops".into());
        }
        (Inference::Fused, None) => notes.push("inference fused, backend device: the policy runs as libtorch ops on the device, and without CUDA the envs step as tensor ops (the fused env kernel needs CUDA)".into()),
        (Inference::Graph, Some(gpu)) => {
            rollout.use_graph(GraphRollout::new(Arc::clone(gpu), &env, arch, spec.seed).map_err(anyhow::Error::msg)?);
            notes.push("inference graph: each rollout is one replay of a captured CUDA graph (forward, sampling, env step and storage in one kernel per step)".into());
        }
        (Inference::Graph, None) if device == Device::Cpu => {
            return Err(SpecError::new("inference", GRAPH_NEEDS_CUDA).into());
        }
        (Inference::Graph, None) => notes.push(format!(
            "inference graph fell back to eager: {}",
            Support::probe().why_not().unwrap_or("the CUDA kernels are unavailable")
        )),
    }
    Ok(Envs::Device { env, rollout })
}

/// libtorch threads: `--threads`, or for 0 one per core, except for small minibatches,
/// where a second thread only adds synchronization to ops too small to split (measured:
/// the same wall time at the cleanrl preset, twice the CPU time), and beside env worker
/// threads or processes: libtorch's OpenMP threads spin for a while after each parallel
/// op, on the cores the workers step on (the proof env at 64 envs under `threads`:
/// 39,000 steps/s with two libtorch threads, 100,000 with one).
pub fn torch_threads(spec: &RunSpec) -> usize {
    let workers_share_the_cores = matches!(spec.backend, Backend::Threads | Backend::Subprocess);
    match spec.threads {
        0 if spec.minibatch_size() < 1024 || workers_share_the_cores => 1,
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
}

/// A second thread for the update's critic and half of a large fused rollout step, on a
/// CPU with two cores or more in fp32 (unless `--threads 1`); each side gets half of the
/// libtorch threads.
fn update_helper(
    spec: &RunSpec,
    device: Device,
    precision: &crate::precision::Precision,
) -> Result<Option<Arc<Helper>>> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let host_path = device == Device::Cpu && precision.kind == tch::Kind::Float && precision.scaler.is_none();
    if !host_path || spec.threads == 1 || cores < 2 {
        return Ok(None);
    }
    let per_side = (torch_threads(spec) / 2).max(1) as i32;
    tch::set_num_threads(per_side);
    let helper =
        Helper::new("hotlab-helper", move || tch::set_num_threads(per_side)).context("starting the helper thread")?;
    Ok(Some(Arc::new(helper)))
}

/// The last 100 episode returns and the episode count.
#[derive(Default)]
struct Episodes {
    recent: VecDeque<f64>,
    count: u64,
}

impl Episodes {
    fn push(&mut self, ret: f64) {
        self.count += 1;
        if self.recent.len() == 100 {
            self.recent.pop_front();
        }
        self.recent.push_back(ret);
    }

    fn mean(&self) -> Option<f64> {
        (!self.recent.is_empty()).then(|| self.recent.iter().sum::<f64>() / self.recent.len() as f64)
    }
}

/// Where the envs live and the state that goes with them.
#[allow(clippy::large_enum_variant)] // one per run
enum Envs {
    Host { env: Box<dyn BatchEnv>, obs: Observations, out: StepBatch, rollout: Rollout, actor: Actor },
    Device { env: DeviceCartPole, rollout: DeviceRollout },
}

/// One update's rollout from host envs: step, record, bootstrap, GAE, upload.
#[allow(clippy::too_many_arguments)]
fn collect_host(
    env: &mut dyn BatchEnv,
    obs: &mut Observations,
    out: &mut StepBatch,
    rollout: &mut Rollout,
    actor: &mut Actor,
    net: &Model,
    spec: &RunSpec,
    heads: &[usize],
    rng: &mut HostRng,
    mover: &Mover,
    episodes: &mut Episodes,
    c: &mut Counters,
    prof: &mut Profiler,
    frames: &mut Frames,
    first_step: u64,
) -> Result<Batch> {
    let (envs, h) = (rollout.envs, heads.len());
    for t in 0..rollout.steps {
        prof.set_step(first_step + t as u64);
        let s = prof.start();
        rollout.store_obs(t, obs);
        let s = prof.stop(Phase::RolloutStore, s);
        let s = actor.act(net, rollout, t, heads, rng, c, prof, s);
        let s = if frames.due() {
            frames.host(first_step + t as u64, obs, &rollout.actions[t * envs * h..(t + 1) * envs * h]);
            prof.stop(Phase::Publish, s)
        } else {
            s
        };
        let waited = env.counters().worker_wait_s;
        env.step(&rollout.actions[t * envs * h..(t + 1) * envs * h], out)
            .with_context(|| format!("env backend {}", spec.backend))?;
        let waited = env.counters().worker_wait_s - waited;
        let s = prof.stop_split(Phase::EnvStep, Phase::EnvWait, waited, s);
        c.env_steps += envs as u64;
        let row = t * envs..(t + 1) * envs;
        rollout.rewards[row.clone()].copy_from_slice(&out.reward);
        rollout.terminated[row.clone()].copy_from_slice(&out.terminated);
        rollout.truncated[row].copy_from_slice(&out.truncated);
        let s = prof.stop(Phase::RolloutStore, s);
        if out.episodes.is_empty() {
            std::mem::swap(obs, &mut out.obs);
            continue;
        }
        for end in &out.episodes {
            episodes.push(end.episode_return);
            if !end.terminated {
                // Truncated: GAE bootstraps from the value of the final observation.
                rollout.final_values[t * envs + end.env] = actor.values(net, &out.final_obs, envs, Some(end.env), c)[0];
            }
        }
        std::mem::swap(obs, &mut out.obs);
        prof.stop(Phase::Gae, s);
    }
    let s = prof.start();
    let next_values = actor.values(net, obs, envs, None, c);
    let on_device = actor.finish(rollout, c);
    let (advantages, returns) = gae(
        &GaeInput {
            envs,
            rewards: &rollout.rewards,
            values: &rollout.values,
            terminated: &rollout.terminated,
            truncated: &rollout.truncated,
            final_values: &rollout.final_values,
            next_values: &next_values,
        },
        spec.gamma as f32,
        spec.gae_lambda as f32,
    );
    let s = prof.stop(Phase::Gae, s);
    let batch = rollout.to_batch(&advantages, &returns, on_device, mover, c);
    prof.stop(Phase::ObsTransfer, s);
    Ok(batch)
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
}

/// Trains a policy; `observe` is called after every update.
pub fn train(spec: &RunSpec, observe: &mut dyn FnMut(&UpdateMetrics)) -> Result<Trained> {
    train_with(spec, TrainOptions::default(), observe)
}

/// [`train`] with a trace window and a telemetry sink.
pub fn train_with(spec: &RunSpec, opts: TrainOptions, observe: &mut dyn FnMut(&UpdateMetrics)) -> Result<Trained> {
    let begin = Instant::now();
    let trace = opts.trace;
    spec.validate()?;
    crate::alloc::tune();
    let device = device::resolve(&spec.device)?;
    let mut precision = crate::precision::resolve(spec.precision, device)?;
    let threads = torch_threads(spec);
    // The orthogonal init's QR runs on one thread: its rounding depends on the thread
    // count, and the same seed must give the same run whatever `--threads` says.
    tch::set_num_threads(1);
    tch::manual_seed(spec.seed as i64);
    let mut rng = HostRng::new(spec.seed);
    let mut notes = Vec::new();
    let mut c = Counters::default();

    let env_def = EnvDef::from_spec(spec)?;
    let env_spec = envs::vector_env(&env_def, 1, spec.seed, 0).spec().clone();
    let heads: Vec<usize> = env_spec.heads.iter().map(|h| h.n).collect();
    let (mut net, arch) = match &env_def {
        EnvDef::Proof(task) => {
            let arch = ProofArch {
                vocab: task.vocab.size(),
                embed: spec.embed_dim,
                hidden: spec.hidden[0],
                successors: env_spec.total_choices(),
            };
            (Model::Proof(ProofNet::new(arch, device)), None)
        }
        EnvDef::Cartpole => {
            let arch = architecture(&env_spec, &spec.hidden)?;
            (Model::Mlp(ActorCritic::new(arch.clone(), device)), Some(arch))
        }
    };
    tch::set_num_threads(threads as i32);
    let mut opt = FlatAdam::new(net.flat(), 1e-5);
    let sink = opts.telemetry_sink.unwrap_or_else(|| Box::new(|_| {}));
    let mut telemetry = Telemetry::new(spec.telemetry_every, net.layout(), device, sink);
    if precision.kind != tch::Kind::Float {
        notes.push(format!(
            "precision {}: the update's matmuls run in {}; the rollout's forward and the master weights stay fp32",
            precision.label(),
            precision.label()
        ));
    }
    let mover = Mover::new(spec.transfer, device);
    notes.extend(mover.note());
    let helper = match &net {
        Model::Mlp(_) => update_helper(spec, device, &precision)?,
        Model::Proof(_) => None,
    };
    if matches!(net, Model::Proof(_)) && precision.kind != tch::Kind::Float {
        notes.push("env proof: the embedding policy's update runs in fp32, whatever --precision says".into());
    }
    if helper.is_some() {
        notes.push("two threads: the update's actor and critic, and the halves of a fused rollout step of 64 envs or more (CPU, fp32)".into());
    }

    let gpu = open_gpu(device, arch.as_ref(), &mut notes);
    let mut envs = if spec.backend == Backend::Device {
        let arch = arch.as_ref().context("backend device runs the MLP policy")?;
        device_envs(spec, device, gpu.as_ref(), arch, heads.len(), &mut notes)?
    } else {
        let mut env = envs::host_backend(spec, &env_def)?;
        let mut obs = Observations::zeros(env.spec(), spec.envs);
        env.reset(&mut obs).with_context(|| format!("env backend {}", spec.backend))?;
        let mover = Mover::new(spec.transfer, device);
        let actor = match (&arch, spec.inference) {
            // Graph is validated away off the device backend.
            (None, Inference::Eager | Inference::Graph) => Actor::Proof { mover, sync: spec.action_sync },
            (None, Inference::Fused) => {
                notes.push("inference fused: the forward runs on the host, so --transfer and --action-sync have nothing to move per step".into());
                let net = net.proof();
                Actor::ProofFused { policy: Box::new(ProofHost::new(net.arch.clone(), &net.host_params())) }
            }
            (Some(_), Inference::Eager | Inference::Graph) => Actor::Eager { mover, sync: spec.action_sync },
            (Some(arch), Inference::Fused) => {
                notes.push("inference fused: the forward runs on the host, so --transfer and --action-sync have nothing to move per step".into());
                let policy = Box::new(crate::fused::FusedPolicy::new(arch, &net.mlp().host_params()));
                let twin = helper.as_ref().map(|h| (policy.clone(), Arc::clone(h)));
                Actor::Fused { policy, twin }
            }
        };
        let out = StepBatch::new(env.spec(), spec.envs);
        let obs_dim = arch.as_ref().map_or(0, |a| a.obs_dim);
        let index: Vec<usize> =
            env_spec.fields.iter().filter(|f| f.kind == FieldKind::I64).map(|f| f.numel()).collect();
        let rollout = Rollout::new(spec.steps, spec.envs, obs_dim, &index, heads.len());
        Envs::Host { env, obs, out, rollout, actor }
    };

    // Like CleanRL's SPS, the clock starts at the first step; the set-up is its own figure.
    let setup_s = begin.elapsed().as_secs_f64();
    let start = Instant::now();
    let mut prof = Profiler::new(trace);
    if let Some(gpu) = &gpu {
        prof.set_device_timer(Box::new(EventTimer::new(Arc::clone(gpu))));
    }
    let task = match &env_def {
        EnvDef::Proof(task) => Some(Arc::clone(task)),
        EnvDef::Cartpole => None,
    };
    let mut frames = Frames::new(opts.frames, task);
    let mut episodes = Episodes::default();
    let updates = spec.updates();
    let mut global_step = 0u64;
    for update in 0..updates {
        if opts.stop.as_ref().is_some_and(|s| s.load(std::sync::atomic::Ordering::Relaxed)) {
            notes.push(format!("stopped after {update} of {updates} updates"));
            break;
        }
        let before = c.clone();
        // CleanRL anneals from lr at the first update towards 0 after the last one.
        let lr = if spec.anneal_lr { spec.lr * (1.0 - update as f64 / updates as f64) } else { spec.lr };
        let rollout_start = Instant::now();
        let batch = match &mut envs {
            Envs::Host { env, obs, out, rollout, actor } => {
                actor.sync_weights(&net);
                let batch = collect_host(
                    env.as_mut(),
                    obs,
                    out,
                    rollout,
                    actor,
                    &net,
                    spec,
                    &heads,
                    &mut rng,
                    &mover,
                    &mut episodes,
                    &mut c,
                    &mut prof,
                    &mut frames,
                    update * spec.steps as u64,
                )?;
                c.set_env(&env.counters());
                batch
            }
            Envs::Device { env, rollout } => {
                let (gamma, lambda) = (spec.gamma as f32, spec.gae_lambda as f32);
                let first = update * spec.steps as u64;
                let got = rollout.collect(env, net.mlp(), &heads, gamma, lambda, &mover, &mut c, &mut prof, first);
                got.episode_returns.iter().for_each(|&r| episodes.push(r));
                if frames.due() {
                    let s = prof.start();
                    let (obs, actions) = rollout.last_step();
                    frames.device(first + spec.steps as u64 - 1, &obs, &actions);
                    c.host_syncs += 1;
                    c.d2h_copies += 2;
                    prof.stop(Phase::Publish, s);
                }
                got.batch
            }
        };
        global_step += spec.batch_size() as u64;
        let update_start = Instant::now();
        let rollout_s = (update_start - rollout_start).as_secs_f64();
        let due = telemetry.due(update + 1);
        let ctx = UpdateCtx {
            spec,
            heads: &heads,
            lr,
            precision: &mut precision,
            telemetry: due.then_some(&telemetry),
            helper: helper.as_deref(),
        };
        let (stats, norms) = match &mut net {
            Model::Mlp(net) => ppo::update(net, &mut opt, &batch, ctx, &mut rng, &mut prof, &mut c),
            Model::Proof(net) => ppo::update_proof(net, &mut opt, &batch, ctx, &mut rng, &mut prof),
        };
        if let Some(norms) = norms {
            let s = prof.start();
            telemetry.publish(update + 1, &norms, &mut c);
            prof.stop(Phase::Telemetry, s);
        }
        c.host_syncs += 1; // the loss statistics, read once per update
        c.d2h_copies += 1;
        c.d2h_bytes += 5 * 4;
        if !stats.policy_loss.is_finite() || !stats.value_loss.is_finite() {
            bail!("training diverged: the loss is not finite at update {} of {updates}", update + 1);
        }
        let wall_s = start.elapsed().as_secs_f64();
        if gpu.is_some() {
            c.host_syncs += 1; // the device timer waits for the window's last event
        }
        let window = prof.take_window(&c.since(&before));
        let s = prof.start();
        observe(&UpdateMetrics {
            point: MetricsPoint {
                update: update + 1,
                updates,
                global_step,
                wall_s,
                sps: global_step as f64 / wall_s,
                episodes: episodes.count,
                mean_return_last_100: episodes.mean(),
                lr,
                policy_loss: stats.policy_loss,
                value_loss: stats.value_loss,
                entropy: stats.entropy,
                approx_kl: stats.approx_kl,
                clip_fraction: stats.clip_fraction,
                rollout_s,
                update_s: update_start.elapsed().as_secs_f64(),
            },
            loss_scale: stats.loss_scale,
            skipped_steps: stats.skipped_steps,
            counters: c.since(&before),
            profile: window,
        });
        prof.stop(Phase::Publish, s);
    }

    let wall_s = start.elapsed().as_secs_f64();
    let mut report = TrainReport {
        env: spec.env.as_str().into(),
        device: device::label(device),
        backend: spec.backend.to_string(),
        total_steps: global_step,
        wall_s,
        sps: global_step as f64 / wall_s,
        episodes: episodes.count,
        mean_return_last_100: episodes.mean(),
        updates,
        threads,
        profile: prof.total(&c),
        precision: precision.label().into(),
        telemetry: telemetry.finish(),
        counters: c,
        notes,
        config: spec.clone(),
        setup_s,
        proof: None,
    };
    if let (EnvDef::Proof(task), Model::Proof(net)) = (&env_def, &net) {
        let mut policy = ProofHost::new(net.arch.clone(), &net.host_params());
        report.proof = Some(evaluate(task, &mut policy, EVAL_TRIES, spec.seed));
    }
    let trace = trace.map(|_| prof.trace_json());
    let task = match env_def {
        EnvDef::Proof(task) => Some(task),
        EnvDef::Cartpole => None,
    };
    Ok(Trained { model: net, task, report, trace })
}
