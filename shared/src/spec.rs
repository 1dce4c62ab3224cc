//! The one run specification, shared by the CLI, the REST API and the web UI.
//!
//! In JSON its fields are the CLI flag names in snake_case (`--total-steps` →
//! `total_steps`); omitted fields take the defaults below, which are CleanRL's `ppo.py`
//! defaults for CartPole. Unknown fields are rejected.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Everything that defines a training run. Defaults = the `cleanrl` preset.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RunSpec {
    /// The workload.
    pub env: EnvName,
    /// Parallel environments.
    pub envs: usize,
    /// Steps per environment per rollout (the rollout is `envs × steps` transitions).
    pub steps: usize,
    /// Environment steps over the whole run.
    pub total_steps: u64,
    /// Passes over each rollout in the update.
    pub epochs: usize,
    /// Minibatches per epoch; must divide `envs × steps`.
    pub minibatches: usize,
    /// Adam learning rate.
    pub lr: f64,
    /// Discount factor γ.
    pub gamma: f64,
    /// GAE λ.
    pub gae_lambda: f64,
    /// PPO clip range for the ratio and the value function.
    pub clip: f64,
    /// Entropy bonus coefficient.
    pub ent_coef: f64,
    /// Value loss coefficient.
    pub vf_coef: f64,
    /// Global gradient norm clip.
    pub max_grad_norm: f64,
    /// Anneal the learning rate linearly to 0 over the run.
    pub anneal_lr: bool,
    /// Hidden layer widths of the actor and of the critic (each its own tanh MLP).
    pub hidden: Vec<usize>,
    /// Seed of every random stream (envs, init, sampling, shuffling).
    pub seed: u64,
    /// `cpu`, `cuda`, `cuda:N` or `auto` (the first GPU if there is one, else the CPU).
    pub device: String,
    /// How the rollout's policy forward runs: `eager` (libtorch ops), `fused` (a native
    /// forward; on CUDA with `--backend device`, a fused env kernel) or `graph` (CUDA graph replay).
    pub inference: Inference,
    /// Where and how the envs are stepped.
    pub backend: Backend,
    /// Worker threads or processes for `threads` and `subprocess`; 0 = one per core.
    pub workers: usize,
    /// How the trainer waits for `subprocess` workers.
    pub wait: WaitMode,
    /// How observations reach the device for an eager forward.
    pub transfer: Transfer,
    /// How an eager forward's actions are read back to the host.
    pub action_sync: ActionSync,
    /// libtorch intra-op threads; 0 = automatic (1 for minibatches under 1024 rows or beside env worker threads or processes, else one per core).
    pub threads: usize,
    /// The update's matmul precision: `fp32`, `fp16` (CUDA, with a dynamic loss scaler),
    /// `bf16`, or `auto` (bf16 on CUDA compute capability ≥ 8.0, ROCm and AVX512-BF16 CPUs; fp16 on older
    /// CUDA GPUs; fp32 elsewhere). Master weights stay fp32.
    pub precision: Precision,
    /// Gradient norms (global and per layer) every K updates, published off the hot path; 0 = off.
    pub telemetry_every: u64,
    /// Proof env: the knowledge base, a Prolog file or a generated world
    /// (`family:people=N,seed=S`, `geography:places=N,seed=S`).
    pub kb: String,
    /// Proof env: a query file (ground atoms; `% test` starts the held-out part); for a
    /// generated world the queries are generated when this is absent.
    pub queries: Option<String>,
    /// Proof env: most resolution steps in an episode (the depth limit).
    pub proof_depth: usize,
    /// Proof env: width of the policy's index embeddings.
    pub embed_dim: usize,
}

/// Workloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum EnvName {
    #[default]
    Cartpole,
    /// Seed 000's proof search over a Prolog knowledge base.
    Proof,
}

impl EnvName {
    pub const ALL: &'static [&'static str] = &["cartpole", "proof"];

    pub fn as_str(self) -> &'static str {
        match self {
            EnvName::Cartpole => "cartpole",
            EnvName::Proof => "proof",
        }
    }
}

