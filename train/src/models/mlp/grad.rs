//! The PPO loss's gradient, written out by hand: the same numbers as autograd on
//! [`minibatch_loss`], in about half the libtorch ops and with no autograd
//! graph to record and walk.
//!
//! At CleanRL's minibatch of 128 rows every op costs a few microseconds of dispatch
//! and almost no arithmetic, so the update's speed is its op count (catalogue row 5).
//! At the `wide` preset the ops are large, and what counts is not storing what autograd
//! would save and not making the extra passes over memory that its generic backward
//! functions make.
//!
//! With `d` = ∂loss/∂(new log-prob) and `p` the head's probabilities:
//! - clipped surrogate: `d = −A·r / B` where the unclipped term is the larger (ties
//!   included: autograd's `maximum` splits them, and there both branches agree), else 0;
//! - ∂log-prob/∂logits = onehot(a) − p;  ∂(−c·H)/∂logits = c·p·(log p + H) / B;
//! - clipped value loss: `vf · (v − R) / B` where the unclipped error is the larger or
//!   the clamp is inactive, else 0 (there the clipped error wins and its clamp stops the
//!   gradient);
//! - a Gaussian head (a Box action), with `z = (a − μ)/σ`: ∂/∂μ = `d·z/σ`;
//!   ∂/∂log σ = `Σ_rows d·(z² − 1) − c·ent_coef` summed over the rows, since the log-std is
//!   every row's and the mean entropy's derivative in it is 1
//!   ([`crate::distribution::gaussian`]).

use crate::cuda::loss::{LossConsts, LossGrads, LossInputs, PpoLossGrad};
use crate::distribution::gaussian::LOG_SQRT_2PI;
use crate::models::mlp::policy::{ActorCritic, Tape};
use crate::rollout::Batch;
use hotlab_spec::RunSpec;
use tch::{Kind, Tensor};

/// The loss of one minibatch (the definition, differentiated by autograd; the update
/// uses the hand-written gradient of this module, checked against it), and with `want_stats` its `[pg, v, entropy, approx_kl,
/// clipfrac]` (only the last minibatch's are reported: at CleanRL's sizes every op counts).
pub fn minibatch_loss(
    net: &ActorCritic,
    mb: &Batch,
    heads: &[usize],
    spec: &RunSpec,
    want_stats: bool,
) -> (Tensor, Option<Tensor>) {
    let outputs = net.logits(&mb.obs);
    crate::ppo::loss::loss_of_heads(&outputs, net.log_std(), &net.value(&mb.obs), mb, heads, spec, want_stats)
}

/// Why `--update graph_fused` is refused for a policy with a Gaussian head.
pub const GAUSSIAN_NOT_FUSED: &str = "graph_fused: the ppo_loss_grad kernel has categorical heads only, and this policy has a Gaussian head (a Box action space); allowed with a Box action space: eager, graph";

/// One minibatch's forward and ∂loss/∂outputs; [`LossGrad::backward`] finishes the job.
pub struct LossGrad {
    actor: Tape,
    critic: Tape,
    d_logits: Tensor,
    d_value: Tensor,
    d_log_std: Option<Tensor>,
    /// `[pg_loss, v_loss, entropy, approx_kl, clipfrac]` when asked for.
    pub stats: Option<Tensor>,
}

impl LossGrad {
    /// Writes the parameter gradients into `net.flat_grad` (overwriting it), matmuls in `kind`.
    pub fn backward(&self, net: &ActorCritic, kind: Kind) {
        tch::no_grad(|| {
            net.backward_taped(&self.actor, &self.d_logits, false, kind);
            net.backward_taped(&self.critic, &self.d_value, true, kind);
            if let (Some(grad), Some(d)) = (net.log_std_grad(), &self.d_log_std) {
                grad.shallow_clone().copy_(d);
            }
        })
    }
}

/// One minibatch as the loss reads it: its rows, their normalized advantages `[B, 1]`, the
/// policy's action heads, and the run's spec (the loss's coefficients).
#[derive(Clone, Copy)]
pub struct LossBatch<'a> {
    pub mb: &'a Batch,
    pub adv: &'a Tensor,
    pub heads: &'a [usize],
    pub spec: &'a RunSpec,
}

