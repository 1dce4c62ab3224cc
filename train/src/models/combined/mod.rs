//! The combined actor-critic for structured observations (a Gymnasium `Dict` or `Tuple`,
//! nested too, or a lone `Discrete`; Stable-Baselines3's `MultiInputPolicy`): one encoder
//! per leaf, chosen by the leaf's space, their features side by side in the space's order
//! (SB3's `CombinedExtractor`), then the actor's and the critic's tanh MLPs (`--hidden`,
//! CleanRL's `Agent` as the MLP policy has it) and their linear heads.
//!
//! - an image leaf (uint8 or bool, 2 or 3 dims): the CNN's encoder ([`crate::models::cnn::Encoder`]), its
//!   bytes kept bytes until the device;
//! - a vector leaf (any other Box, a MultiBinary): its floats as they are;
//! - a `Discrete`/`MultiDiscrete` leaf: each index one-hot over its choices.
//!
//! - [`agent`]: PPO's gradient of it by autograd over shuffled minibatches, and its
//!   rollout forward;
//! - [`learner`]: PPO with it, for the workloads whose policy is the shared one.

pub mod agent;
pub mod learner;

use crate::checkpoint::Stored;
use crate::exec::transfer::Mover;
use crate::exec::EnvMaker;
use crate::models::cnn::{Compute, Encoder};
use crate::models::layers::{Builder, Init, Linear};
use crate::models::play::{self, Play, SAMPLING_STREAM};
use crate::normalize::ObsNorm;
use crate::params::{FlatParams, Network};
use crate::workload::{Evaluation, TrainedPolicy};
use anyhow::{bail, Result};
use hotlab_core::choices::Transfer;
use hotlab_core::counters::Counters;
use hotlab_env::{EnvSpec, FieldData, FieldKind, FieldSpec, Observations};
use hotlab_spec::SpecError;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use tch::{Device, Kind, Tensor};

/// The key of the network's shape in a checkpoint's `spec.json`.
pub const CHECKPOINT_KEY: &str = "combined";

/// Whether this policy reads the env's observation: more than one field (a Dict's or a
/// Tuple's leaves), or one field of categories (a lone `Discrete`). A single vector or image
/// keeps the MLP or the CNN.
pub fn reads(spec: &EnvSpec) -> bool {
    spec.fields.len() > 1 || spec.fields.iter().any(|f| !f.classes.is_empty())
}

/// What the network is made for: the leaves it reads (in the space's order), the tanh
/// MLPs' widths, the actor's categorical choices (all heads' together) and real components.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CombinedShape {
    pub leaves: Vec<FieldSpec>,
    pub hidden: Vec<usize>,
    pub logits: usize,
    pub gaussian: usize,
}

impl CombinedShape {
    /// The network `spec`'s observation calls for; a leaf no encoder reads is refused
    /// naming it.
    /// A refusal names the env (`--env`): its observation, not a setting, is what the
    /// combined policy cannot read.
    pub fn of(spec: &EnvSpec, hidden: &[usize]) -> Result<Self, SpecError> {
        let refuse = |message: String| Err(SpecError::of(&hotlab_spec::knobs::ENV, message));
        if spec.fields.is_empty() {
            return refuse(format!(
                "env '{}' observes nothing: a structured observation needs at least one leaf",
                spec.name
            ));
        }
        for f in &spec.fields {
            match f.kind {
                FieldKind::I64 if f.classes.len() != f.numel() || f.classes.contains(&0) => return refuse(format!(
                    "the leaf '{}' of env '{}' holds indices with no number of choices for each (a Discrete's or MultiDiscrete's); the combined policy one-hot encodes only those",
                    f.name,
                    spec.name
                )),
                k if k.is_bytes() && !matches!(f.shape.len(), 2 | 3) => return refuse(format!(
                    "the leaf '{}' of env '{}' is bytes of shape {:?}: an image leaf is [H, W], [H, W, C] or [C, H, W]",
                    f.name,
                    spec.name,
                    f.shape
                )),
                _ => {}
            }
        }
        Ok(Self {
            leaves: spec.fields.clone(),
            hidden: hidden.to_vec(),
            logits: spec.total_choices(),
            gaussian: spec.continuous,
        })
    }
}

/// How one leaf becomes features, and where its values are in the inputs.
#[derive(Clone)]
enum Leaf {
    /// Columns `at..at + width` of the float features.
    Vector { at: i64, width: i64 },
    /// Input index leaf number `input`, each element one-hot over its choices.
    OneHot { input: usize, classes: Vec<i64> },
    /// Columns `at..at + bytes` of the bytes, through a CNN.
    Image { at: i64, bytes: i64, encoder: Box<Encoder> },
}