impl std::str::FromStr for EnvName {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "cartpole" => Ok(EnvName::Cartpole),
            "proof" => Ok(EnvName::Proof),
            other => Err(format!("unknown env '{other}'; allowed: {}", EnvName::ALL.join(", "))),
        }
    }
}

/// Rollout inference modes (catalogue row 5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Inference {
    /// libtorch ops under no_grad, one dispatch per op.
    Eager,
    /// A native Rust forward of the MLP with the weights copied once per update; with
    /// `--backend device` on CUDA, the envs step in one fused kernel per step.
    #[default]
    Fused,
    /// `--backend device` on CUDA: the rollout (forward, sampling, env step, storage in
    /// one kernel per step) captured once as a CUDA graph and replayed per rollout.
    Graph,
}

impl Inference {
    pub const ALL: &'static [&'static str] = &["eager", "fused", "graph"];

    pub fn as_str(self) -> &'static str {
        match self {
            Inference::Eager => "eager",
            Inference::Fused => "fused",
            Inference::Graph => "graph",
        }
    }
}

impl std::str::FromStr for Inference {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "eager" => Ok(Inference::Eager),
            "fused" => Ok(Inference::Fused),
            "graph" => Ok(Inference::Graph),
            other => Err(format!("unknown inference mode '{other}'; allowed: {}", Inference::ALL.join(", "))),
        }
    }
}

/// A snake_case enum usable as a CLI value and a JSON string, listing its values in errors.
macro_rules! knob {
    ($(#[$doc:meta])* $name:ident, $what:literal { $($(#[$vdoc:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $($(#[$vdoc])* $variant),+ }

        impl $name {
            pub const ALL: &'static [&'static str] = &[$($text),+];
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
        }

        impl std::str::FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($text => Ok($name::$variant),)+
                    other => Err(format!(concat!("unknown ", $what, " '{}'; allowed: {}"), other, Self::ALL.join(", "))),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

knob!(
    /// Env backends (catalogue rows 1, 3 and 8).
    Backend, "backend" {
        /// One scalar env object per env, stepped in a loop on the trainer thread.
        Sequential = "sequential",
        /// Worker threads, each owning a slice of envs, woken once per step.
        Threads = "threads",
        /// Worker processes with shared-memory buffers.
        Subprocess = "subprocess",
        /// The struct-of-arrays batch on the trainer thread.
        Vectorized = "vectorized",
        /// Env state in tensors on the trainer's device, stepped by tensor ops.
        Device = "device",
    }
);

knob!(
    /// How the trainer waits for worker processes.
    WaitMode, "wait mode" {
        /// Busy-polls the workers' ready flags.
        Spin = "spin",
        /// Sleeps on a futex until a worker wakes it.
        Block = "block",
    }
);

knob!(
    /// How observations are copied to the device (catalogue row 2).
    Transfer, "transfer mode" {
        /// One copy per observation field per env.
        PerTensor = "per_tensor",
        /// One contiguous copy per step, split into views.
        Packed = "packed",
        /// Staged in page-locked memory, copied without blocking.
        Pinned = "pinned",
    }
);

knob!(
    /// How sampled actions are read back to the host (catalogue row 4).
    ActionSync, "action sync mode" {
        /// One scalar read per env per head.
        PerItem = "per_item",
        /// All heads stacked, one read.
        Stacked = "stacked",
    }
);

knob!(
    /// The update's precision (catalogue row 6).
    Precision, "precision" {
        /// Everything in fp32.
        Fp32 = "fp32",
        /// Matmuls in fp16 with a dynamic loss scaler (CUDA only).
        Fp16 = "fp16",
        /// Matmuls in bf16, no scaler.
        Bf16 = "bf16",
        /// bf16 where the device supports it (CUDA ≥ 8.0, ROCm, AVX512-BF16), fp16 on older CUDA GPUs, else fp32.
        Auto = "auto",
    }
);

/// Named starting points; explicit values override them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Preset {
    /// CleanRL's CartPole run: 4 envs × 128 steps, 4 epochs, 4 minibatches, 500,000 steps.
    Cleanrl,
    /// A throughput run: 1024 envs × 128 steps, 4 epochs, 32 minibatches, 5,000,000 steps.
    Wide,
    /// The proof env on a family world: 64 envs × 128 steps, learning rate 0.003,
    /// 1,000,000 steps (the embedding policy learns ~10× faster at this rate than at 2.5e-4).
    Proof,
}

impl Preset {
    pub const ALL: &'static [&'static str] = &["cleanrl", "wide", "proof"];

    pub fn spec(self) -> RunSpec {
        match self {
            Preset::Cleanrl => RunSpec::default(),
            Preset::Wide => RunSpec {
                envs: 1024,
                steps: 128,
                epochs: 4,
                minibatches: 32,
                total_steps: 5_000_000,
                ..RunSpec::default()
            },
            Preset::Proof => {
                RunSpec { env: EnvName::Proof, envs: 64, lr: 0.003, total_steps: 1_000_000, ..RunSpec::default() }
            }
        }
    }
}

