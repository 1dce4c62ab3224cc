//! The one run specification, shared by the CLI, the REST API, the web UI and the files
//! a run writes.
//!
//! In JSON a spec is nested by concern: `workload` (a tagged object carrying only that
//! workload's settings), `envs`, `steps`, `total_steps`, `seconds`, `seed`, `device`, then `ppo` (the
//! hyperparameters), `exec` (where and how the hot path runs) and `telemetry`. Omitted
//! fields take the defaults below (CleanRL's `ppo.py` for CartPole); unknown ones are
//! refused. The flat form of earlier versions (`{"env": "proof", "lr": …, "kb": …}`, the
//! CLI flags in snake_case) is still read: [`json`] migrates it, so stored runs, old
//! `spec.json` files and scripts that post it keep working. Every field is a knob of
//! [`knobs`], which names its flag and its JSON path; the workload's settings are the
//! registry's (`hotlab-specs`).

pub mod json;
pub mod knobs;
pub mod presets;

use hotlab_core::choices::{Backend, Inference, Norm, Precision, Rnn, UpdateMode};
use hotlab_core::knob::Knob;
use hotlab_core::run::{ExecSpec, PpoSpec, RunContext, RunPart, TelemetrySpec};
use hotlab_core::run_knobs;
use hotlab_specs::{EnvName, Registered, WorkloadSpec};
pub use presets::PresetSpec;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// Everything that defines a training run. Defaults = the `cleanrl` preset.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self", default, deny_unknown_fields)]
pub struct RunSpec {
    /// The workload and its own settings.
    pub workload: WorkloadSpec,
    /// Parallel environments.
    pub envs: usize,
    /// Steps per environment per rollout (the rollout is `envs × steps` transitions).
    pub steps: usize,
    /// Environment steps over the whole run.
    pub total_steps: u64,
    /// Most seconds of training (rollouts and updates) before the run ends after the update
    /// in progress; 0 = no limit, `total_steps` alone ends it. A budget for audits and lessons.
    pub seconds: f64,
    /// Seed of every random stream (envs, init, sampling, shuffling).
    pub seed: u64,
    /// `cpu`, `cuda`, `cuda:N` or `auto` (the first GPU if there is one, else the CPU).
    pub device: String,
    /// PPO's hyperparameters.
    pub ppo: PpoSpec,
    /// Where and how the hot path runs (the syllabus's knobs).
    pub exec: ExecSpec,
    /// Gradient telemetry.
    pub telemetry: TelemetrySpec,
}

impl Serialize for RunSpec {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        RunSpec::serialize(self, s)
    }
}

/// Reads the nested form and, migrated, the flat form of earlier versions.
impl<'de> Deserialize<'de> for RunSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let value = serde_json::Value::deserialize(d)?;
        let nested = json::nested(value).map_err(|e| D::Error::custom(e.message))?;
        RunSpec::deserialize(nested).map_err(D::Error::custom)
    }
}

impl Default for RunSpec {
    /// CleanRL's CartPole run (the `cleanrl` preset).
    fn default() -> Self {
        Self::from_parts(RunPart::default(), WorkloadSpec::default())
    }
}

impl RunSpec {
    /// The spec of a run's part and a workload (what a preset's edit makes).
    pub fn from_parts(run: RunPart, workload: WorkloadSpec) -> Self {
        let RunPart { envs, steps, total_steps, seconds, seed, device, ppo, exec, telemetry } = run;
        Self { workload, envs, steps, total_steps, seconds, seed, device, ppo, exec, telemetry }
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

/// A rejected spec value: which knob (its flag in snake_case), where it sits in the JSON,
/// and what is allowed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub struct SpecError {
    /// The knob: its CLI flag in snake_case (`total_steps` for `--total-steps`).
    pub field: String,
    /// Its JSON path in the nested spec (`ppo.minibatches`, `workload.proof.depth`).
    pub path: String,
    pub message: String,
}

impl SpecError {
    /// An error about knob `field` (a flag in snake_case; its path comes from the knob table).
    pub fn new(field: &str, message: impl Into<String>) -> Self {
        let path = knobs::find(field).map_or(field, |k| k.path).to_string();
        Self { field: field.into(), path, message: message.into() }
    }

