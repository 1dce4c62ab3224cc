//! A diagonal Gaussian head over a Box action space (CleanRL's `ppo_continuous_action.py`):
//! the actor outputs the means `[B, D]`, the log-std is a learned vector `[D]` that no
//! observation moves (state-independent, initialised at 0), and the components are
//! independent, so an action's log-probability and entropy are sums over them.
//!
//! The same formulas as PyTorch's `Normal(mean, exp(log_std))`: per component
//! `log p(a) = −(a − μ)² / (2σ²) − log σ − log √(2π)` and `H = ½ + log √(2π) + log σ`.
//! The gradients the hand-written update uses, with `z = (a − μ) / σ`:
//! `∂log p/∂μ = z / σ`, `∂log p/∂log σ = z² − 1`, `∂H/∂log σ = 1`.

use hotlab_core::counters::Counters;
use hotlab_env::rng::HostRng;
use hotlab_protocol::Losses;
use tch::Tensor;

/// `log √(2π)`.
pub const LOG_SQRT_2PI: f64 = 0.918_938_533_204_672_8;

/// Log-probability `[B]` of `actions` `[B, D]` under means `[B, D]` and log-std `[D]`,
/// summed over the components (in the inputs' float kind).
pub fn log_prob(mean: &Tensor, log_std: &Tensor, actions: &Tensor) -> Tensor {
    let z = (actions - mean) * (-log_std).exp();
    (z.square() * -0.5 - log_std - LOG_SQRT_2PI).sum_dim_intlist([-1i64].as_slice(), false, mean.kind())
}

/// Entropy `[B]` of every row (the same for all: the log-std is state-independent).
pub fn entropy(mean: &Tensor, log_std: &Tensor) -> Tensor {
    let per_row = (log_std + (0.5 + LOG_SQRT_2PI)).sum(log_std.kind());
    per_row.expand([mean.size()[0]], false)
}

/// Draws one action per row: `μ + σ·ε` with `ε` from libtorch's generator.
pub fn sample(mean: &Tensor, log_std: &Tensor) -> Tensor {
    mean + log_std.exp() * mean.randn_like()
}

/// Components a run's metrics follow one by one (the run view draws them); a larger
/// action (Humanoid's 17) is summed up by its first ones.
pub const SHOWN: usize = 6;

/// The rollout's real actions `[B, D]` (as sampled) as figures: each shown component's
/// mean and spread (`action.mean_j`, `action.spread_j`), read in one copy.
pub fn rollout_figures(real: &Tensor, out: &mut Losses, c: &mut Counters) {
    let shown = real.size()[1].min(SHOWN as i64);
    let real = real.narrow(1, 0, shown);
    let (std, mean) = real.std_mean_dim([0i64].as_slice(), false, false);
    let both = Tensor::cat(&[mean, std], 0).to_kind(tch::Kind::Double);
    let mut host = vec![0f64; 2 * shown as usize];
    crate::exec::transfer::read_into(&both, &mut host, c);
    let (mean, std) = host.split_at(shown as usize);
    for j in 0..shown as usize {
        out.push(format!("action.mean_{j}"), mean[j]);
        out.push(format!("action.spread_{j}"), std[j]);
    }
}

/// The log-std's shown components as figures (`action.log_std_j`).
/// [`log_std_figures`] of a network's log-std parameter, where it has one, read to the host
/// with the copy counted.
pub fn read_log_std_figures(log_std: Option<&tch::Tensor>, out: &mut Losses, c: &mut hotlab_core::counters::Counters) {
    if let Some(log_std) = log_std {
        let mut host = vec![0f32; log_std.numel()];
        crate::exec::transfer::read_into(log_std, &mut host, c);
        log_std_figures(&host, out);
    }
}

pub fn log_std_figures(log_std: &[f32], out: &mut Losses) {
    for (j, &l) in log_std.iter().take(SHOWN).enumerate() {
        out.push(format!("action.log_std_{j}"), l as f64);
    }
}

/// `n` standard normals from `rng` (Box–Muller on its uniforms), in order: the fused
/// rollout's noise, drawn on the host where its categorical uniforms are.
pub fn draw_normals(n: usize, rng: &mut HostRng) -> Vec<f32> {
    let mut out = Vec::with_capacity(n + 1);
    while out.len() < n {
        let (u, v) = (1.0 - rng.next_f64(), rng.next_f64());
        let r = (-2.0 * u.ln()).sqrt();
        let (s, c) = (std::f64::consts::TAU * v).sin_cos();
        out.extend([(r * c) as f32, (r * s) as f32]);
    }
    out.truncate(n);
    out
}

/// One row on the host: the action `μ + σ·ε` into `action`, and its log-probability
/// (`−ε²/2 − log σ − log √(2π)` summed: the action's own `z` is `ε`).
pub fn sample_row(mean: &[f32], log_std: &[f32], normals: &[f32], action: &mut [f32]) -> f32 {
    let mut log_prob = 0f32;
    for j in 0..mean.len() {
        let eps = normals[j];
        action[j] = mean[j] + log_std[j].exp() * eps;
        log_prob += -0.5 * eps * eps - log_std[j] - LOG_SQRT_2PI as f32;
    }
    log_prob
}

/// One row's log-probability of `action` on the host.
pub fn row_log_prob(mean: &[f32], log_std: &[f32], action: &[f32]) -> f32 {
    let mut log_prob = 0f32;
    for j in 0..mean.len() {
        let z = (action[j] - mean[j]) * (-log_std[j]).exp();
        log_prob += -0.5 * z * z - log_std[j] - LOG_SQRT_2PI as f32;
    }
    log_prob
}

