//! The morphogenetic env behind the seam: episodes one after another on a pool of tasks
//! ([`Episodes`]), as a batch on one thread ([`MorphoBatch`], the `vectorized` backend and
//! each worker's slice) and one at a time ([`MorphoScalar`], the per-env loop).
//!
//! The observation has two fields: the features ([`OBS`] f32) and the mask table, one row
//! of every head's flags per op ([`morpho::mask_table`]); the policy samples the op, then
//! the other heads under its row.

use super::blueprint::Blueprint;
use super::env::{MorphoConfig, MorphoEnv, OBS};
use super::host::SLOTS;
use crate::exec::parts::PartClock;
use hotlab_shared::env::{
    BatchEnv, EnvError, EnvSpec, EpisodeEnd, FieldData, FieldKind, FieldSpec, HeadSpec, Observations, ScalarEnv,
    StepBatch,
};
use hotlab_shared::glyphs::Task;
use hotlab_shared::morpho::{self, Action, OPS};
use hotlab_shared::rng::splitmix64;
use std::sync::Arc;

/// The env's observation fields and heads.
pub fn env_spec() -> EnvSpec {
    let heads = morpho::heads(SLOTS, Blueprint::ALL.len());
    let choices = heads.iter().map(|h| h.1).sum();
    EnvSpec {
        name: "morpho".into(),
        fields: vec![
            FieldSpec { name: "features".into(), shape: vec![OBS], kind: FieldKind::F32 },
            FieldSpec { name: "mask".into(), shape: vec![OPS.len(), choices], kind: FieldKind::I64 },
        ],
        heads: heads.iter().map(|&(name, n)| HeadSpec { name: name.into(), n }).collect(),
        masked: true,
    }
}

/// The tasks an env's episodes learn, how each env is set up, and the clock their
/// steps' parts are timed with.
#[derive(Clone)]
pub struct Pool {
    pub tasks: Arc<Vec<Task>>,
    pub cfg: MorphoConfig,
    pub clock: Arc<PartClock>,
}

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
        let env = one_thread(|| MorphoEnv::new(task, pool.cfg.clone(), draws).expect("a host on the CPU builds"));
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

    /// Whether the masks allow one index per head `a` now.
    pub fn legal(&self, a: &[i64]) -> bool {
        let table = self.env.mask_table();
        let width = table.len() / OPS.len();
        let Some(&op) = a.first().filter(|&&op| op >= 0 && (op as usize) < OPS.len()) else { return false };
        let row = &table[op as usize * width..(op as usize + 1) * width];
        let mut start = 0;
        env_spec().heads.iter().zip(a).all(|(h, &x)| {
            let ok = x >= 0 && (x as usize) < h.n && row[start + x as usize];
            start += h.n;
            ok
        })
    }

    /// One decision (outside the masks: a wait at the same tempo); the reward, and the
    /// episode's end (its return, length and score) when this step ended it.
    pub fn step(&mut self, a: &[i64]) -> (f64, Option<(f64, u32, f64)>) {
        let mut action = Action::from_heads(a);
        if !self.legal(a) {
            self.refused += 1;
            let tempo = action.tempo.min(morpho::TEMPOS.len() - 1);
            action = Action { tempo, ..Action::default() };
        }
        self.fresh = false;
        let out = one_thread(|| self.env.step(&action)).expect("a legal action steps");
        self.ret += out.reward;
        self.length += 1;
        let end = out.done.then(|| (self.ret, self.length, out.score.unwrap_or(out.accuracy)));
        (out.reward, end)
    }

    /// Writes the observation at row `e` of the two fields.
    pub fn observe(&self, fields: &mut [FieldData], e: usize) {
        if let [FieldData::F32(features), FieldData::I64(mask)] = fields {
            features[e * OBS..(e + 1) * OBS].copy_from_slice(&self.env.observe());
            let table = self.env.mask_table();
            let w = table.len();
            mask[e * w..(e + 1) * w].iter_mut().zip(table).for_each(|(m, t)| *m = t as i64);
        }
    }
}

/// Runs `f` with one libtorch intra-op thread, then restores the caller's count: a host's
/// kernels round alike whichever thread or process steps its env (a worker thread starts
/// with every core, the trainer's thread with `--threads`).
fn one_thread<T>(f: impl FnOnce() -> T) -> T {
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

/// A batch of envs stepped one after the other on one thread.
pub struct MorphoBatch {
    envs: Vec<Episodes>,
    spec: EnvSpec,
}

impl MorphoBatch {
    /// `count` envs whose global indices start at `first`.
    pub fn new(pool: Pool, count: usize, seed: u64, first: u64) -> Self {
        let envs = (0..count as u64).map(|i| Episodes::new(pool.clone(), seed, first + i)).collect();
        Self { envs, spec: env_spec() }
    }
}

impl BatchEnv for MorphoBatch {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn num_envs(&self) -> usize {
        self.envs.len()
    }

    fn reset(&mut self, out: &mut Observations) -> Result<(), EnvError> {
        for (e, env) in self.envs.iter_mut().enumerate() {
            env.reset();
            env.observe(&mut out.fields, e);
        }
        Ok(())
    }

    fn step(&mut self, actions: &[i64], out: &mut StepBatch) -> Result<(), EnvError> {
        let h = self.spec.heads.len();
        if actions.len() != self.envs.len() * h {
            return Err(EnvError(format!("{} actions for {} envs of {h} heads", actions.len(), self.envs.len())));
        }
        out.episodes.clear();
        for (e, env) in self.envs.iter_mut().enumerate() {
            let (reward, end) = env.step(&actions[e * h..(e + 1) * h]);
            out.reward[e] = reward as f32;
            out.truncated[e] = false;
            out.terminated[e] = end.is_some();
            if let Some((episode_return, length, _)) = end {
                env.observe(&mut out.final_obs.fields, e);
                out.episodes.push(EpisodeEnd { env: e, episode_return, length, terminated: true });
                env.reset();
            }
            env.observe(&mut out.obs.fields, e);
        }
        Ok(())
    }
}

/// One env on its own.
pub struct MorphoScalar {
    env: Episodes,
    spec: EnvSpec,
}

impl MorphoScalar {
    pub fn new(pool: Pool, seed: u64, index: u64) -> Self {
        Self { env: Episodes::new(pool, seed, index), spec: env_spec() }
    }
}

impl ScalarEnv for MorphoScalar {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn reset(&mut self, obs: &mut [FieldData]) {
        self.env.reset();
        self.env.observe(obs, 0);
    }

    /// The episode ends after its epochs (terminated: its last reward is all there is).
    fn step(&mut self, action: &[i64], obs: &mut [FieldData]) -> (f64, bool, bool) {
        let (reward, end) = self.env.step(action);
        self.env.observe(obs, 0);
        (reward, end.is_some(), false)
    }
}
