//! One env of the morphogenetic workload: a host learning its task, its slots' lifecycle,
//! and one agent decision per step. A step carries out the decision (grafting or removing
//! a seed), trains the host for `tempo` minibatches (one host epoch), ages the slots,
//! validates, measures each live seed's contribution (validation with subsets of the live
//! seeds switched off, Shapley values over them), and pays the change in validation
//! accuracy less a rent on the parameters the seeds added.

use super::blueprint::Blueprint;
use super::host::{batch, tensors, Epoch, Host, SLOTS};
use super::lifecycle::{self, RewardInputs};
use crate::morpho::glyphs::Task;
use crate::morpho::rules::{self, Action, Gates, Slot, Stage, Surgery, STAGES, TEMPOS};
use anyhow::{anyhow, Result};
use hotlab_env::rng::HostRng;
use hotlab_specs::morpho::{HeadPin, HostExec, LifecycleMode, Probe, SlotPool, StreamWait};
use hotlab_specs::morpho::{
    COUNTERFACTUAL, HOST_STEPS_SKIPPED, LIFECYCLE, REWARD, SEED_NORM_READS, TOPOLOGY_CHANGES, VALIDATION,
};
use hotlab_train::exec::parts::PartClock;
use std::sync::Arc;
use std::time::Instant;
use tch::{Device, Tensor};

/// How an env is set up.
#[derive(Clone, Debug)]
pub struct MorphoConfig {
    /// The host's first-stage channels.
    pub width: i64,
    pub lr: f64,
    /// Host minibatch size.
    pub batch: i64,
    /// Host epochs (agent decisions) per episode.
    pub epochs: u32,
    /// Reward lost per host's worth of added parameters.
    pub rent: f64,
    /// Sampled orderings for the Shapley values (None: exact, every ordering).
    pub shapley_perms: Option<usize>,
    /// How the host holds its seeds.
    pub slots: SlotPool,
    /// How a batch of envs runs its lifecycles and rewards.
    pub lifecycle: LifecycleMode,
    /// How a batch of envs trains its hosts.
    pub host_exec: HostExec,
    /// What the hosts' convolutions and matmuls compute in.
    pub host_kind: tch::Kind,
    /// Where the hosts, their data and the batch's lifecycle state live (the run's device).
    pub device: Device,
    /// Hosts on CUDA, one stream each: when a host's stream waits for the default stream.
    pub stream_wait: StreamWait,
    pub gates: Gates,
    /// Heads the masks pin to one choice ([`rules::pin`]).
    pub pin: HeadPin,
    /// Potential-based shaping's weight per fully grown seed ([`MorphoEnv::potential`]); 0 off.
    pub shaping: f64,
    /// PPO's discount (the shaping's γ).
    pub gamma: f64,
    /// Whether training seeds' contributions are probed, and whether Φ counts them.
    pub probe: Probe,
}

impl MorphoConfig {
    /// Whether each host's step is captured as a CUDA graph: a sleeper pool (its tensors
    /// never change) on CUDA, each host on its own stream (`per_env`).
    pub fn captures(&self) -> bool {
        self.slots == SlotPool::Sleeper
            && self.device.is_cuda()
            && self.host_exec == HostExec::PerEnv
            && hotlab_train::cuda::shim::AVAILABLE
    }
}

impl Default for MorphoConfig {
    fn default() -> Self {
        Self {
            width: 16,
            lr: 3e-3,
            batch: 64,
            epochs: 12,
            rent: 0.02,
            shapley_perms: None,
            slots: SlotPool::Dynamic,
            lifecycle: LifecycleMode::Batched,
            host_exec: HostExec::PerEnv,
            host_kind: tch::Kind::Float,
            device: Device::Cpu,
            stream_wait: StreamWait::Moved,
            gates: Gates::default(),
            pin: HeadPin::Free,
            shaping: 0.0,
            gamma: 0.99,
            probe: Probe::Off,
        }
    }
}

/// What a step says.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    pub reward: f64,
    pub done: bool,
    /// Validation accuracy after this epoch.
    pub accuracy: f64,
    /// At the episode's end: the final validation accuracy less the rent.
    pub score: Option<f64>,
}

