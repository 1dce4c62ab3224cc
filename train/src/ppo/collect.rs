//! A rollout from host envs, on any host backend: store the observations, act, step the
//! envs, record; at the end bootstrap, compute GAE and move the batch to the device.

use super::{ActStep, Actor, Collect, CollectCtx, ValueRows};
use crate::error::RunError;
use crate::exec::{self, parts};
use crate::gae::{gae, GaeInput};
use crate::normalize::{Normalizers, ObsNorm};
use crate::rollout::{Batch, Rollout};
use crate::workload::{asked_to_stop, Workload};
use anyhow::{Context, Result};
use hotlab_core::choices::RolloutCopy;
use hotlab_core::counters::EnvCounters;
use hotlab_core::profile::Phase;
use hotlab_env::{Actions, BatchEnv, EnvSpec, FieldData, FieldKind, FieldSpec, Observations, StepBatch};
use hotlab_protocol::{Losses, PolicyMemory};
use hotlab_spec::RunSpec;
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
    /// `--obs-norm`, `--reward-norm`: what the policy sees and learns from.
    norm: Normalizers,
}

/// The env backend's counters with what the envs counted themselves (in-process envs'
/// through their workload, worker processes' through the backend).
fn env_totals(env: &dyn BatchEnv, workload: &dyn Workload) -> EnvCounters {
    env.counters().plus(&workload.env_counters())
}

impl<A> HostCollector<A> {
    /// Starts the spec's backend and resets its envs; `actor` is made once they are up.
    pub fn new(
        spec: &RunSpec,
        workload: Arc<dyn Workload>,
        obs_dim: usize,
        actor: impl FnOnce() -> A,
    ) -> Result<Self, RunError> {
        Self::open(spec, workload, Some(obs_dim), actor)
    }

    /// [`HostCollector::new`] for a policy that reads every leaf of a structured
    /// observation, each in its own form ([`Rollout::with_leaves`]).
    pub fn with_leaves(
        spec: &RunSpec,
        workload: Arc<dyn Workload>,
        actor: impl FnOnce() -> A,
    ) -> Result<Self, RunError> {
        Self::open(spec, workload, None, actor)
    }

    /// `obs_dim`: the features a policy reads, None for every leaf.
    fn open(
        spec: &RunSpec,
        workload: Arc<dyn Workload>,
        obs_dim: Option<usize>,
        actor: impl FnOnce() -> A,
    ) -> Result<Self, RunError> {
        let mut env = exec::host_backend(spec, workload.as_ref())?;
        let mut norm = Normalizers::for_run(spec, env.spec())?;
        let mut obs = Observations::zeros(env.spec(), spec.envs);
        env.reset(&mut obs).with_context(|| format!("env backend {}", spec.exec.backend))?;
        norm.reset(&mut obs);
        let actor = actor();
        let out = StepBatch::new(env.spec(), spec.envs);
        let env_spec = env.spec();
        let index: Vec<usize> =
            env_spec.fields.iter().filter(|f| f.kind == FieldKind::I64).map(|f| f.numel()).collect();
        let (heads, continuous) = (env_spec.heads.len(), env_spec.continuous);
        let keep = spec.exec.rollout_copy == RolloutCopy::Kept;
        let rollout = match obs_dim {
            Some(obs_dim) => {
                // A policy that reads no features (`obs_dim` 0) reads an image's bytes, if there is one.
                let bytes = match env_spec.fields.as_slice() {
                    [f] if obs_dim == 0 && f.kind.is_bytes() => f.numel(),
                    _ => 0,
                };
                Rollout::new(spec.steps, spec.envs, (obs_dim, bytes), &index, (heads, continuous))
            }
            None => {
                let width = |bytes: bool| -> usize {
                    let leaves = env_spec.fields.iter().filter(|f| f.kind != FieldKind::I64);
                    leaves.filter(|f| f.kind.is_bytes() == bytes).map(|f| f.numel()).sum()
                };
                Rollout::new(spec.steps, spec.envs, (width(false), width(true)), &index, (heads, continuous))
                    .with_leaves()
            }
        };
        let rollout = rollout.keeping(keep);
        let device = exec::device::resolve(&spec.device)?;
        if let tch::Device::Cuda(ordinal) = device {
            let free = crate::cuda::gpu::memory(ordinal).map(|(used, total)| total.saturating_sub(used));
            if let Some(free) = free {
                rollout.check_room(spec, free)?;
            }
        }
        Ok(Self { workload, env, obs, out, rollout, actor, norm })
    }
}

impl<P, A: Actor<P>> Collect<P> for HostCollector<A> {
    fn obs_norm(&self) -> Option<ObsNorm> {
        self.norm.obs.clone()
    }

    fn figures(&self, out: &mut Losses) {
        self.norm.figures(out);
    }

