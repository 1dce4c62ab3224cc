//! The update's precision (catalogue row 6): which kind the matmuls run in, and for
//! fp16 the dynamic loss scaler. Master weights, the loss and Adam stay fp32.

use hotlab_shared::spec::{self, SpecError, FP16_NEEDS_CUDA};
use tch::{Device, Kind, Tensor};

/// PyTorch's `GradScaler` defaults.
const INIT_SCALE: f64 = 65536.0;
const GROWTH_INTERVAL: u32 = 2000;

/// Dynamic loss scaling: gradients are computed for `loss × scale`; a step whose
/// gradients hold an inf or NaN is skipped and the scale halves; after
/// `growth_interval` good steps in a row it doubles.
#[derive(Clone, Debug)]
pub struct LossScaler {
    pub scale: f64,
    growth_interval: u32,
    good_steps: u32,
    /// Steps skipped so far.
    pub skipped: u64,
}

impl LossScaler {
    pub fn new(scale: f64, growth_interval: u32) -> Self {
        Self { scale, growth_interval: growth_interval.max(1), good_steps: 0, skipped: 0 }
    }

    /// Unscales `grad` in place and says whether the step may be taken (one host read:
    /// `GradScaler.step` makes the same one).
    pub fn unscale(&mut self, grad: &mut Tensor) -> bool {
        let finite = tch::no_grad(|| bool::try_from(grad.isfinite().all()).unwrap_or(false));
        if !finite {
            self.skipped += 1;
            self.scale *= 0.5;
            self.good_steps = 0;
            return false;
        }
        tch::no_grad(|| {
            let _ = grad.g_mul_scalar_(1.0 / self.scale);
        });
        self.good_steps += 1;
        if self.good_steps >= self.growth_interval {
            self.scale *= 2.0;
            self.good_steps = 0;
        }
        true
    }
}

/// A resolved precision.
#[derive(Clone)]
pub struct Precision {
    /// The kind the update's matmuls run in.
    pub kind: Kind,
    pub scaler: Option<LossScaler>,
}

impl Precision {
    /// Everything in fp32, no scaler.
    pub fn fp32() -> Self {
        Self { kind: Kind::Float, scaler: None }
    }

    /// `fp32`, `fp16` or `bf16`.
    pub fn label(&self) -> &'static str {
        match self.kind {
            Kind::Half => "fp16",
            Kind::BFloat16 => "bf16",
            _ => "fp32",
        }
    }
}

/// Whether the device computes bf16 natively: a CUDA GPU of compute capability 8.0 or
/// more (Ampere on), a ROCm GPU (HIP: the capability is not CUDA's), or a CPU with AVX512-BF16.
fn has_bf16(device: Device) -> bool {
    match device {
        Device::Cuda(i) => crate::cuda::gpu::capability(i).is_none_or(|(major, _)| major >= 8),
        #[cfg(target_arch = "x86_64")]
        Device::Cpu => std::arch::is_x86_feature_detected!("avx512bf16"),
        _ => false,
    }
}

/// The precision a spec asks for on `device`; fp16 without CUDA is refused.
pub fn resolve(wanted: spec::Precision, device: Device) -> Result<Precision, SpecError> {
    let kind = match wanted {
        spec::Precision::Fp32 => Kind::Float,
        spec::Precision::Bf16 => Kind::BFloat16,
        spec::Precision::Auto if has_bf16(device) => Kind::BFloat16,
        // Older GPUs (Volta, Turing) have fp16 tensor cores: fp16 with the loss scaler.
        spec::Precision::Auto if device.is_cuda() => Kind::Half,
        spec::Precision::Auto => Kind::Float,
        spec::Precision::Fp16 if device.is_cuda() => Kind::Half,
        spec::Precision::Fp16 => return Err(SpecError::new("precision", FP16_NEEDS_CUDA)),
    };
    let scaler = (kind == Kind::Half).then(|| LossScaler::new(INIT_SCALE, GROWTH_INTERVAL));
    Ok(Precision { kind, scaler })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_inf_gradient_skips_the_step_halves_the_scale_then_it_regrows() {
        let mut s = LossScaler::new(1024.0, 3);
        let mut g = Tensor::from_slice(&[2048.0f32, 1024.0]);
        assert!(s.unscale(&mut g));
        assert_eq!(Vec::<f32>::try_from(&g).unwrap(), vec![2.0, 1.0], "unscaled");
        let mut bad = Tensor::from_slice(&[1.0f32, f32::INFINITY]);
        assert!(!s.unscale(&mut bad), "an inf gradient skips the step");
        assert_eq!((s.scale, s.skipped), (512.0, 1));
        assert!(!s.unscale(&mut Tensor::from_slice(&[f32::NAN])), "so does a NaN");
        assert_eq!((s.scale, s.skipped), (256.0, 2));
        for _ in 0..2 {
            assert!(s.unscale(&mut Tensor::from_slice(&[1.0f32])));
            assert_eq!(s.scale, 256.0, "no growth before the interval");
        }
        assert!(s.unscale(&mut Tensor::from_slice(&[1.0f32])));
        assert_eq!(s.scale, 512.0, "grows after 3 good steps in a row");
    }

    #[test]
    fn fp16_needs_cuda_and_auto_falls_back() {
        let e = resolve(spec::Precision::Fp16, Device::Cpu).err().unwrap();
        assert_eq!(e.flag(), "--precision");
        assert!(e.message.contains("allowed on the CPU: fp32, bf16, auto"), "{e}");
        assert_eq!(resolve(spec::Precision::Bf16, Device::Cpu).unwrap().label(), "bf16");
        let auto = resolve(spec::Precision::Auto, Device::Cpu).unwrap();
        assert!(auto.scaler.is_none());
        assert_eq!(auto.kind == Kind::BFloat16, has_bf16(Device::Cpu));
    }
}
