//! The CNN actor-critic for image observations (CleanRL's `ppo_atari.py` `Agent`): one
//! encoder shared by the actor and the critic, a linear head for the actor's outputs (each
//! categorical head's logits, a Gaussian's means) and one for the value, and a learned
//! state-independent log-std where the action space has real components. libtorch's ops
//! and autograd throughout; the image stays bytes until the encoder's first step.
//!
//! - [`encoder`]: the convolutions (the Nature CNN, or a small one for grids);
//! - [`agent`]: PPO's gradient of it by autograd, and its rollout forward;
//! - [`learner`]: PPO with it, for any workload whose observation is an image.

pub mod agent;
pub mod encoder;
pub mod learner;

use crate::checkpoint::Stored;
use crate::exec::EnvMaker;
use crate::models::layers::{Builder, Init, Linear};
use crate::models::play::{self, Play, SAMPLING_STREAM};
use crate::params::{FlatParams, Network};
use crate::workload::{Evaluation, TrainedPolicy};
use anyhow::{bail, Result};
pub use encoder::{Encoder, Image, Images, Layout, Trunk};
use hotlab_env::{EnvSpec, FieldSpec};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use tch::{Device, Kind, Tensor};

/// The key of the network's shape in a checkpoint's `spec.json`.
pub const CHECKPOINT_KEY: &str = "cnn";

/// Whether the CNN reads this env's observation: one field of bytes shaped as an image
/// (`[H, W]`, `[H, W, C]` or `[C, H, W]`). Other observations keep the MLP.
pub fn reads(spec: &EnvSpec) -> bool {
    matches!(spec.fields.as_slice(), [f] if f.kind.is_bytes() && matches!(f.shape.len(), 2 | 3))
}

/// What the network is made for: the image it reads, the actor's categorical choices
/// (all heads' together) and real components.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CnnShape {
    pub obs: FieldSpec,
    pub logits: usize,
    pub gaussian: usize,
}

impl CnnShape {
    pub fn of(spec: &EnvSpec) -> Result<Self> {
        match spec.fields.as_slice() {
            [field] if reads(spec) => {
                Ok(Self { obs: field.clone(), logits: spec.total_choices(), gaussian: spec.continuous })
            }
            _ => bail!(
                "env '{}' observes no image the CNN policy can read (one field of uint8 or bool bytes)",
                spec.name
            ),
        }
    }
}

/// The network: its layers over one flat parameter vector.
pub struct CnnNet {
    pub shape: CnnShape,
    encoder: Encoder,
    actor: Linear,
    critic: Linear,
    log_std: Option<usize>,
    pub params: FlatParams,
}

/// How the network computes: the kind of its products (`--precision`; master weights,
/// the loss and Adam stay fp32) and its convolutions' memory layout (`--conv-layout`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Compute {
    pub kind: Kind,
    pub layout: Layout,
}

impl Compute {
    /// fp32 products, in `device`'s automatic layout: a loaded checkpoint's, for play.
    pub fn fp32_on(device: Device) -> Self {
        Self { kind: Kind::Float, layout: Layout::resolve(Default::default(), device) }
    }
}

impl CnnNet {
    /// Its layers, added to a builder of `compute`'s products.
    fn layers(shape: &CnnShape, compute: Compute) -> Result<(Builder, Encoder, Linear, Linear, Option<usize>)> {
        let mut b = Builder::new(compute.kind);
        let encoder = Encoder::new(&mut b, "encoder", &shape.obs, compute.layout)?;
        let outputs = (shape.logits + shape.gaussian) as i64;
        // CleanRL's gains: 0.01 for the actor (near-uniform first choices), 1 for the critic.
        let actor = b.linear_with("actor", encoder.width, outputs, Init::Orthogonal(0.01));
        let critic = b.linear_with("critic", encoder.width, 1, Init::Orthogonal(1.0));
        let log_std = (shape.gaussian > 0).then(|| b.param("log_std", &[shape.gaussian as i64], Init::Zero));
        Ok((b, encoder, actor, critic, log_std))
    }

    /// A fresh network, drawn from libtorch's generator (seeded by the run), on `device`.
    pub fn new(shape: CnnShape, device: Device, compute: Compute) -> Result<Self> {
        let (b, encoder, actor, critic, log_std) = Self::layers(&shape, compute)?;
        Ok(Self { shape, encoder, actor, critic, log_std, params: b.finish(device) })
    }

