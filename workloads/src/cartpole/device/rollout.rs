//! The rollout of the `device` backend: env state, observations, actions and the whole
//! rollout buffer stay in tensors on the trainer's device. Nothing is copied per step;
//! once per update the few `[T, N]` arrays GAE needs come to the host and the advantages
//! go back (a handful of bulk copies, counted).

use crate::cartpole::device::env::DeviceCartPole;
use crate::cartpole::device::graph::{Buffers, GraphRollout};
use hotlab_shared::counters::Counters;
use hotlab_shared::profile::Phase;
use hotlab_train::distribution;
use hotlab_train::exec::transfer::{read_into, Mover};
use hotlab_train::gae::{gae, GaeInput};
use hotlab_train::models::mlp::policy::ActorCritic;
use hotlab_train::profiler::Profiler;
use hotlab_train::rollout::Batch;
use tch::{Kind, Tensor};

pub struct DeviceRollout {
    steps: i64,
    envs: i64,
    obs: Tensor,
    actions: Tensor,
    log_probs: Tensor,
    values: Tensor,
    rewards: Tensor,
    terminated: Tensor,
    truncated: Tensor,
    final_obs: Tensor,
    done: Tensor,
    episode_return: Tensor,
    /// The observation the next step starts from.
    current: Tensor,
    /// `--inference graph`: the steps below replayed as one captured CUDA graph.
    graph: Option<GraphRollout>,
}

/// What a device rollout hands to the update.
pub struct Collected {
    pub batch: Batch,
    /// Returns of the episodes that ended, in (step, env) order.
    pub episode_returns: Vec<f64>,
}

impl DeviceRollout {
    pub fn new(env: &mut DeviceCartPole, steps: usize, obs_dim: usize, heads: usize) -> Self {
        let (t, n, d) = (steps as i64, env.envs as i64, obs_dim as i64);
        let dev = env.device();
        let f = |shape: &[i64]| Tensor::zeros(shape, (Kind::Float, dev));
        Self {
            steps: t,
            envs: n,
            obs: f(&[t, n, d]),
            actions: Tensor::zeros([t, n, heads as i64], (Kind::Int64, dev)),
            log_probs: f(&[t, n]),
            values: f(&[t, n]),
            rewards: f(&[t, n]),
            terminated: f(&[t, n]),
            truncated: f(&[t, n]),
            final_obs: f(&[t, n, d]),
            done: Tensor::zeros([t, n], (Kind::Bool, dev)),
            episode_return: Tensor::zeros([t, n], (Kind::Double, dev)),
            current: env.reset(),
            graph: None,
        }
    }

    /// Runs every rollout as a replay of a captured CUDA graph from now on.
    pub fn use_graph(&mut self, graph: GraphRollout) {
        self.graph = Some(graph);
    }

