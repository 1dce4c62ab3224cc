//! Host f32 kernels that replace chains of small libtorch ops on the CPU: each is one
//! pass over memory, compiled twice (plain x86-64 and AVX2 + FMA, chosen at run time:
//! the binary's baseline is plain x86-64 and the GPU boxes' CPUs differ from this one).
//!
//! At CleanRL's sizes a libtorch op costs 2–20 µs of dispatch for well under 1 µs of
//! arithmetic; libtorch's CPU `tanh` alone takes 22 µs on 128×64 floats.

use tch::{Device, Kind, Tensor};

/// Runs `$body` compiled for AVX2 + FMA when the CPU has them, else as plain code. The
/// body is an `#[inline(always)]` function so that it (and what it calls) is compiled
/// again inside the AVX2 one; a closure there would stay plain x86-64 code.
macro_rules! dispatch {
    ($($arg:ident : $ty:ty),* => $ret:ty, $body:block) => {{
        #[inline(always)]
        fn body($($arg: $ty),*) -> $ret $body
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2($($arg: $ty),*) -> $ret {
            body($($arg),*)
        }
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
            // SAFETY: the CPU has the features the function was compiled for.
            return unsafe { avx2($($arg),*) };
        }
        body($($arg),*)
    }};
}

/// tanh as a [13/6] rational function on the clamped input (max error below 1e-6,
/// tested against `f32::tanh`): unlike `f32::tanh` it vectorizes.
#[inline]
pub fn fast_tanh(x: f32) -> f32 {
    tanh_with::<false>(x)
}

/// [`fast_tanh`] with fused multiply-adds (`FMA`: only inside code compiled for them,
/// elsewhere `mul_add` is a slow library call). FMAs halve the polynomial's op count,
/// which bounds a vectorized tanh's throughput.
#[inline(always)]
pub fn tanh_with<const FMA: bool>(x: f32) -> f32 {
    const CLAMP: f32 = 7.905_311;
    const A: [f32; 7] =
        [4.893_524_6e-3, 6.372_619_3e-4, 1.485_722_4e-5, 5.122_297e-8, -8.604_672e-11, 2.000_188e-13, -2.760_768_5e-16];
    const B: [f32; 4] = [4.893_525e-3, 2.268_434_6e-3, 1.185_347_1e-4, 1.198_258_4e-6];
    let madd = |a: f32, b: f32, c: f32| if FMA { a.mul_add(b, c) } else { a * b + c };
    let x = x.clamp(-CLAMP, CLAMP);
    let x2 = x * x;
    let p = madd(madd(madd(madd(madd(madd(A[6], x2, A[5]), x2, A[4]), x2, A[3]), x2, A[2]), x2, A[1]), x2, A[0]) * x;
    let q = madd(madd(madd(B[3], x2, B[2]), x2, B[1]), x2, B[0]);
    p / q
}

/// [`fast_tanh`] over a slice, in place.
pub fn tanh_in_place(xs: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2(xs: &mut [f32]) {
            xs.iter_mut().for_each(|v| *v = tanh_with::<true>(*v))
        }
        // SAFETY: the CPU has the features the function was compiled for.
        return unsafe { avx2(xs) };
    }
    xs.iter_mut().for_each(|v| *v = fast_tanh(*v))
}

/// `d *= 1 − y²` where `y = tanh(z)`: the gradient through a tanh, given its output.
pub fn tanh_backward_in_place(d: &mut [f32], y: &[f32]) {
    assert_eq!(d.len(), y.len(), "tanh backward: gradient and output sizes");
    dispatch!(d: &mut [f32], y: &[f32] => (), { d.iter_mut().zip(y).for_each(|(g, &t)| *g *= 1.0 - t * t) })
}

/// `out[j] = Σᵢ m[i, j]` over a row-major `[rows, out.len()]` matrix (a bias gradient).
pub fn column_sums(m: &[f32], out: &mut [f32]) {
    let cols = out.len();
    assert_eq!(m.len() % cols.max(1), 0, "column sums: matrix is not [rows, {cols}]");
    dispatch!(m: &[f32], out: &mut [f32] => (), {
        out.fill(0.0);
        for row in m.chunks_exact(out.len()) {
            out.iter_mut().zip(row).for_each(|(o, &v)| *o += v);
        }
    })
}

/// `Σ x²`, accumulated in 16 lanes (a single running sum would not vectorize).
pub fn sum_squares(xs: &[f32]) -> f32 {
    dispatch!(xs: &[f32] => f32, {
        let mut lanes = [0f32; 16];
        let chunks = xs.chunks_exact(16);
        let tail: f32 = chunks.remainder().iter().map(|v| v * v).sum();
        for c in chunks {
            lanes.iter_mut().zip(c).for_each(|(l, v)| *l += v * v);
        }
        lanes.iter().sum::<f32>() + tail
    })
}

