//! Running a trained policy greedily (the most likely action of every categorical head,
//! the mean of a Gaussian one), on observations normalized as in training.

use super::host::FusedPolicy;
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

/// Plays `episodes` episodes with the greedy policy on fresh envs seeded with `seed`: each
/// categorical head's most likely choice, and the Gaussian head's mean (the env clips it
/// to its bounds).
pub fn evaluate(
    env: &dyn EnvMaker,
    net: &ActorCritic,
    obs_norm: Option<&ObsNorm>,
    episodes: usize,
    seed: u64,
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
    // Per env, its episodes' (return, length) in order; episode i is env i % E's (i / E)-th.
    let mut ended: Vec<Vec<(f64, f64)>> = vec![Vec::new(); envs];
    let wanted = |g: usize| episodes / envs + usize::from(g < episodes % envs);
    while (0..envs).any(|g| ended[g].len() < wanted(g)) {
        let mut x = obs.fields[0].as_f32().expect("f32 observations").to_vec();
        // With the run's statistics, frozen: evaluation learns nothing of its episodes.
        if let Some(norm) = obs_norm {
            norm.apply(&mut x);
        }
        for (e, row) in x.chunks_exact(d).enumerate() {
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
