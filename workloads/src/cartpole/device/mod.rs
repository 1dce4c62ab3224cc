//! CartPole's `device` backend: the env state in tensors on the trainer's device
//! ([`env`](mod@env)), the rollout kept there too ([`rollout`]), and on CUDA the whole rollout
//! captured as a CUDA graph of one kernel per step ([`graph`]).

pub mod env;
pub mod graph;
pub mod kernels;
pub mod rollout;

use anyhow::Result;
use env::DeviceCartPole;
use graph::GraphRollout;
use hotlab_core::choices::Inference;
use hotlab_core::profile::Phase;
use hotlab_core::run_knobs;
use hotlab_spec::{RunSpec, SpecError, GRAPH_NEEDS_CUDA};
use hotlab_train::cuda::gpu::{Gpu, Support};
use hotlab_train::error::RunError;
use hotlab_train::models::mlp::policy::Architecture;
use hotlab_train::models::mlp::MlpAgent;
use hotlab_train::ppo::{Collect, CollectCtx};
use hotlab_train::rollout::Batch;
use rollout::DeviceRollout;
use std::sync::Arc;
use tch::Device;

/// The envs stepped by tensor ops (`eager`, or anywhere without CUDA), by one fused
/// kernel per step (`fused` on CUDA), or inside the captured rollout graph (`graph`, CUDA
/// only); the rollout on the device either way.
pub struct DeviceCollector {
    env: DeviceCartPole,
    rollout: DeviceRollout,
}

impl DeviceCollector {
    pub fn new(
        spec: &RunSpec,
        device: Device,
        gpu: Option<&Arc<Gpu>>,
        arch: &Architecture,
        heads: usize,
        notes: &mut Vec<String>,
    ) -> Result<Self, RunError> {
        let mut env = DeviceCartPole::new(spec.envs, spec.seed, device);
        let mut rollout = DeviceRollout::new(&mut env, spec.steps, arch.obs_dim, heads);
        if let Some(gpu) = gpu {
            rollout.use_gae_kernel(Arc::clone(gpu)).map_err(anyhow::Error::msg)?;
        }
        match (spec.exec.inference, gpu) {
            (Inference::Eager, _) => {}
            (Inference::Fused, Some(gpu)) => {
                env.use_kernel(Arc::clone(gpu)).map_err(anyhow::Error::msg)?;
                notes.push("inference fused, backend device: the envs step in one fused CUDA kernel per step; the policy runs as libtorch ops".into());
            }
            (Inference::Fused, None) => notes.push("inference fused, backend device: the policy runs as libtorch ops on the device, and without CUDA the envs step as tensor ops (the fused env kernel needs CUDA)".into()),
            (Inference::Graph, Some(gpu)) => {
                rollout.use_graph(GraphRollout::new(Arc::clone(gpu), &env, arch, spec.seed).map_err(anyhow::Error::msg)?);
                notes.push("inference graph: each rollout is one replay of a captured CUDA graph (forward, sampling, env step and storage in one kernel per step)".into());
            }
            (Inference::Graph, None) if device == Device::Cpu => {
                return Err(SpecError::of(&run_knobs::INFERENCE, GRAPH_NEEDS_CUDA).into());
            }
            (Inference::Graph, None) => notes.push(format!(
                "inference graph fell back to eager: {}",
                Support::probe().why_not().unwrap_or("the CUDA kernels are unavailable")
            )),
        }
        Ok(Self { env, rollout })
    }
}

impl Collect<MlpAgent> for DeviceCollector {
    /// A device rollout is queued on the device as a whole: the stop flag is read before it.
    fn collect(&mut self, agent: &MlpAgent, cx: &mut CollectCtx<'_, '_>) -> Result<Option<Batch>> {
        if cx.it.stopped() {
            return Ok(None);
        }
        let got = self.rollout.collect(&mut self.env, &agent.net, cx);
        let (spec, it, first) = (cx.spec, &mut *cx.it, cx.first_step);
        got.episode_returns.iter().for_each(|&r| it.episodes.push(r));
        if it.frames.due() {
            let s = it.prof.start();
            let (obs, actions) = self.rollout.last_step();
            if let Some(frame) = frame(first + spec.steps as u64 - 1, &obs, &actions) {
                it.frames.send(frame);
            }
            it.counters.host_syncs += 1;
            it.counters.d2h_copies += 2;
            it.prof.stop(Phase::PUBLISH, s);
        }
        Ok(Some(got.batch))
    }
}

/// A frame from device tensors: observations `[envs, 4]` and actions `[envs, 1]` (one
/// small read-back of the first few envs).
fn frame(step: u64, obs: &tch::Tensor, actions: &tch::Tensor) -> Option<hotlab_protocol::Frame> {
    let n = (obs.size()[0] as usize).min(super::FRAME_ENVS) as i64;
    let read = |t: tch::Tensor| t.to_device(Device::Cpu).contiguous().view([-1]);
    let state = Vec::<f32>::try_from(read(obs.narrow(0, 0, n).to_kind(tch::Kind::Float))).ok()?;
    let acts = Vec::<i64>::try_from(read(actions.narrow(0, 0, n).to_kind(tch::Kind::Int64))).ok()?;
    Some(super::frame(step, &state, &acts))
}
