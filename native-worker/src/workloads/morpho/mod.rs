//! The morphogenetic workload (seeds 001–003, issue 21), in progress: each env is a host
//! network learning a supervised task ([`hotlab_shared::glyphs`]) into whose slots an agent
//! grafts small modules ("seeds") while it trains.
//!
//! Here so far: the seeds' blueprints ([`blueprint`]), the host with its slots
//! ([`host`]) and the env ([`env`]: a decision and a host epoch per step, counterfactual
//! validation and Shapley credit, the reward); the slot lifecycle, the heads' masks and
//! Shapley values are in [`hotlab_shared::morpho`]. Next: the 8-head agent and its
//! learner, the knobs (`--lifecycle`, `--slots`, `--host-exec`), the registry, the
//! baselines (always wait, random legal) and the lab's view.

pub mod blueprint;
pub mod env;
pub mod host;
