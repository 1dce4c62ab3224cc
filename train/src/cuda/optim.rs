//! `clip_adam` (`optim.cu`): the gradient clip and Adam over a flat parameter vector in one
//! launch, on libtorch's current stream, so that it is ordered with the libtorch ops around
//! it and a graph captured on that stream records it. With the squared norm before it and
//! the step count's increment, a clipped Adam step is 3 launches where libtorch's ops are
//! about 25 ([`FlatAdam::step_fused`](crate::adam::FlatAdam::step_fused)).

use super::gpu::Gpu;
use super::launch::{on_current_stream, ptr, require};
use anyhow::{anyhow, Result};
use cudarc::driver::CudaFunction;
use std::ffi::c_void;
use std::sync::Arc;
use tch::{Kind, Tensor};

/// The kernel, loaded from a GPU's compiled module.
pub struct ClipAdam {
    f: CudaFunction,
    /// Keeps the module (and its context) loaded.
    gpu: Arc<Gpu>,
}

/// What one fused step reads besides the tensors: the clip and Adam's constants.
#[derive(Clone, Copy, Debug)]
pub struct ClipAdamConsts {
    pub max_norm: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
}

/// The tensors one fused step reads and writes, each f32, contiguous, on the GPU:
/// `grad` is clipped by the norm whose square is `sum_squares` (`[1]`), then Adam's step
/// `step` (`[1]`, already advanced) at rate `lr` (`[1]`) updates `params`, `exp_avg` and
/// `exp_avg_sq` in place.
#[derive(Clone, Copy)]
pub struct ClipAdamTensors<'a> {
    pub params: &'a Tensor,
    pub grad: &'a Tensor,
    pub exp_avg: &'a Tensor,
    pub exp_avg_sq: &'a Tensor,
    pub sum_squares: &'a Tensor,
    pub step: &'a Tensor,
    pub lr: &'a Tensor,
}

impl ClipAdam {
    pub fn new(gpu: Arc<Gpu>) -> Result<Self> {
        let f = gpu.function("clip_adam").map_err(|e| anyhow!(e))?;
        Ok(Self { f, gpu })
    }

    /// One launch on `t`: its gradient clipped to `k.max_norm`, then Adam's step.
    pub fn launch(&self, t: ClipAdamTensors<'_>, k: ClipAdamConsts) -> Result<()> {
        let ClipAdamTensors { params, grad, exp_avg, exp_avg_sq, sum_squares, step, lr } = t;
        let (device, n) = (params.device(), params.numel() as i64);
        for (name, t, len) in [
            ("params", params, n),
            ("grad", grad, n),
            ("exp_avg", exp_avg, n),
            ("exp_avg_sq", exp_avg_sq, n),
            ("sum_squares", sum_squares, 1),
            ("step", step, 1),
            ("lr", lr, 1),
        ] {
            require("clip_adam", name, t, Kind::Float, len, device)?;
        }
        let mut n =
            i32::try_from(n).map_err(|_| anyhow!("clip_adam: {n} parameters is more than one launch covers"))?;
        let mut pointers = [params, grad, exp_avg, exp_avg_sq, sum_squares, step, lr].map(ptr);
        let mut floats =
            [k.max_norm as f32, k.beta1 as f32, k.beta2 as f32, k.eps as f32, k.beta1.ln() as f32, k.beta2.ln() as f32];
        // The kernel's parameters in its signature's order: n, 7 pointers, 6 floats.
        let mut args: Vec<*mut c_void> = Vec::with_capacity(14);
        args.push((&mut n as *mut i32).cast());
        args.extend(pointers.iter_mut().map(|p| (p as *mut u64).cast::<c_void>()));
        args.extend(floats.iter_mut().map(|f| (f as *mut f32).cast::<c_void>()));
        // SAFETY: the arguments match `clip_adam`'s signature (checked above for the tensors,
        // which stay alive through the call).
        unsafe { on_current_stream(&self.gpu, &self.f, "clip_adam", device, n, &mut args) }
    }
}
