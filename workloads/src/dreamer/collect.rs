//! Experience for the replay buffer: the envs step on the spec's backend, each state is
//! drawn to a frame, and the actor acts on the world model's posterior state, which it
//! carries from step to step (random actions while the buffer prefills).

use super::behavior::Behavior;
use super::render::draw_all;
use super::render::PIXELS;
use super::replay::{Replay, Step};
use super::view;
use super::world::{State, WorldModel, ACTIONS};
use anyhow::{Context, Result};
use hotlab_core::counters::EnvCounters;
use hotlab_core::profile::Phase;
use hotlab_env::rng::HostRng;
use hotlab_env::{BatchEnv, Observations, StepBatch};
use hotlab_spec::RunSpec;
use hotlab_train::exec;
use hotlab_train::workload::{Iteration, Workload};
use std::sync::Arc;
use tch::{Device, Kind, Tensor};

pub struct Collector {
    workload: Arc<dyn Workload>,
    env: Box<dyn BatchEnv>,
    obs: Observations,
    out: StepBatch,
    /// Each env's current frame, and the final frames of episodes that just ended.
    frames: Vec<u8>,
    finals: Vec<u8>,
    /// Per env: the action that led to its current frame, and whether that frame starts an episode.
    prev_action: Vec<i64>,
    first: Vec<bool>,
    /// The actor's world-model state per env (None until the actor first acts).
    state: Option<State>,
    device: Device,
    /// Whether the envs' first frames are still to be stored.
    unstored: bool,
}

impl Collector {
    /// Starts the spec's backend and draws the envs' first frames.
    pub fn new(spec: &RunSpec, workload: Arc<dyn Workload>, device: Device) -> Result<Self> {
        let mut env = exec::host_backend(spec, workload.as_ref())?;
        let mut obs = Observations::zeros(env.spec(), spec.envs);
        env.reset(&mut obs).with_context(|| format!("env backend {}", spec.exec.backend))?;
        let out = StepBatch::new(env.spec(), spec.envs);
        let mut frames = Vec::new();
        draw_all(states(&obs), &mut frames);
        let n = spec.envs;
        Ok(Self {
            workload,
            env,
            obs,
            out,
            frames,
            finals: Vec::new(),
            prev_action: vec![0; n],
            first: vec![true; n],
            state: None,
            device,
            unstored: true,
        })
    }

    fn env_totals(&self) -> EnvCounters {
        self.env.counters().plus(&self.workload.env_counters())
    }

    /// Writes every env's current frame into the replay buffer (an episode's first, or the
    /// step just taken).
    fn store_current(&self, replay: &mut Replay, reward: &[f32], it: &mut Iteration<'_>) {
        let px = PIXELS as usize;
        let envs: Vec<usize> = (0..self.prev_action.len()).collect();
        let steps: Vec<Step> = envs
            .iter()
            .map(|&e| Step {
                frame: &self.frames[e * px..(e + 1) * px],
                prev_action: self.prev_action[e],
                reward: reward[e],
                cont: true,
                first: self.first[e],
            })
            .collect();
        replay.push(&envs, &steps, it.counters);
    }

    /// The actor's actions for the current frames (one forward for every env).
    fn act(&mut self, world: &WorldModel, behavior: &Behavior, it: &mut Iteration<'_>) -> Vec<i64> {
        let n = self.prev_action.len() as i64;
        if self.device != Device::Cpu {
            it.counters.h2d_copies += 3;
            it.counters.h2d_bytes += (self.frames.len() + 12 * n as usize) as u64;
            it.counters.host_syncs += 1;
        }
        let state = self.state.take().unwrap_or_else(|| world.initial(n, self.device));
        let (next, actions) = act_on_frames(world, behavior, &state, &self.frames, &self.first, &self.prev_action);
        self.state = Some(next);
        actions
    }

