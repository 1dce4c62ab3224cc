//! The hotlab worker: a PPO trainer on libtorch, its environments, and the lab server.
//!
//! `docs/architecture.md` (in the repository) has the data flow of a run, the folders and
//! what each may import, and how to add a workload, a knob or a lesson. The folders, from
//! the top (what a person runs) to the bottom (what everything uses):
//!
//! - [`lab`]: the lab server (HTTP, WebSockets, the run manager and its SQLite store);
//! - [`worker`]: `hotlab worker`, a machine of the lab that connects out to it;
//! - [`wire`]: how a run talks to the lab: its process's JSON lines, the lab–worker link;
//! - [`bench`]: the library side of `hotlab bench` and `hotlab gpu-check`;
//! - [`workloads`]: one folder per workload (CartPole, the proof env) and the registry;
//! - [`models`]: networks more than one workload can use (the MLP actor-critic);
//! - [`train`]: the training loop, written once for every workload, and PPO in it
//!   (rollout, GAE, the update, Adam, precision, telemetry, checkpoints);
//! - [`exec`]: where envs step (the host backends), host↔device transfers, the helper
//!   thread, `--device`;
//! - [`cuda`], [`kernels`], [`profiler`], [`system`]: CUDA kernels and events, host f32
//!   kernels, the phase profiler, the machine's description.
//!
//! The `hotlab` binary's subcommands are in `src/cli/` (not part of this library).

pub mod bench;
pub mod cuda;
pub mod exec;
pub mod kernels;
pub mod lab;
pub mod models;
pub mod profiler;
pub mod system;
#[cfg(test)]
mod testing;
pub mod train;
pub mod wire;
pub mod worker;
pub mod workloads;
