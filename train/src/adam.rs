//! Adam (PyTorch's formulation, no weight decay) over one flat parameter tensor.
//!
//! Keeping every parameter in one tensor makes the optimizer step a handful of ops
//! instead of a handful per parameter: at CleanRL's batch sizes libtorch's per-op
//! dispatch, not arithmetic, is what an update costs.

use crate::kernels::{self, host, host_mut, AdamStep};
use tch::Tensor;

pub struct FlatAdam {
    exp_avg: Tensor,
    exp_avg_sq: Tensor,
    step: i32,
    /// [`Self::step_masked`]'s count of steps taken, on the device (`[1]` f32).
    taken: Option<Tensor>,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
}

impl FlatAdam {
    /// CleanRL uses eps = 1e-5.
    pub fn new(params: &Tensor, eps: f64) -> Self {
        let (exp_avg, exp_avg_sq) = (params.zeros_like(), params.zeros_like());
        Self { exp_avg, exp_avg_sq, step: 0, taken: None, beta1: 0.9, beta2: 0.999, eps }
    }

    /// [`Self::step`] weighted by `keep` (`[1]` f32 on the device, 1 or 0), with no host
    /// read: at 0 the parameters, the moments and the step count stay as they were, whatever
    /// the gradient holds (an fp16 step whose gradients overflowed). Only libtorch ops.
    pub fn step_masked(&mut self, params: &mut Tensor, grad: &Tensor, lr: f64, keep: &Tensor) {
        tch::no_grad(|| {
            let taken = self.taken.get_or_insert_with(|| keep.zeros_like());
            let _ = taken.g_add_(keep);
            // 1 − β^t with t on the device (at least 1: a skipped first step divides by nothing).
            let t = taken.clamp_min(1.0);
            let bias = |beta: f64| -> Tensor { 1.0 - (&t * beta.ln()).exp() };
            let (bias1, bias2) = (bias(self.beta1), bias(self.beta2));
            let g = grad.nan_to_num(0.0, 0.0, 0.0) * keep;
            let m = self.exp_avg.lerp(&g, 1.0 - self.beta1);
            let v = &self.exp_avg_sq * self.beta2 + g.square() * (1.0 - self.beta2);
            let denom = v.sqrt() / bias2.sqrt() + self.eps;
            let update = m.g_mul_scalar(-lr) / bias1 / denom;
            let _ = self.exp_avg.lerp_tensor_(&m, keep);
            let _ = self.exp_avg_sq.lerp_tensor_(&v, keep);
            let _ = params.addcmul_(&update, keep);
        });
    }

    /// [`Self::step`] with nothing on the host (`--update graph`): the step count on the
    /// device (shared with [`Self::step_masked`]) and the learning rate a `[1]` f32 tensor
    /// there, so that a captured step replays as the next step. Only libtorch ops.
    pub fn step_device(&mut self, params: &mut Tensor, grad: &Tensor, lr: &Tensor) {
        tch::no_grad(|| {
            let taken = self.taken.get_or_insert_with(|| lr.zeros_like());
            let _ = taken.g_add_scalar_(1.0);
            let bias = |beta: f64| -> Tensor { 1.0 - (&*taken * beta.ln()).exp() };
            let (bias1, bias2) = (bias(self.beta1), bias(self.beta2));
            let _ = self.exp_avg.lerp_(grad, 1.0 - self.beta1);
            let _ = self.exp_avg_sq.g_mul_scalar_(self.beta2).addcmul_(grad, &grad.g_mul_scalar(1.0 - self.beta2));
            let denom = self.exp_avg_sq.sqrt() / bias2.sqrt() + self.eps;
            let _ = params.addcdiv_(&(&self.exp_avg * (lr.neg() / bias1)), &denom);
        });
    }

    /// [`clip_grad_norm`](crate::ppo::update::clip_grad_norm) to `max_norm` then
    /// [`Self::step_device`], in 3 launches on CUDA: the gradient's squared norm, the step
    /// count's increment, and [`ClipAdam`](crate::cuda::optim::ClipAdam)'s one kernel for the
    /// rest (about 25 libtorch kernels otherwise). The same result to rounding; capturable.
    pub fn step_fused(
        &mut self,
        params: &mut Tensor,
        grad: &mut Tensor,
        lr: &Tensor,
        max_norm: f64,
        kernel: &crate::cuda::optim::ClipAdam,
    ) -> anyhow::Result<()> {
        tch::no_grad(|| {
            let taken = self.taken.get_or_insert_with(|| lr.zeros_like());
            let _ = taken.g_add_scalar_(1.0);
            let sum_squares = grad.dot(grad).view([1]);
            let k =
                crate::cuda::optim::ClipAdamConsts { max_norm, beta1: self.beta1, beta2: self.beta2, eps: self.eps };
            let t = crate::cuda::optim::ClipAdamTensors {
                params,
                grad,
                exp_avg: &self.exp_avg,
                exp_avg_sq: &self.exp_avg_sq,
                sum_squares: &sum_squares,
                step: taken,
                lr,
            };
            kernel.launch(t, k)
        })
    }

