//! The device env's kernels against the host reference: `cartpole_step` (the `device`
//! backend's fused step) and `cartpole_multistep` (state in registers, random actions),
//! checked against shared's f32 dynamics with autoreset.

use crate::cartpole::device::env::DeviceCartPole;
use hotlab_env::cartpole::{dynamics_f32, terminated_f32, MAX_STEPS, RESET_BOUND};
use hotlab_env::rng::{action_rng, EnvRng};
use hotlab_train::cuda::gpu::{ptr, Arg, Gpu};
use hotlab_train::gpu_check::{check, host_f32, max_abs_diff};
use serde_json::{json, Value};
use std::sync::Arc;
use tch::{Device, Kind, Tensor};

/// An env's first state and streams, as the batch env and the kernels start it.
pub(super) fn first_state(seed: u64, i: u64) -> ([f32; 4], EnvRng, EnvRng) {
    let mut rng = EnvRng::for_env(seed, i);
    let b = RESET_BOUND as f32;
    let s = [(); 4].map(|_| rng.uniform_f32(-b, b));
    (s, rng, action_rng(seed, i))
}

/// The host reference: one env's step with autoreset; returns whether it ended.
pub(super) fn reference_step(s: &mut [f32; 4], elapsed: &mut u32, rng: &mut EnvRng, action: i64) -> bool {
    *s = dynamics_f32(*s, action);
    *elapsed += 1;
    let done = terminated_f32(*s) | (*elapsed >= MAX_STEPS);
    if done {
        let b = RESET_BOUND as f32;
        *s = [(); 4].map(|_| rng.uniform_f32(-b, b));
        *elapsed = 0;
    }
    done
}

/// `cartpole_step` (the `device` backend's fused step) against shared's f32 env, 600
/// steps of 1000 envs (not a multiple of the block) with random actions.
pub(super) fn fused_step_check(gpu: &Arc<Gpu>) -> Value {
    const N: usize = 1000;
    const STEPS: usize = 600;
    let seed = 7;
    let mut env = DeviceCartPole::new(N, seed, Device::Cuda(0));
    let mut obs = host_f32(&env.reset());
    if let Err(e) = env.use_kernel(Arc::clone(gpu)) {
        return check("fused_env_step", false, "-", json!(e));
    }
    let mut refs: Vec<_> = (0..N as u64).map(|i| first_state(seed, i)).collect();
    let mut elapsed = vec![0u32; N];
    let first: Vec<f32> = refs.iter().flat_map(|r| r.0).collect();
    let (mut worst, mut flag_mismatches, mut resets) = (max_abs_diff(&obs, &first), 0u64, 0u64);
    for _ in 0..STEPS {
        let actions: Vec<i64> = refs.iter_mut().map(|r| (r.2.next_u32() >> 31) as i64).collect();
        let step = env.step(&Tensor::from_slice(&actions).to_device(Device::Cuda(0)));
        obs = host_f32(&step.obs);
        let done = host_f32(&step.done);
        for i in 0..N {
            let (s, rng, _) = &mut refs[i];
            let d = reference_step(s, &mut elapsed[i], rng, actions[i]);
            resets += d as u64;
            flag_mismatches += (d != (done[i] != 0.0)) as u64;
            worst = worst.max(max_abs_diff(&obs[4 * i..4 * i + 4], s));
        }
    }
    let ok = worst <= 2e-6 && flag_mismatches == 0 && resets > 0;
    check(
        "fused_env_step",
        ok,
        "|Δstate| ≤ 2e-6, identical dones",
        json!({"envs": N, "steps": STEPS, "max_abs_diff": worst, "done_mismatches": flag_mismatches, "resets": resets}),
    )
}

/// Device buffers of the multi-step kernel for `n` envs of `seed`.
pub(super) fn multistep_buffers(n: usize, seed: u64) -> (Tensor, Tensor, Tensor) {
    let mut state = Vec::with_capacity(4 * n);
    let mut meta = Vec::with_capacity(3 * n);
    for i in 0..n as u64 {
        let (s, rng, arng) = first_state(seed, i);
        state.extend(s);
        meta.extend([0, rng.state() as i32, arng.state() as i32]);
    }
    let dev = Device::Cuda(0);
    (
        Tensor::from_slice(&state).to_device(dev),
        Tensor::from_slice(&meta).to_device(dev),
        Tensor::zeros([2], (Kind::Int64, dev)),
    )
}

pub(super) fn multistep_launch(
    gpu: &Gpu,
    f: &cudarc::driver::CudaFunction,
    n: usize,
    steps: usize,
    b: &(Tensor, Tensor, Tensor),
) -> Result<(), String> {
    let args = [Arg::I32(n as i32), Arg::I32(steps as i32), ptr(&b.0), ptr(&b.1), ptr(&b.2)];
    gpu.launch(f, &gpu.torch_stream, n, &args)
}

/// `cartpole_multistep` (state in registers, random actions) against the host reference:
/// the same episodes and lengths, the same final states.
pub(super) fn multistep_check(gpu: &Arc<Gpu>) -> Value {
    const N: usize = 3000;
    const STEPS: usize = 700;
    let seed = 11;
    let f = match gpu.function("cartpole_multistep") {
        Ok(f) => f,
        Err(e) => return check("multistep", false, "-", json!(e)),
    };
    let b = multistep_buffers(N, seed);
    // Two launches: the state carries over between them.
    let launched =
        multistep_launch(gpu, &f, N, STEPS / 2, &b).and_then(|_| multistep_launch(gpu, &f, N, STEPS - STEPS / 2, &b));
    if let Err(e) = launched {
        return check("multistep", false, "-", json!(e));
    }
    let (mut episodes, mut lengths, mut want) = (0u64, 0u64, Vec::with_capacity(4 * N));
    for i in 0..N as u64 {
        let (mut s, mut rng, mut arng) = first_state(seed, i);
        let mut e = 0u32;
        for _ in 0..STEPS {
            let before = e;
            if reference_step(&mut s, &mut e, &mut rng, (arng.next_u32() >> 31) as i64) {
                episodes += 1;
                lengths += before as u64 + 1;
            }
        }
        want.extend(s);
    }
    let stats = Vec::<i64>::try_from(b.2.to_device(Device::Cpu)).unwrap_or_default();
    let worst = max_abs_diff(&host_f32(&b.0), &want);
    let got = (stats.first().copied().unwrap_or(-1) as u64, stats.get(1).copied().unwrap_or(-1) as u64);
    let ok = got == (episodes, lengths) && worst <= 2e-6;
    check(
        "multistep",
        ok,
        "equal episode counts and lengths, |Δstate| ≤ 2e-6",
        json!({"envs": N, "steps": STEPS, "episodes": got.0, "expected_episodes": episodes,
               "length_sum": got.1, "expected_length_sum": lengths, "max_abs_diff": worst}),
    )
}
