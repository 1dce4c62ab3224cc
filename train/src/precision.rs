//! The update's precision (catalogue row 6): which kind the matmuls run in, and for
//! fp16 the dynamic loss scaler. Master weights, the loss and Adam stay fp32.

use hotlab_core::run_knobs;
use hotlab_spec::{SpecError, FP16_NEEDS_CUDA};
use tch::{Device, Kind, Tensor};

/// PyTorch's `GradScaler` defaults.
pub const INIT_SCALE: f64 = 65536.0;
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

/// Dynamic loss scaling kept on the device, with no host read per step (the dreamer's): the
/// check and the unscale are one fused op per gradient (PyTorch's
/// `_amp_foreach_non_finite_check_and_unscale_`), a skipped step is an optimizer step
/// masked to nothing ([`crate::adam::FlatAdam::step_masked`]), and the scale moves by
/// `_amp_update_scale_` (the same rule as [`LossScaler`]). The scale and the steps skipped
/// are read only when reported.
pub struct DeviceScaler {
    /// `[1]` f32 each: the scale, 1 where the last check found an inf or NaN, steps skipped.
    scale: Tensor,
    found_inf: Tensor,
    skipped: Tensor,
    /// `[1]` i32: good steps in a row.
    growth: Tensor,
    growth_interval: i64,
}

impl DeviceScaler {
    pub fn new(scale: f64, growth_interval: u32, device: Device) -> Self {
        let f = |v: f64| Tensor::from_slice(&[v as f32]).to_device(device);
        Self {
            scale: f(scale),
            found_inf: f(0.0),
            skipped: f(0.0),
            growth: Tensor::zeros([1], (Kind::Int, device)),
            growth_interval: i64::from(growth_interval.max(1)),
        }
    }

    /// PyTorch's growth interval, from `scale`.
    pub fn starting_at(scale: f64, device: Device) -> Self {
        Self::new(scale, GROWTH_INTERVAL, device)
    }

    /// `loss` times the scale.
    pub fn scale(&self, loss: &Tensor) -> Tensor {
        loss * &self.scale
    }

    /// Unscales `grads` in place and moves the scale; the `[1]` f32 weight of this step:
    /// 1 to take it, 0 where a gradient held an inf or NaN (then the scale halves).
    pub fn unscale(&mut self, grads: &mut [&mut Tensor]) -> Tensor {
        tch::no_grad(|| {
            let _ = self.found_inf.zero_();
            let inverse = self.scale.reciprocal();
            for g in grads.iter_mut() {
                g.internal_amp_non_finite_check_and_unscale(&mut self.found_inf, &inverse);
            }
            let _ = self.skipped.g_add_(&self.found_inf);
            let keep = 1.0 - &self.found_inf;
            let _ =
                self.scale.internal_amp_update_scale_(&self.growth, &self.found_inf, 2.0, 0.5, self.growth_interval);
            keep
        })
    }

    /// The steps skipped so far, on the device (`[1]` f32), for a caller that reads it
    /// with other values.
    pub fn skipped(&self) -> &Tensor {
        &self.skipped
    }

    /// The scale and the steps skipped so far: one host read.
    pub fn read(&self) -> (f64, u64) {
        let both = Tensor::cat(&[&self.scale, &self.skipped], 0).to_device(Device::Cpu);
        let v = Vec::<f32>::try_from(both).unwrap_or_default();
        (f64::from(v.first().copied().unwrap_or(0.0)), v.get(1).copied().unwrap_or(0.0) as u64)
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

    /// Its label where `device` has no instructions for it and emulates it (bf16 on a CPU
    /// without AVX512-BF16, on a GPU before Ampere): None where it is native, or fp32.
    pub fn emulated_on(&self, device: Device) -> Option<&'static str> {
        (self.kind == Kind::BFloat16 && !has_bf16(device)).then_some("bf16")
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
pub fn resolve(wanted: hotlab_core::choices::Precision, device: Device) -> Result<Precision, SpecError> {
    let kind = match wanted {
        hotlab_core::choices::Precision::Fp32 => Kind::Float,
        hotlab_core::choices::Precision::Bf16 => Kind::BFloat16,
        hotlab_core::choices::Precision::Auto if has_bf16(device) => Kind::BFloat16,
        // Older GPUs (Volta, Turing) have fp16 tensor cores: fp16 with the loss scaler.
        hotlab_core::choices::Precision::Auto if device.is_cuda() => Kind::Half,
        hotlab_core::choices::Precision::Auto => Kind::Float,
        hotlab_core::choices::Precision::Fp16 if device.is_cuda() => Kind::Half,
        hotlab_core::choices::Precision::Fp16 => return Err(SpecError::of(&run_knobs::PRECISION, FP16_NEEDS_CUDA)),
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

    /// The device scaler follows the same rule with no read per step: an inf skips (weight
    /// 0) and halves the scale, good steps unscale and, after the interval, double it.
    #[test]
    fn the_device_scaler_follows_the_same_rule_without_reading() {
        let mut s = DeviceScaler::new(1024.0, 2, Device::Cpu);
        let loss = s.scale(&Tensor::from_slice(&[3.0f32]));
        assert_eq!(Vec::<f32>::try_from(&loss).unwrap(), vec![3072.0]);
        let (mut a, mut b) = (Tensor::from_slice(&[2048.0f32]), Tensor::from_slice(&[f32::NAN]));
        let keep = s.unscale(&mut [&mut a, &mut b]);
        assert_eq!(Vec::<f32>::try_from(&keep).unwrap(), vec![0.0], "a NaN anywhere skips the step");
        assert_eq!(s.read(), (512.0, 1));
        for expect in [512.0, 1024.0] {
            let keep = s.unscale(&mut [&mut Tensor::from_slice(&[1.0f32, 2.0])]);
            assert_eq!(Vec::<f32>::try_from(&keep).unwrap(), vec![1.0]);
            assert_eq!(s.read(), (expect, 1), "grows after 2 good steps in a row");
        }
        let mut g = Tensor::from_slice(&[1024.0f32]);
        let _ = s.unscale(&mut [&mut g]);
        assert_eq!(Vec::<f32>::try_from(&g).unwrap(), vec![1.0], "unscaled by the scale in force");
    }

    #[test]
    fn fp16_needs_cuda_and_auto_falls_back() {
        let e = resolve(hotlab_core::choices::Precision::Fp16, Device::Cpu).err().unwrap();
        assert_eq!(e.flag(), "--precision");
        assert!(e.message.contains("allowed on the CPU: fp32, bf16, auto"), "{e}");
        assert_eq!(resolve(hotlab_core::choices::Precision::Bf16, Device::Cpu).unwrap().label(), "bf16");
        let auto = resolve(hotlab_core::choices::Precision::Auto, Device::Cpu).unwrap();
        assert!(auto.scaler.is_none());
        assert_eq!(auto.kind == Kind::BFloat16, has_bf16(Device::Cpu));
    }
}
