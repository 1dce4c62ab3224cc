//! The PPO update, as CleanRL's `ppo.py` runs it: `epochs` passes over the rollout, each
//! shuffled and cut into minibatches; per minibatch the loss's gradient (the workload's
//! network computes it: [`PpoPolicy`]), the fp16 scaler's check, the global
//! gradient-norm clip, and an Adam step.

use super::{MinibatchStep, Pass, PpoPolicy};
use crate::adam::FlatAdam;
use crate::kernels;
use crate::precision::Precision;
use crate::profiler::Profiler;
use crate::rollout::Batch;
use crate::telemetry::Telemetry;
use crate::workload::asked_to_stop;
use hotlab_core::counters::Counters;
use hotlab_core::profile::Phase;
use hotlab_env::rng::HostRng;
use hotlab_protocol::Losses;
use hotlab_spec::RunSpec;
use std::sync::atomic::AtomicBool;
use tch::Tensor;

/// The names of an update's statistics, in the order a [`super::Pass`] gives them
/// (what CleanRL logs of its last minibatch).
pub const STATS: [&str; 5] = ["policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction"];

/// What an update needs besides the network and the batch.
pub struct UpdateCtx<'a> {
    pub spec: &'a RunSpec,
    pub heads: &'a [usize],
    pub lr: f64,
    pub precision: &'a mut Precision,
    /// Set to record the last minibatch's per-parameter squared gradient norms (before clipping).
    pub telemetry: Option<&'a Telemetry>,
    /// The run's stop flag, read before each minibatch.
    pub stop: Option<&'a AtomicBool>,
}

/// Runs `epochs × minibatches` gradient steps on one rollout; returns the last
/// minibatch's statistics ([`STATS`]) and, when asked, its squared gradient norms; None
/// when the run was asked to stop (the steps already taken stay taken).
pub fn update<P: PpoPolicy>(
    net: &mut P,
    opt: &mut FlatAdam,
    batch: &Batch,
    ctx: UpdateCtx<'_>,
    rng: &mut HostRng,
    prof: &mut Profiler,
    c: &mut Counters,
) -> Option<(Losses, Option<Tensor>)> {
    update_with(net, opt, batch, ctx, &mut |_, order| rng.shuffle(order), prof, c)
}

/// [`update`] with each epoch's shuffle from `shuffle(epoch, order)`, which reorders
/// `order` in place (it holds the last epoch's order): the run's stream, or orders drawn
/// elsewhere (the captured update's on the device, which the tests compare against).
pub fn update_with<P: PpoPolicy>(
    net: &mut P,
    opt: &mut FlatAdam,
    batch: &Batch,
    ctx: UpdateCtx<'_>,
    shuffle: &mut dyn FnMut(usize, &mut Vec<i64>),
    prof: &mut Profiler,
    c: &mut Counters,
) -> Option<(Losses, Option<Tensor>)> {
    let spec = ctx.spec;
    let mut order: Vec<i64> = (0..spec.batch_size() as i64).collect();
    let (mut last_stats, mut norms) = (None, None);
    let mut pass = net.begin(batch, spec, ctx.precision);
    for epoch in 0..spec.ppo.epochs {
        shuffle(epoch, &mut order);
        pass.epoch(&mut order);
        for m in 0..spec.ppo.minibatches {
            if asked_to_stop(ctx.stop) {
                return None;
            }
            let last = epoch + 1 == spec.ppo.epochs && m + 1 == spec.ppo.minibatches;
            let s = prof.start();
            let (stats, s) = pass.gradient(MinibatchStep { order: &order, m, last, ctx: &ctx, prof, start: s });
            if stats.is_some() {
                last_stats = stats;
            }
            let (flat, grad) = pass.params();
            if let Some(scaler) = ctx.precision.scaler.as_mut() {
                c.host_syncs += 1; // the scaler's inf check
                if !scaler.unscale(grad) {
                    prof.stop(Phase::OPTIMIZER, s);
                    continue;
                }
            }
            let s = match (last, ctx.telemetry) {
                (true, Some(t)) => {
                    norms = Some(t.squared_norms(grad));
                    prof.stop(Phase::TELEMETRY, s)
                }
                _ => s,
            };
            clip_grad_norm(grad, spec.ppo.max_grad_norm);
            opt.step(flat, grad, ctx.lr);
            prof.stop(Phase::OPTIMIZER, s);
        }
    }
    let s = last_stats.expect("at least one minibatch");
    Some((STATS.into_iter().zip(s).collect(), norms))
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
