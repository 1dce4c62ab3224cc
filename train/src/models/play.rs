//! Playing a trained policy on fresh envs, whatever its network: the episodes every policy
//! of an env is scored on, and the report `hotlab eval` prints.

use crate::exec::EnvMaker;
use crate::workload::Evaluation;
use anyhow::Result;
use hotlab_env::{Actions, Observations, StepBatch};
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

/// How a policy chooses its actions when it is evaluated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Play {
    /// Each categorical head's most likely choice, the Gaussian head's mean.
    Greedy,
    /// Drawn from the policy's own distribution (from the evaluation's seed).
    Sampled,
}

/// Mixed into the seed of a sampled evaluation's draws, so that they are not the envs' own
/// stream.
pub const SAMPLING_STREAM: u64 = 0x5a3b_1e0f_77c2_9d41;

/// What each step's policy fills: an index per env and head (of `heads` choices each),
/// the real components per env; and which envs' observations start an episode (a
/// recurrent policy resets its state there).
pub struct Chosen<'a> {
    pub heads: &'a [usize],
    pub starts: &'a [bool],
    pub actions: &'a mut [i64],
    pub real: &'a mut [f32],
}

impl Chosen<'_> {
    /// The actions of a network's actor outputs `[envs, logits + gaussian]` (with its
    /// Gaussian's log-std, where it has one), chosen as `play` says, read into this step.
    pub fn fill(self, outputs: &tch::Tensor, log_std: Option<&tch::Tensor>, play: Play) {
        let (actions, real) = match play {
            Play::Greedy => crate::distribution::greedy_outputs(outputs, log_std, self.heads),
            Play::Sampled => {
                let (a, r, _) = crate::distribution::sample_outputs(outputs, log_std, self.heads);
                (a, r)
            }
        };
        read_host(&actions, self.actions);
        if let Some(real) = real {
            read_host(&real, self.real);
        }
    }
}

/// A device tensor's elements into `out` (as many as it has).
fn read_host<T: tch::kind::Element + Copy>(t: &tch::Tensor, out: &mut [T]) {
    let host = t.to_device(tch::Device::Cpu).contiguous().view([-1]);
    host.copy_data(out, out.len());
}

/// Plays `episodes` episodes on fresh envs seeded with `seed` (at most 64 at once), each
/// step's actions chosen by `act` from the envs' observations.
pub fn episodes(
    env: &dyn EnvMaker,
    (episodes, seed): (usize, u64),
    act: &mut dyn FnMut(&Observations, Chosen<'_>),
) -> Result<EvalReport> {
    let (name, envs) = (env.name(), episodes.clamp(1, 64));
    let mut env = env.vector_env(envs, seed, 0);
    let heads: Vec<usize> = env.spec().heads.iter().map(|h| h.n).collect();
    let dims = env.spec().continuous;
    let mut obs = Observations::zeros(env.spec(), envs);
    env.reset(&mut obs)?;
    let mut out = StepBatch::new(env.spec(), envs);
    let (mut actions, mut real) = (vec![0i64; envs * heads.len()], vec![0f32; envs * dims]);
    // Per env, its episodes' (return, length) in order; episode i is env i % E's (i / E)-th.
    let mut ended: Vec<Vec<(f64, f64)>> = vec![Vec::new(); envs];
    let wanted = |g: usize| episodes / envs + usize::from(g < episodes % envs);
    let mut starts = vec![true; envs];
    while (0..envs).any(|g| ended[g].len() < wanted(g)) {
        act(&obs, Chosen { heads: &heads, starts: &starts, actions: &mut actions, real: &mut real });
        env.step_actions(Actions { index: &actions, real: &real }, &mut out)?;
        for (e, start) in starts.iter_mut().enumerate() {
            *start = out.terminated[e] || out.truncated[e];
        }
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

impl EvalReport {
    /// As `hotlab eval` prints it.
    pub fn evaluation(&self, play: Play) -> Result<Evaluation> {
        let how = if play == Play::Greedy { "greedy" } else { "sampled" };
        let summary = format!(
            "{} {how} over {} episodes: mean return {:.1} (min {:.0}, max {:.0})",
            self.env, self.episodes, self.mean_return, self.min_return, self.max_return
        );
        Ok(Evaluation { key: "eval", json: serde_json::to_value(self)?, summary })
    }
}
