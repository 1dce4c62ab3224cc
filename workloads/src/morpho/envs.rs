//! The morphogenetic env behind the seam: episodes one after another on a pool of tasks
//! ([`Episodes`]), as a batch on one thread ([`MorphoBatch`], the `vectorized` backend and
//! each worker's slice) and one at a time ([`MorphoScalar`], the per-env loop).
//!
//! The observation has two fields: the features ([`OBS`] f32) and the mask table, one row
//! of every head's flags per op ([`rules::mask_table`]); the policy samples the op, then
//! the other heads under its row.

use super::blueprint::Blueprint;
use super::env::{MorphoConfig, MorphoEnv, Outcome, OBS};
use super::host::SLOTS;
use super::lifecycle::{self, Lifecycle, RewardInputs};
use super::streams::HostStreams;
use crate::morpho::glyphs::Task;
use crate::morpho::rules::{self, OPS};
use hotlab_env::rng::splitmix64;
use hotlab_env::{
    BatchEnv, EnvError, EnvSpec, EpisodeEnd, FieldData, FieldKind, FieldSpec, HeadSpec, Observations, ScalarEnv,
    StepBatch,
};
use hotlab_specs::morpho::{Curriculum, HeadPin, HostExec};
use hotlab_specs::morpho::{LIFECYCLE, REWARD};
use hotlab_train::exec::parts::PartClock;
use std::sync::Arc;
use std::time::Instant;

/// The env's observation fields and heads.
pub fn env_spec() -> EnvSpec {
    let heads = rules::heads(SLOTS, Blueprint::ALL.len());
    let choices = heads.iter().map(|h| h.1).sum();
    EnvSpec {
        name: "morpho".into(),
        fields: vec![
            FieldSpec::new("features", vec![OBS], FieldKind::F32),
            FieldSpec::new("mask", vec![OPS.len(), choices], FieldKind::I64),
        ],
        heads: heads.iter().map(|&(name, n)| HeadSpec { name: name.into(), n }).collect(),
        masked: true,
        continuous: 0,
    }
}

/// The tasks an env's episodes learn, how each env is set up, and the clock their
/// steps' parts are timed with.
#[derive(Clone)]
pub struct Pool {
    pub tasks: Arc<Vec<Task>>,
    pub cfg: MorphoConfig,
    pub clock: Arc<PartClock>,
    /// Host epochs of an env's episode `n` where a curriculum sets them (`cfg.epochs`
    /// where None).
    pub curriculum: Option<Curriculum>,
}

/// An episode's end: its return, length and score.
type End = (f64, u32, f64);

/// One env's episodes: a fresh host (its own draws) on the next task of the pool each time.
pub struct Episodes {
    pool: Pool,
    seed: u64,
    /// The env's global index.
    index: u64,
    episode: u64,
    env: MorphoEnv,
    /// Not stepped since it was made (a reset then keeps it: every backend resets first).
    fresh: bool,
    ret: f64,
    length: u32,
    /// Actions outside the masks, taken as a wait (only a policy that ignores the masks
    /// sends one).
    pub refused: u64,
}

impl Episodes {
    pub fn new(pool: Pool, seed: u64, index: u64) -> Self {
        let env = Self::episode(&pool, seed, index, 0);
        Self { pool, seed, index, episode: 0, env, fresh: true, ret: 0.0, length: 0, refused: 0 }
    }

    /// Env `index`'s episode `n`: task `(index + n) mod tasks`, the host's draws from all three.
    fn episode(pool: &Pool, seed: u64, index: u64, n: u64) -> MorphoEnv {
        let task = &pool.tasks[((index + n) % pool.tasks.len() as u64) as usize];
        let draws = splitmix64(seed ^ splitmix64(index.wrapping_mul(0x9e37_79b9) ^ splitmix64(n)));
        let epochs = pool.curriculum.map_or(pool.cfg.epochs, |c| c.epochs(n));
        let cfg = MorphoConfig { epochs, ..pool.cfg.clone() };
        let env = one_thread(|| MorphoEnv::new(task, cfg, draws).expect("a host builds"));
        env.with_clock(pool.clock.clone())
    }

    pub fn env(&self) -> &MorphoEnv {
        &self.env
    }

    /// Starts the next episode.
    pub fn reset(&mut self) {
        if std::mem::take(&mut self.fresh) {
            return;
        }
        self.episode += 1;
        self.env = Self::episode(&self.pool, self.seed, self.index, self.episode);
        (self.ret, self.length) = (0.0, 0);
    }

