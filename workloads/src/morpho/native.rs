//! `morpho` (seeds 001–003, issue 21): each env is a host network learning a supervised
//! task ([`glyphs`](crate::morpho::glyphs): 16×16 glyphs drawn from a seed) into whose slots an agent grafts
//! small modules ("seeds") while it trains; one decision per host epoch, eight heads.
//!
//! - [`rules`](crate::morpho::rules): the slot lifecycle, the eight action heads and their masks, Shapley
//!   contributions (scalar rules, no tensors);
//! - [`blueprint`](crate::morpho::blueprint): the seeds' five blueprints; [`host`](crate::morpho::host): the host with its slots and
//!   [`adam`](crate::morpho::adam) its optimizer;
//! - [`env`](mod@env): one env's step (the decision, a host epoch, validation, Shapley credit, the
//!   reward); the lifecycle, masks and Shapley values are [`rules`](crate::morpho::rules);
//! - [`envs`](crate::morpho::envs): episodes on a pool of tasks, as a batch and one at a time (the backends);
//!   [`lifecycle`](crate::morpho::lifecycle): a batch's decisions, slot ticks and rewards, env after env or in one
//!   pass of tensor ops (`--lifecycle`);
//! - [`streams`](crate::morpho::streams): hosts on CUDA, a stream each, queued minibatch-first (`--stream-wait`);
//! - [`agent`](crate::morpho::agent): the 8-head policy, its rollout forward and PPO gradient; [`clone`](crate::morpho::clone): an
//!   agent fitted to the scripted grower's play before PPO (`--clone-grower`);
//! - [`view`](crate::morpho::view): what the lab's viewer draws;
//! - [`bench`](mod@bench): `hotlab bench host` (host training against this machine's sgemm), `bench
//!   morpho` (the trainer per knob) and `bench growth` (does a spec learn to grow?);
//! - [`eval`](crate::morpho::eval): the yardstick, the agent against the policies that do not grow, on held-out
//!   or validation tasks.

pub mod adam;
pub mod agent;
pub mod bench;
pub mod blueprint;
pub mod clone;
pub mod env;
pub mod envs;
pub mod eval;
pub mod glyphs;
pub mod gpu;
pub mod host;
pub mod lifecycle;
pub mod mixed;
pub mod rules;
pub mod streams;
pub mod view;

use crate::morpho::glyphs::{generate, TaskSpec};
use agent::MorphoAgent;
use anyhow::{bail, Result};
use env::{MorphoConfig, OBS};
use envs::{env_spec, MorphoBatch, MorphoScalar, Pool};
use hotlab_core::choices::{Backend, Inference};
use hotlab_core::counters::EnvCounters;
use hotlab_core::run_knobs;
use hotlab_env::{Actions, BatchEnv, Observations, ScalarEnv};
use hotlab_protocol::Frame;
use hotlab_spec::{RunSpec, SpecError};
use hotlab_specs::morpho::{HostExec, SlotPool, StreamWait, TrainingEntry};
use hotlab_specs::MorphoSpec;
use hotlab_specs::WorkloadSpec;
use hotlab_train::checkpoint;
use hotlab_train::error::RunError;
use hotlab_train::exec::parts::PartClock;
use hotlab_train::exec::transfer::Eager;
use hotlab_train::exec::{worker_flags, EnvMaker};
use hotlab_train::gpu_check::Target;
use hotlab_train::models::mlp::policy::{ActorCritic, Architecture};
use hotlab_train::params::Network;
use hotlab_train::ppo::{self, collect::HostCollector, PpoLearner};
use hotlab_train::precision::Precision;
use hotlab_train::workload::{Evaluation, Learner, Setup, TaskSet, TrainedPolicy, Workload};
use rules::Gates;
use std::sync::Arc;

/// The key of the agent's shape in a checkpoint's `spec.json`.
pub const CHECKPOINT_KEY: &str = "morpho";
/// Held-out episodes per policy in a run's report.
const REPORT_EPISODES: usize = 8;

/// The workload: its settings and the training tasks they name, generated once.
pub struct Morpho {
    pub settings: MorphoSpec,
    pub run: Run,
    pub pool: Pool,
}

/// What the envs take from the run beside the workload's settings (worker processes get
/// them as flags).
#[derive(Clone, Copy, Debug)]
pub struct Run {
    /// Where the hosts train, with their data and the lifecycle state: the run's device.
    pub device: tch::Device,
    /// PPO's discount, which potential-based shaping must use.
    pub gamma: f64,
}

