//! `--clone-grower N`: the agent starts from the scripted grower's play instead of from
//! nothing (issue 40's diagnosis (b)). The grower plays N decisions on the training tasks;
//! the actor is fitted to its actions (the cross-entropy of each action under the masks it
//! was taken under) and the critic to the discounted returns that followed, before PPO's
//! first rollout. Whether PPO then keeps growing or drifts back to waiting tells a reward
//! that does not hold growth up from an exploration that never finds it.

use super::envs::{env_spec, Episodes, Pool};
use super::eval::Policy;
use super::rules::TEMPOS;
use hotlab_env::rng::HostRng;
use hotlab_train::adam::FlatAdam;
use hotlab_train::distribution;
use hotlab_train::models::mlp::policy::ActorCritic;
use tch::{Kind, Tensor};

/// Passes over the cloned decisions, their minibatch and the learning rate.
const EPOCHS: usize = 30;
const MINIBATCH: i64 = 64;
const LR: f64 = 1e-3;

/// How the clone went: the decisions and episodes played, and the last pass's mean
/// cross-entropy, value loss and the share of decisions the actor's greedy choice matches.
#[derive(Clone, Debug, PartialEq)]
pub struct Cloned {
    pub decisions: usize,
    pub episodes: usize,
    pub cross_entropy: f64,
    pub value_loss: f64,
    pub agreement: f64,
}

impl Cloned {
    pub fn note(&self) -> String {
        format!(
            "env morpho: the agent starts from the grower's play (--clone-grower): {} decisions in {} episodes on the \
             training tasks, fitted in {EPOCHS} passes to a cross-entropy of {:.3}, a value loss of {:.4}, its greedy \
             choice the grower's in {:.1} % of them",
            self.decisions,
            self.episodes,
            self.cross_entropy,
            self.value_loss,
            100.0 * self.agreement
        )
    }
}

/// The grower's play: each decision's features, mask table, heads and discounted return.
struct Play {
    obs: Vec<f32>,
    table: Vec<bool>,
    actions: Vec<i64>,
    returns: Vec<f32>,
    episodes: usize,
}

/// Whole episodes of the grower at the longest tempo until `decisions` are played (their
/// parts timed on a clock of their own: the run's profile is the run's).
fn play(pool: &Pool, decisions: usize, seed: u64, gamma: f64) -> Play {
    let pool = Pool { clock: std::sync::Arc::new(super::part_clock()), ..pool.clone() };
    let mut grower = Policy::Grower(TEMPOS.len() - 1);
    let mut p = Play { obs: Vec::new(), table: Vec::new(), actions: Vec::new(), returns: Vec::new(), episodes: 0 };
    while p.returns.len() < decisions {
        let mut env = Episodes::new(pool.clone(), seed, p.episodes as u64);
        let mut rewards = Vec::new();
        loop {
            p.obs.extend(env.env().observe());
            p.table.extend(env.env().mask_table());
            let a = grower.act(&env);
            p.actions.extend(&a);
            let (reward, end) = env.step(&a);
            rewards.push(reward);
            if end.is_some() {
                break;
            }
        }
        let mut returns = vec![0.0f32; rewards.len()];
        let mut ret = 0.0;
        for (r, out) in rewards.iter().zip(&mut returns).rev() {
            ret = r + gamma * ret;
            *out = ret as f32;
        }
        p.returns.extend(returns);
        p.episodes += 1;
    }
    p
}