    /// A network whose parameters are `flat` (a checkpoint's).
    pub fn from_flat(shape: CnnShape, flat: Tensor, compute: Compute) -> Result<Self> {
        let (b, encoder, actor, critic, log_std) = Self::layers(&shape, compute)?;
        let n = flat.numel();
        let Some(params) = b.with(flat) else { bail!("{n} parameters do not fit the CNN for {:?}", shape.obs.shape) };
        Ok(Self { shape, encoder, actor, critic, log_std, params })
    }

    pub fn device(&self) -> Device {
        self.params.flat.device()
    }

    /// Images `[B, …]` as the encoder's convolutions read them (bytes to float, scaled,
    /// laid out).
    pub fn convert(&self, obs: &Tensor) -> Images {
        self.encoder.convert(obs)
    }

    /// The encoder's features of images [`CnnNet::convert`] made.
    pub fn features(&self, images: &Images) -> Tensor {
        self.encoder.forward(&self.params, images)
    }

    /// The actor's outputs `[B, logits + gaussian]` from features.
    pub fn outputs(&self, features: &Tensor) -> Tensor {
        self.actor.forward(&self.params, features)
    }

    /// The critic's values `[B]` from features.
    pub fn value(&self, features: &Tensor) -> Tensor {
        self.critic.forward(&self.params, features).squeeze_dim(-1)
    }

    /// The Gaussian head's log-std, where the actor has one.
    pub fn log_std(&self) -> Option<&Tensor> {
        self.log_std.map(|i| self.params.get(i))
    }

    pub fn zero_grad(&mut self) {
        self.params.zero_grad();
    }

    /// Images `[rows, bytes]` from host bytes, on the network's device.
    pub fn images(&self, bytes: &[u8], rows: usize) -> Tensor {
        Tensor::from_slice(bytes).view([rows as i64, -1]).to_device(self.device())
    }
}

crate::flat_network!(CnnNet, params, shape);

/// A trained (or loaded) CNN and the envs it plays.
pub struct TrainedCnn {
    pub net: CnnNet,
    pub env: Arc<dyn EnvMaker>,
}

impl TrainedCnn {
    /// A checkpoint's CNN, checked against the image and actions of the envs it will play.
    pub fn load(stored: Stored, env: Arc<dyn EnvMaker>) -> Result<Self> {
        let shape: CnnShape = stored.shape(CHECKPOINT_KEY)?;
        let want = CnnShape::of(env.vector_env(1, 0, 0).spec())?;
        if shape != want {
            bail!(
                "the checkpoint's network reads {:?} {:?} images and gives {} choices and {} real components; the {} env has {:?} {:?}, {} and {}",
                shape.obs.kind,
                shape.obs.shape,
                shape.logits,
                shape.gaussian,
                env.name(),
                want.obs.kind,
                want.obs.shape,
                want.logits,
                want.gaussian
            );
        }
        let compute = Compute::fp32_on(Device::Cpu);
        let flat = stored.params(CnnNet::layers(&shape, compute)?.0.numel())?;
        Ok(Self { net: CnnNet::from_flat(shape, flat, compute)?, env })
    }

    fn play(&self, episodes: usize, seed: u64, play: Play) -> Result<Evaluation> {
        let net = &self.net;
        // A sampled evaluation draws from libtorch's generator, seeded from its own seed.
        tch::manual_seed((seed ^ SAMPLING_STREAM) as i64);
        let report = play::episodes(self.env.as_ref(), (episodes, seed), &mut |obs, chosen| {
            tch::no_grad(|| {
                let bytes = obs.fields[0].as_bytes();
                let rows = bytes.len() / net.shape.obs.row_bytes();
                let outputs = net.outputs(&net.features(&net.convert(&net.images(bytes, rows))));
                chosen.fill(&outputs, net.log_std(), play);
            })
        })?;
        report.evaluation(play)
    }
}

impl TrainedPolicy for TrainedCnn {
    fn network(&self) -> &dyn Network {
        &self.net
    }

    fn checkpoint_key(&self) -> &'static str {
        CHECKPOINT_KEY
    }

    fn evaluate(&self, episodes: usize, seed: u64) -> Result<Evaluation> {
        self.play(episodes, seed, Play::Greedy)
    }

    fn evaluate_sampled(&self, episodes: usize, seed: u64) -> Result<Evaluation> {
        self.play(episodes, seed, Play::Sampled)
    }
}