impl std::str::FromStr for Preset {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "cleanrl" => Ok(Preset::Cleanrl),
            "wide" => Ok(Preset::Wide),
            "proof" => Ok(Preset::Proof),
            other => Err(format!("unknown preset '{other}'; allowed: {}", Preset::ALL.join(", "))),
        }
    }
}

impl Default for RunSpec {
    fn default() -> Self {
        Self {
            env: EnvName::Cartpole,
            envs: 4,
            steps: 128,
            total_steps: 500_000,
            epochs: 4,
            minibatches: 4,
            lr: 2.5e-4,
            gamma: 0.99,
            gae_lambda: 0.95,
            clip: 0.2,
            ent_coef: 0.01,
            vf_coef: 0.5,
            max_grad_norm: 0.5,
            anneal_lr: true,
            hidden: vec![64, 64],
            seed: 1,
            device: "auto".into(),
            inference: Inference::Fused,
            backend: Backend::Vectorized,
            workers: 0,
            wait: WaitMode::Block,
            transfer: Transfer::Packed,
            action_sync: ActionSync::Stacked,
            threads: 0,
            precision: Precision::Fp32,
            telemetry_every: 0,
            kb: "family:people=200,seed=3".into(),
            queries: None,
            proof_depth: 10,
            embed_dim: 32,
        }
    }
}

/// A device as written in a spec.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceName {
    Cpu,
    /// `cuda` (index `None` = device 0) or `cuda:N`.
    Cuda(Option<usize>),
    Auto,
}

impl std::str::FromStr for DeviceName {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let allowed = "allowed: cpu, cuda, cuda:N, auto";
        match s {
            "cpu" => Ok(DeviceName::Cpu),
            "cuda" => Ok(DeviceName::Cuda(None)),
            "auto" => Ok(DeviceName::Auto),
            _ => match s.strip_prefix("cuda:").map(str::parse::<usize>) {
                Some(Ok(i)) => Ok(DeviceName::Cuda(Some(i))),
                _ => Err(format!("unknown device '{s}'; {allowed}")),
            },
        }
    }
}

/// A rejected spec value: which field, and what is allowed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub struct SpecError {
    /// The field's JSON name (snake_case).
    pub field: String,
    pub message: String,
}

impl SpecError {
    pub fn new(field: &str, message: impl Into<String>) -> Self {
        Self { field: field.into(), message: message.into() }
    }

    /// The CLI flag of the field (`total_steps` → `--total-steps`).
    pub fn flag(&self) -> String {
        format!("--{}", self.field.replace('_', "-"))
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.flag(), self.message)
    }
}

/// Why `--precision fp16` is refused on the CPU.
pub const FP16_NEEDS_CUDA: &str =
    "fp16 needs a CUDA device (its loss scaler exists for GPU tensor cores); allowed on the CPU: fp32, bf16, auto";

/// Why `--inference graph` is refused off a CUDA device.
pub const GRAPH_NEEDS_CUDA: &str =
    "graph replays a captured CUDA graph, so it needs a CUDA GPU; allowed on the CPU: eager, fused";

