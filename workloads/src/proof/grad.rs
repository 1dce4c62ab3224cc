//! The proof policy's PPO minibatch step on the host in fp32: [`ProofHost`]'s forward,
//! the loss heads over each row's allowed successors, and the backward written out by
//! hand (checked against autograd on the loss's definition, [`hotlab_train::ppo::loss::loss_from`]).
//!
//! The backward mirrors the forward's shortcut: gradients of the goal pre-activations
//! are scattered into `∂P` (`[3V, H]`), and the table's and the goal layer's gradients
//! come from it at the end, `∂E = ∂P·Wᵀ` and `∂W = Eᵀ·∂P`. Masked-out successors get no
//! gradient (their logits are constants). The `[N, H]·[H, H]` products go to libtorch.

use crate::proof::goals::{GOAL_WIDTH, PAD};
use crate::proof::host::{axpy, fma_entry, matmul, slot, Mat, ProofHost};
use crate::proof::policy::ProofArch;
use hotlab_spec::RunSpec;
use hotlab_train::distribution::MASKED_LOGIT;
use hotlab_train::models::mlp::grad_host::value_head;
use hotlab_train::models::mlp::grad_host::PolicySums;
use std::time::Instant;

/// One minibatch: the rollout's three index fields whole, read at `index`, and the
/// minibatch's own rows of the rest.
#[derive(Clone, Copy)]
pub struct ProofRows<'a> {
    /// `[T·N, 30]`, `[T·N, K·30]`, `[T·N, K]`.
    pub state: &'a [i64],
    pub succ: &'a [i64],
    pub mask: &'a [i64],
    /// The minibatch's rows of the three fields above.
    pub index: &'a [i64],
    pub actions: &'a [i64],
    pub old_log_probs: &'a [f32],
    /// Normalized over the minibatch.
    pub advantages: &'a [f32],
    pub returns: &'a [f32],
    pub old_values: &'a [f32],
}

/// The forward's values and the scratch of the backward, kept across minibatches.
pub struct ProofGrad {
    host: ProofHost,
    /// ∂loss/∂logit of each allowed successor (the tape's order), and ∂loss/∂value.
    d_logits: Vec<f32>,
    d_value: Vec<f32>,
    /// `[N, 2H]`: ∂ of the value layer's and of the score layer's pre-activations.
    d_pre: Vec<f32>,
    d_hs: Vec<f32>,
    d_proj: Vec<f32>,
    /// `[V0 | S]`, `[H, 2H]`.
    stacked: Vec<f32>,
}

impl ProofGrad {
    pub fn new(arch: ProofArch, flat: &[f32]) -> Self {
        Self {
            host: ProofHost::new(arch, flat),
            d_logits: Vec::new(),
            d_value: Vec::new(),
            d_pre: Vec::new(),
            d_hs: Vec::new(),
            d_proj: Vec::new(),
            stacked: Vec::new(),
        }
    }

    /// The forward and the loss heads with the weights in `flat`: returns the loss
    /// statistics `[pg, v, entropy, approx_kl, clipfrac]` and the seconds the
    /// embedding lookups took.
    pub fn forward(&mut self, flat: &[f32], rows: ProofRows<'_>, spec: &RunSpec) -> ([f64; 5], f64) {
        let n = rows.index.len();
        self.host.load(flat);
        let start = Instant::now();
        self.host.embed(rows.state, rows.succ, rows.mask, Some(rows.index));
        let lookup_s = start.elapsed().as_secs_f64();
        self.host.heads();
        let t = &self.host.tape;
        self.d_logits.resize(t.logits.len(), 0.0);
        self.d_value.resize(n, 0.0);
        let ps = masked_policy_head(&self.host, rows, spec, &mut self.d_logits);
        let vs =
            value_head(&t.values, rows.returns, rows.old_values, spec.ppo.clip, spec.ppo.vf_coef, &mut self.d_value);
        let r = n as f64;
        ([ps.pg_loss / r, 0.5 * vs / r, ps.entropy / r, ps.approx_kl / r, ps.clipped / r], lookup_s)
    }

