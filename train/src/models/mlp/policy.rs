//! The actor-critic: two separate tanh MLPs (CleanRL's `Agent`), their parameters
//! stored in one flat tensor. The actor's output is its heads side by side: the
//! categorical heads' logits, then a Box action's Gaussian means; the Gaussian's log-std
//! is a parameter of its own (`actor.logstd`, CleanRL's `actor_logstd`).
//!
//! Each weight is a leaf view into `flat`, and each gradient is a view into `flat_grad`,
//! so that the optimizer, the gradient clip and zeroing act on one tensor each
//! (see [`crate::adam`] for why).

use crate::kernels;
use crate::params::{FlatParams, ParamSlot};
use tch::{Device, Kind, Tensor};

/// Layer sizes of the two networks.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Architecture {
    pub obs_dim: usize,
    pub hidden: Vec<usize>,
    /// The choices of all categorical heads (their logits lead the actor's output).
    pub logits: usize,
    /// Components of the diagonal Gaussian head (a Box action): their means follow the
    /// logits in the actor's output, their log-std is `actor.logstd`. 0 for none (and then
    /// not written, so a categorical network's shape reads as it always did).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub gaussian: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Architecture {
    /// The flat layout: actor layers then critic layers; each layer a weight
    /// `[in, out]` (so `x @ w` needs no transpose) and a bias `[out]`; then the
    /// Gaussian's log-std, where there is one.
    pub fn layout(&self) -> Vec<ParamSlot> {
        let mut slots = Vec::new();
        let mut offset = 0;
        for (net, out) in [("actor", self.outputs()), ("critic", 1)] {
            let mut widths = vec![self.obs_dim];
            widths.extend(&self.hidden);
            widths.push(out);
            for (l, w) in widths.windows(2).enumerate() {
                for (kind, shape) in [("w", vec![w[0] as i64, w[1] as i64]), ("b", vec![w[1] as i64])] {
                    let slot = ParamSlot { name: format!("{net}.{l}.{kind}"), shape, offset };
                    offset += slot.numel();
                    slots.push(slot);
                }
            }
        }
        if self.gaussian > 0 {
            slots.push(ParamSlot { name: LOG_STD.into(), shape: vec![self.gaussian as i64], offset });
        }
        slots
    }

    /// Width of the actor's output: the logits, then the Gaussian's means.
    pub fn outputs(&self) -> usize {
        self.logits + self.gaussian
    }

    pub fn num_params(&self) -> i64 {
        self.layout().iter().map(ParamSlot::numel).sum()
    }

    /// Layers per network (hidden layers + output layer).
    pub fn depth(&self) -> usize {
        self.hidden.len() + 1
    }
}

/// The Gaussian head's log-std in the layout (initialised at 0: σ = 1).
pub const LOG_STD: &str = "actor.logstd";

pub struct ActorCritic {
    pub arch: Architecture,
    pub layout: Vec<ParamSlot>,
    /// Every parameter, concatenated.
    pub flat: Tensor,
    /// Every gradient, concatenated (filled by `backward`).
    pub flat_grad: Tensor,
    /// Leaf views into `flat`, in layout order; gradients accumulate into `flat_grad`.
    params: Vec<Tensor>,
    /// Views into `flat_grad`, in layout order (the hand-written backward writes here).
    grads: Vec<Tensor>,
}

/// One network's training forward: each layer's input (the previous layer's tanh
/// output) and the network's output; what [`Mlp::backward_taped`] needs.
pub struct Tape {
    inputs: Vec<Tensor>,
    pub out: Tensor,
}

/// Gains of CleanRL's `layer_init`: √2 for hidden layers, 0.01 for the policy head, 1 for the value head.
fn init_gain(net: &str, layer: usize, depth: usize) -> f64 {
    match (layer + 1 == depth, net) {
        (false, _) => 2f64.sqrt(),
        (true, "actor") => 0.01,
        (true, _) => 1.0,
    }
}