/// `d_lp` times the row's gradient of its log-probability: `d_lp·z/σ` into `d_mean`
/// (overwritten) and `d_lp·(z² − 1)` added to `d_log_std` (the log-std is every row's).
pub fn row_gradient(
    mean: &[f32],
    log_std: &[f32],
    action: &[f32],
    d_lp: f32,
    d_mean: &mut [f32],
    d_log_std: &mut [f32],
) {
    for j in 0..mean.len() {
        let inv_std = (-log_std[j]).exp();
        let z = (action[j] - mean[j]) * inv_std;
        d_mean[j] = d_lp * z * inv_std;
        d_log_std[j] += d_lp * (z * z - 1.0);
    }
}

/// The entropy of one row on the host.
pub fn row_entropy(log_std: &[f32]) -> f32 {
    log_std.iter().map(|&l| l + 0.5 + LOG_SQRT_2PI as f32).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::Kind;

    /// The host rows and the tensor ops agree, and so do their gradients with autograd's,
    /// over shapes (1 to 17 components) and seeds.
    #[test]
    fn host_rows_agree_with_the_tensor_ops_and_autograd() {
        for (seed, dims) in [(1u64, 1usize), (2, 3), (3, 6), (4, 17)] {
            let mut rng = HostRng::new(seed);
            let rows = 9;
            let normals = |n: usize, rng: &mut HostRng| draw_normals(n, rng);
            let mean: Vec<f32> = normals(rows * dims, &mut rng);
            let log_std: Vec<f32> = normals(dims, &mut rng).iter().map(|v| v * 0.5).collect();
            let actions: Vec<f32> = normals(rows * dims, &mut rng).iter().map(|v| v * 2.0).collect();
            let t = |v: &[f32], shape: &[i64]| Tensor::from_slice(v).view(shape);
            let (m, ls, a) = (
                t(&mean, &[rows as i64, dims as i64]),
                t(&log_std, &[dims as i64]),
                t(&actions, &[rows as i64, dims as i64]),
            );
            let m = m.set_requires_grad(true);
            let ls = ls.set_requires_grad(true);
            let lp = log_prob(&m, &ls, &a);
            let ent = entropy(&m, &ls);
            // A loss of both, with row weights, so each row's d_lp differs.
            let w: Vec<f32> = (0..rows).map(|r| r as f32 - 3.0).collect();
            let loss = (&lp * t(&w, &[rows as i64])).sum(Kind::Float) - ent.sum(Kind::Float) * 0.1;
            let grads = Tensor::run_backward(&[&loss], &[&m, &ls], false, false);
            let want_dm = Vec::<f32>::try_from(grads[0].reshape([-1])).unwrap();
            let want_dls = Vec::<f32>::try_from(&grads[1]).unwrap();
            let lp = Vec::<f32>::try_from(lp.detach()).unwrap();
            let mut d_mean = vec![0f32; rows * dims];
            let mut d_log_std = vec![-0.1 * rows as f32; dims];
            for r in 0..rows {
                let at = r * dims..(r + 1) * dims;
                let got = row_log_prob(&mean[at.clone()], &log_std, &actions[at.clone()]);
                assert!((got - lp[r]).abs() < 1e-4, "seed {seed}, {dims} dims, row {r}: {got} vs {}", lp[r]);
                let (m_r, a_r) = (&mean[at.clone()], &actions[at.clone()]);
                row_gradient(m_r, &log_std, a_r, w[r], &mut d_mean[at], &mut d_log_std);
            }
            let close = |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(x, y)| (x - y).abs() <= 1e-4 * y.abs().max(1.0));
            assert!(close(&d_mean, &want_dm), "seed {seed}: d_mean {d_mean:?} vs {want_dm:?}");
            assert!(close(&d_log_std, &want_dls), "seed {seed}: d_log_std {d_log_std:?} vs {want_dls:?}");
            let h = row_entropy(&log_std);
            let want_h = f64::try_from(entropy(&m.detach(), &ls.detach()).get(0)).unwrap() as f32;
            assert!((h - want_h).abs() < 1e-4, "seed {seed}: entropy {h} vs {want_h}");
        }
    }

    /// A sampled row's log-probability is the density of the action it wrote; the
    /// samples' mean and spread are `μ` and `σ`.
    #[test]
    fn host_samples_have_the_heads_mean_and_spread() {
        let mut rng = HostRng::new(9);
        let (mean, log_std) = ([0.5f32, -2.0], [0f32, (0.25f32).ln()]);
        let n = 40_000;
        let (mut sum, mut sq) = ([0f64; 2], [0f64; 2]);
        for _ in 0..n {
            let eps = draw_normals(2, &mut rng);
            let mut a = [0f32; 2];
            let lp = sample_row(&mean, &log_std, &eps, &mut a);
            assert!((lp - row_log_prob(&mean, &log_std, &a)).abs() < 1e-4);
            for j in 0..2 {
                sum[j] += a[j] as f64;
                sq[j] += (a[j] as f64 - mean[j] as f64).powi(2);
            }
        }
        for j in 0..2 {
            let (m, s) = (sum[j] / n as f64, (sq[j] / n as f64).sqrt());
            assert!((m - mean[j] as f64).abs() < 0.02, "component {j}: mean {m}");
            assert!((s - (log_std[j] as f64).exp()).abs() < 0.02, "component {j}: std {s}");
        }
    }
}
