//! Networks that more than one workload can train: the MLP actor-critic for a vector of
//! features ([`mlp`]), the CNN actor-critic for images ([`cnn`]), either with a recurrent
//! core ([`rnn`]), the combined one for a Dict's or Tuple's leaves ([`combined`]), the
//! layers they share
//! ([`layers`]) and how a trained one is played ([`play`]). A network that belongs to one
//! workload lives in its folder.

pub mod cnn;
pub mod combined;
pub mod layers;
pub mod mlp;
pub mod play;
pub mod rnn;

use crate::checkpoint::Stored;
use crate::error::RunError;
use crate::exec::EnvMaker;
use crate::workload::{Learner, Setup, TrainedPolicy, Workload};
use hotlab_env::EnvSpec;
use std::sync::Arc;

/// PPO with the network the observation calls for: the CNN for an image, the MLP for a
/// vector of features, either with a recurrent core where `--rnn` asks for one; the
/// combined encoder for a structured observation (a Dict's or Tuple's leaves).
pub fn ppo_learner(
    workload: Arc<dyn Workload>,
    setup: &mut Setup<'_>,
    env_spec: &EnvSpec,
) -> Result<Box<dyn Learner>, RunError> {
    if setup.spec.ppo.rnn != hotlab_core::choices::Rnn::None {
        return rnn::learner::ppo_learner(workload, setup, env_spec);
    }
    if combined::reads(env_spec) {
        return combined::learner::ppo_learner(workload, setup, env_spec);
    }
    match cnn::reads(env_spec) {
        true => cnn::learner::ppo_learner(workload, setup, env_spec),
        false => mlp::learner::ppo_learner(workload, setup, env_spec, None),
    }
}

/// A checkpoint's trained network, recurrent, combined, the CNN or the MLP, as its
/// `spec.json` names it.
pub fn load_trained(stored: Stored, env: Arc<dyn EnvMaker>) -> anyhow::Result<Box<dyn TrainedPolicy>> {
    if stored.meta.contains_key(combined::CHECKPOINT_KEY) {
        return Ok(Box::new(combined::TrainedCombined::load(stored, env)?));
    }
    if stored.meta.contains_key(rnn::CHECKPOINT_KEY) {
        return Ok(Box::new(rnn::TrainedRnn::load(stored, env)?));
    }
    match stored.meta.contains_key(cnn::CHECKPOINT_KEY) {
        true => Ok(Box::new(cnn::TrainedCnn::load(stored, env)?)),
        false => Ok(Box::new(mlp::TrainedMlp::load(stored, env)?)),
    }
}
