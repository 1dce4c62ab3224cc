//! `hotlab gpu-check`: compiles every NVRTC kernel (no GPU needed), then on a CUDA GPU
//! runs every GPU path against its CPU reference, then the GPU benchmarks, and returns
//! one JSON summary. Each check states its tolerance; speed is measured, never asserted.

use cudarc::driver::sys::CUevent_flags;
use hotlab_shared::cartpole::{dynamics_f32, terminated_f32, MAX_STEPS, RESET_BOUND};
use hotlab_shared::counters::Counters;
use hotlab_shared::rng::{action_rng, EnvRng, HostRng};
use hotlab_shared::spec::{self, ActionSync, Backend, ExecSpec, Inference, RunSpec};
use hotlab_train::adam::FlatAdam;
use hotlab_train::cuda::gpu::{ptr, Arg, Gpu, Support};
use hotlab_train::cuda::nvrtc;
use hotlab_train::models::mlp::policy::{ActorCritic, Architecture};
use hotlab_train::models::mlp::MlpAgent;
use hotlab_train::ppo::update::{self, UpdateCtx};
use hotlab_train::profiler::Profiler;
use hotlab_train::rollout::Batch;
use hotlab_workloads::cartpole::device::env::DeviceCartPole;
use hotlab_workloads::cartpole::device::graph::GraphRollout;
use hotlab_workloads::cartpole::device::rollout::DeviceRollout;
use hotlab_workloads::cartpole::CartPole;
use hotlab_workloads::gpu_check::{check, progress};
use serde_json::{json, Value};
use std::sync::Arc;
use tch::{Device, Kind, Tensor};

/// What to run.
pub struct Options {
    /// Only compile the kernels (works without a GPU).
    pub compile_only: bool,
    /// Skip the benchmarks (checks only).
    pub no_bench: bool,
    /// Largest env count of the stepping benchmark, as a power of two.
    pub max_log2_envs: u32,
}

/// One check's outcome.
/// Every lesson whose signature needs a GPU: its slow setting and its fix, one short run
/// each, reported as the check `lesson_<id>`.
fn gpu_lesson_checks() -> Vec<Value> {
    let lessons = hotlab_shared::lessons::LESSONS.iter().filter(|l| l.needs_gpu());
    lessons
        .map(|lesson| {
            progress(&format!("lesson {} (its signature needs a GPU)", lesson.id));
            let name = format!("lesson_{}", lesson.id.replace('-', "_"));
            let params = hotlab_shared::lessons::Params { seconds: Some(1.0), ..Default::default() };
            match crate::bench::lessons::check(lesson, &params) {
                Ok(c) => check(&name, c.shows, lesson.signature.text, json!(c.figures)),
                Err(e) => check(&name, false, "-", json!(format!("{e:#}"))),
            }
        })
        .collect()
}