/// PyTorch's `nn.init.orthogonal_` for a `[rows, cols]` matrix (on the CPU).
fn orthogonal(rows: i64, cols: i64, gain: f64) -> Tensor {
    let flat = Tensor::randn([rows, cols], (Kind::Float, Device::Cpu));
    let transposed = rows < cols;
    let a = if transposed { flat.tr() } else { flat };
    let (q, r) = Tensor::linalg_qr(&a, "reduced");
    let q = q * r.diagonal(0, 0, 1).sign().unsqueeze(0);
    let q = if transposed { q.tr() } else { q };
    q * gain
}

/// `tanh`, computed as `2·sigmoid(2x) − 1` on large tensors: the same function, but
/// libtorch's CPU `tanh` costs about 7× its `sigmoid` (0.72 vs 0.10 ms on 4096×64 floats,
/// one AVX-512 core), which made the tanh layers a third of the update at the `wide`
/// preset. Small tensors keep the single op: there dispatch, not arithmetic, is the cost.
pub fn tanh(x: &Tensor) -> Tensor {
    const LARGE: i64 = 1 << 15;
    if x.numel() as i64 >= LARGE && x.device() == Device::Cpu {
        (x * 2.0).sigmoid() * 2.0 - 1.0
    } else {
        x.tanh()
    }
}

/// `tanh` of a freshly computed tensor that nothing else refers to, in place where that
/// is safe and faster: libtorch's CPU `tanh` takes 22 µs on 128×64 floats (an add takes
/// 2), the native vectorized one about 1. Outside autograd only: no backward node is made.
fn tanh_fresh(z: Tensor) -> Tensor {
    if z.device() == Device::Cpu && z.kind() == Kind::Float && z.is_contiguous() && !z.requires_grad() {
        let n = z.numel();
        // SAFETY: `z` is a contiguous f32 CPU tensor of `n` elements that this function
        // owns (no view of it exists), so the slice is valid and not aliased.
        let xs = unsafe { std::slice::from_raw_parts_mut(z.data_ptr() as *mut f32, n) };
        crate::kernels::tanh_in_place(xs);
        z
    } else {
        tanh(&z)
    }
}

crate::flat_network!(ActorCritic);

impl ActorCritic {
    /// A freshly initialized network; uses libtorch's global generator (seed it first).
    pub fn new(arch: Architecture, device: Device) -> Self {
        let layout = arch.layout();
        let depth = arch.depth();
        let host = Tensor::zeros([arch.num_params()], (Kind::Float, Device::Cpu));
        // Biases and the log-std start at 0.
        for slot in layout.iter().filter(|s| s.name != LOG_STD) {
            let mut parts = slot.name.split('.');
            let (net, layer, kind) = (parts.next().unwrap(), parts.next().unwrap(), parts.next().unwrap());
            if kind == "w" {
                let layer: usize = layer.parse().unwrap();
                // torch stores Linear weights as [out, in]; ours is the transpose.
                let w = orthogonal(slot.shape[1], slot.shape[0], init_gain(net, layer, depth)).tr();
                host.narrow(0, slot.offset, slot.numel()).copy_(&w.reshape([-1]));
            }
        }
        Self::from_flat(arch, host.to_device(device))
    }

    /// A network whose parameters are `flat` (e.g. loaded from a checkpoint).
    pub fn from_flat(arch: Architecture, flat: Tensor) -> Self {
        let layout = arch.layout();
        assert_eq!(flat.size(), [arch.num_params()], "flat parameter vector size");
        let (layout, flat, flat_grad, params) = FlatParams::new(layout, flat).into_parts();
        let grads = layout.iter().map(|s| flat_grad.narrow(0, s.offset, s.numel()).view(s.shape.as_slice())).collect();
        let mut net = Self { arch, layout, flat, flat_grad, params, grads };
        net.zero_grad();
        net
    }

    pub fn device(&self) -> Device {
        self.flat.device()
    }

    pub fn zero_grad(&mut self) {
        let _ = self.flat_grad.zero_();
    }

    fn mlp(&self, x: &Tensor, first: usize) -> Tensor {
        let depth = self.arch.depth();
        let mut h = x.shallow_clone();
        for l in 0..depth {
            let (w, b) = (&self.params[first + 2 * l], &self.params[first + 2 * l + 1]);
            h = b.addmm(&h, w);
            if l + 1 < depth {
                h = tanh(&h);
            }
        }
        h
    }

