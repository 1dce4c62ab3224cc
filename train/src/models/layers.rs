//! The layers networks are made of (the dreamer's world model and behavior, the PPO
//! policy's CNN encoder), over one [`FlatParams`] per network: a [`Builder`] names each
//! parameter and how it is drawn, and each layer keeps the indices of its parameters, so a
//! forward reads views of the one flat tensor.
//!
//! `--precision bf16`: each layer's product (matmul, convolution, the GRU's gates) takes
//! bf16 copies of its input and weights and gives fp32 back; norms, softmax, the losses,
//! the gradients' accumulation and Adam stay fp32 on fp32 master weights (autocast's rule,
//! written out: libtorch's autocast is not reachable through tch). In fp32 the layers run
//! as they are, bit for bit.

use crate::params::{pack, FlatParams};
use tch::{Device, Kind, Tensor};

/// How a parameter is drawn.
#[derive(Clone, Copy, Debug)]
pub enum Init {
    /// Zeros (biases).
    Zero,
    /// Normal with this standard deviation.
    Normal(f64),
    /// Orthogonal rows (over the flattened fan-in) times this gain, as PyTorch's
    /// `orthogonal_` (CleanRL's `layer_init`).
    Orthogonal(f64),
}

/// Collects a network's parameters: name, shape and how each is drawn.
pub struct Builder {
    params: Vec<(String, Vec<i64>, Init)>,
    /// What the layers' products compute in.
    kind: Kind,
}

/// A convolution's kernel side, stride and zero padding (the same both ways).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub kernel: i64,
    pub stride: i64,
    pub padding: i64,
}

impl Window {
    /// The output side for an input side `n`; None when the kernel does not fit.
    pub fn side(self, n: i64) -> Option<i64> {
        let span = n + 2 * self.padding - self.kernel;
        (span >= 0).then(|| span / self.stride + 1)
    }
}

/// The dreamer's 4×4 convolution of stride 2 that halves a side.
const HALVING: Window = Window { kernel: 4, stride: 2, padding: 1 };

impl Builder {
    /// Layers whose products compute in `kind` (fp32 or bf16).
    pub fn new(kind: Kind) -> Self {
        Self { params: Vec::new(), kind }
    }

    /// Parameters so far.
    pub fn numel(&self) -> i64 {
        self.params.iter().map(|(_, s, _)| s.iter().product::<i64>()).sum()
    }

    /// A parameter of its own (a Gaussian head's log-std): its index in the layout.
    pub fn param(&mut self, name: &str, shape: &[i64], init: Init) -> usize {
        self.add(name.to_string(), shape.to_vec(), init)
    }

    fn add(&mut self, name: String, shape: Vec<i64>, init: Init) -> usize {
        self.params.push((name, shape, init));
        self.params.len() - 1
    }

    /// `inputs → outputs`, He-scaled (`scale` shrinks an output head).
    pub fn linear(&mut self, name: &str, inputs: i64, outputs: i64, scale: f64) -> Linear {
        let std = scale * (1.0 / inputs as f64).sqrt();
        self.linear_with(name, inputs, outputs, Init::Normal(std))
    }

    /// `inputs → outputs` with weights drawn by `init` and zero biases.
    pub fn linear_with(&mut self, name: &str, inputs: i64, outputs: i64, init: Init) -> Linear {
        Linear {
            w: self.add(format!("{name}.w"), vec![outputs, inputs], init),
            b: self.add(format!("{name}.b"), vec![outputs], Init::Zero),
            kind: self.kind,
        }
    }

    /// A 4×4 convolution of stride 2 (halves the side), or its transpose (doubles it).
    pub fn conv(&mut self, name: &str, inputs: i64, outputs: i64, transposed: bool) -> Conv {
        let std = (1.0 / (inputs * 16) as f64).sqrt();
        let shape = if transposed { vec![inputs, outputs, 4, 4] } else { vec![outputs, inputs, 4, 4] };
        Conv {
            w: self.add(format!("{name}.w"), shape, Init::Normal(std)),
            b: self.add(format!("{name}.b"), vec![outputs], Init::Zero),
            window: HALVING,
            transposed,
            kind: self.kind,
        }
    }