/// Runs the check; the summary's `ok` says whether everything that ran passed.
pub fn run(opts: &Options) -> Value {
    let support = Support::probe();
    let mut compiled = Vec::new();
    let mut compile_ok = true;
    for arch in nvrtc::CHECK_ARCHS {
        progress(&format!("compiling the kernels for {arch}"));
        match nvrtc::compile(arch, nvrtc::DEFAULT_MAX_WIDTH) {
            Ok(c) => compiled.push(json!({"arch": arch, "ok": true, "ptx_bytes": c.ptx_bytes, "seconds": c.seconds})),
            Err(e) => {
                compile_ok = false;
                compiled.push(json!({"arch": arch, "ok": false, "error": e}));
            }
        }
    }
    let mut out = json!({
        "hotlab": env!("CARGO_PKG_VERSION"),
        "torch": hotlab_train::system::TORCH_VERSION,
        "support": format!("{support:?}").to_lowercase(),
        "nvrtc": { "version": nvrtc::version(), "kernels": nvrtc::KERNELS, "compiled": compiled },
        "gpu": Value::Null,
        "checks": [],
        "benchmarks": {},
    });
    let mut ok = compile_ok;
    if opts.compile_only {
        out["ok"] = json!(ok);
        return out;
    }
    let mut checks = Vec::new();
    let mut benches = json!({});
    match support {
        Support::Cuda => match Gpu::open(0, nvrtc::DEFAULT_MAX_WIDTH) {
            Ok(gpu) => {
                let gpu = Arc::new(gpu);
                out["gpu"] = json!({
                    "name": gpu.name, "capability": format!("{}.{}", gpu.capability.0, gpu.capability.1),
                    "arch": gpu.arch, "compile_s": gpu.compile_seconds,
                });
                checks.extend(cuda_checks(&gpu));
                checks.push(amp_check());
                checks.extend(hotlab_workloads::gpu_checks());
                checks.extend(gpu_lesson_checks());
                if !opts.no_bench {
                    benches = benchmarks(&gpu, opts.max_log2_envs);
                    benches["dreamer_batch"] = hotlab_workloads::dreamer::gpu::bench();
                    benches["dreamer_batch_precision"] = hotlab_workloads::dreamer::gpu::bench_precisions();
                    benches["dreamer_update_graph"] = hotlab_workloads::dreamer::gpu::bench_graph();
                    benches["morpho_hosts"] = hotlab_workloads::morpho::gpu::bench();
                }
            }
            Err(e) => checks.push(check("open_gpu", false, "-", json!(e))),
        },
        Support::Rocm => {
            out["gpu"] = json!({ "name": "ROCm device (through HIP)", "nvrtc_paths": support.why_not() });
            checks.push(amp_check());
            checks.push(train_check("device_backend_tensor_ops", Inference::Fused));
        }
        Support::None => {
            checks.push(check(
                "gpu_present",
                false,
                "-",
                json!("no GPU here: `hotlab gpu-check --compile-only` checks that the kernels compile"),
            ));
        }
    }
    ok &= checks.iter().all(|c| c["ok"] == json!(true));
    out["checks"] = json!(checks);
    out["benchmarks"] = benches;
    out["ok"] = json!(ok);
    out
}

/// An env's first state and streams, as the batch env and the kernels start it.
fn first_state(seed: u64, i: u64) -> ([f32; 4], EnvRng, EnvRng) {
    let mut rng = EnvRng::for_env(seed, i);
    let b = RESET_BOUND as f32;
    let s = [(); 4].map(|_| rng.uniform_f32(-b, b));
    (s, rng, action_rng(seed, i))
}

/// The host reference: one env's step with autoreset; returns whether it ended.
fn reference_step(s: &mut [f32; 4], elapsed: &mut u32, rng: &mut EnvRng, action: i64) -> bool {
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

fn host_f32(t: &Tensor) -> Vec<f32> {
    Vec::<f32>::try_from(t.to_kind(Kind::Float).flatten(0, -1).to_device(Device::Cpu)).unwrap_or_default()
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs() as f64)
        .fold(if a.len() == b.len() { 0.0 } else { f64::INFINITY }, f64::max)
}

fn cuda_checks(gpu: &Arc<Gpu>) -> Vec<Value> {
    progress("fused env step against the batch env");
    let mut out = vec![fused_step_check(gpu)];
    progress("multi-step kernel against the batch env");
    out.push(multistep_check(gpu));
    progress("graph rollout: replay, direct launches, libtorch's forward");
    out.extend(graph_checks(gpu));
    progress("the rollout kernel's forward at widths that are not multiples of a warp");
    out.push(odd_widths_check(gpu));
    progress("GAE's kernel against the host's");
    out.push(gae_check(gpu));
    progress("a PPO update on the GPU against the CPU");
    out.push(ppo_check());
    progress("the PPO update captured as a CUDA graph against the eager one");
    out.extend(update_graph_checks());
    out.push(super::gpu_optim::clip_adam_check(gpu));
    out.push(super::gpu_loss::ppo_loss_grad_check(gpu));
    progress("PPO with --inference graph on CartPole");
    out.push(train_check("ppo_graph_learns", Inference::Graph));
    progress("--preset gpu: the rollout and the update captured, to its learning bar");
    out.push(preset_gpu_check());
    out
}