    /// One step: `params -= lr * m̂ / (sqrt(v̂) + eps)`; one host pass on the CPU.
    pub fn step(&mut self, params: &mut Tensor, grad: &Tensor, lr: f64) {
        self.step += 1;
        let bias1 = 1.0 - self.beta1.powi(self.step);
        let bias2 = 1.0 - self.beta2.powi(self.step);
        if [&*params, grad, &self.exp_avg, &self.exp_avg_sq].iter().all(|t| kernels::is_host_f32(t)) {
            let k = AdamStep {
                lr: lr as f32,
                beta1: self.beta1 as f32,
                beta2: self.beta2 as f32,
                eps: self.eps as f32,
                bias1: bias1 as f32,
                bias2: bias2 as f32,
            };
            // SAFETY: four distinct tensors, no libtorch op runs on them meanwhile.
            unsafe {
                kernels::adam(host_mut(params), host(grad), host_mut(&self.exp_avg), host_mut(&self.exp_avg_sq), k)
            };
            return;
        }
        tch::no_grad(|| {
            let _ = self.exp_avg.lerp_(grad, 1.0 - self.beta1);
            let _ = self.exp_avg_sq.g_mul_scalar_(self.beta2).addcmul_(grad, &grad.g_mul_scalar(1.0 - self.beta2));
            let denom = (self.exp_avg_sq.sqrt() / bias2.sqrt()) + self.eps;
            let _ = params.addcdiv_(&(&self.exp_avg * (-lr / bias1)), &denom);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::{nn, nn::OptimizerConfig, Device, Kind};

    /// The host step and libtorch's own `torch.optim.Adam` (eps 1e-5) agree over several steps.
    #[test]
    fn host_adam_matches_torch_adam() {
        let _seeded = crate::testing::torch_seed(9);
        let p0 = Tensor::randn([300], (Kind::Float, Device::Cpu));
        let grads: Vec<Tensor> = (0..6).map(|_| Tensor::randn([300], (Kind::Float, Device::Cpu))).collect();
        let vs = nn::VarStore::new(Device::Cpu);
        let w = vs.root().var_copy("w", &p0);
        let mut torch_opt = nn::Adam { eps: 1e-5, ..Default::default() }.build(&vs, 1e-2).unwrap();
        let mut ours = p0.copy();
        let mut adam = FlatAdam::new(&ours, 1e-5);
        for g in &grads {
            torch_opt.zero_grad();
            (&w * g).sum(Kind::Float).backward();
            torch_opt.step();
            adam.step(&mut ours, g, 1e-2);
        }
        let err = f64::try_from((&ours - &w.detach()).abs().max()).unwrap();
        assert!(err < 1e-6, "max difference {err}");
    }

    /// The device step (step count and learning rate in tensors) is Adam's step.
    #[test]
    fn the_device_step_is_adam() {
        let _seeded = crate::testing::torch_seed(5);
        let p0 = Tensor::randn([64], (Kind::Float, Device::Cpu));
        let (mut plain, mut device) = (p0.copy(), p0.copy());
        let (mut a, mut b) = (FlatAdam::new(&plain, 1e-5), FlatAdam::new(&device, 1e-5));
        for (i, lr) in [1e-2, 5e-3, 2e-3, 1e-3, 5e-4].into_iter().enumerate() {
            let g = Tensor::randn([64], (Kind::Float, Device::Cpu)) * (i as f64 + 1.0);
            a.step(&mut plain, &g, lr);
            b.step_device(&mut device, &g, &Tensor::from_slice(&[lr as f32]));
        }
        let err = f64::try_from((&plain - &device).abs().max()).unwrap();
        assert!(err < 1e-6, "max difference {err}");
    }

    /// The masked step with weight 1 is Adam; with weight 0 it changes nothing, even on a
    /// gradient of infs and NaNs and before any step was taken, and the next kept step is
    /// Adam's next step.
    #[test]
    fn a_masked_step_is_adam_or_nothing() {
        let _seeded = crate::testing::torch_seed(3);
        let p0 = Tensor::randn([50], (Kind::Float, Device::Cpu));
        let grads: Vec<Tensor> = (0..4).map(|_| Tensor::randn([50], (Kind::Float, Device::Cpu))).collect();
        let (mut plain, mut masked) = (p0.copy(), p0.copy());
        let (mut a, mut b) = (FlatAdam::new(&plain, 1e-8), FlatAdam::new(&masked, 1e-8));
        let (one, zero) = (Tensor::from_slice(&[1.0f32]), Tensor::from_slice(&[0.0f32]));
        let bad = Tensor::from_slice(&[f32::NAN, f32::INFINITY]).repeat([25]);
        for g in &grads {
            let before = masked.copy();
            b.step_masked(&mut masked, &bad, 1e-2, &zero);
            assert!(before.equal(&masked), "a skipped step moved a parameter");
            a.step(&mut plain, g, 1e-2);
            b.step_masked(&mut masked, g, 1e-2, &one);
        }
        let err = f64::try_from((&plain - &masked).abs().max()).unwrap();
        assert!(err < 1e-6, "max difference {err}");
    }
}