    fn collect(&mut self, net: &P, cx: &mut CollectCtx<'_, '_>) -> Result<Option<Batch>> {
        let Self { workload, env, obs, out, rollout, actor, norm } = self;
        actor.sync_weights(net);
        let (envs, h, k) = (rollout.envs, cx.heads.len(), rollout.continuous);
        let it = &mut *cx.it;
        let (prof, c, stop) = (&mut *it.prof, &mut *it.counters, it.stop);
        actor.watch(it.frames.watched());
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
            let s = actor.act(net, rollout, ActStep { t, heads: cx.heads, rng: cx.rng, counters: c, prof, start: s });
            let actions = Actions {
                index: &rollout.actions[t * envs * h..(t + 1) * envs * h],
                real: &rollout.real[t * envs * k..(t + 1) * envs * k],
            };
            let s = if it.frames.due() {
                if let Some(mut frame) = workload.frame(step, obs, actions) {
                    if let Some(memory) = actor.shown(c) {
                        frame.data.insert(PolicyMemory::KEY.into(), serde_json::to_value(memory).unwrap_or_default());
                    }
                    it.frames.send(frame);
                }
                prof.stop(Phase::PUBLISH, s)
            } else {
                s
            };
            let before = env_totals(&**env, &**workload);
            env.step_actions(actions, out).with_context(|| format!("env backend {}", cx.spec.exec.backend))?;
            check_finite(env.spec(), out, step)?;
            let after = env_totals(&**env, &**workload);
            let s = prof.stop_env(
                after.worker_wait_s - before.worker_wait_s,
                &parts::since(&after.parts, &before.parts),
                s,
            );
            let s = if norm.any() {
                norm.step(out);
                prof.stop(Phase::NORMALIZE, s)
            } else {
                s
            };
            c.env_steps += envs as u64;
            let row = t * envs..(t + 1) * envs;
            rollout.rewards[row.clone()].copy_from_slice(&out.reward);
            rollout.terminated[row.clone()].copy_from_slice(&out.terminated);
            rollout.truncated[row].copy_from_slice(&out.truncated);
            let s = prof.stop(Phase::ROLLOUT_STORE, s);
            for end in &out.episodes {
                it.episodes.push(end.episode_return);
            }
            if !out.truncated.contains(&true) {
                std::mem::swap(obs, &mut out.obs);
                continue;
            }
            for e in (0..envs).filter(|&e| out.truncated[e] && !out.terminated[e]) {
                // Truncated: GAE bootstraps from the value of the final observation.
                rollout.final_values[t * envs + e] =
                    actor.values(net, ValueRows { obs: &out.final_obs, envs, row: Some(e) }, c)[0];
            }
            std::mem::swap(obs, &mut out.obs);
            prof.stop(Phase::GAE, s);
        }
        let s = prof.start();
        let on_device = actor.finish(rollout, c);
        let next_values = actor.values(net, ValueRows { obs, envs, row: None }, c);
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
        let mut batch = rollout.to_batch(&advantages, &returns, on_device, (cx.mover, cx.spec.exec.rollout_copy), c);
        batch.memory = rollout.memory.take();
        prof.stop(Phase::OBS_TRANSFER, s);
        c.set_env(&env_totals(&**env, &**workload), &cx.spec.env().counts());
        Ok(Some(batch))
    }
}

/// Fails a step whose rewards or observations are not finite, naming the env, the step
/// and the field: a NaN would otherwise reach the loss and end the run as diverged, far
/// from its cause. What was recorded before the step is kept.
fn check_finite(spec: &EnvSpec, out: &StepBatch, step: u64) -> Result<()> {
    if let Some(e) = out.reward.iter().position(|r| !r.is_finite()) {
        anyhow::bail!("env {e} of {} returned a non-finite reward ({}) at step {step}", spec.name, out.reward[e]);
    }
    let fail = |what: &str, field: &FieldSpec, e: usize, i: usize, v: f32| {
        anyhow::anyhow!(
            "env {e} of {} returned a non-finite {what} ({v} in field '{}', element {i}) at step {step}",
            spec.name,
            field.name
        )
    };
    for (f, field) in spec.fields.iter().enumerate() {
        let width = field.numel().max(1);
        if let (false, FieldData::I64(values)) = (field.classes.is_empty(), &out.obs.fields[f]) {
            let bad = values.iter().enumerate().find(|&(i, &v)| !(0..field.classes[i % width] as i64).contains(&v));
            if let Some((i, &v)) = bad {
                anyhow::bail!(
                    "env {} of {} returned {v} in its leaf '{}' (element {}), outside its space's {} choices, at step {step}",
                    i / width,
                    spec.name,
                    field.name,
                    i % width,
                    field.classes[i % width]
                );
            }
        }
        if let FieldData::F32(values) = &out.obs.fields[f] {
            if let Some(i) = values.iter().position(|v| !v.is_finite()) {
                return Err(fail("observation", field, i / width, i % width, values[i]));
            }
        }
        // Only the rows of envs that ended hold a final observation.
        if let FieldData::F32(values) = &out.final_obs.fields[f] {
            for e in out.ends() {
                let row = &values[e * width..(e + 1) * width];
                if let Some(i) = row.iter().position(|v| !v.is_finite()) {
                    return Err(fail("final observation", field, e, i, row[i]));
                }
            }
        }
    }
    Ok(())
}
