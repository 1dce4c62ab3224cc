//! CartPole on any GPU through wgpu, and the same playground on the CPU.
//!
//! The playground (the web lab's `/playground`) steps up to 2^20 CartPoles under a
//! uniform random policy or a run's trained actor, and measures steps/s:
//!
//! - [`gpu::GpuCartPole`]: one WGSL kernel ([`shader_source`]) that steps every env
//!   `steps` times per dispatch with the state in registers: dynamics, autoreset from the
//!   env's own PCG stream, the actor's forward pass and the action draw, and the episode
//!   tallies summed per invocation before one atomic add. It runs on the browser's WebGPU (wasm32) and natively
//!   on Vulkan (Mesa's lavapipe in the tests);
//! - [`cpu::CpuCartPole`]: `hotlab_env`'s f32 batch env with the same policy rule
//!   ([`actor::choose`]), the wasm fallback when the browser has no WebGPU.
//!
//! Both follow `hotlab_env::cartpole` operation for operation, so a GPU transition
//! equals the batch env's to rounding (tests/wgsl_matches_the_batch_env.rs states the tolerance).

pub mod actor;
pub mod cpu;
pub mod gpu;

use hotlab_env::cartpole as cp;

pub use actor::{Actor, Policy, PolicyError};

/// The most envs a playground runs (the 1,048,576).
pub const MAX_ENVS: usize = 1 << 20;
/// Invocations per workgroup of the kernel.
pub const WORKGROUP: u32 = 64;

/// What a playground runs.
#[derive(Clone, Debug, PartialEq)]
pub struct Setup {
    /// Envs in the batch, 1 to [`MAX_ENVS`].
    pub envs: usize,
    /// The run seed: env `i` resets from `EnvRng::for_env(seed, i)`, as in the worker.
    pub seed: u64,
    pub policy: Policy,
}

impl Setup {
    /// Checks the sizes; the message names the field and the allowed range.
    pub fn check(&self) -> Result<(), String> {
        if !(1..=MAX_ENVS).contains(&self.envs) {
            return Err(format!("envs: must be between 1 and {MAX_ENVS} (got {})", self.envs));
        }
        Ok(())
    }
}

pub use hotlab_env::rng::action_rng;

/// What a stretch of stepping did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Env steps taken (envs × batch steps).
    pub steps: u64,
    /// Episodes that ended.
    pub episodes: u64,
    /// The sum of their lengths (a CartPole episode's return is its length).
    pub length_sum: u64,
}

impl Tally {
    pub fn add(&mut self, other: Tally) {
        self.steps += other.steps;
        self.episodes += other.episodes;
        self.length_sum += other.length_sum;
    }

    /// Mean length of the episodes that ended, if any did.
    pub fn mean_length(&self) -> Option<f64> {
        (self.episodes > 0).then(|| self.length_sum as f64 / self.episodes as f64)
    }
}

/// The kernel's source: the constants of `hotlab_env::cartpole` as f32 literals (each
/// the shortest decimal that reads back as the same f32), then the kernel.
///
/// `max_width` sizes the actor's per-invocation scratch (2 × it floats): the widest layer
/// of the actor it will run, 4 for no actor. Sized to fit, not to the 256 allowed, because
/// a 2 KB array per invocation made the random policy 7× slower on lavapipe even
/// where it was never touched.
pub fn shader_source(max_width: usize) -> String {
    let f = |name: &str, v: f32| format!("const {name}: f32 = {v:?}f;\n");
    let mut s = String::new();
    s += &f("G", cp::GRAVITY as f32);
    s += &f("MP", cp::MASS_POLE as f32);
    s += &f("TM", cp::TOTAL_MASS as f32);
    s += &f("L", cp::LENGTH as f32);
    s += &f("PML", cp::POLE_MASS_LENGTH as f32);
    s += &f("FORCE", cp::FORCE_MAG as f32);
    s += &f("T", cp::TAU as f32);
    s += &f("X_T", cp::X_THRESHOLD as f32);
    s += &f("THETA_T", cp::THETA_THRESHOLD as f32);
    s += &f("RESET_B", cp::RESET_BOUND as f32);
    s += &f("TWO_OVER_PI", std::f32::consts::FRAC_2_PI);
    s += &format!("const MAX_STEPS: u32 = {}u;\n", cp::MAX_STEPS);
    s += &format!("const MAX_WIDTH: u32 = {}u;\n", max_width.max(4));
    s += &format!("const WORKGROUP: u32 = {WORKGROUP}u;\n");
    s += &format!("const NORM_FLOATS: u32 = {}u;\n", actor::NORM_FLOATS);
    s + include_str!("cartpole.wgsl")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prelude_writes_every_constant_so_that_it_reads_back_exactly() {
        let src = shader_source(64);
        for line in src.lines().filter(|l| l.starts_with("const") && l.contains(": f32")) {
            let lit = line.split("= ").nth(1).unwrap().trim_end_matches("f;");
            let v: f32 = lit.parse().unwrap();
            assert!(v.is_finite() && src.contains(&format!("{v:?}f;")), "{line}");
        }
        assert!(src.contains("const MAX_STEPS: u32 = 500u;") && src.contains("const MAX_WIDTH: u32 = 64u;"));
    }

    #[test]
    fn sizes_are_checked_naming_the_field() {
        let s = |envs| Setup { envs, seed: 0, policy: Policy::Random };
        assert!(s(1).check().is_ok() && s(MAX_ENVS).check().is_ok());
        assert!(s(0).check().unwrap_err().starts_with("envs: must be between 1 and 1048576"));
        assert!(s(MAX_ENVS + 1).check().is_err());
    }
}