/// Plays the grower on `pool` for `decisions` (whole episodes) and fits `net` to it.
pub fn grower(net: &mut ActorCritic, pool: &Pool, decisions: usize, seed: u64, gamma: f64) -> Cloned {
    let p = play(pool, decisions, seed, gamma);
    let heads: Vec<usize> = env_spec().heads.iter().map(|h| h.n).collect();
    let n = p.returns.len() as i64;
    let device = net.device();
    let obs = Tensor::from_slice(&p.obs).view([n, -1]).to_device(device);
    let table = Tensor::from_slice(&p.table).view([n, -1]).to_device(device);
    let actions = Tensor::from_slice(&p.actions).view([n, -1]).to_device(device);
    let returns = Tensor::from_slice(&p.returns).to_device(device);
    // Each action's mask: its op's row of the table, as the rollout resolves it.
    let mask = distribution::resolve_rows(&table, &actions.select(1, 0), &heads);
    let mut adam = FlatAdam::new(&net.flat, 1e-5);
    let mut rng = HostRng::new(seed ^ 0xc10e);
    let mut last = (0.0, 0.0);
    for _ in 0..EPOCHS {
        let mut order: Vec<i64> = (0..n).collect();
        rng.shuffle(&mut order);
        let order = Tensor::from_slice(&order).to_device(device);
        let (mut ce, mut vl) = (0.0, 0.0);
        for start in (0..n).step_by(MINIBATCH as usize) {
            let idx = order.narrow(0, start, MINIBATCH.min(n - start));
            let rows = |t: &Tensor| t.index_select(0, &idx);
            let (o, m, a, r) = (rows(&obs), rows(&mask), rows(&actions), rows(&returns));
            net.zero_grad();
            let (lp, _) = distribution::log_prob_and_entropy(&net.logits(&o), Some(&m), &heads, &a);
            let (cross_entropy, value_loss) = (-lp.mean(Kind::Float), (net.value(&o) - r).square().mean(Kind::Float));
            (&cross_entropy + &value_loss * 0.5).backward();
            adam.step(&mut net.flat, &net.flat_grad, LR);
            let rows = idx.size()[0] as f64;
            ce += cross_entropy.double_value(&[]) * rows;
            vl += value_loss.double_value(&[]) * rows;
        }
        last = (ce / n as f64, vl / n as f64);
    }
    net.zero_grad();
    let agreement = tch::no_grad(|| {
        let greedy = distribution::greedy_by_rows(&net.logits(&obs), &table, &heads);
        greedy.eq_tensor(&actions).all_dim(1, false).to_kind(Kind::Double).mean(Kind::Double).double_value(&[])
    });
    Cloned { decisions: n as usize, episodes: p.episodes, cross_entropy: last.0, value_loss: last.1, agreement }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::morpho::eval::play;
    use crate::morpho::part::{architecture, Morpho};
    use hotlab_spec::RunSpec;
    use hotlab_specs::morpho::HeadPin;
    use hotlab_specs::MorphoSpec;
    use hotlab_specs::WorkloadSpec;
    use hotlab_train::workload::TaskSet;

    /// Fitted to the grower's play on the training tasks, the greedy agent makes the
    /// grower's choices on held-out tasks it never saw, with every head free; the clone
    /// covers whole episodes.
    #[test]
    fn a_cloned_agent_plays_as_the_grower_on_held_out_tasks() {
        let settings =
            MorphoSpec { images: 64, epochs: 4, width: 4, tasks: 2, pin_heads: HeadPin::Free, ..MorphoSpec::default() };
        let spec = RunSpec { workload: WorkloadSpec::Morpho(settings.clone()), ..RunSpec::default() };
        let workload = Morpho::load(&settings, &spec).unwrap();
        tch::manual_seed(3);
        let mut net = ActorCritic::new(architecture(&[64, 64]), tch::Device::Cpu);
        let c = grower(&mut net, &workload.pool, 30, 5, 0.99);
        assert_eq!((c.decisions, c.episodes), (32, 8), "whole episodes of 4 decisions");
        assert!(c.agreement >= 0.95 && c.cross_entropy < 1.0, "{c:?}");
        let held_out = workload.eval_pool(TaskSet::HeldOut, 4);
        let choices = |policy: &mut Policy<'_>| {
            let mut heads = Vec::new();
            play(&held_out, policy, 4, 7, &mut |a: &[i64]| heads.push(a.to_vec()));
            heads
        };
        let (agent, grower) = (choices(&mut Policy::Agent(&net)), choices(&mut Policy::Grower(TEMPOS.len() - 1)));
        let same = agent.iter().zip(&grower).filter(|(a, g)| a == g).count();
        assert!(same * 10 >= grower.len() * 9, "{same} of {} decisions the grower's: {agent:?}", grower.len());
    }
}