    /// The gradient of the last [`ProofGrad::forward`]'s loss, written into `grad`
    /// (the flat layout of [`ProofArch::layout`]).
    pub fn backward(&mut self, flat: &[f32], rows: ProofRows<'_>, grad: &mut [f32]) {
        let arch = self.host.arch.clone();
        let (v3, d, h, n) = (3 * arch.vocab, arch.embed, arch.hidden, rows.index.len());
        let layout = arch.layout();
        let range = |i: usize| layout[i].offset as usize..(layout[i].offset + layout[i].numel()) as usize;
        grad.fill(0.0);
        self.d_pre.resize(n * 2 * h, 0.0);
        self.d_hs.resize(n * h, 0.0);
        self.d_proj.clear();
        self.d_proj.resize(v3 * h, 0.0);
        // The heads, row by row: value and score pre-activations, the successors' goals.
        heads_backward(self, rows, grad);
        // The two H×H layers: weight gradients Hsᵀ·∂pre, and ∂hs = ∂pre·[V0 | S]ᵀ.
        let mut both = vec![0f32; h * 2 * h];
        matmul(Mat::of(&self.host.tape.hs, (n, h)).t(), Mat::of(&self.d_pre, (n, 2 * h)), &mut both);
        for i in 0..h {
            let (r0, rs) = (range(slot::VALUE0_W), range(slot::SCORE_W));
            grad[r0.start + i * h..r0.start + (i + 1) * h].copy_from_slice(&both[i * 2 * h..i * 2 * h + h]);
            grad[rs.start + i * h..rs.start + (i + 1) * h].copy_from_slice(&both[i * 2 * h + h..(i + 1) * 2 * h]);
        }
        self.stacked.resize(h * 2 * h, 0.0);
        for i in 0..h {
            self.stacked[i * 2 * h..i * 2 * h + h].copy_from_slice(&self.host.value0_w[i * h..(i + 1) * h]);
            self.stacked[i * 2 * h + h..(i + 1) * 2 * h].copy_from_slice(&self.host.score_w[i * h..(i + 1) * h]);
        }
        matmul(Mat::of(&self.d_pre, (n, 2 * h)), Mat::of(&self.stacked, (h, 2 * h)).t(), &mut self.d_hs);
        // The states' goals.
        state_backward(self, rows, grad);
        // ∂W = Eᵀ·∂P and ∂E = ∂P·Wᵀ.
        let (e_tab, w) = (&flat[range(slot::EMBED)], &flat[range(slot::GOAL_W)]);
        matmul(Mat::of(e_tab, (v3, d)).t(), Mat::of(&self.d_proj, (v3, h)), &mut grad[range(slot::GOAL_W)]);
        matmul(Mat::of(&self.d_proj, (v3, h)), Mat::of(w, (d, h)).t(), &mut grad[range(slot::EMBED)]);
    }
}

fma_entry!(fn heads_backward = heads_backward_body(p: &mut ProofGrad, rows: ProofRows, grad: &mut [f32]));
fma_entry!(fn state_backward = state_backward_body(p: &mut ProofGrad, rows: ProofRows, grad: &mut [f32]));

/// The clipped surrogate and the entropy bonus over each row's allowed successors (the
/// masked ones have probability 0); ∂loss/∂logit into `d_logits`, in the tape's order.
/// A row with nothing allowed is uniform over all `K` slots and has no gradient.
fn masked_policy_head(host: &ProofHost, rows: ProofRows<'_>, spec: &RunSpec, d_logits: &mut [f32]) -> PolicySums {
    let t = &host.tape;
    let n = rows.index.len();
    let k = host.arch.successors as f32;
    let (lo, hi) = (1.0 - spec.ppo.clip as f32, 1.0 + spec.ppo.clip as f32);
    let c_ent = spec.ppo.ent_coef as f32 / n as f32;
    let mut sums = PolicySums::default();
    for e in 0..n {
        let range = t.first[e]..t.first[e + 1];
        let action = rows.actions[e];
        let (new_lp, neg_ent, lse) = match range.is_empty() {
            true => (-k.ln(), -k.ln(), 0.0),
            false => {
                let z = &t.logits[range.clone()];
                let max = z.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let lse = max + z.iter().map(|&l| (l - max).exp()).sum::<f32>().ln();
                let chosen = range.clone().find(|&c| t.slot[c] as i64 == action);
                let new_lp = chosen.map_or(MASKED_LOGIT as f32, |c| t.logits[c]) - lse;
                let neg_ent = z.iter().map(|&l| (l - lse).exp() * (l - lse)).sum();
                (new_lp, neg_ent, lse)
            }
        };
        let log_ratio = new_lp - rows.old_log_probs[e];
        let ratio = log_ratio.exp();
        let clipped = ratio.clamp(lo, hi);
        let a = rows.advantages[e];
        let d_lp = if a * (ratio - clipped) <= 0.0 { -(a * ratio) / n as f32 } else { 0.0 };
        for c in range {
            let lp = t.logits[c] - lse;
            let hit = if t.slot[c] as i64 == action { d_lp } else { 0.0 };
            d_logits[c] = lp.exp() * ((lp - neg_ent) * c_ent - d_lp) + hit;
        }
        sums.pg_loss -= (a * ratio).min(a * clipped) as f64;
        sums.entropy -= neg_ent as f64;
        sums.approx_kl += ((ratio - 1.0) - log_ratio) as f64;
        sums.clipped += ((ratio - 1.0).abs() > spec.ppo.clip as f32) as u8 as f64;
    }
    sums
}

