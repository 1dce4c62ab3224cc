//! The recurrent actor-critic (`--rnn lstm|gru`; CleanRL's `ppo_atari_lstm.py` `Agent`):
//! an encoder (a tanh MLP for a vector of features, the CNN for an image), a recurrent
//! core, and linear heads on the core's output: the actor's (each categorical head's
//! logits, a Gaussian's means, with a learned state-independent log-std) and the critic's.
//! libtorch's ops and autograd throughout.
//!
//! - [`core`]: the LSTM or GRU cell, stepped while acting, a whole-sequence call per
//!   stretch between episode starts while learning (or a cell call per step);
//! - [`agent`]: PPO's gradient of it over minibatches of whole envs, and its rollout
//!   forward, which carries each env's state and resets it where an episode starts;
//! - [`learner`]: PPO with it, for the workloads whose policy is the shared one.

pub mod agent;
pub mod core;
pub mod learner;

use crate::checkpoint::Stored;
use crate::exec::EnvMaker;
use crate::models::cnn::{self, Compute, Encoder};
use crate::models::layers::{Builder, Init, Linear};
use crate::models::play::{self, Play, SAMPLING_STREAM};
use crate::normalize::ObsNorm;
use crate::params::{FlatParams, Network};
use crate::workload::{Evaluation, TrainedPolicy};
use anyhow::{bail, Result};
use core::{Core, State};
use hotlab_core::choices::Rnn;
use hotlab_core::run_knobs;
use hotlab_env::{EnvSpec, FieldKind, FieldSpec};
use hotlab_spec::SpecError;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use tch::{Device, Tensor};

/// The key of the network's shape in a checkpoint's `spec.json`.
pub const CHECKPOINT_KEY: &str = "recurrent";

/// What the encoder reads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Input {
    /// A vector of this many features (the tanh MLP's input).
    Features(usize),
    /// An image's bytes (the CNN's).
    Image(FieldSpec),
}

/// What the network is made for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RnnShape {
    pub input: Input,
    /// The MLP encoder's hidden widths (features only).
    pub hidden: Vec<usize>,
    pub cell: Rnn,
    pub width: usize,
    /// The actor's categorical choices (all heads' together) and real components.
    pub logits: usize,
    pub gaussian: usize,
}

impl RnnShape {
    /// The network an env's observation calls for: the CNN for one image field, the MLP
    /// for one vector of features.
    /// A refusal names `--rnn`: an observation it cannot read, or no cell.
    pub fn of(spec: &EnvSpec, hidden: &[usize], cell: Rnn, width: usize) -> Result<Self, SpecError> {
        let input = match spec.fields.as_slice() {
            [field] if cnn::reads(spec) => Input::Image(field.clone()),
            [field] if field.kind != FieldKind::I64 => Input::Features(field.numel()),
            _ => {
                return Err(SpecError::new(
                    "rnn",
                    format!(
                        "{}: env '{}' observes {} fields ({}), and the recurrent policy reads one vector or one image (a Dict or Tuple observation trains with --rnn none, its combined encoder); allowed: none",
                        cell.as_str(),
                        spec.name,
                        spec.fields.len(),
                        spec.fields.iter().map(|f| f.name.as_str()).collect::<Vec<_>>().join(", ")
                    ),
                ))
            }
        };
        if cell == Rnn::None {
            return Err(SpecError::of(&run_knobs::RNN, "none: a recurrent policy needs a cell; allowed: lstm, gru"));
        }
        Ok(Self {
            input,
            hidden: hidden.to_vec(),
            cell,
            width,
            logits: spec.total_choices(),
            gaussian: spec.continuous,
        })
    }

    /// Features per env the rollout keeps (0: an image's bytes instead).
    pub fn obs_dim(&self) -> usize {
        match self.input {
            Input::Features(n) => n,
            Input::Image(_) => 0,
        }
    }
}

/// The encoder before the core.
enum Encoding {
    /// Tanh layers (CleanRL's gain √2).
    Mlp(Vec<Linear>),
    Cnn(Encoder),
}

/// The network: its layers over one flat parameter vector.
pub struct RnnNet {
    pub shape: RnnShape,
    encoder: Encoding,
    pub core: Core,
    actor: Linear,
    critic: Linear,
    log_std: Option<usize>,
    pub params: FlatParams,
}

