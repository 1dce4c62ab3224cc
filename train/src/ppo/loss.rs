//! The PPO loss, as CleanRL's `ppo.py` defines it: clipped surrogate objective, clipped
//! value loss, entropy bonus, per-minibatch advantage normalization.

use crate::distribution::{self, gaussian};
use crate::rollout::Batch;
use hotlab_spec::RunSpec;
use tch::{Kind, Tensor};

/// What a forward gave for one minibatch: its logits, the mask over them (None: every
/// action allowed) and its values.
#[derive(Clone, Copy)]
pub struct Forward<'a> {
    pub logits: &'a Tensor,
    pub mask: Option<&'a Tensor>,
    pub value: &'a Tensor,
}

/// The loss of one minibatch from a forward's logits (masked by its mask) and values, and
/// with `want_stats` its `[pg, v, entropy, approx_kl, clipfrac]` (only the last
/// minibatch's are reported: at CleanRL's sizes every op counts). The entropy bonus is
/// `ent_coef` × the heads' summed entropy, or with `head_ent` head `h`'s entropy ×
/// `head_ent[h]` (a head whose exploration costs or pays more than another's gets its own
/// bonus; the reported entropy is still the sum).
///
/// This is the definition, differentiated by autograd where a workload has no
/// hand-written gradient; the hand-written ones are checked against it.
pub fn loss_from(
    fwd: Forward<'_>,
    mb: &Batch,
    heads: &[usize],
    spec: &RunSpec,
    want_stats: bool,
    head_ent: Option<&[f64]>,
) -> (Tensor, Option<Tensor>) {
    let Forward { logits, mask, value } = fwd;
    let (new_log_prob, entropy, bonus) = match head_ent {
        None => {
            let (lp, entropy) = distribution::log_prob_and_entropy(logits, mask, heads, &mb.actions);
            let entropy = entropy.mean(Kind::Float);
            let bonus = &entropy * spec.ppo.ent_coef;
            (lp, entropy, bonus)
        }
        Some(coefs) => {
            assert_eq!(coefs.len(), heads.len(), "one entropy coefficient per head");
            let (lp, entropies) = distribution::log_prob_and_entropies(logits, mask, heads, &mb.actions);
            let means = Tensor::stack(&entropies.iter().map(|e| e.mean(Kind::Float)).collect::<Vec<_>>(), 0);
            let weights = Tensor::from_slice(coefs).to_kind(Kind::Float).to_device(value.device());
            (lp, means.sum(Kind::Float), means.dot(&weights))
        }
    };
    clipped(new_log_prob, entropy, bonus, value, mb, spec, want_stats)
}

/// The loss of one minibatch for a policy whose actor output `outputs` holds the
/// categorical heads' logits side by side (none, or any number) and then, with `log_std`,
/// a diagonal Gaussian's means (a Box action: [`distribution::gaussian`]). The action's
/// log-probability and entropy are the heads' sums; the bonus is `ent_coef` × the entropy.
pub fn loss_of_heads(
    outputs: &Tensor,
    log_std: Option<&Tensor>,
    value: &Tensor,
    mb: &Batch,
    heads: &[usize],
    spec: &RunSpec,
    want_stats: bool,
) -> (Tensor, Option<Tensor>) {
    let width: i64 = heads.iter().map(|&n| n as i64).sum();
    let mut parts = Vec::with_capacity(2);
    if !heads.is_empty() {
        let logits = if log_std.is_some() { outputs.narrow(1, 0, width) } else { outputs.shallow_clone() };
        parts.push(distribution::log_prob_and_entropy(&logits, None, heads, &mb.actions));
    }
    if let Some(log_std) = log_std {
        let mean = outputs.narrow(1, width, log_std.size()[0]);
        let actions = mb.real_actions.as_ref().expect("a Gaussian head's minibatch has its real actions");
        parts.push((gaussian::log_prob(&mean, log_std, actions), gaussian::entropy(&mean, log_std)));
    }
    let (log_prob, entropy) = parts.into_iter().reduce(|(a, b), (c, d)| (a + c, b + d)).expect("at least one head");
    let entropy = entropy.mean(Kind::Float);
    let bonus = &entropy * spec.ppo.ent_coef;
    clipped(log_prob, entropy, bonus, value, mb, spec, want_stats)
}