/// Upper bounds, so a typo cannot ask for a terabyte of rollout.
pub const MAX_ENVS: usize = 1 << 20;
pub const MAX_STEPS: usize = 1 << 16;
pub const MAX_ROLLOUT: usize = 1 << 26;
pub const MAX_TOTAL_STEPS: u64 = 1 << 40;

fn in_range<T: PartialOrd + fmt::Display + Copy>(field: &str, v: T, lo: T, hi: T) -> Result<(), SpecError> {
    if v >= lo && v <= hi {
        Ok(())
    } else {
        Err(SpecError::new(field, format!("must be between {lo} and {hi} (got {v})")))
    }
}

fn finite_in(field: &str, v: f64, lo: f64, hi: f64, lo_open: bool) -> Result<(), SpecError> {
    let lower_ok = if lo_open { v > lo } else { v >= lo };
    if v.is_finite() && lower_ok && v <= hi {
        Ok(())
    } else {
        let bracket = if lo_open { "(" } else { "[" };
        Err(SpecError::new(field, format!("must be in {bracket}{lo}, {hi}] (got {v})")))
    }
}

impl RunSpec {
    /// Transitions per rollout.
    pub fn batch_size(&self) -> usize {
        self.envs * self.steps
    }

    /// Transitions per minibatch.
    pub fn minibatch_size(&self) -> usize {
        self.batch_size() / self.minibatches
    }

    /// Workers for `threads`/`subprocess`: `workers`, or one per core (never more than envs).
    pub fn resolved_workers(&self, cores: usize) -> usize {
        let w = if self.workers == 0 { cores } else { self.workers };
        w.clamp(1, self.envs.max(1))
    }

    /// Updates in the run (CleanRL: `total_steps // batch_size`).
    pub fn updates(&self) -> u64 {
        self.total_steps / self.batch_size() as u64
    }

    /// Checks every field; the first bad one is reported with its allowed range.
    pub fn validate(&self) -> Result<(), SpecError> {
        in_range("envs", self.envs, 1, MAX_ENVS)?;
        in_range("steps", self.steps, 1, MAX_STEPS)?;
        if self.batch_size() > MAX_ROLLOUT {
            return Err(SpecError::new(
                "envs",
                format!("envs × steps must be at most {MAX_ROLLOUT} (got {} × {})", self.envs, self.steps),
            ));
        }
        let batch = self.batch_size() as u64;
        if self.total_steps < batch || self.total_steps > MAX_TOTAL_STEPS {
            return Err(SpecError::new(
                "total_steps",
                format!("must be between envs × steps = {batch} and {MAX_TOTAL_STEPS} (got {})", self.total_steps),
            ));
        }
        in_range("epochs", self.epochs, 1, 1000)?;
        in_range("minibatches", self.minibatches, 1, self.batch_size())?;
        if !self.batch_size().is_multiple_of(self.minibatches) {
            return Err(SpecError::new(
                "minibatches",
                format!(
                    "must divide envs × steps = {} (got {}); for example {}",
                    self.batch_size(),
                    self.minibatches,
                    divisors_near(self.batch_size(), self.minibatches)
                ),
            ));
        }
        finite_in("lr", self.lr, 0.0, 1.0, true)?;
        finite_in("gamma", self.gamma, 0.0, 1.0, false)?;
        finite_in("gae_lambda", self.gae_lambda, 0.0, 1.0, false)?;
        finite_in("clip", self.clip, 0.0, 10.0, true)?;
        finite_in("ent_coef", self.ent_coef, 0.0, 10.0, false)?;
        finite_in("vf_coef", self.vf_coef, 0.0, 100.0, false)?;
        finite_in("max_grad_norm", self.max_grad_norm, 0.0, 1e6, true)?;
        if self.hidden.is_empty() || self.hidden.len() > 8 {
            return Err(SpecError::new(
                "hidden",
                format!("must list 1 to 8 layer widths, e.g. 64,64 (got {} layers)", self.hidden.len()),
            ));
        }
        for &h in &self.hidden {
            in_range("hidden", h, 1, 4096)?;
        }
        self.device.parse::<DeviceName>().map_err(|m| SpecError::new("device", m))?;
        in_range("threads", self.threads, 0, 1024)?;
        if self.precision == Precision::Fp16 && self.device == "cpu" {
            return Err(SpecError::new("precision", FP16_NEEDS_CUDA));
        }
        if self.inference == Inference::Graph {
            if self.device == "cpu" {
                return Err(SpecError::new("inference", GRAPH_NEEDS_CUDA));
            }
            if self.env != EnvName::Cartpole || self.backend != Backend::Device {
                return Err(SpecError::new(
                    "inference",
                    "graph captures the whole rollout step (forward, sampling, env step) on the GPU, so it needs --env cartpole --backend device; allowed otherwise: eager, fused",
                ));
            }
        }
        in_range("telemetry_every", self.telemetry_every, 0, 1_000_000)?;
        in_range("workers", self.workers, 0, 256)?;
        in_range("proof_depth", self.proof_depth, 1, 64)?;
        in_range("embed_dim", self.embed_dim, 1, 1024)?;
        if self.env == EnvName::Proof && self.backend == Backend::Device {
            return Err(SpecError::new(
                "backend",
                "the proof env runs on the host (resolution is symbolic); allowed with --env proof: sequential, threads, subprocess, vectorized",
            ));
        }
        if self.workers > self.envs {
            return Err(SpecError::new(
                "workers",
                format!("must be at most envs = {} (got {}); 0 picks one per core", self.envs, self.workers),
            ));
        }
        Ok(())
    }
}

