//! The hotlab worker: a PPO trainer on libtorch, its environments, and the lab server.
//!
//! Where to look:
//! - [`train`]: the training loop, top to bottom (rollout → GAE → update).
//! - [`ppo`]: the PPO loss and update, CleanRL's `ppo.py` in one short file.
//! - [`policy`]: the actor-critic MLPs, their parameters in one flat tensor.
//! - [`fused`]: the native (non-libtorch) forward used for rollouts.
//! - [`distribution`]: the multi-head masked categorical.
//! - [`gae`]: generalized advantage estimation, truncation-aware.
//! - [`adam`]: Adam over the flat parameter tensor.
//! - [`checkpoint`], [`eval`]: saving a trained policy and running it greedily.
//! - [`device`], [`system`]: resolving `--device` and describing the machine.
//! - [`serve`]: the HTTP server.

pub mod adam;
pub mod alloc;
pub mod checkpoint;
pub mod device;
pub mod distribution;
pub mod eval;
pub mod fused;
pub mod gae;
pub mod policy;
pub mod ppo;
pub mod rollout;
pub mod serve;
pub mod system;
pub mod train;
