//! Networks that more than one workload can train: today the MLP actor-critic for f32
//! observations ([`mlp`]). A network that belongs to one workload lives in its folder.

pub mod cnn;
pub mod layers;
pub mod mlp;
