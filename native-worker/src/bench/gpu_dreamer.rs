//! `hotlab gpu-check`'s dreamer part: the world model trained on CUDA with the replay
//! buffer in pinned host memory and on the device (the same batches, so the same losses
//! up to cuDNN's nondeterministic backward), its losses falling, and its phases timed with
//! CUDA events; then `bench batch` on the GPU (samples/s, split and memory per batch size).

use super::gpu_check::{check, progress};
use crate::workloads::dreamer::bench::{run, BatchBench};
use hotlab_shared::spec::{DreamerSpec, ReplayAt, RunSpec, WorkloadSpec};
use serde_json::{json, Value};
use tch::Device;

/// The CI test's short run (tests/dreamer.rs), on CUDA with `replay`.
fn short_run(replay: ReplayAt) -> anyhow::Result<(Vec<[f64; 3]>, crate::train::TrainReport)> {
    let settings =
        DreamerSpec { batch: 8, seq_len: 8, prefill: 64, train_ratio: 16.0, replay, ..DreamerSpec::default() };
    let spec = RunSpec {
        workload: WorkloadSpec::Dreamer(settings),
        device: "cuda".into(),
        envs: 2,
        steps: 32,
        total_steps: 256,
        ..RunSpec::default()
    };
    let mut losses = Vec::new();
    let trained = crate::workloads::train(&spec, &mut |m| {
        if let Some(w) = m.point.world {
            losses.push([w.image, w.reward, w.cont]);
        }
    })?;
    Ok((losses, trained.report))
}

pub fn checks() -> Vec<Value> {
    let mut out = Vec::new();
    let mut runs = Vec::new();
    for replay in [ReplayAt::Device, ReplayAt::Pinned] {
        progress(&format!("dreamer on CUDA, --replay {replay}"));
        match short_run(replay) {
            Ok(r) => runs.push(r),
            Err(e) => out.push(check(&format!("dreamer_replay_{replay}"), false, "-", json!(format!("{e:#}")))),
        }
    }
    if let [(device, report), (pinned, _)] = runs.as_slice() {
        let falls = device.len() == 4 && device[0][0] > 3.0 * device[3][0] && device[0][2] > 1.5 * device[3][2];
        out.push(check(
            "dreamer_learns_on_cuda",
            falls,
            "image loss falls > 3×, continue > 1.5× over 64 train steps (as on the CPU)",
            json!({"losses": device, "h2d_copies": report.counters.h2d_copies}),
        ));
        let timed = report.profile.phases.iter().any(|p| p.device_s.is_some_and(|s| s > 0.0));
        out.push(check(
            "dreamer_phases_device_timed",
            timed,
            "CUDA-event time on its phases",
            json!(report.profile.gpu_memory),
        ));
        let close = device
            .iter()
            .zip(pinned)
            .all(|(a, b)| a.iter().zip(b).all(|(x, y)| (x - y).abs() <= 0.05 * x.abs().max(1e-3)));
        out.push(check(
            "dreamer_replay_pinned_matches_device",
            close,
            "the same losses within 5 % (the same batches; cuDNN's backward is not bit-reproducible)",
            json!({"device": device, "pinned": pinned}),
        ));
    }
    out
}

pub fn bench() -> Value {
    progress("dreamer bench batch on CUDA, sizes 16–512");
    let b = BatchBench {
        sizes: vec![16, 32, 64, 128, 256, 512],
        settings: DreamerSpec { size: 4, seq_len: 64, ..DreamerSpec::default() },
        seconds: 2.0,
        device: Device::Cuda(0),
        kind: tch::Kind::Float,
    };
    serde_json::to_value(run(&b, |_| {})).unwrap_or(Value::Null)
}
