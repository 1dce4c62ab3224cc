//! The PPO loss, as CleanRL's `ppo.py` defines it: clipped surrogate objective, clipped
//! value loss, entropy bonus, per-minibatch advantage normalization.

use crate::distribution;
use crate::rollout::Batch;
use hotlab_shared::spec::RunSpec;
use tch::{Kind, Tensor};

/// The loss of one minibatch from a forward's logits (masked by `mask`) and values, and
/// with `want_stats` its `[pg, v, entropy, approx_kl, clipfrac]` (only the last
/// minibatch's are reported: at CleanRL's sizes every op counts).
///
/// This is the definition, differentiated by autograd where a workload has no
/// hand-written gradient; the hand-written ones are checked against it.
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
    let adv = super::advantages::normalize_per_minibatch(adv, 1).view_as(adv);
    let pg1 = -&adv * &ratio;
    let pg2 = -&adv * ratio.clamp(1.0 - spec.ppo.clip, 1.0 + spec.ppo.clip);
    let pg_loss = pg1.maximum(&pg2).mean(Kind::Float);

    let v_unclipped = (value - &mb.returns).square();
    let v_clipped = &mb.values + (value - &mb.values).clamp(-spec.ppo.clip, spec.ppo.clip);
    let v_loss = v_unclipped.maximum(&(v_clipped - &mb.returns).square()).mean(Kind::Float) * 0.5;

    let entropy = entropy.mean(Kind::Float);
    let loss = &pg_loss - &entropy * spec.ppo.ent_coef + &v_loss * spec.ppo.vf_coef;

    let stats = want_stats.then(|| {
        tch::no_grad(|| {
            let approx_kl = ((&ratio - 1.0) - &log_ratio).mean(Kind::Float);
            let clip_frac = (&ratio - 1.0).abs().gt(spec.ppo.clip).to_kind(Kind::Float).mean(Kind::Float);
            Tensor::stack(&[pg_loss.detach(), v_loss.detach(), entropy.detach(), approx_kl, clip_frac], 0)
        })
    });
    (loss, stats)
}