/// The forward of one minibatch (matmuls in `kind`) and the gradient of its loss times
/// `scale` (the fp16 loss scale, else 1) with respect to the logits and the value.
pub fn loss_grad(net: &ActorCritic, x: LossBatch<'_>, kind: Kind, scale: f64, want_stats: bool) -> LossGrad {
    let log_std = net.log_std();
    let outputs = |actor: &Tensor, value: &Tensor| {
        let out = Outputs { actor, log_std, value };
        Ok::<_, std::convert::Infallible>(output_grads(out, x, scale, want_stats))
    };
    let Ok(grad) = forward_then(net, x.mb, kind, outputs);
    grad
}

/// [`loss_grad`] (unscaled) with ∂loss/∂outputs from the `ppo_loss_grad` kernel in one
/// launch (`--update graph_fused`).
pub fn loss_grad_fused(
    net: &ActorCritic,
    x: LossBatch<'_>,
    kind: Kind,
    want_stats: bool,
    kernel: &PpoLossGrad,
) -> anyhow::Result<LossGrad> {
    let LossBatch { mb, adv, heads, spec } = x;
    if net.arch.gaussian > 0 {
        anyhow::bail!(GAUSSIAN_NOT_FUSED);
    }
    let k = LossConsts { clip: spec.ppo.clip, vf_coef: spec.ppo.vf_coef, ent_coef: spec.ppo.ent_coef, scale: 1.0 };
    forward_then(net, mb, kind, |logits, value| {
        let (actions, log_probs, values, returns) = (&mb.actions, &mb.log_probs, &mb.values, &mb.returns);
        let x = LossInputs { logits, value, actions, log_probs, values, adv, returns };
        let LossGrads { d_logits, d_value, stats } = kernel.launch(x, heads, k, want_stats)?;
        Ok(OutputGrads { d_logits, d_value, d_log_std: None, stats })
    })
}

/// The actor's and the critic's taped forward of `mb`, then ∂loss/∂outputs from `outputs`.
fn forward_then<E>(
    net: &ActorCritic,
    mb: &Batch,
    kind: Kind,
    outputs: impl FnOnce(&Tensor, &Tensor) -> Result<OutputGrads, E>,
) -> Result<LossGrad, E> {
    tch::no_grad(|| {
        let actor = net.forward_taped(&mb.obs, false, kind);
        let critic = net.forward_taped(&mb.obs, true, kind);
        let OutputGrads { d_logits, d_value, d_log_std, stats } = outputs(&actor.out, &critic.out)?;
        Ok(LossGrad { actor, critic, d_logits, d_value, d_log_std, stats })
    })
}

/// What a minibatch's forward gave: the actor's output (the logits, then the Gaussian's
/// means), the Gaussian's log-std where there is one, and the critic's value `[B, 1]`.
#[derive(Clone, Copy)]
pub struct Outputs<'a> {
    pub actor: &'a Tensor,
    pub log_std: Option<&'a Tensor>,
    pub value: &'a Tensor,
}

/// ∂loss/∂logits and ∂loss/∂value of one minibatch, and its statistics.
pub struct OutputGrads {
    /// `[B, Σ heads + gaussian]`: the logits', then the Gaussian means'.
    pub d_logits: Tensor,
    /// `[B, 1]`.
    pub d_value: Tensor,
    /// `[gaussian]`, where there is a Gaussian head.
    pub d_log_std: Option<Tensor>,
    /// `[pg_loss, v_loss, entropy, approx_kl, clipfrac]` when asked for.
    pub stats: Option<Tensor>,
}

