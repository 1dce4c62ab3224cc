//! The morphogenetic workload (seeds 001–003, issue 21), in progress: each env is a host
//! network learning a supervised task ([`hotlab_shared::glyphs`]) into whose slots an agent
//! grafts small modules ("seeds") while it trains.
//!
//! Here so far: the seeds' blueprints ([`blueprint`]) and the host with its slots
//! ([`host`]). Next: the slot lifecycle and its masks, the 8-head agent, the reward with
//! counterfactual and Shapley contributions, the knobs (`--lifecycle`, `--slots`,
//! `--host-exec`) and its place in the registry.

pub mod blueprint;
pub mod host;
