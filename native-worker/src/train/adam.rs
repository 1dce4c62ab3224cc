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
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
}

impl FlatAdam {
    /// CleanRL uses eps = 1e-5.
    pub fn new(params: &Tensor, eps: f64) -> Self {
        Self { exp_avg: params.zeros_like(), exp_avg_sq: params.zeros_like(), step: 0, beta1: 0.9, beta2: 0.999, eps }
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
}