/// Two divisors of `n` close to `wanted`, as a hint.
fn divisors_near(n: usize, wanted: usize) -> String {
    let below = (1..=wanted.min(n)).rev().find(|d| n.is_multiple_of(*d)).unwrap_or(1);
    match (wanted + 1..=n).find(|d| n.is_multiple_of(*d)) {
        Some(above) => format!("{below} or {above}"),
        None => format!("{below}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_cleanrl_and_valid() {
        let s = RunSpec::default();
        s.validate().unwrap();
        assert_eq!((s.envs, s.steps, s.epochs, s.minibatches, s.total_steps), (4, 128, 4, 4, 500_000));
        assert_eq!(s.updates(), 976);
        Preset::Wide.spec().validate().unwrap();
    }

    #[test]
    fn json_uses_flag_names_and_rejects_unknown_fields() {
        let s: RunSpec =
            serde_json::from_str(r#"{"env":"cartpole","envs":8,"total_steps":20480,"device":"cpu"}"#).unwrap();
        assert_eq!((s.envs, s.steps, s.total_steps), (8, 128, 20480));
        let err = serde_json::from_str::<RunSpec>(r#"{"envz":8}"#).unwrap_err();
        assert!(err.to_string().contains("envz"), "{err}");
    }

    #[test]
    fn rejections_name_the_field_and_the_allowed_values() {
        let bad = |f: fn(&mut RunSpec)| {
            let mut s = RunSpec::default();
            f(&mut s);
            s.validate().unwrap_err()
        };
        let e = bad(|s| s.envs = 0);
        assert_eq!(e.flag(), "--envs");
        assert!(e.message.contains("between 1 and"));
        let e = bad(|s| s.minibatches = 3);
        assert_eq!(e.field, "minibatches");
        assert!(e.message.contains("must divide envs × steps = 512"), "{e}");
        assert_eq!(
            bad(|s| s.device = "gpu".into()).to_string(),
            "--device: unknown device 'gpu'; allowed: cpu, cuda, cuda:N, auto"
        );
        assert_eq!(bad(|s| s.gamma = 1.5).field, "gamma");
        assert_eq!(bad(|s| s.lr = f64::NAN).field, "lr");
        assert_eq!(bad(|s| s.total_steps = 100).field, "total_steps");
        assert_eq!(bad(|s| s.hidden = vec![]).field, "hidden");
        assert_eq!("cuda:1".parse::<DeviceName>(), Ok(DeviceName::Cuda(Some(1))));
    }
}