    /// `steps` env steps of every env into `replay`; random actions while `random` says.
    /// False when a stop request ended it part-way.
    pub fn collect(
        &mut self,
        steps: usize,
        models: (&WorldModel, &Behavior),
        random: &mut dyn FnMut(&Replay) -> bool,
        replay: &mut Replay,
        rng: &mut HostRng,
        it: &mut Iteration<'_>,
    ) -> Result<bool> {
        let envs = self.prev_action.len();
        let px = PIXELS as usize;
        if std::mem::take(&mut self.unstored) {
            self.store_current(replay, &vec![0.0; envs], it);
        }
        for _ in 0..steps {
            if it.stopped() {
                it.counters.set_env(&self.env_totals(), &[]); // CartPole's envs count nothing of their own
                return Ok(false);
            }
            let s = it.prof.start();
            let actions: Vec<i64> = if random(replay) {
                self.state = None; // the actor starts afresh after the prefill
                (0..envs).map(|_| (rng.next_u64() % ACTIONS as u64) as i64).collect()
            } else {
                self.act(models.0, models.1, it)
            };
            let s = it.prof.stop(Phase::POLICY_FORWARD, s);
            let s = if it.frames.due() {
                let model = self.state.as_ref().map(|state| (models.0, models.1, state));
                it.frames.send(view::frame(it.counters.env_steps, &self.frames[..px], model));
                it.prof.stop(Phase::PUBLISH, s)
            } else {
                s
            };
            let before = self.env_totals();
            self.env.step(&actions, &mut self.out).context("env backend")?;
            let after = self.env_totals();
            let s = it.prof.stop_env(
                after.worker_wait_s - before.worker_wait_s,
                &hotlab_train::exec::parts::since(&after.parts, &before.parts),
                s,
            );
            it.counters.env_steps += envs as u64;
            // The step's frames: an ended episode's last frame first, then the next one's first.
            std::mem::swap(&mut self.obs, &mut self.out.obs);
            draw_all(states(&self.obs), &mut self.frames);
            self.prev_action.copy_from_slice(&actions);
            self.first.iter_mut().for_each(|f| *f = false);
            if !self.out.episodes.is_empty() {
                draw_all(states(&self.out.final_obs), &mut self.finals);
                let ended: Vec<usize> = self.out.episodes.iter().map(|e| e.env).collect();
                let steps: Vec<Step> = ended
                    .iter()
                    .map(|&e| Step {
                        frame: &self.finals[e * px..(e + 1) * px],
                        prev_action: actions[e],
                        reward: self.out.reward[e],
                        cont: !self.out.terminated[e],
                        first: false,
                    })
                    .collect();
                replay.push(&ended, &steps, it.counters);
                for end in &self.out.episodes {
                    it.episodes.push(end.episode_return);
                    self.prev_action[end.env] = 0;
                    self.first[end.env] = true;
                }
            }
            let reward: Vec<f32> = (0..envs).map(|e| if self.first[e] { 0.0 } else { self.out.reward[e] }).collect();
            self.store_current(replay, &reward, it);
            it.prof.stop(Phase::ROLLOUT_STORE, s);
        }
        it.counters.set_env(&self.env_totals(), &[]); // CartPole's envs count nothing of their own
        Ok(true)
    }
}

/// The actor's step on a batch of frames: each env's state restarted where its frame is an
/// episode's first, advanced by the action that led to the frame, corrected by the frame;
/// then an action sampled from that posterior state. Returns the new state and the actions.
pub fn act_on_frames(
    world: &WorldModel,
    behavior: &Behavior,
    state: &State,
    frames: &[u8],
    first: &[bool],
    prev_action: &[i64],
) -> (State, Vec<i64>) {
    let device = world.p.flat.device();
    tch::no_grad(|| {
        let frames = Tensor::from_slice(frames).view([first.len() as i64, PIXELS]).to_device(device);
        let first: Vec<f32> = first.iter().map(|&f| f32::from(u8::from(f))).collect();
        let first = Tensor::from_slice(&first).to_device(device);
        let action = Tensor::from_slice(prev_action).to_device(device).one_hot(ACTIONS).to_kind(Kind::Float);
        let (next, _, _) = world.observe_step(state, &action, &world.encode(&frames), &first);
        let chosen = behavior.act(&next.feat(), false);
        (next, Vec::<i64>::try_from(chosen.to_device(Device::Cpu)).unwrap_or_default())
    })
}

/// The CartPole states `[envs × 4]` of a batch's observations.
fn states(obs: &Observations) -> &[f32] {
    obs.fields[0].as_f32().expect("CartPole's state is f32")
}