/// `d[c] = scale · x[c] · (1 − y[c]²)`: through a tanh whose output is `y`.
#[inline(always)]
fn through_tanh(scale: f32, x: &[f32], y: &[f32], d: &mut [f32]) {
    d.iter_mut().zip(x.iter().zip(y)).for_each(|(d, (&x, &y))| *d = scale * x * (1.0 - y * y));
}

/// Adds `inv · d_pre` to the `∂P` row of each index of a goal list.
#[inline(always)]
fn scatter<const FMA: bool>(d_pre: &[f32], inv: f32, row: &[i64], vocab: usize, d_proj: &mut [f32]) {
    let h = d_pre.len();
    if inv == 0.0 {
        return;
    }
    for (i, &t) in row.iter().enumerate() {
        if t != PAD {
            let r = (i % 3) * vocab + t as usize;
            axpy::<FMA>(inv, d_pre, &mut d_proj[r * h..(r + 1) * h]);
        }
    }
}

/// Splits the flat gradient into its nine slots.
fn slots<'g>(arch: &ProofArch, grad: &'g mut [f32]) -> Vec<&'g mut [f32]> {
    let mut parts = Vec::with_capacity(9);
    let mut rest = grad;
    for s in arch.layout() {
        let (part, tail) = rest.split_at_mut(s.numel() as usize);
        parts.push(part);
        rest = tail;
    }
    parts
}

#[inline(always)]
fn heads_backward_body<const FMA: bool>(p: &mut ProofGrad, rows: ProofRows, grad: &mut [f32]) {
    let arch = &p.host.arch;
    let (v, h, k) = (arch.vocab, arch.hidden, arch.successors);
    let mut parts = slots(arch, grad);
    let [_, _, d_goal_b, _, d_score_b, _, d_v0_b, d_v1_w, d_v1_b] = &mut parts[..] else {
        unreachable!("the proof net has nine parameter slots");
    };
    let t = &p.host.tape;
    let mut d_goal = vec![0f32; h];
    for e in 0..rows.index.len() {
        let (u, g) = (&t.u[e * h..(e + 1) * h], &t.g[e * h..(e + 1) * h]);
        let (d_pre_u, d_g) = p.d_pre[e * 2 * h..(e + 1) * 2 * h].split_at_mut(h);
        // The value head: value = v1·u + b1 with u = tanh(hs·V0 + b0).
        let dv = p.d_value[e];
        d_v1_b[0] += dv;
        axpy::<FMA>(dv, u, d_v1_w);
        through_tanh(dv, &p.host.value1_w, u, d_pre_u);
        axpy::<FMA>(1.0, d_pre_u, d_v0_b);
        // The scores: logit = h_succ·g with g = hs·S + s.
        d_g.fill(0.0);
        let r = t.src[e];
        for c in t.first[e]..t.first[e + 1] {
            let dl = p.d_logits[c];
            let hk = &t.hk[c * h..(c + 1) * h];
            axpy::<FMA>(dl, hk, d_g);
            through_tanh(dl, g, hk, &mut d_goal);
            axpy::<FMA>(1.0, &d_goal, d_goal_b);
            let i = r * k + t.slot[c] as usize;
            scatter::<FMA>(&d_goal, t.hk_inv[c], &rows.succ[i * GOAL_WIDTH..(i + 1) * GOAL_WIDTH], v, &mut p.d_proj);
        }
        axpy::<FMA>(1.0, d_g, d_score_b);
    }
}

