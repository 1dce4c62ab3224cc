//! Running a trained policy greedily (the most likely action of every head).

use super::host::FusedPolicy;
use super::policy::ActorCritic;
use crate::exec::EnvMaker;
use hotlab_shared::env::{Observations, StepBatch};
use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub struct EvalReport {
    pub env: String,
    pub episodes: usize,
    pub mean_return: f64,
    pub min_return: f64,
    pub max_return: f64,
    pub mean_length: f64,
}

/// Plays `episodes` episodes with the greedy policy on fresh envs seeded with `seed`.
pub fn evaluate(env: &dyn EnvMaker, net: &ActorCritic, episodes: usize, seed: u64) -> anyhow::Result<EvalReport> {
    let (name, envs) = (env.name(), episodes.clamp(1, 64));
    let mut env = env.vector_env(envs, seed, 0);
    let heads: Vec<usize> = env.spec().heads.iter().map(|h| h.n).collect();
    let d = net.arch.obs_dim;
    let mut policy = FusedPolicy::new(&net.arch, &net.host_params());
    let mut obs = Observations::zeros(env.spec(), envs);
    env.reset(&mut obs)?;
    let mut out = StepBatch::new(env.spec(), envs);
    let mut actions = vec![0i64; envs * heads.len()];
    let (mut returns, mut lengths) = (Vec::new(), Vec::new());
    while returns.len() < episodes {
        let x = obs.fields[0].as_f32().expect("f32 observations");
        for (e, row) in x.chunks_exact(d).enumerate() {
            let logits = policy.logits(row);
            let mut start = 0;
            for (h, &n) in heads.iter().enumerate() {
                let head = &logits[start..start + n];
                let best = (0..n).fold(0, |b, k| if head[k] > head[b] { k } else { b });
                actions[e * heads.len() + h] = best as i64;
                start += n;
            }
        }
        env.step(&actions, &mut out)?;
        for end in &out.episodes {
            if returns.len() < episodes {
                returns.push(end.episode_return);
                lengths.push(end.length as f64);
            }
        }
        std::mem::swap(&mut obs, &mut out.obs);
    }
    let n = returns.len() as f64;
    Ok(EvalReport {
        env: name.into(),
        episodes,
        mean_return: returns.iter().sum::<f64>() / n,
        min_return: returns.iter().cloned().fold(f64::INFINITY, f64::min),
        max_return: returns.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
        mean_length: lengths.iter().sum::<f64>() / n,
    })
}