/// `xs *= c`.
pub fn scale(xs: &mut [f32], c: f32) {
    dispatch!(xs: &mut [f32], c: f32 => (), { xs.iter_mut().for_each(|v| *v *= c) })
}

/// The constants of one Adam step (PyTorch's formulation, no weight decay).
#[derive(Clone, Copy, Debug)]
pub struct AdamStep {
    pub lr: f32,
    pub beta1: f32,
    pub beta2: f32,
    pub eps: f32,
    /// `1 − β₁ᵗ` and `1 − β₂ᵗ`.
    pub bias1: f32,
    pub bias2: f32,
}

/// One Adam step over flat slices: `m ← lerp(m, g, 1−β₁)`, `v ← β₂v + (1−β₂)g²`,
/// `p ← p − lr/bias₁ · m / (√v/√bias₂ + ε)`.
pub fn adam(p: &mut [f32], g: &[f32], m: &mut [f32], v: &mut [f32], k: AdamStep) {
    assert!(g.len() == p.len() && m.len() == p.len() && v.len() == p.len(), "adam: slice sizes");
    dispatch!(p: &mut [f32], g: &[f32], m: &mut [f32], v: &mut [f32], k: AdamStep => (), {
        let (step, root2) = (k.lr / k.bias1, k.bias2.sqrt());
        for (((p, &g), m), v) in p.iter_mut().zip(g).zip(m.iter_mut()).zip(v.iter_mut()) {
            *m += (g - *m) * (1.0 - k.beta1);
            *v = *v * k.beta2 + g * g * (1.0 - k.beta2);
            *p -= step * *m / (v.sqrt() / root2 + k.eps);
        }
    })
}

/// Widths up to this count as "small" for the matmul kernels below: MKL's sgemm is
/// slow there (a `[4096, 64] · [64, 2]` head takes 340 µs, the native loop ~20).
pub const SMALL: usize = 8;

/// Output columns per register panel: 4 AVX2 vectors of accumulators per row.
const PANEL: usize = 32;

/// `y[r] = bias + Σₖ x[r, k] · w[k, :]` (`w` is `[k, n]`) for a small inner size `k` (a
/// first layer on 4 observations). A row's panel of outputs stays in registers while
/// the `k` weight rows stream past; the row is stored once.
pub fn matmul_small_k(x: &[f32], w: &[f32], bias: Option<&[f32]>, y: &mut [f32], n: usize) {
    let k = w.len() / n.max(1);
    assert!(
        w.len() == k * n && y.len().is_multiple_of(n.max(1)) && x.len() == y.len() / n.max(1) * k,
        "matmul_small_k: shapes"
    );
    dispatch!(x: &[f32], w: &[f32], bias: Option<&[f32]>, y: &mut [f32], k: usize, n: usize => (), {
        let panels = n / PANEL;
        for (xr, yr) in x.chunks_exact(k.max(1)).zip(y.chunks_exact_mut(n.max(1))) {
            for p in 0..panels {
                let j = p * PANEL;
                let mut acc = [0f32; PANEL];
                if let Some(b) = bias {
                    acc.copy_from_slice(&b[j..j + PANEL]);
                }
                for (i, &xi) in xr.iter().enumerate() {
                    let row: &[f32; PANEL] = w[i * n + j..i * n + j + PANEL].try_into().unwrap();
                    for c in 0..PANEL {
                        acc[c] += xi * row[c];
                    }
                }
                yr[j..j + PANEL].copy_from_slice(&acc);
            }
            for (j, yj) in yr.iter_mut().enumerate().skip(panels * PANEL) {
                *yj = bias.map_or(0.0, |b| b[j]) + xr.iter().enumerate().map(|(i, &xi)| xi * w[i * n + j]).sum::<f32>();
            }
        }
    })
}

