//! The agent against the two baselines on held-out tasks: the same tasks and the same host
//! draws for every policy (a paired comparison), one episode each; the score is an
//! episode's final validation accuracy less the rent on what its seeds added.

use super::blueprint::Blueprint;
use super::envs::{env_spec, Episodes, Pool};
use crate::morpho::rules::{Action, Op, ALPHA_TARGETS, OPS, TEMPOS};
use hotlab_shared::rng::HostRng;
use hotlab_train::distribution;
use hotlab_train::models::mlp::policy::ActorCritic;
use serde::Serialize;
use tch::Tensor;

/// The host's standard epoch: 8 minibatches (the middle of [`TEMPOS`]).
pub const STANDARD_TEMPO: usize = 1;

/// Who decides.
pub enum Policy<'a> {
    /// The agent's most likely action (every head, under the masks).
    Agent(&'a ActorCritic),
    /// Wait every epoch at this tempo (an index into [`TEMPOS`]).
    AlwaysWait(usize),
    /// A uniformly random legal action.
    RandomLegal(HostRng),
    /// A scripted grower at this tempo: each epoch it fossilizes a slot if it may, else
    /// advances one (blending fully in one epoch), else germinates a norm seed (the
    /// cheapest blueprint, at the host's learning rate) in the first dormant slot, else
    /// waits: what plain growth earns on the task, rent paid.
    Grower(usize),
}

impl Policy<'_> {
    fn act(&mut self, env: &Episodes) -> Vec<i64> {
        match self {
            Policy::Agent(net) => tch::no_grad(|| {
                let heads: Vec<usize> = env_spec().heads.iter().map(|h| h.n).collect();
                // On the agent's device: a run on CUDA evaluates there too.
                let device = net.device();
                let obs = Tensor::from_slice(&env.env().observe()).view([1, -1]).to_device(device);
                let table = Tensor::from_slice(&env.env().mask_table()).view([1, -1]).to_device(device);
                let a = distribution::greedy_by_rows(&net.logits(&obs), &table, &heads);
                Vec::<i64>::try_from(a.view([-1])).unwrap_or_default()
            }),
            Policy::AlwaysWait(tempo) => Action { tempo: *tempo, ..Action::default() }.to_heads().to_vec(),
            Policy::Grower(tempo) => grow(env, *tempo).to_heads().to_vec(),
            Policy::RandomLegal(rng) => {
                let e = env.env();
                Action::random_legal(e.slots(), &e.config().gates, Blueprint::ALL.len(), rng).to_heads().to_vec()
            }
        }
    }
}

/// [`Policy::Grower`]'s action.
fn grow(env: &Episodes, tempo: usize) -> Action {
    let (ops, slots) = env.env().masks();
    let norm = Blueprint::ALL.iter().position(|&b| b == Blueprint::Norm).unwrap_or(0);
    for op in [Op::Fossilize, Op::Advance, Op::Germinate] {
        let i = OPS.iter().position(|&o| o == op).unwrap_or(0);
        if let Some(slot) = slots[i].iter().position(|&ok| ok).filter(|_| ops[i]) {
            // Only the heads the op reads leave their first choice (the masks say so).
            let mut a = Action { op: i, slot, tempo, ..Action::default() };
            match op {
                Op::Germinate => (a.blueprint, a.seed_lr) = (norm, 1),
                Op::Advance => (a.alpha_target, a.alpha_speed) = (ALPHA_TARGETS.len() - 1, 0),
                _ => {}
            }
            return a;
        }
    }
    Action { tempo, ..Action::default() }
}

/// The scores of one policy's episodes, in order; `seen` hears each action's heads.
pub fn scores(
    pool: &Pool,
    policy: &mut Policy<'_>,
    episodes: usize,
    seed: u64,
    seen: &mut dyn FnMut(&[i64]),
) -> Vec<f64> {
    (0..episodes as u64)
        .map(|j| {
            let mut env = Episodes::new(pool.clone(), seed, j);
            loop {
                let a = policy.act(&env);
                seen(&a);
                if let (_, Some((_, _, score))) = env.step(&a) {
                    break score;
                }
            }
        })
        .collect()
}

