//! The rollout policy for host envs: libtorch ops (`eager`) or the native forward (`fused`).

use crate::distribution;
use crate::fused::{draw_uniforms, ActOut, FusedPolicy};
use crate::helper::Helper;
use crate::model::Model;
use crate::profiler::Profiler;
use crate::proof_fused::ProofHost;
use crate::rollout::Rollout;
use crate::transfer::{read_into, Mover};
use hotlab_shared::counters::Counters;
use hotlab_shared::env::{FieldData, Observations};
use hotlab_shared::profile::Phase;
use hotlab_shared::rng::HostRng;
use hotlab_shared::spec::ActionSync;
use std::sync::Arc;
use std::time::Instant;
use tch::Tensor;

pub enum Actor {
    /// A libtorch forward on the device: observations go there (`--transfer`), actions come
    /// back (`--action-sync`); log-probs and values stay on the device in `Rollout::device`.
    Eager { mover: Mover, sync: ActionSync },
    /// The native forward on the host; nothing crosses to the device until the update.
    /// With a helper thread, a large batch's second half runs there on `twin`.
    Fused { policy: Box<FusedPolicy>, twin: Option<(Box<FusedPolicy>, Arc<Helper>)> },
    /// The proof env's embedding policy as libtorch ops: its three index fields go to the
    /// device (`--transfer`, one copy per field or per env and field), actions come back.
    Proof { mover: Mover, sync: ActionSync },
    /// The proof env's embedding policy on the host ([`ProofHost`]).
    ProofFused { policy: Box<ProofHost> },
}

/// Below this many envs a step is a few microseconds: handing half to another thread
/// would cost as much as it saves.
const SPLIT_ENVS: usize = 64;

