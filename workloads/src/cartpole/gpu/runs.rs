//! PPO runs on the GPU: short learning runs with each kind of inference, `--preset gpu` to
//! its bar, and the benchmarks (the device env's stepping, single steps, PPO runs with
//! their phases).

use super::env::{multistep_buffers, multistep_launch};
use crate::cartpole::device::env::DeviceCartPole;
use hotlab_core::choices::{ActionSync, Backend, Inference};
use hotlab_core::run::ExecSpec;
use hotlab_spec::{PresetSpec, RunSpec};
use hotlab_train::cuda::gpu::Gpu;
use hotlab_train::gpu_check::{check, progress, timed};
use serde_json::{json, Value};
use std::sync::Arc;
use tch::{Device, Kind, Tensor};

/// A short PPO run on the GPU with `inference`; passes when it learns (mean return of the
/// last 100 episodes ≥ 150 after 300k steps; random play scores about 22).
pub(super) fn train_check(name: &str, inference: Inference) -> Value {
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
    match crate::train(&spec, &mut |_| {}) {
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

/// `--preset gpu` as it ships (4096 envs, the rollout and the whole update each one CUDA
/// graph): its learning bar, a mean return of at least 475 over the last 100 episodes, with
/// its steps/s, training time and graph replays.
pub(super) fn preset_gpu_check() -> Value {
    const NAME: &str = "preset_gpu_learns";
    let spec = match hotlab_specs::AnyPreset::find("gpu") {
        Ok(p) => p.spec(),
        Err(e) => return check(NAME, false, "-", json!(e)),
    };
    match crate::train(&spec, &mut |_| {}) {
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

/// The benchmarks: the multi-step kernel's stepping at 2^12 up to 2^`max_log2` envs, the
/// device env's single steps with and without its fused kernel, and PPO runs of the `wide`
/// preset on the device and host backends with their phases.
pub(super) fn benchmarks(gpu: &Arc<Gpu>, max_log2: u32) -> Vec<(&'static str, Value)> {
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
    let wide = hotlab_specs::AnyPreset::find("wide").expect("a preset").spec();
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
        runs.push(match crate::train(&spec, &mut |_| {}) {
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
    vec![("multistep", json!(stepping)), ("single_step", json!(single)), ("ppo", json!(runs))]
}