/// Observation features per env: the episode's progress, the last train and validation
/// loss and accuracy, then per slot its stage (one-hot), α, age, blueprint (one-hot, none
/// included), added parameters, the seed's gradient norm and its contribution.
pub const OBS_PER_SLOT: usize = 7 + 1 + 1 + (Blueprint::ALL.len() + 1) + 3;
pub const OBS: usize = 5 + SLOTS * OBS_PER_SLOT;

pub struct MorphoEnv {
    cfg: MorphoConfig,
    data: [Tensor; 4],
    host: Host,
    slots: Vec<Slot>,
    /// Parameters each slot's seed added, and its last gradient norm and contribution
    /// (Shapley credit), and the probe of a training seed (`--probe`).
    added: [usize; SLOTS],
    grad_norm: [f64; SLOTS],
    contribution: [f64; SLOTS],
    probe: [f64; SLOTS],
    epoch: u32,
    last: (f64, f64, f64, f64),
    /// This epoch's training loss and accuracy, and its validation loss and accuracy.
    trained: (f64, f64),
    validated: (f64, f64),
    base_params: usize,
    /// fp16 steps this env's host's loss scaler has skipped (as last read).
    skipped: u64,
    /// Φ of the state the last step ended in ([`MorphoEnv::potential`]).
    phi: f64,
    rng: HostRng,
    /// Where the step's parts are timed (the workload's, shared by its envs).
    clock: Arc<PartClock>,
}

impl MorphoEnv {
    /// An env on `task` whose host's weights, minibatches and seeds are drawn from `seed`.
    pub fn new(task: &Task, cfg: MorphoConfig, seed: u64) -> Result<Self> {
        let ((x, y), (xv, yv)) = (tensors(&task.train, cfg.device), tensors(&task.val, cfg.device));
        let mut rng = HostRng::new(seed);
        let mut host = Host::new(cfg.width, cfg.lr, cfg.slots, cfg.device, &mut rng)?;
        host.set_kind(cfg.host_kind);
        if cfg.captures() || cfg.host_kind == tch::Kind::Half {
            host.static_steps(cfg.captures());
        }
        let base_params = host.params();
        let mut env = Self {
            cfg,
            data: [x, y, xv, yv],
            host,
            slots: vec![Slot::default(); SLOTS],
            added: [0; SLOTS],
            grad_norm: [0.0; SLOTS],
            contribution: [0.0; SLOTS],
            probe: [0.0; SLOTS],
            epoch: 0,
            last: (0.0, 0.0, 0.0, 0.0),
            trained: (0.0, 0.0),
            validated: (0.0, 0.0),
            base_params,
            skipped: 0,
            phi: 0.0,
            rng,
            clock: Arc::new(super::part_clock()),
        };
        let (loss, accuracy) = env.validate(&[]);
        env.last = (loss, 0.0, loss, accuracy);
        Ok(env)
    }

    /// Times this env's steps' parts on `clock`.
    pub fn with_clock(self, clock: Arc<PartClock>) -> Self {
        Self { clock, ..self }
    }

    pub fn slots(&self) -> &[Slot] {
        &self.slots
    }

    /// Each slot's live seed's Shapley credit in validation accuracy, as last measured (0
    /// without a blended seed).
    pub fn credit(&self) -> [f64; SLOTS] {
        self.contribution
    }

    pub fn config(&self) -> &MorphoConfig {
        &self.cfg
    }

    /// The clock this env's parts are timed and counted on.
    pub fn clock(&self) -> &PartClock {
        &self.clock
    }

    /// Every head's mask, a row per op ([`rules::mask_table`]), pinned heads narrowed.
    pub fn mask_table(&self) -> Vec<bool> {
        let mut table = rules::mask_table(&self.slots, &self.cfg.gates, Blueprint::ALL.len());
        rules::pin(&mut table, self.cfg.pin, SLOTS, Blueprint::ALL.len(), true, false);
        table
    }

    /// Whether the masks allow `a` now.
    pub fn allows(&self, a: &Action) -> bool {
        let (ops, slots) = self.masks();
        ops.get(a.op).is_some_and(|&ok| ok) && (a.op == 0 || slots[a.op].get(a.slot).is_some_and(|&ok| ok))
    }