/// `--preset gpu` as it ships (4096 envs, the rollout and the whole update each one CUDA
/// graph): its learning bar, a mean return of at least 475 over the last 100 episodes, with
/// its steps/s, training time and graph replays.
fn preset_gpu_check() -> Value {
    const NAME: &str = "preset_gpu_learns";
    let spec = match spec::Preset::find("gpu") {
        Ok(p) => p.spec(),
        Err(e) => return check(NAME, false, "-", json!(e)),
    };
    match hotlab_workloads::train(&spec, &mut |_| {}) {
        Ok(t) => {
            let r = t.report.mean_return_last_100.unwrap_or(0.0);
            let c = &t.report.counters;
            check(
                NAME,
                r >= 475.0,
                "mean return ≥ 475 over the last 100 episodes at the preset's budget",
                json!({"mean_return_last_100": r, "sps": t.report.sps, "train_s": t.report.wall_s,
                       "total_steps": spec.total_steps, "update_replays": c.update_replays,
                       "update_launches": c.update_launches}),
            )
        }
        Err(e) => check(NAME, false, "-", json!(format!("{e:#}"))),
    }
}

/// `cartpole_step` (the `device` backend's fused step) against shared's f32 env, 600
/// steps of 1000 envs (not a multiple of the block) with random actions.
fn fused_step_check(gpu: &Arc<Gpu>) -> Value {
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
fn multistep_buffers(n: usize, seed: u64) -> (Tensor, Tensor, Tensor) {
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

fn multistep_launch(
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
fn multistep_check(gpu: &Arc<Gpu>) -> Value {
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

fn cartpole_arch() -> Architecture {
    Architecture { obs_dim: 4, hidden: vec![64, 64], logits: 2, gaussian: 0 }
}

/// The graph rollout: a replay equals the same kernels launched directly, bit for bit;
/// the kernel's values and log-probs equal libtorch's forward on the stored observations;
/// the stored transitions are shared's dynamics; sampled actions follow the softmax.
fn graph_checks(gpu: &Arc<Gpu>) -> Vec<Value> {
    const N: usize = 2048;
    const T: usize = 64;
    let seed = 3;
    let dev = Device::Cuda(0);
    tch::manual_seed(1);
    let net = ActorCritic::new(cartpole_arch(), dev);
    let run = |direct: bool| -> Result<(DeviceRollout, DeviceCartPole), String> {
        let mut env = DeviceCartPole::new(N, seed, dev);
        let rollout = DeviceRollout::new(&mut env, T, 4, 1);
        let mut g = GraphRollout::new(Arc::clone(gpu), &env, &cartpole_arch(), seed)?;
        for _ in 0..2 {
            g.run(T, &net.flat, &env, &rollout.buffers(), direct)?;
        }
        Ok((rollout, env))
    };
    let (graph, direct) = match (run(false), run(true)) {
        (Ok(g), Ok(d)) => (g, d),
        (Err(e), _) | (_, Err(e)) => return vec![check("graph_rollout", false, "-", json!(e))],
    };
    let (a, b) = (graph.0.buffers(), direct.0.buffers());
    let pairs = [
        (a.obs, b.obs),
        (a.actions, b.actions),
        (a.log_probs, b.log_probs),
        (a.values, b.values),
        (a.final_obs, b.final_obs),
        (a.done, b.done),
    ];
    let same = pairs.iter().all(|(x, y)| x.to_kind(Kind::Double).equal(&y.to_kind(Kind::Double)));
    let mut out = vec![check(
        "graph_replay_equals_direct_launches",
        same,
        "bit for bit",
        json!({"envs": N, "steps": T, "rollouts": 2}),
    )];

    let obs = a.obs.view([-1, 4]);
    let actions = a.actions.view([-1, 1]);
    let (values, lp) = tch::no_grad(|| {
        let logits = net.logits(&obs);
        let (lp, _) = hotlab_train::distribution::log_prob_and_entropy(&logits, None, &[2], &actions);
        (net.value(&obs), lp)
    });
    let dv = max_abs_diff(&host_f32(&values), &host_f32(a.values));
    let dl = max_abs_diff(&host_f32(&lp), &host_f32(a.log_probs));
    out.push(check(
        "rollout_kernel_matches_libtorch_forward",
        dv <= 1e-4 && dl <= 1e-4,
        "|Δvalue| ≤ 1e-4, |Δlog-prob| ≤ 1e-4",
        json!({"max_value_diff": dv, "max_log_prob_diff": dl}),
    ));

    let (o, f, act) = (host_f32(&obs), host_f32(a.final_obs), host_f32(&actions));
    let worst = (0..N * T).map(|k| {
        let s = dynamics_f32([o[4 * k], o[4 * k + 1], o[4 * k + 2], o[4 * k + 3]], act[k] as i64);
        max_abs_diff(&s, &f[4 * k..4 * k + 4])
    });
    let worst = worst.fold(0.0, f64::max);
    let p_right = tch::no_grad(|| net.logits(&obs).softmax(-1, Kind::Float).select(1, 1).mean(Kind::Float));
    let (p, freq) =
        (f64::try_from(p_right).unwrap_or(-1.0), act.iter().map(|&x| x as f64).sum::<f64>() / act.len() as f64);
    out.push(check(
        "rollout_kernel_transitions_and_sampling",
        worst <= 2e-6 && (p - freq).abs() <= 0.01,
        "|Δstate| ≤ 2e-6 against shared's dynamics; share of action 1 within 0.01 of the mean softmax",
        json!({"max_abs_diff": worst, "mean_p_action_1": p, "share_action_1": freq, "samples": N * T}),
    ));
    out
}

/// The rollout kernel's forward, shared by a warp's lanes, at widths that leave lanes
/// idle or give them two outputs (48, 37 and 64 wide, three hidden layers): its values
/// and log-probs equal libtorch's forward on the stored observations.
fn odd_widths_check(gpu: &Arc<Gpu>) -> Value {
    const N: usize = 1000;
    const T: usize = 8;
    let arch = Architecture { obs_dim: 4, hidden: vec![48, 37, 64], logits: 2, gaussian: 0 };
    let dev = Device::Cuda(0);
    tch::manual_seed(2);
    let net = ActorCritic::new(arch.clone(), dev);
    let mut env = DeviceCartPole::new(N, 5, dev);
    let rollout = DeviceRollout::new(&mut env, T, 4, 1);
    let ran = GraphRollout::new(Arc::clone(gpu), &env, &arch, 5)
        .and_then(|mut g| g.run(T, &net.flat, &env, &rollout.buffers(), false));
    if let Err(e) = ran {
        return check("rollout_kernel_odd_widths", false, "-", json!(e));
    }
    let b = rollout.buffers();
    let (obs, actions) = (b.obs.view([-1, 4]), b.actions.view([-1, 1]));
    let (values, lp) = tch::no_grad(|| {
        let logits = net.logits(&obs);
        let (lp, _) = hotlab_train::distribution::log_prob_and_entropy(&logits, None, &[2], &actions);
        (net.value(&obs), lp)
    });
    let dv = max_abs_diff(&host_f32(&values), &host_f32(b.values));
    let dl = max_abs_diff(&host_f32(&lp), &host_f32(b.log_probs));
    check(
        "rollout_kernel_odd_widths",
        dv <= 1e-4 && dl <= 1e-4,
        "|Δvalue| ≤ 1e-4, |Δlog-prob| ≤ 1e-4 against libtorch at widths 48, 37, 64",
        json!({"max_value_diff": dv, "max_log_prob_diff": dl, "envs": N, "steps": T}),
    )
}

/// GAE's CUDA kernel against the host loop on random rollouts with terminations and
/// truncations (shapes that are not multiples of a block): equal to the bit.
fn gae_check(gpu: &Arc<Gpu>) -> Value {
    use hotlab_train::gae::{gae, GaeTensors, RandomRollout};
    use hotlab_workloads::cartpole::device::rollout::gae_kernel;
    let f = match gpu.function("gae") {
        Ok(f) => f,
        Err(e) => return check("gae_kernel_matches_host", false, "-", json!(e)),
    };
    let mut rng = HostRng::new(7);
    let mut worst = 0.0f64;
    let mut equal = true;
    for (steps, envs) in [(16usize, 4096usize), (1, 3), (37, 1000), (128, 300)] {
        let r = RandomRollout::draw(&mut rng, steps, envs);
        let (adv, ret) = gae(&r.input(), 0.99, 0.95);
        match gae_kernel(gpu, &f, &GaeTensors::of(&r.tensors(Device::Cuda(0))), 0.99, 0.95) {
            Ok((a, b)) => {
                let (a, b) = (host_f32(&a), host_f32(&b));
                equal &= a == adv && b == ret;
                worst = worst.max(max_abs_diff(&a, &adv)).max(max_abs_diff(&b, &ret));
            }
            Err(e) => return check("gae_kernel_matches_host", false, "-", json!(e)),
        }
    }
    check(
        "gae_kernel_matches_host",
        equal,
        "bit for bit, at 16×4096, 1×3, 37×1000 and 128×300",
        json!({"max_abs_diff": worst}),
    )
}

/// One PPO update (4 epochs × 4 minibatches, fp32) from the same parameters and batch on
/// the GPU and on the CPU: the parameters after it agree.
fn ppo_check() -> Value {
    let spec = RunSpec { envs: 256, steps: 16, device: "cuda".into(), ..RunSpec::default() };
    let arch = cartpole_arch();
    tch::manual_seed(5);
    let cpu_net = ActorCritic::new(arch.clone(), Device::Cpu);
    let n = spec.batch_size() as i64;
    let mut rng = HostRng::new(9);
    let obs: Vec<f32> = (0..4 * n).map(|_| rng.next_f32() * 0.2 - 0.1).collect();
    let host = Batch {
        obs: Tensor::from_slice(&obs).view([n, 4]),
        extra: Vec::new(),
        actions: Tensor::from_slice(&(0..n).map(|i| i % 2).collect::<Vec<i64>>()).view([n, 1]),
        real_actions: None,
        log_probs: Tensor::full([n], -0.69, (Kind::Float, Device::Cpu)),
        values: Tensor::from_slice(&(0..n).map(|_| rng.next_f32()).collect::<Vec<f32>>()),
        advantages: Tensor::from_slice(&(0..n).map(|_| rng.next_f32() * 2.0 - 1.0).collect::<Vec<f32>>()),
        returns: Tensor::from_slice(&(0..n).map(|_| rng.next_f32() * 10.0).collect::<Vec<f32>>()),
    };
    let on = |b: &Batch, d: Device| Batch {
        obs: b.obs.to_device(d),
        extra: Vec::new(),
        actions: b.actions.to_device(d),
        real_actions: None,
        log_probs: b.log_probs.to_device(d),
        values: b.values.to_device(d),
        advantages: b.advantages.to_device(d),
        returns: b.returns.to_device(d),
    };
    let update = |net: ActorCritic, d: Device| -> Vec<f32> {
        let mut opt = FlatAdam::new(&net.flat, 1e-5);
        let mut agent = MlpAgent { net, helper: None, env: Arc::new(CartPole) };
        let mut precision =
            hotlab_train::precision::resolve(spec::Precision::Fp32, d).expect("fp32 resolves everywhere");
        let ctx = UpdateCtx {
            spec: &spec,
            heads: &[2],
            lr: spec.ppo.lr,
            precision: &mut precision,
            telemetry: None,
            stop: None,
        };
        let (mut prof, mut c) = (Profiler::new(None), Counters::default());
        let _ = update::update(&mut agent, &mut opt, &on(&host, d), ctx, &mut HostRng::new(1), &mut prof, &mut c);
        host_f32(&agent.net.flat)
    };
    let gpu_net = ActorCritic::from_flat(arch.clone(), cpu_net.flat.to_device(Device::Cuda(0)));
    let on_gpu = update(gpu_net, Device::Cuda(0));
    let on_cpu = update(cpu_net, Device::Cpu);
    let d = max_abs_diff(&on_gpu, &on_cpu);
    check(
        "ppo_update_gpu_matches_cpu",
        d <= 1e-4,
        "|Δparameter| ≤ 1e-4 after 16 Adam steps",
        json!({"max_abs_diff": d, "params": on_cpu.len()}),
    )
}

/// `--update graph`: 16 updates replayed from the captured graph (after its eager warm-up),
/// its shuffles drawn on the device inside it, give the same ops launched eagerly on the
/// same batches and the shuffles the replays drew, to 1e-5; each drawn order is a
/// permutation; and those ops give today's autograd update after 3 updates, as on the CPU
/// ([`Agreement::same_training`]). Over 16 updates the two kinds of arithmetic drift apart (a hand-written
/// backward rounds differently, and a ratio at the clip's edge can fall on either side):
/// reported, not bounded. And the launches of one replay, counted from the graph's nodes.
/// And `--update graph_fused` (hotlab's loss and Adam kernels) against the graph on the
/// same shuffles, to 1e-5, with its launches.
fn update_graph_checks() -> [Value; 3] {
    use hotlab_workloads::cartpole::update_check::{max_abs_diff, train_updates, Agreement, Path, Shuffle};
    let spec = RunSpec {
        envs: 256,
        steps: 16,
        device: "cuda".into(),
        ppo: spec::PpoSpec { minibatches: 2, lr: 2.5e-3, ..spec::PpoSpec::default() },
        ..RunSpec::default()
    };
    let run = |updates, path, shuffle: &Shuffle| train_updates(&spec, Device::Cuda(0), 3, updates, path, shuffle);
    let replayed = run(16, Path::Replayed, &Shuffle::Device);
    let given = Shuffle::given(&replayed.orders, 16);
    let eager = run(16, Path::Static, &given);
    let d = max_abs_diff(&eager.params, &replayed.params);
    let rows = spec.batch_size() as i64;
    let permutations = replayed.orders.len() == 16
        && replayed.orders.iter().all(|o| {
            o.sort(1, false).0.equal(&Tensor::arange(rows, (Kind::Int64, Device::Cpu)).expand(o.size(), false))
        });
    let fresh = replayed.orders.windows(2).all(|w| !w[0].equal(&w[1]));
    let first3 = Shuffle::given(&replayed.orders, 3);
    let autograd_3 = Agreement::of(&run(3, Path::Autograd, &first3).params, &run(3, Path::Static, &first3).params);
    let autograd_16 = max_abs_diff(&run(16, Path::Autograd, &given).params, &eager.params);
    let last = |s: &[Vec<f64>]| s.last().cloned().unwrap_or_default();
    let launches = replayed.launches;
    let counted = check(
        "ppo_update_graph_launches_counted",
        launches.is_some_and(|l| l.kernels > 0) && replayed.replays == 14,
        "the captured update's nodes counted by the driver: kernels > 0, 14 replays in 16 updates",
        json!({"launches_per_update": launches, "replays": replayed.replays,
               "minibatch_steps_per_update": spec.ppo.epochs * spec.ppo.minibatches}),
    );
    let matches = check(
        "ppo_update_graph_matches_eager",
        d <= 1e-5 && autograd_3.same_training(spec.ppo.lr) && permutations && fresh && !eager.params.is_empty(),
        "shuffles drawn in the graph: permutations, new each update; |Δparameter| ≤ 1e-5 replayed against the same ops eagerly on those shuffles after 16 updates (14 of them replays); against the autograd update after 3, ≥ 99 % of the elements within 2e-5 and none further than the learning rate",
        json!({"max_abs_diff": d, "autograd_after_3": {"max_abs_diff": autograd_3.max, "share_over_2e-5": autograd_3.off}, "autograd_after_16": autograd_16, "params": eager.params.len(),
               "permutations": permutations, "new_each_update": fresh,
               "last_stats": {"eager": last(&eager.stats), "graph": last(&replayed.stats)}}),
    );
    [matches, counted, update_graph_fused_check()]
}

/// `--update graph_fused` (hotlab's loss and Adam kernels) against `--update graph` on the
/// same shuffles after 16 updates, to 1e-5, over 2 shapes × 3 seeds, with both ways'
/// launches per update.
fn update_graph_fused_check() -> Value {
    use hotlab_workloads::cartpole::update_check::{max_abs_diff, train_updates, Path, Shuffle};
    let (mut cases, mut ok) = (Vec::new(), true);
    for (envs, steps, minibatches) in [(256, 16, 2), (64, 8, 4)] {
        let spec = RunSpec {
            envs,
            steps,
            device: "cuda".into(),
            ppo: spec::PpoSpec { minibatches, lr: 2.5e-3, ..spec::PpoSpec::default() },
            ..RunSpec::default()
        };
        for seed in 3..=5 {
            let run = |path, shuffle: &Shuffle| train_updates(&spec, Device::Cuda(0), seed, 16, path, shuffle);
            let graph = run(Path::Replayed, &Shuffle::Device);
            let fused = run(Path::Fused, &Shuffle::given(&graph.orders, 16));
            let d = max_abs_diff(&graph.params, &fused.params);
            ok &= d <= 1e-5 && fused.replays == 14 && !fused.params.is_empty();
            cases.push(json!({"envs": envs, "steps": steps, "minibatches": minibatches, "seed": seed,
                              "max_abs_diff": d, "replays": fused.replays,
                              "launches_per_update": {"graph": graph.launches, "graph_fused": fused.launches}}));
        }
    }
    check(
        "ppo_update_graph_fused_matches_graph",
        ok,
        "|Δparameter| ≤ 1e-5 after 16 updates (14 replays) on the graph's shuffles, over 2 shapes × 3 seeds: hotlab's loss and Adam kernels against libtorch's ops, both captured",
        json!({"cases": cases}),
    )
}

/// AMP: `auto` picks bf16 from compute capability 8.0 (fp16 below it); the update's
/// matmuls really run in the asked kind (their products have it, and the forward's output
/// moves from fp32's by that kind's rounding: more than 0, less than 5%).
fn amp_check() -> Value {
    let dev = Device::Cuda(0);
    tch::manual_seed(2);
    let net = ActorCritic::new(cartpole_arch(), dev);
    let x = Tensor::randn([512, 4], (Kind::Float, dev));
    let mlp = net.network(false);
    let reference = tch::no_grad(|| mlp.forward_taped(&x, Kind::Float).out);
    let scale = f64::try_from(reference.abs().max()).unwrap_or(1.0).max(1e-6);
    let mut detail = serde_json::Map::new();
    let mut ok = true;
    for (name, kind, wanted) in
        [("fp16", Kind::Half, spec::Precision::Fp16), ("bf16", Kind::BFloat16, spec::Precision::Bf16)]
    {
        let resolved = hotlab_train::precision::resolve(wanted, dev).map(|p| p.kind);
        let out = tch::no_grad(|| mlp.forward_taped(&x, kind).out);
        let product = tch::no_grad(|| x.to_kind(kind).mm(&x.to_kind(kind).tr()).kind());
        let rel = f64::try_from((&out - &reference).abs().max()).unwrap_or(-1.0) / scale;
        let good = resolved == Ok(kind) && product == kind && rel > 0.0 && rel < 0.05;
        ok &= good;
        detail.insert(name.into(), json!({"ok": good, "product_kind": format!("{product:?}"), "relative_diff": rel}));
    }
    let auto = hotlab_train::precision::resolve(spec::Precision::Auto, dev).map(|p| p.label());
    let want = match hotlab_train::cuda::gpu::capability(0) {
        Some((major, _)) if major < 8 => "fp16",
        _ => "bf16",
    };
    ok &= auto == Ok(want);
    detail.insert("auto".into(), json!({"resolved": auto.unwrap_or("error"), "expected": want}));
    check("amp_dtypes", ok, "each kind resolved and used; 0 < relative diff < 0.05", Value::Object(detail))
}

/// A short PPO run on the GPU with `inference`; passes when it learns (mean return of the
/// last 100 episodes ≥ 150 after 300k steps; random play scores about 22).
fn train_check(name: &str, inference: Inference) -> Value {
    let spec = RunSpec {
        device: "cuda".into(),
        envs: 64,
        // 16 steps per rollout: 292 updates in the budget. With the default 128 PPO makes only
        // 36 and reaches ~100 on any backend (CPU eager too), under the bar however well it runs.
        steps: 16,
        total_steps: 300_000,
        exec: ExecSpec { backend: Backend::Device, inference, ..ExecSpec::default() },
        ..RunSpec::default()
    };
    match hotlab_workloads::train(&spec, &mut |_| {}) {
        Ok(t) => {
            let r = t.report.mean_return_last_100.unwrap_or(0.0);
            check(
                name,
                r >= 150.0,
                "mean return ≥ 150 after 300k steps (64 envs × 16)",
                json!({"mean_return_last_100": r, "sps": t.report.sps, "notes": t.report.notes}),
            )
        }
        Err(e) => check(name, false, "-", json!(format!("{e:#}"))),
    }
}

/// Seconds of device time of `f`, timed with CUDA events on libtorch's stream.
fn timed(gpu: &Gpu, f: impl FnOnce() -> Result<(), String>) -> Result<f64, String> {
    let e = |err: cudarc::driver::DriverError| format!("{err:?}");
    let start = gpu.ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).map_err(e)?;
    let end = gpu.ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).map_err(e)?;
    start.record(&gpu.torch_stream).map_err(e)?;
    f()?;
    end.record(&gpu.torch_stream).map_err(e)?;
    end.synchronize().map_err(e)?;
    Ok(start.elapsed_ms(&end).map_err(e)? as f64 / 1e3)
}

fn benchmarks(gpu: &Arc<Gpu>, max_log2: u32) -> Value {
    let mut stepping = Vec::new();
    if let Ok(f) = gpu.function("cartpole_multistep") {
        for log2 in (12..=max_log2.min(24)).step_by(2) {
            let n = 1usize << log2;
            let steps = ((1usize << 32) / n).clamp(100, 20_000);
            progress(&format!("multi-step stepping, 2^{log2} envs × {steps} steps"));
            let b = multistep_buffers(n, 1);
            let _ = multistep_launch(gpu, &f, n, 10, &b); // warm-up
            let secs = timed(gpu, || multistep_launch(gpu, &f, n, steps, &b));
            stepping.push(json!({"envs": n, "steps": steps, "seconds": secs.as_ref().ok(),
                "steps_per_s": secs.map(|s| (n * steps) as f64 / s).unwrap_or(0.0)}));
        }
    }
    let mut single = Vec::new();
    for n in [4096usize, 65_536, 1 << 20] {
        for fused in [false, true] {
            progress(&format!(
                "single steps of the device env, {n} envs, {}",
                if fused { "fused kernel" } else { "tensor ops" }
            ));
            let mut env = DeviceCartPole::new(n, 1, Device::Cuda(0));
            let _ = env.reset();
            if fused && env.use_kernel(Arc::clone(gpu)).is_err() {
                continue;
            }
            let actions = Tensor::zeros([n as i64], (Kind::Int64, Device::Cuda(0)));
            let steps = 200;
            let secs = timed(gpu, || {
                (0..steps).for_each(|_| drop(env.step(&actions)));
                Ok(())
            });
            single.push(
                json!({"envs": n, "fused": fused, "steps_per_s": secs.map(|s| (n * steps) as f64 / s).unwrap_or(0.0)}),
            );
        }
    }
    let mut runs = Vec::new();
    let wide = spec::Preset::find("wide").expect("a preset").spec();
    let device_run = |envs: usize, inference: Inference| RunSpec {
        device: "cuda".into(),
        exec: ExecSpec { backend: Backend::Device, inference, ..ExecSpec::default() },
        envs,
        total_steps: 2_000_000,
        ..wide.clone()
    };
    let host_run = |sync: ActionSync| RunSpec {
        device: "cuda".into(),
        exec: ExecSpec { inference: Inference::Eager, action_sync: sync, ..ExecSpec::default() },
        envs: 1024,
        total_steps: 1_000_000,
        ..wide.clone()
    };
    let cases = [
        ("wide, device, eager", device_run(1024, Inference::Eager)),
        ("wide, device, fused env kernel", device_run(1024, Inference::Fused)),
        ("wide, device, graph", device_run(1024, Inference::Graph)),
        ("4096 envs, device, eager", device_run(4096, Inference::Eager)),
        ("4096 envs, device, graph", device_run(4096, Inference::Graph)),
        ("wide, vectorized CPU envs, GPU policy, action sync stacked", host_run(ActionSync::Stacked)),
        ("wide, vectorized CPU envs, GPU policy, action sync per_item", host_run(ActionSync::PerItem)),
    ];
    for (label, spec) in cases {
        progress(&format!("PPO: {label}"));
        runs.push(match hotlab_workloads::train(&spec, &mut |_| {}) {
            Ok(t) => {
                let r = &t.report;
                let steps = (r.total_steps / spec.envs as u64).max(1) as f64;
                let phases: serde_json::Map<String, Value> = r
                    .profile
                    .phases
                    .iter()
                    .filter(|p| p.wall_s > 0.0)
                    .map(|p| {
                        (p.phase.name().to_string(), json!({"share": p.wall_s / r.wall_s, "device_s": p.device_s}))
                    })
                    .collect();
                json!({"run": label, "sps": r.sps, "mean_return_last_100": r.mean_return_last_100,
                       "host_syncs_per_step": r.counters.host_syncs as f64 / steps,
                       "h2d_copies_per_step": r.counters.h2d_copies as f64 / steps,
                       "gpu_memory": r.profile.gpu_memory, "phases": phases})
            }
            Err(e) => json!({"run": label, "error": format!("{e:#}")}),
        });
    }
    json!({ "multistep": stepping, "single_step": single, "ppo": runs })
}