    /// The rollout arrays, `[T, N, …]` on the device.
    pub fn buffers(&self) -> Buffers<'_> {
        Buffers {
            obs: &self.obs,
            actions: &self.actions,
            log_probs: &self.log_probs,
            values: &self.values,
            rewards: &self.rewards,
            terminated: &self.terminated,
            truncated: &self.truncated,
            final_obs: &self.final_obs,
            done: &self.done,
            episode_return: &self.episode_return,
        }
    }

    /// One rollout as a graph replay: no host work per step, the env state stepped in place.
    fn replay(&mut self, env: &DeviceCartPole, net: &ActorCritic, prof: &mut Profiler, first_step: u64) {
        prof.set_step(first_step);
        let s = prof.start();
        let mut graph = self.graph.take().expect("graph mode");
        let steps = self.steps as usize;
        // A failed replay means a broken CUDA context: nothing sensible can continue.
        graph.run(steps, &net.flat, env, &self.buffers(), false).unwrap_or_else(|e| panic!("graph rollout: {e}"));
        self.graph = Some(graph);
        self.current = env.observations();
        prof.stop(Phase::POLICY_FORWARD, s);
    }

    /// The last step's observations `[envs, d]` and actions `[envs, heads]` (for a frame).
    pub fn last_step(&self) -> (Tensor, Tensor) {
        let t = self.steps - 1;
        (self.obs.get(t), self.actions.get(t))
    }

    /// Runs `steps` steps of every env with the policy, all on the device.
    #[allow(clippy::too_many_arguments)]
    pub fn collect(
        &mut self,
        env: &mut DeviceCartPole,
        net: &ActorCritic,
        heads: &[usize],
        gamma: f32,
        lambda: f32,
        mover: &Mover,
        c: &mut Counters,
        prof: &mut Profiler,
        first_step: u64,
    ) -> Collected {
        tch::no_grad(|| {
            // A graph replays every step at once; otherwise step by step below.
            let steps = if self.graph.is_some() {
                self.replay(env, net, prof, first_step);
                0
            } else {
                self.steps
            };
            for t in 0..steps {
                prof.set_step(first_step + t as u64);
                let s = prof.start();
                let logits = net.logits(&self.current);
                let actions = distribution::sample(&logits, None, heads);
                let (lp, _) = distribution::log_prob_and_entropy(&logits, None, heads, &actions);
                let value = net.value(&self.current);
                let s = prof.stop(Phase::POLICY_FORWARD, s);
                self.obs.get(t).copy_(&self.current);
                self.actions.get(t).copy_(&actions);
                self.log_probs.get(t).copy_(&lp);
                self.values.get(t).copy_(&value);
                let s = prof.stop(Phase::ROLLOUT_STORE, s);
                let step = env.step(&actions);
                let s = prof.stop(Phase::ENV_STEP, s);
                self.rewards.get(t).copy_(&step.reward);
                self.terminated.get(t).copy_(&step.terminated);
                self.truncated.get(t).copy_(&step.truncated);
                self.final_obs.get(t).copy_(&step.final_obs);
                self.done.get(t).copy_(&step.done);
                self.episode_return.get(t).copy_(&step.episode_return);
                self.current = step.obs;
                prof.stop(Phase::ROLLOUT_STORE, s);
            }
            let s = prof.start();
            c.env_steps += (self.steps * self.envs) as u64;
            let d = self.obs.size()[2];
            let final_values = net.value(&self.final_obs.view([-1, d]));
            let next_values = net.value(&self.current);

            let len = (self.steps * self.envs) as usize;
            let host = |t: &Tensor, c: &mut Counters| {
                let mut v = vec![0f32; t.numel()];
                read_into(&t.to_kind(Kind::Float), &mut v, c);
                v
            };
            let rewards = host(&self.rewards, c);
            let values = host(&self.values, c);
            let terminated: Vec<bool> = host(&self.terminated, c).iter().map(|&v| v != 0.0).collect();
            let truncated: Vec<bool> = host(&self.truncated, c).iter().map(|&v| v != 0.0).collect();
            let final_values = host(&final_values, c);
            let next_values = host(&next_values, c);
            let mut done = vec![false; len];
            read_into(&self.done, &mut done, c);
            let mut returns_at = vec![0f64; len];
            read_into(&self.episode_return, &mut returns_at, c);

            let (advantages, returns) = gae(
                &GaeInput {
                    envs: self.envs as usize,
                    rewards: &rewards,
                    values: &values,
                    terminated: &terminated,
                    truncated: &truncated,
                    final_values: &final_values,
                    next_values: &next_values,
                },
                gamma,
                lambda,
            );
            let b = len as i64;
            let batch = Batch {
                obs: self.obs.view([b, d]),
                extra: Vec::new(),
                actions: self.actions.view([b, -1]),
                log_probs: self.log_probs.view([b]),
                values: self.values.view([b]),
                advantages: mover.upload_f32(&advantages, &[b], c),
                returns: mover.upload_f32(&returns, &[b], c),
            };
            let episode_returns = done.iter().zip(&returns_at).filter(|(d, _)| **d).map(|(_, r)| *r).collect();
            prof.stop(Phase::GAE, s);
            Collected { batch, episode_returns }
        })
    }
}
