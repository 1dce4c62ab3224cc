//! Launching our kernels on libtorch's tensors: each tensor's kind, layout, size and device
//! checked first (a wrong one names the kernel and the argument), then one launch on
//! libtorch's current stream, so the kernel is ordered with the ops around it and a graph
//! captured on that stream records it.

use super::gpu::{Gpu, BLOCK};
use super::shim::Stream;
use anyhow::{anyhow, bail, Result};
use cudarc::driver::CudaFunction;
use std::ffi::c_void;
use tch::{Device, Kind, Tensor};

/// `t` must hold `len` contiguous elements of `kind` on `device`.
pub fn require(kernel: &str, name: &str, t: &Tensor, kind: Kind, len: i64, device: Device) -> Result<()> {
    if t.kind() != kind || !t.is_contiguous() || t.device() != device || t.numel() != len as usize {
        bail!(
            "{kernel}: {name} must be {len} contiguous {kind:?} on {device:?} (got {:?} {:?} on {:?})",
            t.size(),
            t.kind(),
            t.device()
        );
    }
    Ok(())
}

/// The device pointer of `t`, as a kernel's pointer argument takes it.
pub fn ptr(t: &Tensor) -> u64 {
    t.data_ptr() as u64
}

/// Launches `f` with a thread per each of `threads` items (blocks of [`BLOCK`]) on
/// libtorch's current stream of `device`.
///
/// # Safety
/// `args` must match the kernel's signature, and every pointer in them must stay valid
/// until the stream has run the kernel (libtorch's tensors, kept alive by the caller,
/// whose memory the caching allocator orders on that same stream).
pub unsafe fn on_current_stream(
    gpu: &Gpu,
    f: &CudaFunction,
    name: &str,
    device: Device,
    threads: i32,
    args: &mut [*mut c_void],
) -> Result<()> {
    let Device::Cuda(index) = device else { bail!("{name} runs on a CUDA device, not {device:?}") };
    let stream = Stream::current(index)?.raw()?;
    gpu.ctx.bind_to_thread().map_err(|e| anyhow!("binding the CUDA context: {e:?}"))?;
    let grid = (threads.max(1) as u32).div_ceil(BLOCK);
    // SAFETY: the caller's contract; the grid and block are within every GPU's limits.
    unsafe {
        cudarc::driver::result::launch_kernel(f.cu_function(), (grid, 1, 1), (BLOCK, 1, 1), 0, stream.cast(), args)
    }
    .map_err(|e| anyhow!("launching {name}: {e:?}"))
}
