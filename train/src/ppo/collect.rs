//! A rollout from host envs, on any host backend: store the observations, act, step the
//! envs, record; at the end bootstrap, compute GAE and move the batch to the device.

use super::{Actor, Collect, CollectCtx};
use crate::exec::{self, parts};
use crate::gae::{gae, GaeInput};
use crate::rollout::{Batch, Rollout};
use crate::workload::{asked_to_stop, Workload};
use anyhow::{Context, Result};
use hotlab_shared::counters::EnvCounters;
use hotlab_shared::env::{BatchEnv, FieldKind, Observations, StepBatch};
use hotlab_shared::profile::Phase;
use hotlab_shared::spec::RunSpec;
use std::sync::Arc;

/// Host envs on the spec's backend, their current observations, the rollout buffer and
/// the actor that fills it.
pub struct HostCollector<A> {
    workload: Arc<dyn Workload>,
    env: Box<dyn BatchEnv>,
    obs: Observations,
    out: StepBatch,
    rollout: Rollout,
    actor: A,
}

/// The env backend's counters with what the envs counted themselves (in-process envs'
/// through their workload, worker processes' through the backend).
fn env_totals(env: &dyn BatchEnv, workload: &dyn Workload) -> EnvCounters {
    env.counters().plus(&workload.env_counters())
}

impl<A> HostCollector<A> {
    /// Starts the spec's backend and resets its envs; `actor` is made once they are up.
    pub fn new(spec: &RunSpec, workload: Arc<dyn Workload>, obs_dim: usize, actor: impl FnOnce() -> A) -> Result<Self> {
        let mut env = exec::host_backend(spec, workload.as_ref())?;
        let mut obs = Observations::zeros(env.spec(), spec.envs);
        env.reset(&mut obs).with_context(|| format!("env backend {}", spec.exec.backend))?;
        let actor = actor();
        let out = StepBatch::new(env.spec(), spec.envs);
        let env_spec = env.spec();
        let index: Vec<usize> =
            env_spec.fields.iter().filter(|f| f.kind == FieldKind::I64).map(|f| f.numel()).collect();
        let rollout = Rollout::new(spec.steps, spec.envs, obs_dim, &index, env_spec.heads.len());
        Ok(Self { workload, env, obs, out, rollout, actor })
    }
}

impl<P, A: Actor<P>> Collect<P> for HostCollector<A> {
    fn collect(&mut self, net: &P, cx: &mut CollectCtx<'_, '_>) -> Result<Option<Batch>> {
        let Self { workload, env, obs, out, rollout, actor } = self;
        actor.sync_weights(net);
        let (envs, h) = (rollout.envs, cx.heads.len());
        let it = &mut *cx.it;
        let (prof, c, stop) = (&mut *it.prof, &mut *it.counters, it.stop);
        for t in 0..rollout.steps {
            if asked_to_stop(stop) {
                // The env state moved on: what was stepped is counted, nothing is learned.
                c.set_env(&env_totals(&**env, &**workload), &cx.spec.env().counts());
                return Ok(None);
            }
            let step = cx.first_step + t as u64;
            prof.set_step(step);
            let s = prof.start();
            rollout.store_obs(t, obs);
            let s = prof.stop(Phase::ROLLOUT_STORE, s);
            let s = actor.act(net, rollout, t, cx.heads, cx.rng, c, prof, s);
            let actions = t * envs * h..(t + 1) * envs * h;
            let s = if it.frames.due() {
                if let Some(frame) = workload.frame(step, obs, &rollout.actions[actions.clone()]) {
                    it.frames.send(frame);
                }
                prof.stop(Phase::PUBLISH, s)
            } else {
                s
            };
            let before = env_totals(&**env, &**workload);
            env.step(&rollout.actions[actions], out)
                .with_context(|| format!("env backend {}", cx.spec.exec.backend))?;
            let after = env_totals(&**env, &**workload);
            let s = prof.stop_env(
                after.worker_wait_s - before.worker_wait_s,
                &parts::since(&after.parts, &before.parts),
                s,
            );
            c.env_steps += envs as u64;
            let row = t * envs..(t + 1) * envs;
            rollout.rewards[row.clone()].copy_from_slice(&out.reward);
            rollout.terminated[row.clone()].copy_from_slice(&out.terminated);
            rollout.truncated[row].copy_from_slice(&out.truncated);
            let s = prof.stop(Phase::ROLLOUT_STORE, s);
            if out.episodes.is_empty() {
                std::mem::swap(obs, &mut out.obs);
                continue;
            }
            for end in &out.episodes {
                it.episodes.push(end.episode_return);
                if !end.terminated {
                    // Truncated: GAE bootstraps from the value of the final observation.
                    rollout.final_values[t * envs + end.env] =
                        actor.values(net, &out.final_obs, envs, Some(end.env), c)[0];
                }
            }
            std::mem::swap(obs, &mut out.obs);
            prof.stop(Phase::GAE, s);
        }
        let s = prof.start();
        let next_values = actor.values(net, obs, envs, None, c);
        let on_device = actor.finish(rollout, c);
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
            cx.spec.ppo.gamma as f32,
            cx.spec.ppo.gae_lambda as f32,
        );
        let s = prof.stop(Phase::GAE, s);
        let batch = rollout.to_batch(&advantages, &returns, on_device, (cx.mover, cx.spec.exec.rollout_copy), c);
        prof.stop(Phase::OBS_TRANSFER, s);
        c.set_env(&env_totals(&**env, &**workload), &cx.spec.env().counts());
        Ok(Some(batch))
    }
}
