//! The dreamer's learner, one iteration top to bottom: `envs × steps` env steps into the
//! replay buffer, then as many train steps as the train ratio asks. A train step samples
//! a batch (`replay`), observes it with the world model (`encoder`, `rssm`), scores its
//! reconstruction, reward and continuation (`decoder`), steps the world model
//! (`world_backward`, `optimizer`), imagines from every observed state and scores the
//! actor and critic (`imagine`), and steps them (`actor_critic_backward`, `optimizer`).
//! Every 50 train steps it prints seed 004's `[PROFILE]` line.

use super::behavior::Behavior;
use super::collect::Collector;
use super::replay::Replay;
use super::world::{State, WorldModel};
use super::{Dreamer, TrainedDreamer};
use crate::profiler::Profiler;
use crate::train::adam::FlatAdam;
use crate::train::params::ParamSlot;
use crate::train::ppo::update::{clip_grad_norm, UpdateStats};
use crate::train::workload::{Iteration, Learner, Outcome, Setup, TrainedPolicy};
use anyhow::Result;
use hotlab_shared::counters::Counters;
use hotlab_shared::profile::Phase;
use hotlab_shared::protocol::WorldLosses;
use hotlab_shared::rng::HostRng;
use hotlab_shared::spec::{DreamerSpec, LossRead, RunSpec};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tch::{Device, Kind, Tensor};

/// Train steps per `[PROFILE]` line (seed 004's window).
pub const PROFILE_WINDOW: u64 = 50;
/// Gradient-norm clips: DreamerV3's for the world model, and for the actor and critic.
const WORLD_CLIP: f64 = 1000.0;
const BEHAVIOR_CLIP: f64 = 100.0;
/// Loss figures kept per train step: the world model's four terms, then the actor's
/// loss, the critic's and the actor's entropy.
const FIGURES: usize = 7;

/// Seed 004's coarse split: replay, forward passes, backward passes and optimizers.
#[derive(Default)]
struct Split {
    data: Duration,
    fwd: Duration,
    bwd: Duration,
    steps: u64,
}

impl Split {
    /// The line once a window is full (and a fresh window).
    fn line(&mut self) -> Option<String> {
        if self.steps < PROFILE_WINDOW {
            return None;
        }
        let total = (self.data + self.fwd + self.bwd).as_secs_f64().max(1e-12);
        let pct = |d: Duration| 100.0 * d.as_secs_f64() / total;
        let line = format!(
            "[PROFILE] data: {:.1}% | fwd: {:.1}% | bwd: {:.1}% | total: {:.2}s/{} steps",
            pct(self.data),
            pct(self.fwd),
            pct(self.bwd),
            total,
            self.steps
        );
        *self = Split::default();
        Some(line)
    }
}

/// The loss figures of an iteration's train steps: summed as tensors and read once
/// (`deferred`), or read after every step (`per_item`).
enum Tally {
    Deferred(Option<Tensor>),
    PerItem([f64; FIGURES]),
}

pub struct DreamerLearner {
    settings: DreamerSpec,
    spec: RunSpec,
    world: WorldModel,
    behavior: Behavior,
    /// The world model's, the actor's and the critic's optimizers.
    adam: [FlatAdam; 3],
    replay: Replay,
    collector: Collector,
    rng: HostRng,
    /// Train steps owed but not yet taken (the ratio's fraction).
    owed: f64,
    split: Split,
    layout: Vec<ParamSlot>,
    workload: Arc<Dreamer>,
}

impl DreamerLearner {
    pub fn new(setup: &mut Setup<'_>, workload: Arc<Dreamer>) -> Result<Self> {
        let spec = setup.spec;
        let settings = workload.settings.clone();
        let world = WorldModel::new(workload.dims(), setup.device);
        let behavior = Behavior::new(&world.dims, setup.device);
        if spec.exec.threads == 0 {
            // A train step's convolutions cover batch × seq_len frames: large enough for every
            // core, and the envs (CartPole) never step while it runs.
            setup.threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        }
        tch::set_num_threads(setup.threads as i32);
        let adam = [&world.p.flat, &behavior.actor.flat, &behavior.critic.flat].map(|p| FlatAdam::new(p, 1e-8));
        let replay = Replay::new(settings.replay, settings.capacity, spec.envs, setup.device);
        let collector = Collector::new(spec, workload.clone(), setup.device)?;
        let layout = super::joint_layout(&world, &behavior);
        Ok(Self {
            settings,
            spec: spec.clone(),
            world,
            behavior,
            adam,
            replay,
            collector,
            rng: HostRng::new(spec.seed ^ 0xd7ea_3e70),
            owed: 0.0,
            split: Split::default(),
            layout,
            workload,
        })
    }

