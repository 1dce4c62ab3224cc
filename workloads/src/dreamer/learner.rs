//! The dreamer's learner, one iteration top to bottom: `envs × steps` env steps into the
//! replay buffer ([`Collector`]), then as many train steps ([`Trainer::step`]) as the
//! train ratio asks (eagerly, or replayed as one CUDA graph under `--update graph`:
//! [`CapturedStep`]), the loss figures read as `--loss-read` says, and seed 004's
//! `[PROFILE]` line every 50 eager train steps.

use super::behavior::Behavior;
use super::captured::{self, CapturedStep};
use super::collect::Collector;
use super::replay::Replay;
use super::step::{Tally, Trainer, TERMS};
use super::world::WorldModel;
use super::{Dreamer, TrainedDreamer};
use anyhow::{bail, Result};
use hotlab_core::choices::UpdateMode;
use hotlab_core::profile::Phase;
use hotlab_env::rng::HostRng;
use hotlab_protocol::Losses;
use hotlab_spec::RunSpec;
use hotlab_specs::dreamer::DECODER;
use hotlab_train::params::ParamSlot;
use hotlab_train::workload::{Iteration, Learner, Outcome, Setup, TrainedPolicy};
use std::sync::Arc;
use std::time::Instant;

pub struct DreamerLearner {
    spec: RunSpec,
    trainer: Trainer,
    replay: Replay,
    collector: Collector,
    rng: HostRng,
    /// Train steps owed but not yet taken (the ratio's fraction).
    owed: f64,
    layout: Vec<ParamSlot>,
    workload: Arc<Dreamer>,
    /// `--update graph`: the train step's static buffers and its graph.
    captured: Option<CapturedStep>,
}

impl DreamerLearner {
    pub fn new(setup: &mut Setup<'_>, workload: Arc<Dreamer>) -> Result<Self> {
        let spec = setup.spec;
        let settings = workload.settings.clone();
        let kind = setup.precision.kind;
        let world = WorldModel::new(workload.dims(), setup.device, kind);
        let behavior = Behavior::new(&world.dims, setup.device, kind);
        if spec.exec.threads == 0 {
            // A train step's convolutions cover batch × seq_len frames: large enough for every
            // core, and the envs (CartPole) never step while it runs.
            setup.threads = hotlab_train::cores();
        }
        tch::set_num_threads(setup.threads as i32);
        // On CUDA the profiler times every phase with CUDA events (the kernels it opens are
        // CartPole's; only their events are used here).
        if setup.device.is_cuda() {
            // A run's convolutions keep their shapes, so timing cuDNN's algorithms once pays:
            // its heuristics pick slow fp16 ones on an H200 (measured: fp16 train steps 1.8–2×
            // faster timed). The mode is the process's, so it stays on for later runs in it.
            tch::Cuda::cudnn_set_benchmark(true);
            setup.notes.push("cuDNN benchmark mode: convolution algorithms timed on their first call".into());
        }
        let replay = Replay::new(settings.replay, settings.capacity, spec.envs, setup.device);
        let collector = Collector::new(spec, workload.clone(), setup.device)?;
        let layout = super::joint_layout(&world, &behavior);
        let fp16_scale = (kind == tch::Kind::Half).then_some(hotlab_train::precision::INIT_SCALE);
        let trainer = Trainer::new(settings, world, behavior, fp16_scale);
        // The spec's checks saw to the replay being on the device (`validate_exec`).
        let captured = match spec.exec.update {
            UpdateMode::Eager => None,
            UpdateMode::GraphFused => bail!("--update graph_fused is PPO's; the dreamer's allowed: eager, graph"),
            UpdateMode::Graph => {
                setup.notes.push(format!(
                    "update graph: the whole train step (the batch gathered from the device replay, the world model's loss, backward and Adam, the imagination, the actor's and critic's losses, backward and Adams) captured after {} eager steps and replayed once per train step; its time is the update_graph phase",
                    captured::WARMUP
                ));
                Some(CapturedStep::new(&trainer, setup.device, true))
            }
        };
        Ok(Self {
            spec: spec.clone(),
            trainer,
            captured,
            replay,
            collector,
            rng: HostRng::new(spec.seed ^ 0xd7ea_3e70),
            owed: 0.0,
            layout,
            workload,
        })
    }

    /// Train steps the ratio asks for after `env_steps` more env steps (none while the
    /// buffer prefills or holds no full sequence per env).
    fn due(&mut self, env_steps: u64) -> u64 {
        let d = &self.trainer.settings;
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

    fn warmup(&self) -> u64 {
        // The prefill's iterations train nothing; then the first train steps' start-up.
        let per_iteration = self.spec.batch_size().max(1) as u64;
        (self.trainer.settings.prefill as u64).div_ceil(per_iteration) + 2
    }

    fn iterate(&mut self, it: &mut Iteration<'_>) -> Result<Option<Outcome>> {
        let rollout = Instant::now();
        let prefill = self.trainer.settings.prefill;
        let mut random = |r: &Replay| r.len() < prefill;
        let models = (&self.trainer.world, &self.trainer.behavior);
        let done = self.collector.collect(self.spec.steps, models, &mut random, &mut self.replay, &mut self.rng, it)?;
        if !done {
            return Ok(None);
        }
        let rollout_s = rollout.elapsed().as_secs_f64();
        let learn_start = Instant::now();
        let steps = self.due(self.spec.batch_size() as u64);
        let mut tally = Tally::new(self.trainer.settings.loss_read);
        let mut lines = Vec::new();
        for _ in 0..steps {
            if it.stopped() {
                return Ok(None);
            }
            match &mut self.captured {
                Some(graph) => {
                    graph.step(&mut self.trainer, &self.replay, &mut self.rng, it.prof, it.counters, &mut tally)?
                }
                None => self.trainer.step(&self.replay, &mut self.rng, it.prof, it.counters, &mut tally),
            }
            lines.extend(self.trainer.split.line());
        }
        let s = it.prof.start();
        let norms = it.telemetry.filter(|_| steps > 0).map(|t| t.squared_norms(&self.trainer.grads()));
        let s = it.prof.stop(Phase::TELEMETRY, s);
        let mean = tally.read(steps, it.counters).map(|sum| sum.map(|v| v / steps as f64));
        it.prof.stop(DECODER, s);
        // Before the first train step (the prefill) there is nothing to report.
        let losses = mean.map_or_else(Losses::default, |m| {
            let mut l: Losses = TERMS.into_iter().zip(m).collect();
            l.push("world.train_steps", steps as f64);
            l
        });
        let (loss_scale, skipped_steps) = self.trainer.scaling(it.counters);
        Ok(Some(Outcome {
            env_steps: self.spec.batch_size() as u64,
            lr: self.trainer.settings.wm_lr,
            losses,
            loss_scale,
            skipped_steps,
            norms,
            learn_start,
            rollout_s,
            lines,
        }))
    }

    fn finish(self: Box<Self>) -> Box<dyn TrainedPolicy> {
        Box::new(TrainedDreamer::new(self.trainer.world, self.trainer.behavior, self.workload))
    }
}