    /// The op head's mask and, for each op, the slot head's.
    pub fn masks(&self) -> ([bool; 6], Vec<Vec<bool>>) {
        let g = &self.cfg.gates;
        (rules::op_mask(&self.slots, g), rules::OPS.iter().map(|&op| rules::slot_mask(&self.slots, op, g)).collect())
    }

    /// The features the agent sees ([`OBS`] of them).
    pub fn observe(&self) -> Vec<f32> {
        let (train_loss, train_acc, val_loss, val_acc) = self.last;
        let mut obs = vec![
            self.epoch as f32 / self.cfg.epochs as f32,
            train_loss as f32,
            train_acc as f32,
            val_loss as f32,
            val_acc as f32,
        ];
        for (i, s) in self.slots.iter().enumerate() {
            obs.extend(STAGES.map(|st| (st == s.stage) as u8 as f32));
            obs.push(s.alpha as f32);
            obs.push((s.age as f32 / 10.0).min(1.0));
            let bp = s.blueprint.filter(|_| self.host.slots[i].live.is_some());
            obs.extend((0..=Blueprint::ALL.len()).map(|b| (bp.map_or(Blueprint::ALL.len(), |x| x) == b) as u8 as f32));
            obs.push(self.added[i] as f32 / self.base_params as f32);
            obs.push(self.grad_norm[i] as f32);
            obs.push(self.contributes(i) as f32);
        }
        obs
    }

    /// What slot `i`'s seed is seen to contribute: its probe while it trains (`--probe`),
    /// else its Shapley credit.
    fn contributes(&self, i: usize) -> f64 {
        match self.cfg.probe != Probe::Off && self.slots[i].stage == Stage::Training {
            true => self.probe[i],
            false => self.contribution[i],
        }
    }

    /// Validation loss and accuracy with the seeds of `off` switched off (α = 0).
    fn validate(&mut self, off: &[usize]) -> (f64, f64) {
        let kept: Vec<f64> = off.iter().map(|&s| self.host.slots[s].alpha).collect();
        off.iter().for_each(|&s| self.host.slots[s].alpha = 0.0);
        let result = self.host.evaluate(&self.data[2], &self.data[3]);
        off.iter().zip(kept).for_each(|(&s, a)| self.host.slots[s].alpha = a);
        result
    }

    /// One decision, one host epoch, with the scalar rules ([`rules::apply`],
    /// [`Slot::tick`], [`lifecycle::reward`]); each part timed on the env's clock. A batch
    /// of envs runs the same parts around its own lifecycle ([`super::envs`]).
    pub fn step(&mut self, a: &Action) -> Result<Outcome> {
        let t = Instant::now();
        let mut slots = self.slots.clone();
        let surgery =
            rules::apply(&mut slots, a, &self.cfg.gates).map_err(|e| anyhow!("an illegal action: {}", e.0))?;
        self.clock.lap(LIFECYCLE, t);
        self.operate(&slots, surgery)?;
        self.train(a.tempo)?;
        let t = Instant::now();
        slots.iter_mut().for_each(|s| s.tick(&self.cfg.gates));
        self.clock.lap(LIFECYCLE, t);
        self.settle(&slots);
        self.measure();
        let t = Instant::now();
        let [accuracy, last, added, base] = self.reward_inputs();
        let inputs = RewardInputs {
            accuracy: vec![accuracy],
            last: vec![last],
            added: vec![added],
            base: vec![base],
            rent: self.cfg.rent,
            epochs: vec![self.cfg.epochs as f64],
        };
        let reward = lifecycle::reward(&inputs, 0);
        self.clock.lap(REWARD, t);
        Ok(self.finish(reward))
    }

    /// Carries a decision out on the host: `slots` are the slots after it, `surgery` what
    /// it asks of the host (a seed grafted or removed).
    pub fn operate(&mut self, slots: &[Slot], surgery: Option<Surgery>) -> Result<()> {
        let t = Instant::now();
        if surgery.is_some() && self.cfg.slots == SlotPool::Dynamic {
            self.clock.count(TOPOLOGY_CHANGES, 1);
        }
        match surgery {
            Some(Surgery::Graft { slot, blueprint, lr_scale }) => {
                let bp = *Blueprint::ALL.get(blueprint).ok_or_else(|| anyhow!("blueprint {blueprint}"))?;
                let before = self.host.params();
                self.host.graft(slot, bp, 0.0, lr_scale, &mut self.rng);
                self.added[slot] = self.host.params() - before;
            }
            Some(Surgery::Remove { slot }) => {
                self.host.remove(slot);
                self.added[slot] = 0;
            }
            None => {}
        }
        self.slots = slots.to_vec();
        for (host, s) in self.host.slots.iter_mut().zip(&self.slots) {
            host.learning = s.stage == Stage::Training;
        }
        self.clock.lap(LIFECYCLE, t);
        Ok(())
    }

