//! The registry: the workloads, one line each (its variant, its name as `--env` and as its
//! key in a spec's JSON, its folder under `workloads/src/`, its settings type), handed by
//! [`workload_list!`](crate::workload_list) to a macro of each crate that knows the workloads:
//! `hotlab-shared`'s takes each folder's `spec.rs` (its settings, knobs, phases, counts,
//! frame and report rules), `hotlab-web`'s its `web.rs` (its view), and
//! `hotlab-workloads`' the folder's native code (`mod.rs`: its `Workload` and `load`). A
//! new workload is its folder and a line here.

/// Calls `CALLBACK! { … }` with the workloads, one per line: `/// doc`, then `Variant =
/// "name" in folder (SettingsType)`. Each crate that knows the workloads invokes it with
/// its own macro: `hotlab_shared::workload_list!(registry);`.
#[macro_export]
macro_rules! workload_list {
    ($callback:ident) => {
        $callback! {
            /// Gymnasium's CartPole-v1.
            Cartpole = "cartpole" in cartpole (CartpoleSpec),
            /// Seed 000's proof search over a Prolog knowledge base.
            Proof = "proof" in proof (ProofSpec),
            /// Seeds 001–003's morphogenetic trainer: hosts that grow seeds while they learn.
            Morpho = "morpho" in morpho (MorphoSpec),
            /// Seed 004's DreamerV3-style learner on CartPole rendered to pixels.
            Dreamer = "dreamer" in dreamer (DreamerSpec),
            /// Any Gymnasium env, stepped by Python worker processes through shared memory.
            Gym = "gym" in gym (GymSpec),
            /// One of EnvPool's C++ envs, a batch stepped by EnvPool's threads in one worker process.
            Envpool = "envpool" in envpool (EnvpoolSpec),
        }
    };
}
