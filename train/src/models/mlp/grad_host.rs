//! The PPO minibatch step on the CPU in fp32: the same gradient as [`crate::models::mlp::grad`]
//! (checked against it), with the loss heads as one host pass per row instead of ~35
//! libtorch ops, and the actor and the critic on two threads ([`crate::exec::helper`]).
//!
//! The actor's and the critic's losses share no parameters, so each network's forward,
//! head gradient and backward run on its own thread; only the gradient clip and Adam
//! need both. Matmuls stay libtorch's (MKL).

use crate::distribution::gaussian;
use crate::kernels::{host, host_mut};
use crate::models::mlp::policy::Mlp;
use crate::rollout::Batch;
use hotlab_spec::RunSpec;
use std::time::{Duration, Instant};
use tch::{Kind, Tensor};

/// The policy head's inputs for one minibatch (owned handles: they cross threads).
pub struct PolicyInputs {
    pub obs: Tensor,
    /// `[B, heads]`, int64.
    pub actions: Tensor,
    /// `[B, gaussian]`, the Gaussian head's actions, where there is one.
    pub real_actions: Option<Tensor>,
    /// `[B]`, the rollout's log-probabilities.
    pub old_log_probs: Tensor,
    /// `[B]` or `[B, 1]`, normalized.
    pub advantages: Tensor,
}

/// The value head's inputs for one minibatch, with the loss's two constants (the job
/// runs on another thread and owns what it reads).
pub struct ValueInputs {
    pub obs: Tensor,
    pub returns: Tensor,
    /// `[B]`, the rollout's values.
    pub old_values: Tensor,
    pub clip: f64,
    pub vf_coef: f64,
}

/// One minibatch's inputs for the two threads (new handles onto the same tensors).
pub fn split_inputs(mb: &Batch, adv: &Tensor, spec: &RunSpec) -> (PolicyInputs, ValueInputs) {
    let p = PolicyInputs {
        obs: mb.obs.shallow_clone(),
        actions: mb.actions.shallow_clone(),
        real_actions: mb.real_actions.as_ref().map(Tensor::shallow_clone),
        old_log_probs: mb.log_probs.shallow_clone(),
        advantages: adv.shallow_clone(),
    };
    let v = ValueInputs {
        obs: mb.obs.shallow_clone(),
        returns: mb.returns.shallow_clone(),
        old_values: mb.values.shallow_clone(),
        clip: spec.ppo.clip,
        vf_coef: spec.ppo.vf_coef,
    };
    (p, v)
}

/// Sums over the minibatch's rows, before the division by its size.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PolicySums {
    pub pg_loss: f64,
    pub entropy: f64,
    pub approx_kl: f64,
    pub clipped: f64,
}

/// One minibatch's rows as the policy head's gradient reads them.
pub struct PolicyRows<'a> {
    /// `[B, Σ heads + gaussian]`: the actor's output (the logits, then the Gaussian means).
    pub outputs: &'a [f32],
    pub heads: &'a [usize],
    /// `[B, heads]`, the chosen indices.
    pub actions: &'a [i64],
    /// The Gaussian head's log-std `[D]` and the rows' real actions `[B, D]`, where the
    /// policy has one.
    pub gaussian: Option<(&'a [f32], &'a [f32])>,
    /// `[B]`, the rollout's log-probabilities.
    pub old_log_probs: &'a [f32],
    /// `[B]`, normalized.
    pub adv: &'a [f32],
}

