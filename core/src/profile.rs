//! Where a run's time went: named phases, each with wall time and calls (and device time
//! on a GPU), per window (one update) and in total.

use crate::counters::Counters;
use crate::script::ScriptProfile;
use serde::{Deserialize, Serialize};

crate::names::name_type!(
    /// A phase of a run's time, by name (its key in a profile's JSON). The loop's and PPO's
    /// phases are the constants here; a workload declares its own in its module
    /// (`Settings::PHASES`), and the registry (`crate::workloads::PHASES`) holds every phase
    /// with what it is. `other` is wall time no phase claimed.
    Phase
);

impl Phase {
    /// Stepping the envs (their own work).
    pub const ENV_STEP: Phase = Phase("env_step");
    /// Waiting on env workers (IPC, barriers).
    pub const ENV_WAIT: Phase = Phase("env_wait");
    /// Observations (and rollouts) to the device.
    pub const OBS_TRANSFER: Phase = Phase("obs_transfer");
    /// Images converted to float and scaled where the policy reads them (the CNN's
    /// encoder, on the batch's device), apart from its convolutions.
    pub const OBS_CONVERT: Phase = Phase("obs_convert");
    /// The rollout's policy forward and sampling.
    pub const POLICY_FORWARD: Phase = Phase("policy_forward");
    /// Sampled actions back to the host.
    pub const ACTION_READBACK: Phase = Phase("action_readback");
    /// Writing steps into the rollout buffer.
    pub const ROLLOUT_STORE: Phase = Phase("rollout_store");
    /// `--obs-norm`, `--reward-norm`: each step's batch scaled by its running statistics.
    pub const NORMALIZE: Phase = Phase("normalize");
    /// Bootstrap values and advantages.
    pub const GAE: Phase = Phase("gae");
    /// The update's forward pass and losses.
    pub const UPDATE_FORWARD: Phase = Phase("update_forward");
    /// A recurrent policy's core in the update's forward: one call per stretch of a
    /// segment between episode starts (`--rnn-update sequence`), or one per step (`stepped`).
    pub const UPDATE_CORE: Phase = Phase("update_core");
    /// The update's backward pass.
    pub const BACKWARD: Phase = Phase("backward");
    /// Gradient clip and Adam.
    pub const OPTIMIZER: Phase = Phase("optimizer");
    /// `--update graph`: the whole update, one replay.
    pub const UPDATE_GRAPH: Phase = Phase("update_graph");
    /// Gradient statistics.
    pub const TELEMETRY: Phase = Phase("telemetry");
    /// Handing metrics to observers.
    pub const PUBLISH: Phase = Phase("publish");
    /// Wall time outside every other phase.
    pub const OTHER: Phase = Phase("other");
}

/// Where a phase's time counts in the report's split (data, forward, backward) and where
/// its bar sits in the phase chart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum PhaseKind {
    /// Collecting and moving data: env steps, waits, transfers, the rollout buffer, replay.
    Data,
    /// A part of an env's step the env times itself (the morpho env's host network): data,
    /// and the envs' own compute when it dominates.
    EnvPart,
    /// A forward pass.
    Forward,
    /// A learned model's own forward (a world model): forward, named apart when it dominates.
    Model,
    /// A backward pass or an optimizer step.
    Backward,
    /// Bookkeeping outside the split (telemetry, publishing, `other`).
    Bookkeeping,
}

/// A phase with what it is: its kind, its colour in the phase chart and its line in the
/// report when no rule knows more.
#[derive(Clone, Copy, Debug)]
pub struct PhaseInfo {
    pub phase: Phase,
    pub kind: PhaseKind,
    /// A CSS colour (data phases warm, forward green, backward blue, the rest grey).
    pub color: &'static str,
    /// The report's line for it.
    pub about: &'static str,
    /// What one call is, for a phase whose calls do not follow the rollout's steps (a
    /// minibatch, a train step that the prefill has none of): the bottleneck table
    /// labels its row with it, so that its calls are not read as per env step.
    pub per: Option<&'static str>,
}

impl PhaseInfo {
    pub const fn new(phase: Phase, kind: PhaseKind, color: &'static str, about: &'static str) -> Self {
        Self { phase, kind, color, about, per: None }
    }

    /// Labels its calls: one per `what`.
    pub const fn per(self, what: &'static str) -> Self {
        Self { per: Some(what), ..self }
    }
}

