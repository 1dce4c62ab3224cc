//! The world model (DreamerV3's, scaled for a CPU): a conv encoder of 64×64 frames, an
//! RSSM (a GRU's deterministic state and categorical latents with 1 % unimix and
//! straight-through gradients), a conv decoder, reward and continue heads, and its loss:
//! reconstruction + symlog reward + continue, plus the KL balance (0.5 dynamics, 0.1
//! representation) with 1 nat of free bits.

use super::render::PIXELS;
use super::replay::Batch;
use hotlab_specs::dreamer::{EncoderMode, DREAMER_IMAGE};
use hotlab_specs::dreamer::{ENCODER, RSSM};
use hotlab_train::models::layers::{symlog, Block, Builder, Conv, Gru, Linear};
use hotlab_train::params::FlatParams;
use hotlab_train::profiler::Profiler;
use tch::{Device, Kind, Tensor};

/// CartPole's actions.
pub const ACTIONS: i64 = 2;
/// DreamerV3's mix of a uniform into every categorical.
const UNIMIX: f64 = 0.01;
/// Nats of KL below which the KL terms give no gradient.
const FREE_NATS: f64 = 1.0;
const BETA_DYN: f64 = 0.5;
const BETA_REP: f64 = 0.1;

/// The networks' sizes for `--size k`.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Dims {
    /// The encoder's first channels (2×, 4×, 8× after).
    pub depth: i64,
    /// The GRU's state.
    pub deter: i64,
    /// Every MLP's hidden width.
    pub hidden: i64,
    /// Categorical latents, and the classes of each.
    pub groups: i64,
    pub classes: i64,
}

impl Dims {
    pub fn new(size: usize) -> Self {
        let k = size as i64;
        Self { depth: 8 * k, deter: 128 * k, hidden: 128 * k, groups: (8 * k).min(32), classes: (8 * k).min(32) }
    }

    pub fn stoch(&self) -> i64 {
        self.groups * self.classes
    }

    /// What the actor, the critic and the heads read: the GRU's state and the latents.
    pub fn feat(&self) -> i64 {
        self.deter + self.stoch()
    }

    /// The encoder's output: 8 × depth channels of 4 × 4.
    pub fn embed(&self) -> i64 {
        8 * self.depth * 16
    }
}

/// A model state: `[N, deter]` and `[N, groups × classes]` (one-hot samples).
pub struct State {
    pub deter: Tensor,
    pub stoch: Tensor,
}

impl State {
    pub fn feat(&self) -> Tensor {
        Tensor::cat(&[&self.deter, &self.stoch], -1)
    }
}

/// A replayed batch observed: every step's state and both distributions' logits.
pub struct Observed {
    /// `[B, T, feat]`.
    pub feat: Tensor,
    /// `[B, T, groups, classes]`.
    pub post: Tensor,
    pub prior: Tensor,
}

/// The loss terms of one train step, as tensors (read when `--loss-read` says).
pub struct Terms {
    pub image: Tensor,
    pub reward: Tensor,
    pub cont: Tensor,
    pub kl: Tensor,
    /// The best constant predictor's image, reward and continue losses on the same batch
    /// (its mean frame, its rewards' mean, its base rate of continuing): what a model that
    /// learned nothing of the frames would reach, the floor a learning test compares with.
    pub floor: [Tensor; 3],
}

impl Terms {
    pub fn all(&self) -> [&Tensor; 4] {
        [&self.image, &self.reward, &self.cont, &self.kl]
    }
}

/// The constant predictors' losses on a batch: the frames' squared error around their mean
/// frame (summed over a frame), the symlog rewards' variance, and the entropy of the
/// continue flags' base rate (in nats, as the continue head's cross-entropy).
fn floor(target: &Tensor, symlog_reward: &Tensor, cont: &Tensor) -> [Tensor; 3] {
    let image = (target - target.mean_dim([0].as_slice(), true, Kind::Float))
        .square()
        .sum_dim_intlist([-1].as_slice(), false, Kind::Float)
        .mean(Kind::Float);
    let reward = (symlog_reward - symlog_reward.mean(Kind::Float)).square().mean(Kind::Float);
    let p = cont.mean(Kind::Float).clamp(1e-6, 1.0 - 1e-6);
    let q = -&p + 1.0;
    let cont = -(&p * p.log() + &q * q.log());
    [image, reward, cont].map(|t| t.detach())
}