/// `y[r, j] = bias[j] + x[r, :] · wt[j, :]` for a small output width (the heads), with
/// the weight given transposed (`[n, k]`): one dot product per output.
pub fn matmul_narrow_n(x: &[f32], wt: &[f32], bias: Option<&[f32]>, y: &mut [f32], n: usize) {
    let k = wt.len() / n.max(1);
    assert!(
        wt.len() == n * k && x.len().is_multiple_of(k.max(1)) && y.len() == x.len() / k.max(1) * n,
        "matmul_narrow_n: shapes"
    );
    #[inline(always)]
    fn rows(
        x: &[f32],
        wt: &[f32],
        bias: Option<&[f32]>,
        y: &mut [f32],
        n: usize,
        k: usize,
        dot: impl Fn(&[f32], &[f32]) -> f32,
    ) {
        for (xr, yr) in x.chunks_exact(k.max(1)).zip(y.chunks_exact_mut(n)) {
            for (j, yj) in yr.iter_mut().enumerate() {
                *yj = bias.map_or(0.0, |b| b[j]) + dot(xr, &wt[j * k..(j + 1) * k]);
            }
        }
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2(x: &[f32], wt: &[f32], bias: Option<&[f32]>, y: &mut [f32], n: usize, k: usize) {
            // SAFETY: the enclosing function is only called where the CPU has AVX2 + FMA.
            rows(x, wt, bias, y, n, k, |a, b| unsafe { dot_avx2(a, b) })
        }
        // SAFETY: the CPU has the features the function was compiled for.
        return unsafe { avx2(x, wt, bias, y, n, k) };
    }
    rows(x, wt, bias, y, n, k, |a, b| a.iter().zip(b).map(|(p, q)| p * q).sum())
}

/// `Σᵢ aᵢbᵢ` with two 8-lane FMA chains (written with intrinsics: the auto-vectorizer
/// leaves short dot products scalar).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dot_avx2(a: &[f32], b: &[f32]) -> f32 {
    use std::arch::x86_64::*;
    let n = a.len().min(b.len());
    let (mut s0, mut s1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    let mut i = 0;
    // SAFETY: every load reads 8 floats at `i + 8 ≤ n` (or `i + 16 ≤ n`) of both slices.
    unsafe {
        while i + 16 <= n {
            s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a.as_ptr().add(i)), _mm256_loadu_ps(b.as_ptr().add(i)), s0);
            s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a.as_ptr().add(i + 8)), _mm256_loadu_ps(b.as_ptr().add(i + 8)), s1);
            i += 16;
        }
        if i + 8 <= n {
            s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a.as_ptr().add(i)), _mm256_loadu_ps(b.as_ptr().add(i)), s0);
            i += 8;
        }
    }
    let s = _mm256_add_ps(s0, s1);
    let q = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    let q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    let q = _mm_add_ss(q, _mm_shuffle_ps(q, q, 1));
    _mm_cvtss_f32(q) + a[i..n].iter().zip(&b[i..n]).map(|(p, q)| p * q).sum::<f32>()
}

/// `acc = Σ_r u[r, :]ᵀ ⊗ v[r, :]` (`[a, c]`, overwritten) for `a` ≤ [`SMALL`]: a weight
/// gradient `xᵀ·d` where the input (`u = x`) or, computed transposed, the output
/// (`u = d`) is small. Column panels of 16 keep all `a × 16` sums in registers while
/// the rows stream past.
pub fn outer_sum_small(u: &[f32], v: &[f32], acc: &mut [f32], a: usize) {
    let c = acc.len() / a.max(1);
    assert!((1..=SMALL).contains(&a), "outer_sum_small: a = {a} is not in 1..={SMALL}");
    assert!(acc.len() == a * c && u.len().is_multiple_of(a) && v.len() == u.len() / a * c, "outer_sum_small: shapes");
    /// The kernel for one `A`, so that the accumulators have a size the compiler knows.
    #[inline(always)]
    fn fixed<const A: usize>(u: &[f32], v: &[f32], acc: &mut [f32], c: usize) {
        const P: usize = 16;
        let panels = c / P;
        for p in 0..panels {
            let j = p * P;
            let mut sums = [[0f32; P]; A];
            for (ur, vr) in u.chunks_exact(A).zip(v.chunks_exact(c)) {
                let vp: &[f32; P] = vr[j..j + P].try_into().unwrap();
                for (s, &ui) in sums.iter_mut().zip(ur) {
                    for q in 0..P {
                        s[q] += ui * vp[q];
                    }
                }
            }
            for (i, s) in sums.iter().enumerate() {
                acc[i * c + j..i * c + j + P].copy_from_slice(s);
            }
        }
        for q in panels * P..c {
            for i in 0..A {
                acc[i * c + q] = u.chunks_exact(A).zip(v.chunks_exact(c)).map(|(ur, vr)| ur[i] * vr[q]).sum();
            }
        }
    }
    dispatch!(u: &[f32], v: &[f32], acc: &mut [f32], a: usize, c: usize => (), {
        match a {
            1 => fixed::<1>(u, v, acc, c),
            2 => fixed::<2>(u, v, acc, c),
            3 => fixed::<3>(u, v, acc, c),
            4 => fixed::<4>(u, v, acc, c),
            5 => fixed::<5>(u, v, acc, c),
            6 => fixed::<6>(u, v, acc, c),
            7 => fixed::<7>(u, v, acc, c),
            _ => fixed::<8>(u, v, acc, c),
        }
    })
}