impl Actor {
    /// Fills step `t` of `rollout` (its observations are already there); profiles from
    /// `start` and returns the end of its last span.
    #[allow(clippy::too_many_arguments)]
    pub fn act(
        &mut self,
        model: &Model,
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
            Actor::Fused { policy, twin } => {
                let slot = rollout.step_mut(t);
                let uniforms = draw_uniforms(envs * heads.len(), rng);
                match twin.take() {
                    Some((other, helper)) if envs >= SPLIT_ENVS => {
                        let half = envs / 2;
                        let (obs, u) = (slot.obs[half * obs_dim..].to_vec(), uniforms[half * heads.len()..].to_vec());
                        let owned_heads = heads.to_vec();
                        let pending = helper.spawn(move || {
                            let mut other = other;
                            let n = obs.len() / obs_dim;
                            let (mut a, mut lp, mut v) =
                                (vec![0i64; n * owned_heads.len()], vec![0f32; n], vec![0f32; n]);
                            let out = ActOut { actions: &mut a, log_probs: &mut lp, values: &mut v };
                            other.act_with(&obs, None, &owned_heads, &u, out);
                            (other, a, lp, v)
                        });
                        let k = half * heads.len();
                        let out = ActOut {
                            actions: &mut slot.actions[..k],
                            log_probs: &mut slot.log_probs[..half],
                            values: &mut slot.values[..half],
                        };
                        policy.act_with(&slot.obs[..half * obs_dim], None, heads, &uniforms[..k], out);
                        let (other, a, lp, v) = pending.wait();
                        slot.actions[k..].copy_from_slice(&a);
                        slot.log_probs[half..].copy_from_slice(&lp);
                        slot.values[half..].copy_from_slice(&v);
                        *twin = Some((other, helper));
                    }
                    not_split => {
                        *twin = not_split;
                        let out = ActOut { actions: slot.actions, log_probs: slot.log_probs, values: slot.values };
                        policy.act_with(slot.obs, None, heads, &uniforms, out);
                    }
                }
                prof.stop(Phase::PolicyForward, start)
            }
            Actor::ProofFused { policy } => {
                let uniforms = draw_uniforms(envs, rng);
                let (fields, slot) = rollout.index_and_slot(t);
                let out = ActOut { actions: slot.actions, log_probs: slot.log_probs, values: slot.values };
                let lookup_s = policy.act(fields[0], fields[1], fields[2], &uniforms, out);
                prof.stop_split(Phase::PolicyForward, Phase::EmbeddingLookup, lookup_s, start)
            }
            Actor::Proof { mover, sync } => tch::no_grad(|| {
                let net = model.proof();
                let device_buffers = rollout.device_buffers(net.device());
                let (mut log_probs, mut values) = (device_buffers.0.get(t as i64), device_buffers.1.get(t as i64));
                let fields: Vec<Tensor> = (rollout.index_step(t).into_iter().enumerate())
                    .map(|(f, (rows, width))| mover.field_to_device(f, rows, envs, width, c))
                    .collect();
                let s = prof.stop(Phase::ObsTransfer, start);
                let out = net.forward(&fields[0], &fields[1]);
                let mask = fields[2].ne(0);
                let actions = distribution::sample(&out.logits, Some(&mask), heads);
                let (lp, _) = distribution::log_prob_and_entropy(&out.logits, Some(&mask), heads, &actions);
                log_probs.copy_(&lp);
                values.copy_(&out.value);
                let s = prof.stop_split(Phase::PolicyForward, Phase::EmbeddingLookup, out.lookup_s, s);
                mover.read_actions(&actions, rollout.step_mut(t).actions, *sync, c);
                prof.stop(Phase::ActionReadback, s)
            }),
            Actor::Eager { mover, sync } => tch::no_grad(|| {
                let net = model.mlp();
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

    /// Critic values of the `envs` observations in `obs`, or only of env `row`'s.
    pub fn values(
        &mut self,
        model: &Model,
        obs: &Observations,
        envs: usize,
        row: Option<usize>,
        c: &mut Counters,
    ) -> Vec<f32> {
        let (first, rows) = row.map_or((0, envs), |e| (e, 1));
        match self {
            Actor::Fused { policy, .. } => {
                let x = obs.fields[0].as_f32().expect("an f32 env");
                let w = x.len() / envs;
                x[first * w..(first + rows) * w].chunks_exact(w).map(|r| policy.value(r)).collect()
            }
            Actor::Eager { mover, .. } => tch::no_grad(|| {
                let x = obs.fields[0].as_f32().expect("an f32 env");
                let w = x.len() / envs;
                let t = mover.upload_f32(&x[first * w..(first + rows) * w], &[rows as i64, w as i64], c);
                let mut out = vec![0f32; rows];
                read_into(&model.mlp().value(&t), &mut out, c);
                out
            }),
            Actor::ProofFused { policy } => {
                let FieldData::I64(state) = &obs.fields[0] else { unreachable!("index fields") };
                let w = state.len() / envs;
                policy.values(&state[first * w..(first + rows) * w])
            }
            Actor::Proof { mover, .. } => tch::no_grad(|| {
                let fields: Vec<Tensor> = obs.fields[..2]
                    .iter()
                    .map(|f| {
                        let FieldData::I64(v) = f else { unreachable!("index fields") };
                        let w = v.len() / envs;
                        mover.upload_i64(&v[first * w..(first + rows) * w], &[rows as i64, w as i64], c)
                    })
                    .collect();
                let mut out = vec![0f32; rows];
                read_into(&model.proof().forward(&fields[0], &fields[1]).value, &mut out, c);
                out
            }),
        }
    }

    /// Re-reads the weights after an update (the fused forward keeps its own copy).
    pub fn sync_weights(&mut self, model: &Model) {
        match self {
            Actor::Fused { policy, twin } => {
                let params = model.mlp().host_params();
                policy.load(&params);
                if let Some((other, _)) = twin {
                    other.load(&params);
                }
            }
            Actor::ProofFused { policy } => policy.load(&model.proof().host_params()),
            Actor::Eager { .. } | Actor::Proof { .. } => {}
        }
    }

    /// The rollout's log-probs and values on the device, and the values on the host.
    pub fn finish(&self, rollout: &mut Rollout, c: &mut Counters) -> Option<(Tensor, Tensor)> {
        match self {
            Actor::Fused { .. } | Actor::ProofFused { .. } => None,
            Actor::Eager { .. } | Actor::Proof { .. } => {
                let (lp, v) = rollout.device.as_ref().map(|(a, b)| (a.shallow_clone(), b.shallow_clone()))?;
                read_into(&v, &mut rollout.values, c);
                Some((lp.view([-1]), v.view([-1])))
            }
        }
    }
}