type Layers = (Builder, Encoding, Core, Linear, Linear, Option<usize>);

impl RnnNet {
    fn layers(shape: &RnnShape, compute: Compute) -> Result<Layers> {
        let mut b = Builder::new(compute.kind);
        let (encoder, features) = match &shape.input {
            Input::Features(n) => {
                let mut width = *n as i64;
                let mut layers = Vec::new();
                for (i, &h) in shape.hidden.iter().enumerate() {
                    layers.push(b.linear_with(&format!("encoder.{i}"), width, h as i64, Init::Orthogonal(2f64.sqrt())));
                    width = h as i64;
                }
                (Encoding::Mlp(layers), width)
            }
            Input::Image(field) => {
                let e = Encoder::new(&mut b, "encoder", field, compute.layout)?;
                let width = e.width;
                (Encoding::Cnn(e), width)
            }
        };
        let core = Core::new(&mut b, "core", shape.cell, features, shape.width as i64);
        let outputs = (shape.logits + shape.gaussian) as i64;
        let width = shape.width as i64;
        let actor = b.linear_with("actor", width, outputs, Init::Orthogonal(0.01));
        let critic = b.linear_with("critic", width, 1, Init::Orthogonal(1.0));
        let log_std = (shape.gaussian > 0).then(|| b.param("log_std", &[shape.gaussian as i64], Init::Zero));
        Ok((b, encoder, core, actor, critic, log_std))
    }

    /// A fresh network, drawn from libtorch's generator (seeded by the run), on `device`.
    pub fn new(shape: RnnShape, device: Device, compute: Compute) -> Result<Self> {
        let (b, encoder, core, actor, critic, log_std) = Self::layers(&shape, compute)?;
        Ok(Self { shape, encoder, core, actor, critic, log_std, params: b.finish(device) })
    }

    /// A network whose parameters are `flat` (a checkpoint's).
    pub fn from_flat(shape: RnnShape, flat: Tensor, compute: Compute) -> Result<Self> {
        let (b, encoder, core, actor, critic, log_std) = Self::layers(&shape, compute)?;
        let n = flat.numel();
        let Some(params) = b.with(flat) else { bail!("{n} parameters do not fit the recurrent policy {shape:?}") };
        Ok(Self { shape, encoder, core, actor, critic, log_std, params })
    }

    pub fn device(&self) -> Device {
        self.params.flat.device()
    }

    /// The encoder's features `[B, F]` of observations `[B, …]` (features, or an image's
    /// bytes converted on the device).
    pub fn encode(&self, x: &Tensor) -> Tensor {
        match &self.encoder {
            Encoding::Mlp(layers) => layers.iter().fold(x.shallow_clone(), |h, l| l.forward(&self.params, &h).tanh()),
            Encoding::Cnn(e) => e.forward(&self.params, &e.convert(x)),
        }
    }

    /// One step of the core for every env ([`Core::step`]).
    pub fn step(&self, features: &Tensor, state: &State, keep: Option<&Tensor>) -> (Tensor, State) {
        self.core.step(&self.params, features, state, keep)
    }

    /// A zero state for `rows` envs.
    pub fn zeros(&self, rows: usize) -> State {
        self.core.zeros(rows, self.device())
    }

    /// The actor's outputs `[B, logits + gaussian]` from the core's outputs.
    pub fn outputs(&self, h: &Tensor) -> Tensor {
        self.actor.forward(&self.params, h)
    }

    /// The critic's values `[B]` from the core's outputs.
    pub fn value(&self, h: &Tensor) -> Tensor {
        self.critic.forward(&self.params, h).squeeze_dim(-1)
    }

    pub fn log_std(&self) -> Option<&Tensor> {
        self.log_std.map(|i| self.params.get(i))
    }

    /// What one byte of an image is worth as a feature (1 for a vector's encoder).
    pub fn frame_scale(&self) -> f64 {
        match &self.encoder {
            Encoding::Mlp(_) => 1.0,
            Encoding::Cnn(e) => e.scale,
        }
    }

    /// What the encoder says it is, for the run's notes.
    pub fn describe(&self) -> String {
        let encoder = match &self.encoder {
            Encoding::Mlp(_) => format!("a tanh MLP {:?}", self.shape.hidden),
            Encoding::Cnn(e) => format!("the {:?} CNN", e.trunk),
        };
        format!("{encoder}, then {} of width {}", self.shape.cell.as_str().to_uppercase(), self.shape.width)
    }

