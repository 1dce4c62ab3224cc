//! Host training in bf16 (`--host-precision`): each convolution and matmul takes bf16
//! copies of its input and weights and gives fp32 back; norms, softmax, the loss, the
//! gradients' accumulation and Adam stay fp32 on the fp32 master weights — autocast's rule,
//! written out because libtorch's CPU autocast is not reachable through tch. In fp32 the
//! modules run as they are, bit for bit.

use tch::nn::{self, Module};
use tch::{Kind, Tensor};

fn to(t: &Tensor, kind: Kind) -> Tensor {
    t.to_kind(kind)
}

/// `c`'s convolution of `x` (its `stride`, `padding` and `groups`) in `kind`, fp32 out.
pub fn conv(c: &nn::Conv2D, x: &Tensor, stride: i64, padding: i64, groups: i64, kind: Kind) -> Tensor {
    if kind == Kind::Float {
        return c.forward(x);
    }
    let bias = c.bs.as_ref().map(|b| to(b, kind));
    to(x, kind)
        .conv2d(&to(&c.ws, kind), bias.as_ref(), [stride, stride], [padding, padding], [1, 1], groups)
        .to_kind(Kind::Float)
}

/// `l`'s affine map of `x` in `kind`, fp32 out.
pub fn linear(l: &nn::Linear, x: &Tensor, kind: Kind) -> Tensor {
    if kind == Kind::Float {
        return l.forward(x);
    }
    let y = to(x, kind).matmul(&to(&l.ws, kind).tr());
    let y = match &l.bs {
        Some(b) => y + to(b, kind),
        None => y,
    };
    y.to_kind(Kind::Float)
}

/// `x` as `kind` where a product runs in it (a batched call's operands), else itself.
pub fn operand(x: &Tensor, kind: Kind) -> Tensor {
    if kind == Kind::Float {
        x.shallow_clone()
    } else {
        to(x, kind)
    }
}
