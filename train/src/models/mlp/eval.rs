//! Running a trained policy greedily (the most likely action of every categorical head,
//! the mean of a Gaussian one), on observations normalized as in training.

use super::host::{ActOut, FusedPolicy};
use super::policy::ActorCritic;
use crate::exec::EnvMaker;
use crate::models::play::{self, SAMPLING_STREAM};
pub use crate::models::play::{EvalReport, Play};
use crate::normalize::ObsNorm;
use hotlab_env::rng::HostRng;

/// Plays `episodes` episodes with the policy on fresh envs seeded with `seed`, greedy or
/// sampled (the env clips a Gaussian head's action to its bounds).
pub fn evaluate(
    env: &dyn EnvMaker,
    net: &ActorCritic,
    obs_norm: Option<&ObsNorm>,
    (episodes, seed): (usize, u64),
    play: Play,
) -> anyhow::Result<EvalReport> {
    let (d, logits, dims) = (net.arch.obs_dim, net.arch.logits, net.arch.gaussian);
    let mut policy = FusedPolicy::new(&net.arch, &net.host_params());
    let mut rng = HostRng::new(seed ^ SAMPLING_STREAM);
    let (mut log_probs, mut values) = (Vec::new(), Vec::new());
    play::episodes(env, (episodes, seed), &mut |obs, chosen| {
        let heads = chosen.heads;
        let mut x = obs.fields[0].features().expect("a features field").into_owned();
        // With the run's statistics, frozen: evaluation learns nothing of its episodes.
        if let Some(norm) = obs_norm {
            norm.apply(&mut x);
        }
        let envs = x.len() / d.max(1);
        if play == Play::Sampled {
            log_probs.resize(envs, 0.0);
            values.resize(envs, 0.0);
            let out =
                ActOut { actions: chosen.actions, real: chosen.real, log_probs: &mut log_probs, values: &mut values };
            policy.act(&x, None, heads, &mut rng, out);
            return;
        }
        for (e, row) in x.chunks_exact(d).enumerate() {
            let outputs = policy.logits(row);
            let mut start = 0;
            for (h, &n) in heads.iter().enumerate() {
                let head = &outputs[start..start + n];
                let best = (0..n).fold(0, |b, k| if head[k] > head[b] { k } else { b });
                chosen.actions[e * heads.len() + h] = best as i64;
                start += n;
            }
            chosen.real[e * dims..(e + 1) * dims].copy_from_slice(&outputs[logits..logits + dims]);
        }
    })
}
