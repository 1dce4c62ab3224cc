// CartPole-v1 on the GPU: the f32 batch env of `hotlab_shared::cartpole` operation for
// operation (the same sin/cos polynomial, expression order and PCG streams; compiled with
// --fmad=false so no multiply-add is fused), so a transition matches it to rounding.
// The constants (G, TM, ...) come from a prelude that Rust writes from hotlab_env::cartpole's
// (`kernels.rs`), after the trainer's (its integer types and MAX_WIDTH).
//
// Three kernels (GAE on the device is the trainer's, `gae.cu`):
// - cartpole_step: one step + autoreset of the `device` backend's env, reading and
//   writing libtorch tensors in place (one launch replaces ~60 tensor ops);
// - cartpole_multistep: `steps` steps per launch with the state in registers and random
//   actions, for pure stepping benchmarks;
// - rollout_step: the whole rollout step of `--inference graph` (actor and critic forward,
//   sampling, log-prob, env step, rollout storage) for one env per warp.

// PCG-RXS-M-XS 32, as `EnvRng::next_u32`.
__device__ __forceinline__ u32 next_u32(u32* rng) {
    u32 old = *rng;
    *rng = old * 747796405u + 2891336453u;
    u32 word = ((old >> ((old >> 28u) + 4u)) ^ old) * 277803737u;
    return (word >> 22u) ^ word;
}

__device__ __forceinline__ float next_unit(u32* rng) {
    return (float)(next_u32(rng) >> 8u) * (1.0f / 16777216.0f);
}

// `EnvRng::uniform_f32(-b, b)`: low + (high - low) * unit.
__device__ __forceinline__ float reset_draw(u32* rng) {
    return -RESET_B + (RESET_B - (-RESET_B)) * next_unit(rng);
}

// `sin_cos_f32`: Cody-Waite reduction by pi/2 and the Cephes polynomials.
__device__ __forceinline__ void sin_cos(float x, float* s, float* c) {
    const float rounder = 12582912.0f;
    float j = (x * TWO_OVER_PI + rounder) - rounder;
    int q = (int)j;
    float r = ((x - j * 1.5703125f) - j * 4.837513e-4f) - j * 7.54979e-8f;
    float z = r * r;
    float sin_r = ((-1.9515296e-4f * z + 8.332161e-3f) * z - 1.6666655e-1f) * z * r + r;
    float cos_r = ((2.4433157e-5f * z - 1.3887316e-3f) * z + 4.1666646e-2f) * z * z - 0.5f * z + 1.0f;
    bool swap = (q & 1) != 0;
    float s0 = swap ? cos_r : sin_r;
    float c0 = swap ? sin_r : cos_r;
    *s = (q & 2) != 0 ? -s0 : s0;
    *c = ((q + 1) & 2) != 0 ? -c0 : c0;
}

// One Euler step: `dynamics_f32`.
__device__ __forceinline__ float4 dynamics(float4 s, int action) {
    float force = action == 1 ? FORCE : -FORCE;
    float sn, cs;
    sin_cos(s.z, &sn, &cs);
    float temp = (force + PML * (s.w * s.w) * sn) / TM;
    float thetaacc = (G * sn - cs * temp) / (L * (4.0f / 3.0f - MP * (cs * cs) / TM));
    float xacc = temp - PML * thetaacc * cs / TM;
    return make_float4(s.x + T * s.y, s.y + T * xacc, s.z + T * s.w, s.w + T * thetaacc);
}

__device__ __forceinline__ bool is_terminated(float4 s) {
    return (s.x < -X_T) | (s.x > X_T) | (s.z < -THETA_T) | (s.z > THETA_T);
}

// Row k of an [.., 4] array of observations.
__device__ __forceinline__ void write4(float* p, int k, float4 s) {
    p[4 * k + 0] = s.x;
    p[4 * k + 1] = s.y;
    p[4 * k + 2] = s.z;
    p[4 * k + 3] = s.w;
}