pub struct WorldModel {
    pub p: FlatParams,
    pub dims: Dims,
    enc: [Conv; 4],
    dec_in: Linear,
    dec: [Conv; 4],
    img_in: Block,
    gru: Gru,
    prior: (Block, Linear),
    post: (Block, Linear),
    reward: (Block, Linear),
    cont: (Block, Linear),
}

impl WorldModel {
    /// Fresh networks on `device` whose products compute in `kind` (fp32 or bf16).
    pub fn new(dims: Dims, device: Device, kind: Kind) -> Self {
        let mut b = Builder::new(kind);
        let d = dims.depth;
        let chans = [1, d, 2 * d, 4 * d, 8 * d];
        let enc = std::array::from_fn(|i| b.conv(&format!("enc.{i}"), chans[i], chans[i + 1], false));
        let dec_in = b.linear("dec.in", dims.feat(), dims.embed(), 1.0);
        let dec = std::array::from_fn(|i| b.conv(&format!("dec.{i}"), chans[4 - i], chans[3 - i], true));
        let img_in = b.block("img_in", dims.stoch() + ACTIONS, dims.hidden);
        let gru = b.gru("gru", dims.hidden, dims.deter);
        let head = |b: &mut Builder, name: &str, inputs: i64, outputs: i64, scale: f64| {
            (
                b.block(&format!("{name}.0"), inputs, dims.hidden),
                b.linear(&format!("{name}.1"), dims.hidden, outputs, scale),
            )
        };
        let prior = head(&mut b, "prior", dims.deter, dims.stoch(), 1.0);
        let post = head(&mut b, "post", dims.deter + dims.embed(), dims.stoch(), 1.0);
        let reward = head(&mut b, "reward", dims.feat(), 1, 0.0);
        let cont = head(&mut b, "cont", dims.feat(), 1, 0.0);
        Self { p: b.finish(device), dims, enc, dec_in, dec, img_in, gru, prior, post, reward, cont }
    }

    /// `[N, PIXELS]` bytes → `[N, embed]`.
    pub fn encode(&self, frames: &Tensor) -> Tensor {
        let n = frames.size()[0];
        let side = DREAMER_IMAGE as i64;
        let mut x = frames.to_kind(Kind::Float).view([n, 1, side, side]) / 255.0 - 0.5;
        for conv in &self.enc {
            x = conv.forward(&self.p, &x).silu();
        }
        x.view([n, -1])
    }

    /// `[N, feat]` → `[N, PIXELS]`, the frame's mean in the encoder's scale (−0.5..0.5).
    pub fn decode(&self, feat: &Tensor) -> Tensor {
        let n = feat.size()[0];
        let mut x = self.dec_in.forward(&self.p, feat).view([n, 8 * self.dims.depth, 4, 4]);
        for (i, conv) in self.dec.iter().enumerate() {
            x = conv.forward(&self.p, &x);
            if i + 1 < self.dec.len() {
                x = x.silu();
            }
        }
        x.view([n, PIXELS])
    }

    /// Predicted reward in symlog space, and the continue logit: `[N]` each.
    pub fn heads(&self, feat: &Tensor) -> (Tensor, Tensor) {
        let r = self.reward.1.forward(&self.p, &self.reward.0.forward(&self.p, feat)).squeeze_dim(-1);
        let c = self.cont.1.forward(&self.p, &self.cont.0.forward(&self.p, feat)).squeeze_dim(-1);
        (r, c)
    }

    pub fn initial(&self, n: i64, device: Device) -> State {
        State {
            deter: Tensor::zeros([n, self.dims.deter], (Kind::Float, device)),
            stoch: Tensor::zeros([n, self.dims.stoch()], (Kind::Float, device)),
        }
    }

    /// Log-probabilities `[N, groups, classes]` of logits with the uniform mixed in.
    fn log_probs(&self, logits: &Tensor) -> Tensor {
        let n = logits.size()[0];
        let probs = logits.view([n, self.dims.groups, self.dims.classes]).softmax(-1, Kind::Float);
        (probs * (1.0 - UNIMIX) + UNIMIX / self.dims.classes as f64).log()
    }

    /// A one-hot sample per group with straight-through gradients, `[N, groups × classes]`.
    fn sample(&self, log_probs: &Tensor) -> Tensor {
        let (g, c) = (self.dims.groups, self.dims.classes);
        let probs = log_probs.exp();
        let n = probs.size()[0];
        let index = probs.view([n * g, c]).detach().multinomial(1, true);
        let onehot = Tensor::zeros([n * g, c], (Kind::Float, probs.device())).scatter_value(1, &index, 1.0);
        let onehot = onehot.view([n, g * c]);
        let probs = probs.view([n, g * c]);
        &onehot + &probs - probs.detach()
    }

