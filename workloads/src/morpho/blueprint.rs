//! The seeds' blueprints: small modules of different cost, each mapping a slot's
//! activation `x` (`[batch, channels, h, w]`) to a tensor of the same shape, added to the
//! host's activation as `x + α·seed(x)`.

use super::mixed;
use tch::nn::{self, Module};
use tch::Tensor;

/// A kind of seed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Blueprint {
    /// A normalization over the channels (a learned scale and shift per channel).
    Norm,
    /// A 3×3 convolution per channel.
    Depthwise,
    /// A full 3×3 convolution.
    Conv3x3,
    /// One head of attention over the positions.
    Attention,
    /// A pointwise MLP (1×1 convolutions, 2× wide).
    Mlp,
}

impl Blueprint {
    pub const ALL: [Blueprint; 5] =
        [Blueprint::Norm, Blueprint::Depthwise, Blueprint::Conv3x3, Blueprint::Attention, Blueprint::Mlp];

    pub fn name(self) -> &'static str {
        match self {
            Blueprint::Norm => "norm",
            Blueprint::Depthwise => "depthwise",
            Blueprint::Conv3x3 => "conv3x3",
            Blueprint::Attention => "attention",
            Blueprint::Mlp => "mlp",
        }
    }

    /// Seeds of this blueprint of several hosts at once, as one call: `x` is
    /// `[batch, hosts, channels, h, w]` (each host's activation), `params` each host's
    /// seed's named parameters; the same shape out, each host's slice what its own seed's
    /// [`Seed::forward`] gives (to rounding). Convolutions become grouped convolutions (a
    /// group per host), the norm a group norm of a group per host, attention batched matmuls.
    pub fn forward_batched(self, x: &Tensor, params: &[&[(String, Tensor)]], kind: tch::Kind) -> Tensor {
        let (b, g, c, h, w) = x.size5().expect("activations are [batch, hosts, channels, h, w]");
        let get = |suffix: &str| -> Vec<&Tensor> {
            params
                .iter()
                .map(|p| &p.iter().find(|(n, _)| n.ends_with(suffix)).expect("a blueprint's parameter").1)
                .collect()
        };
        let cat = |suffix: &str| Tensor::cat(&get(suffix), 0);
        let flat = x.reshape([b, g * c, h, w]);
        let conv = |x: &Tensor, name: &str, k: i64, groups: i64| {
            let (wt, bias) = (cat(&format!("{name}weight")), cat(&format!("{name}bias")));
            let (x, wt, bias) = (mixed::operand(x, kind), mixed::operand(&wt, kind), mixed::operand(&bias, kind));
            x.conv2d(&wt, Some(&bias), [1, 1], [k / 2, k / 2], [1, 1], groups).to_kind(tch::Kind::Float)
        };
        let out = match self {
            Blueprint::Norm => flat.group_norm(g, Some(&cat("weight")), Some(&cat("bias")), 1e-5, false),
            Blueprint::Depthwise => conv(&flat, "", 3, g * c).relu(),
            Blueprint::Conv3x3 => conv(&flat, "", 3, g).relu(),
            Blueprint::Mlp => conv(&conv(&flat, "up.", 1, g).relu(), "down.", 1, g),
            Blueprint::Attention => {
                let d = (c / 2).max(1);
                // Positions as tokens, per host: [hosts, batch, h·w, channels].
                let tokens = x.permute([1, 0, 3, 4, 2]).reshape([g, b, h * w, c]);
                let lin = |name: &str| {
                    let wt = Tensor::stack(&get(&format!("{name}.weight")), 0).transpose(1, 2).unsqueeze(1);
                    let bias = Tensor::stack(&get(&format!("{name}.bias")), 0).unsqueeze(1).unsqueeze(1);
                    tokens.matmul(&wt) + bias
                };
                let (q, k, v) = (lin("q"), lin("k"), lin("v"));
                let weights = (q.matmul(&k.transpose(-2, -1)) / (d as f64).sqrt()).softmax(-1, tch::Kind::Float);
                return weights.matmul(&v).view([g, b, h, w, c]).permute([1, 0, 4, 2, 3]);
            }
        };
        out.view([b, g, c, h, w])
    }

    /// A seed of this blueprint for `channels`, its parameters under `p`.
    pub fn build(self, p: nn::Path, channels: i64) -> Box<dyn Seed> {
        let conv = |p: nn::Path, i: i64, o: i64, k: i64, groups: i64| {
            let c = nn::ConvConfig {
                padding: k / 2,
                groups,
                ws_init: DRAWN_LATER,
                bs_init: DRAWN_LATER,
                ..Default::default()
            };
            nn::conv2d(p, i, o, k, c)
        };
        match self {
            Blueprint::Norm => Box::new(Norm(nn::group_norm(p, 1, channels, Default::default()))),
            Blueprint::Depthwise => Box::new(Relu(conv(p, channels, channels, 3, channels), channels)),
            Blueprint::Conv3x3 => Box::new(Relu(conv(p, channels, channels, 3, 1), 1)),
            Blueprint::Mlp => Box::new(Mlp(
                conv(&p / "up", channels, 2 * channels, 1, 1),
                conv(&p / "down", 2 * channels, channels, 1, 1),
            )),
            Blueprint::Attention => {
                let d = (channels / 2).max(1);
                let lin = |name: &str, i, o| nn::linear(&p / name, i, o, LINEAR);
                Box::new(Attention {
                    q: lin("q", channels, d),
                    k: lin("k", channels, d),
                    v: lin("v", channels, channels),
                    d,
                })
            }
        }
    }
}