    /// The actor's output `[B, logits + gaussian]`: the categorical heads' logits, then the
    /// Gaussian's means.
    pub fn logits(&self, obs: &Tensor) -> Tensor {
        self.mlp(obs, 0)
    }

    /// The Gaussian head's log-std `[gaussian]` (a leaf: autograd reaches it), where the
    /// policy has one.
    pub fn log_std(&self) -> Option<&Tensor> {
        (self.arch.gaussian > 0).then(|| &self.params[4 * self.arch.depth()])
    }

    /// Its gradient, a view into `flat_grad`.
    pub fn log_std_grad(&self) -> Option<&Tensor> {
        (self.arch.gaussian > 0).then(|| &self.grads[4 * self.arch.depth()])
    }

    /// Critic values `[B]`.
    pub fn value(&self, obs: &Tensor) -> Tensor {
        self.mlp(obs, 2 * self.arch.depth()).squeeze_dim(-1)
    }

    /// The actor (`critic = false`, with the Gaussian's log-std) or the critic, as handles
    /// onto its parameters.
    pub fn network(&self, critic: bool) -> Mlp {
        let (first, n) = (if critic { 2 * self.arch.depth() } else { 0 }, 2 * self.arch.depth());
        let take = |ts: &[Tensor]| ts[first..first + n].iter().map(Tensor::shallow_clone).collect();
        let log_std = self.log_std().zip(self.log_std_grad()).filter(|_| !critic);
        let log_std = log_std.map(|(p, g)| (p.shallow_clone(), g.shallow_clone()));
        Mlp { params: take(&self.params), grads: take(&self.grads), log_std }
    }

    /// [`Mlp::forward_taped`] of the actor or the critic.
    pub fn forward_taped(&self, x: &Tensor, critic: bool, kind: Kind) -> Tape {
        self.network(critic).forward_taped(x, kind)
    }

    /// [`Mlp::backward_taped`] of the actor or the critic.
    pub fn backward_taped(&self, tape: &Tape, d_out: &Tensor, critic: bool, kind: Kind) {
        self.network(critic).backward_taped(tape, d_out, kind)
    }

    /// The parameters as host `f32`s, in layout order (for the fused forward and checkpoints).
    pub fn host_params(&self) -> Vec<f32> {
        let host = self.flat.to_device(Device::Cpu);
        Vec::<f32>::try_from(&host).expect("flat params are f32")
    }
}

/// One of the two networks: handles (shallow clones) onto its weights and biases in
/// `flat` and its gradients in `flat_grad`. Owned rather than borrowed so that the actor
/// and the critic can run on two threads (`Tensor` is `Send` but not `Sync`).
pub struct Mlp {
    /// `w0, b0, w1, b1, …`
    params: Vec<Tensor>,
    /// The matching views into `flat_grad`.
    grads: Vec<Tensor>,
    /// The actor's Gaussian log-std and its gradient's view, where it has one.
    pub log_std: Option<(Tensor, Tensor)>,
}

impl Mlp {
    fn depth(&self) -> usize {
        self.params.len() / 2
    }

    /// The training forward, keeping each layer's input (call under `no_grad`). Matmuls
    /// run in `kind` (fp32, or bf16/fp16 as autocast would); biases, activations and the
    /// output stay fp32.
    pub fn forward_taped(&self, x: &Tensor, kind: Kind) -> Tape {
        let depth = self.depth();
        let mut inputs = Vec::with_capacity(depth);
        let mut h = x.shallow_clone();
        for l in 0..depth {
            let (w, b) = (&self.params[2 * l], &self.params[2 * l + 1]);
            let z = if kind != Kind::Float {
                h.to_kind(kind).mm(&w.to_kind(kind)) + b // reduced + fp32 promotes to fp32
            } else if let Some(z) = small_linear(&h, w, b) {
                z
            } else {
                b.addmm(&h, w)
            };
            inputs.push(h);
            h = if l + 1 < depth { tanh_fresh(z) } else { z };
        }
        Tape { inputs, out: h }
    }