    /// The prior's step: the next GRU state from a state and the action taken in it, and
    /// the prior's log-probabilities there.
    fn advance(&self, s: &State, action: &Tensor) -> (Tensor, Tensor) {
        let x = self.img_in.forward(&self.p, &Tensor::cat(&[&s.stoch, action], -1));
        let deter = self.gru.forward(&self.p, &x, &s.deter);
        let logits = self.prior.1.forward(&self.p, &self.prior.0.forward(&self.p, &deter));
        let prior = self.log_probs(&logits);
        (deter, prior)
    }

    /// One imagined step: the prior's sample after `action` (one-hot `[N, ACTIONS]`).
    pub fn imagine(&self, s: &State, action: &Tensor) -> State {
        let (deter, prior) = self.advance(s, action);
        State { stoch: self.sample(&prior), deter }
    }

    /// One observed step: a state restarted where `first` is 1, advanced by `action`, then
    /// corrected by the frame's `embed`. Returns the posterior state and both log-probabilities.
    pub fn observe_step(&self, s: &State, action: &Tensor, embed: &Tensor, first: &Tensor) -> (State, Tensor, Tensor) {
        let keep = (first.ones_like() - first).unsqueeze(-1);
        let s = State { deter: &s.deter * &keep, stoch: &s.stoch * &keep };
        let (deter, prior) = self.advance(&s, &(action * &keep));
        let logits = self.post.1.forward(&self.p, &self.post.0.forward(&self.p, &Tensor::cat(&[&deter, embed], -1)));
        let post = self.log_probs(&logits);
        (State { stoch: self.sample(&post), deter }, post, prior)
    }

    /// The RSSM through a replayed batch, the encoder once per step or once in all.
    pub fn observe(&self, batch: &Batch, mode: EncoderMode, prof: &mut Profiler) -> Observed {
        let (b, t) = (batch.b, batch.t);
        let actions = batch.prev_action.one_hot(ACTIONS).to_kind(Kind::Float);
        let mut span = prof.start();
        let mut embeds = None;
        if mode == EncoderMode::Batched {
            embeds = Some(self.encode(&batch.obs.view([b * t, PIXELS])).view([b, t, -1]));
            span = prof.stop(ENCODER, span);
        }
        let mut state = self.initial(b, batch.obs.device());
        let (mut feats, mut posts, mut priors) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..t {
            let embed = match &embeds {
                Some(all) => all.select(1, i),
                None => {
                    let e = self.encode(&batch.obs.select(1, i));
                    span = prof.stop(ENCODER, span);
                    e
                }
            };
            let (next, post, prior) =
                self.observe_step(&state, &actions.select(1, i), &embed, &batch.first.select(1, i));
            feats.push(next.feat());
            posts.push(post);
            priors.push(prior);
            state = next;
            span = prof.stop(RSSM, span);
        }
        Observed { feat: Tensor::stack(&feats, 1), post: Tensor::stack(&posts, 1), prior: Tensor::stack(&priors, 1) }
    }

