//! The training loop, top to bottom: rollout → GAE → PPO update, repeated.

use crate::adam::FlatAdam;
use crate::device;
use crate::distribution;
use crate::fused::{ActOut, FusedPolicy};
use crate::gae::{gae, GaeInput};
use crate::policy::{ActorCritic, Architecture};
use crate::ppo::{self, UpdateStats};
use crate::rollout::{upload, Rollout};
use anyhow::{bail, Result};
use hotlab_shared::cartpole::CartPoleBatch;
use hotlab_shared::env::{BatchEnv, FieldData, FieldKind, Observations, StepBatch};
use hotlab_shared::rng::HostRng;
use hotlab_shared::spec::{EnvName, Inference, RunSpec};
use serde::Serialize;
use std::collections::VecDeque;
use std::time::Instant;
use tch::{Device, Tensor};

/// What is known after each update (streamed to the progress bar and `metrics.jsonl`).
#[derive(Clone, Debug, Serialize)]
pub struct UpdateMetrics {
    pub update: u64,
    pub updates: u64,
    pub global_step: u64,
    pub wall_s: f64,
    pub sps: f64,
    pub episodes: u64,
    pub mean_return_last_100: Option<f64>,
    pub lr: f64,
    /// Seconds of this update's rollout (env steps, policy forward, GAE).
    pub rollout_s: f64,
    /// Seconds of this update's PPO epochs (upload included).
    pub update_s: f64,
    #[serde(flatten)]
    pub stats: UpdateStats,
}

/// The summary of a finished run (`hotlab train --json` prints it).
#[derive(Clone, Debug, Serialize)]
pub struct TrainReport {
    pub env: String,
    pub device: String,
    pub total_steps: u64,
    pub wall_s: f64,
    pub sps: f64,
    pub episodes: u64,
    pub mean_return_last_100: Option<f64>,
    pub updates: u64,
    /// libtorch intra-op threads used.
    pub threads: usize,
    /// The fully resolved spec.
    pub config: RunSpec,
}

/// A trained network and the run's summary.
pub struct Trained {
    pub net: ActorCritic,
    pub report: TrainReport,
}

/// Builds the env of a spec.
pub fn make_env(spec: &RunSpec) -> Box<dyn BatchEnv> {
    match spec.env {
        EnvName::Cartpole => Box::new(CartPoleBatch::new(spec.envs, spec.seed, 0)),
    }
}

/// The network shape for an env: one f32 observation field feeds the MLPs.
pub fn architecture(env: &dyn BatchEnv, hidden: &[usize]) -> Result<Architecture> {
    let spec = env.spec();
    match spec.fields.as_slice() {
        [field] if field.kind == FieldKind::F32 => {
            Ok(Architecture { obs_dim: field.numel(), hidden: hidden.to_vec(), logits: spec.total_choices() })
        }
        _ => bail!("env '{}' has observation fields the MLP policy cannot read", spec.name),
    }
}

fn f32_field(obs: &Observations) -> &[f32] {
    obs.fields[0].as_f32().expect("checked by architecture()")
}

/// The rollout policy: libtorch ops, or the native forward.
enum Actor {
    Eager,
    Fused(FusedPolicy),
}

impl Actor {
    /// Fills step `t` of `rollout` (observations are already there).
    fn act(&mut self, net: &ActorCritic, rollout: &mut Rollout, t: usize, heads: &[usize], rng: &mut HostRng) {
        let (envs, obs_dim) = (rollout.envs, rollout.obs_dim);
        let slot = rollout.step_mut(t);
        match self {
            Actor::Fused(policy) => policy.act(
                slot.obs,
                None,
                heads,
                rng,
                ActOut { actions: slot.actions, log_probs: slot.log_probs, values: slot.values },
            ),
            Actor::Eager => tch::no_grad(|| {
                let obs = upload(slot.obs, envs, obs_dim, net.device());
                let logits = net.logits(&obs);
                let actions = distribution::sample(&logits, None, heads);
                let (log_probs, _) = distribution::log_prob_and_entropy(&logits, None, heads, &actions);
                let values = net.value(&obs);
                read_into(&actions, slot.actions);
                read_into(&log_probs, slot.log_probs);
                read_into(&values, slot.values);
            }),
        }
    }

    /// Critic values of `rows` observations.
    fn values(&mut self, net: &ActorCritic, obs: &[f32], obs_dim: usize) -> Vec<f32> {
        match self {
            Actor::Fused(policy) => obs.chunks_exact(obs_dim).map(|row| policy.value(row)).collect(),
            Actor::Eager => tch::no_grad(|| {
                let t = upload(obs, obs.len() / obs_dim, obs_dim, net.device());
                Vec::<f32>::try_from(net.value(&t).to_device(Device::Cpu)).expect("f32 values")
            }),
        }
    }
}

