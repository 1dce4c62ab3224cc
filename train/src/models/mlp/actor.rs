//! The MLP's rollout forward on host observations: libtorch ops (`eager`) or the native
//! forward (`fused`).

use super::host::{ActOut, FusedPolicy, Noise, NoiseRows};
use super::policy::ActorCritic;
use super::MlpAgent;
use crate::distribution;
use crate::exec::helper::Helper;
use crate::exec::transfer::{read_into, Eager, Mover};
use crate::ppo::{device_outputs, ActStep, Actor, ValueRows};
use crate::rollout::{OnDevice, Rollout};
use hotlab_core::counters::Counters;
use hotlab_core::profile::Phase;
use std::borrow::Cow;
use std::sync::Arc;
use std::time::Instant;
use tch::Tensor;

pub enum MlpActor {
    /// A libtorch forward on the device: observations go there (`--transfer`), actions come
    /// back (`--action-sync`); log-probs and values stay on the device in `Rollout::device`.
    Eager(Eager),
    /// The native forward on the host; nothing crosses to the device until the update.
    /// With a helper thread, a large batch's second half runs there on `twin`.
    Fused { policy: Box<FusedPolicy>, twin: Option<(Box<FusedPolicy>, Arc<Helper>)> },
}

/// Below this many envs a step is a few microseconds: handing half to another thread
/// would cost as much as it saves.
const SPLIT_ENVS: usize = 64;

impl Actor<MlpAgent> for MlpActor {
    fn act(&mut self, agent: &MlpAgent, rollout: &mut Rollout, step: ActStep<'_>) -> Instant {
        let ActStep { t, heads, rng, counters: c, prof, start } = step;
        let (envs, obs_dim) = (rollout.envs, rollout.obs_dim);
        match self {
            MlpActor::Fused { policy, twin } => {
                let dims = rollout.continuous;
                let slot = rollout.step_mut(t);
                let noise = Noise::draw(envs, heads.len(), dims, rng);
                match twin.take() {
                    Some((other, helper)) if envs >= SPLIT_ENVS => {
                        let half = envs / 2;
                        let theirs = noise.part(half, envs - half);
                        let (u, n) = (theirs.uniforms.to_vec(), theirs.normals.to_vec());
                        let obs = slot.obs[half * obs_dim..].to_vec();
                        let owned_heads = heads.to_vec();
                        let pending = helper.spawn(move || {
                            let mut other = other;
                            let rows = obs.len() / obs_dim;
                            let mut a = vec![0i64; rows * owned_heads.len()];
                            let mut real = vec![0f32; rows * dims];
                            let (mut lp, mut v) = (vec![0f32; rows], vec![0f32; rows]);
                            let out = ActOut { actions: &mut a, real: &mut real, log_probs: &mut lp, values: &mut v };
                            let noise = NoiseRows { uniforms: &u, normals: &n };
                            other.act_with(&obs, None, &owned_heads, noise, out);
                            (other, a, real, lp, v)
                        });
                        let (k, r) = (half * heads.len(), half * dims);
                        let out = ActOut {
                            actions: &mut slot.actions[..k],
                            real: &mut slot.real[..r],
                            log_probs: &mut slot.log_probs[..half],
                            values: &mut slot.values[..half],
                        };
                        policy.act_with(&slot.obs[..half * obs_dim], None, heads, noise.part(0, half), out);
                        let (other, a, real, lp, v) = pending.wait();
                        slot.actions[k..].copy_from_slice(&a);
                        slot.real[r..].copy_from_slice(&real);
                        slot.log_probs[half..].copy_from_slice(&lp);
                        slot.values[half..].copy_from_slice(&v);
                        *twin = Some((other, helper));
                    }
                    not_split => {
                        *twin = not_split;
                        let out = ActOut {
                            actions: slot.actions,
                            real: slot.real,
                            log_probs: slot.log_probs,
                            values: slot.values,
                        };
                        policy.act_with(slot.obs, None, heads, noise.part(0, envs), out);
                    }
                }
                prof.stop(Phase::POLICY_FORWARD, start)
            }
            MlpActor::Eager(io) => tch::no_grad(|| {
                let net = &agent.net;
                let obs = io.mover.obs_to_device(rollout.step_mut(t).obs, envs, obs_dim, c);
                let s = prof.stop(Phase::OBS_TRANSFER, start);
                let outputs = net.logits(&obs);
                let (actions, real, lp) = distribution::sample_outputs(&outputs, net.log_std(), heads);
                let values = net.value(&obs);
                let step = OnDevice {
                    inputs: &[&obs],
                    actions: &actions,
                    real: real.as_ref(),
                    log_probs: &lp,
                    values: &values,
                };
                rollout.record_on_device(t, step);
                let s = prof.stop(Phase::POLICY_FORWARD, s);
                rollout.step_mut(t).read_sampled(io, (&actions, real.as_ref()), c);
                prof.stop(Phase::ACTION_READBACK, s)
            }),
        }
    }

    fn values(&mut self, agent: &MlpAgent, rows: ValueRows<'_>, c: &mut Counters) -> Vec<f32> {
        let (x, w) = value_rows(rows);
        match self {
            MlpActor::Fused { policy, .. } => x.chunks_exact(w).map(|r| policy.value(r)).collect(),
            MlpActor::Eager(io) => eager_values(&agent.net, &io.mover, &x, w, c),
        }
    }

    fn sync_weights(&mut self, agent: &MlpAgent) {
        if let MlpActor::Fused { policy, twin } = self {
            let params = agent.net.host_params();
            policy.load(&params);
            if let Some((other, _)) = twin {
                other.load(&params);
            }
        }
    }

    fn finish(&mut self, rollout: &mut Rollout, c: &mut Counters) -> Option<(Tensor, Tensor)> {
        match self {
            MlpActor::Fused { .. } => None,
            MlpActor::Eager(_) => device_outputs(rollout, c),
        }
    }
}

/// The asked rows of the first field, as features, and the width of one.
pub fn value_rows(rows: ValueRows<'_>) -> (Cow<'_, [f32]>, usize) {
    match rows.obs.fields[0].features().expect("a features field") {
        Cow::Borrowed(x) => {
            let (x, w) = rows.of(x);
            (Cow::Borrowed(x), w)
        }
        Cow::Owned(x) => {
            let (x, w) = rows.of(&x);
            (Cow::Owned(x.to_vec()), w)
        }
    }
}

/// The critic's values of the observations `x` (rows of `w`) by libtorch ops, uploaded
/// through `mover` and read back in one copy.
pub fn eager_values(net: &ActorCritic, mover: &Mover, x: &[f32], w: usize, c: &mut Counters) -> Vec<f32> {
    let rows = x.len() / w;
    tch::no_grad(|| {
        let t = mover.upload_f32(x, &[rows as i64, w as i64], c);
        let mut out = vec![0f32; rows];
        read_into(&net.value(&t), &mut out, c);
        out
    })
}
