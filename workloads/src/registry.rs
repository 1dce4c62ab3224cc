//! The registry: the workload folders, one line each. Three crates read this file as a
//! module of theirs (`#[path = "registry.rs"]`, so that its modules are the folders beside
//! it): `hotlab-specs` (`specs.rs`), `hotlab-workloads` (`lib.rs`) and `hotlab-views`
//! (`views.rs`); each folder's `mod.rs` gives each crate its part. `hotlab-specs`' build
//! script reads the list too: a line `pub mod name;` is the workload `name` (`--env name`,
//! its key in a spec's JSON), its variant `Name`, its settings `NameSpec` (in its
//! `spec.rs`), and its doc line the variant's doc. Their order here is theirs everywhere.

/// Gymnasium's CartPole-v1.
pub mod cartpole;
/// Seed 000's proof search over a Prolog knowledge base.
pub mod proof;
/// Seeds 001–003's morphogenetic trainer: hosts that grow seeds while they learn.
pub mod morpho;
/// Seed 004's DreamerV3-style learner on CartPole rendered to pixels.
pub mod dreamer;
/// Any Gymnasium env, stepped by Python worker processes through shared memory.
pub mod gym;
/// One of EnvPool's C++ envs, a batch stepped by EnvPool's threads in one worker process.
pub mod envpool;
/// A user's own training script, run unmodified under hotlab's probe.
pub mod external;