impl Morpho {
    /// The workload for a run: its settings, the run's device (where the hosts train) and
    /// its discount (the shaping's).
    pub fn load(settings: &MorphoSpec, run: &RunSpec) -> Result<Self, SpecError> {
        hotlab_specs::Settings::validate(settings)?;
        let device = hotlab_train::exec::device::resolve(&run.device)?;
        if settings.stream_wait == StreamWait::Every && !device.is_cuda() {
            return Err(SpecError::new(
                "stream_wait",
                "'every' makes each host's CUDA stream wait before every minibatch; hosts on the CPU have no \
                 streams (--device cpu); allowed here: moved",
            ));
        }
        if settings.host_precision == hotlab_core::choices::Precision::Fp16
            && (!device.is_cuda() || settings.host_exec == HostExec::Batched)
        {
            return Err(SpecError::new(
                "host_precision",
                "fp16 hosts train on CUDA (--device cuda) under --host-exec per_env, with their loss scaler; \
                 allowed here: fp32, bf16, auto",
            ));
        }
        let run = Run { device, gamma: run.ppo.gamma };
        let pool = Self::pool(settings, run, settings.task_seed, settings.tasks);
        Ok(Self { settings: settings.clone(), run, pool })
    }

    /// `count` tasks from `first`, and the env setup the settings say.
    fn pool(s: &MorphoSpec, run: Run, first: u64, count: usize) -> Pool {
        let tasks = (0..count as u64)
            .map(|i| generate(&TaskSpec { seed: first + i, train: s.images, val: s.images / 4, ..TaskSpec::default() }))
            .collect();
        let cfg =
            MorphoConfig {
                width: s.width as i64,
                epochs: s.epochs,
                rent: s.rent,
                shapley_perms: (s.shapley_perms > 0).then_some(s.shapley_perms),
                slots: s.slots,
                lifecycle: s.lifecycle,
                host_exec: s.host_exec,
                // `auto` may pick fp16 on an older GPU: the hosts have no loss scaler, so fp32.
                host_kind: hotlab_train::precision::resolve(s.host_precision, run.device)
                    .map_or(tch::Kind::Float, |p| if p.kind == tch::Kind::Half { tch::Kind::Float } else { p.kind }),
                device: run.device,
                stream_wait: s.stream_wait,
                pin: s.pin_heads,
                shaping: s.shaping,
                gamma: run.gamma,
                probe: s.probe,
                gates: Gates { auto_train: s.training_entry == TrainingEntry::Gate, ..Gates::default() },
                ..MorphoConfig::default()
            };
        Pool { tasks: Arc::new(tasks), cfg, clock: Arc::new(part_clock()), curriculum: s.curriculum() }
    }

    /// `count` tasks no training env learns (at most 1000): held-out ones from 1000 seeds
    /// past the training tasks, or validation ones, for tuning, from 100,000 past them: the
    /// two never meet. Their hosts make and free their seeds whatever `--slots` says: a
    /// sleeper pool gives the same episodes at the cost of computing its sleepers, which an
    /// evaluation need not pay.
    pub fn eval_pool(&self, tasks: TaskSet, count: usize) -> Pool {
        // Evaluation plays full-length episodes (a curriculum is training's).
        let s = MorphoSpec { slots: SlotPool::Dynamic, curriculum_from: 0, ..self.settings.clone() };
        let past = match tasks {
            TaskSet::HeldOut => 1000,
            TaskSet::Validation => 100_000,
        };
        Self::pool(&s, self.run, s.task_seed + s.tasks as u64 + past, count.min(1000))
    }
}

impl Morpho {
    /// What the run's notes say of hosts on CUDA: their streams, or why they share one.
    fn host_note(&self) -> Option<String> {
        let device = self.run.device;
        if !device.is_cuda() {
            return None;
        }
        let on = hotlab_train::exec::device::label(device);
        Some(match (self.settings.host_exec, hotlab_train::cuda::shim::AVAILABLE) {
            (HostExec::Batched, _) => format!("env morpho: hosts on {on}, each batch trained as one model"),
            (HostExec::PerEnv, true) => format!(
                "env morpho: hosts on {on}, each on its own CUDA stream, minibatch-first across a batch \
                 (--stream-wait {}); {}",
                self.settings.stream_wait.as_str(),
                if self.pool.cfg.captures() {
                    "each sleeper host's step captured as a CUDA graph after two warm-up steps"
                } else {
                    "steps not captured: a dynamic pool's parameter set changes with every graft"
                }
            ),
            (HostExec::PerEnv, false) => {
                format!("env morpho: hosts on {on} share libtorch's stream: this build has no CUDA stream shim")
            }
        })
    }
}