/// The loop's and PPO's phases (a workload's own are in its module).
pub const CORE_PHASES: &[PhaseInfo] = &[
    PhaseInfo::new(Phase::ENV_STEP, PhaseKind::Data, "#f0a030", "the envs' steps"),
    PhaseInfo::new(Phase::ENV_WAIT, PhaseKind::Data, "#ff6b6b", "waiting on env workers"),
    PhaseInfo::new(Phase::OBS_TRANSFER, PhaseKind::Data, "#e879a0", "observations to the device"),
    PhaseInfo::new(
        Phase::OBS_CONVERT,
        PhaseKind::Data,
        "#f4a6c8",
        "images converted to float and scaled on the device (the CNN's input), each step's and each minibatch's",
    ),
    PhaseInfo::new(Phase::ACTION_READBACK, PhaseKind::Data, "#c792ea", "actions back to the host"),
    PhaseInfo::new(Phase::ROLLOUT_STORE, PhaseKind::Data, "#d8b36a", "writing steps into the rollout buffer"),
    PhaseInfo::new(
        Phase::NORMALIZE,
        PhaseKind::Data,
        "#a3be8c",
        "observations and rewards scaled by their running statistics (--obs-norm, --reward-norm)",
    ),
    PhaseInfo::new(Phase::GAE, PhaseKind::Data, "#b0885a", "bootstrap values and advantages").per("update"),
    PhaseInfo::new(Phase::POLICY_FORWARD, PhaseKind::Forward, "#4cc38a", "the rollout's policy forward"),
    PhaseInfo::new(Phase::UPDATE_FORWARD, PhaseKind::Forward, "#2e9e6e", "the update's forward pass").per("minibatch"),
    PhaseInfo::new(
        Phase::UPDATE_CORE,
        PhaseKind::Forward,
        "#56b38f",
        "the recurrent core in the update's forward (--rnn): a call per stretch between episode starts, or per step with --rnn-update stepped",
    )
    .per("core call"),
    PhaseInfo::new(Phase::BACKWARD, PhaseKind::Backward, "#4a90e2", "the update's backward pass").per("minibatch"),
    PhaseInfo::new(Phase::OPTIMIZER, PhaseKind::Backward, "#7aa7e8", "gradient clip and Adam").per("minibatch"),
    PhaseInfo::new(
        Phase::UPDATE_GRAPH,
        PhaseKind::Backward,
        "#3b6fb6",
        "the whole update replayed as one CUDA graph (every minibatch's forward, backward, clip and Adam)",
    )
    .per("update"),
    PhaseInfo::new(Phase::TELEMETRY, PhaseKind::Bookkeeping, "#9aa0a6", "gradient statistics").per("update"),
    PhaseInfo::new(Phase::PUBLISH, PhaseKind::Bookkeeping, "#6b7785", "metrics to observers").per("update"),
    PhaseInfo::new(
        Phase::OTHER,
        PhaseKind::Bookkeeping,
        "#3a4656",
        "outside every phase (setup, shuffles, bookkeeping)",
    ),
];

/// One phase's share of a window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhaseTime {
    pub phase: Phase,
    pub wall_s: f64,
    pub calls: u64,
    /// Device time from CUDA events, where measured.
    pub device_s: Option<f64>,
}

/// A window of a run (an update, or the whole run).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    pub wall_s: f64,
    /// Every phase, `other` included, in the registry's order (`crate::workloads::PHASES`).
    pub phases: Vec<PhaseTime>,
    pub counters: Counters,
    /// Seconds the profiler itself cost (clock reads), estimated from a calibration.
    pub overhead_s: f64,
    /// The GPU's memory, where the run is on one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_memory: Option<GpuMemory>,
    /// What a probe measured of a user's own script (its env steps' kind, reads and
    /// copies per step, call sites), for a run of one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<Box<ScriptProfile>>,
    /// The update's products' kind where the device has no instructions for it and
    /// emulates it (`bf16` on a CPU without AVX512-BF16: about 10× fp32's time); None where
    /// they are native.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emulated: Option<String>,
    /// Whether the run's policy has no fused rollout forward (the CNN, a Dict's combined
    /// policy, a recurrent one): its forward runs libtorch's ops whatever `--inference`
    /// says, so no rule advises `--inference fused` for it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub eager_only: bool,
}

/// GPU memory as the driver reports it (the whole device: libtorch's cache, the CUDA
/// context, other processes), sampled once per window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuMemory {
    /// In use at the last sample.
    pub used_bytes: u64,
    /// The most seen in use at any sample so far.
    pub peak_bytes: u64,
    pub total_bytes: u64,
}

impl Profile {
    /// Adds a later window to these totals (phases matched by name, counters summed).
    pub fn accumulate(&mut self, window: &Profile) {
        self.wall_s += window.wall_s;
        self.overhead_s += window.overhead_s;
        self.counters.add(&window.counters);
        if let Some(w) = &window.script {
            self.script.get_or_insert_with(Box::default).accumulate(w);
        }
        if window.emulated.is_some() {
            self.emulated.clone_from(&window.emulated);
        }
        self.eager_only |= window.eager_only;
        if let Some(w) = window.gpu_memory {
            let peak = self.gpu_memory.map_or(0, |m| m.peak_bytes).max(w.peak_bytes);
            self.gpu_memory = Some(GpuMemory { peak_bytes: peak, ..w });
        }
        for w in &window.phases {
            match self.phases.iter_mut().find(|t| t.phase == w.phase) {
                Some(t) => {
                    t.wall_s += w.wall_s;
                    t.calls += w.calls;
                    t.device_s = match (t.device_s, w.device_s) {
                        (None, None) => None,
                        (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
                    };
                }
                None => self.phases.push(w.clone()),
            }
        }
    }

    pub fn phase(&self, p: Phase) -> f64 {
        self.phases.iter().find(|t| t.phase == p).map_or(0.0, |t| t.wall_s)
    }

    pub fn calls(&self, p: Phase) -> u64 {
        self.phases.iter().find(|t| t.phase == p).map_or(0, |t| t.calls)
    }

    /// Share of wall time, 0..1.
    pub fn share(&self, p: Phase) -> f64 {
        if self.wall_s > 0.0 {
            self.phase(p) / self.wall_s
        } else {
            0.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_phase_reads_back_as_itself_and_an_unknown_one_is_kept() {
        for p in CORE_PHASES.iter().map(|i| i.phase) {
            let json = serde_json::to_string(&p).unwrap();
            assert_eq!(json, format!("\"{}\"", p.name()));
            assert_eq!(serde_json::from_str::<Phase>(&json).unwrap(), p);
        }
        let unknown: Phase = serde_json::from_str("\"a_phase_of_another_build\"").unwrap();
        assert_eq!(unknown.name(), "a_phase_of_another_build");
        assert_eq!(Phase::named("a_phase_of_another_build"), unknown);
    }
}
