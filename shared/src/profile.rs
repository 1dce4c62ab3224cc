//! Where a run's time went: named phases, each with wall time and calls (and device time
//! on a GPU), per window (one update) and in total.

use crate::counters::Counters;
use serde::{Deserialize, Serialize};

/// The phases of a training step. `other` is wall time no phase claimed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Stepping the envs (their own work).
    EnvStep,
    /// Waiting on env workers (IPC, barriers).
    EnvWait,
    /// An env's own parts ([`Phase::ENV_PARTS`]; the morpho env's host network): the
    /// host's forward passes and losses,
    HostForward,
    /// its backward passes,
    HostBackward,
    /// its optimizer steps,
    HostOptimizer,
    /// its validation after each epoch,
    Validation,
    /// validation with live seeds switched off, for each seed's credit,
    Counterfactual,
    /// the per-env, per-slot bookkeeping of a decision: lifecycle transitions, grafting
    /// and removing modules, gradient norms (seed 003's "CPU trench"),
    Lifecycle,
    /// and the reward.
    Reward,
    /// Observations (and rollouts) to the device.
    ObsTransfer,
    /// The rollout's policy forward and sampling.
    PolicyForward,
    /// Sampled actions back to the host.
    ActionReadback,
    /// Writing steps into the rollout buffer.
    RolloutStore,
    /// Bootstrap values and advantages.
    Gae,
    /// A world model's batch: sampling the replay buffer and bringing it to the model.
    Replay,
    /// The update's forward pass and losses.
    UpdateForward,
    /// Embedding lookups (the proof policy's index embeddings), rollout and update.
    EmbeddingLookup,
    /// A world model's encoder over a replayed batch's frames,
    Encoder,
    /// its recurrent state-space model stepping through the sequences,
    Rssm,
    /// its decoder, reward and continue heads and losses,
    Decoder,
    /// and the actor and critic's imagined trajectories, returns and losses.
    Imagine,
    /// The update's backward pass.
    Backward,
    /// A world model's backward pass,
    WorldBackward,
    /// and its actor's and critic's.
    ActorCriticBackward,
    /// Gradient clip and Adam.
    Optimizer,
    /// Gradient statistics.
    Telemetry,
    /// Handing metrics to observers.
    Publish,
    /// Wall time outside every other phase.
    Other,
}

impl Phase {
    pub const ALL: [Phase; 28] = [
        Phase::EnvStep,
        Phase::EnvWait,
        Phase::HostForward,
        Phase::HostBackward,
        Phase::HostOptimizer,
        Phase::Validation,
        Phase::Counterfactual,
        Phase::Lifecycle,
        Phase::Reward,
        Phase::ObsTransfer,
        Phase::PolicyForward,
        Phase::ActionReadback,
        Phase::RolloutStore,
        Phase::Gae,
        Phase::Replay,
        Phase::UpdateForward,
        Phase::EmbeddingLookup,
        Phase::Encoder,
        Phase::Rssm,
        Phase::Decoder,
        Phase::Imagine,
        Phase::Backward,
        Phase::WorldBackward,
        Phase::ActorCriticBackward,
        Phase::Optimizer,
        Phase::Telemetry,
        Phase::Publish,
        Phase::Other,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Phase::EnvStep => "env_step",
            Phase::EnvWait => "env_wait",
            Phase::HostForward => "host_forward",
            Phase::HostBackward => "host_backward",
            Phase::HostOptimizer => "host_optimizer",
            Phase::Validation => "validation",
            Phase::Counterfactual => "counterfactual",
            Phase::Lifecycle => "lifecycle",
            Phase::Reward => "reward",
            Phase::ObsTransfer => "obs_transfer",
            Phase::PolicyForward => "policy_forward",
            Phase::ActionReadback => "action_readback",
            Phase::RolloutStore => "rollout_store",
            Phase::Gae => "gae",
            Phase::Replay => "replay",
            Phase::UpdateForward => "update_forward",
            Phase::EmbeddingLookup => "embedding_lookup",
            Phase::Encoder => "encoder",
            Phase::Rssm => "rssm",
            Phase::Decoder => "decoder",
            Phase::Imagine => "imagine",
            Phase::Backward => "backward",
            Phase::WorldBackward => "world_backward",
            Phase::ActorCriticBackward => "actor_critic_backward",
            Phase::Optimizer => "optimizer",
            Phase::Telemetry => "telemetry",
            Phase::Publish => "publish",
            Phase::Other => "other",
        }
    }

    /// The parts of an env step an env times itself ([`crate::counters::EnvCounters::parts`]
    /// in this order): carved out of the trainer's `env_step` (and `env_wait`) span.
    pub const ENV_PARTS: [Phase; crate::counters::ENV_PARTS] = [
        Phase::HostForward,
        Phase::HostBackward,
        Phase::HostOptimizer,
        Phase::Validation,
        Phase::Counterfactual,
        Phase::Lifecycle,
        Phase::Reward,
    ];

    /// Position in [`Phase::ALL`] (declaration order; the profiler indexes by it per span).
    pub fn index(self) -> usize {
        self as usize
    }
}

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
    /// Every phase, `other` included, in [`Phase::ALL`] order.
    pub phases: Vec<PhaseTime>,
    pub counters: Counters,
    /// Seconds the profiler itself cost (clock reads), estimated from a calibration.
    pub overhead_s: f64,
    /// The GPU's memory, where the run is on one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_memory: Option<GpuMemory>,
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
    fn index_is_the_position_in_all() {
        for (i, p) in Phase::ALL.iter().enumerate() {
            assert_eq!(p.index(), i, "{p:?}");
        }
    }
}
