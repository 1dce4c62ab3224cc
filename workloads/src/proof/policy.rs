//! The proof env's policy: index embeddings pooled into goal-list embeddings, a score per
//! successor, a value head on the state (seed 000's `EmbeddingExtractor` shape).
//!
//! An atom is three indices (predicate, argument, argument), each looked up in its
//! position's table of one shared vocabulary; a goal list's embedding is the mean over
//! its atoms' index embeddings (one `embedding_bag`: the lookups and the pooling in one
//! op, padding excluded), then `h = tanh(W·mean + b)`. A successor's logit is
//! `h_successor · (G·h_state + g)`; the value is a small MLP on `h_state`. Parameters
//! live in one flat tensor, like [`hotlab_train::models::mlp::policy::ActorCritic`], so the optimizer,
//! the clip and the telemetry see one vector.

use crate::proof::goals::GOAL_WIDTH;
use hotlab_train::params::{FlatParams, ParamSlot};
use tch::{Device, Kind, Tensor};

/// Sizes of the network.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ProofArch {
    pub vocab: usize,
    pub embed: usize,
    pub hidden: usize,
    pub successors: usize,
}

impl ProofArch {
    pub fn layout(&self) -> Vec<ParamSlot> {
        let (v, d, h) = (self.vocab as i64, self.embed as i64, self.hidden as i64);
        let shapes: [(&str, Vec<i64>); 9] = [
            ("embed", vec![3 * v, d]),
            ("goal.w", vec![d, h]),
            ("goal.b", vec![h]),
            ("score.w", vec![h, h]),
            ("score.b", vec![h]),
            ("value.0.w", vec![h, h]),
            ("value.0.b", vec![h]),
            ("value.1.w", vec![h, 1]),
            ("value.1.b", vec![1]),
        ];
        let mut offset = 0;
        shapes
            .into_iter()
            .map(|(name, shape)| {
                let slot = ParamSlot { name: name.into(), shape, offset };
                offset += slot.numel();
                slot
            })
            .collect()
    }
}

/// What a forward returns, with the time its embedding lookups took.
pub struct ProofOut {
    pub logits: Tensor,
    pub value: Tensor,
    pub lookup_s: f64,
}

pub struct ProofNet {
    pub arch: ProofArch,
    pub layout: Vec<ParamSlot>,
    pub flat: Tensor,
    pub flat_grad: Tensor,
    params: Vec<Tensor>,
}

hotlab_train::flat_network!(ProofNet);

impl ProofNet {
    /// A fresh network (libtorch's global generator: seed it first): embeddings N(0, 1),
    /// layers orthogonal-like scaled normal, the score and value heads small.
    pub fn new(arch: ProofArch, device: Device) -> Self {
        let layout = arch.layout();
        let total: i64 = layout.iter().map(ParamSlot::numel).sum();
        let flat = Tensor::zeros([total], (Kind::Float, Device::Cpu));
        for slot in &layout {
            let n = slot.numel();
            let fan_in = slot.shape[0] as f64;
            let std = match slot.name.as_str() {
                "embed" => 1.0,
                "score.w" => 0.1 / fan_in.sqrt(),
                "value.1.w" => 1.0 / fan_in.sqrt(),
                name if name.ends_with(".w") => (2.0 / fan_in).sqrt(),
                _ => 0.0,
            };
            if std > 0.0 {
                flat.narrow(0, slot.offset, n).copy_(&(Tensor::randn([n], (Kind::Float, Device::Cpu)) * std));
            }
        }
        Self::from_flat(arch, flat.to_device(device))
    }

    pub fn from_flat(arch: ProofArch, flat: Tensor) -> Self {
        let (layout, flat, flat_grad, params) = FlatParams::new(arch.layout(), flat).into_parts();
        Self { arch, layout, flat, flat_grad, params }
    }

    pub fn device(&self) -> Device {
        self.flat.device()
    }

    /// The flat parameters, copied to the host.
    pub fn host_params(&self) -> Vec<f32> {
        Vec::<f32>::try_from(&self.flat.to_device(Device::Cpu)).expect("flat params are f32")
    }

