//! The CUDA side of the worker: which GPU support this process has, and a handle to the
//! compiled kernels in libtorch's primary context, launched on libtorch's stream.
//!
//! libtorch (through tch) never changes its current stream, so its work goes to the
//! legacy default stream of the primary context; cudarc's `default_stream()` is that
//! same stream, so a kernel launched there is ordered with libtorch's ops for free.

use super::nvrtc;
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaStream, LaunchConfig, PushKernelArg};
use std::sync::Arc;

/// Whether torch was built for ROCm (build.rs saw `libtorch_hip.so`).
pub const TORCH_IS_ROCM: bool = option_env!("HOTLAB_TORCH_HIP").is_some();

/// What this process can do with hand-written kernels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Support {
    /// A CUDA GPU with its driver: NVRTC kernels run.
    Cuda,
    /// libtorch sees a GPU through HIP: its ops work, our NVRTC (CUDA) kernels do not.
    Rocm,
    /// No GPU at all.
    None,
}

impl Support {
    pub fn probe() -> Self {
        if !tch::Cuda::is_available() {
            return Support::None;
        }
        // SAFETY: only tries to dlopen libcuda; any driver call without it would panic.
        let driver = unsafe { cudarc::driver::sys::is_culib_present() };
        if TORCH_IS_ROCM || !driver {
            Support::Rocm
        } else {
            Support::Cuda
        }
    }

    /// Why the NVRTC paths cannot run here (None where they can).
    pub fn why_not(&self) -> Option<&'static str> {
        match self {
            Support::Cuda => None,
            Support::Rocm => Some("hand-written CUDA kernels need a CUDA GPU (this torch runs on ROCm/HIP)"),
            Support::None => Some("hand-written CUDA kernels need a CUDA GPU (none is available)"),
        }
    }
}

/// The compute capability of CUDA GPU `ordinal`; None without a CUDA driver (the CPU, ROCm).
pub fn capability(ordinal: usize) -> Option<(i32, i32)> {
    if Support::probe() != Support::Cuda {
        return None;
    }
    CudaContext::new(ordinal).ok()?.compute_capability().ok()
}

/// GPU `ordinal`'s memory in use (by every process: the driver's figure) and its total,
/// in bytes; None without a CUDA driver.
pub fn memory(ordinal: usize) -> Option<(u64, u64)> {
    if Support::probe() != Support::Cuda {
        return None;
    }
    let (free, total) = CudaContext::new(ordinal).ok()?.mem_get_info().ok()?;
    Some(((total - free) as u64, total as u64))
}

/// One launchable kernel argument: a 32-bit int or float, or a device pointer.
#[derive(Clone, Copy, Debug)]
pub enum Arg {
    I32(i32),
    F32(f32),
    Ptr(u64),
}

/// A device pointer to a libtorch tensor's data (it must be contiguous and on the GPU).
pub fn ptr(t: &tch::Tensor) -> Arg {
    debug_assert!(t.is_contiguous() && t.device().is_cuda());
    Arg::Ptr(t.data_ptr() as u64)
}

/// The kernels, compiled for this GPU and loaded into libtorch's (primary) context.
pub struct Gpu {
    pub ctx: Arc<CudaContext>,
    /// libtorch's stream (the legacy default stream).
    pub torch_stream: Arc<CudaStream>,
    module: Arc<CudaModule>,
    pub name: String,
    pub capability: (i32, i32),
    pub arch: &'static str,
    pub compile_seconds: f64,
    /// The widest layer the kernels were compiled for (`MAX_WIDTH`).
    pub max_width: usize,
}

pub const BLOCK: u32 = 256;

/// Static shared memory a block may use without opting in (48 KiB on every CUDA GPU).
const SHARED_BYTES: usize = 48 * 1024;

impl Gpu {
    /// Opens GPU `ordinal` and compiles the trainer's kernels and `workloads`' for it, with
    /// layers up to `max_width`.
    pub fn open(ordinal: usize, max_width: usize, workloads: &[nvrtc::Source]) -> Result<Self, String> {
        if let Some(why) = Support::probe().why_not() {
            return Err(why.into());
        }
        let err = |what: &'static str| move |e: cudarc::driver::DriverError| format!("{what}: {e:?}");
        let ctx = CudaContext::new(ordinal).map_err(err("opening the CUDA device"))?;
        // Our launches take raw libtorch pointers, which cudarc's event tracking does not see.
        // SAFETY: no cudarc allocation is shared between streams without an explicit join.
        unsafe { ctx.disable_event_tracking() };
        let capability = ctx.compute_capability().map_err(err("reading the compute capability"))?;
        let name = ctx.name().unwrap_or_else(|_| "unknown CUDA GPU".into());
        let arch = nvrtc::arch_of(capability.0, capability.1)?;
        let compiled = nvrtc::compile(arch, max_width, workloads)?;
        let module = ctx.load_module(compiled.ptx).map_err(err("loading the PTX"))?;
        let torch_stream = ctx.default_stream();
        let max_width = max_width.max(4);
        if 2 * max_width * 4 > SHARED_BYTES {
            return Err(format!(
                "the rollout kernel holds two layers per env in shared memory: layers up to {} wide (got {max_width})",
                SHARED_BYTES / 8
            ));
        }
        Ok(Self { ctx, torch_stream, module, name, capability, arch, compile_seconds: compiled.seconds, max_width })
    }

    pub fn function(&self, name: &str) -> Result<CudaFunction, String> {
        self.module.load_function(name).map_err(|e| format!("kernel {name}: {e:?}"))
    }

    /// Launches `f` over `n` threads (one per env) on `stream` with `args`.
    pub fn launch(&self, f: &CudaFunction, stream: &CudaStream, n: usize, args: &[Arg]) -> Result<(), String> {
        let cfg = LaunchConfig {
            grid_dim: ((n as u32).div_ceil(BLOCK), 1, 1),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        self.launch_with(f, stream, cfg, args)
    }

    /// Launches `f` with a warp (32 threads) per env over `n` envs, each warp with
    /// 2 × [`Gpu::max_width`] floats of shared memory (`rollout_step`'s two layers).
    pub fn launch_warps(&self, f: &CudaFunction, stream: &CudaStream, n: usize, args: &[Arg]) -> Result<(), String> {
        let per_warp = 2 * self.max_width * 4;
        let warps = (BLOCK as usize / 32).min(SHARED_BYTES / per_warp).max(1);
        let cfg = LaunchConfig {
            grid_dim: (n.div_ceil(warps) as u32, 1, 1),
            block_dim: (32 * warps as u32, 1, 1),
            shared_mem_bytes: (warps * per_warp) as u32,
        };
        self.launch_with(f, stream, cfg, args)
    }

    fn launch_with(
        &self,
        f: &CudaFunction,
        stream: &CudaStream,
        cfg: LaunchConfig,
        args: &[Arg],
    ) -> Result<(), String> {
        let mut b = stream.launch_builder(f);
        for a in args {
            match a {
                Arg::I32(v) => b.arg(v),
                Arg::F32(v) => b.arg(v),
                Arg::Ptr(p) => b.arg(p),
            };
        }
        // SAFETY: each kernel's argument list is checked against its signature by the GPU
        // checks (`hotlab gpu-check`); pointers are live tensors' data.
        unsafe { b.launch(cfg) }.map(|_| ()).map_err(|e| format!("launching a kernel: {e:?}"))
    }
}
