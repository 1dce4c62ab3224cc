// A batch of CartPole-v1 envs, one invocation per env, `steps` steps per dispatch with
// the state kept in registers. The arithmetic is `hotlab_shared::cartpole`'s f32 batch
// env operation for operation (the same sin/cos polynomial, the same expression order,
// the same PCG reset stream), so a transition matches it to rounding. The constants
// (G, TM, …) come from a prelude that Rust writes from the same constants.

struct Params {
    envs: u32,
    steps: u32,
    // 0: actions from `actions`; 1: uniform random; 2: the actor in `weights`.
    mode: u32,
    // bit 0: record each env's flags, action and final state (tests); bit 1: greedy actor;
    // bit 2: the actor's inputs go through the run's observation normalizer.
    flags: u32,
    // Actor layers; widths[0] = 4 inputs … widths[depth] = 2 logits.
    depth: u32,
    pad0: u32,
    pad1: u32,
    pad2: u32,
    widths: array<vec4<u32>, 3>,
}

@group(0) @binding(0) var<uniform> P: Params;
// [x, x_dot, theta, theta_dot] per env.
@group(0) @binding(1) var<storage, read_write> state: array<vec4<f32>>;
// [elapsed steps, reset stream, action stream, unused] per env.
@group(0) @binding(2) var<storage, read_write> env_meta: array<vec4<u32>>;
// The normalizer's mean[4], scale[4] and clip (NORM_FLOATS), then the actor's layers.
@group(0) @binding(3) var<storage, read> weights: array<f32>;
@group(0) @binding(4) var<storage, read> actions: array<u32>;
// bit 0 terminated, bit 1 truncated, bits 2.. the action (only when recording).
@group(0) @binding(5) var<storage, read_write> out_flags: array<u32>;
// The state an env ended in before its autoreset (only when recording).
@group(0) @binding(6) var<storage, read_write> final_state: array<vec4<f32>>;
// [episodes ended, sum of their lengths]: one atomic add per invocation and dispatch
// (summed over its steps first). No workgroup reduction: a barrier makes SwiftShader,
// the browser's software WebGPU, run every invocation as a coroutine.
@group(0) @binding(7) var<storage, read_write> stats: array<atomic<u32>, 2>;

// PCG-RXS-M-XS 32, as `EnvRng::next_u32`.
fn next_u32(rng: ptr<function, u32>) -> u32 {
    let old = *rng;
    *rng = old * 747796405u + 2891336453u;
    let word = ((old >> ((old >> 28u) + 4u)) ^ old) * 277803737u;
    return (word >> 22u) ^ word;
}

fn next_unit(rng: ptr<function, u32>) -> f32 {
    return f32(next_u32(rng) >> 8u) * (1.0f / 16777216.0f);
}

fn reset_draw(rng: ptr<function, u32>) -> f32 {
    return -RESET_B + (2.0f * RESET_B) * next_unit(rng);
}

// `sin_cos_f32`: reduction by π/2 and the Cephes polynomials, no library calls.
fn sin_cos(x: f32) -> vec2<f32> {
    let j = round(x * TWO_OVER_PI);
    let q = i32(j);
    let r = ((x - j * 1.5703125f) - j * 4.837513e-4f) - j * 7.54979e-8f;
    let z = r * r;
    let sin_r = ((-1.9515296e-4f * z + 8.332161e-3f) * z - 1.6666655e-1f) * z * r + r;
    let cos_r = ((2.4433157e-5f * z - 1.3887316e-3f) * z + 4.1666646e-2f) * z * z - 0.5f * z + 1.0f;
    let swap = (q & 1) != 0;
    var s = select(sin_r, cos_r, swap);
    var c = select(cos_r, sin_r, swap);
    if ((q & 2) != 0) { s = -s; }
    if (((q + 1) & 2) != 0) { c = -c; }
    return vec2<f32>(s, c);
}

// One Euler step: `dynamics_f32`.
fn dynamics(s: vec4<f32>, action: u32) -> vec4<f32> {
    let force = select(-FORCE, FORCE, action == 1u);
    let sc = sin_cos(s.z);
    let temp = (force + PML * (s.w * s.w) * sc.x) / TM;
    let thetaacc = (G * sc.x - sc.y * temp) / (L * (4.0f / 3.0f - MP * (sc.y * sc.y) / TM));
    let xacc = temp - PML * thetaacc * sc.y / TM;
    return vec4<f32>(s.x + T * s.y, s.y + T * xacc, s.z + T * s.w, s.w + T * thetaacc);
}