    pub fn zero_grad(&mut self) {
        let _ = self.flat_grad.zero_();
    }

    /// Goal-list embeddings `[N, hidden]` of `[N, 30]` index rows.
    fn goals(&self, rows: &Tensor, lookup_s: &mut f64) -> Tensor {
        let n = rows.size()[0];
        let v = self.arch.vocab as i64;
        let position = Tensor::from_slice(&[0i64, v, 2 * v]).to_device(rows.device()).repeat([10]);
        // Each position has its own table; padding (0) stays 0, which embedding_bag skips.
        let idx = (rows + position).masked_fill(&rows.eq(0), 0).view([-1]);
        let offsets =
            Tensor::arange_start_step(0, n * GOAL_WIDTH as i64, GOAL_WIDTH as i64, (Kind::Int64, rows.device()));
        let start = std::time::Instant::now();
        let (mean, _, _, _) = Tensor::embedding_bag_padding_idx(
            &self.params[0],
            &idx,
            &offsets,
            false,
            1,
            false,
            None::<Tensor>,
            false,
            0,
        );
        *lookup_s += start.elapsed().as_secs_f64();
        (mean.matmul(&self.params[1]) + &self.params[2]).tanh()
    }

    /// Masked-out logits are left as they are (the distribution masks them).
    pub fn forward(&self, state: &Tensor, successors: &Tensor) -> ProofOut {
        let b = state.size()[0];
        let k = self.arch.successors as i64;
        let rows = Tensor::cat(&[state.view([b, GOAL_WIDTH as i64]), successors.view([b * k, GOAL_WIDTH as i64])], 0);
        let mut lookup_s = 0.0;
        let h = self.goals(&rows, &mut lookup_s);
        let (hs, hk) = (h.narrow(0, 0, b), h.narrow(0, b, b * k).view([b, k, -1]));
        let g = hs.matmul(&self.params[3]) + &self.params[4];
        let logits = (hk * g.unsqueeze(1)).sum_dim_intlist([-1i64].as_slice(), false, Kind::Float);
        let value = ((hs.matmul(&self.params[5]) + &self.params[6]).tanh().matmul(&self.params[7]) + &self.params[8])
            .squeeze_dim(-1);
        ProofOut { logits, value, lookup_s }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arch() -> ProofArch {
        ProofArch { vocab: 17, embed: 8, hidden: 16, successors: 20 }
    }

    #[test]
    fn shapes_padding_and_gradients_land_in_the_flat_vector() {
        let _seeded = hotlab_train::testing::torch_seed(0);
        let net = ProofNet::new(arch(), Device::Cpu);
        let state = Tensor::zeros([2, 1, 10, 3], (Kind::Int64, Device::Cpu));
        let _ = state.narrow(3, 0, 1).narrow(2, 0, 1).fill_(12);
        let succ = Tensor::zeros([2, 20, 10, 3], (Kind::Int64, Device::Cpu));
        let _ = succ.narrow(1, 0, 2).narrow(2, 0, 1).narrow(3, 0, 1).fill_(10);
        let _ = succ.narrow(1, 1, 1).narrow(2, 0, 1).narrow(3, 1, 1).fill_(13);
        let out = net.forward(&state, &succ);
        assert_eq!(out.logits.size(), [2, 20]);
        assert_eq!(out.value.size(), [2]);
        let l = Vec::<f32>::try_from(out.logits.get(0)).unwrap();
        assert_ne!(l[0], l[1], "successors with different atoms score differently");
        assert_eq!(l[2], l[3], "padded successors all look the same");
        (out.logits.sum(Kind::Float) + out.value.sum(Kind::Float)).backward();
        let g = &net.flat_grad;
        let embed = &net.layout[0];
        let v = 17;
        let row = |r: i64| f64::try_from(g.narrow(0, embed.offset + r * 8, 8).abs().sum(Kind::Float)).unwrap();
        assert!(row(12) > 0.0 && row(10) > 0.0 && row(v + 13) > 0.0, "used rows get gradients");
        assert_eq!(row(0), 0.0, "the padding row gets none");
        assert_eq!(row(13), 0.0, "13 was only used as an argument, which has its own table");
    }
}
