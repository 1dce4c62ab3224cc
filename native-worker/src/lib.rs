//! The hotlab worker: a PPO trainer on libtorch, its environments, and the lab server.
//!
//! Where to look:
//! - [`train`]: the training loop, top to bottom (rollout → GAE → update).
//! - [`envs`]: the env backends (sequential, threads, subprocess, vectorized, device).
//! - [`actor`], [`transfer`], [`device_rollout`]: the rollout's policy, its host↔device
//!   traffic (counted), and the all-on-device rollout.
//! - [`ppo`]: the PPO loss and update, CleanRL's `ppo.py` in one short file.
//! - [`ppo_grad`], [`ppo_grad_host`]: the loss's gradient by hand; its CPU fp32 path
//!   (host loss heads, actor and critic on two threads via [`helper`], [`kernels`]).
//! - [`policy`]: the actor-critic MLPs, their parameters in one flat tensor;
//!   [`proof_policy`]: the proof env's embedding policy; [`model`]: either, per env.
//! - [`fused`]: the native (non-libtorch) forward used for rollouts.
//! - [`kernels`]: host f32 kernels that replace chains of small libtorch ops on the CPU.
//! - [`cuda`]: the CUDA hot path: NVRTC kernels (fused env step, graph rollout), CUDA
//!   event timing, and `hotlab gpu-check`.
//! - [`distribution`]: the multi-head masked categorical.
//! - [`gae`]: generalized advantage estimation, truncation-aware.
//! - [`adam`]: Adam over the flat parameter tensor.
//! - [`checkpoint`], [`eval`]: saving a trained policy and running it greedily.
//! - [`device`], [`system`]: resolving `--device` and describing the machine.
//! - [`serve`]: the HTTP server.

pub mod actor;
pub mod adam;
pub mod alloc;
pub mod bench;
pub mod checkpoint;
pub mod cuda;
pub mod device;
pub mod device_rollout;
pub mod distribution;
pub mod envs;
pub mod eval;
pub mod frames;
pub mod fused;
pub mod gae;
pub mod helper;
pub mod kernels;
pub mod lab;
pub mod model;
pub mod policy;
pub mod ppo;
pub mod ppo_grad;
pub mod ppo_grad_host;
pub mod precision;
pub mod profiler;
pub mod proof_eval;
pub mod proof_fused;
pub mod proof_grad;
pub mod proof_policy;
pub mod rollout;
pub mod serve;
pub mod system;
pub mod telemetry;
#[cfg(test)]
mod testing;
pub mod train;
pub mod transfer;
