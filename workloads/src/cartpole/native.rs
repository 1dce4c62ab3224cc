//! `cartpole`: Gymnasium's CartPole-v1 to the letter (the envs are `hotlab_env::cartpole`),
//! trained by PPO with the MLP actor-critic ([`hotlab_train::models::mlp`]). Its envs also step
//! on the device ([`device`](crate::cartpole::device): tensor ops, a fused CUDA kernel, or a captured CUDA graph of
//! the whole rollout).

pub mod device;
pub mod gpu;
pub mod update_check;

use anyhow::Result;
use hotlab_core::choices::Rnn;
use hotlab_env::cartpole::{CartPoleBatch, CartPoleF32};
use hotlab_env::{Actions, BatchEnv, FieldData, Observations, ScalarEnv};
use hotlab_protocol::Frame;
use hotlab_spec::{RunSpec, SpecError};
use hotlab_specs::cartpole::CartpoleFrame;
use hotlab_specs::CartpoleSpec;
use hotlab_specs::{EnvName, WorkloadSpec};
use hotlab_train::checkpoint::Stored;
use hotlab_train::error::RunError;
use hotlab_train::exec::{worker_flags, EnvMaker};
use hotlab_train::gpu_check::Target;
use hotlab_train::models;
use hotlab_train::models::mlp::learner::{ppo_learner, DeviceRollout};
use hotlab_train::workload::{Learner, Setup, TrainedPolicy, Workload};
use std::sync::Arc;

/// CartPole envs shown per frame.
pub const FRAME_ENVS: usize = 4;

/// The CartPole workload (it has no settings of its own).
pub struct CartPole;

impl EnvMaker for CartPole {
    fn name(&self) -> &'static str {
        "cartpole"
    }

    fn vector_env(&self, count: usize, seed: u64, first: u64) -> Box<dyn BatchEnv> {
        Box::new(CartPoleBatch::new(count, seed, first))
    }

    fn scalar_env(&self, seed: u64, index: u64) -> Box<dyn ScalarEnv> {
        Box::new(CartPoleF32::new(seed, index))
    }

    fn worker_flags(&self) -> (Vec<String>, Option<String>) {
        (worker_flags(WorkloadSpec::default_for(EnvName::Cartpole)), None)
    }
}

/// A frame of the first few envs' states `[x, ẋ, θ, θ̇]` and their actions.
pub fn frame(step: u64, state: &[f32], actions: &[i64]) -> Frame {
    let n = (state.len() / 4).min(FRAME_ENVS);
    let states = state[..n * 4].chunks_exact(4).map(|s| [s[0], s[1], s[2], s[3]]).collect();
    Frame::new(EnvName::Cartpole, step, &CartpoleFrame { states, actions: actions[..n].to_vec() })
}

/// The registry's entry: this workload for a run (a bad setting is refused, named).
impl crate::Native for CartpoleSpec {
    fn load(_settings: &Self, _spec: &RunSpec) -> Result<Arc<dyn Workload>, SpecError> {
        Ok(Arc::new(CartPole))
    }

    fn kernels() -> Vec<hotlab_train::cuda::nvrtc::Source> {
        vec![device::kernels::source()]
    }

    fn gpu_checks(target: &Target) -> Vec<serde_json::Value> {
        gpu::checks(target)
    }

    fn gpu_benches(target: &Target, max_log2_envs: u32) -> Vec<(&'static str, serde_json::Value)> {
        gpu::bench(target, max_log2_envs)
    }
}

impl Workload for CartPole {
    fn frame(&self, step: u64, obs: &Observations, actions: Actions<'_>) -> Option<Frame> {
        let [FieldData::F32(state)] = obs.fields.as_slice() else { return None };
        Some(frame(step, state, actions.index))
    }

    fn learner(self: Arc<Self>, setup: &mut Setup<'_>) -> Result<Box<dyn Learner>, RunError> {
        let env_spec = self.vector_env(1, setup.spec.seed, 0).spec().clone();
        if setup.spec.ppo.rnn != Rnn::None {
            // A recurrent policy's own learner (host envs; the spec refuses the device backend).
            return models::ppo_learner(self, setup, &env_spec);
        }
        let device: DeviceRollout = Box::new(|setup, arch, heads| {
            // The widest layer the rollout kernel evaluates, a warp per env.
            let width = arch.hidden.iter().copied().chain([arch.obs_dim, arch.logits]).max().unwrap_or(4);
            let gpu = setup.open_gpu(width, &[device::kernels::source()]);
            let (spec, device) = (setup.spec, setup.device);
            Ok(Box::new(device::DeviceCollector::new(spec, device, gpu.as_ref(), arch, heads, &mut setup.notes)?))
        });
        ppo_learner(self, setup, &env_spec, Some(device))
    }

    fn load_policy(self: Arc<Self>, stored: Stored) -> Result<Box<dyn TrainedPolicy>> {
        models::load_trained(stored, self)
    }
}
