//! The proof policy in plain Rust on the host: the rollout forward (sampling included)
//! and the forward half of the update ([`crate::proof::grad`] is the other half), the
//! same function as [`ProofNet`](crate::proof::policy::ProofNet)'s libtorch ops.
//!
//! Two things make it fast. A goal list's pre-activation is linear in its index
//! embeddings, `W·mean(eᵢ) = mean(W·eᵢ)`, so the embedding table is projected through the
//! goal layer once per weight version (`P = E·W`, `[3V, H]`) and a goal list costs its
//! ≤ 30 row additions instead of 30 lookups and a D×H product. And successors the mask
//! rules out are never evaluated: their logits are masked anyway.
//!
//! Each batch goes in two passes, the embedding lookups (all goal lists of all rows)
//! and then the heads, so that the lookups can be timed as their own profiler phase.

use crate::proof::goals::{GOAL_WIDTH, PAD};
use crate::proof::policy::ProofArch;
use hotlab_train::distribution::MASKED_LOGIT;
use hotlab_train::kernels::tanh_with;
use hotlab_train::models::mlp::host::{sample_head, ActOut};
use std::time::Instant;
use tch::Tensor;

/// Indices of [`ProofArch::layout`]'s slots.
pub(crate) mod slot {
    pub const EMBED: usize = 0;
    pub const GOAL_W: usize = 1;
    pub const GOAL_B: usize = 2;
    pub const SCORE_W: usize = 3;
    pub const SCORE_B: usize = 4;
    pub const VALUE0_W: usize = 5;
    pub const VALUE0_B: usize = 6;
    pub const VALUE1_W: usize = 7;
    pub const VALUE1_B: usize = 8;
}

