//! The PPO update, as CleanRL's `ppo.py` defines it: clipped surrogate objective,
//! clipped value loss, entropy bonus, per-minibatch advantage normalization, global
//! gradient-norm clip, Adam.

use crate::adam::FlatAdam;
use crate::distribution;
use crate::helper::Helper;
use crate::kernels;
use crate::policy::ActorCritic;
use crate::policy::Mlp;
use crate::ppo_grad;
use crate::ppo_grad_host;
use crate::precision::Precision;
use crate::profiler::Profiler;
use crate::proof_grad::{ProofGrad, ProofRows};
use crate::proof_policy::ProofNet;
use crate::rollout::Batch;
use crate::telemetry::Telemetry;
use hotlab_shared::counters::Counters;
use hotlab_shared::profile::Phase;
use hotlab_shared::rng::HostRng;
use hotlab_shared::spec::RunSpec;
use serde::Serialize;
use tch::{Kind, Tensor};

/// Loss statistics of an update's last minibatch (what CleanRL logs).
#[derive(Clone, Debug, Default, Serialize)]
pub struct UpdateStats {
    pub policy_loss: f64,
    pub value_loss: f64,
    pub entropy: f64,
    pub approx_kl: f64,
    pub clip_fraction: f64,
    /// The fp16 loss scale after this update (fp16 only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loss_scale: Option<f64>,
    /// Steps the fp16 scaler has skipped so far (inf/NaN gradients).
    pub skipped_steps: u64,
}

/// The loss of one minibatch (the definition, differentiated by autograd; the update
/// uses its hand-written gradient, [`ppo_grad`], checked against it), and with `want_stats` its `[pg, v, entropy, approx_kl,
/// clipfrac]` (only the last minibatch's are reported: at CleanRL's sizes every op counts).
pub fn minibatch_loss(
    net: &ActorCritic,
    mb: &Batch,
    heads: &[usize],
    spec: &RunSpec,
    want_stats: bool,
) -> (Tensor, Option<Tensor>) {
    loss_from(&net.logits(&mb.obs), &net.value(&mb.obs), None, mb, heads, spec, want_stats)
}

/// [`minibatch_loss`] from a forward's logits (masked by `mask`) and values.
pub fn loss_from(
    logits: &Tensor,
    value: &Tensor,
    mask: Option<&Tensor>,
    mb: &Batch,
    heads: &[usize],
    spec: &RunSpec,
    want_stats: bool,
) -> (Tensor, Option<Tensor>) {
    let (new_log_prob, entropy) = distribution::log_prob_and_entropy(logits, mask, heads, &mb.actions);
    let log_ratio = new_log_prob - &mb.log_probs;
    let ratio = log_ratio.exp();

    let adv = &mb.advantages;
    let adv = (adv - adv.mean(Kind::Float)) / (adv.std(true) + 1e-8);
    let pg1 = -&adv * &ratio;
    let pg2 = -&adv * ratio.clamp(1.0 - spec.clip, 1.0 + spec.clip);
    let pg_loss = pg1.maximum(&pg2).mean(Kind::Float);

    let v_unclipped = (value - &mb.returns).square();
    let v_clipped = &mb.values + (value - &mb.values).clamp(-spec.clip, spec.clip);
    let v_loss = v_unclipped.maximum(&(v_clipped - &mb.returns).square()).mean(Kind::Float) * 0.5;

    let entropy = entropy.mean(Kind::Float);
    let loss = &pg_loss - &entropy * spec.ent_coef + &v_loss * spec.vf_coef;

    let stats = want_stats.then(|| {
        tch::no_grad(|| {
            let approx_kl = ((&ratio - 1.0) - &log_ratio).mean(Kind::Float);
            let clip_frac = (&ratio - 1.0).abs().gt(spec.clip).to_kind(Kind::Float).mean(Kind::Float);
            Tensor::stack(&[pg_loss.detach(), v_loss.detach(), entropy.detach(), approx_kl, clip_frac], 0)
        })
    });
    (loss, stats)
}

/// What an update needs besides the network and the batch.
pub struct UpdateCtx<'a> {
    pub spec: &'a RunSpec,
    pub heads: &'a [usize],
    pub lr: f64,
    pub precision: &'a mut Precision,
    /// Set to record the last minibatch's per-parameter squared gradient norms (before clipping).
    pub telemetry: Option<&'a Telemetry>,
    /// A thread for the critic on the CPU path ([`ppo_grad_host`]); without it the
    /// actor and the critic run one after the other.
    pub helper: Option<&'a Helper>,
}