/// A batch of observations as the network reads them: the float leaves side by side
/// `[B, F]` (`[B, 0]` where there are none), each index leaf `[B, k]` (int64), and the
/// image leaves' bytes side by side `[B, bytes]` where there are any ([`crate::rollout::Rollout::with_leaves`]'s batch).
pub struct Inputs<'a> {
    pub features: &'a Tensor,
    pub index: &'a [Tensor],
    pub bytes: Option<&'a Tensor>,
}

impl<'a> Inputs<'a> {
    /// A batch's observations ([`crate::rollout::Rollout::with_leaves`]'s layout), of a
    /// network whose observation has `index` index leaves.
    pub fn of(batch: &'a crate::rollout::Batch, index: usize) -> Self {
        Self { features: &batch.obs, index: &batch.extra[..index], bytes: batch.extra.get(index) }
    }
}

/// The combined encoder: each leaf's features, side by side in the space's order.
pub struct Combined {
    leaves: Vec<Leaf>,
    /// Features out.
    pub width: i64,
    /// How many leaves are indices.
    pub index: usize,
}

impl Combined {
    /// The encoder of `leaves`, its CNNs' parameters added to `b` (`encoder.<key>.…`).
    pub fn new(b: &mut Builder, leaves: &[FieldSpec], compute: Compute) -> Result<Self> {
        let (mut features, mut bytes, mut index, mut width) = (0i64, 0i64, 0usize, 0i64);
        let mut built = Vec::new();
        for f in leaves {
            let leaf = match f.kind {
                FieldKind::F32 => {
                    let w = f.numel() as i64;
                    features += w;
                    width += w;
                    Leaf::Vector { at: features - w, width: w }
                }
                FieldKind::I64 => {
                    index += 1;
                    let classes: Vec<i64> = f.classes.iter().map(|&c| c as i64).collect();
                    width += classes.iter().sum::<i64>();
                    Leaf::OneHot { input: index - 1, classes }
                }
                FieldKind::U8 | FieldKind::Bool => {
                    let encoder = Encoder::new(b, &format!("encoder.{}", f.name), f, compute.layout)?;
                    let n = f.numel() as i64;
                    bytes += n;
                    width += encoder.width;
                    Leaf::Image { at: bytes - n, bytes: n, encoder: Box::new(encoder) }
                }
            };
            built.push(leaf);
        }
        Ok(Self { leaves: built, width, index })
    }

    /// Features `[B, width]` of a batch of inputs.
    pub fn forward(&self, p: &FlatParams, x: &Inputs<'_>) -> Tensor {
        let parts: Vec<Tensor> = self
            .leaves
            .iter()
            .map(|leaf| match leaf {
                Leaf::Vector { at, width } => x.features.narrow(1, *at, *width),
                Leaf::OneHot { input, classes } => {
                    let idx = &x.index[*input];
                    let hot: Vec<Tensor> = classes
                        .iter()
                        .enumerate()
                        .map(|(j, &c)| idx.select(1, j as i64).clamp(0, c - 1).one_hot(c).to_kind(Kind::Float))
                        .collect();
                    Tensor::cat(&hot, 1)
                }
                Leaf::Image { at, bytes, encoder } => {
                    let all = x.bytes.expect("an image leaf's bytes");
                    encoder.forward(p, &encoder.convert(&all.narrow(1, *at, *bytes).contiguous()))
                }
            })
            .collect();
        Tensor::cat(&parts, 1)
    }

    /// What each leaf's encoder is, for the run's notes.
    pub fn describe(&self, leaves: &[FieldSpec]) -> String {
        let each = self.leaves.iter().zip(leaves).map(|(leaf, f)| match leaf {
            Leaf::Vector { width, .. } => format!("'{}' {width} floats", f.name),
            Leaf::OneHot { classes, .. } => format!("'{}' one-hot {classes:?}", f.name),
            Leaf::Image { encoder, .. } => {
                format!("'{}' {:?} bytes through the {:?} CNN", f.name, f.shape, encoder.trunk)
            }
        });
        each.collect::<Vec<_>>().join(", ")
    }
}

/// The network: its layers over one flat parameter vector.
pub struct CombinedNet {
    pub shape: CombinedShape,
    pub encoder: Combined,
    actor: Vec<Linear>,
    critic: Vec<Linear>,
    log_std: Option<usize>,
    pub params: FlatParams,
}

type Layers = (Builder, Combined, Vec<Linear>, Vec<Linear>, Option<usize>);