    /// The world model's loss on a batch it observed, and its terms (detached).
    pub fn loss(&self, batch: &Batch, seen: &Observed) -> (Tensor, Terms) {
        let (b, t) = (batch.b, batch.t);
        let feat = seen.feat.view([b * t, -1]);
        let target = batch.obs.view([b * t, PIXELS]).to_kind(Kind::Float) / 255.0 - 0.5;
        let image = (self.decode(&feat) - &target).square().sum_dim_intlist([-1].as_slice(), false, Kind::Float);
        let (reward, cont) = self.heads(&feat);
        let symlog_reward = symlog(&batch.reward.view([b * t]));
        let floor = floor(&target, &symlog_reward, &batch.cont.view([b * t]));
        let reward = (reward - &symlog_reward).square();
        let cont = cont.binary_cross_entropy_with_logits::<Tensor>(
            &batch.cont.view([b * t]),
            None,
            None,
            tch::Reduction::None,
        );
        let kl = |p: &Tensor, q: &Tensor| (p.exp() * (p - q)).sum_dim_intlist([-2, -1].as_slice(), false, Kind::Float);
        let dynamics = kl(&seen.post.detach(), &seen.prior);
        let representation = kl(&seen.post, &seen.prior.detach());
        let total = image.mean(Kind::Float)
            + reward.mean(Kind::Float)
            + cont.mean(Kind::Float)
            + dynamics.clamp_min(FREE_NATS).mean(Kind::Float) * BETA_DYN
            + representation.clamp_min(FREE_NATS).mean(Kind::Float) * BETA_REP;
        let terms = Terms {
            image: image.mean(Kind::Float).detach(),
            reward: reward.mean(Kind::Float).detach(),
            cont: cont.mean(Kind::Float).detach(),
            kl: dynamics.mean(Kind::Float).detach(),
            floor,
        };
        (total, terms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dreamer::replay::Batch;

    /// A batch of random frames, actions, rewards and episode starts.
    fn batch(b: i64, t: i64) -> Batch {
        let opts = (Kind::Float, Device::Cpu);
        Batch {
            b,
            t,
            obs: Tensor::randint(256, [b, t, PIXELS], (Kind::Uint8, Device::Cpu)),
            prev_action: Tensor::randint(ACTIONS, [b, t], (Kind::Int64, Device::Cpu)),
            reward: Tensor::ones([b, t], opts),
            cont: Tensor::rand([b, t], opts).gt(0.1).to_kind(Kind::Float),
            first: Tensor::rand([b, t], opts).lt(0.2).to_kind(Kind::Float),
        }
    }

    /// Seed 004's loop over timesteps and one encoder call on `[B·T, C, H, W]` observe the
    /// same states and give the same losses and gradients, to rounding.
    #[test]
    fn the_encoder_per_step_and_batched_give_the_same_losses_and_gradients() {
        let _seeded = hotlab_train::testing::torch_seed(4);
        let mut world = WorldModel::new(Dims::new(1), Device::Cpu, Kind::Float);
        let data = batch(3, 5);
        let mut runs = Vec::new();
        for mode in [EncoderMode::PerStep, EncoderMode::Batched] {
            tch::manual_seed(11); // the same latent draws
            let seen = world.observe(&data, mode, &mut Profiler::new(None));
            let (loss, terms) = world.loss(&data, &seen);
            world.p.zero_grad();
            loss.backward();
            let figures: Vec<f64> = terms.all().iter().map(|t| t.double_value(&[])).collect();
            runs.push((loss.double_value(&[]), figures, world.p.grad.copy(), seen.feat));
        }
        let (a, b) = (&runs[0], &runs[1]);
        assert!((a.0 - b.0).abs() < 1e-3 * a.0.abs(), "losses {} and {}", a.0, b.0);
        for (x, y) in a.1.iter().zip(&b.1) {
            assert!((x - y).abs() <= 1e-4 * x.abs().max(1.0), "terms {:?} and {:?}", a.1, b.1);
        }
        let feat = f64::try_from((&a.3 - &b.3).abs().max()).unwrap();
        assert!(feat < 1e-4, "states differ by {feat}");
        let grad = f64::try_from((&a.2 - &b.2).abs().max()).unwrap();
        let scale = f64::try_from(a.2.abs().max()).unwrap();
        assert!(grad <= 1e-3 * scale, "gradients differ by {grad} (largest {scale})");
        assert!(scale > 0.0);
    }

    /// A step marked first forgets the state it came from: the same frame after two
    /// different histories gives the same posterior.
    #[test]
    fn an_episodes_first_step_restarts_the_state() {
        let _seeded = hotlab_train::testing::torch_seed(5);
        let world = WorldModel::new(Dims::new(1), Device::Cpu, Kind::Float);
        let frame = Tensor::randint(256, [1, PIXELS], (Kind::Uint8, Device::Cpu));
        let embed = world.encode(&frame);
        let action = Tensor::from_slice(&[0.0f32, 1.0]).view([1, 2]);
        let first = Tensor::ones([1], (Kind::Float, Device::Cpu));
        let s0 = world.initial(1, Device::Cpu);
        let s1 = State { deter: Tensor::randn([1, 128], (Kind::Float, Device::Cpu)), stoch: s0.stoch.ones_like() };
        let (_, a, _) = world.observe_step(&s0, &action, &embed, &first);
        let (_, b, _) = world.observe_step(&s1, &action, &embed, &first);
        assert!(a.allclose(&b, 1e-6, 1e-6, false));
        let (_, c, _) = world.observe_step(&s1, &action, &embed, &first.zeros_like());
        assert!(!a.allclose(&c, 1e-3, 1e-3, false), "a history that is not forgotten should matter");
    }
}