/// Runs `epochs × minibatches` gradient steps on one rollout; returns the last
/// minibatch's statistics and, when asked, its squared gradient norms.
pub fn update(
    net: &mut ActorCritic,
    opt: &mut FlatAdam,
    batch: &Batch,
    ctx: UpdateCtx<'_>,
    rng: &mut HostRng,
    prof: &mut Profiler,
    c: &mut Counters,
) -> (UpdateStats, Option<Tensor>) {
    let spec = ctx.spec;
    let size = spec.batch_size();
    let mb_size = spec.minibatch_size() as i64;
    let mut order: Vec<i64> = (0..size as i64).collect();
    let (mut last_stats, mut norms) = (None, None);
    let kind = ctx.precision.kind;
    // The CPU in fp32 takes the host path: host loss heads, actor ∥ critic.
    let host = net.device() == tch::Device::Cpu && kind == Kind::Float && ctx.precision.scaler.is_none();
    let (actor, mut critic) = (net.network(false), Some(net.network(true)));
    let host_epoch = host.then(|| batch.empty_like());
    for epoch in 0..spec.epochs {
        rng.shuffle(&mut order);
        // One gather per field per epoch; minibatches are then contiguous views.
        let shuffled = match &host_epoch {
            Some(out) if batch.select_host(&order, out) => out.shallow_clone(),
            _ => batch.select(&Tensor::from_slice(&order).to_device(net.device())),
        };
        let advantages = match host {
            true => ppo_grad_host::normalize_per_minibatch(&shuffled.advantages, spec.minibatches),
            false => ppo_grad::normalize_per_minibatch(&shuffled.advantages, spec.minibatches as i64),
        };
        for m in 0..spec.minibatches as i64 {
            let mb = shuffled.rows(m * mb_size, mb_size);
            let adv = advantages.narrow(0, m * mb_size, mb_size);
            let last = epoch + 1 == spec.epochs && m + 1 == spec.minibatches as i64;
            let s = prof.start();
            let s = if host {
                let c = critic.take().expect("the critic is back after each minibatch");
                let (stats, forward_share, c) = host_minibatch(&actor, c, &mb, &adv, ctx.heads, spec, ctx.helper);
                critic = Some(c);
                if last {
                    last_stats = Some(stats);
                }
                let wall = s.elapsed().as_secs_f64();
                prof.stop_split(Phase::Backward, Phase::UpdateForward, wall * forward_share, s)
            } else {
                let scale = ctx.precision.scaler.as_ref().map_or(1.0, |s| s.scale);
                let grad = ppo_grad::loss_grad(net, &mb, &adv, ctx.heads, spec, kind, scale, last);
                let s = prof.stop(Phase::UpdateForward, s);
                grad.backward(net, kind);
                if let Some(stats) = grad.stats {
                    last_stats = Some(Vec::<f64>::try_from(stats.to_kind(Kind::Double)).unwrap_or_default());
                }
                prof.stop(Phase::Backward, s)
            };
            if let Some(scaler) = ctx.precision.scaler.as_mut() {
                c.host_syncs += 1; // the scaler's inf check
                if !scaler.unscale(&mut net.flat_grad) {
                    prof.stop(Phase::Optimizer, s);
                    continue;
                }
            }
            let s = match (last, ctx.telemetry) {
                (true, Some(t)) => {
                    norms = Some(t.squared_norms(&net.flat_grad));
                    prof.stop(Phase::Telemetry, s)
                }
                _ => s,
            };
            clip_grad_norm(&mut net.flat_grad, spec.max_grad_norm);
            opt.step(&mut net.flat, &net.flat_grad, ctx.lr);
            prof.stop(Phase::Optimizer, s);
        }
    }
    let s = last_stats.expect("at least one minibatch");
    let stats = UpdateStats {
        policy_loss: s[0],
        value_loss: s[1],
        entropy: s[2],
        approx_kl: s[3],
        clip_fraction: s[4],
        loss_scale: ctx.precision.scaler.as_ref().map(|s| s.scale),
        skipped_steps: ctx.precision.scaler.as_ref().map_or(0, |s| s.skipped),
    };
    (stats, norms)
}

