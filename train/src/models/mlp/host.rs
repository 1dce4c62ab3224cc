//! The fused rollout forward: the actor-critic MLP evaluated in plain Rust, sampling
//! included, with the weights copied out of libtorch once per update.
//!
//! At CleanRL's 4 envs a libtorch forward costs ~20 dispatched ops per step and the
//! arithmetic is a few microseconds; here the whole step is one function call. The
//! inner loops work on 8-wide column blocks so the compiler keeps the accumulator in a
//! vector register; `tanh` is [`crate::kernels::fast_tanh`], which vectorizes.

use crate::distribution::gaussian;
use crate::kernels::tanh_with;
use crate::models::mlp::policy::{Architecture, LOG_STD};
use crate::params::ParamSlot;
use hotlab_env::rng::HostRng;

#[derive(Clone)]
struct Dense {
    inp: usize,
    out: usize,
    /// `[inp, out]`, row-major.
    w: Vec<f32>,
    b: Vec<f32>,
}

impl Dense {
    /// `y = x @ w + b` for one sample. Columns go in panels of 64: the panel's
    /// accumulators stay in 8 vector registers while the rows of `w` stream past, so
    /// the FMAs are independent (one chain would wait on each FMA's latency). `FMA`
    /// selects fused multiply-adds, compiled only where the CPU has them.
    #[inline(always)]
    fn forward<const FMA: bool>(&self, x: &[f32], y: &mut [f32]) {
        const P: usize = 64;
        let madd = |a: f32, b: f32, c: f32| if FMA { a.mul_add(b, c) } else { a * b + c };
        let out = self.out;
        let panels = out / P;
        for p in 0..panels {
            let j = p * P;
            let mut acc = [0f32; P];
            acc.copy_from_slice(&self.b[j..j + P]);
            for (i, &xi) in x.iter().enumerate() {
                let row: &[f32; P] = self.w[i * out + j..i * out + j + P].try_into().unwrap();
                for k in 0..P {
                    acc[k] = madd(xi, row[k], acc[k]);
                }
            }
            y[j..j + P].copy_from_slice(&acc);
        }
        // Narrow layers (the heads) and the remainder: one dot product per column.
        for (j, yj) in y[..out].iter_mut().enumerate().skip(panels * P) {
            let mut acc = self.b[j];
            for (i, &xi) in x.iter().enumerate() {
                acc = madd(xi, self.w[i * out + j], acc);
            }
            *yj = acc;
        }
    }
}

#[inline(always)]
fn mlp_body<const FMA: bool>(layers: &[Dense], x: &[f32], a: &mut Vec<f32>, b: &mut Vec<f32>) {
    a.clear();
    a.extend_from_slice(x);
    for (l, layer) in layers.iter().enumerate() {
        b.resize(layer.out, 0.0);
        layer.forward::<FMA>(a, b);
        if l + 1 < layers.len() {
            b.iter_mut().for_each(|v| *v = tanh_with::<FMA>(*v));
        }
        std::mem::swap(a, b);
    }
}

/// The same body compiled for AVX2 + FMA (the binary's baseline is plain x86-64, and
/// the GPU boxes' CPUs differ from this one, so the choice is made at run time).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn mlp_avx2(layers: &[Dense], x: &[f32], a: &mut Vec<f32>, b: &mut Vec<f32>) {
    mlp_body::<true>(layers, x, a, b)
}

/// Runs `layers` on one input; the output is left in `a`.
fn mlp(layers: &[Dense], x: &[f32], a: &mut Vec<f32>, b: &mut Vec<f32>) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has the features the function was compiled for.
        return unsafe { mlp_avx2(layers, x, a, b) };
    }
    mlp_body::<false>(layers, x, a, b)
}

/// The actor-critic's rollout forward on the host.
#[derive(Clone)]
pub struct FusedPolicy {
    arch: Architecture,
    actor: Vec<Dense>,
    critic: Vec<Dense>,
    /// The Gaussian head's log-std (empty without one).
    log_std: Vec<f32>,
    a: Vec<f32>,
    b: Vec<f32>,
}

/// One step of actions for a batch, written by [`FusedPolicy::act`].
pub struct ActOut<'a> {
    /// `[N, heads]`
    pub actions: &'a mut [i64],
    /// `[N, gaussian]`, the Gaussian head's actions (empty without one).
    pub real: &'a mut [f32],
    /// `[N]`
    pub log_probs: &'a mut [f32],
    /// `[N]`
    pub values: &'a mut [f32],
}