/// The clipped surrogate and value losses less the entropy `bonus`, and the statistics.
fn clipped(
    new_log_prob: Tensor,
    entropy: Tensor,
    bonus: Tensor,
    value: &Tensor,
    mb: &Batch,
    spec: &RunSpec,
    want_stats: bool,
) -> (Tensor, Option<Tensor>) {
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

    let loss = &pg_loss - bonus + &v_loss * spec.ppo.vf_coef;

    let stats = want_stats.then(|| {
        tch::no_grad(|| {
            let approx_kl = ((&ratio - 1.0) - &log_ratio).mean(Kind::Float);
            let clip_frac = (&ratio - 1.0).abs().gt(spec.ppo.clip).to_kind(Kind::Float).mean(Kind::Float);
            Tensor::stack(&[pg_loss.detach(), v_loss.detach(), entropy.detach(), approx_kl, clip_frac], 0)
        })
    });
    (loss, stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minibatch of `rows` over heads of sizes `heads`, its figures drawn from `seed`.
    fn minibatch(rows: i64, heads: &[usize], seed: i64) -> (Tensor, Tensor, Batch) {
        tch::manual_seed(seed);
        let width: i64 = heads.iter().map(|&n| n as i64).sum();
        let logits = Tensor::randn([rows, width], (Kind::Float, tch::Device::Cpu)).set_requires_grad(true);
        let value = Tensor::randn([rows], (Kind::Float, tch::Device::Cpu));
        let actions: Vec<Tensor> =
            heads.iter().map(|&n| Tensor::randint(n as i64, [rows, 1], (Kind::Int64, tch::Device::Cpu))).collect();
        let f = |s: f64| Tensor::randn([rows], (Kind::Float, tch::Device::Cpu)) * s;
        let batch = Batch {
            obs: Tensor::zeros([rows, 1], (Kind::Float, tch::Device::Cpu)),
            extra: Vec::new(),
            actions: Tensor::cat(&actions, 1),
            real_actions: None,
            log_probs: f(0.5) - 2.0,
            values: f(1.0),
            advantages: f(1.0),
            returns: f(1.0),
            memory: None,
        };
        (logits, value, batch)
    }

    /// Each head's coefficient scales that head's entropy alone: with every coefficient
    /// `ent_coef` the loss is `loss_from`'s; with one head's raised by `d`, the loss falls
    /// by `d` × that head's mean entropy and nothing else moves, over seeds and shapes.
    #[test]
    fn each_heads_coefficient_weighs_its_own_entropy() {
        let spec = RunSpec::default();
        for (seed, heads) in [(1, vec![2]), (2, vec![6, 3, 5]), (3, vec![6, 3, 5, 3, 4, 3, 3, 3]), (4, vec![4, 1, 7])] {
            let (logits, value, mb) = minibatch(24, &heads, seed);
            let (base, base_stats) =
                loss_from(Forward { logits: &logits, mask: None, value: &value }, &mb, &heads, &spec, true, None);
            let same = vec![spec.ppo.ent_coef; heads.len()];
            let (l, stats) = loss_from(
                Forward { logits: &logits, mask: None, value: &value },
                &mb,
                &heads,
                &spec,
                true,
                Some(&same),
            );
            assert!((l.double_value(&[]) - base.double_value(&[])).abs() < 1e-6, "seed {seed}");
            let (a, b) = (Vec::<f64>::try_from(stats.unwrap()).unwrap(), Vec::<f64>::try_from(base_stats.unwrap()));
            for (x, y) in a.iter().zip(b.unwrap()) {
                assert!((x - y).abs() < 1e-6, "seed {seed}: stats {a:?}");
            }
            let (_, entropies) = distribution::log_prob_and_entropies(&logits, None, &heads, &mb.actions);
            for h in 0..heads.len() {
                let mut raised = same.clone();
                raised[h] += 0.5;
                let (l, _) = loss_from(
                    Forward { logits: &logits, mask: None, value: &value },
                    &mb,
                    &heads,
                    &spec,
                    false,
                    Some(&raised),
                );
                let want = base.double_value(&[]) - 0.5 * entropies[h].mean(Kind::Float).double_value(&[]);
                assert!((l.double_value(&[]) - want).abs() < 1e-5, "seed {seed}, head {h}");
                // Only that head's logits feel the extra bonus.
                let (lower, _) = loss_from(
                    Forward { logits: &logits, mask: None, value: &value },
                    &mb,
                    &heads,
                    &spec,
                    false,
                    Some(&same),
                );
                let grad = |t: &Tensor| Tensor::run_backward(&[t], &[&logits], false, false).remove(0);
                let moved = (grad(&l) - grad(&lower)).abs().gt(1e-7);
                let start: i64 = heads[..h].iter().map(|&n| n as i64).sum();
                let own = moved.narrow(1, start, heads[h] as i64).any().int64_value(&[]) == 1;
                let others = moved.sum(Kind::Int64).int64_value(&[])
                    - moved.narrow(1, start, heads[h] as i64).sum(Kind::Int64).int64_value(&[]);
                assert!(heads[h] == 1 || own, "seed {seed}, head {h}: its own logits moved");
                assert_eq!(others, 0, "seed {seed}, head {h}: no other head's logits moved");
            }
        }
    }
}
