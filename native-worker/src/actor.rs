//! The rollout policy for host envs: libtorch ops (`eager`) or the native forward (`fused`).

use crate::distribution;
use crate::fused::{ActOut, FusedPolicy};
use crate::policy::ActorCritic;
use crate::profiler::Profiler;
use crate::rollout::Rollout;
use crate::transfer::{read_into, Mover};
use hotlab_shared::counters::Counters;
use hotlab_shared::profile::Phase;
use hotlab_shared::rng::HostRng;
use hotlab_shared::spec::ActionSync;
use std::time::Instant;
use tch::Tensor;

pub enum Actor {
    /// A libtorch forward on the device: observations go there (`--transfer`), actions come
    /// back (`--action-sync`); log-probs and values stay on the device in `Rollout::device`.
    Eager { mover: Mover, sync: ActionSync },
    /// The native forward on the host; nothing crosses to the device until the update.
    Fused(FusedPolicy),
}

impl Actor {
    /// Fills step `t` of `rollout` (its observations are already there); profiles from
    /// `start` and returns the end of its last span.
    #[allow(clippy::too_many_arguments)]
    pub fn act(
        &mut self,
        net: &ActorCritic,
        rollout: &mut Rollout,
        t: usize,
        heads: &[usize],
        rng: &mut HostRng,
        c: &mut Counters,
        prof: &mut Profiler,
        start: Instant,
    ) -> Instant {
        let (envs, obs_dim) = (rollout.envs, rollout.obs_dim);
        match self {
            Actor::Fused(policy) => {
                let slot = rollout.step_mut(t);
                policy.act(
                    slot.obs,
                    None,
                    heads,
                    rng,
                    ActOut { actions: slot.actions, log_probs: slot.log_probs, values: slot.values },
                );
                prof.stop(Phase::PolicyForward, start)
            }
            Actor::Eager { mover, sync } => tch::no_grad(|| {
                let device_buffers = rollout.device_buffers(net.device());
                let (mut log_probs, mut values) = (device_buffers.0.get(t as i64), device_buffers.1.get(t as i64));
                let slot = rollout.step_mut(t);
                let obs = mover.obs_to_device(slot.obs, envs, obs_dim, c);
                let s = prof.stop(Phase::ObsTransfer, start);
                let logits = net.logits(&obs);
                let actions = distribution::sample(&logits, None, heads);
                let (lp, _) = distribution::log_prob_and_entropy(&logits, None, heads, &actions);
                log_probs.copy_(&lp);
                values.copy_(&net.value(&obs));
                let s = prof.stop(Phase::PolicyForward, s);
                mover.read_actions(&actions, slot.actions, *sync, c);
                prof.stop(Phase::ActionReadback, s)
            }),
        }
    }

    /// Critic values of host observations (`rows × obs_dim`).
    pub fn values(&mut self, net: &ActorCritic, obs: &[f32], obs_dim: usize, c: &mut Counters) -> Vec<f32> {
        match self {
            Actor::Fused(policy) => obs.chunks_exact(obs_dim).map(|row| policy.value(row)).collect(),
            Actor::Eager { mover, .. } => tch::no_grad(|| {
                let rows = obs.len() / obs_dim;
                let t = mover.upload_f32(obs, &[rows as i64, obs_dim as i64], c);
                let mut out = vec![0f32; rows];
                read_into(&net.value(&t), &mut out, c);
                out
            }),
        }
    }

    /// Re-reads the weights after an update (the fused forward keeps its own copy).
    pub fn sync_weights(&mut self, net: &ActorCritic) {
        if let Actor::Fused(policy) = self {
            policy.load(&net.host_params());
        }
    }

    /// The rollout's log-probs and values on the device, and the values on the host.
    pub fn finish(&self, rollout: &mut Rollout, c: &mut Counters) -> Option<(Tensor, Tensor)> {
        match self {
            Actor::Fused(_) => None,
            Actor::Eager { .. } => {
                let (lp, v) = rollout.device.as_ref().map(|(a, b)| (a.shallow_clone(), b.shallow_clone()))?;
                read_into(&v, &mut rollout.values, c);
                Some((lp.view([-1]), v.view([-1])))
            }
        }
    }
}
