//! Running a trained policy greedily (the most likely action of every categorical head,
//! the mean of a Gaussian one), on observations normalized as in training.

use super::host::{ActOut, FusedPolicy};
use hotlab_shared::rng::HostRng;

/// Mixed into the seed of a sampled evaluation's draws, so that they are not the envs' own
/// stream.
const SAMPLING_STREAM: u64 = 0x5a3b_1e0f_77c2_9d41;
use super::policy::ActorCritic;
use crate::exec::EnvMaker;
use crate::normalize::ObsNorm;
use hotlab_shared::env::{Actions, Observations, StepBatch};
use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub struct EvalReport {
    pub env: String,
    pub episodes: usize,
    pub mean_return: f64,
    pub min_return: f64,
    pub max_return: f64,
    pub mean_length: f64,
    /// Each episode's return, episode `i` being env `i mod E`'s episode `i div E` (`E` envs,
    /// env `g` seeded `seed + g`): the same episodes whatever the policy, so that another
    /// policy's returns on them pair with these.
    pub returns: Vec<f64>,
}

/// How an evaluation picks its actions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Play {
    /// Each categorical head's most likely choice, the Gaussian head's mean.
    Greedy,
    /// Drawn from the policy's own distribution (from the evaluation's seed).
    Sampled,
}

/// Plays `episodes` episodes with the policy on fresh envs seeded with `seed`, greedy or
/// sampled (the env clips a Gaussian head's action to its bounds).
pub fn evaluate(
    env: &dyn EnvMaker,
    net: &ActorCritic,
    obs_norm: Option<&ObsNorm>,
    (episodes, seed): (usize, u64),
    play: Play,
) -> anyhow::Result<EvalReport> {
    let (name, envs) = (env.name(), episodes.clamp(1, 64));
    let mut env = env.vector_env(envs, seed, 0);
    let heads: Vec<usize> = env.spec().heads.iter().map(|h| h.n).collect();
    let (d, logits, dims) = (net.arch.obs_dim, net.arch.logits, net.arch.gaussian);
    let mut policy = FusedPolicy::new(&net.arch, &net.host_params());
    let mut obs = Observations::zeros(env.spec(), envs);
    env.reset(&mut obs)?;
    let mut out = StepBatch::new(env.spec(), envs);
    let mut actions = vec![0i64; envs * heads.len()];
    let mut real = vec![0f32; envs * dims];
    let (mut log_probs, mut values) = (vec![0f32; envs], vec![0f32; envs]);
    let mut rng = HostRng::new(seed ^ SAMPLING_STREAM);
    // Per env, its episodes' (return, length) in order; episode i is env i % E's (i / E)-th.
    let mut ended: Vec<Vec<(f64, f64)>> = vec![Vec::new(); envs];
    let wanted = |g: usize| episodes / envs + usize::from(g < episodes % envs);
    while (0..envs).any(|g| ended[g].len() < wanted(g)) {
        let mut x = obs.fields[0].features().expect("a features field").into_owned();
        // With the run's statistics, frozen: evaluation learns nothing of its episodes.
        if let Some(norm) = obs_norm {
            norm.apply(&mut x);
        }
        if play == Play::Sampled {
            let out = ActOut { actions: &mut actions, real: &mut real, log_probs: &mut log_probs, values: &mut values };
            policy.act(&x, None, &heads, &mut rng, out);
        }
        for (e, row) in x.chunks_exact(d).enumerate().filter(|_| play == Play::Greedy) {
            let outputs = policy.logits(row);
            let mut start = 0;
            for (h, &n) in heads.iter().enumerate() {
                let head = &outputs[start..start + n];
                let best = (0..n).fold(0, |b, k| if head[k] > head[b] { k } else { b });
                actions[e * heads.len() + h] = best as i64;
                start += n;
            }
            real[e * dims..(e + 1) * dims].copy_from_slice(&outputs[logits..logits + dims]);
        }
        env.step_actions(Actions { index: &actions, real: &real }, &mut out)?;
        for end in &out.episodes {
            ended[end.env].push((end.episode_return, end.length as f64));
        }
        std::mem::swap(&mut obs, &mut out.obs);
    }
    let played: Vec<(f64, f64)> = (0..episodes).map(|i| ended[i % envs][i / envs]).collect();
    let returns: Vec<f64> = played.iter().map(|p| p.0).collect();
    let n = returns.len() as f64;
    Ok(EvalReport {
        env: name.into(),
        episodes,
        mean_return: returns.iter().sum::<f64>() / n,
        min_return: returns.iter().cloned().fold(f64::INFINITY, f64::min),
        max_return: returns.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
        mean_length: played.iter().map(|p| p.1).sum::<f64>() / n,
        returns,
    })
}