/// The loss's gradient times `scale` with respect to the forward's outputs (f32), in
/// libtorch ops: the formulas in this module's docs. On CUDA the `ppo_loss_grad` kernel
/// computes the same for categorical heads in one launch (`crate::cuda::loss`), and
/// `hotlab gpu-check` holds the two equal.
pub fn output_grads(out: Outputs<'_>, x: LossBatch<'_>, scale: f64, want_stats: bool) -> OutputGrads {
    let LossBatch { mb, adv, heads, spec } = x;
    tch::no_grad(|| {
        let b = out.actor.size()[0] as f64;
        let width: i64 = heads.iter().map(|&n| n as i64).sum();
        let logits = match out.log_std {
            Some(_) => out.actor.narrow(1, 0, width),
            None => out.actor.shallow_clone(),
        };
        // Per head: log-probabilities, the chosen one, and −H.
        let mut parts = Vec::with_capacity(heads.len());
        let (mut new_lp, mut neg_ent): (Option<Tensor>, Option<Tensor>) = (None, None);
        let add = |acc: Option<Tensor>, t: &Tensor| Some(acc.map_or_else(|| t.shallow_clone(), |acc| acc + t));
        let mut start = 0;
        for (h, &n) in heads.iter().enumerate() {
            let z = if heads.len() == 1 { logits.shallow_clone() } else { logits.narrow(1, start, n as i64) };
            let lp = z.log_softmax(-1, Kind::Float);
            let p = lp.exp();
            let a = mb.actions.narrow(1, h as i64, 1);
            let chosen = lp.gather(1, &a, false);
            let ne = (&p * &lp).sum_dim_intlist([-1i64].as_slice(), true, Kind::Float);
            new_lp = add(new_lp, &chosen);
            neg_ent = add(neg_ent, &ne);
            parts.push((lp, p, a, ne));
            start += n as i64;
        }
        // The Gaussian: z = (a − μ)/σ per component, its log-density and −H summed.
        let gaussian = out.log_std.map(|log_std| {
            let mean = out.actor.narrow(1, width, log_std.size()[0]);
            let actions = mb.real_actions.as_ref().expect("a Gaussian head's minibatch has its real actions");
            let inv_std = (-log_std).exp();
            let z = (actions - &mean) * &inv_std;
            let sum = |t: Tensor| t.sum_dim_intlist([-1i64].as_slice(), true, Kind::Float);
            let lp = sum(z.square() * -0.5 - log_std - LOG_SQRT_2PI);
            let ne = (log_std + (0.5 + LOG_SQRT_2PI)).sum(Kind::Float).neg().expand([mean.size()[0], 1], false);
            (z, inv_std, lp, ne)
        });
        if let Some((_, _, lp, ne)) = &gaussian {
            new_lp = add(new_lp, lp);
            neg_ent = add(neg_ent, ne);
        }
        let (new_lp, neg_ent) = (new_lp.expect("a head"), neg_ent.expect("a head"));

        let log_ratio = &new_lp - mb.log_probs.unsqueeze(1);
        let ratio = log_ratio.exp();
        let clipped = ratio.clamp(1.0 - spec.ppo.clip, 1.0 + spec.ppo.clip);
        // The unclipped term −A·r is the larger one iff A·(r − clip(r)) ≤ 0.
        let unclipped = (adv * (&ratio - &clipped)).le(0.0);
        let d_lp = (adv * &ratio) * (-scale / b) * &unclipped;

        let c_ent = scale * spec.ppo.ent_coef / b;
        let mut d_out: Vec<Tensor> = parts
            .iter()
            .map(|(lp, p, a, ne)| {
                // d·(onehot − p) + c·p·(log p + H), with this head's own H = −ne.
                let entropy_term = (lp - ne) * c_ent - &d_lp;
                (p * entropy_term).scatter_add(1, a, &d_lp)
            })
            .collect();
        let d_log_std = gaussian.map(|(z, inv_std, _, _)| {
            d_out.push(&d_lp * &z * &inv_std);
            let per_row = &d_lp * (z.square() - 1.0);
            per_row.sum_dim_intlist([0i64].as_slice(), false, Kind::Float) - scale * spec.ppo.ent_coef
        });
        let d_logits = if d_out.len() == 1 { d_out.into_iter().next().unwrap() } else { Tensor::cat(&d_out, 1) };

        let value = out.value;
        let ret = mb.returns.unsqueeze(1);
        let old_v = mb.values.unsqueeze(1);
        let err = value - &ret;
        let moved = value - &old_v;
        let err_clipped = moved.clamp(-spec.ppo.clip, spec.ppo.clip) + (&old_v - &ret);
        // Where the clamp is inactive both errors are the same function of v (they may
        // differ by rounding), so the unclipped gradient is right there too.
        let unclipped_v = err.abs().ge_tensor(&err_clipped.abs()).logical_or(&moved.abs().le(spec.ppo.clip));
        let d_value = &err * (scale * spec.ppo.vf_coef / b) * &unclipped_v;

        let stats = want_stats.then(|| {
            let pg = (adv * &ratio).minimum(&(adv * &clipped)).mean(Kind::Float).neg();
            let v = err.square().maximum(&err_clipped.square()).mean(Kind::Float) * 0.5;
            let ent = neg_ent.mean(Kind::Float).neg();
            let approx_kl = ((&ratio - 1.0) - &log_ratio).mean(Kind::Float);
            let clip_frac = (&ratio - 1.0).abs().gt(spec.ppo.clip).to_kind(Kind::Float).mean(Kind::Float);
            Tensor::stack(&[pg, v, ent, approx_kl, clip_frac], 0)
        });
        OutputGrads { d_logits, d_value, d_log_std, stats }
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::minibatch_loss;
    use super::*;
    use crate::models::mlp::policy::Architecture;
    use crate::ppo::advantages::normalize_per_minibatch;
    use tch::Device;

    /// `shape` standard normals from a local stream (Box–Muller): tests run in parallel
    /// and libtorch's generator is global, so its draws would depend on the other tests.
    fn normal(rng: &mut hotlab_env::rng::HostRng, shape: &[i64]) -> Tensor {
        let n: i64 = shape.iter().product();
        let v: Vec<f32> = (0..n)
            .map(|_| {
                let (u, w) = (1.0 - rng.next_f64(), rng.next_f64());
                ((-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * w).cos()) as f32
            })
            .collect();
        Tensor::from_slice(&v).view(shape)
    }

    /// A net with larger weights than the init, and a batch whose old log-probs and
    /// values put some rows beyond both clips, so every branch of the loss is taken.
    /// (The orthogonal init still draws from libtorch's generator; the perturbation that
    /// dominates the weights, and the batch, do not.)
    pub(crate) fn case(heads: &[usize], hidden: &[usize]) -> (ActorCritic, Batch) {
        case_with(heads, 0, hidden, 11)
    }

    /// [`case`] with a Gaussian head of `gaussian` components beside the categorical heads
    /// (`heads` may be empty), drawn from `seed`; the log-std moved off 0 and the actions
    /// spread beyond one σ, so the gradient in it is not only the entropy's.
    pub(crate) fn case_with(heads: &[usize], gaussian: usize, hidden: &[usize], seed: u64) -> (ActorCritic, Batch) {
        let _seeded = crate::testing::torch_seed(seed as i64);
        let mut rng = hotlab_env::rng::HostRng::new(seed);
        let logits: usize = heads.iter().sum();
        let arch = Architecture { obs_dim: 5, hidden: hidden.to_vec(), logits, gaussian };
        let mut net = ActorCritic::new(arch, Device::Cpu);
        tch::no_grad(|| {
            let _ = net.flat.g_add_(&(normal(&mut rng, &net.flat.size()) * 0.4));
        });
        let n = 64;
        let actions: Vec<i64> = (0..n)
            .flat_map(|_| heads.iter().map(|&k| (rng.next_u64() % k as u64) as i64).collect::<Vec<_>>())
            .collect();
        let real_actions = (gaussian > 0).then(|| normal(&mut rng, &[n, gaussian as i64]) * 1.5);
        let batch = Batch {
            obs: normal(&mut rng, &[n, 5]),
            extra: Vec::new(),
            actions: Tensor::from_slice(&actions).view([n, heads.len() as i64]),
            real_actions,
            log_probs: normal(&mut rng, &[n]) * 0.5 - 1.0 - 1.2 * gaussian as f64,
            values: normal(&mut rng, &[n]),
            advantages: normal(&mut rng, &[n]),
            returns: normal(&mut rng, &[n]),
            memory: None,
        };
        (net, batch)
    }

    /// Autograd's gradient and statistics of the loss's definition; `flat_grad` is then
    /// filled with NaN, so a hand-written backward must overwrite every entry.
    pub(crate) fn autograd_reference(
        net: &mut ActorCritic,
        mb: &Batch,
        heads: &[usize],
        spec: &RunSpec,
    ) -> (Tensor, Tensor) {
        let (loss, stats) = minibatch_loss(net, mb, heads, spec, true);
        net.zero_grad();
        loss.backward();
        let want = net.flat_grad.copy();
        let _ = net.flat_grad.fill_(f64::NAN);
        (want, stats.expect("asked for"))
    }

    /// `net.flat_grad` is `want` to 1e-5 of the largest gradient.
    pub(crate) fn assert_gradient_matches(net: &ActorCritic, want: &Tensor, heads: &[usize]) {
        let err = f64::try_from((&net.flat_grad - want).abs().max()).unwrap();
        let size = f64::try_from(want.abs().max()).unwrap();
        assert!(err <= 1e-5 * size.max(1.0), "heads {heads:?}: max error {err} (largest gradient {size})");
    }

    fn check(heads: &[usize], gaussian: usize, seed: u64) {
        let (mut net, mb) = case_with(heads, gaussian, &[16, 8], seed);
        let spec = RunSpec {
            ppo: hotlab_core::run::PpoSpec { ent_coef: 0.05, ..hotlab_core::run::PpoSpec::default() },
            ..RunSpec::default()
        };
        let (want, want_stats) = autograd_reference(&mut net, &mb, heads, &spec);
        let adv = normalize_per_minibatch(&mb.advantages, 1);
        let got = loss_grad(&net, LossBatch { mb: &mb, adv: &adv, heads, spec: &spec }, Kind::Float, 1.0, true);
        got.backward(&net, Kind::Float);
        assert_gradient_matches(&net, &want, heads);
        let stats = got.stats.unwrap();
        assert!(stats.allclose(&want_stats, 1e-5, 1e-6, false), "{stats} vs the autograd loss");
    }

    #[test]
    fn hand_written_gradients_match_autograd_on_one_head() {
        check(&[2], 0, 11);
    }

    #[test]
    fn hand_written_gradients_match_autograd_on_several_heads() {
        check(&[3, 2, 4], 0, 11);
    }

    /// A Gaussian head alone (1 to 17 components) and beside categorical heads, over seeds.
    #[test]
    fn hand_written_gradients_match_autograd_with_a_gaussian_head() {
        for (seed, heads, gaussian) in
            [(1, &[][..], 1), (2, &[], 3), (3, &[], 6), (4, &[], 17), (5, &[2], 2), (6, &[3, 2], 4), (7, &[], 8)]
        {
            check(heads, gaussian, seed);
        }
    }

    #[test]
    fn bf16_gradients_are_close_and_a_loss_scale_scales_them() {
        let (mut net, mb) = case(&[2], &[16, 8]);
        let spec = RunSpec::default();
        let adv = normalize_per_minibatch(&mb.advantages, 1);
        let x = LossBatch { mb: &mb, adv: &adv, heads: &[2], spec: &spec };
        loss_grad(&net, x, Kind::Float, 1.0, false).backward(&net, Kind::Float);
        let fp32 = net.flat_grad.copy();
        loss_grad(&net, x, Kind::BFloat16, 1.0, false).backward(&net, Kind::BFloat16);
        let rel = f64::try_from((&net.flat_grad - &fp32).norm()).unwrap() / f64::try_from(fp32.norm()).unwrap();
        assert!(rel < 0.05, "bf16 gradient differs from fp32 by {rel} (relative norm)");
        loss_grad(&net, x, Kind::Float, 256.0, false).backward(&net, Kind::Float);
        let _ = net.flat_grad.g_div_scalar_(256.0);
        assert!(net.flat_grad.allclose(&fp32, 1e-5, 1e-7, false));
    }
}
