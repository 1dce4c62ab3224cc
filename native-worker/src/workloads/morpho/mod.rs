//! The morphogenetic workload (seeds 001–003, issue 21), in progress: each env is a host
//! network learning a supervised task ([`hotlab_shared::glyphs`]) into whose slots an agent
//! grafts small modules ("seeds") while it trains.
//!
//! Here so far: the seeds' blueprints ([`blueprint`]) and the host with its slots
//! ([`host`]); the slot lifecycle, the heads' masks and Shapley values are in
//! [`hotlab_shared::morpho`]. Next: the env (a host epoch per step, counterfactual
//! validation, the reward), the 8-head agent, the knobs (`--lifecycle`, `--slots`,
//! `--host-exec`) and its place in the registry.

pub mod blueprint;
pub mod host;