    /// A convolution of any square `window`, weights drawn by `init`, zero biases.
    pub fn conv_with(&mut self, name: &str, inputs: i64, outputs: i64, window: Window, init: Init) -> Conv {
        let k = window.kernel;
        Conv {
            w: self.add(format!("{name}.w"), vec![outputs, inputs, k, k], init),
            b: self.add(format!("{name}.b"), vec![outputs], Init::Zero),
            window,
            transposed: false,
            kind: self.kind,
        }
    }

    /// A hidden layer: linear, layer norm, SiLU (DreamerV3's block).
    pub fn block(&mut self, name: &str, inputs: i64, outputs: i64) -> Block {
        Block(self.linear(name, inputs, outputs, 1.0))
    }

    /// A GRU cell (PyTorch's gate layout), drawn with the spread of `nn.GRUCell`'s uniform ±1/√hidden.
    pub fn gru(&mut self, name: &str, inputs: i64, hidden: i64) -> Gru {
        let std = Init::Normal((1.0 / hidden as f64).sqrt() / 3f64.sqrt());
        Gru {
            w_ih: self.add(format!("{name}.w_ih"), vec![3 * hidden, inputs], std),
            w_hh: self.add(format!("{name}.w_hh"), vec![3 * hidden, hidden], std),
            b_ih: self.add(format!("{name}.b_ih"), vec![3 * hidden], Init::Zero),
            b_hh: self.add(format!("{name}.b_hh"), vec![3 * hidden], Init::Zero),
            kind: self.kind,
        }
    }

    /// The layout with given parameters (`flat`, loaded from a checkpoint) instead of drawn
    /// ones; None when `flat` is not as long as the layout.
    pub fn with(self, flat: Tensor) -> Option<FlatParams> {
        let layout = pack(self.params.into_iter().map(|(n, s, _)| (n, s)));
        let total: i64 = layout.iter().map(|s| s.numel()).sum();
        (flat.size() == [total]).then(|| FlatParams::new(layout, flat))
    }

    /// The parameters drawn from libtorch's generator (seed it first), on `device`.
    pub fn finish(self, device: Device) -> FlatParams {
        let layout = pack(self.params.iter().map(|(n, s, _)| (n.clone(), s.clone())));
        let total: i64 = layout.iter().map(|s| s.numel()).sum();
        let flat = Tensor::zeros([total], (Kind::Float, Device::Cpu));
        for ((_, shape, init), slot) in self.params.iter().zip(&layout) {
            let n = slot.numel();
            let drawn = match *init {
                Init::Zero => continue,
                Init::Normal(std) if std > 0.0 => Tensor::randn([n], (Kind::Float, Device::Cpu)) * std,
                Init::Normal(_) => continue,
                Init::Orthogonal(gain) => {
                    tch::nn::init::init(tch::nn::Init::Orthogonal { gain }, shape, Device::Cpu).view([n])
                }
            };
            flat.narrow(0, slot.offset, n).copy_(&drawn);
        }
        FlatParams::new(layout, flat.to_device(device))
    }
}

/// `t` as `kind` for a product (itself in fp32).
fn operand(t: &Tensor, kind: Kind) -> Tensor {
    if kind == Kind::Float {
        t.shallow_clone()
    } else {
        t.to_kind(kind)
    }
}

/// A product's result back in fp32.
fn out(t: Tensor, kind: Kind) -> Tensor {
    if kind == Kind::Float {
        t
    } else {
        t.to_kind(Kind::Float)
    }
}

#[derive(Clone, Copy)]
pub struct Linear {
    w: usize,
    b: usize,
    kind: Kind,
}

impl Linear {
    pub fn forward(&self, p: &FlatParams, x: &Tensor) -> Tensor {
        let k = self.kind;
        out(operand(x, k).linear(&operand(p.get(self.w), k), Some(operand(p.get(self.b), k))), k)
    }
}

#[derive(Clone, Copy)]
pub struct Conv {
    w: usize,
    b: usize,
    window: Window,
    transposed: bool,
    kind: Kind,
}