impl CombinedNet {
    fn layers(shape: &CombinedShape, compute: Compute) -> Result<Layers> {
        let mut b = Builder::new(compute.kind);
        let encoder = Combined::new(&mut b, &shape.leaves, compute)?;
        // CleanRL's `Agent`: tanh layers of gain √2, the actor's head 0.01, the critic's 1.
        let mut mlp = |name: &str, out: usize, gain: f64| {
            let mut width = encoder.width;
            let mut layers = Vec::new();
            for (i, &h) in shape.hidden.iter().enumerate() {
                layers.push(b.linear_with(&format!("{name}.{i}"), width, h as i64, Init::Orthogonal(2f64.sqrt())));
                width = h as i64;
            }
            layers.push(b.linear_with(&format!("{name}.out"), width, out as i64, Init::Orthogonal(gain)));
            layers
        };
        let actor = mlp("actor", shape.logits + shape.gaussian, 0.01);
        let critic = mlp("critic", 1, 1.0);
        let log_std = (shape.gaussian > 0).then(|| b.param("log_std", &[shape.gaussian as i64], Init::Zero));
        Ok((b, encoder, actor, critic, log_std))
    }

    /// A fresh network, drawn from libtorch's generator (seeded by the run), on `device`.
    pub fn new(shape: CombinedShape, device: Device, compute: Compute) -> Result<Self> {
        let (b, encoder, actor, critic, log_std) = Self::layers(&shape, compute)?;
        Ok(Self { shape, encoder, actor, critic, log_std, params: b.finish(device) })
    }

    /// A network whose parameters are `flat` (a checkpoint's).
    pub fn from_flat(shape: CombinedShape, flat: Tensor, compute: Compute) -> Result<Self> {
        let (b, encoder, actor, critic, log_std) = Self::layers(&shape, compute)?;
        let n = flat.numel();
        let Some(params) = b.with(flat) else { bail!("{n} parameters do not fit the combined policy {shape:?}") };
        Ok(Self { shape, encoder, actor, critic, log_std, params })
    }

    pub fn device(&self) -> Device {
        self.params.flat.device()
    }

    /// The combined encoder's features `[B, F]`.
    pub fn features(&self, x: &Inputs<'_>) -> Tensor {
        self.encoder.forward(&self.params, x)
    }

    fn mlp(&self, layers: &[Linear], x: &Tensor) -> Tensor {
        let (last, hidden) = layers.split_last().expect("an output layer");
        let h = hidden.iter().fold(x.shallow_clone(), |h, l| l.forward(&self.params, &h).tanh());
        last.forward(&self.params, &h)
    }

    /// The actor's outputs `[B, logits + gaussian]` from features.
    pub fn outputs(&self, features: &Tensor) -> Tensor {
        self.mlp(&self.actor, features)
    }

    /// The critic's values `[B]` from features.
    pub fn value(&self, features: &Tensor) -> Tensor {
        self.mlp(&self.critic, features).squeeze_dim(-1)
    }

    pub fn log_std(&self) -> Option<&Tensor> {
        self.log_std.map(|i| self.params.get(i))
    }

    /// Rows of observations from the host (all of them, or env `row`'s), as the host's
    /// three parts of [`Inputs`].
    pub fn host_rows(&self, obs: &Observations, envs: usize, row: Option<usize>) -> HostRows {
        let rows = if row.is_some() { 1 } else { envs };
        let first = row.unwrap_or(0);
        let mut out = HostRows { rows, ..HostRows::default() };
        let (mut features, mut bytes) = (Vec::new(), Vec::new());
        for field in &obs.fields {
            let w = field.len() / envs.max(1);
            match field {
                FieldData::F32(v) => features.push((&v[first * w..(first + rows) * w], w)),
                FieldData::U8(v) | FieldData::Bool(v) => bytes.push((&v[first * w..(first + rows) * w], w)),
                FieldData::I64(v) => out.index.push((v[first * w..(first + rows) * w].to_vec(), w)),
            }
        }
        for e in 0..rows {
            for (v, w) in &features {
                out.features.extend_from_slice(&v[e * w..(e + 1) * w]);
            }
            for (v, w) in &bytes {
                out.bytes.extend_from_slice(&v[e * w..(e + 1) * w]);
            }
        }
        out
    }
}

/// Observations' rows on the host, in the inputs' layout: the float leaves side by side,
/// each index leaf with its width, the image leaves' bytes side by side.
#[derive(Default)]
pub struct HostRows {
    pub rows: usize,
    pub features: Vec<f32>,
    pub index: Vec<(Vec<i64>, usize)>,
    pub bytes: Vec<u8>,
}

