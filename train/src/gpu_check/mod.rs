//! The trainer's GPU checks (`hotlab gpu-check`, run on a machine with a GPU): its NVRTC
//! kernels compiled, its precision kinds, its fused optimizer and fused loss against
//! libtorch's ops; and what every check reports, each a JSON object with a line on stderr
//! as it starts. A workload with GPU paths of its own keeps its checks in its folder
//! (`hotlab_workloads::<name>::gpu`), behind the registry's `Native::gpu_checks`. Each
//! check states its tolerance; speed is measured, never asserted.

mod amp;
mod loss;
mod optim;

use crate::cuda::gpu::{Gpu, Support};
use crate::cuda::nvrtc;
use cudarc::driver::sys::CUevent_flags;
use serde_json::{json, Value};
use std::sync::Arc;
use tch::{Device, Kind, Tensor};

/// The GPU the checks run on: a CUDA device opened with hotlab's kernels, or a ROCm device
/// reached through libtorch's ops only (NVRTC's paths do not run there).
pub enum Target<'a> {
    Cuda(&'a Arc<Gpu>),
    Rocm,
}

impl Target<'_> {
    /// The CUDA device, where the checks run on one.
    pub fn cuda(&self) -> Option<&Arc<Gpu>> {
        match self {
            Target::Cuda(gpu) => Some(gpu),
            Target::Rocm => None,
        }
    }
}

/// Every NVRTC kernel, the trainer's and `workloads`', compiled for each architecture the
/// checks cover (no GPU needed): one row per architecture, and whether all compiled.
pub fn kernels(workloads: &[nvrtc::Source]) -> (Value, bool) {
    let mut compiled = Vec::new();
    let mut ok = true;
    for arch in nvrtc::CHECK_ARCHS {
        progress(&format!("compiling the kernels for {arch}"));
        match nvrtc::compile(arch, nvrtc::DEFAULT_MAX_WIDTH, workloads) {
            Ok(c) => compiled.push(json!({"arch": arch, "ok": true, "ptx_bytes": c.ptx_bytes, "seconds": c.seconds})),
            Err(e) => {
                ok = false;
                compiled.push(json!({"arch": arch, "ok": false, "error": e}));
            }
        }
    }
    (json!({ "version": nvrtc::version(), "kernels": nvrtc::kernels(workloads), "compiled": compiled }), ok)
}

/// The trainer's own checks on `target`: the precision kinds everywhere, and on CUDA the
/// fused optimizer and the fused loss against libtorch's ops.
pub fn checks(target: &Target) -> Vec<Value> {
    let mut out = vec![amp::amp_check()];
    if let Some(gpu) = target.cuda() {
        out.push(optim::clip_adam_check(gpu));
        out.push(loss::ppo_loss_grad_check(gpu));
    }
    out
}

/// Opens the machine's GPU for the checks with the trainer's kernels and `workloads`', or
/// says why there is none: a check row.
pub fn open(support: &Support, workloads: &[nvrtc::Source]) -> Result<Option<Arc<Gpu>>, Value> {
    match support {
        Support::Cuda => Gpu::open(0, nvrtc::DEFAULT_MAX_WIDTH, workloads)
            .map(|g| Some(Arc::new(g)))
            .map_err(|e| check("open_gpu", false, "-", json!(e))),
        Support::Rocm => Ok(None),
        Support::None => Err(check(
            "gpu_present",
            false,
            "-",
            json!("no GPU here: `hotlab gpu-check --compile-only` checks that the kernels compile"),
        )),
    }
}

/// A check's result: its name, whether it held, the tolerance it was held to, what it saw.
pub fn check(name: &str, ok: bool, tolerance: &str, detail: Value) -> Value {
    json!({ "name": name, "ok": ok, "tolerance": tolerance, "detail": detail })
}

/// A line for the person waiting on the checks.
pub fn progress(msg: &str) {
    eprintln!("gpu-check: {msg}");
}

/// A tensor's elements as f32 on the host.
pub fn host_f32(t: &Tensor) -> Vec<f32> {
    Vec::<f32>::try_from(t.to_kind(Kind::Float).flatten(0, -1).to_device(Device::Cpu)).unwrap_or_default()
}

/// The largest elementwise difference; infinite when the lengths differ.
pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs() as f64)
        .fold(if a.len() == b.len() { 0.0 } else { f64::INFINITY }, f64::max)
}

/// The largest difference between two tensors, relative to the first one's largest element.
pub fn relative(a: &Tensor, b: &Tensor) -> f64 {
    let scale = f64::try_from(a.abs().max()).unwrap_or(1.0).max(1e-12);
    f64::try_from((a - b).abs().max()).unwrap_or(f64::INFINITY) / scale
}

/// Seconds of device time of `f`, timed with CUDA events on libtorch's stream.
pub fn timed(gpu: &Gpu, f: impl FnOnce() -> Result<(), String>) -> Result<f64, String> {
    let e = |err: cudarc::driver::DriverError| format!("{err:?}");
    let start = gpu.ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).map_err(e)?;
    let end = gpu.ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).map_err(e)?;
    start.record(&gpu.torch_stream).map_err(e)?;
    f()?;
    end.record(&gpu.torch_stream).map_err(e)?;
    end.synchronize().map_err(e)?;
    Ok(start.elapsed_ms(&end).map_err(e)? as f64 / 1e3)
}
