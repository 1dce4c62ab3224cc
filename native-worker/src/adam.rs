//! Adam (PyTorch's formulation, no weight decay) over one flat parameter tensor.
//!
//! Keeping every parameter in one tensor makes the optimizer step a handful of ops
//! instead of a handful per parameter: at CleanRL's batch sizes libtorch's per-op
//! dispatch, not arithmetic, is what an update costs.

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

    /// One step: `params -= lr * m̂ / (sqrt(v̂) + eps)`.
    pub fn step(&mut self, params: &mut Tensor, grad: &Tensor, lr: f64) {
        tch::no_grad(|| {
            self.step += 1;
            let bias1 = 1.0 - self.beta1.powi(self.step);
            let bias2 = 1.0 - self.beta2.powi(self.step);
            let _ = self.exp_avg.lerp_(grad, 1.0 - self.beta1);
            let _ = self.exp_avg_sq.g_mul_scalar_(self.beta2).addcmul_(grad, &grad.g_mul_scalar(1.0 - self.beta2));
            let denom = (self.exp_avg_sq.sqrt() / bias2.sqrt()) + self.eps;
            let _ = params.addcdiv_(&(&self.exp_avg * (-lr / bias1)), &denom);
        });
    }
}
