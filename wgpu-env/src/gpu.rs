//! The playground on a GPU through wgpu: WebGPU in the browser, Vulkan natively.
//!
//! Everything stays on the device: per dispatch each invocation steps its env `steps`
//! times, and the host reads back 8 bytes of tallies plus the few states it draws.

use crate::actor::{Policy, NORM_FLOATS};
use crate::{action_rng, shader_source, Setup, Tally, WORKGROUP};
use bytemuck::{Pod, Zeroable};
use hotlab_env::rng::EnvRng;
use wgpu::util::DeviceExt;

/// What went wrong on the GPU side; the message says what to do where it can.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct GpuError(pub String);

/// An adapter and its device.
#[derive(Clone, Debug)]
pub struct Gpu {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    /// The adapter's name, type and backend (`llvmpipe (LLVM 15.0.6, 256 bits) (Cpu, Vulkan)`).
    pub adapter: String,
}

impl Gpu {
    /// The browser's WebGPU on wasm32, Vulkan natively. An error when there is none.
    pub async fn new() -> Result<Self, GpuError> {
        #[cfg(target_arch = "wasm32")]
        let backends = wgpu::Backends::BROWSER_WEBGPU;
        #[cfg(not(target_arch = "wasm32"))]
        let backends = wgpu::Backends::VULKAN;
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
            backends,
            ..wgpu::InstanceDescriptor::new_without_display_handle()
        });
        let adapter = instance
            .request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::HighPerformance,
                ..Default::default()
            })
            .await
            .map_err(|e| GpuError(format!("no GPU adapter ({e})")))?;
        let info = adapter.get_info();
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor { label: Some("hotlab playground"), ..Default::default() })
            .await
            .map_err(|e| GpuError(format!("the adapter gave no device ({e})")))?;
        // Browsers may hide the adapter's name; its type still says CPU (SwiftShader) or GPU.
        let name = if info.name.is_empty() { "an adapter whose name the browser hides" } else { &info.name };
        Ok(Self { device, queue, adapter: format!("{name} ({:?}, {:?})", info.device_type, info.backend) })
    }
}

/// The kernel's uniform (`Params` in cartpole.wgsl).
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    envs: u32,
    steps: u32,
    mode: u32,
    flags: u32,
    depth: u32,
    pad: [u32; 3],
    widths: [u32; 12],
}

const MODE_ACTIONS: u32 = 0;
const MODE_RANDOM: u32 = 1;
const MODE_ACTOR: u32 = 2;
const FLAG_RECORD: u32 = 1;
const FLAG_GREEDY: u32 = 2;
const FLAG_NORM: u32 = 4;

/// One recorded transition per env (tests): what the batch env's `StepBatch` holds.
#[derive(Clone, Debug, PartialEq)]
pub struct Transition {
    pub terminated: Vec<bool>,
    pub truncated: Vec<bool>,
    /// The action each env took.
    pub actions: Vec<u32>,
    /// The state each env reached before any autoreset.
    pub final_state: Vec<[f32; 4]>,
    /// The state after the step (the next episode's first state where one ended).
    pub state: Vec<[f32; 4]>,
}

pub struct GpuCartPole {
    gpu: Gpu,
    pipeline: wgpu::ComputePipeline,
    bind_group: wgpu::BindGroup,
    params: wgpu::Buffer,
    state: wgpu::Buffer,
    meta: wgpu::Buffer,
    actions: wgpu::Buffer,
    out_flags: wgpu::Buffer,
    final_state: wgpu::Buffer,
    stats: wgpu::Buffer,
    envs: usize,
    base: Params,
}

fn storage(gpu: &Gpu, label: &str, bytes: &[u8], extra: wgpu::BufferUsages) -> wgpu::Buffer {
    gpu.device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some(label),
        contents: bytes,
        usage: wgpu::BufferUsages::STORAGE | extra,
    })
}