fn read_into<T: tch::kind::Element + Copy>(t: &Tensor, out: &mut [T]) {
    let host = t.to_device(Device::Cpu).contiguous().view([-1]);
    host.copy_data(out, out.len());
}

/// Trains a policy; `observe` is called after every update.
pub fn train(spec: &RunSpec, observe: &mut dyn FnMut(&UpdateMetrics)) -> Result<Trained> {
    let start = Instant::now();
    spec.validate()?;
    crate::alloc::tune();
    let device = device::resolve(&spec.device)?;
    let threads = torch_threads(spec);
    tch::set_num_threads(threads as i32);
    tch::manual_seed(spec.seed as i64);
    let mut rng = HostRng::new(spec.seed);

    let mut env = make_env(spec);
    let heads: Vec<usize> = env.spec().heads.iter().map(|h| h.n).collect();
    let arch = architecture(env.as_ref(), &spec.hidden)?;
    let obs_dim = arch.obs_dim;
    let mut net = ActorCritic::new(arch.clone(), device);
    let mut opt = FlatAdam::new(&net.flat, 1e-5);
    let mut actor = match spec.inference {
        Inference::Eager => Actor::Eager,
        Inference::Fused => Actor::Fused(FusedPolicy::new(&arch, &net.host_params())),
    };

    let (envs, steps) = (spec.envs, spec.steps);
    let mut rollout = Rollout::new(steps, envs, obs_dim, heads.len());
    let mut obs = Observations::zeros(env.spec(), envs);
    env.reset(&mut obs);
    let mut out = StepBatch::new(env.spec(), envs);
    let mut recent: VecDeque<f64> = VecDeque::with_capacity(100);
    let mut episodes = 0u64;
    let updates = spec.updates();
    let mut global_step = 0u64;

    for update in 0..updates {
        // CleanRL anneals from lr at the first update towards 0 after the last one.
        let lr = if spec.anneal_lr { spec.lr * (1.0 - update as f64 / updates as f64) } else { spec.lr };
        if let Actor::Fused(policy) = &mut actor {
            policy.load(&net.host_params());
        }

        let rollout_start = Instant::now();
        for t in 0..steps {
            rollout.step_mut(t).obs.copy_from_slice(f32_field(&obs));
            actor.act(&net, &mut rollout, t, &heads, &mut rng);
            env.step(&rollout.actions[t * envs * heads.len()..(t + 1) * envs * heads.len()], &mut out);
            let row = t * envs..(t + 1) * envs;
            rollout.rewards[row.clone()].copy_from_slice(&out.reward);
            rollout.terminated[row.clone()].copy_from_slice(&out.terminated);
            rollout.truncated[row].copy_from_slice(&out.truncated);
            for end in &out.episodes {
                episodes += 1;
                if recent.len() == 100 {
                    recent.pop_front();
                }
                recent.push_back(end.episode_return);
                if !end.terminated {
                    let FieldData::F32(final_obs) = &end.final_obs[0] else { unreachable!("f32 field") };
                    rollout.final_values[t * envs + end.env] = actor.values(&net, final_obs, obs_dim)[0];
                }
            }
            std::mem::swap(&mut obs, &mut out.obs);
        }
        global_step += (envs * steps) as u64;

        let next_values = actor.values(&net, f32_field(&obs), obs_dim);
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
        let update_start = Instant::now();
        let rollout_s = (update_start - rollout_start).as_secs_f64();
        let batch = rollout.to_batch(&advantages, &returns, device);
        let stats = ppo::update(&mut net, &mut opt, &batch, &heads, spec, lr, &mut rng);
        if !stats.policy_loss.is_finite() || !stats.value_loss.is_finite() {
            bail!("training diverged: the loss is not finite at update {} of {updates}", update + 1);
        }

        let wall_s = start.elapsed().as_secs_f64();
        observe(&UpdateMetrics {
            update: update + 1,
            updates,
            global_step,
            wall_s,
            sps: global_step as f64 / wall_s,
            episodes,
            mean_return_last_100: mean(&recent),
            lr,
            rollout_s,
            update_s: update_start.elapsed().as_secs_f64(),
            stats,
        });
    }

    let wall_s = start.elapsed().as_secs_f64();
    let report = TrainReport {
        env: spec.env.as_str().into(),
        device: device::label(device),
        total_steps: global_step,
        wall_s,
        sps: global_step as f64 / wall_s,
        episodes,
        mean_return_last_100: mean(&recent),
        updates,
        threads,
        config: spec.clone(),
    };
    Ok(Trained { net, report })
}

/// libtorch threads: `--threads`, or for 0 one per core, except for small minibatches,
/// where a second thread only adds synchronization to ops too small to split (measured:
/// the same wall time at the cleanrl preset, twice the CPU time).
pub fn torch_threads(spec: &RunSpec) -> usize {
    match spec.threads {
        0 if spec.minibatch_size() < 1024 => 1,
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
}

fn mean(values: &VecDeque<f64>) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}