    /// Rows of observations from the host, on the network's device: features (f32,
    /// normalized as in training) or an image's bytes.
    fn observe(&self, obs: &hotlab_env::Observations, norm: Option<&ObsNorm>) -> Tensor {
        let field = &obs.fields[0];
        let width = match &self.shape.input {
            Input::Image(f) => f.numel(),
            Input::Features(n) => *n,
        };
        let rows = (field.len() / width.max(1)) as i64;
        let x = match self.shape.input {
            Input::Image(_) => Tensor::from_slice(field.as_bytes()),
            Input::Features(_) => {
                let mut x = field.features().expect("a features field").into_owned();
                if let Some(norm) = norm {
                    norm.apply(&mut x);
                }
                Tensor::from_slice(&x)
            }
        };
        x.view([rows, width as i64]).to_device(self.device())
    }
}

crate::flat_network!(RnnNet, params, shape);

/// A trained (or loaded) recurrent policy, the statistics its inputs are normalized by
/// (`--obs-norm`), and the envs it plays.
pub struct TrainedRnn {
    pub net: RnnNet,
    pub obs_norm: Option<ObsNorm>,
    pub env: Arc<dyn EnvMaker>,
}

impl TrainedRnn {
    /// A checkpoint's recurrent policy, checked against the envs it will play.
    pub fn load(stored: Stored, env: Arc<dyn EnvMaker>) -> Result<Self> {
        let shape: RnnShape = stored.shape(CHECKPOINT_KEY)?;
        let want = RnnShape::of(env.vector_env(1, 0, 0).spec(), &shape.hidden, shape.cell, shape.width)?;
        if shape != want {
            bail!(
                "the checkpoint's recurrent policy reads {:?} and gives {} choices and {} real components; the {} env has {:?}, {} and {}",
                shape.input,
                shape.logits,
                shape.gaussian,
                env.name(),
                want.input,
                want.logits,
                want.gaussian
            );
        }
        if shape.hidden.len() > 8 || shape.hidden.iter().chain([&shape.width]).any(|&h| !(1..=4096).contains(&h)) {
            bail!(
                "the checkpoint's widths {:?} and {} are not 0 to 8 layers and a core of 1 to 4096",
                shape.hidden,
                shape.width
            );
        }
        let obs_norm = crate::models::mlp::read_obs_norm(&stored, CHECKPOINT_KEY, shape.obs_dim())?;
        let compute = Compute::fp32_on(Device::Cpu);
        let flat = stored.params(RnnNet::layers(&shape, compute)?.0.numel())?;
        Ok(Self { net: RnnNet::from_flat(shape, flat, compute)?, obs_norm, env })
    }

    /// Plays fresh episodes, each env's state carried from step to step and reset where
    /// its episode starts.
    fn play(&self, episodes: usize, seed: u64, play: Play) -> Result<Evaluation> {
        let net = &self.net;
        tch::manual_seed((seed ^ SAMPLING_STREAM) as i64);
        let mut state: Option<State> = None;
        let report = play::episodes(self.env.as_ref(), (episodes, seed), &mut |obs, chosen| {
            tch::no_grad(|| {
                let x = net.observe(obs, self.obs_norm.as_ref());
                let rows = x.size()[0] as usize;
                let now = state.take().unwrap_or_else(|| net.zeros(rows));
                let keep: Vec<f32> = chosen.starts.iter().map(|&s| if s { 0.0 } else { 1.0 }).collect();
                let keep = Tensor::from_slice(&keep).view([rows as i64, 1]).to_device(net.device());
                let (h, next) = net.step(&net.encode(&x), &now, Some(&keep));
                state = Some(next);
                let outputs = net.outputs(&h);
                chosen.fill(&outputs, net.log_std(), play);
            })
        })?;
        report.evaluation(play)
    }
}

impl TrainedPolicy for TrainedRnn {
    fn network(&self) -> &dyn Network {
        &self.net
    }

    fn checkpoint_key(&self) -> &'static str {
        CHECKPOINT_KEY
    }

    /// The network's shape, with the normalizer its inputs go through.
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