fn terminated(s: vec4<f32>) -> bool {
    return (s.x < -X_T) || (s.x > X_T) || (s.z < -THETA_T) || (s.z > THETA_T);
}

fn width(l: u32) -> u32 {
    return P.widths[l / 4u][l % 4u];
}

// The actor's two logits: tanh hidden layers, weights [in, out] then bias [out] per layer.
fn logits(s: vec4<f32>) -> vec2<f32> {
    // Two halves: layer l reads half l % 2 and writes the other.
    var h: array<f32, 2 * MAX_WIDTH>;
    var x = s;
    // `InputNorm::apply`: (x − mean) · scale, clipped.
    if ((P.flags & 4u) != 0u) {
        let mean = vec4<f32>(weights[0], weights[1], weights[2], weights[3]);
        let scale = vec4<f32>(weights[4], weights[5], weights[6], weights[7]);
        x = clamp((s - mean) * scale, vec4<f32>(-weights[8]), vec4<f32>(weights[8]));
    }
    h[0] = x.x;
    h[1] = x.y;
    h[2] = x.z;
    h[3] = x.w;
    var off = NORM_FLOATS;
    for (var l = 0u; l < P.depth; l++) {
        let nin = width(l);
        let nout = width(l + 1u);
        let src = (l % 2u) * MAX_WIDTH;
        let dst = MAX_WIDTH - src;
        for (var j = 0u; j < nout; j++) {
            var z = weights[off + nin * nout + j];
            for (var i = 0u; i < nin; i++) {
                z += h[src + i] * weights[off + i * nout + j];
            }
            // Clamped: some tanh implementations return NaN far out; tanh(±15) is ±1 in f32.
            h[dst + j] = select(z, tanh(clamp(z, -15.0f, 15.0f)), l + 1u < P.depth);
        }
        off += nin * nout + nout;
    }
    let top = (P.depth % 2u) * MAX_WIDTH;
    return vec2<f32>(h[top], h[top + 1u]);
}

// `actor::choose`: the policy's action from the env's action stream.
fn choose(s: vec4<f32>, arng: ptr<function, u32>, i: u32) -> u32 {
    switch P.mode {
        case 0u: { return actions[i]; }
        case 1u: { return next_u32(arng) >> 31u; }
        default: {
            let l = logits(s);
            if ((P.flags & 2u) != 0u) {
                return select(0u, 1u, l.y > l.x);
            }
            let p_right = 1.0f / (1.0f + exp(clamp(l.x - l.y, -80.0f, 80.0f)));
            return select(0u, 1u, next_unit(arng) < p_right);
        }
    }
}

@compute @workgroup_size(WORKGROUP)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    var episodes = 0u;
    var lengths = 0u;
    if (i < P.envs) {
        var s = state[i];
        var m = env_meta[i];
        var rng = m.y;
        var arng = m.z;
        for (var k = 0u; k < P.steps; k++) {
            let a = choose(s, &arng, i);
            s = dynamics(s, a);
            m.x += 1u;
            let term = terminated(s);
            let trunc = m.x >= MAX_STEPS;
            if ((P.flags & 1u) != 0u) {
                out_flags[i] = select(0u, 1u, term) | select(0u, 2u, trunc) | (a << 2u);
                final_state[i] = s;
            }
            if (term || trunc) {
                episodes += 1u;
                lengths += m.x;
                // Same draw order as the batch env: x, x_dot, theta, theta_dot.
                let x = reset_draw(&rng);
                let x_dot = reset_draw(&rng);
                let theta = reset_draw(&rng);
                let theta_dot = reset_draw(&rng);
                s = vec4<f32>(x, x_dot, theta, theta_dot);
                m.x = 0u;
            }
        }
        m.y = rng;
        m.z = arng;
        state[i] = s;
        env_meta[i] = m;
    }
    if (episodes > 0u) {
        atomicAdd(&stats[0], episodes);
        atomicAdd(&stats[1], lengths);
    }
}
