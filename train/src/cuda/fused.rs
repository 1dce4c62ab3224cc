//! `--update graph_fused`'s kernels: the PPO loss's gradient ([`PpoLossGrad`]) and the
//! clipped Adam step ([`ClipAdam`]), loaded from one compiled module of this GPU's.

use super::gpu::Gpu;
use super::loss::PpoLossGrad;
use super::nvrtc::DEFAULT_MAX_WIDTH;
use super::optim::ClipAdam;
use anyhow::{anyhow, bail, Result};
use std::sync::Arc;
use tch::Device;

pub struct UpdateKernels {
    pub loss: PpoLossGrad,
    pub adam: ClipAdam,
}

impl UpdateKernels {
    /// Compiles and loads the kernels for `device`'s GPU; the error says why they cannot run
    /// there (no CUDA device, no driver, NVRTC missing).
    pub fn open(device: Device) -> Result<Self> {
        let Device::Cuda(index) = device else {
            bail!("--update graph_fused runs hotlab's kernels on a CUDA GPU, and this run's device is {device:?}")
        };
        let gpu = Gpu::open(index, DEFAULT_MAX_WIDTH, &[]).map_err(|e| anyhow!("--update graph_fused: {e}"))?;
        let gpu = Arc::new(gpu);
        Ok(Self { loss: PpoLossGrad::new(gpu.clone())?, adam: ClipAdam::new(gpu)? })
    }
}