/// `[rows, cols]` → `[cols, rows]`, row-major.
pub fn transpose(m: &[f32], rows: usize, out: &mut [f32]) {
    let cols = m.len() / rows.max(1);
    assert!(m.len() == rows * cols && out.len() == m.len(), "transpose: shapes");
    for r in 0..rows {
        for c in 0..cols {
            out[c * rows + r] = m[r * cols + c];
        }
    }
}

/// Whether `t` can be read through [`host`] / [`host_mut`]: a contiguous f32 CPU tensor.
pub fn is_host_f32(t: &Tensor) -> bool {
    t.device() == Device::Cpu && t.kind() == Kind::Float && t.is_contiguous()
}

/// The elements of a contiguous f32 CPU tensor.
///
/// # Safety
/// No one may write to `t`'s storage while the slice lives.
pub unsafe fn host(t: &Tensor) -> &[f32] {
    assert!(is_host_f32(t), "host kernels need a contiguous f32 CPU tensor");
    // SAFETY: contiguous f32 storage of `numel` elements; the caller rules out writers.
    unsafe { std::slice::from_raw_parts(t.data_ptr() as *const f32, t.numel()) }
}

/// The elements of a contiguous f32 CPU tensor, writable.
///
/// # Safety
/// No other slice of, or libtorch op on, `t`'s storage may run while this one lives.
#[allow(clippy::mut_from_ref)] // the tensor is a handle; the exclusivity is the caller's promise
pub unsafe fn host_mut(t: &Tensor) -> &mut [f32] {
    assert!(is_host_f32(t), "host kernels need a contiguous f32 CPU tensor");
    // SAFETY: as for `host`, and the caller guarantees exclusive access.
    unsafe { std::slice::from_raw_parts_mut(t.data_ptr() as *mut f32, t.numel()) }
}

/// The elements of a contiguous int64 CPU tensor.
///
/// # Safety
/// No one may write to `t`'s storage while the slice lives.
pub unsafe fn host_i64(t: &Tensor) -> &[i64] {
    assert!(
        t.device() == Device::Cpu && t.kind() == Kind::Int64 && t.is_contiguous(),
        "host kernels need a contiguous int64 CPU tensor"
    );
    // SAFETY: contiguous i64 storage of `numel` elements; the caller rules out writers.
    unsafe { std::slice::from_raw_parts(t.data_ptr() as *const i64, t.numel()) }
}

/// The elements of a contiguous int64 CPU tensor, writable.
///
/// # Safety
/// No other slice of, or libtorch op on, `t`'s storage may run while this one lives.
#[allow(clippy::mut_from_ref)] // the tensor is a handle; the exclusivity is the caller's promise
pub unsafe fn host_i64_mut(t: &Tensor) -> &mut [i64] {
    // SAFETY: checked and contiguous as in `host_i64`; the caller guarantees exclusivity.
    unsafe {
        let len = host_i64(t).len();
        std::slice::from_raw_parts_mut(t.data_ptr() as *mut i64, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_tanh_is_within_1e6_of_tanh_with_and_without_fma() {
        let xs: Vec<f32> = (-200_000..=200_000).map(|i| i as f32 * 1e-4).collect();
        let worst = xs.iter().map(|&x| (fast_tanh(x) - x.tanh()).abs()).fold(0f32, f32::max);
        assert!(worst < 1e-6, "worst error {worst}");
        assert_eq!(fast_tanh(40.0), 1.0);
        let mut ys = xs.clone();
        tanh_in_place(&mut ys); // the FMA build where the CPU has it
        let worst = xs.iter().zip(&ys).map(|(&x, &y)| (y - x.tanh()).abs()).fold(0f32, f32::max);
        assert!(worst < 1e-6, "worst error in place {worst}");
    }

    #[test]
    fn tanh_backward_and_column_sums_match_libtorch() {
        let _seeded = crate::testing::torch_seed(3);
        let y = Tensor::randn([37, 13], (Kind::Float, Device::Cpu)).tanh();
        let d = Tensor::randn([37, 13], (Kind::Float, Device::Cpu));
        let want = Tensor::tanh_backward(&d, &y);
        let got = d.copy();
        // SAFETY: `got` and `y` are fresh tensors used by nothing else here.
        unsafe { tanh_backward_in_place(host_mut(&got), host(&y)) };
        assert!(got.allclose(&want, 1e-6, 1e-7, false));
        let sums = Tensor::zeros([13], (Kind::Float, Device::Cpu));
        // SAFETY: as above.
        unsafe { column_sums(host(&d), host_mut(&sums)) };
        assert!(sums.allclose(&d.sum_dim_intlist([0i64].as_slice(), false, Kind::Float), 1e-5, 1e-6, false));
    }
}
