//! `hotlab eval`: a checkpoint's policy over fresh episodes, as its workload evaluates it.

use crate::failure::{Outcome, UsageError};
use clap::Args;
use hotlab_train::checkpoint;
use hotlab_train::workload::TaskSet;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct EvalArgs {
    /// A directory written by `hotlab train --out`.
    #[arg(long)]
    pub checkpoint: PathBuf,
    /// Episodes to play (1 to 100000); for a proof policy, tries per held-out query (at most 1000).
    #[arg(long, default_value_t = 100)]
    pub episodes: usize,
    /// Seed of the evaluation envs.
    #[arg(long, default_value_t = 12_345)]
    pub seed: u64,
    /// Which tasks to play, for workloads with tasks of their own (morpho): `held-out`,
    /// what results are reported on, or `validation`, a separate set to tune on.
    #[arg(long, default_value = "held-out", value_parser = TaskSet::NAMES)]
    pub task_set: String,
    /// Draw each action from the policy's distribution instead of playing its most likely
    /// (categorical) or mean (Gaussian) action.
    #[arg(long)]
    pub sample: bool,
    /// Play the policy alone, without the baselines its workload's evaluation plays beside
    /// it (morpho's: waiting at each tempo, random legal actions and the grower, five of its
    /// seven policies): its scores per episode, nothing compared. For comparing checkpoints
    /// on the same episodes, whose baselines are the same.
    #[arg(long, conflicts_with = "sample")]
    pub no_baselines: bool,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

pub fn eval(a: EvalArgs) -> Outcome<()> {
    if !(1..=100_000).contains(&a.episodes) {
        return Err(UsageError {
            flag: "--episodes",
            message: format!("must be between 1 and 100000 (got {})", a.episodes),
        }
        .into());
    }
    if !a.checkpoint.join(checkpoint::SPEC_FILE).exists() {
        return Err(UsageError {
            flag: "--checkpoint",
            message: format!("{} is not a checkpoint directory (no {})", a.checkpoint.display(), checkpoint::SPEC_FILE),
        }
        .into());
    }
    let policy = hotlab_workloads::load_checkpoint(&a.checkpoint)?;
    let tasks: TaskSet = a.task_set.parse().map_err(|message| UsageError { flag: "--task-set", message })?;
    let e = match a.sample {
        false if a.no_baselines => policy.evaluate_alone(tasks, a.episodes, a.seed).ok_or_else(|| UsageError {
            flag: "--no-baselines",
            message: "this workload's evaluation has no baselines to leave out (morpho's has); leave it out".into(),
        })??,
        true if tasks != TaskSet::HeldOut => {
            return Err(UsageError {
                flag: "--sample",
                message: "plays the held-out episodes only; leave --task-set out".into(),
            }
            .into())
        }
        true => policy.evaluate_sampled(a.episodes, a.seed)?,
        false => policy.evaluate_on(tasks, a.episodes, a.seed)?,
    };
    match a.json {
        true => println!("{}", serde_json::to_string(&e.json)?),
        false => println!("{}", e.summary),
    }
    Ok(())
}