#[inline(always)]
fn state_backward_body<const FMA: bool>(p: &mut ProofGrad, rows: ProofRows, grad: &mut [f32]) {
    let arch = &p.host.arch;
    let (v, h) = (arch.vocab, arch.hidden);
    let mut parts = slots(arch, grad);
    let d_goal_b = &mut parts[slot::GOAL_B];
    let t = &p.host.tape;
    let mut d_goal = vec![0f32; h];
    for e in 0..rows.index.len() {
        let hs = &t.hs[e * h..(e + 1) * h];
        through_tanh(1.0, &p.d_hs[e * h..(e + 1) * h], hs, &mut d_goal);
        axpy::<FMA>(1.0, &d_goal, d_goal_b);
        let r = t.src[e];
        scatter::<FMA>(&d_goal, t.hs_inv[e], &rows.state[r * GOAL_WIDTH..(r + 1) * GOAL_WIDTH], v, &mut p.d_proj);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proof::host::tests::{net, observations};
    use hotlab_env::rng::HostRng;
    use hotlab_train::ppo::loss::{loss_from, Forward};
    use hotlab_train::rollout::Batch;
    use tch::{Kind, Tensor};

    #[test]
    fn host_gradient_matches_autograd() {
        let n = 96usize;
        let (arch, s, k, m) = observations(n);
        let mut net = net(&arch);
        let t = |v: &[i64], shape: &[i64]| Tensor::from_slice(v).view(shape);
        let (state, succ, mask) = (t(&s, &[n as i64, 30]), t(&k, &[n as i64, 600]), t(&m, &[n as i64, 20]));
        // Actions among the allowed successors, and old log-probs off the current ones
        // so that some ratios are clipped.
        let mut rng = HostRng::new(4);
        let actions: Vec<i64> = (0..n)
            .map(|e| {
                let allowed: Vec<i64> = (0..20).filter(|&j| m[e * 20 + j as usize] != 0).collect();
                match allowed.is_empty() {
                    true => (rng.next_u64() % 20) as i64,
                    false => allowed[rng.next_u64() as usize % allowed.len()],
                }
            })
            .collect();
        let out = tch::no_grad(|| net.forward(&state.view([n as i64, 1, 10, 3]), &succ.view([n as i64, 20, 10, 3])));
        let (lp, _) = hotlab_train::distribution::log_prob_and_entropy(
            &out.logits,
            Some(&mask.ne(0)),
            &[20],
            &Tensor::from_slice(&actions).view([n as i64, 1]),
        );
        let mb = Batch {
            obs: state.shallow_clone(),
            extra: vec![succ.shallow_clone(), mask.shallow_clone()],
            actions: Tensor::from_slice(&actions).view([n as i64, 1]),
            real_actions: None,
            log_probs: lp + Tensor::randn([n as i64], (Kind::Float, tch::Device::Cpu)) * 0.3,
            values: Tensor::randn([n as i64], (Kind::Float, tch::Device::Cpu)),
            advantages: Tensor::randn([n as i64], (Kind::Float, tch::Device::Cpu)) * 2.0 + 0.5,
            returns: Tensor::randn([n as i64], (Kind::Float, tch::Device::Cpu)),
            memory: None,
        };
        let spec = RunSpec {
            ppo: hotlab_core::run::PpoSpec { ent_coef: 0.05, ..hotlab_core::run::PpoSpec::default() },
            ..RunSpec::default()
        };
        net.zero_grad();
        let fwd = net.forward(&state.view([n as i64, 1, 10, 3]), &succ.view([n as i64, 20, 10, 3]));
        let (loss, stats) = loss_from(
            Forward { logits: &fwd.logits, mask: Some(&mask.ne(0)), value: &fwd.value },
            &mb,
            &[20],
            &spec,
            true,
            None,
        );
        loss.backward();
        let want = Vec::<f32>::try_from(&net.flat_grad).unwrap();
        let want_stats = Vec::<f64>::try_from(stats.unwrap().to_kind(Kind::Double)).unwrap();

        let flat = Vec::<f32>::try_from(&net.flat).unwrap();
        let adv = hotlab_train::ppo::advantages::normalize_per_minibatch_host(&mb.advantages, 1);
        // The host reads the rows in reverse order (a shuffled minibatch): the loss is a
        // mean over rows, so the gradient is the same.
        let index: Vec<i64> = (0..n as i64).rev().collect();
        let f32s = |t: &Tensor| {
            let v = Vec::<f32>::try_from(t.reshape([-1])).unwrap();
            index.iter().map(|&r| v[r as usize]).collect::<Vec<f32>>()
        };
        let (old_lp, adv, ret, old_v) = (f32s(&mb.log_probs), f32s(&adv), f32s(&mb.returns), f32s(&mb.values));
        let rev_actions: Vec<i64> = index.iter().map(|&r| actions[r as usize]).collect();
        let rows = ProofRows {
            state: &s,
            succ: &k,
            mask: &m,
            index: &index,
            actions: &rev_actions,
            old_log_probs: &old_lp,
            advantages: &adv,
            returns: &ret,
            old_values: &old_v,
        };
        let mut pg = ProofGrad::new(arch.clone(), &flat);
        let mut got = vec![f32::NAN; flat.len()];
        let (stats, _) = pg.forward(&flat, rows, &spec);
        pg.backward(&flat, rows, &mut got);
        let scale = want.iter().fold(0f32, |a, &b| a.max(b.abs()));
        assert!(scale > 1e-3, "the reference gradient is not trivial");
        for (slot, s) in arch.layout().iter().enumerate() {
            let range = s.offset as usize..(s.offset + s.numel()) as usize;
            let worst = got[range.clone()].iter().zip(&want[range]).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
            assert!(worst <= 1e-4 + 1e-3 * scale, "slot {slot} ({}): worst difference {worst} (scale {scale})", s.name);
        }
        for (g, w) in stats.iter().zip(&want_stats) {
            assert!((g - w).abs() <= 1e-4 * w.abs().max(1.0), "stats {stats:?} vs {want_stats:?}");
        }
        assert!(want_stats[4] > 0.0, "some ratios were clipped");
    }
}
