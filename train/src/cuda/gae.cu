
// Generalized advantage estimation over a rollout `[steps, n]`, one env per thread,
// walking back in time: `hotlab_train::gae::gae` operation for operation (f32, no fused
// multiply-add), so it matches the host's to the bit. A terminated step bootstraps from
// nothing, a truncated one from its final observation's value, any other from the next
// state's; the recursion never crosses an episode's end.
extern "C" __global__ void gae(
    int n, int steps, float gamma, float lambda,
    const float* rewards, const float* values, const float* terminated, const float* truncated,
    const float* final_values, const float* next_values, float* advantages, float* returns) {
    int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= n) return;
    float next_adv = 0.0f;
    for (int t = steps - 1; t >= 0; --t) {
        int i = t * n + e;
        bool term = terminated[i] != 0.0f, trunc = truncated[i] != 0.0f;
        float next_value = term ? 0.0f : trunc ? final_values[i] : t + 1 == steps ? next_values[e] : values[i + n];
        float delta = rewards[i] + gamma * next_value - values[i];
        float carry = (term | trunc) ? 0.0f : gamma * lambda * next_adv;
        float a = delta + carry;
        advantages[i] = a;
        returns[i] = a + values[i];
        next_adv = a;
    }
}