impl HostRows {
    /// On `mover`'s device, each part in one copy: (features, index leaves, bytes).
    pub fn upload(&self, mover: &Mover, c: &mut Counters) -> (Tensor, Vec<Tensor>, Option<Tensor>) {
        let r = self.rows as i64;
        let width = |len: usize| len as i64 / r.max(1);
        let features = match self.features.is_empty() {
            true => Tensor::zeros([r, 0], (Kind::Float, mover.device)),
            false => mover.upload_f32(&self.features, &[r, width(self.features.len())], c),
        };
        let index = self.index.iter().map(|(v, w)| mover.upload_i64(v, &[r, *w as i64], c)).collect();
        let bytes = (!self.bytes.is_empty()).then(|| mover.upload(&self.bytes, &[r, width(self.bytes.len())], c));
        (features, index, bytes)
    }
}

crate::flat_network!(CombinedNet, params, shape);

/// A trained (or loaded) combined policy, the statistics its float leaves are normalized
/// by (`--obs-norm`, over those leaves side by side), and the envs it plays.
pub struct TrainedCombined {
    pub net: CombinedNet,
    pub obs_norm: Option<ObsNorm>,
    pub env: Arc<dyn EnvMaker>,
}

impl TrainedCombined {
    /// A checkpoint's combined policy, checked against the leaves and actions of the envs
    /// it will play.
    pub fn load(stored: Stored, env: Arc<dyn EnvMaker>) -> Result<Self> {
        let shape: CombinedShape = stored.shape(CHECKPOINT_KEY)?;
        let want = CombinedShape::of(env.vector_env(1, 0, 0).spec(), &shape.hidden)?;
        if shape != want {
            let keys =
                |s: &CombinedShape| s.leaves.iter().map(|f| format!("{} {:?}", f.name, f.shape)).collect::<Vec<_>>();
            bail!(
                "the checkpoint's combined policy reads the leaves {:?} and gives {} choices and {} real components; the {} env has {:?}, {} and {}",
                keys(&shape),
                shape.logits,
                shape.gaussian,
                env.name(),
                keys(&want),
                want.logits,
                want.gaussian
            );
        }
        if shape.hidden.len() > 8 || shape.hidden.iter().any(|&h| !(1..=4096).contains(&h)) {
            bail!("the checkpoint's widths {:?} are not 0 to 8 layers of 1 to 4096", shape.hidden);
        }
        let floats = shape.leaves.iter().filter(|f| f.kind == FieldKind::F32).map(FieldSpec::numel).sum();
        let obs_norm = crate::models::mlp::read_obs_norm(&stored, CHECKPOINT_KEY, floats)?;
        let compute = Compute::fp32_on(Device::Cpu);
        let flat = stored.params(CombinedNet::layers(&shape, compute)?.0.numel())?;
        Ok(Self { net: CombinedNet::from_flat(shape, flat, compute)?, obs_norm, env })
    }

    fn play(&self, episodes: usize, seed: u64, play: Play) -> Result<Evaluation> {
        let net = &self.net;
        tch::manual_seed((seed ^ SAMPLING_STREAM) as i64);
        let report = play::episodes(self.env.as_ref(), (episodes, seed), &mut |obs, chosen| {
            tch::no_grad(|| {
                let envs = chosen.starts.len();
                let mover = Mover::new(Transfer::Packed, net.device());
                let mut host = net.host_rows(obs, envs, None);
                if let Some(norm) = &self.obs_norm {
                    norm.apply(&mut host.features);
                }
                let (features, index, bytes) = host.upload(&mover, &mut Counters::default());
                let x = Inputs { features: &features, index: &index, bytes: bytes.as_ref() };
                let outputs = net.outputs(&net.features(&x));
                chosen.fill(&outputs, net.log_std(), play);
            })
        })?;
        report.evaluation(play)
    }
}

impl TrainedPolicy for TrainedCombined {
    fn network(&self) -> &dyn Network {
        &self.net
    }

    fn checkpoint_key(&self) -> &'static str {
        CHECKPOINT_KEY
    }

    /// The network's shape, with the normalizer its float leaves go through.
    fn shape(&self) -> serde_json::Value {
        crate::models::mlp::with_obs_norm(self.net.shape(), self.obs_norm.as_ref())
    }

    fn evaluate(&self, episodes: usize, seed: u64) -> Result<Evaluation> {
        self.play(episodes, seed, Play::Greedy)
    }

    fn evaluate_sampled(&self, episodes: usize, seed: u64) -> Result<Evaluation> {
        self.play(episodes, seed, Play::Sampled)
    }
}