    /// One train step; its loss figures go to `tally`.
    fn train_step(&mut self, prof: &mut Profiler, c: &mut Counters, tally: &mut Tally) {
        let d = &self.settings;
        let t0 = prof.start();
        let batch = self.replay.sample(d.batch, d.seq_len, &mut self.rng, c);
        let t1 = prof.stop(Phase::Replay, t0);
        let seen = self.world.observe(&batch, d.encoder, prof);
        let s = prof.start();
        let (loss, terms) = self.world.loss(&batch, &seen);
        let t2 = prof.stop(Phase::Decoder, s);
        self.world.p.zero_grad();
        loss.backward();
        let s = prof.stop(Phase::WorldBackward, t2);
        clip_grad_norm(&mut self.world.p.grad, WORLD_CLIP);
        self.adam[0].step(&mut self.world.p.flat, &self.world.p.grad, d.wm_lr);
        let t3 = prof.stop(Phase::Optimizer, s);
        let feat = seen.feat.view([batch.b * batch.t, -1]);
        let deter = self.world.dims.deter;
        let start = State { deter: feat.narrow(-1, 0, deter), stoch: feat.narrow(-1, deter, self.world.dims.stoch()) };
        let dream = self.behavior.imagine(&self.world, &start, d.horizon);
        let ac = self.behavior.losses(&self.world, &dream);
        let t4 = prof.stop(Phase::Imagine, t3);
        self.behavior.actor.zero_grad();
        self.behavior.critic.zero_grad();
        (&ac.actor + &ac.critic).backward();
        let s = prof.stop(Phase::ActorCriticBackward, t4);
        for (i, net) in [&mut self.behavior.actor, &mut self.behavior.critic].into_iter().enumerate() {
            clip_grad_norm(&mut net.grad, BEHAVIOR_CLIP);
            self.adam[1 + i].step(&mut net.flat, &net.grad, d.ac_lr);
        }
        let t5 = prof.stop(Phase::Optimizer, s);
        let [image, reward, cont, kl] = terms.all();
        let figures = [image, reward, cont, kl, &ac.actor.detach(), &ac.critic.detach(), &ac.entropy];
        match tally {
            Tally::Deferred(sum) => {
                let row = Tensor::stack(&figures, 0);
                *sum = Some(match sum.take() {
                    Some(s) => s + row,
                    None => row,
                });
            }
            Tally::PerItem(sum) => {
                for (acc, f) in sum.iter_mut().zip(figures) {
                    *acc += f.double_value(&[]);
                    c.host_syncs += 1;
                }
            }
        }
        let s = prof.stop(Phase::Decoder, t5);
        // Seed 004's split: reading the losses counts as forward, where it sits in its loop.
        self.split.data += t1 - t0;
        self.split.fwd += (t2 - t1) + (t4 - t3) + (s - t5);
        self.split.bwd += (t3 - t2) + (t5 - t4);
        self.split.steps += 1;
    }

    /// Train steps the ratio asks for after `env_steps` more env steps (none while the
    /// buffer prefills or holds no full sequence per env).
    fn due(&mut self, env_steps: u64) -> u64 {
        let d = &self.settings;
        if self.replay.len() < d.prefill || !self.replay.can_sample(d.seq_len) {
            return 0;
        }
        self.owed += env_steps as f64 * d.train_ratio / (d.batch * d.seq_len) as f64;
        let n = self.owed.floor();
        self.owed -= n;
        n as u64
    }
}

impl Learner for DreamerLearner {
    fn iterations(&self) -> u64 {
        self.spec.updates()
    }

    fn layout(&self) -> &[ParamSlot] {
        &self.layout
    }

    fn iterate(&mut self, it: &mut Iteration<'_>) -> Result<Option<Outcome>> {
        let rollout = Instant::now();
        let prefill = self.settings.prefill;
        let mut random = |r: &Replay| r.len() < prefill;
        let models = (&self.world, &self.behavior);
        let done = self.collector.collect(self.spec.steps, models, &mut random, &mut self.replay, &mut self.rng, it)?;
        if !done {
            return Ok(None);
        }
        let rollout_s = rollout.elapsed().as_secs_f64();
        let learn_start = Instant::now();
        let steps = self.due(self.spec.batch_size() as u64);
        let mut tally = match self.settings.loss_read {
            LossRead::Deferred => Tally::Deferred(None),
            LossRead::PerItem => Tally::PerItem([0.0; FIGURES]),
        };
        let mut lines = Vec::new();
        for _ in 0..steps {
            if it.stopped() {
                return Ok(None);
            }
            self.train_step(it.prof, it.counters, &mut tally);
            lines.extend(self.split.line());
        }
        let s = it.prof.start();
        let norms = it.telemetry.filter(|_| steps > 0).map(|t| {
            let grads = [&self.world.p.grad, &self.behavior.actor.grad, &self.behavior.critic.grad];
            t.squared_norms(&Tensor::cat(&grads, 0))
        });
        let s = it.prof.stop(Phase::Telemetry, s);
        let sums = match tally {
            Tally::Deferred(None) => None,
            Tally::Deferred(Some(sum)) => {
                it.counters.host_syncs += 1;
                let host = Vec::<f64>::try_from(sum.to_kind(Kind::Double).to_device(Device::Cpu)).unwrap_or_default();
                <[f64; FIGURES]>::try_from(host).ok()
            }
            Tally::PerItem(sum) => (steps > 0).then_some(sum),
        };
        it.prof.stop(Phase::Decoder, s);
        let mean = sums.map(|s| s.map(|v| v / steps as f64));
        let world = mean.map(|m| WorldLosses { image: m[0], reward: m[1], cont: m[2], kl: m[3], train_steps: steps });
        let stats = UpdateStats {
            policy_loss: mean.map_or(0.0, |m| m[4]),
            value_loss: mean.map_or(0.0, |m| m[5]),
            entropy: mean.map_or(0.0, |m| m[6]),
            ..UpdateStats::default()
        };
        Ok(Some(Outcome {
            env_steps: self.spec.batch_size() as u64,
            lr: self.settings.wm_lr,
            stats,
            norms,
            learn_start,
            rollout_s,
            world,
            lines,
        }))
    }

    fn finish(self: Box<Self>) -> Box<dyn TrainedPolicy> {
        Box::new(TrainedDreamer::new(self.world, self.behavior, self.workload))
    }
}