/// How a new layer's weights start: zeros, drawn by the host from the env's own generator
/// right after (libtorch's default init would draw from the process's generator, which the
/// agent's sampling also draws from: the envs' draws would then depend on where they step).
pub const DRAWN_LATER: nn::Init = nn::Init::Const(0.0);
/// A linear layer whose weights are [`DRAWN_LATER`].
pub const LINEAR: nn::LinearConfig = nn::LinearConfig { ws_init: DRAWN_LATER, bs_init: Some(DRAWN_LATER), bias: true };

/// A seed: `x` to a tensor of its shape.
pub trait Seed: Send {
    fn forward(&self, x: &Tensor) -> Tensor;
    /// The forward with its products in `kind` ([`mixed`]); a norm and attention stay fp32.
    fn forward_in(&self, x: &Tensor, kind: tch::Kind) -> Tensor {
        let _ = kind;
        self.forward(x)
    }
}

struct Norm(nn::GroupNorm);
/// A 3×3 convolution (its groups) and a ReLU.
struct Relu(nn::Conv2D, i64);
struct Mlp(nn::Conv2D, nn::Conv2D);
struct Attention {
    q: nn::Linear,
    k: nn::Linear,
    v: nn::Linear,
    d: i64,
}

impl Seed for Norm {
    fn forward(&self, x: &Tensor) -> Tensor {
        self.0.forward(x)
    }
}

impl Seed for Relu {
    fn forward(&self, x: &Tensor) -> Tensor {
        self.0.forward(x).relu()
    }

    fn forward_in(&self, x: &Tensor, kind: tch::Kind) -> Tensor {
        mixed::conv(&self.0, x, 1, 1, self.1, kind).relu()
    }
}

impl Seed for Mlp {
    fn forward(&self, x: &Tensor) -> Tensor {
        self.1.forward(&self.0.forward(x).relu())
    }

    fn forward_in(&self, x: &Tensor, kind: tch::Kind) -> Tensor {
        mixed::conv(&self.1, &mixed::conv(&self.0, x, 1, 0, 1, kind).relu(), 1, 0, 1, kind)
    }
}

impl Seed for Attention {
    fn forward(&self, x: &Tensor) -> Tensor {
        let (b, c, h, w) = x.size4().expect("a slot's activation is [batch, channels, h, w]");
        // Positions as tokens: [b, h·w, c].
        let tokens = x.flatten(2, 3).transpose(1, 2);
        let (q, k, v) = (self.q.forward(&tokens), self.k.forward(&tokens), self.v.forward(&tokens));
        let weights = (q.matmul(&k.transpose(1, 2)) / (self.d as f64).sqrt()).softmax(-1, tch::Kind::Float);
        weights.matmul(&v).transpose(1, 2).reshape([b, c, h, w])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_blueprint_keeps_the_shape_and_costs_differently() {
        let _seed = hotlab_train::testing::torch_seed(3);
        let x = Tensor::randn([2, 8, 4, 4], (tch::Kind::Float, tch::Device::Cpu));
        let mut costs = Vec::new();
        for bp in Blueprint::ALL {
            let vs = nn::VarStore::new(tch::Device::Cpu);
            let seed = bp.build(vs.root() / bp.name(), 8);
            assert_eq!(seed.forward(&x).size(), [2, 8, 4, 4], "{}", bp.name());
            costs.push(vs.trainable_variables().iter().map(Tensor::numel).sum::<usize>());
        }
        let mut distinct = costs.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), 5, "parameter counts {costs:?}");
    }
}