/// The proof policy's update: the same loss and epochs; on the CPU the native forward
/// and hand-written backward of [`ProofGrad`], elsewhere libtorch ops and autograd. The
/// embedding lookups are timed as their own phase.
pub fn update_proof(
    net: &mut ProofNet,
    opt: &mut FlatAdam,
    batch: &Batch,
    ctx: UpdateCtx<'_>,
    rng: &mut HostRng,
    prof: &mut Profiler,
) -> (UpdateStats, Option<Tensor>) {
    let spec = ctx.spec;
    let mb_size = spec.minibatch_size() as i64;
    let mut order: Vec<i64> = (0..spec.batch_size() as i64).collect();
    let (mut last_stats, mut norms) = (None, None);
    let host = net.device() == tch::Device::Cpu && kernels::is_host_f32(&net.flat);
    let mut grad_state = host.then(|| ProofGrad::new(net.arch.clone(), &net.host_params()));
    let mut gathered = Gathered::default();
    for epoch in 0..spec.epochs {
        rng.shuffle(&mut order);
        // On the host the three index fields are read in place at each minibatch's rows
        // (they are most of the batch's bytes); only the per-row scalars are gathered.
        let shuffled = match host {
            true => {
                // A minibatch's rows in memory order: the same minibatch (the loss is a
                // mean over its rows), read with far fewer cache misses.
                order.chunks_mut(mb_size as usize).for_each(|mb| mb.sort_unstable());
                gathered.fill(batch, &order, spec.minibatches);
                None
            }
            false => Some(batch.select(&Tensor::from_slice(&order).to_device(net.device()))),
        };
        for m in 0..spec.minibatches as i64 {
            let last = epoch + 1 == spec.epochs && m + 1 == spec.minibatches as i64;
            let s = prof.start();
            let s = match (&mut grad_state, &shuffled) {
                (Some(pg), None) => {
                    let rows = (m * mb_size) as usize..((m + 1) * mb_size) as usize;
                    // SAFETY: the batch's tensors and the weights are only read here, and
                    // the flat gradient is written by `backward` alone.
                    let (rows, flat, grad) = unsafe {
                        let rows = ProofRows {
                            state: kernels::host_i64(&batch.obs),
                            succ: kernels::host_i64(&batch.extra[0]),
                            mask: kernels::host_i64(&batch.extra[1]),
                            index: &order[rows.clone()],
                            actions: &gathered.actions[rows.clone()],
                            old_log_probs: &gathered.log_probs[rows.clone()],
                            advantages: &gathered.advantages[rows.clone()],
                            returns: &gathered.returns[rows.clone()],
                            old_values: &gathered.values[rows],
                        };
                        (rows, kernels::host(&net.flat), kernels::host_mut(&net.flat_grad))
                    };
                    let (stats, lookup_s) = pg.forward(flat, rows, spec);
                    if last {
                        last_stats = Some(stats.to_vec());
                    }
                    let s = prof.stop_split(Phase::UpdateForward, Phase::EmbeddingLookup, lookup_s, s);
                    pg.backward(flat, rows, grad);
                    prof.stop(Phase::Backward, s)
                }
                (_, shuffled) => {
                    let mb = shuffled.as_ref().expect("a shuffled batch off the host path").rows(m * mb_size, mb_size);
                    net.zero_grad();
                    let out = net.forward(&mb.obs, &mb.extra[0]);
                    let mask = mb.extra[1].ne(0);
                    let (loss, stats) = loss_from(&out.logits, &out.value, Some(&mask), &mb, ctx.heads, spec, last);
                    let s = prof.stop_split(Phase::UpdateForward, Phase::EmbeddingLookup, out.lookup_s, s);
                    loss.backward();
                    if let Some(stats) = stats {
                        last_stats = Some(Vec::<f64>::try_from(stats.to_kind(Kind::Double)).unwrap_or_default());
                    }
                    prof.stop(Phase::Backward, s)
                }
            };
            let s = match (last, ctx.telemetry) {
                (true, Some(t)) => {
                    norms = Some(t.squared_norms(&net.flat_grad));
                    prof.stop(Phase::Telemetry, s)
                }
                _ => s,
            };
            clip_grad_norm(&mut net.flat_grad, spec.max_grad_norm);
            opt.step(&mut net.flat, &net.flat_grad, ctx.lr);
            prof.stop(Phase::Optimizer, s);
        }
    }
    let s = last_stats.expect("at least one minibatch");
    let stats = UpdateStats {
        policy_loss: s[0],
        value_loss: s[1],
        entropy: s[2],
        approx_kl: s[3],
        clip_fraction: s[4],
        loss_scale: None,
        skipped_steps: 0,
    };
    (stats, norms)
}