/// The agent's network for the env: the features in, every head's choices out.
fn architecture(hidden: &[usize]) -> Architecture {
    Architecture { obs_dim: OBS, hidden: hidden.to_vec(), logits: env_spec().total_choices(), gaussian: 0 }
}

impl EnvMaker for Morpho {
    fn name(&self) -> &'static str {
        "morpho"
    }

    fn vector_env(&self, count: usize, seed: u64, first: u64) -> Box<dyn BatchEnv> {
        Box::new(MorphoBatch::new(self.pool.clone(), count, seed, first))
    }

    fn scalar_env(&self, seed: u64, index: u64) -> Box<dyn ScalarEnv> {
        Box::new(MorphoScalar::new(self.pool.clone(), seed, index))
    }

    fn worker_flags(&self) -> (Vec<String>, Option<String>) {
        let mut flags = worker_flags(WorkloadSpec::Morpho(self.settings.clone()));
        flags.extend(["--device".into(), hotlab_train::exec::device::label(self.run.device)]);
        flags.extend(["--gamma".into(), self.run.gamma.to_string()]);
        (flags, None)
    }

    fn env_counters(&self) -> EnvCounters {
        self.pool.clock.counters()
    }
}

/// A clock for the morpho envs' parts and counts (`MorphoSpec::ENV_PARTS` and `COUNTS`).
pub fn part_clock() -> PartClock {
    use hotlab_specs::Settings;
    PartClock::new(MorphoSpec::ENV_PARTS, MorphoSpec::COUNTS)
}

/// The registry's entry: this workload for a run (a bad setting is refused, named).
impl crate::Native for MorphoSpec {
    fn load(settings: &Self, spec: &RunSpec) -> Result<Arc<dyn Workload>, SpecError> {
        Ok(Arc::new(Morpho::load(settings, spec)?))
    }

    fn gpu_checks(target: &Target) -> Vec<serde_json::Value> {
        target.cuda().map(|_| gpu::checks()).unwrap_or_default()
    }

    fn gpu_benches(target: &Target, _max_log2_envs: u32) -> Vec<(&'static str, serde_json::Value)> {
        target.cuda().map(|_| vec![("morpho_hosts", gpu::bench())]).unwrap_or_default()
    }
}

impl Workload for Morpho {
    /// The first few envs' hosts and the decision just taken on them.
    fn frame(&self, step: u64, obs: &Observations, actions: Actions<'_>) -> Option<Frame> {
        Some(view::frame(step, obs.fields.first()?.as_f32()?, actions.index, self.settings.epochs))
    }

    fn learner(self: Arc<Self>, setup: &mut Setup<'_>) -> Result<Box<dyn Learner>, RunError> {
        let spec = setup.spec;
        if spec.exec.backend == Backend::Device {
            let message =
                "device steps CartPole only; the morpho env's hosts train beside their envs on a host backend: \
                           allowed here: sequential, threads, subprocess, vectorized";
            return Err(SpecError::of(&run_knobs::BACKEND, message).into());
        }
        if let Some(note) = self.host_note() {
            setup.notes.push(note);
        }
        let heads: Vec<usize> = env_spec().heads.iter().map(|h| h.n).collect();
        let mut net = ActorCritic::new(architecture(&spec.ppo.hidden), setup.device);
        if self.settings.clone_grower > 0 {
            let c = clone::grower(&mut net, &self.pool, self.settings.clone_grower, spec.seed, spec.ppo.gamma);
            setup.notes.push(c.note());
        }
        if setup.precision.kind != tch::Kind::Float {
            setup.notes.push("env morpho: the agent's update runs in fp32, whatever --precision says".into());
            setup.precision = Precision::fp32();
        }
        if spec.exec.inference != Inference::Eager {
            setup.notes.push(format!(
                "env morpho: the agent's forward is libtorch ops (eager), whatever --inference {} says",
                spec.exec.inference.as_str()
            ));
        }
        let (opt, mover) = ppo::after_init(setup, &net.flat);
        let device = setup.device;
        let actor = || Eager::new(&spec.exec, device);
        let collector = HostCollector::new(spec, self.clone(), OBS, actor)?;
        let agent = MorphoAgent { net, workload: self };
        Ok(Box::new(PpoLearner::new(setup, agent, opt, mover, Box::new(collector), heads)))
    }

