
// The PPO loss's gradient with respect to the network's outputs, for one minibatch, in one
// launch: what `output_grads` (models/mlp/grad.rs) computes in about 40 libtorch kernels
// (per head a log-softmax, its exponent, the chosen entry and the entropy; the ratio, both
// clips, their masks and the value loss's; the statistics). A thread per row; the
// statistics are summed per block and added once per block into `stats` (zeroed before,
// or null when not asked for). The formulas and their order are `output_grads`' own, so
// the two agree to rounding:
//   d(log-prob) = −A·r·scale/B where the unclipped surrogate is the larger, else 0;
//   d(logits) = p·((log p + H_head)·c − d) + onehot(a)·d, c = scale·ent_coef/B;
//   d(value) = (v − R)·scale·vf_coef/B where the unclipped value error is the larger or the
//   clamp is inactive, else 0.
#define PPO_MAX_HEADS 16

struct PpoHeads {
    int n;
    int size[PPO_MAX_HEADS];
};

// Head h's max and log-sum-exp over row `z` from column `start`.
__device__ float ppo_head_lse(const float* z, int start, int n) {
    float m = z[start];
    for (int j = 1; j < n; j++) m = fmaxf(m, z[start + j]);
    float s = 0.0f;
    for (int j = 0; j < n; j++) s += expf(z[start + j] - m);
    return m + logf(s);
}

// Σ p·log p over head h's columns (−H), given its log-sum-exp.
__device__ float ppo_head_neg_entropy(const float* z, int start, int n, float lse) {
    float ne = 0.0f;
    for (int j = 0; j < n; j++) {
        float lp = z[start + j] - lse;
        ne += expf(lp) * lp;
    }
    return ne;
}

extern "C" __global__ void ppo_loss_grad(
    int rows, int width, PpoHeads heads,
    const float* logits, const float* value, const long long* actions,
    const float* old_log_prob, const float* old_value, const float* adv, const float* returns,
    float* d_logits, float* d_value, float* stats,
    float clip, float vf_coef, float ent_coef, float scale) {
    __shared__ float partial[5][256];
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    float b = (float)rows;
    float mine[5] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    if (r < rows) {
        const float* z = logits + (long long)r * width;
        const long long* a = actions + (long long)r * heads.n;
        float new_lp = 0.0f, neg_ent = 0.0f;
        int start = 0;
        for (int h = 0; h < heads.n; h++) {
            int n = heads.size[h];
            float lse = ppo_head_lse(z, start, n);
            new_lp += z[start + (int)a[h]] - lse;
            neg_ent += ppo_head_neg_entropy(z, start, n, lse);
            start += n;
        }
        float log_ratio = new_lp - old_log_prob[r];
        float ratio = expf(log_ratio);
        float clipped = fminf(fmaxf(ratio, 1.0f - clip), 1.0f + clip);
        float A = adv[r];
        float d_lp = (A * (ratio - clipped) <= 0.0f) ? (A * ratio) * (-scale / b) : 0.0f;
        float c_ent = scale * ent_coef / b;
        float* d = d_logits + (long long)r * width;
        start = 0;
        for (int h = 0; h < heads.n; h++) {
            int n = heads.size[h];
            float lse = ppo_head_lse(z, start, n);
            float ne = ppo_head_neg_entropy(z, start, n, lse);
            for (int j = 0; j < n; j++) {
                float lp = z[start + j] - lse;
                float g = expf(lp) * ((lp - ne) * c_ent - d_lp);
                d[start + j] = (j == (int)a[h]) ? g + d_lp : g;
            }
            start += n;
        }

        float v = value[r], ret = returns[r], old_v = old_value[r];
        float err = v - ret;
        float moved = v - old_v;
        float err_clipped = fminf(fmaxf(moved, -clip), clip) + (old_v - ret);
        bool unclipped_v = fabsf(err) >= fabsf(err_clipped) || fabsf(moved) <= clip;
        d_value[r] = unclipped_v ? err * (scale * vf_coef / b) : 0.0f;

        mine[0] = -fminf(A * ratio, A * clipped);
        mine[1] = 0.5f * fmaxf(err * err, err_clipped * err_clipped);
        mine[2] = -neg_ent;
        mine[3] = (ratio - 1.0f) - log_ratio;
        mine[4] = fabsf(ratio - 1.0f) > clip ? 1.0f : 0.0f;
    }
    if (stats == 0) return;
    // Every thread of the block takes part in the sum, rows past the end with zeros.
    for (int k = 0; k < 5; k++) partial[k][threadIdx.x] = mine[k];
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
        if (threadIdx.x < half)
            for (int k = 0; k < 5; k++) partial[k][threadIdx.x] += partial[k][threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        for (int k = 0; k < 5; k++) atomicAdd(stats + k, partial[k][0] / b);
}