impl FusedPolicy {
    pub fn new(arch: &Architecture, flat: &[f32]) -> Self {
        let (actor, critic, log_std, a, b) = (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut p = Self { arch: arch.clone(), actor, critic, log_std, a, b };
        p.load(flat);
        p
    }

    /// Copies the weights (call after every update).
    pub fn load(&mut self, flat: &[f32]) {
        let mut layout = self.arch.layout();
        let take = |s: &ParamSlot| flat[s.offset as usize..(s.offset + s.numel()) as usize].to_vec();
        self.log_std = layout.iter().find(|s| s.name == LOG_STD).map(take).unwrap_or_default();
        layout.retain(|s| s.name != LOG_STD);
        let mut layers: Vec<Dense> = layout
            .chunks_exact(2)
            .map(|wb| Dense {
                inp: wb[0].shape[0] as usize,
                out: wb[0].shape[1] as usize,
                w: take(&wb[0]),
                b: take(&wb[1]),
            })
            .collect();
        self.critic = layers.split_off(self.arch.depth());
        self.actor = layers;
        debug_assert!(self.actor.iter().chain(&self.critic).all(|d| d.w.len() == d.inp * d.out));
    }

    /// The critic's value of one observation.
    pub fn value(&mut self, obs: &[f32]) -> f32 {
        mlp(&self.critic, obs, &mut self.a, &mut self.b);
        self.a[0]
    }

    /// The actor's output for one observation: the logits, then the Gaussian's means.
    pub fn logits(&mut self, obs: &[f32]) -> &[f32] {
        mlp(&self.actor, obs, &mut self.a, &mut self.b);
        &self.a[..self.arch.outputs()]
    }

    /// The Gaussian head's log-std (empty without one).
    pub fn log_std(&self) -> &[f32] {
        &self.log_std
    }

    /// Samples an action for every env of `obs` (`[N, obs_dim]`) and records its
    /// log-probability and the state's value. `mask` is `[N, logits]`, true = allowed.
    pub fn act(&mut self, obs: &[f32], mask: Option<&[bool]>, heads: &[usize], rng: &mut HostRng, out: ActOut<'_>) {
        let noise = Noise::draw(obs.len() / self.arch.obs_dim, heads.len(), self.arch.gaussian, rng);
        self.act_with(obs, mask, heads, noise.part(0, obs.len() / self.arch.obs_dim), out);
    }

    /// [`FusedPolicy::act`] with the sampling's noise given (in the order `act` draws it),
    /// so that a batch split across threads samples what one thread would.
    pub fn act_with(
        &mut self,
        obs: &[f32],
        mask: Option<&[bool]>,
        heads: &[usize],
        noise: NoiseRows<'_>,
        out: ActOut<'_>,
    ) {
        let d = self.arch.obs_dim;
        let width = self.arch.logits;
        let dims = self.arch.gaussian;
        let uniforms = noise.uniforms;
        for (e, x) in obs.chunks_exact(d).enumerate() {
            out.values[e] = self.value(x);
            mlp(&self.actor, x, &mut self.a, &mut self.b);
            let mut start = 0;
            let mut log_prob = 0.0;
            for (h, &n) in heads.iter().enumerate() {
                let logits = &self.a[start..start + n];
                let allowed = |k: usize| mask.is_none_or(|m| m[e * width + start + k]);
                let (pick, lp) = sample_head(logits, allowed, uniforms[e * heads.len() + h]);
                out.actions[e * heads.len() + h] = pick as i64;
                log_prob += lp;
                start += n;
            }
            if dims > 0 {
                let (mean, normals) = (&self.a[width..width + dims], &noise.normals[e * dims..(e + 1) * dims]);
                log_prob += gaussian::sample_row(mean, &self.log_std, normals, &mut out.real[e * dims..(e + 1) * dims]);
            }
            out.log_probs[e] = log_prob;
        }
    }
}

/// One step's sampling noise for a batch: a uniform per env and categorical head, then a
/// standard normal per env and Gaussian component, drawn in that order.
pub struct Noise {
    heads: usize,
    dims: usize,
    uniforms: Vec<f32>,
    normals: Vec<f32>,
}

/// The noise of some of a batch's rows.
#[derive(Clone, Copy)]
pub struct NoiseRows<'a> {
    pub uniforms: &'a [f32],
    pub normals: &'a [f32],
}

