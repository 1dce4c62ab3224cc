//! The layers the dreamer's networks are made of, over one [`FlatParams`] per network: a
//! [`Builder`] names each parameter and its initial scale, and each layer keeps the
//! indices of its parameters, so a forward reads views of the one flat tensor.

use crate::train::params::{pack, FlatParams};
use tch::{Device, Kind, Tensor};

/// Collects a network's parameters: name, shape and the scale of its initial draw.
#[derive(Default)]
pub struct Builder {
    params: Vec<(String, Vec<i64>, f64)>,
}

impl Builder {
    fn add(&mut self, name: String, shape: Vec<i64>, std: f64) -> usize {
        self.params.push((name, shape, std));
        self.params.len() - 1
    }

    /// `inputs → outputs`, He-scaled (`scale` shrinks an output head).
    pub fn linear(&mut self, name: &str, inputs: i64, outputs: i64, scale: f64) -> Linear {
        let std = scale * (1.0 / inputs as f64).sqrt();
        Linear {
            w: self.add(format!("{name}.w"), vec![outputs, inputs], std),
            b: self.add(format!("{name}.b"), vec![outputs], 0.0),
        }
    }

    /// A 4×4 convolution of stride 2 (halves the side), or its transpose (doubles it).
    pub fn conv(&mut self, name: &str, inputs: i64, outputs: i64, transposed: bool) -> Conv {
        let std = (1.0 / (inputs * 16) as f64).sqrt();
        let shape = if transposed { vec![inputs, outputs, 4, 4] } else { vec![outputs, inputs, 4, 4] };
        Conv {
            w: self.add(format!("{name}.w"), shape, std),
            b: self.add(format!("{name}.b"), vec![outputs], 0.0),
            transposed,
        }
    }

    /// A hidden layer: linear, layer norm, SiLU (DreamerV3's block).
    pub fn block(&mut self, name: &str, inputs: i64, outputs: i64) -> Block {
        Block(self.linear(name, inputs, outputs, 1.0))
    }

    /// A GRU cell (PyTorch's gate layout), drawn with the spread of `nn.GRUCell`'s uniform ±1/√hidden.
    pub fn gru(&mut self, name: &str, inputs: i64, hidden: i64) -> Gru {
        let std = (1.0 / hidden as f64).sqrt() / 3f64.sqrt();
        Gru {
            w_ih: self.add(format!("{name}.w_ih"), vec![3 * hidden, inputs], std),
            w_hh: self.add(format!("{name}.w_hh"), vec![3 * hidden, hidden], std),
            b_ih: self.add(format!("{name}.b_ih"), vec![3 * hidden], 0.0),
            b_hh: self.add(format!("{name}.b_hh"), vec![3 * hidden], 0.0),
        }
    }

    /// The parameters drawn from libtorch's generator (seed it first), on `device`.
    pub fn finish(self, device: Device) -> FlatParams {
        let layout = pack(self.params.iter().map(|(n, s, _)| (n.clone(), s.clone())));
        let total: i64 = layout.iter().map(|s| s.numel()).sum();
        let flat = Tensor::zeros([total], (Kind::Float, Device::Cpu));
        for ((_, _, std), slot) in self.params.iter().zip(&layout) {
            if *std > 0.0 {
                let n = slot.numel();
                flat.narrow(0, slot.offset, n).copy_(&(Tensor::randn([n], (Kind::Float, Device::Cpu)) * *std));
            }
        }
        FlatParams::new(layout, flat.to_device(device))
    }
}

#[derive(Clone, Copy)]
pub struct Linear {
    w: usize,
    b: usize,
}

impl Linear {
    pub fn forward(&self, p: &FlatParams, x: &Tensor) -> Tensor {
        x.linear(p.get(self.w), Some(p.get(self.b)))
    }
}

#[derive(Clone, Copy)]
pub struct Conv {
    w: usize,
    b: usize,
    transposed: bool,
}

impl Conv {
    pub fn forward(&self, p: &FlatParams, x: &Tensor) -> Tensor {
        let (w, b) = (p.get(self.w), Some(p.get(self.b)));
        if self.transposed {
            x.conv_transpose2d(w, b, [2, 2], [1, 1], [0, 0], 1, [1, 1])
        } else {
            x.conv2d(w, b, [2, 2], [1, 1], [1, 1], 1)
        }
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
}

impl Gru {
    /// The next hidden state from input `x` and state `h`.
    pub fn forward(&self, p: &FlatParams, x: &Tensor, h: &Tensor) -> Tensor {
        x.gru_cell(h, p.get(self.w_ih), p.get(self.w_hh), Some(p.get(self.b_ih)), Some(p.get(self.b_hh)))
    }
}

/// DreamerV3's symlog: `sign(x)·ln(1 + |x|)`, and its inverse.
pub fn symlog(x: &Tensor) -> Tensor {
    x.sign() * x.abs().log1p()
}

pub fn symexp(x: &Tensor) -> Tensor {
    x.sign() * (x.abs().exp() - 1.0)
}