    /// One host epoch of the tempo head's choice `tempo` minibatches, and the live seeds'
    /// gradient norms after it.
    pub fn train(&mut self, tempo: usize) -> Result<()> {
        let mut epoch = self.begin_epoch(tempo)?;
        while self.minibatch(&mut epoch) {}
        self.end_epoch(epoch);
        Ok(())
    }

    /// An epoch of the tempo head's choice `tempo` minibatches, drawn, not yet run.
    pub fn begin_epoch(&mut self, tempo: usize) -> Result<Epoch> {
        let steps = *TEMPOS.get(tempo).ok_or_else(|| anyhow!("tempo {tempo}"))?;
        let n = self.data[0].size()[0] as u64;
        Ok(Epoch::draw(n, steps, self.cfg.batch, &mut self.rng, self.cfg.device))
    }

    /// The epoch's next minibatch, queued; false once it is over.
    pub fn minibatch(&mut self, epoch: &mut Epoch) -> bool {
        self.host.minibatch(epoch, &self.data[0], &self.data[1], &self.clock)
    }

    /// The epoch's loss and accuracy read back, and the seeds' gradient norms.
    pub fn end_epoch(&mut self, epoch: Epoch) {
        let (loss, accuracy, skipped) = self.host.finish_epoch(epoch, &self.clock);
        self.trained = (loss, accuracy);
        if let Some(n) = skipped {
            self.clock.count(HOST_STEPS_SKIPPED, n.saturating_sub(self.skipped));
            self.skipped = n;
        }
        let t = Instant::now();
        self.telemetry();
        self.clock.lap(LIFECYCLE, t);
    }

    /// The live seeds' gradient norms after every host epoch, one fused reduction and one
    /// read per host (seed 001 F1), a slot without a seed reading 0. The agent observes
    /// them, so no performance setting thins them (issue 40: with the run's telemetry
    /// stride they read 0 by default, and the agent grew less).
    fn telemetry(&mut self) {
        match self.host.seed_grad_norms() {
            Some(norms) => {
                self.grad_norm = norms;
                self.clock.count(SEED_NORM_READS, 1);
            }
            None => self.grad_norm = [0.0; SLOTS],
        }
    }

    /// One host epoch for each of `envs` (the tempo head's choice each), their hosts trained
    /// as one model ([`batch`]); each host's loss, accuracy and seeds' gradient norms as
    /// [`MorphoEnv::train`] gives them, to rounding.
    pub fn train_together(envs: &mut [&mut MorphoEnv], tempos: &[usize]) -> Result<()> {
        let Some(first) = envs.first() else { return Ok(()) };
        let (batch, clock) = (first.cfg.batch, first.clock.clone());
        let mut members = Vec::new();
        for (env, &tempo) in envs.iter_mut().zip(tempos) {
            let steps = *TEMPOS.get(tempo).ok_or_else(|| anyhow!("tempo {tempo}"))?;
            let env = &mut **env;
            let [x, y, ..] = &env.data;
            members.push(batch::Member { host: &mut env.host, x, y, rng: &mut env.rng, steps });
        }
        let trained = batch::train(&mut members, batch, &clock);
        drop(members);
        let t = Instant::now();
        for (env, trained) in envs.iter_mut().zip(trained) {
            env.trained = trained;
            env.telemetry();
        }
        clock.lap(LIFECYCLE, t);
        Ok(())
    }

    /// The end of the epoch: the slots after their tick, whose blends the host follows (a
    /// seed learns at α = 0 in its training stage, and through α after it).
    pub fn settle(&mut self, slots: &[Slot]) {
        let t = Instant::now();
        self.slots = slots.to_vec();
        for (host, s) in self.host.slots.iter_mut().zip(&self.slots) {
            (host.alpha, host.learning) = (s.alpha, s.stage == Stage::Training);
        }
        self.epoch += 1;
        self.clock.lap(LIFECYCLE, t);
    }

