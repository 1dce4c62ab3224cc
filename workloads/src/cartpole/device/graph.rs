//! `--inference graph`: the rollout's T steps captured once as a CUDA graph of T launches
//! of `rollout_step` (actor and critic forward, sampling, env step, storage: all of a
//! step in one kernel, a warp per env), then replayed with one launch per rollout.
//!
//! Why our own NVRTC kernel on a cudarc stream rather than libtorch ops captured through a
//! C++ shim (`at::cuda::CUDAGraph`): the graph holds no libtorch allocation, so there is
//! no private memory pool to manage and nothing of libtorch's caching allocator or RNG
//! state to register with the capture; the sampling stream is ours (per-env PCG, like the
//! envs), so a replay is reproducible and checkable against a direct launch; and no C++
//! has to be compiled against torch's headers, which would tie the build to one ABI and
//! to CUDA (the ROCm build falls back to eager instead).
//!
//! The graph reads the parameters through `flat`'s pointer: Adam updates `flat` in place,
//! so one capture serves the whole run (it is recaptured if the pointer ever changes).

use crate::cartpole::device::env::DeviceCartPole;
use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::{CudaFunction, CudaGraph, CudaStream};
use hotlab_env::rng::action_rng;
use hotlab_train::cuda::gpu::{ptr, Arg, Gpu};
use hotlab_train::models::mlp::policy::Architecture;
use std::sync::Arc;
use tch::{Kind, Tensor};

/// The `[T, N, …]` arrays a rollout step writes (the `device` rollout's buffers).
pub struct Buffers<'a> {
    pub obs: &'a Tensor,
    pub actions: &'a Tensor,
    pub log_probs: &'a Tensor,
    pub values: &'a Tensor,
    pub rewards: &'a Tensor,
    pub terminated: &'a Tensor,
    pub truncated: &'a Tensor,
    pub final_obs: &'a Tensor,
    pub done: &'a Tensor,
    pub episode_return: &'a Tensor,
}

pub struct GraphRollout {
    gpu: Arc<Gpu>,
    f: CudaFunction,
    /// Captures cannot run on the legacy default stream: a stream of our own, joined
    /// to libtorch's before and after each replay (two event waits on the device, no
    /// host sync).
    stream: Arc<CudaStream>,
    /// Per-env action streams (u32 in i64), seeded like the playground's.
    arng: Tensor,
    /// Actor widths then critic widths, i32 on the device.
    widths: Tensor,
    depth: i32,
    critic_offset: i32,
    graph: Option<(CudaGraph, u64)>,
    /// Times the graph was captured (1 in a healthy run).
    pub captures: u64,
}

impl GraphRollout {
    pub fn new(gpu: Arc<Gpu>, env: &DeviceCartPole, arch: &Architecture, seed: u64) -> Result<Self, String> {
        if arch.obs_dim != 4 {
            return Err(format!("the rollout kernel is CartPole's (4 observations), not {}", arch.obs_dim));
        }
        let f = gpu.function("rollout_step")?;
        let stream = gpu.ctx.new_stream().map_err(|e| format!("creating a CUDA stream: {e:?}"))?;
        let dev = env.device();
        let arng: Vec<i64> = (0..env.envs as u64).map(|i| action_rng(seed, i).state() as i64).collect();
        let mut widths = vec![arch.obs_dim as i32];
        widths.extend(arch.hidden.iter().map(|&h| h as i32));
        widths.push(arch.logits as i32);
        let critic: Vec<i32> = widths[..widths.len() - 1].iter().copied().chain([1]).collect();
        let actor_params =
            arch.layout().iter().filter(|s| s.name.starts_with("actor.")).map(|s| s.numel()).sum::<i64>();
        widths.extend(critic);
        Ok(Self {
            gpu,
            f,
            stream,
            arng: Tensor::from_slice(&arng).to_device(dev),
            widths: Tensor::from_slice(&widths).to_device(dev),
            depth: arch.depth() as i32,
            critic_offset: actor_params as i32,
            graph: None,
            captures: 0,
        })
    }

    fn args(&self, t: usize, envs: usize, flat: &Tensor, env: &DeviceCartPole, b: &Buffers) -> Vec<Arg> {
        let mut a = vec![Arg::I32(envs as i32), Arg::I32(t as i32), ptr(flat), ptr(&self.widths)];
        a.extend([Arg::I32(self.depth), Arg::I32(self.critic_offset)]);
        a.extend(env.state_tensors().map(ptr));
        a.push(ptr(&self.arng));
        a.extend(
            [b.obs, b.actions, b.log_probs, b.values, b.rewards, b.terminated, b.truncated, b.final_obs, b.done]
                .map(ptr),
        );
        a.push(ptr(b.episode_return));
        a
    }

    /// Runs `steps` rollout steps: as a replay of the captured graph, or (`direct`) as
    /// `steps` plain launches, which the GPU check compares the replay against.
    pub fn run(
        &mut self,
        steps: usize,
        flat: &Tensor,
        env: &DeviceCartPole,
        b: &Buffers,
        direct: bool,
    ) -> Result<(), String> {
        debug_assert!(flat.kind() == Kind::Float && flat.is_contiguous());
        let e = |what: &'static str| move |err: cudarc::driver::DriverError| format!("{what}: {err:?}");
        let torch = self.gpu.torch_stream.clone();
        self.stream.join(&torch).map_err(e("waiting for libtorch's stream"))?;
        if direct {
            for t in 0..steps {
                self.gpu.launch_warps(&self.f, &self.stream, env.envs, &self.args(t, env.envs, flat, env, b))?;
            }
        } else {
            let key = flat.data_ptr() as u64;
            if self.graph.as_ref().is_none_or(|(_, k)| *k != key) {
                self.graph = None;
                self.stream
                    .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
                    .map_err(e("beginning the capture"))?;
                let launched: Result<(), String> = (0..steps).try_for_each(|t| {
                    self.gpu.launch_warps(&self.f, &self.stream, env.envs, &self.args(t, env.envs, flat, env, b))
                });
                let graph = self.stream.end_capture(CUgraphInstantiate_flags(0)).map_err(e("ending the capture"))?;
                launched?;
                let graph = graph.ok_or("the capture recorded nothing")?;
                graph.upload().map_err(e("uploading the graph"))?;
                self.graph = Some((graph, key));
                self.captures += 1;
            }
            let (graph, _) = self.graph.as_ref().expect("captured above");
            graph.launch().map_err(e("replaying the graph"))?;
        }
        torch.join(&self.stream).map_err(e("ordering libtorch after the rollout"))
    }
}
