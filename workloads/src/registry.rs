// The workloads, one line each: its variant, its name (`--env`, its key in a spec's JSON),
// its folder under `workloads/src/` and its settings type. Each crate that knows the
// workloads reads this file with its own `registry!` macro: `hotlab-shared` takes each
// folder's `spec.rs` (its settings, knobs, phases, counts, frame and report rules),
// `hotlab-web` its `web.rs` (its view), and `hotlab-workloads` the folder's native code
// (`mod.rs`: its `Workload` and `load`). A new workload is its folder and a line here.
registry! {
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
