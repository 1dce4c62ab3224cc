//! The actor and critic, trained on imagined trajectories (DreamerV3's behaviour
//! learning): from every state the world model observed in a replayed batch, the actor
//! acts in the model's prior for `horizon` steps; λ-returns bootstrapped by the critic,
//! normalized by an EMA of their 5th–95th percentile range (never scaled up), weigh the
//! actor's REINFORCE gradient; the critic regresses the returns in symlog space. Both
//! losses are weighted by the chance that the imagined episode is still running.
//!
//! Left out against DreamerV3: the critic's two-hot output and its slow EMA copy (a plain
//! symlog regression here).

use super::world::{Dims, State, WorldModel, ACTIONS};
use hotlab_train::models::layers::{symexp, symlog, Block, Builder, Linear};
use hotlab_train::params::FlatParams;
use tch::{Device, Kind, Tensor};

/// Discount: DreamerV3's horizon of 333 steps.
const GAMMA: f64 = 1.0 - 1.0 / 333.0;
const LAMBDA: f64 = 0.95;
/// The actor's entropy bonus.
const ENTROPY: f64 = 3e-4;
/// The actor's mix of a uniform into its action distribution.
const UNIMIX: f64 = 0.01;
/// Decay of the return range's moving average.
const RANGE_DECAY: f64 = 0.99;

/// An MLP of two hidden blocks and an output layer.
#[derive(Clone, Copy)]
struct Mlp(Block, Block, Linear);

impl Mlp {
    fn new(b: &mut Builder, name: &str, dims: &Dims, outputs: i64, scale: f64) -> Self {
        Mlp(
            b.block(&format!("{name}.0"), dims.feat(), dims.hidden),
            b.block(&format!("{name}.1"), dims.hidden, dims.hidden),
            b.linear(&format!("{name}.2"), dims.hidden, outputs, scale),
        )
    }

    fn forward(&self, p: &FlatParams, x: &Tensor) -> Tensor {
        self.2.forward(p, &self.1.forward(p, &self.0.forward(p, x)))
    }
}

/// Imagined trajectories: `[H + 1, N, feat]` states and the `[H, N]` actions between them.
pub struct Dream {
    pub feat: Tensor,
    pub action: Tensor,
}

/// The actor's and critic's losses on a dream, and the actor's mean entropy (detached).
pub struct BehaviorLosses {
    pub actor: Tensor,
    pub critic: Tensor,
    pub entropy: Tensor,
}

pub struct Behavior {
    pub actor: FlatParams,
    pub critic: FlatParams,
    actor_net: Mlp,
    critic_net: Mlp,
    /// The EMA of the returns' 5th–95th percentile range (a scalar tensor on the device).
    range: Tensor,
}

impl Behavior {
    /// Fresh networks on `device` whose products compute in `kind` (fp32 or bf16).
    pub fn new(dims: &Dims, device: Device, kind: Kind) -> Self {
        let mut a = Builder::new(kind);
        let actor_net = Mlp::new(&mut a, "actor", dims, ACTIONS, 0.1);
        let mut c = Builder::new(kind);
        let critic_net = Mlp::new(&mut c, "critic", dims, 1, 0.0);
        Self {
            actor: a.finish(device),
            critic: c.finish(device),
            actor_net,
            critic_net,
            range: Tensor::zeros([], (Kind::Float, device)),
        }
    }

    /// The actor's log-probabilities `[.., ACTIONS]` at `feat`.
    pub fn log_policy(&self, feat: &Tensor) -> Tensor {
        let probs = self.actor_net.forward(&self.actor, feat).softmax(-1, Kind::Float);
        (probs * (1.0 - UNIMIX) + UNIMIX / ACTIONS as f64).log()
    }

    /// An action per row of `feat` `[N, feat]`, sampled (or the likeliest, `greedy`).
    pub fn act(&self, feat: &Tensor, greedy: bool) -> Tensor {
        let logp = self.log_policy(feat);
        if greedy {
            logp.argmax(-1, false)
        } else {
            logp.exp().multinomial(1, true).squeeze_dim(-1)
        }
    }

    /// The critic's value in symlog space, `[..]`.
    fn value(&self, feat: &Tensor) -> Tensor {
        self.critic_net.forward(&self.critic, feat).squeeze_dim(-1)
    }

    /// `horizon` steps of the actor in the world model's prior from each `start` state.
    pub fn imagine(&self, world: &WorldModel, start: &State, horizon: usize) -> Dream {
        tch::no_grad(|| {
            let mut state = State { deter: start.deter.detach(), stoch: start.stoch.detach() };
            let (mut feats, mut actions) = (vec![state.feat()], Vec::new());
            for _ in 0..horizon {
                let action = self.act(feats.last().expect("the start"), false);
                state = world.imagine(&state, &action.one_hot(ACTIONS).to_kind(Kind::Float));
                feats.push(state.feat());
                actions.push(action);
            }
            Dream { feat: Tensor::stack(&feats, 0), action: Tensor::stack(&actions, 0) }
        })
    }

    /// λ-returns of a dream and the losses they give the actor and the critic.
    pub fn losses(&mut self, world: &WorldModel, dream: &Dream) -> BehaviorLosses {
        let h = dream.action.size()[0];
        let (returns, value, weight, scale) = tch::no_grad(|| {
            let sizes = dream.feat.size();
            let flat = dream.feat.view([-1, sizes[2]]);
            let (reward, cont) = world.heads(&flat);
            let reward = symexp(&reward).view([h + 1, -1]).narrow(0, 1, h);
            let disc = (cont.sigmoid() * GAMMA).view([h + 1, -1]).narrow(0, 1, h);
            let value = symexp(&self.value(&flat)).view([h + 1, -1]);
            let mut next = value.get(h);
            let mut returns = Vec::with_capacity(h as usize);
            for t in (0..h).rev() {
                next = reward.get(t) + disc.get(t) * (value.get(t + 1) * (1.0 - LAMBDA) + &next * LAMBDA);
                returns.push(next.shallow_clone());
            }
            returns.reverse();
            let returns = Tensor::stack(&returns, 0);
            let alive = Tensor::cat(&[disc.ones_like().narrow(0, 0, 1), disc.narrow(0, 0, h - 1)], 0);
            let weight = alive.cumprod(0, Kind::Float);
            let flat_returns = returns.view([-1]);
            let spread = flat_returns.quantile_scalar(0.95, None, false, "linear")
                - flat_returns.quantile_scalar(0.05, None, false, "linear");
            let _ = self.range.g_mul_scalar_(RANGE_DECAY).g_add_(&(spread * (1.0 - RANGE_DECAY)));
            (returns, value.narrow(0, 0, h), weight, self.range.clamp_min(1.0))
        });
        let feat = dream.feat.narrow(0, 0, h);
        let logp = self.log_policy(&feat);
        let taken = logp.gather(-1, &dream.action.unsqueeze(-1), false).squeeze_dim(-1);
        let entropy = -(logp.exp() * &logp).sum_dim_intlist([-1].as_slice(), false, Kind::Float);
        let advantage = (&returns - value) / scale;
        let actor = -(&weight * (advantage * taken + &entropy * ENTROPY)).mean(Kind::Float);
        let critic = (&weight * (self.value(&feat) - symlog(&returns)).square()).mean(Kind::Float);
        BehaviorLosses { actor, critic, entropy: entropy.mean(Kind::Float).detach() }
    }
}