    /// One decision with the scalar rules (an env played on its own: evaluation); outside
    /// the masks, a wait at the same tempo. The reward, and the episode's end when this
    /// step ended it.
    pub fn step(&mut self, a: &[i64]) -> (f64, Option<End>) {
        let cfg = &self.pool.cfg;
        let ok = lifecycle::legal(self.env.slots(), &cfg.gates, Blueprint::ALL.len(), a);
        self.refused += !ok as u64;
        self.fresh = false;
        let out = one_thread(|| self.env.step(&lifecycle::effective(ok, a))).expect("a legal action steps");
        self.end(out)
    }

    /// Counts an epoch's outcome into the episode: its reward, and the episode's return,
    /// length and score when it ended.
    fn end(&mut self, out: Outcome) -> (f64, Option<End>) {
        self.ret += out.reward;
        self.length += 1;
        let end = out.done.then(|| (self.ret, self.length, out.score.unwrap_or(out.accuracy)));
        (out.reward, end)
    }

    /// Writes the features at row `e`.
    fn features(&self, fields: &mut [FieldData], e: usize) {
        if let Some(FieldData::F32(features)) = fields.first_mut() {
            features[e * OBS..(e + 1) * OBS].copy_from_slice(&self.env.observe());
        }
    }
}

/// Envs stepped together on one thread, their lifecycles and rewards run as `--lifecycle`
/// says ([`lifecycle`]): a backend's batch, a worker's slice, or one env on its own.
struct Group {
    envs: Vec<Episodes>,
    life: Box<dyn Lifecycle>,
    /// Hosts on CUDA under `per_env`: a stream each ([`HostStreams`]).
    streams: Option<HostStreams>,
    /// The envs' setup (the same for every env of the group).
    cfg: MorphoConfig,
    clock: Arc<PartClock>,
}

impl Group {
    /// `count` envs whose global indices start at `first`.
    fn new(pool: Pool, count: usize, seed: u64, first: u64) -> Self {
        let (cfg, clock) = (pool.cfg.clone(), pool.clock.clone());
        let (mode, gates) = (cfg.lifecycle, cfg.gates);
        let life = lifecycle::new(mode, count, SLOTS, Blueprint::ALL.len(), gates, cfg.device, clock.clone());
        let envs = (0..count as u64).map(|i| Episodes::new(pool.clone(), seed, first + i)).collect();
        let streams = (cfg.device.is_cuda() && cfg.host_exec == HostExec::PerEnv)
            .then(|| HostStreams::new(cfg.device, count, cfg.stream_wait).ok())
            .flatten();
        Self { envs, life, streams, clock, cfg }
    }

    /// Env `e` starts its next episode.
    fn reset(&mut self, e: usize) {
        self.envs[e].reset();
        self.life.reset(e);
    }

    /// One decision per env (`heads`: 8 indices each): the lifecycle decides for all, each
    /// host trains its epoch, the lifecycle ticks, each host validates, the lifecycle pays
    /// the rewards. Each env's reward and episode end.
    fn step(&mut self, heads: &[i64]) -> Vec<(f64, Option<End>)> {
        let t = Instant::now();
        let d = self.life.decide(heads);
        self.clock.lap(LIFECYCLE, t);
        let (envs, life, clock, host_exec) = (&mut self.envs, &mut self.life, &self.clock, self.cfg.host_exec);
        let streams = self.streams.as_ref();
        one_thread(|| {
            let one_by_one = host_exec == HostExec::PerEnv && streams.is_none();
            for (e, env) in envs.iter_mut().enumerate() {
                env.refused += d.refused[e] as u64;
                env.fresh = false;
                env.env.operate(life.slots(e), d.surgeries[e]).expect("a legal action's surgery");
                if one_by_one {
                    env.env.train(d.actions[e].tempo).expect("a legal tempo");
                }
            }
            if !one_by_one {
                let tempos: Vec<usize> = d.actions.iter().map(|a| a.tempo).collect();
                let mut hosts: Vec<&mut MorphoEnv> = envs.iter_mut().map(|e| &mut e.env).collect();
                match streams {
                    Some(s) => s.train(&mut hosts, &tempos).expect("hosts trained on their streams"),
                    None => MorphoEnv::train_together(&mut hosts, &tempos).expect("legal tempos"),
                }
            }
            let t = Instant::now();
            life.tick();
            clock.lap(LIFECYCLE, t);
            for (e, env) in envs.iter_mut().enumerate() {
                env.env.settle(life.slots(e));
                env.env.measure();
            }
        });
        let t = Instant::now();
        let inputs: Vec<[f64; 4]> = self.envs.iter().map(|e| e.env.reward_inputs()).collect();
        let column = |i: usize| inputs.iter().map(|x| x[i]).collect();
        let rewards = self.life.rewards(&RewardInputs {
            accuracy: column(0),
            last: column(1),
            added: column(2),
            base: column(3),
            rent: self.cfg.rent,
            epochs: self.envs.iter().map(|e| e.env.config().epochs as f64).collect(),
        });
        self.clock.lap(REWARD, t);
        let outcome = |env: &mut Episodes, r| {
            let out = env.env.finish(r);
            env.end(out)
        };
        self.envs.iter_mut().zip(rewards).map(|(env, r)| outcome(env, r)).collect()
    }