    /// Validates the host and credits each live seed (Shapley values); the accuracy.
    pub fn measure(&mut self) -> f64 {
        let t = Instant::now();
        self.validated = self.validate(&[]);
        let t = self.clock.lap(VALIDATION, t);
        self.contribution = self.contributions(self.validated.1);
        if self.cfg.probe != Probe::Off {
            self.probe = self.probes(self.validated.1);
        }
        self.clock.lap(COUNTERFACTUAL, t);
        self.validated.1
    }

    /// What this epoch's reward is computed from: the validation accuracy now and before,
    /// the parameters the seeds added and the bare host's.
    pub fn reward_inputs(&self) -> [f64; 4] {
        [self.validated.1, self.last.3, self.added.iter().sum::<usize>() as f64, self.base_params as f64]
    }

    /// Ends the epoch with its reward, shaped by `γΦ(s′) − Φ(s)` (Φ = 0 once the episode is
    /// over: Ng, Harada and Russell's form, which leaves the optimal policies as they were).
    /// The score stays unshaped: final validation accuracy less the rent.
    pub fn finish(&mut self, reward: f64) -> Outcome {
        let (val_loss, accuracy) = self.validated;
        let rent = self.cfg.rent * self.added.iter().sum::<usize>() as f64 / self.base_params as f64;
        self.last = (self.trained.0, self.trained.1, val_loss, accuracy);
        let done = self.epoch >= self.cfg.epochs;
        let next = if done { 0.0 } else { self.potential() };
        let shaping = self.cfg.gamma * next - std::mem::replace(&mut self.phi, next);
        Outcome { reward: reward + shaping, done, accuracy, score: done.then_some(accuracy - rent) }
    }

    /// Φ of the slots now: `--shaping` × each seed's progress towards a grown one (a quarter
    /// per stage from germinated to holding; fossilized counts whole), and with `--probe
    /// shaped` what each seed is seen to contribute.
    pub fn potential(&self) -> f64 {
        let seen = match self.cfg.probe {
            Probe::Shaped => (0..SLOTS).map(|i| self.contributes(i)).sum::<f64>(),
            Probe::Off | Probe::Observed => 0.0,
        };
        let progress = |s: &Slot| match s.stage {
            Stage::Germinated => 0.25,
            Stage::Training => 0.5,
            Stage::Blending => 0.75,
            Stage::Holding | Stage::Fossilized => 1.0,
            Stage::Dormant | Stage::Cooldown => 0.0,
        };
        self.cfg.shaping * self.slots.iter().map(progress).sum::<f64>() + seen
    }

    /// Each training seed's probe: validation accuracy with the seed at α = 1, less
    /// `accuracy` (the same pass with it at α = 0, as it trains); 0 for the other slots.
    fn probes(&mut self, accuracy: f64) -> [f64; SLOTS] {
        let mut out = [0.0; SLOTS];
        for (s, probe) in out.iter_mut().enumerate() {
            if self.slots[s].stage == Stage::Training && self.host.slots[s].live.is_some() {
                // A learning seed adds 0 to the output (its gradient passes straight through):
                // blended in for the probe's pass only.
                let slot = &mut self.host.slots[s];
                (slot.alpha, slot.learning) = (1.0, false);
                *probe = self.host.evaluate(&self.data[2], &self.data[3]).1 - accuracy;
                let slot = &mut self.host.slots[s];
                (slot.alpha, slot.learning) = (0.0, true);
            }
        }
        out
    }