    /// Writes this network's parameter gradients, given ∂loss/∂output `d_out`, into
    /// `flat_grad` (overwriting: no zeroing needed); matmuls in `kind`, as in the forward.
    /// On the CPU in fp32 the bias sums and the tanh gradients are host kernels.
    pub fn backward_taped(&self, tape: &Tape, d_out: &Tensor, kind: Kind) {
        let host = kind == Kind::Float && kernels::is_host_f32(d_out);
        let mut d = d_out.shallow_clone();
        for l in (0..self.depth()).rev() {
            let (x, w) = (&tape.inputs[l], &self.params[2 * l]);
            let (mut grad_w, grad_b) = (self.grads[2 * l].shallow_clone(), &self.grads[2 * l + 1]);
            if host {
                // SAFETY: `d` is a fresh gradient and `grad_b` a view that only this network writes.
                unsafe { kernels::column_sums(kernels::host(&d), kernels::host_mut(grad_b)) };
            } else {
                let _ = d.sum_intlist_out(grad_b, [0i64].as_slice(), false, Kind::Float);
            }
            if host && kernels::is_host_f32(x) && is_small(w) {
                small_backward(x, w, &d, &grad_w, l > 0).into_iter().for_each(|next| d = next);
            } else if kind == Kind::Float {
                if d.size()[1] < x.size()[1] {
                    // Narrow outputs (the heads): MKL's `xᵀ·d` with 2 columns takes 0.2 ms
                    // at 4096 rows, `(dᵀ·x)ᵀ` a quarter of that.
                    grad_w.copy_(&d.tr().mm(x).tr());
                } else {
                    let _ = x.tr().mm_out(&grad_w, &d);
                }
                if l > 0 {
                    let next = d.mm(&w.tr());
                    if host && kernels::is_host_f32(x) {
                        // SAFETY: `next` is fresh; `x` (the tape's tanh output) is only read.
                        unsafe { kernels::tanh_backward_in_place(kernels::host_mut(&next), kernels::host(x)) };
                        d = next;
                    } else {
                        d = Tensor::tanh_backward(&next, x);
                    }
                }
            } else {
                let dk = d.to_kind(kind);
                grad_w.copy_(&x.to_kind(kind).tr().mm(&dk));
                if l > 0 {
                    d = Tensor::tanh_backward(&dk.mm(&w.to_kind(kind).tr()).to_kind(Kind::Float), x);
                }
            }
        }
    }
}

/// Whether a layer has an input or an output of at most [`kernels::SMALL`].
fn is_small(w: &Tensor) -> bool {
    let s = w.size();
    s[0] as usize <= kernels::SMALL || s[1] as usize <= kernels::SMALL
}

/// `x·w + b` by a host kernel where MKL is slow (a small input or output), else `None`.
fn small_linear(x: &Tensor, w: &Tensor, b: &Tensor) -> Option<Tensor> {
    if !(is_small(w) && [x, w, b].iter().all(|t| kernels::is_host_f32(t))) {
        return None;
    }
    let (k, n) = (w.size()[0] as usize, w.size()[1] as usize);
    let y = Tensor::empty([x.size()[0], n as i64], (Kind::Float, Device::Cpu));
    // SAFETY: `y` is new; `x`, `w` and `b` are only read.
    unsafe {
        let (xs, ws, bs, ys) = (kernels::host(x), kernels::host(w), kernels::host(b), kernels::host_mut(&y));
        if n <= kernels::SMALL {
            let mut wt = vec![0f32; k * n];
            kernels::transpose(ws, k, &mut wt);
            kernels::matmul_narrow_n(xs, &wt, Some(bs), ys, n);
        } else {
            kernels::matmul_small_k(xs, ws, Some(bs), ys, n);
        }
    }
    Some(y)
}