impl GpuCartPole {
    /// Uploads every env's first state, its streams and the policy; compiles the kernel.
    pub async fn new(gpu: &Gpu, setup: &Setup) -> Result<Self, GpuError> {
        setup.check().map_err(GpuError)?;
        let n = setup.envs;
        let mut states = Vec::with_capacity(n);
        let mut meta = Vec::with_capacity(n);
        let b = hotlab_env::cartpole::RESET_BOUND as f32;
        for i in 0..n as u64 {
            // The batch env's reset: four draws from the env's stream.
            let mut rng = EnvRng::for_env(setup.seed, i);
            states.push([(); 4].map(|_| rng.uniform_f32(-b, b)));
            meta.push([0, rng.state(), action_rng(setup.seed, i).state(), 0]);
        }
        // The weights: the normalizer's floats (zeros without one), then the layers.
        let (mode, flags, depth, widths, weights, max_width) = match &setup.policy {
            Policy::Random => (MODE_RANDOM, 0, 0, [0; 12], vec![0f32; NORM_FLOATS], 4),
            Policy::Actor { actor, greedy } => {
                let mut w = [0u32; 12];
                for (slot, &v) in w.iter_mut().zip(&actor.widths) {
                    *slot = v as u32;
                }
                let flags = if *greedy { FLAG_GREEDY } else { 0 } | if actor.norm.is_some() { FLAG_NORM } else { 0 };
                let max_width = actor.widths.iter().copied().max().unwrap_or(4);
                let mut weights = actor.norm.as_ref().map_or([0f32; NORM_FLOATS], |n| n.packed()).to_vec();
                weights.extend_from_slice(&actor.params);
                (MODE_ACTOR, flags, actor.depth() as u32, w, weights, max_width)
            }
        };
        let base = Params { envs: n as u32, steps: 1, mode, flags, depth, pad: [0; 3], widths };

        let device = &gpu.device;
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("cartpole.wgsl"),
            source: wgpu::ShaderSource::Wgsl(shader_source(max_width).into()),
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("cartpole"),
            layout: None,
            module: &module,
            entry_point: Some("main"),
            compilation_options: Default::default(),
            cache: None,
        });
        use wgpu::BufferUsages as U;
        let params = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("params"),
            contents: bytemuck::bytes_of(&base),
            usage: U::UNIFORM | U::COPY_DST,
        });
        let state = storage(gpu, "state", bytemuck::cast_slice(&states), U::COPY_SRC | U::COPY_DST);
        let meta = storage(gpu, "meta", bytemuck::cast_slice(&meta), U::COPY_SRC | U::COPY_DST);
        let weights = storage(gpu, "weights", bytemuck::cast_slice(&weights), U::empty());
        let actions = storage(gpu, "actions", &vec![0u8; n * 4], U::COPY_DST);
        let out_flags = storage(gpu, "out_flags", &vec![0u8; n * 4], U::COPY_SRC);
        let final_state = storage(gpu, "final_state", &vec![0u8; n * 16], U::COPY_SRC);
        let stats = storage(gpu, "stats", &[0u8; 8], U::COPY_SRC | U::COPY_DST);
        let entries: Vec<wgpu::BindGroupEntry> =
            [&params, &state, &meta, &weights, &actions, &out_flags, &final_state, &stats]
                .iter()
                .enumerate()
                .map(|(i, b)| wgpu::BindGroupEntry { binding: i as u32, resource: b.as_entire_binding() })
                .collect();
        let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("cartpole"),
            layout: &pipeline.get_bind_group_layout(0),
            entries: &entries,
        });
        if let Some(e) = scope.pop().await {
            return Err(GpuError(format!("the kernel did not build: {e}")));
        }
        Ok(Self {
            gpu: gpu.clone(),
            pipeline,
            bind_group,
            params,
            state,
            meta,
            actions,
            out_flags,
            final_state,
            stats,
            envs: n,
            base,
        })
    }

    pub fn envs(&self) -> usize {
        self.envs
    }

    /// The most steps one dispatch may take: the sum of the lengths of the episodes that
    /// end in it must fit the kernel's u32 tally (each env ends ≤ steps + 500 steps' worth).
    pub fn max_steps_per_dispatch(&self) -> u32 {
        let per_env = (u32::MAX as u64 / self.envs as u64).saturating_sub(hotlab_env::cartpole::MAX_STEPS as u64);
        per_env.clamp(1, 4096) as u32
    }

    /// Records one dispatch of `steps` steps (with `flags` added to the policy's), the
    /// tally cleared first.
    fn dispatch(&self, encoder: &mut wgpu::CommandEncoder, steps: u32, flags: u32, mode: Option<u32>) {
        let p = Params { steps, flags: self.base.flags | flags, mode: mode.unwrap_or(self.base.mode), ..self.base };
        self.gpu.queue.write_buffer(&self.params, 0, bytemuck::bytes_of(&p));
        encoder.clear_buffer(&self.stats, 0, None);
        self.pass(encoder);
    }

    /// Records one compute pass with the parameters written last (the tally adds up).
    fn pass(&self, encoder: &mut wgpu::CommandEncoder) {
        let mut pass =
            encoder.begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some("step"), timestamp_writes: None });
        pass.set_pipeline(&self.pipeline);
        pass.set_bind_group(0, &self.bind_group, &[]);
        pass.dispatch_workgroups((self.envs as u32).div_ceil(WORKGROUP), 1, 1);
    }

    fn encoder(&self) -> wgpu::CommandEncoder {
        self.gpu.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("playground") })
    }

    /// Copies `(buffer, bytes)` pairs into one mappable buffer, submits, and reads it.
    async fn submit_and_read(
        &self,
        mut encoder: wgpu::CommandEncoder,
        parts: &[(&wgpu::Buffer, u64)],
    ) -> Result<Vec<Vec<u8>>, GpuError> {
        let total: u64 = parts.iter().map(|p| p.1).sum();
        let readback = self.gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("readback"),
            size: total.max(4),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut at = 0;
        for &(buffer, bytes) in parts {
            if bytes > 0 {
                encoder.copy_buffer_to_buffer(buffer, 0, &readback, at, bytes);
            }
            at += bytes;
        }
        self.gpu.queue.submit([encoder.finish()]);
        let (tx, rx) = futures_channel::oneshot::channel();
        readback.slice(..).map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        // Natively nothing happens until the device is polled; in the browser the
        // callback comes from the event loop.
        #[cfg(not(target_arch = "wasm32"))]
        self.gpu.device.poll(wgpu::PollType::wait_indefinitely()).map_err(|e| GpuError(format!("GPU: {e}")))?;
        rx.await
            .map_err(|_| GpuError("GPU: the read-back was dropped".into()))?
            .map_err(|e| GpuError(format!("GPU: cannot read back ({e})")))?;
        let data = readback.slice(..).get_mapped_range().map_err(|e| GpuError(format!("GPU: {e}")))?.to_vec();
        readback.unmap();
        let mut at = 0;
        Ok(parts
            .iter()
            .map(|&(_, bytes)| {
                let part = data[at as usize..(at + bytes) as usize].to_vec();
                at += bytes;
                part
            })
            .collect())
    }

    /// Steps every env `steps` times (at most [`Self::max_steps_per_dispatch`]), then
    /// reads back the tally and the states of the first `sample` envs.
    pub async fn run(&mut self, steps: u32, sample: usize) -> Result<(Tally, Vec<[f32; 4]>), GpuError> {
        self.run_batched(1, steps, sample).await
    }

    /// `dispatches` dispatches of `steps` steps each in one submission, then one read-back
    /// (the launch overhead without a sync per dispatch). The steps of all of them together
    /// are at most [`Self::max_steps_per_dispatch`] (the tally's range); fewer dispatches
    /// are made when they would be more.
    pub async fn run_batched(
        &mut self,
        dispatches: u32,
        steps: u32,
        sample: usize,
    ) -> Result<(Tally, Vec<[f32; 4]>), GpuError> {
        let steps = steps.clamp(1, self.max_steps_per_dispatch());
        let dispatches = dispatches.clamp(1, (self.max_steps_per_dispatch() / steps).max(1));
        let sample = sample.min(self.envs) as u64;
        let mut encoder = self.encoder();
        self.dispatch(&mut encoder, steps, 0, None);
        for _ in 1..dispatches {
            self.pass(&mut encoder);
        }
        let steps = steps * dispatches;
        let parts = self.submit_and_read(encoder, &[(&self.stats, 8), (&self.state, sample * 16)]).await?;
        let stats: Vec<u32> = bytemuck::pod_collect_to_vec(&parts[0]);
        let tally =
            Tally { steps: self.envs as u64 * steps as u64, episodes: stats[0] as u64, length_sum: stats[1] as u64 };
        Ok((tally, bytemuck::pod_collect_to_vec(&parts[1])))
    }

    /// The states of the first `count` envs, without stepping.
    pub async fn states(&self, count: usize) -> Result<Vec<[f32; 4]>, GpuError> {
        let parts = self.submit_and_read(self.encoder(), &[(&self.state, count.min(self.envs) as u64 * 16)]).await?;
        Ok(bytemuck::pod_collect_to_vec(&parts[0]))
    }

    /// Overwrites every env's state, step counter and reset stream (tests: start the
    /// GPU from the batch env's exact state).
    pub fn load(&self, states: &[[f32; 4]], elapsed: &[u32], rng: &[EnvRng]) {
        assert!(states.len() == self.envs && elapsed.len() == self.envs && rng.len() == self.envs, "one per env");
        let meta: Vec<[u32; 4]> = (0..self.envs).map(|i| [elapsed[i], rng[i].state(), 0, 0]).collect();
        self.gpu.queue.write_buffer(&self.state, 0, bytemuck::cast_slice(states));
        self.gpu.queue.write_buffer(&self.meta, 0, bytemuck::cast_slice(&meta));
    }

    /// One step with the given actions, recording every env's transition (tests).
    pub async fn step_with(&mut self, actions: &[u32]) -> Result<Transition, GpuError> {
        assert_eq!(actions.len(), self.envs, "one action per env");
        self.gpu.queue.write_buffer(&self.actions, 0, bytemuck::cast_slice(actions));
        self.record(Some(MODE_ACTIONS)).await
    }

    /// One step under the setup's policy, recording every env's transition (tests).
    pub async fn step_policy(&mut self) -> Result<Transition, GpuError> {
        self.record(None).await
    }

    async fn record(&mut self, mode: Option<u32>) -> Result<Transition, GpuError> {
        let n = self.envs as u64;
        let mut encoder = self.encoder();
        self.dispatch(&mut encoder, 1, FLAG_RECORD, mode);
        let parts = self
            .submit_and_read(encoder, &[(&self.out_flags, n * 4), (&self.final_state, n * 16), (&self.state, n * 16)])
            .await?;
        let flags: Vec<u32> = bytemuck::pod_collect_to_vec(&parts[0]);
        Ok(Transition {
            terminated: flags.iter().map(|f| f & 1 != 0).collect(),
            truncated: flags.iter().map(|f| f & 2 != 0).collect(),
            actions: flags.iter().map(|f| f >> 2).collect(),
            final_state: bytemuck::pod_collect_to_vec(&parts[1]),
            state: bytemuck::pod_collect_to_vec(&parts[2]),
        })
    }

    /// Every env's `[elapsed, reset stream]` (tests).
    pub async fn read_meta(&self) -> Result<Vec<(u32, u32)>, GpuError> {
        let parts = self.submit_and_read(self.encoder(), &[(&self.meta, self.envs as u64 * 16)]).await?;
        let m: Vec<[u32; 4]> = bytemuck::pod_collect_to_vec(&parts[0]);
        Ok(m.iter().map(|v| (v[0], v[1])).collect())
    }
}