    /// Each live seed's Shapley value in validation accuracy (0 for the others).
    fn contributions(&mut self, accuracy: f64) -> [f64; SLOTS] {
        let live: Vec<usize> =
            (0..SLOTS).filter(|&s| self.host.slots[s].live.is_some() && self.host.slots[s].alpha > 0.0).collect();
        let mut out = [0.0; SLOTS];
        if live.is_empty() {
            return out;
        }
        let full = (1u32 << live.len()) - 1;
        let mut rng = HostRng::new(self.epoch as u64);
        let perms = self.cfg.shapley_perms;
        let mut value = |mask: u32| {
            if mask == full {
                return accuracy;
            }
            let off: Vec<usize> =
                live.iter().enumerate().filter(|(i, _)| mask & (1 << i) == 0).map(|(_, &s)| s).collect();
            self.validate(&off).1
        };
        let sampled = perms.map(|n| (n, &mut rng));
        let values = rules::shapley(live.len(), &mut value, sampled);
        for (s, v) in live.into_iter().zip(values) {
            out[s] = v;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::morpho::glyphs::{generate, TaskSpec};
    use crate::morpho::rules::OPS;

    fn task() -> Task {
        generate(&TaskSpec { seed: 21, train: 512, val: 256, ..TaskSpec::default() })
    }

    fn op(o: rules::Op, slot: usize) -> Action {
        Action {
            op: OPS.iter().position(|&x| x == o).unwrap(),
            slot,
            blueprint: 2,
            alpha_target: 3,
            ..Action::default()
        }
    }

    /// A seed from germination to a fossil, through every gate: the episode's rewards sum
    /// to the accuracy gained less the rent, the observation keeps its size, and two envs
    /// with the same seed and actions agree bit for bit.
    #[test]
    fn an_episode_grows_a_seed_and_is_the_same_twice() {
        use rules::Op::*;
        let cfg = MorphoConfig { epochs: 8, ..MorphoConfig::default() };
        let plan = [
            op(Germinate, 1),
            op(Advance, 1),
            op(Wait, 0),
            op(Advance, 1),
            op(Wait, 0),
            op(Wait, 0),
            op(Fossilize, 1),
            op(Wait, 0),
        ];
        let run = || {
            let mut env = MorphoEnv::new(&task(), cfg.clone(), 4).unwrap();
            let start = env.last.3;
            let mut out = Vec::new();
            for a in &plan {
                let (ops, slots) = env.masks();
                assert!(ops[a.op] && (a.op == 0 || slots[a.op][a.slot]), "{a:?} is legal");
                out.push(env.step(a).unwrap());
                assert_eq!(env.observe().len(), OBS);
            }
            (env, start, out)
        };
        let (env, start, out) = run();
        assert_eq!(env.slots()[1].stage, Stage::Fossilized);
        assert!(out.last().unwrap().done && out.iter().rev().skip(1).all(|o| !o.done));
        let total: f64 = out.iter().map(|o| o.reward).sum();
        let score = out.last().unwrap().score.unwrap();
        let rent = cfg.rent * env.added.iter().sum::<usize>() as f64 / env.base_params as f64;
        assert!(env.added[1] > 0 && env.contribution[1] != 0.0, "the live seed is credited");
        assert!((score - (out.last().unwrap().accuracy - rent)).abs() < 1e-12);
        assert!(total > -1.0 && total < 1.0 && start < 1.0);
        let (_, _, again) = run();
        assert_eq!(out, again, "the same seed and actions, the same episode");
    }

    /// The live seed's gradient norm is read after every host epoch (once per host,
    /// counted) and observed: 0 before it learns, then each epoch's own; slots without a
    /// seed read 0, and so does an episode without one.
    #[test]
    fn seed_gradient_norms_are_read_and_observed_every_epoch() {
        use rules::Op::*;
        let plan = [op(Wait, 0), op(Germinate, 0), op(Advance, 0), op(Wait, 0), op(Wait, 0)];
        let cfg = MorphoConfig { epochs: 6, ..MorphoConfig::default() };
        let mut env = MorphoEnv::new(&task(), cfg, 3).unwrap();
        let norm_feature = 5 + OBS_PER_SLOT - 2;
        let mut seen = Vec::new();
        for a in &plan {
            env.step(a).unwrap();
            seen.push(env.grad_norm[0]);
            assert_eq!(env.observe()[norm_feature], env.grad_norm[0] as f32, "observed as read");
            assert_eq!(env.grad_norm[1..], [0.0, 0.0], "slots without a seed read 0");
        }
        // No seed in epoch 0 (no read), germinated in epoch 1 (no gradient yet), learning from epoch 2.
        assert_eq!(env.clock.total(SEED_NORM_READS), 4);
        assert!(seen[..2] == [0.0, 0.0] && seen[2..].iter().all(|&n| n > 0.0), "{seen:?}");
        assert!(seen[2..].windows(2).all(|w| w[0] != w[1]), "each epoch's own: {seen:?}");
    }

    /// `--probe observed`: while a seed trains at α = 0, its contribution feature reads the
    /// validation accuracy with it at α = 1 less the pass without it; the probe changes
    /// nothing else of the episode, and without it a training seed reads 0.
    #[test]
    fn a_training_seeds_probe_is_its_validation_at_full_blend_less_without_it() {
        use rules::Op::*;
        // At the longest tempo the host learns enough for a seed to move its accuracy.
        let plan = [op(Germinate, 1), op(Advance, 1), op(Wait, 0), op(Wait, 0)].map(|a| Action { tempo: 2, ..a });
        let feature = 5 + OBS_PER_SLOT + OBS_PER_SLOT - 1;
        let run = |probe: Probe| {
            let cfg = MorphoConfig { epochs: 5, width: 8, probe, ..MorphoConfig::default() };
            let mut env = MorphoEnv::new(&task(), cfg, 6).unwrap();
            let mut out = Vec::new();
            for a in &plan {
                let o = env.step(a).unwrap();
                let seen = env.observe()[feature] as f64;
                let training = env.slots()[1].stage == Stage::Training;
                if training && probe != Probe::Off {
                    (env.host.slots[1].alpha, env.host.slots[1].learning) = (1.0, false);
                    let full = env.host.evaluate(&env.data[2], &env.data[3]).1;
                    (env.host.slots[1].alpha, env.host.slots[1].learning) = (0.0, true);
                    assert_eq!(seen, (full - env.validated.1) as f32 as f64, "the probe");
                }
                out.push((o, training, seen));
            }
            out
        };
        let (off, observed) = (run(Probe::Off), run(Probe::Observed));
        assert!(observed.iter().filter(|s| s.1).count() >= 2, "the seed trains for two epochs or more");
        assert!(observed.iter().any(|s| s.1 && s.2 != 0.0), "a trained seed changes the host: {observed:?}");
        assert!(off.iter().all(|s| !s.1 || s.2 == 0.0), "off: a training seed reads 0");
        for (a, b) in off.iter().zip(&observed) {
            assert_eq!(a.0, b.0, "the same rewards, accuracies and scores");
        }
    }

    /// fp16 hosts: the steps their scalers skip reach the run's counters, read with the
    /// epoch's losses and counted once each across epochs.
    #[test]
    fn an_fp16_hosts_skipped_steps_are_counted() {
        let cfg = MorphoConfig { epochs: 3, width: 8, host_kind: tch::Kind::Half, ..MorphoConfig::default() };
        let mut env = MorphoEnv::new(&task(), cfg, 2).unwrap();
        // A scale no fp16 gradient survives: every step overflows and is skipped.
        env.host.restart_scaler(1e30);
        let wait = |tempo| Action { tempo, ..Action::default() };
        env.step(&wait(0)).unwrap();
        assert_eq!(env.clock.total(HOST_STEPS_SKIPPED), 4, "tempo 0: 4 minibatches, all skipped");
        env.step(&wait(1)).unwrap();
        assert_eq!(env.clock.total(HOST_STEPS_SKIPPED), 12, "8 more, the first 4 not counted twice");
        assert!(env.trained.0.is_finite(), "the loss itself is finite: {:?}", env.trained);
        let mut sane = MorphoEnv::new(&task(), MorphoConfig { epochs: 2, ..env.cfg.clone() }, 2).unwrap();
        sane.step(&wait(0)).unwrap();
        assert_eq!(sane.clock.total(HOST_STEPS_SKIPPED), 0, "from 2^16 these steps do not overflow");
    }

    /// An episode of random legal actions drawn from `play`: each action, its outcome, the
    /// observation and Φ after it.
    fn random_episode(mut env: MorphoEnv, play: u64) -> Vec<(Action, Outcome, Vec<f32>, f64)> {
        let mut rng = HostRng::new(play);
        let mut out = Vec::new();
        loop {
            let a = Action::random_legal(env.slots(), &env.cfg.gates, Blueprint::ALL.len(), &mut rng);
            let o = env.step(&a).unwrap();
            let done = o.done;
            out.push((a, o, env.observe(), env.potential()));
            if done {
                return out;
            }
        }
    }

    proptest::proptest! {
        // 8 cases of whole episodes (about 6 s each on one core of a 2-core CI box).
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 8, ..Default::default() })]