impl Conv {
    pub fn forward(&self, p: &FlatParams, x: &Tensor) -> Tensor {
        let k = self.kind;
        let (x, w, b) = (operand(x, k), operand(p.get(self.w), k), Some(operand(p.get(self.b), k)));
        let Window { stride: s, padding: p, .. } = self.window;
        let y = if self.transposed {
            x.conv_transpose2d(&w, b, [s, s], [p, p], [0, 0], 1, [1, 1])
        } else {
            x.conv2d(&w, b, [s, s], [p, p], [1, 1], 1)
        };
        out(y, k)
    }
}

#[derive(Clone, Copy)]
pub struct Block(Linear);

impl Block {
    pub fn forward(&self, p: &FlatParams, x: &Tensor) -> Tensor {
        let y = self.0.forward(p, x);
        let n = *y.size().last().unwrap_or(&1);
        y.layer_norm([n], None::<Tensor>, None::<Tensor>, 1e-3, false).silu()
    }
}

#[derive(Clone, Copy)]
pub struct Gru {
    w_ih: usize,
    w_hh: usize,
    b_ih: usize,
    b_hh: usize,
    kind: Kind,
}

impl Gru {
    /// The next hidden state from input `x` and state `h`: in fp32 libtorch's cell; in
    /// bf16 its gates' two products in bf16 and the gating in fp32.
    pub fn forward(&self, p: &FlatParams, x: &Tensor, h: &Tensor) -> Tensor {
        let (w_ih, w_hh, b_ih, b_hh) = (p.get(self.w_ih), p.get(self.w_hh), p.get(self.b_ih), p.get(self.b_hh));
        let k = self.kind;
        if k == Kind::Float {
            return x.gru_cell(h, w_ih, w_hh, Some(b_ih), Some(b_hh));
        }
        let gi = out(operand(x, k).linear(&operand(w_ih, k), Some(operand(b_ih, k))), k).chunk(3, -1);
        let gh = out(operand(h, k).linear(&operand(w_hh, k), Some(operand(b_hh, k))), k).chunk(3, -1);
        let r = (&gi[0] + &gh[0]).sigmoid();
        let z = (&gi[1] + &gh[1]).sigmoid();
        let n = (&gi[2] + r * &gh[2]).tanh();
        &n + z * (h - &n)
    }
}

/// DreamerV3's symlog: `sign(x)·ln(1 + |x|)`, and its inverse.
pub fn symlog(x: &Tensor) -> Tensor {
    x.sign() * x.abs().log1p()
}

pub fn symexp(x: &Tensor) -> Tensor {
    x.sign() * (x.abs().exp() - 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// bf16 products on fp32 weights give what fp32 gives, to bf16's rounding: the GRU's
    /// hand-written gating is libtorch's cell, and the layers' outputs come back in fp32.
    #[test]
    fn bf16_layers_compute_what_fp32_layers_do_to_rounding() {
        let _seeded = crate::testing::torch_seed(6);
        let make = |kind| {
            tch::manual_seed(6);
            let mut b = Builder::new(kind);
            let (lin, conv, gru) = (b.linear("l", 32, 16, 1.0), b.conv("c", 2, 4, false), b.gru("g", 16, 24));
            (lin, conv, gru, b.finish(Device::Cpu))
        };
        let x = Tensor::randn([5, 32], (Kind::Float, Device::Cpu));
        let h = Tensor::randn([5, 24], (Kind::Float, Device::Cpu));
        let img = Tensor::randn([3, 2, 8, 8], (Kind::Float, Device::Cpu));
        let outputs = [Kind::Float, Kind::BFloat16].map(|kind| {
            let (lin, conv, gru, p) = make(kind);
            let y = lin.forward(&p, &x);
            [gru.forward(&p, &y, &h), conv.forward(&p, &img).view([-1]), y]
        });
        for (a, b) in outputs[0].iter().zip(&outputs[1]) {
            assert_eq!(b.kind(), Kind::Float);
            let err = f64::try_from((a - b).abs().max()).unwrap();
            let scale = f64::try_from(a.abs().max()).unwrap();
            assert!(err <= 0.03 * scale.max(1.0), "bf16 differs by {err} (largest {scale})");
            assert!(err > 0.0, "the bf16 path ran");
        }
    }
}