/// A small layer's backward on the host: writes `grad_w = xᵀ·d` and, with `want_input`,
/// returns `(d·wᵀ) ⊙ tanh'` for the layer below (`x` is that layer's tanh output).
fn small_backward(x: &Tensor, w: &Tensor, d: &Tensor, grad_w: &Tensor, want_input: bool) -> Option<Tensor> {
    let (k, n) = (w.size()[0] as usize, w.size()[1] as usize);
    // SAFETY: `grad_w` is this layer's own gradient view, written only here; the rest is read.
    unsafe {
        let (xs, ws, ds, gw) = (kernels::host(x), kernels::host(w), kernels::host(d), kernels::host_mut(grad_w));
        if n <= kernels::SMALL {
            let mut gwt = vec![0f32; n * k];
            kernels::outer_sum_small(ds, xs, &mut gwt, n);
            kernels::transpose(&gwt, n, gw);
        } else {
            kernels::outer_sum_small(xs, ds, gw, k);
        }
        want_input.then(|| {
            let next = Tensor::empty([x.size()[0], k as i64], (Kind::Float, Device::Cpu));
            let out = kernels::host_mut(&next);
            if n <= kernels::SMALL {
                let mut wt = vec![0f32; k * n];
                kernels::transpose(ws, k, &mut wt);
                kernels::matmul_small_k(ds, &wt, None, out, k);
            } else {
                // d·wᵀ with a small input k: one dot product per output, w's rows as wᵀ's columns.
                kernels::matmul_narrow_n(ds, ws, None, out, k);
            }
            kernels::tanh_backward_in_place(out, xs);
            next
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net() -> ActorCritic {
        let _seeded = crate::testing::torch_seed(0);
        ActorCritic::new(Architecture { obs_dim: 4, hidden: vec![64, 64], logits: 2, gaussian: 0 }, Device::Cpu)
    }

    #[test]
    fn layout_matches_cleanrl_agent_sizes() {
        let n = net();
        // actor: 4·64+64 + 64·64+64 + 64·2+2; critic: same with 1 output.
        assert_eq!(n.arch.num_params(), 4610 + 4545);
        assert_eq!(n.layout[0].name, "actor.0.w");
        assert_eq!(n.layout.last().unwrap().name, "critic.2.b");
    }

    #[test]
    fn init_is_orthogonal_with_cleanrl_gains_and_zero_bias() {
        let n = net();
        let w0 = n.params[2].shallow_clone(); // actor.1.w: 64x64, gain √2
        let gram = w0.tr().matmul(&w0) / 2.0;
        let eye = Tensor::eye(64, (Kind::Float, Device::Cpu));
        assert!(f64::try_from((gram - eye).abs().max()).unwrap() < 1e-4);
        let head = &n.params[4]; // actor.2.w: [64, 2], gain 0.01: columns have norm 0.01
        let norms = head.square().sum_dim_intlist([0i64].as_slice(), false, Kind::Float).sqrt();
        assert!(f64::try_from((norms - 0.01).abs().max()).unwrap() < 1e-6);
        assert_eq!(f64::try_from(n.params[1].abs().sum(Kind::Float)).unwrap(), 0.0);
    }

    #[test]
    fn gradients_accumulate_into_the_flat_gradient() {
        let mut n = net();
        let obs = Tensor::randn([5, 4], (Kind::Float, Device::Cpu));
        let loss = n.logits(&obs).square().sum(Kind::Float) + n.value(&obs).sum(Kind::Float);
        loss.backward();
        let g = n.flat_grad.shallow_clone();
        let separate: Vec<Tensor> = n.params.iter().map(|p| p.grad().reshape([-1])).collect();
        let cat = Tensor::cat(&separate, 0);
        assert!(f64::try_from(g.abs().sum(Kind::Float)).unwrap() > 0.0);
        assert!(g.allclose(&cat, 0.0, 0.0, false));
        n.zero_grad();
        assert_eq!(f64::try_from(n.params[0].grad().abs().sum(Kind::Float)).unwrap(), 0.0);
        // A second pass accumulates into the same storage.
        let loss = n.value(&obs).sum(Kind::Float);
        loss.backward();
        assert!(f64::try_from(n.flat_grad.abs().sum(Kind::Float)).unwrap() > 0.0);
        // Updating `flat` in place moves the leaves.
        let before = n.logits(&obs);
        tch::no_grad(|| {
            let _ = n.flat.g_add_scalar_(0.1);
        });
        assert!(!before.allclose(&n.logits(&obs), 1e-6, 1e-6, false));
    }
}