        /// `--slots`: random legal play gives the same episode step for step (rewards,
        /// accuracies, observations) whether seeds sleep in a pool or are made and freed,
        /// over seeds, host shapes, episode lengths and probes. A seed is stepped
        /// only while it takes part in the loss: a sleeper's defined zero gradient before it
        /// learns once counted Adam steps a new seed did not.
        #[test]
        fn a_sleeper_pool_plays_the_same_episode_as_dynamic_seeds(
            seed in 1u64..1_000,
            play in 0u64..1_000,
            width in proptest::sample::select(vec![2i64, 4, 8]),
            batch in proptest::sample::select(vec![8i64, 16, 32]),
            epochs in 4u32..=12,
            probe in proptest::sample::select(vec![Probe::Off, Probe::Observed]),
        ) {
            let task = generate(&TaskSpec { seed, train: 128, val: 64, ..TaskSpec::default() });
            let run = |slots: SlotPool| {
                let cfg = MorphoConfig { slots, width, batch, epochs, probe, ..MorphoConfig::default() };
                random_episode(MorphoEnv::new(&task, cfg, seed).unwrap(), play)
            };
            let (dynamic, sleeper) = (run(SlotPool::Dynamic), run(SlotPool::Sleeper));
            let first = dynamic.iter().zip(&sleeper).position(|(d, s)| d != s);
            proptest::prop_assert!(first.is_none(), "step {first:?} of {dynamic:?}\nagainst {sleeper:?}");
        }