    /// Writes every env's observation: its features, and the mask tables from the lifecycle.
    fn observe(&mut self, fields: &mut [FieldData]) {
        for (e, env) in self.envs.iter().enumerate() {
            env.features(fields, e);
        }
        let t = Instant::now();
        if let Some(FieldData::I64(mask)) = fields.get_mut(1) {
            self.life.masks(mask);
            if self.cfg.pin != HeadPin::Free {
                let per_env = mask.len() / self.envs.len().max(1);
                for table in mask.chunks_mut(per_env.max(1)) {
                    rules::pin(table, self.cfg.pin, SLOTS, Blueprint::ALL.len(), 1, 0);
                }
            }
        }
        self.clock.lap(LIFECYCLE, t);
    }
}

/// Runs `f` with one libtorch intra-op thread, then restores the caller's count: a host's
/// kernels round alike whichever thread or process steps its env (a worker thread starts
/// with every core, the trainer's thread with `--threads`). Threads `f` starts take one
/// too: libtorch reads the count as each thread first computes.
pub(crate) fn one_thread<T>(f: impl FnOnce() -> T) -> T {
    let outer = tch::get_num_threads();
    if outer != 1 {
        tch::set_num_threads(1);
    }
    let out = f();
    if outer != 1 {
        tch::set_num_threads(outer);
    }
    out
}

/// A batch of envs on one thread (the `vectorized` backend, and each worker's slice).
pub struct MorphoBatch {
    group: Group,
    spec: EnvSpec,
}

impl MorphoBatch {
    /// `count` envs whose global indices start at `first`.
    pub fn new(pool: Pool, count: usize, seed: u64, first: u64) -> Self {
        Self { group: Group::new(pool, count, seed, first), spec: env_spec() }
    }
}

impl BatchEnv for MorphoBatch {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn num_envs(&self) -> usize {
        self.group.envs.len()
    }

    fn reset(&mut self, out: &mut Observations) -> Result<(), EnvError> {
        (0..self.group.envs.len()).for_each(|e| self.group.reset(e));
        self.group.observe(&mut out.fields);
        Ok(())
    }

    fn step(&mut self, actions: &[i64], out: &mut StepBatch) -> Result<(), EnvError> {
        let (n, h) = (self.group.envs.len(), self.spec.heads.len());
        if actions.len() != n * h {
            return Err(EnvError(format!("{} actions for {n} envs of {h} heads", actions.len())));
        }
        out.episodes.clear();
        let results = self.group.step(actions);
        if results.iter().any(|r| r.1.is_some()) {
            self.group.observe(&mut out.final_obs.fields);
        }
        for (e, (reward, end)) in results.into_iter().enumerate() {
            out.reward[e] = reward as f32;
            out.truncated[e] = false;
            out.terminated[e] = end.is_some();
            if let Some((episode_return, length, _)) = end {
                out.episodes.push(EpisodeEnd { env: e, episode_return, length, terminated: true });
                self.group.reset(e);
            }
        }
        self.group.observe(&mut out.obs.fields);
        Ok(())
    }
}

/// One env on its own (the `sequential` backend): a group of one.
pub struct MorphoScalar {
    group: Group,
    spec: EnvSpec,
}

impl MorphoScalar {
    pub fn new(pool: Pool, seed: u64, index: u64) -> Self {
        Self { group: Group::new(pool, 1, seed, index), spec: env_spec() }
    }
}

impl ScalarEnv for MorphoScalar {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn reset(&mut self, obs: &mut [FieldData]) {
        self.group.reset(0);
        self.group.observe(obs);
    }

    /// The episode ends after its epochs (terminated: its last reward is all there is).
    fn step(&mut self, action: &[i64], obs: &mut [FieldData]) -> (f64, bool, bool) {
        let (reward, end) = self.group.step(action)[0];
        self.group.observe(obs);
        (reward, end.is_some(), false)
    }
}