impl Noise {
    /// For `envs` envs of `heads` categorical heads and `dims` Gaussian components.
    pub fn draw(envs: usize, heads: usize, dims: usize, rng: &mut HostRng) -> Self {
        let uniforms = draw_uniforms(envs * heads, rng);
        Self { heads, dims, uniforms, normals: gaussian::draw_normals(envs * dims, rng) }
    }

    /// Rows `first .. first + rows`.
    pub fn part(&self, first: usize, rows: usize) -> NoiseRows<'_> {
        NoiseRows {
            uniforms: &self.uniforms[first * self.heads..(first + rows) * self.heads],
            normals: &self.normals[first * self.dims..(first + rows) * self.dims],
        }
    }
}

/// `n` uniforms from `rng`, in order.
pub fn draw_uniforms(n: usize, rng: &mut HostRng) -> Vec<f32> {
    (0..n).map(|_| rng.next_f32()).collect()
}

/// Inverse-CDF sample of one categorical head; returns (choice, log-probability).
pub fn sample_head(logits: &[f32], allowed: impl Fn(usize) -> bool, u: f32) -> (usize, f32) {
    let max = (0..logits.len()).filter(|&k| allowed(k)).map(|k| logits[k]).fold(f32::NEG_INFINITY, f32::max);
    let mut total = 0.0;
    for (k, &l) in logits.iter().enumerate() {
        if allowed(k) {
            total += (l - max).exp();
        }
    }
    let target = u * total;
    let mut cum = 0.0;
    let mut pick = None;
    for (k, &l) in logits.iter().enumerate() {
        if allowed(k) {
            cum += (l - max).exp();
            pick = Some(k);
            if cum > target {
                break;
            }
        }
    }
    let pick = pick.expect("at least one allowed action per head");
    (pick, logits[pick] - max - total.ln())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::mlp::policy::ActorCritic;
    use tch::{Device, Kind, Tensor};

    #[test]
    fn fused_forward_matches_libtorch() {
        let _seeded = crate::testing::torch_seed(4);
        let arch = Architecture { obs_dim: 4, hidden: vec![64, 64], logits: 2, gaussian: 0 };
        let mut net = ActorCritic::new(arch.clone(), Device::Cpu);
        // Bigger weights than the init so that the tanh are not all near-linear.
        tch::no_grad(|| {
            let _ = net.flat.g_add_(&(Tensor::randn_like(&net.flat) * 0.3));
        });
        let mut fused = FusedPolicy::new(&arch, &net.host_params());
        let obs = Tensor::randn([16, 4], (Kind::Float, Device::Cpu));
        let want_logits = Vec::<f32>::try_from(net.logits(&obs).detach().reshape([-1])).unwrap();
        let want_values = Vec::<f32>::try_from(net.value(&obs).detach()).unwrap();
        let x = Vec::<f32>::try_from(obs.reshape([-1])).unwrap();
        for e in 0..16 {
            let row = &x[e * 4..e * 4 + 4];
            let got = fused.logits(row).to_vec();
            for k in 0..2 {
                assert!((got[k] - want_logits[e * 2 + k]).abs() < 1e-4, "logit {e},{k}");
            }
            assert!((fused.value(row) - want_values[e]).abs() < 1e-4, "value {e}");
        }
    }

    #[test]
    fn sampling_follows_probabilities_and_respects_the_mask() {
        let mut rng = HostRng::new(1);
        let logits = [0f32, 2f32.ln(), 10.0];
        let mut counts = [0usize; 3];
        for _ in 0..30_000 {
            let (k, lp) = sample_head(&logits, |k| k != 2, rng.next_f32());
            counts[k] += 1;
            let want = if k == 0 { (1.0f32 / 3.0).ln() } else { (2.0f32 / 3.0).ln() };
            assert!((lp - want).abs() < 1e-5);
        }
        assert_eq!(counts[2], 0);
        let share = counts[1] as f64 / 30_000.0;
        assert!((share - 2.0 / 3.0).abs() < 0.02, "{share}");
    }
}