/// An epoch's per-row scalars in shuffled order, advantages normalized per minibatch.
#[derive(Default)]
struct Gathered {
    actions: Vec<i64>,
    log_probs: Vec<f32>,
    values: Vec<f32>,
    returns: Vec<f32>,
    advantages: Vec<f32>,
}

impl Gathered {
    fn fill(&mut self, batch: &Batch, order: &[i64], minibatches: usize) {
        // SAFETY: the batch's host tensors are only read while the update runs.
        let (a, lp, v, r, adv) = unsafe {
            (
                kernels::host_i64(&batch.actions),
                kernels::host(&batch.log_probs),
                kernels::host(&batch.values),
                kernels::host(&batch.returns),
                kernels::host(&batch.advantages),
            )
        };
        let pick = |src: &[f32], dst: &mut Vec<f32>| {
            dst.clear();
            dst.extend(order.iter().map(|&i| src[i as usize]));
        };
        self.actions.clear();
        self.actions.extend(order.iter().map(|&i| a[i as usize]));
        pick(lp, &mut self.log_probs);
        pick(v, &mut self.values);
        pick(r, &mut self.returns);
        let mut raw = Vec::new();
        pick(adv, &mut raw);
        self.advantages.resize(raw.len(), 0.0);
        ppo_grad_host::normalize_blocks(&raw, minibatches, &mut self.advantages);
    }
}

/// One minibatch on the host path: the actor's and the critic's forward, head gradient
/// and backward, the critic's on the helper thread when there is one; returns the loss
/// statistics, the share of the time that went to the forward, and the critic back.
fn host_minibatch(
    actor: &Mlp,
    critic: Mlp,
    mb: &Batch,
    adv: &Tensor,
    heads: &[usize],
    spec: &RunSpec,
    helper: Option<&Helper>,
) -> (Vec<f64>, f64, Mlp) {
    use ppo_grad_host::{actor_step, critic_step};
    let (p, v) = ppo_grad_host::split_inputs(mb, adv, spec);
    let ((ps, at), (vs, ct), critic) = match helper {
        Some(helper) => {
            let pending = helper.spawn(move || {
                let r = critic_step(&critic, v);
                (r, critic)
            });
            let a = actor_step(actor, p, heads, spec);
            let (c, critic) = pending.wait();
            (a, c, critic)
        }
        None => {
            let c = critic_step(&critic, v);
            (actor_step(actor, p, heads, spec), c, critic)
        }
    };
    let rows = mb.obs.size()[0] as f64;
    let stats = vec![ps.pg_loss / rows, 0.5 * vs / rows, ps.entropy / rows, ps.approx_kl / rows, ps.clipped / rows];
    let forward = (at.forward + ct.forward).as_secs_f64();
    let total = forward + (at.backward + ct.backward).as_secs_f64();
    (stats, if total > 0.0 { forward / total } else { 0.5 }, critic)
}

/// `torch.nn.utils.clip_grad_norm_` on one flat gradient, without a host sync.
pub fn clip_grad_norm(grad: &mut Tensor, max_norm: f64) {
    if kernels::is_host_f32(grad) {
        // SAFETY: the flat gradient is only touched here until the optimizer reads it.
        let g = unsafe { kernels::host_mut(grad) };
        let coef = max_norm as f32 / (kernels::sum_squares(g).sqrt() + 1e-6);
        if coef < 1.0 {
            kernels::scale(g, coef);
        }
        return;
    }
    tch::no_grad(|| {
        let coef = (grad.norm() + 1e-6).reciprocal() * max_norm;
        let _ = grad.g_mul_(&coef.clamp_max(1.0));
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clip_scales_only_large_gradients() {
        let mut g = Tensor::from_slice(&[3.0f32, 4.0]);
        clip_grad_norm(&mut g, 1.0);
        let v = Vec::<f32>::try_from(&g).unwrap();
        assert!((v[0] - 0.6).abs() < 1e-5 && (v[1] - 0.8).abs() < 1e-5);
        let mut small = Tensor::from_slice(&[0.3f32, 0.4]);
        clip_grad_norm(&mut small, 1.0);
        assert_eq!(Vec::<f32>::try_from(&small).unwrap(), vec![0.3, 0.4]);
    }
}
