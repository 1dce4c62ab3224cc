//! Per-minibatch advantage normalization, as CleanRL's `ppo.py` does it (`norm_adv`): each
//! minibatch's advantages to mean 0 and (unbiased) std 1 before the policy loss. One rule,
//! three forms: on a tensor (autograd's loss and the tensor gradients), in one host pass
//! over a tensor, and on slices (the hand-written host gradients).

use crate::kernels::{host, host_mut};
use tch::{Kind, Tensor};

/// A whole shuffled epoch at once: rows `[M·B]` → `[M·B, 1]`, each block of `B` rows
/// normalized; a block of one row has no spread and gives 0 (as the host form does), not
/// the NaN of its std.
pub fn normalize_per_minibatch(advantages: &Tensor, minibatches: i64) -> Tensor {
    let blocks = advantages.view([minibatches, -1]);
    let mean = blocks.mean_dim([1i64].as_slice(), true, Kind::Float);
    if blocks.size()[1] < 2 {
        return (blocks - mean).view([-1, 1]);
    }
    let std = blocks.std_dim([1i64].as_slice(), true, true);
    ((blocks - mean) / (std + 1e-8)).view([-1, 1])
}

/// [`normalize_per_minibatch`] in one host pass over host f32 rows.
pub fn normalize_per_minibatch_host(advantages: &Tensor, minibatches: usize) -> Tensor {
    let src = advantages.contiguous();
    let out = Tensor::empty([src.numel() as i64, 1], (Kind::Float, tch::Device::Cpu));
    // SAFETY: `out` is new; `src` is only read.
    unsafe { normalize_blocks(host(&src), minibatches, host_mut(&out)) };
    out
}

/// [`normalize_per_minibatch`] on slices: `xs` in `minibatches` blocks into `ys`.
pub fn normalize_blocks(xs: &[f32], minibatches: usize, ys: &mut [f32]) {
    let rows = xs.len() / minibatches.max(1);
    for (x, y) in xs.chunks_exact(rows.max(1)).zip(ys.chunks_exact_mut(rows.max(1))) {
        let mean = x.iter().map(|&v| v as f64).sum::<f64>() / rows as f64;
        let var = x.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / (rows as f64 - 1.0).max(1.0);
        let scale = 1.0 / (var.sqrt() + 1e-8);
        y.iter_mut().zip(x).for_each(|(y, &v)| *y = ((v as f64 - mean) * scale) as f32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advantages_are_normalized_per_minibatch() {
        let adv = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 10.0, 20.0, 30.0]);
        let got = Vec::<f32>::try_from(normalize_per_minibatch(&adv, 2).view([-1])).unwrap();
        for (g, w) in got.iter().zip([-1.0, 0.0, 1.0, -1.0, 0.0, 1.0]) {
            assert!((g - w).abs() < 1e-6, "{got:?}");
        }
        // Minibatches of one row: no spread, so 0 (the host path's rule), never NaN.
        let one = normalize_per_minibatch(&Tensor::from_slice(&[4.0f32, -2.0]), 2);
        assert_eq!(Vec::<f32>::try_from(one.view([-1])).unwrap(), [0.0, 0.0]);
    }

    #[test]
    fn host_normalization_matches_libtorch() {
        let adv = Tensor::randn([96], (Kind::Float, tch::Device::Cpu)) * 3.0 + 1.0;
        let want = normalize_per_minibatch(&adv, 4);
        assert!(normalize_per_minibatch_host(&adv, 4).allclose(&want, 1e-5, 1e-6, false));
        let one = normalize_per_minibatch_host(&Tensor::from_slice(&[4.0f32, -2.0]), 2);
        assert_eq!(Vec::<f32>::try_from(one.view([-1])).unwrap(), [0.0, 0.0]);
    }
}
