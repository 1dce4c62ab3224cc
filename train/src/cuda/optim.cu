
// The gradient clip and Adam over one flat parameter vector in one launch, a thread per
// element: what `clip_grad_norm` then `FlatAdam::step_device` do in about 25 libtorch
// kernels. The squared norm of the whole gradient comes in (one reduction before it), and
// so do the step count (already advanced for this step) and the learning rate, all in
// device memory: a captured graph replays it as the next step. Its arithmetic follows the
// libtorch ops' (m lerps towards g, v = β₂v + (1 − β₂)g², bias 1 − exp(t ln β)), so the two
// agree to rounding. The clipped gradient is written back, as the in-place clip leaves it.
extern "C" __global__ void clip_adam(
    int n, float* params, float* grad, float* exp_avg, float* exp_avg_sq,
    const float* sum_squares, const float* step, const float* lr,
    float max_norm, float beta1, float beta2, float eps, float log_beta1, float log_beta2) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float coef = fminf(max_norm / (sqrtf(sum_squares[0]) + 1e-6f), 1.0f);
    float g = grad[i] * coef;
    grad[i] = g;
    float t = step[0];
    float bias1 = 1.0f - expf(t * log_beta1);
    float bias2 = 1.0f - expf(t * log_beta2);
    float m = exp_avg[i] + (1.0f - beta1) * (g - exp_avg[i]);
    float v = exp_avg_sq[i] * beta2 + g * (g * (1.0f - beta2));
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    float denom = sqrtf(v) / sqrtf(bias2) + eps;
    params[i] += m * (-lr[0] / bias1) / denom;
}