__device__ __forceinline__ float4 reset_state(u32* rng) {
    float4 s;
    s.x = reset_draw(rng);
    s.y = reset_draw(rng);
    s.z = reset_draw(rng);
    s.w = reset_draw(rng);
    return s;
}

// One step's outcome before the autoreset: the new state, the episode's length and
// return so far, and whether it ended.
struct Outcome {
    float4 s;
    i64 e;
    double r;
    bool term, trunc, done;
};

__device__ __forceinline__ Outcome advance(float4 s, int action, i64 elapsed, double ret) {
    Outcome o;
    o.s = dynamics(s, action);
    o.e = elapsed + 1;
    o.r = ret + 1.0;
    o.term = is_terminated(o.s);
    o.trunc = o.e >= MAX_STEPS;
    o.done = o.term | o.trunc;
    return o;
}

// Autoreset where the episode ended (d), then the env's state back to its tensors;
// returns the state the next step starts from.
__device__ __forceinline__ float4 store_state(
    int i, float4 s, bool d, i64 e, double r,
    float* x, float* x_dot, float* theta, float* theta_dot, i64* elapsed, double* ret, i64* rng) {
    if (d) {
        u32 g = (u32)rng[i];
        s = reset_state(&g);
        rng[i] = (i64)g;
        e = 0;
        r = 0.0;
    }
    x[i] = s.x;
    x_dot[i] = s.y;
    theta[i] = s.z;
    theta_dot[i] = s.w;
    elapsed[i] = e;
    ret[i] = r;
    return s;
}

// One step of every env with autoreset, on the `device` backend's tensors: state in
// x/x_dot/theta/theta_dot (f32 [n]), elapsed (i64), ret (f64), rng (u32 held in i64).
extern "C" __global__ void cartpole_step(
    int n, const i64* actions,
    float* x, float* x_dot, float* theta, float* theta_dot, i64* elapsed, double* ret, i64* rng,
    float* obs, float* reward, bool* terminated, bool* truncated, bool* done,
    float* final_obs, double* episode_return, i64* episode_length) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    Outcome o = advance(make_float4(x[i], x_dot[i], theta[i], theta_dot[i]), (int)actions[i], elapsed[i], ret[i]);
    write4(final_obs, i, o.s);
    episode_return[i] = o.r;
    episode_length[i] = o.e;
    float4 s = store_state(i, o.s, o.done, o.e, o.r, x, x_dot, theta, theta_dot, elapsed, ret, rng);
    write4(obs, i, s);
    reward[i] = 1.0f;
    terminated[i] = o.term;
    truncated[i] = o.trunc;
    done[i] = o.done;
}

// `steps` steps of every env with uniform random actions from each env's action stream,
// the state in registers. meta = [elapsed, reset stream, action stream] per env.
// stats[0] += episodes ended, stats[1] += their lengths (one atomic pair per thread).
extern "C" __global__ void cartpole_multistep(int n, int steps, float4* state, uint3* meta, u64* stats) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float4 s = state[i];
    uint3 m = meta[i];
    u32 rng = m.y, arng = m.z, e = m.x;
    u32 episodes = 0, lengths = 0;
    for (int k = 0; k < steps; ++k) {
        s = dynamics(s, (int)(next_u32(&arng) >> 31u));
        e += 1;
        if (is_terminated(s) | (e >= MAX_STEPS)) {
            episodes += 1;
            lengths += e;
            e = 0;
            s = reset_state(&rng);
        }
    }
    state[i] = s;
    meta[i] = make_uint3(e, rng, arng);
    if (episodes != 0) {
        atomicAdd(&stats[0], (u64)episodes);
        atomicAdd(&stats[1], (u64)lengths);
    }
}