/// ∂loss/∂outputs of the clipped surrogate and the entropy bonus, written into `d_out`
/// (`[B, Σ heads + gaussian]`), and ∂loss/∂log-std into `d_log_std` (`[gaussian]`);
/// returns the row sums of the statistics. See [`crate::models::mlp::grad`] for the formulas.
pub fn policy_head(x: PolicyRows<'_>, spec: &RunSpec, d_out: &mut [f32], d_log_std: &mut [f32]) -> PolicySums {
    let PolicyRows { outputs, heads, actions, gaussian, old_log_probs, adv } = x;
    let logits: usize = heads.iter().sum();
    let dims = gaussian.map_or(0, |(log_std, _)| log_std.len());
    let width = logits + dims;
    let rows = adv.len();
    assert!(outputs.len() == rows * width && d_out.len() == outputs.len() && actions.len() == rows * heads.len());
    assert!(gaussian.is_none_or(|(_, real)| real.len() == rows * dims) && d_log_std.len() == dims);
    let (lo, hi) = (1.0 - spec.ppo.clip as f32, 1.0 + spec.ppo.clip as f32);
    let c_ent = spec.ppo.ent_coef as f32 / rows as f32;
    let mut sums = PolicySums::default();
    let mut neg_ent = vec![0f32; heads.len()];
    // The Gaussian's entropy is every row's: the bonus moves its log-std by −ent_coef.
    let gaussian_entropy = gaussian.map_or(0.0, |(log_std, _)| gaussian::row_entropy(log_std));
    d_log_std.iter_mut().for_each(|d| *d = -spec.ppo.ent_coef as f32);
    for r in 0..rows {
        let (z, d) = (&outputs[r * width..(r + 1) * width], &mut d_out[r * width..(r + 1) * width]);
        // d holds log p until the row's d_lp is known.
        let mut new_lp = 0f32;
        let mut start = 0;
        for (h, &n) in heads.iter().enumerate() {
            let (zh, lp) = (&z[start..start + n], &mut d[start..start + n]);
            let max = zh.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let lse = max + zh.iter().map(|&v| (v - max).exp()).sum::<f32>().ln();
            lp.iter_mut().zip(zh).for_each(|(l, &v)| *l = v - lse);
            new_lp += lp[actions[r * heads.len() + h] as usize];
            neg_ent[h] = lp.iter().map(|&l| l.exp() * l).sum();
            start += n;
        }
        let real = gaussian.map(|(log_std, real)| (log_std, &z[logits..], &real[r * dims..(r + 1) * dims]));
        if let Some((log_std, mean, a)) = real {
            new_lp += gaussian::row_log_prob(mean, log_std, a);
        }
        let log_ratio = new_lp - old_log_probs[r];
        let ratio = log_ratio.exp();
        let clipped = ratio.clamp(lo, hi);
        let a = adv[r];
        let d_lp = if a * (ratio - clipped) <= 0.0 { -(a * ratio) / rows as f32 } else { 0.0 };
        let mut start = 0;
        for (h, &n) in heads.iter().enumerate() {
            for l in &mut d[start..start + n] {
                let p = l.exp();
                *l = p * ((*l - neg_ent[h]) * c_ent - d_lp);
            }
            d[start + actions[r * heads.len() + h] as usize] += d_lp;
            start += n;
        }
        if let Some((log_std, mean, a)) = real {
            gaussian::row_gradient(mean, log_std, a, d_lp, &mut d[logits..], d_log_std);
        }
        sums.pg_loss -= (a * ratio).min(a * clipped) as f64;
        sums.entropy -= neg_ent.iter().sum::<f32>() as f64;
        if gaussian.is_some() {
            sums.entropy += gaussian_entropy as f64;
        }
        sums.approx_kl += ((ratio - 1.0) - log_ratio) as f64;
        sums.clipped += ((ratio - 1.0).abs() > spec.ppo.clip as f32) as u8 as f64;
    }
    sums
}

/// ∂loss/∂value of the clipped value loss (times `vf_coef`), written into `d_value`;
/// returns the row sum of `max(err², err_clipped²)`.
pub fn value_head(
    value: &[f32],
    returns: &[f32],
    old_values: &[f32],
    clip: f64,
    vf_coef: f64,
    d_value: &mut [f32],
) -> f64 {
    let rows = value.len();
    assert!(returns.len() == rows && old_values.len() == rows && d_value.len() == rows);
    let clip = clip as f32;
    let coef = vf_coef as f32 / rows as f32;
    let mut sum = 0f64;
    for r in 0..rows {
        let err = value[r] - returns[r];
        let moved = value[r] - old_values[r];
        let err_clipped = moved.clamp(-clip, clip) + (old_values[r] - returns[r]);
        let unclipped = err.abs() >= err_clipped.abs() || moved.abs() <= clip;
        d_value[r] = if unclipped { err * coef } else { 0.0 };
        sum += (err * err).max(err_clipped * err_clipped) as f64;
    }
    sum
}

/// Where one network's step spent its time.
#[derive(Clone, Copy, Debug, Default)]
pub struct Timing {
    pub forward: Duration,
    pub backward: Duration,
}