/// The agent and both baselines on the same held-out episodes.
#[derive(Clone, Debug, Serialize)]
pub struct MorphoEval {
    pub episodes: usize,
    /// Mean episode score of each: the agent, waiting every epoch at the host's standard
    /// tempo (8 minibatches), random legal actions.
    pub agent: f64,
    pub always_wait: f64,
    pub random_legal: f64,
    /// The agent's mean score less the better baseline's.
    pub margin: f64,
    /// Waiting every epoch at the longest tempo (16): the most host training without
    /// growth, beside the baselines (an agent that has only learned to train its hosts
    /// longer matches it).
    pub always_wait_longest: f64,
    /// A scripted grower at the longest tempo ([`Policy::Grower`]): whether growth pays
    /// on these tasks, rent included, beside waiting at that tempo.
    pub grower_longest: f64,
    /// Episodes in which the agent beat both baselines.
    pub agent_wins: usize,
    /// What the agent chose over these episodes: how often each op (in [`OPS`]' order, by
    /// name), and each tempo (minibatches per host epoch): whether it grows or only trains.
    pub agent_ops: Vec<(String, u64)>,
    pub agent_tempos: Vec<(u32, u64)>,
}

impl MorphoEval {
    pub fn summary(&self) -> String {
        format!(
            "held-out episode score over {} episodes: agent {:.3}, always wait {:.3}, random legal {:.3} (margin {:+.3}; the agent beat both in {} of {}); at the longest tempo, waiting {:.3} and a scripted grower {:.3}",
            self.episodes, self.agent, self.always_wait, self.random_legal, self.margin, self.agent_wins, self.episodes,
            self.always_wait_longest, self.grower_longest
        ) + &format!("; the agent chose {}; tempos {}", tally(&self.agent_ops), tally(&self.agent_tempos))
    }
}

/// `label value` pairs, comma-separated, the zeros left out.
fn tally<T: std::fmt::Display>(counts: &[(T, u64)]) -> String {
    let shown: Vec<String> = counts.iter().filter(|c| c.1 > 0).map(|(k, n)| format!("{k} {n}")).collect();
    shown.join(", ")
}

/// The agent `net` and both baselines over `episodes` held-out episodes from `seed`.
pub fn evaluate(pool: &Pool, net: &ActorCritic, episodes: usize, seed: u64) -> MorphoEval {
    let (mut ops, mut tempos) = ([0u64; OPS.len()], [0u64; TEMPOS.len()]);
    let mut count = |a: &[i64]| {
        let act = Action::from_heads(a);
        ops.get_mut(act.op).into_iter().for_each(|n| *n += 1);
        tempos.get_mut(act.tempo).into_iter().for_each(|n| *n += 1);
    };
    let agent = scores(pool, &mut Policy::Agent(net), episodes, seed, &mut count);
    let mut ignore = |_: &[i64]| {};
    let wait = scores(pool, &mut Policy::AlwaysWait(STANDARD_TEMPO), episodes, seed, &mut ignore);
    let longest = scores(pool, &mut Policy::AlwaysWait(TEMPOS.len() - 1), episodes, seed, &mut ignore);
    let random = scores(pool, &mut Policy::RandomLegal(HostRng::new(seed ^ 0x5eed)), episodes, seed, &mut ignore);
    let grower = scores(pool, &mut Policy::Grower(TEMPOS.len() - 1), episodes, seed, &mut ignore);
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let (a, w, r) = (mean(&agent), mean(&wait), mean(&random));
    let agent_wins = (0..agent.len()).filter(|&i| agent[i] > wait[i] && agent[i] > random[i]).count();
    let always_wait_longest = mean(&longest);
    MorphoEval {
        episodes,
        agent: a,
        always_wait: w,
        random_legal: r,
        margin: a - w.max(r),
        agent_wins,
        always_wait_longest,
        grower_longest: mean(&grower),
        agent_ops: OPS.iter().zip(ops).map(|(op, n)| (op.name().to_string(), n)).collect(),
        agent_tempos: TEMPOS.iter().copied().zip(tempos).collect(),
    }
}