// One MLP of the flat parameter vector (weights [in, out] then bias [out] per layer, tanh
// between layers) on one input, evaluated by the 32 lanes of a warp: lane j computes
// outputs j, j + 32, ... of each layer, each with the same operations in the same order
// as one thread would (bias first, then the inputs in order), so the result does not
// depend on the split. `h` is the warp's 2 * MAX_WIDTH floats of shared memory, the input
// in h[0..]; returns where the output starts.
__device__ int mlp(const float* p, const int* widths, int depth, float* h, int lane) {
    int src = 0;
    for (int l = 0; l < depth; ++l) {
        int nin = widths[l], nout = widths[l + 1];
        int dst = MAX_WIDTH - src;
        for (int j = lane; j < nout; j += 32) {
            float z = p[nin * nout + j];
            for (int k = 0; k < nin; ++k) z += h[src + k] * p[k * nout + j];
            h[dst + j] = l + 1 < depth ? tanhf(z) : z;
        }
        __syncwarp();
        p += nin * nout + nout;
        src = dst;
    }
    return src;
}

// Step t of a rollout for every env, one warp per env (a thread per env left a GPU
// nearly idle: 4096 envs are 128 warps, each waiting on its own weight loads one by one):
// the actor's logits and the critic's value from the env state, an action sampled from
// the softmax with the env's action stream, its log-prob, the env step with autoreset,
// and every rollout array written at [t, i]. The lanes share the forward; lane 0 samples,
// steps and stores. widths = actor widths (depth + 1 of them) then critic widths; the
// critic's parameters start at critic_offset in `flat`. Launched with 32 threads per env
// and 2 * MAX_WIDTH floats of dynamic shared memory per warp.
extern "C" __global__ void rollout_step(
    int n, int t, const float* flat, const int* widths, int depth, int critic_offset,
    float* x, float* x_dot, float* theta, float* theta_dot, i64* elapsed, double* ret, i64* rng, i64* arng,
    float* obs, i64* actions, float* log_probs, float* values, float* rewards, float* terminated,
    float* truncated, float* final_obs, bool* done, double* episode_return) {
    extern __shared__ float scratch[];
    int lane = threadIdx.x & 31;
    int i = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (i >= n) return;  // the whole warp: i is the same on every lane
    float* h = scratch + (threadIdx.x >> 5) * 2 * MAX_WIDTH;
    float4 s = make_float4(x[i], x_dot[i], theta[i], theta_dot[i]);
    int at = t * n + i;

    if (lane == 0) { h[0] = s.x; h[1] = s.y; h[2] = s.z; h[3] = s.w; }
    __syncwarp();
    int top = mlp(flat + critic_offset, widths + depth + 1, depth, h, lane);
    float value = h[top];
    __syncwarp();  // every lane has read the value before the actor overwrites h

    if (lane == 0) { h[0] = s.x; h[1] = s.y; h[2] = s.z; h[3] = s.w; }
    __syncwarp();
    top = mlp(flat, widths, depth, h, lane);
    if (lane != 0) return;

    write4(obs, at, s);
    values[at] = value;
    int choices = widths[depth];
    float mx = h[top];
    for (int k = 1; k < choices; ++k) mx = fmaxf(mx, h[top + k]);
    float sum = 0.0f;
    for (int k = 0; k < choices; ++k) sum += expf(h[top + k] - mx);
    // Inverse CDF on one uniform draw of the env's action stream.
    u32 ag = (u32)arng[i];
    float u = next_unit(&ag) * sum;
    arng[i] = (i64)ag;
    int a = choices - 1;
    float acc = 0.0f;
    for (int k = 0; k < choices; ++k) {
        acc += expf(h[top + k] - mx);
        if (u < acc) { a = k; break; }
    }
    actions[at] = a;
    log_probs[at] = h[top + a] - mx - logf(sum);

    Outcome o = advance(s, a, elapsed[i], ret[i]);
    write4(final_obs, at, o.s);
    episode_return[at] = o.r;
    rewards[at] = 1.0f;
    terminated[at] = o.term ? 1.0f : 0.0f;
    truncated[at] = o.trunc ? 1.0f : 0.0f;
    done[at] = o.done;
    store_state(i, o.s, o.done, o.e, o.r, x, x_dot, theta, theta_dot, elapsed, ret, rng);
}
