//! The rollout of the `device` backend: env state, observations, actions and the whole
//! rollout buffer stay in tensors on the trainer's device, and so does GAE (a CUDA kernel,
//! or tensor ops without one). Nothing is copied per step; once per update the returns of
//! the episodes that ended come to the host (one read, counted).

use crate::cartpole::device::env::DeviceCartPole;
use crate::cartpole::device::graph::{Buffers, GraphRollout};
use cudarc::driver::CudaFunction;
use hotlab_core::profile::Phase;
use hotlab_train::cuda::gpu::{ptr, Arg, Gpu};
use hotlab_train::distribution;
use hotlab_train::exec::transfer::read_into;
use hotlab_train::gae::{gae_tensors, GaeTensors};
use hotlab_train::models::mlp::policy::ActorCritic;
use hotlab_train::ppo::CollectCtx;
use hotlab_train::profiler::Profiler;
use hotlab_train::rollout::Batch;
use std::sync::Arc;
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
    /// On CUDA: GAE's kernel.
    gae_kernel: Option<(Arc<Gpu>, CudaFunction)>,
}

/// [`gae_tensors`] as one launch of the CUDA kernel `gae` (`f`), a thread per env, on
/// libtorch's stream; the tensors on `gpu`'s device. The host's results to the bit.
pub fn gae_kernel(
    gpu: &Gpu,
    f: &CudaFunction,
    x: &GaeTensors<'_>,
    gamma: f32,
    lambda: f32,
) -> Result<(Tensor, Tensor), String> {
    let (steps, envs) = (x.rewards.size()[0], x.rewards.size()[1]);
    let c = |t: &Tensor| t.to_kind(Kind::Float).contiguous();
    let inputs = [x.rewards, x.values, x.terminated, x.truncated, x.final_values, x.next_values].map(c);
    let (advantages, returns) = (inputs[0].empty_like(), inputs[0].empty_like());
    let mut args = vec![Arg::I32(envs as i32), Arg::I32(steps as i32), Arg::F32(gamma), Arg::F32(lambda)];
    args.extend(inputs.iter().chain([&advantages, &returns]).map(ptr));
    gpu.launch(f, &gpu.torch_stream, envs as usize, &args)?;
    Ok((advantages, returns))
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
            gae_kernel: None,
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

    /// GAE on the device: the CUDA kernel where there is one, else tensor ops; nothing
    /// comes to the host.
    fn advantages(&self, final_values: &Tensor, next_values: &Tensor, gamma: f32, lambda: f32) -> (Tensor, Tensor) {
        let x = GaeTensors {
            rewards: &self.rewards,
            values: &self.values,
            terminated: &self.terminated,
            truncated: &self.truncated,
            final_values,
            next_values,
        };
        match &self.gae_kernel {
            // A failed launch means a broken CUDA context: nothing sensible can continue.
            Some((gpu, f)) => gae_kernel(gpu, f, &x, gamma, lambda).unwrap_or_else(|e| panic!("gae: {e}")),
            None => gae_tensors(&x, gamma, lambda),
        }
    }

    /// Computes GAE with the CUDA kernel from now on.
    pub fn use_gae_kernel(&mut self, gpu: Arc<Gpu>) -> Result<(), String> {
        let f = gpu.function("gae")?;
        self.gae_kernel = Some((gpu, f));
        Ok(())
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

    /// Runs `steps` steps of every env with the policy, all on the device, at the run's
    /// γ and λ, counted and profiled in `cx`'s iteration.
    pub fn collect(&mut self, env: &mut DeviceCartPole, net: &ActorCritic, cx: &mut CollectCtx<'_, '_>) -> Collected {
        let (heads, first_step) = (cx.heads, cx.first_step);
        let (gamma, lambda) = (cx.spec.ppo.gamma as f32, cx.spec.ppo.gae_lambda as f32);
        let (c, prof) = (&mut *cx.it.counters, &mut *cx.it.prof);
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
            let final_values = net.value(&self.final_obs.view([-1, d])).view([self.steps, self.envs]);
            let next_values = net.value(&self.current).view([-1]);
            let (advantages, returns) = self.advantages(&final_values, &next_values, gamma, lambda);
            let b = self.steps * self.envs;
            let batch = Batch {
                obs: self.obs.view([b, d]),
                extra: Vec::new(),
                actions: self.actions.view([b, -1]),
                real_actions: None,
                log_probs: self.log_probs.view([b]),
                values: self.values.view([b]),
                advantages: advantages.view([b]),
                returns: returns.view([b]),
                memory: None,
            };
            // The returns of the episodes that ended, in one read (the rollout's one sync).
            let ended = self.episode_return.masked_select(&self.done);
            let mut episode_returns = vec![0f64; ended.numel()];
            read_into(&ended, &mut episode_returns, c);
            prof.stop(Phase::GAE, s);
            Collected { batch, episode_returns }
        })
    }
}