        /// `--shaping` (and `--probe shaped`, whose Φ also counts what seeds contribute): over
        /// random legal trajectories the shaping's discounted sum telescopes to −Φ(s₀) (0:
        /// every slot starts dormant), each step's shaping is γΦ(s′) − Φ(s) on top of the
        /// unshaped reward, and the score is never shaped.
        #[test]
        fn the_shapings_discounted_sum_telescopes_to_minus_the_first_potential(
            seed in 1u64..1_000,
            play in 0u64..1_000,
            epochs in 3u32..=10,
            gamma in 0.5f64..1.0,
            weight in 0.01f64..2.0,
            gate in proptest::bool::ANY,
            probe in proptest::sample::select(vec![Probe::Off, Probe::Observed, Probe::Shaped]),
        ) {
            let task = generate(&TaskSpec { seed, train: 64, val: 32, ..TaskSpec::default() });
            let gates = Gates { auto_train: gate, ..Gates::default() };
            let env = |shaping: f64, probe: Probe| {
                let cfg =
                    MorphoConfig { width: 2, batch: 8, epochs, shaping, gamma, gates, probe, ..MorphoConfig::default() };
                MorphoEnv::new(&task, cfg, seed).unwrap()
            };
            let first = env(weight, probe).potential();
            proptest::prop_assert_eq!(first, 0.0, "every slot starts dormant");
            let (plain, shaped) =
                (random_episode(env(0.0, Probe::Off), play), random_episode(env(weight, probe), play));
            let mut discounted = 0.0;
            let mut before = first;
            for (t, ((_, p, _, _), (_, s, _, phi))) in plain.iter().zip(&shaped).enumerate() {
                let after = if s.done { 0.0 } else { *phi };
                let f = s.reward - p.reward;
                proptest::prop_assert!((f - (gamma * after - before)).abs() < 1e-12, "step {}: {} against {}", t, f, gamma * after - before);
                proptest::prop_assert_eq!((s.accuracy, s.score, s.done), (p.accuracy, p.score, p.done));
                discounted += gamma.powi(t as i32) * f;
                before = after;
            }
            proptest::prop_assert!((discounted + first).abs() < 1e-9, "Σ γ^t F_t = {}", discounted);
        }
    }

    #[test]
    fn an_illegal_action_is_refused() {
        let mut env = MorphoEnv::new(&task(), MorphoConfig { epochs: 2, ..MorphoConfig::default() }, 1).unwrap();
        let e = env.step(&op(rules::Op::Fossilize, 0)).unwrap_err();
        assert!(e.to_string().contains("illegal"), "{e}");
    }
}