/// `a·b + c`, fused where the code is compiled for FMA.
#[inline(always)]
pub(crate) fn madd<const FMA: bool>(a: f32, b: f32, c: f32) -> f32 {
    if FMA {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

/// `y += a·x`.
#[inline(always)]
pub(crate) fn axpy<const FMA: bool>(a: f32, x: &[f32], y: &mut [f32]) {
    y.iter_mut().zip(x).for_each(|(y, &x)| *y = madd::<FMA>(a, x, *y));
}

/// `x·y` with eight partial sums (one chain would not vectorize).
#[inline(always)]
pub(crate) fn dot<const FMA: bool>(x: &[f32], y: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (xc, yc) = (x.chunks_exact(8), y.chunks_exact(8));
    let tail: f32 = xc.remainder().iter().zip(yc.remainder()).map(|(a, b)| a * b).sum();
    for (a, b) in xc.zip(yc) {
        for k in 0..8 {
            acc[k] = madd::<FMA>(a[k], b[k], acc[k]);
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// `y = b + x·m` for one row `x`, `m` row-major `[x.len(), y.len()]`.
#[inline(always)]
pub(crate) fn affine<const FMA: bool>(x: &[f32], m: &[f32], b: &[f32], y: &mut [f32]) {
    let h = y.len();
    y.copy_from_slice(b);
    for (i, &xi) in x.iter().enumerate() {
        axpy::<FMA>(xi, &m[i * h..(i + 1) * h], y);
    }
}

/// Whether the AVX2 + FMA builds may run here (checked once).
pub(crate) fn fma_ok() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static OK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *OK.get_or_init(|| std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma"))
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Defines `fn $name(args)` that runs `$body::<true>(args)` compiled for AVX2 + FMA
/// where the CPU has them, else `$body::<false>(args)`. The bodies are
/// `#[inline(always)]`, so they and what they call are compiled into each build.
macro_rules! fma_entry {
    ($vis:vis fn $name:ident = $body:ident ( $($arg:ident : $ty:ty),* ) $(-> $ret:ty)?) => {
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx2,fma")]
            unsafe fn fast($($arg: $ty),*) $(-> $ret)? {
                $body::<true>($($arg),*)
            }
            #[cfg(target_arch = "x86_64")]
            if $crate::proof::host::fma_ok() {
                // SAFETY: the CPU has the features `fast` was compiled for.
                return unsafe { fast($($arg),*) };
            }
            $body::<false>($($arg),*)
        }
    };
}
pub(crate) use fma_entry;

fma_entry!(fn embed_batch = embed_body(p: &mut ProofHost, state: &[i64], succ: &[i64]));
fma_entry!(fn heads_batch = heads_body(p: &mut ProofHost, gemm_done: bool));

/// Below this many rows the heads run row by row here; from it on, as two matrix
/// products in libtorch (MKL), whose blocking beats per-row loops on a batch.
const GEMM_ROWS: usize = 64;

/// What a batch's forward leaves for the backward and the sampler. A row's allowed
/// successors are stored compactly, `first[e]..first[e + 1]`.
#[derive(Clone, Default)]
pub struct Tape {
    /// The input row each batch row came from (a minibatch reads rows in shuffled order).
    pub src: Vec<usize>,
    /// The state's goal embedding `[N, H]` and `1/n` of its mean.
    pub hs: Vec<f32>,
    pub hs_inv: Vec<f32>,
    pub first: Vec<usize>,
    /// Per allowed successor: its slot `0..K`, embedding `[·, H]`, `1/n` and logit.
    pub slot: Vec<u8>,
    pub hk: Vec<f32>,
    pub hk_inv: Vec<f32>,
    pub logits: Vec<f32>,
    /// Per row: the score vector `g = hs·S + s`, the value layer's `tanh` output, the value.
    pub g: Vec<f32>,
    pub u: Vec<f32>,
    pub values: Vec<f32>,
}

impl Tape {
    pub fn rows(&self) -> usize {
        self.src.len()
    }

    /// Row `e`'s logits over all `K` slots (masked ones at [`MASKED_LOGIT`]); false
    /// when nothing is allowed.
    pub fn row_logits(&self, e: usize, out: &mut [f32]) -> bool {
        out.fill(MASKED_LOGIT as f32);
        let range = self.first[e]..self.first[e + 1];
        for c in range.clone() {
            out[self.slot[c] as usize] = self.logits[c];
        }
        !range.is_empty()
    }
}

/// The weights, with the embedding table projected, and the last batch's [`Tape`].
#[derive(Clone)]
pub struct ProofHost {
    pub arch: ProofArch,
    /// `E·W`, `[3V, H]`.
    pub(crate) proj: Vec<f32>,
    pub(crate) goal_b: Vec<f32>,
    pub(crate) score_w: Vec<f32>,
    pub(crate) score_b: Vec<f32>,
    pub(crate) value0_w: Vec<f32>,
    pub(crate) value0_b: Vec<f32>,
    pub(crate) value1_w: Vec<f32>,
    pub(crate) value1_b: f32,
    pub tape: Tape,
}

impl ProofHost {
    pub fn new(arch: ProofArch, flat: &[f32]) -> Self {
        let mut p = Self {
            arch,
            proj: Vec::new(),
            goal_b: Vec::new(),
            score_w: Vec::new(),
            score_b: Vec::new(),
            value0_w: Vec::new(),
            value0_b: Vec::new(),
            value1_w: Vec::new(),
            value1_b: 0.0,
            tape: Tape::default(),
        };
        p.load(flat);
        p
    }

    /// Copies the weights and projects the table (call after every update).
    pub fn load(&mut self, flat: &[f32]) {
        let layout = self.arch.layout();
        let take = |i: usize| {
            let s = &layout[i];
            &flat[s.offset as usize..(s.offset + s.numel()) as usize]
        };
        let (v3, d, h) = (3 * self.arch.vocab, self.arch.embed, self.arch.hidden);
        self.proj.resize(v3 * h, 0.0);
        matmul(Mat::of(take(slot::EMBED), (v3, d)), Mat::of(take(slot::GOAL_W), (d, h)), &mut self.proj);
        self.goal_b = take(slot::GOAL_B).to_vec();
        self.score_w = take(slot::SCORE_W).to_vec();
        self.score_b = take(slot::SCORE_B).to_vec();
        self.value0_w = take(slot::VALUE0_W).to_vec();
        self.value0_b = take(slot::VALUE0_B).to_vec();
        self.value1_w = take(slot::VALUE1_W).to_vec();
        self.value1_b = take(slot::VALUE1_B)[0];
    }

    /// Goal embeddings of a batch: each row's state and allowed successors. The batch is
    /// the input's rows in `index` order (all rows without one).
    pub fn embed(&mut self, state: &[i64], succ: &[i64], mask: &[i64], index: Option<&[i64]>) {
        let k = self.arch.successors;
        let inputs = state.len() / GOAL_WIDTH;
        assert!(succ.len() == inputs * k * GOAL_WIDTH && mask.len() == inputs * k, "proof batch: field sizes");
        let t = &mut self.tape;
        t.src.clear();
        match index {
            Some(ix) => t.src.extend(ix.iter().map(|&r| r as usize)),
            None => t.src.extend(0..inputs),
        }
        assert!(t.src.iter().all(|&r| r < inputs), "proof batch: row index out of range");
        t.first.clear();
        t.slot.clear();
        t.first.push(0);
        for &r in &t.src {
            t.slot.extend((0..k).filter(|&j| mask[r * k + j] != 0).map(|j| j as u8));
            t.first.push(t.slot.len());
        }
        let (n, c, h) = (t.src.len(), t.slot.len(), self.arch.hidden);
        t.hs.resize(n * h, 0.0);
        t.hs_inv.resize(n, 0.0);
        t.hk.resize(c * h, 0.0);
        t.hk_inv.resize(c, 0.0);
        embed_batch(self, state, succ)
    }

    /// The heads on the last [`ProofHost::embed`]: the allowed successors' logits and
    /// the values, into the tape.
    pub fn heads(&mut self) {
        let h = self.arch.hidden;
        let t = &mut self.tape;
        let n = t.rows();
        t.g.resize(n * h, 0.0);
        t.u.resize(n * h, 0.0);
        t.values.resize(n, 0.0);
        t.logits.resize(t.slot.len(), 0.0);
        if n >= GEMM_ROWS {
            matmul(Mat::of(&t.hs, (n, h)), Mat::of(&self.score_w, (h, h)), &mut t.g);
            matmul(Mat::of(&t.hs, (n, h)), Mat::of(&self.value0_w, (h, h)), &mut t.u);
        }
        heads_batch(self, n >= GEMM_ROWS)
    }

    /// Samples an action for each of the batch's rows; returns the seconds the
    /// embedding lookups took. A row with nothing allowed samples uniformly (as masked
    /// libtorch logits do); the env ends that episode as a dead end.
    pub fn act(&mut self, state: &[i64], succ: &[i64], mask: &[i64], uniforms: &[f32], out: ActOut<'_>) -> f64 {
        let k = self.arch.successors;
        let start = Instant::now();
        self.embed(state, succ, mask, None);
        let lookup_s = start.elapsed().as_secs_f64();
        self.heads();
        let mut logits = vec![0f32; k];
        for e in 0..self.tape.rows() {
            let (pick, lp) = match self.tape.row_logits(e, &mut logits) {
                true => sample_head(&logits, |j| mask[e * k + j] != 0, uniforms[e]),
                false => sample_head(&vec![0.0; k], |_| true, uniforms[e]),
            };
            out.actions[e] = pick as i64;
            out.log_probs[e] = lp;
            out.values[e] = self.tape.values[e];
        }
        lookup_s
    }

    /// The critic's values of `state`'s rows.
    pub fn values(&mut self, state: &[i64]) -> Vec<f32> {
        let n = state.len() / GOAL_WIDTH;
        let k = self.arch.successors;
        let (succ, mask) = (vec![PAD; n * k * GOAL_WIDTH], vec![0i64; n * k]);
        self.embed(state, &succ, &mask, None);
        self.heads();
        self.tape.values.clone()
    }
}

/// A row-major matrix on the host as a product reads it: its elements, its shape as
/// stored, and whether the product takes its transpose.
#[derive(Clone, Copy)]
pub(crate) struct Mat<'a> {
    data: &'a [f32],
    shape: (usize, usize),
    transposed: bool,
}

impl<'a> Mat<'a> {
    pub(crate) fn of(data: &'a [f32], shape: (usize, usize)) -> Self {
        Self { data, shape, transposed: false }
    }

    /// Its transpose, read in place.
    pub(crate) fn t(self) -> Self {
        Self { transposed: !self.transposed, ..self }
    }

    fn tensor(self) -> Tensor {
        let t = Tensor::from_slice(self.data).view([self.shape.0 as i64, self.shape.1 as i64]);
        if self.transposed {
            t.tr()
        } else {
            t
        }
    }
}

/// `out = a·b` through libtorch (MKL).
pub(crate) fn matmul(a: Mat<'_>, b: Mat<'_>, out: &mut [f32]) {
    let r = a.tensor().mm(&b.tensor()).contiguous();
    // SAFETY: `r` is a fresh contiguous f32 tensor nothing else holds.
    out.copy_from_slice(unsafe { hotlab_train::kernels::host(&r) });
}

/// One goal list's embedding `tanh(b + mean of its indices' projected rows)` into `out`;
/// returns `1/n` (0 for a list of padding only, whose mean libtorch takes as 0).
#[inline(always)]
fn goal<const FMA: bool>(proj: &[f32], vocab: usize, bias: &[f32], row: &[i64], out: &mut [f32]) -> f32 {
    let h = out.len();
    out.fill(0.0);
    let mut n = 0u32;
    for (i, &t) in row.iter().enumerate() {
        if t == PAD {
            continue;
        }
        // Each position (predicate, first, second argument) has its own table.
        let r = (i % 3) * vocab + t as usize;
        out.iter_mut().zip(&proj[r * h..(r + 1) * h]).for_each(|(o, &p)| *o += p);
        n += 1;
    }
    let inv = if n == 0 { 0.0 } else { 1.0 / n as f32 };
    out.iter_mut().zip(bias).for_each(|(o, &b)| *o = tanh_with::<FMA>(madd::<FMA>(*o, inv, b)));
    inv
}

#[inline(always)]
fn embed_body<const FMA: bool>(p: &mut ProofHost, state: &[i64], succ: &[i64]) {
    let (k, h, v) = (p.arch.successors, p.arch.hidden, p.arch.vocab);
    let t = &mut p.tape;
    for (e, &r) in t.src.iter().enumerate() {
        let row = &state[r * GOAL_WIDTH..(r + 1) * GOAL_WIDTH];
        t.hs_inv[e] = goal::<FMA>(&p.proj, v, &p.goal_b, row, &mut t.hs[e * h..(e + 1) * h]);
        for c in t.first[e]..t.first[e + 1] {
            let i = r * k + t.slot[c] as usize;
            let row = &succ[i * GOAL_WIDTH..(i + 1) * GOAL_WIDTH];
            t.hk_inv[c] = goal::<FMA>(&p.proj, v, &p.goal_b, row, &mut t.hk[c * h..(c + 1) * h]);
        }
    }
}

/// The heads row by row; `gemm_done`: `g` and `u` hold the products already (without
/// their biases and the `tanh`).
#[inline(always)]
fn heads_body<const FMA: bool>(p: &mut ProofHost, gemm_done: bool) {
    let h = p.arch.hidden;
    let t = &mut p.tape;
    for e in 0..t.src.len() {
        let hs = &t.hs[e * h..(e + 1) * h];
        let (g, u) = (&mut t.g[e * h..(e + 1) * h], &mut t.u[e * h..(e + 1) * h]);
        match gemm_done {
            true => {
                g.iter_mut().zip(&p.score_b).for_each(|(x, &b)| *x += b);
                u.iter_mut().zip(&p.value0_b).for_each(|(x, &b)| *x += b);
            }
            false => {
                affine::<FMA>(hs, &p.score_w, &p.score_b, g);
                affine::<FMA>(hs, &p.value0_w, &p.value0_b, u);
            }
        }
        for c in t.first[e]..t.first[e + 1] {
            t.logits[c] = dot::<FMA>(&t.hk[c * h..(c + 1) * h], g);
        }
        u.iter_mut().for_each(|x| *x = tanh_with::<FMA>(*x));
        t.values[e] = dot::<FMA>(u, &p.value1_w) + p.value1_b;
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::proof::goals::{ProofBatch, ProofTask};
    use crate::proof::policy::ProofNet;
    use hotlab_env::rng::HostRng;
    use hotlab_env::{BatchEnv, FieldData, Observations, StepBatch};
    use std::sync::Arc;
    use tch::{Device, Kind, Tensor};

    /// `rows` real observations of a small family world (random actions), as the three
    /// index fields.
    pub fn observations(rows: usize) -> (ProofArch, Vec<i64>, Vec<i64>, Vec<i64>) {
        let task = Arc::new(ProofTask::load("family:people=30,seed=2", None, 8).unwrap());
        let mut env = ProofBatch::new(Arc::clone(&task), 8, 5, 0);
        let mut obs = Observations::zeros(env.spec(), 8);
        env.reset(&mut obs).unwrap();
        let mut out = StepBatch::new(env.spec(), 8);
        let mut rng = HostRng::new(3);
        let (mut s, mut k, mut m) = (Vec::new(), Vec::new(), Vec::new());
        while s.len() < rows * GOAL_WIDTH {
            let [FieldData::I64(a), FieldData::I64(b), FieldData::I64(c)] = &obs.fields[..] else { unreachable!() };
            s.extend_from_slice(a);
            k.extend_from_slice(b);
            m.extend_from_slice(c);
            let actions: Vec<i64> = (0..8).map(|_| (rng.next_u64() % 4) as i64).collect();
            env.step(&actions, &mut out).unwrap();
            std::mem::swap(&mut obs, &mut out.obs);
        }
        s.truncate(rows * GOAL_WIDTH);
        k.truncate(rows * 20 * GOAL_WIDTH);
        m.truncate(rows * 20);
        let arch = ProofArch { vocab: task.vocab.size(), embed: 8, hidden: 16, successors: 20 };
        (arch, s, k, m)
    }

    /// A network with weights large enough that the tanh are not near-linear.
    pub fn net(arch: &ProofArch) -> ProofNet {
        let _seeded = hotlab_train::testing::torch_seed(11);
        let mut net = ProofNet::new(arch.clone(), Device::Cpu);
        tch::no_grad(|| {
            let _ = net.flat.g_add_(&(Tensor::randn_like(&net.flat) * 0.3));
        });
        net
    }

    #[test]
    fn host_forward_matches_libtorch() {
        let (arch, s, k, m) = observations(80);
        let net = net(&arch);
        let n = 80i64;
        let t = |v: &[i64], shape: &[i64]| Tensor::from_slice(v).view(shape);
        let out = net.forward(&t(&s, &[n, 1, 10, 3]), &t(&k, &[n, 20, 10, 3]));
        let want_l = Vec::<f32>::try_from(out.logits.reshape([-1])).unwrap();
        let want_v = Vec::<f32>::try_from(out.value).unwrap();
        let flat = Vec::<f32>::try_from(&net.flat).unwrap();
        let mut host = ProofHost::new(arch, &flat);
        assert!(m.iter().filter(|&&x| x != 0).count() > 40, "the sample has allowed successors");
        // 80 rows take the matrix-product path, 8 the row-by-row one; the second batch
        // reads its rows through an index.
        let index: Vec<i64> = (0..8).map(|e| 79 - 3 * e).collect();
        for (rows, ix) in [(80usize, None), (8, Some(&index[..]))] {
            host.embed(&s, &k, &m, ix);
            host.heads();
            let mut logits = vec![0f32; 20];
            for e in 0..rows {
                let r = ix.map_or(e, |ix| ix[e] as usize);
                host.tape.row_logits(e, &mut logits);
                for j in 0..20 {
                    let (got, want) = (logits[j], want_l[r * 20 + j]);
                    match m[r * 20 + j] != 0 {
                        true => assert!((got - want).abs() < 1e-4, "row {r} logit {j}: {got} vs {want}"),
                        false => assert_eq!(got, MASKED_LOGIT as f32),
                    }
                }
                assert!((host.tape.values[e] - want_v[r]).abs() < 1e-4, "value of row {r}");
            }
        }
        let v = host.values(&s[..8 * GOAL_WIDTH]);
        assert!(v.iter().zip(&want_v).all(|(a, b)| (a - b).abs() < 1e-4), "values alone");
        let _ = Kind::Float;
    }

    #[test]
    fn sampling_respects_the_mask_and_survives_rows_with_nothing_allowed() {
        let (arch, s, k, mut m) = observations(16);
        m[..20].fill(0); // row 0: nothing allowed
        let flat = Vec::<f32>::try_from(&net(&arch).flat).unwrap();
        let mut host = ProofHost::new(arch, &flat);
        let mut rng = HostRng::new(9);
        for _ in 0..50 {
            let u: Vec<f32> = (0..16).map(|_| rng.next_f32()).collect();
            let (mut a, mut lp, mut v) = (vec![0i64; 16], vec![0f32; 16], vec![0f32; 16]);
            host.act(&s, &k, &m, &u, ActOut { actions: &mut a, real: &mut [], log_probs: &mut lp, values: &mut v });
            assert!((lp[0] - (1.0f32 / 20.0).ln()).abs() < 1e-5, "nothing allowed: uniform");
            for e in 1..16 {
                if m[e * 20..(e + 1) * 20].iter().any(|&x| x != 0) {
                    assert_eq!(m[e * 20 + a[e] as usize], 1, "row {e} picked a masked successor");
                    assert!(lp[e] <= 0.0);
                }
            }
        }
    }
}