/// The actor's forward, policy-head gradient and backward (gradients into `flat_grad`).
pub fn actor_step(net: &Mlp, x: PolicyInputs, heads: &[usize], spec: &RunSpec) -> (PolicySums, Timing) {
    tch::no_grad(|| {
        let t0 = Instant::now();
        let tape = net.forward_taped(&x.obs, Kind::Float);
        let d_out = tape.out.empty_like();
        let (actions, old, adv) = (x.actions.contiguous(), x.old_log_probs.contiguous(), x.advantages.contiguous());
        let actions = Vec::<i64>::try_from(actions.view([-1])).expect("int64 actions");
        let real = x.real_actions.as_ref().map(Tensor::contiguous);
        let mut d_log_std = vec![0f32; net.log_std.as_ref().map_or(0, |(p, _)| p.numel())];
        // SAFETY: the tensors read here are rollout data, the tape's output and the
        // log-std, which nothing writes meanwhile; `d_out` is new.
        let sums = unsafe {
            let gaussian = net.log_std.as_ref().zip(real.as_ref()).map(|((p, _), real)| (host(p), host(real)));
            let rows = PolicyRows {
                outputs: host(&tape.out),
                heads,
                actions: &actions,
                gaussian,
                old_log_probs: host(&old),
                adv: host(&adv),
            };
            policy_head(rows, spec, host_mut(&d_out), &mut d_log_std)
        };
        if let Some((_, grad)) = &net.log_std {
            grad.shallow_clone().copy_(&Tensor::from_slice(&d_log_std));
        }
        let t1 = Instant::now();
        net.backward_taped(&tape, &d_out, Kind::Float);
        (sums, Timing { forward: t1 - t0, backward: t1.elapsed() })
    })
}

/// The critic's forward, value-head gradient and backward.
pub fn critic_step(net: &Mlp, x: ValueInputs) -> (f64, Timing) {
    tch::no_grad(|| {
        let t0 = Instant::now();
        let tape = net.forward_taped(&x.obs, Kind::Float);
        let d_value = tape.out.empty_like();
        let (ret, old) = (x.returns.contiguous(), x.old_values.contiguous());
        // SAFETY: as in `actor_step`.
        let sum = unsafe { value_head(host(&tape.out), host(&ret), host(&old), x.clip, x.vf_coef, host_mut(&d_value)) };
        let t1 = Instant::now();
        net.backward_taped(&tape, &d_value, Kind::Float);
        (sum, Timing { forward: t1 - t0, backward: t1.elapsed() })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::mlp::grad::tests::{assert_gradient_matches, autograd_reference, case_with};
    use crate::ppo::advantages::normalize_per_minibatch;

    /// The host path (both threads' halves) against autograd on the loss's definition,
    /// with layers that take each kernel (small input, small output, MKL in between).
    fn check(heads: &[usize], gaussian: usize, seed: u64) {
        let (mut net, mb) = case_with(heads, gaussian, &[24, 16], seed);
        let spec = RunSpec {
            ppo: hotlab_core::run::PpoSpec { ent_coef: 0.05, ..hotlab_core::run::PpoSpec::default() },
            ..RunSpec::default()
        };
        let (want, want_stats) = autograd_reference(&mut net, &mb, heads, &spec);
        let adv = normalize_per_minibatch(&mb.advantages, 1);
        let (p, v) = split_inputs(&mb, &adv, &spec);
        let (ps, _) = actor_step(&net.network(false), p, heads, &spec);
        let (vs, _) = critic_step(&net.network(true), v);
        assert_gradient_matches(&net, &want, heads);
        let rows = 64.0;
        let got = [ps.pg_loss / rows, 0.5 * vs / rows, ps.entropy / rows, ps.approx_kl / rows, ps.clipped / rows];
        let want_stats = Vec::<f64>::try_from(want_stats.to_kind(Kind::Double)).unwrap();
        for (g, w) in got.iter().zip(&want_stats) {
            assert!((g - w).abs() <= 1e-5 * w.abs().max(1.0), "stats {got:?} vs the autograd loss {want_stats:?}");
        }
    }

    #[test]
    fn host_path_matches_autograd_on_one_head() {
        check(&[2], 0, 11);
    }

    #[test]
    fn host_path_matches_autograd_on_several_heads() {
        check(&[3, 2, 4], 0, 11);
    }

    /// A Gaussian head alone (1 to 17 components) and beside categorical heads, over seeds.
    #[test]
    fn host_path_matches_autograd_with_a_gaussian_head() {
        for (seed, heads, gaussian) in
            [(1, &[][..], 1), (2, &[], 3), (3, &[], 6), (4, &[], 17), (5, &[2], 2), (6, &[3, 2], 4), (7, &[], 8)]
        {
            check(heads, gaussian, seed);
        }
    }
}