    fn load_policy(self: Arc<Self>, stored: checkpoint::Stored) -> Result<Box<dyn TrainedPolicy>> {
        let arch: Architecture = stored.shape(CHECKPOINT_KEY)?;
        let want = architecture(&arch.hidden);
        if (arch.obs_dim, arch.logits) != (want.obs_dim, want.logits) {
            bail!(
                "the checkpoint's agent reads {} features and scores {} choices; the morpho env has {} and {}",
                arch.obs_dim,
                arch.logits,
                want.obs_dim,
                want.logits
            );
        }
        if arch.hidden.is_empty() || arch.hidden.len() > 8 || arch.hidden.iter().any(|&h| !(1..=4096).contains(&h)) {
            bail!("the checkpoint's hidden widths {:?} are not 1 to 8 layers of 1 to 4096", arch.hidden);
        }
        let flat = stored.params(arch.num_params())?;
        Ok(Box::new(TrainedMorpho { net: ActorCritic::from_flat(arch, flat), workload: self }))
    }
}

/// A trained (or loaded) agent and its workload.
pub struct TrainedMorpho {
    pub net: ActorCritic,
    pub workload: Arc<Morpho>,
}

impl TrainedMorpho {
    /// The yardstick on `episodes` tasks of `tasks`, the agent `against` the baselines or
    /// alone.
    pub fn evaluation(
        &self,
        tasks: TaskSet,
        episodes: usize,
        seed: u64,
        against: eval::Against,
        progress: &mut dyn FnMut(&str),
    ) -> eval::MorphoEval {
        let pool = self.workload.eval_pool(tasks, episodes);
        eval::evaluate(&pool, &self.net, tasks, episodes, seed, against, progress)
    }

    fn report(&self, tasks: TaskSet, episodes: usize, seed: u64, against: eval::Against) -> Evaluation {
        use std::io::IsTerminal;
        let policies = match against {
            eval::Against::Baselines => 7,
            eval::Against::Nothing => 2,
        };
        let (mut n, shown) = (0, std::io::stderr().is_terminal());
        let mut progress = |name: &str| {
            n += 1;
            if shown {
                eprintln!("eval: {name} ({n} of {policies} policies, {episodes} episodes each)");
            }
        };
        let e = self.evaluation(tasks, episodes, seed, against, &mut progress);
        Evaluation { key: CHECKPOINT_KEY, json: serde_json::to_value(&e).unwrap_or_default(), summary: e.summary() }
    }
}

impl TrainedPolicy for TrainedMorpho {
    fn network(&self) -> &dyn Network {
        &self.net
    }

    fn checkpoint_key(&self) -> &'static str {
        CHECKPOINT_KEY
    }

    fn report_evaluation(&self, seed: u64) -> Option<Evaluation> {
        Some(self.report(TaskSet::HeldOut, REPORT_EPISODES, seed, eval::Against::Baselines))
    }

    /// The agent, greedy and sampled, against waiting at each tempo, random legal actions and
    /// the grower on `episodes` held-out episodes (at most 1000); each policy named on stderr
    /// as it starts when that is a terminal (an evaluation at full size takes minutes).
    fn evaluate(&self, episodes: usize, seed: u64) -> Result<Evaluation> {
        self.evaluate_on(TaskSet::HeldOut, episodes, seed)
    }

    /// [`TrainedPolicy::evaluate`] on the held-out or the validation tasks.
    fn evaluate_on(&self, tasks: TaskSet, episodes: usize, seed: u64) -> Result<Evaluation> {
        Ok(self.report(tasks, episodes.clamp(1, 1000), seed, eval::Against::Baselines))
    }

    /// The agent alone, greedy and sampled: two policies of the seven.
    fn evaluate_alone(&self, tasks: TaskSet, episodes: usize, seed: u64) -> Option<Result<Evaluation>> {
        Some(Ok(self.report(tasks, episodes.clamp(1, 1000), seed, eval::Against::Nothing)))
    }
}