    /// An error about `knob` (a declared knob: its name and path as declared).
    pub fn of(knob: &Knob, message: impl Into<String>) -> Self {
        Self { field: knob.name.into(), path: knob.path.into(), message: message.into() }
    }

    /// The CLI flag of the field (`total_steps` → `--total-steps`).
    pub fn flag(&self) -> String {
        hotlab_core::knob::flag_of(&self.field)
    }
}

/// A knob's value refused below the spec (a workload's settings, a range): placed in the
/// spec by its knob.
impl From<hotlab_core::knob::KnobError> for SpecError {
    fn from(e: hotlab_core::knob::KnobError) -> Self {
        SpecError::new(e.knob, e.message)
    }
}

impl SpecError {
    /// `--obs-norm on` where the env observes no floats: one refusal for what the spec knows
    /// of a workload's observation and what the trainer finds in a Gymnasium env's spaces
    /// (`fields`, its observation's fields, where known).
    pub fn obs_norm_without_floats(env: impl fmt::Display, fields: Option<&str>) -> Self {
        let fields = fields.map_or(String::new(), |f| format!(" (its fields: {f})"));
        Self::new("obs_norm", format!("on: the {env} env observes no floats to normalize{fields}; allowed: auto, off"))
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

/// Why `--update graph` is refused on the CPU.
pub const UPDATE_GRAPH_NEEDS_CUDA: &str =
    "replays the update as a captured CUDA graph, so it needs a CUDA GPU; allowed on the CPU: eager";
/// Why `--inference graph` is refused off a CUDA device.
pub const GRAPH_NEEDS_CUDA: &str =
    "graph replays a captured CUDA graph, so it needs a CUDA GPU; allowed on the CPU: eager, fused";

/// Upper bounds, so a typo cannot ask for a terabyte of rollout (with `MAX_ENVS` and
/// `MAX_STEPS`, which the run's knobs check).
pub const MAX_ROLLOUT: usize = 1 << 26;
pub const MAX_TOTAL_STEPS: u64 = 1 << 40;

/// Memory one `subprocess` worker process holds (measured: about 180 MiB anonymous, most
/// of it libtorch's start-up, which the worker itself never uses).
pub const WORKER_PROCESS_BYTES: u64 = 192 << 20;

pub(crate) fn in_range<T: PartialOrd + fmt::Display + Copy>(field: &str, v: T, lo: T, hi: T) -> Result<(), SpecError> {
    if v >= lo && v <= hi {
        Ok(())
    } else {
        Err(SpecError::new(field, format!("must be between {lo} and {hi} (got {v})")))
    }
}

impl RunSpec {
    /// The workload's name.
    pub fn env(&self) -> EnvName {
        self.workload.name()
    }

    /// Its workload's settings, when they are `S` (`spec.settings::<MorphoSpec>()`): one
    /// accessor for every workload, from the registry.
    pub fn settings<S: Registered>(&self) -> Option<&S> {
        S::of(&self.workload)
    }

    /// The workload's settings of type `S` to change, the workload made `S`'s (at its
    /// defaults) where it was another: what `--env` then a workload's flags do, typed.
    pub fn settings_mut<S: Registered>(&mut self) -> &mut S {
        if S::of(&self.workload).is_none() {
            self.workload = S::default().into_workload();
        }
        S::of_mut(&mut self.workload).expect("the workload was just made S's")
    }

    /// Its settings around the workload's, as the workload's report rules read them.
    pub fn context(&self) -> RunContext<'_> {
        RunContext {
            device: &self.device,
            envs: self.envs,
            steps: self.steps,
            ppo: &self.ppo,
            exec: &self.exec,
            telemetry: &self.telemetry,
        }
    }

    /// The rollout inference the run uses: `--inference`, unless its workload's policy
    /// always uses one ([`hotlab_specs::Settings::INFERENCE`]).
    pub fn inference(&self) -> Inference {
        self.env().fixed_inference().unwrap_or(self.exec.inference)
    }

    /// Transitions per rollout.
    pub fn batch_size(&self) -> usize {
        self.envs * self.steps
    }

    /// Transitions per minibatch.
    pub fn minibatch_size(&self) -> usize {
        self.batch_size() / self.ppo.minibatches
    }

    /// Workers for `threads`/`subprocess`: `workers`, or one per core (never more than envs).
    pub fn resolved_workers(&self, cores: usize) -> usize {
        let w = if self.exec.workers == 0 { cores } else { self.exec.workers };
        w.clamp(1, self.envs.max(1))
    }

    /// Bytes the rollout needs, roughly: each transition's observation and its dozen
    /// scalars are held three times (the rollout buffer, the batch on the update's device,
    /// an epoch's shuffled copy). The network and the envs' own state are small beside it.
    pub fn rollout_bytes(&self) -> u64 {
        const SCALARS: u64 = 48; // action, log-prob, value, reward, flags, advantage, return…
        3 * (self.env().obs_bytes() + SCALARS) * self.batch_size() as u64
    }

    /// Bytes the networks need, roughly: an MLP of `hidden` over the observation for the
    /// actor and for the critic, each parameter held six times (the weights, the
    /// gradient, Adam's two moments, the flat copy the rollout reads and its host mirror).
    pub fn model_bytes(&self) -> u64 {
        let mut widths = vec![(self.env().obs_bytes() / 4).max(1)];
        widths.extend(self.ppo.hidden.iter().map(|&h| h as u64));
        widths.push(1);
        let per_net: u64 = widths.windows(2).map(|w| w[0] * w[1] + w[1]).sum();
        6 * 4 * 2 * per_net
    }

    /// Bytes the worker processes of `subprocess` take beside the trainer.
    pub fn workers_bytes(&self, cores: usize) -> u64 {
        match self.exec.backend {
            Backend::Subprocess => self.resolved_workers(cores) as u64 * WORKER_PROCESS_BYTES,
            _ => 0,
        }
    }

    /// Refused when the run would need more than `available` bytes (what the machine can
    /// give: the worker reads it from the OS) for its rollout, its networks and its worker
    /// processes, naming the fields behind the largest part.
    pub fn check_memory(&self, available: u64, cores: usize) -> Result<(), SpecError> {
        let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
        let rollout = self.rollout_bytes();
        let mut parts = vec![
            (
                "envs",
                format!(
                    "the rollout {:.1} GiB (envs × steps = {} × {} transitions, {} bytes each, kept three times)",
                    gib(rollout),
                    self.envs,
                    self.steps,
                    rollout / 3 / self.batch_size().max(1) as u64
                ),
                rollout,
                "lower --envs or --steps",
            ),
            (
                "hidden",
                format!("the networks {:.1} GiB (--hidden {:?})", gib(self.model_bytes()), self.ppo.hidden),
                self.model_bytes(),
                "narrower or fewer --hidden layers",
            ),
            (
                "workers",
                format!("{} worker processes {:.1} GiB", self.resolved_workers(cores), gib(self.workers_bytes(cores))),
                self.workers_bytes(cores),
                "fewer --workers, or the threads backend",
            ),
        ];
        parts.extend(self.workload.buffer());
        let need: u64 = parts.iter().map(|p| p.2).sum();
        if need <= available {
            return Ok(());
        }
        let (field, _, _, fix) = parts.iter().max_by_key(|p| p.2).expect("three parts at least");
        let what: Vec<&str> = parts.iter().filter(|p| p.2 > 0).map(|p| p.1.as_str()).collect();
        Err(SpecError::new(
            field,
            format!(
                "this run needs about {:.1} GiB: {}; this machine has {:.1} GiB available: {fix}",
                gib(need),
                what.join(", "),
                gib(available)
            ),
        ))
    }

    /// Updates in the run (CleanRL: `total_steps // batch_size`).
    pub fn updates(&self) -> u64 {
        self.total_steps / self.batch_size() as u64
    }

    /// Checks every field; the first bad one is reported with its flag, its JSON path and
    /// its allowed range.
    pub fn validate(&self) -> Result<(), SpecError> {
        // Every fixed range is its knob's (`knobs`); the bounds below depend on other knobs.
        knobs::check_ranges(self)?;
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
        if self.env().uses_ppo() {
            self.validate_ppo()?;
        }
        self.device.parse::<DeviceName>().map_err(|m| SpecError::of(&run_knobs::DEVICE, m))?;
        self.validate_exec()?;
        self.workload.validate()?;
        self.workload.validate_exec(&self.exec)?;
        let (env, backend) = (self.env(), self.exec.backend);
        if !env.backends().contains(&backend) {
            let allowed: Vec<&str> = env.backends().iter().map(|b| b.as_str()).collect();
            let why = match backend {
                Backend::Device => format!("the {env} env runs on the host (its envs cannot live in device tensors)"),
                _ => format!("the {env} env cannot run on '{backend}'"),
            };
            return Err(SpecError::of(
                &run_knobs::BACKEND,
                format!("{why}; allowed with --env {env}: {}", allowed.join(", ")),
            ));
        }
        if self.exec.workers > self.envs {
            return Err(SpecError::new(
                "workers",
                format!("must be at most envs = {} (got {}); 0 picks one per core", self.envs, self.exec.workers),
            ));
        }
        Ok(())
    }

    fn validate_ppo(&self) -> Result<(), SpecError> {
        let p = &self.ppo;
        if p.obs_norm == Norm::On && !self.env().float_obs() {
            return Err(SpecError::obs_norm_without_floats(self.env(), None));
        }
        in_range("minibatches", p.minibatches, 1, self.batch_size())?;
        if !self.batch_size().is_multiple_of(p.minibatches) {
            return Err(SpecError::new(
                "minibatches",
                format!(
                    "must divide envs × steps = {} (got {}); for example {}",
                    self.batch_size(),
                    p.minibatches,
                    divisors_near(self.batch_size(), p.minibatches)
                ),
            ));
        }
        if p.rnn != Rnn::None {
            self.validate_rnn()?;
        }
        if p.hidden.is_empty() || p.hidden.len() > 8 {
            return Err(SpecError::new(
                "hidden",
                format!("must list 1 to 8 layer widths, e.g. 64,64 (got {} layers)", p.hidden.len()),
            ));
        }
        Ok(())
    }

    /// A recurrent core learns from whole envs' segments: its minibatches are envs, and
    /// its update runs op by op on the host's or device's libtorch.
    fn validate_rnn(&self) -> Result<(), SpecError> {
        let p = &self.ppo;
        let env = self.env();
        if !env.recurrent() {
            let takers: Vec<&str> =
                EnvName::ALL.iter().copied().filter(|e| e.parse::<EnvName>().is_ok_and(EnvName::recurrent)).collect();
            return Err(SpecError::new(
                "rnn",
                format!(
                    "{}: the {env} env's policy is its own and has no recurrent core; allowed with --env {env}: none (--rnn works with {} envs)",
                    p.rnn,
                    takers.join(", ")
                ),
            ));
        }
        if !self.envs.is_multiple_of(p.minibatches) {
            return Err(SpecError::new(
                "minibatches",
                format!(
                    "with --rnn {} each minibatch is whole envs, so it must divide envs = {} (got {}); for example {}",
                    p.rnn,
                    self.envs,
                    p.minibatches,
                    divisors_near(self.envs, p.minibatches)
                ),
            ));
        }
        if self.exec.update != UpdateMode::Eager {
            return Err(SpecError::new(
                "update",
                format!(
                    "{}: a recurrent policy's update runs libtorch's ops and autograd; allowed with --rnn {}: eager",
                    self.exec.update, p.rnn
                ),
            ));
        }
        if self.exec.backend == Backend::Device {
            return Err(SpecError::new(
                "backend",
                format!("device: the device rollout has no recurrent policy; allowed with --rnn {}: the host backends (vectorized, threads, subprocess)", p.rnn),
            ));
        }
        Ok(())
    }

    fn validate_exec(&self) -> Result<(), SpecError> {
        let x = &self.exec;
        if x.precision == Precision::Fp16 && self.device == "cpu" {
            return Err(SpecError::of(&run_knobs::PRECISION, FP16_NEEDS_CUDA));
        }
        if x.update.captured() {
            if self.device == "cpu" {
                return Err(SpecError::of(&run_knobs::UPDATE, format!("{} {UPDATE_GRAPH_NEEDS_CUDA}", x.update)));
            }
            if x.precision == Precision::Fp16 {
                return Err(SpecError::new(
                    "update",
                    format!("{} cannot hold fp16's loss scaler, which reads its overflow check on the host every step; allowed with fp16: eager (or --precision bf16 with graph)", x.update),
                ));
            }
            if self.telemetry.every > 0 {
                return Err(SpecError::new(
                    "update",
                    format!("{} runs the update's minibatches on the device with no host step between them, where gradient telemetry reads the last one; allowed with --telemetry-every above 0: eager", x.update),
                ));
            }
        }
        if x.inference == Inference::Graph {
            if self.device == "cpu" {
                return Err(SpecError::of(&run_knobs::INFERENCE, GRAPH_NEEDS_CUDA));
            }
            if x.backend != Backend::Device || !self.env().backends().contains(&Backend::Device) {
                let envs = EnvName::running_on(Backend::Device).join(" or ");
                return Err(SpecError::new(
                    "inference",
                    format!("graph captures the whole rollout step (forward, sampling, env step) on the GPU, so it needs --env {envs} --backend device; allowed otherwise: eager, fused"),
                ));
            }
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
    fn a_rollout_too_large_for_the_memory_is_refused_naming_its_fields() {
        let small = RunSpec::default();
        assert_eq!(small.rollout_bytes(), 3 * (16 + 48) * 512);
        small.check_memory(1 << 30, 2).unwrap();
        let huge = RunSpec {
            workload: WorkloadSpec::default_for(EnvName::Proof),
            envs: 1024,
            steps: 65536,
            total_steps: 1 << 26,
            ..RunSpec::default()
        };
        huge.validate().unwrap();
        let e = huge.check_memory(24 << 30, 2).unwrap_err();
        assert_eq!(e.field, "envs");
        assert!(e.message.contains("1024 × 65536") && e.message.contains("24.0 GiB available"), "{e}");

        // Wide networks, and many worker processes, count too.
        let wide = RunSpec { ppo: PpoSpec { hidden: vec![4096; 8], ..PpoSpec::default() }, ..RunSpec::default() };
        wide.validate().unwrap();
        let e = wide.check_memory(1 << 30, 2).unwrap_err();
        assert_eq!(e.field, "hidden", "{e}");
        let many = RunSpec {
            envs: 256,
            exec: ExecSpec { backend: Backend::Subprocess, workers: 256, ..ExecSpec::default() },
            ..RunSpec::default()
        };
        many.validate().unwrap();
        let e = many.check_memory(8 << 30, 2).unwrap_err();
        assert_eq!(e.field, "workers", "{e}");
        assert!(e.message.contains("256 worker processes"), "{e}");
        many.check_memory(64 << 30, 2).unwrap();
    }

    #[test]
    fn defaults_are_cleanrl_and_valid() {
        let s = RunSpec::default();
        s.validate().unwrap();
        assert_eq!((s.envs, s.steps, s.ppo.epochs, s.ppo.minibatches, s.total_steps), (4, 128, 4, 4, 500_000));
        assert_eq!(s.updates(), 976);
        <hotlab_specs::AnyPreset as presets::PresetSpec>::find("wide").unwrap().spec().validate().unwrap();
    }

    /// The dreamer captures its train step only with the replay on the device: a spec that
    /// asks for the graph with the replay elsewhere is refused before anything is built.
    #[test]
    fn the_dreamers_update_graph_needs_the_replay_on_the_device() {
        use hotlab_specs::dreamer::{DreamerSpec, ReplayAt};
        let on = |replay| {
            let mut s = <hotlab_specs::AnyPreset as presets::PresetSpec>::find("dreamer").unwrap().spec();
            s.device = "cuda".into();
            s.exec.update = UpdateMode::Graph;
            s.workload = WorkloadSpec::Dreamer(DreamerSpec { replay, ..DreamerSpec::default() });
            s.validate()
        };
        on(ReplayAt::Device).unwrap();
        for replay in [ReplayAt::Host, ReplayAt::Pinned] {
            let e = on(replay).unwrap_err();
            assert_eq!(e.flag(), "--update", "{e}");
            assert!(e.message.contains(&format!("--replay {replay}: eager")), "{e}");
        }
    }

    /// Both captured updates need CUDA, refuse fp16's host-read scaler and gradient
    /// telemetry, each naming itself; `graph_fused` is PPO's, so the dreamer refuses it.
    /// `--obs-norm on` normalizes one vector of floats: a workload whose observation is
    /// integers (proof, morpho) refuses it before anything starts; `auto` and `off` pass,
    /// and the float workloads take it.
    #[test]
    fn obs_norm_on_is_refused_where_the_observation_is_not_floats() {
        for env in [EnvName::Proof, EnvName::Morpho, EnvName::Cartpole, EnvName::Gym] {
            let with = |norm: Norm| {
                let mut s = RunSpec { workload: WorkloadSpec::default_for(env), ..RunSpec::default() };
                s.ppo.obs_norm = norm;
                s.validate()
            };
            with(Norm::Auto).unwrap();
            with(Norm::Off).unwrap();
            match env.float_obs() {
                true => with(Norm::On).unwrap(),
                false => {
                    let e = with(Norm::On).unwrap_err();
                    assert_eq!((e.field.as_str(), e.flag()), ("obs_norm", "--obs-norm".to_string()), "{e}");
                    assert!(e.message.contains(&format!("the {env} env")) && e.message.ends_with("allowed: auto, off"));
                }
            }
        }
        assert!(!EnvName::Proof.float_obs() && !EnvName::Morpho.float_obs() && EnvName::Gym.float_obs());
    }

    #[test]
    fn captured_updates_are_refused_where_they_cannot_run_naming_the_mode() {
        for mode in [UpdateMode::Graph, UpdateMode::GraphFused] {
            let with = |f: fn(&mut RunSpec)| {
                let mut s = RunSpec { device: "cuda".into(), ..RunSpec::default() };
                s.exec.update = mode;
                f(&mut s);
                s.validate()
            };
            with(|_| ()).unwrap();
            with(|s| s.exec.precision = Precision::Bf16).unwrap();
            for (e, says) in [
                (with(|s| s.device = "cpu".into()).unwrap_err(), "needs a CUDA GPU; allowed on the CPU: eager"),
                (with(|s| s.exec.precision = Precision::Fp16).unwrap_err(), "fp16's loss scaler"),
                (with(|s| s.telemetry.every = 4).unwrap_err(), "--telemetry-every above 0: eager"),
            ] {
                assert_eq!(e.flag(), "--update", "{e}");
                assert!(e.message.starts_with(&format!("{mode} ")) && e.message.contains(says), "{e}");
            }
        }
        assert_eq!("graph_fused".parse::<UpdateMode>(), Ok(UpdateMode::GraphFused));
        assert!(UpdateMode::GraphFused.captured() && UpdateMode::Graph.captured() && !UpdateMode::Eager.captured());
        let mut s = <hotlab_specs::AnyPreset as presets::PresetSpec>::find("dreamer").unwrap().spec();
        s.device = "cuda".into();
        s.exec.update = UpdateMode::GraphFused;
        s.workload = WorkloadSpec::Dreamer(hotlab_specs::dreamer::DreamerSpec {
            replay: hotlab_specs::dreamer::ReplayAt::Device,
            ..Default::default()
        });
        let e = s.validate().unwrap_err();
        assert_eq!(e.flag(), "--update", "{e}");
        assert!(e.message.contains("allowed: eager, graph"), "{e}");
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
        let e = bad(|s| s.ppo.minibatches = 3);
        assert_eq!(e.field, "minibatches");
        assert!(e.message.contains("must divide envs × steps = 512"), "{e}");
        assert_eq!(
            bad(|s| s.device = "gpu".into()).to_string(),
            "--device: unknown device 'gpu'; allowed: cpu, cuda, cuda:N, auto"
        );
        assert_eq!(bad(|s| s.ppo.gamma = 1.5).field, "gamma");
        assert_eq!(bad(|s| s.ppo.lr = f64::NAN).field, "lr");
        assert_eq!(bad(|s| s.total_steps = 100).field, "total_steps");
        assert_eq!(bad(|s| s.ppo.hidden = vec![]).field, "hidden");
        assert_eq!("cuda:1".parse::<DeviceName>(), Ok(DeviceName::Cuda(Some(1))));
    }
}
