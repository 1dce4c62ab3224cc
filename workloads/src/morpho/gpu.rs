//! `hotlab gpu-check`'s morpho part: the shim's graph capture of libtorch ops against the
//! same ops run eagerly; hosts trained on CUDA, each on its own stream (`--host-exec
//! per_env`), whose `--stream-wait every` and `moved` give the same run with more waits;
//! a sleeper pool's steps captured and replayed, giving the dynamic pool's run to rounding;
//! fp16 hosts with their loss scaler, captured or not; then decisions/s per setting on the
//! GPU (never asserted).

use hotlab_core::choices::{Backend, Precision};
use hotlab_spec::RunSpec;
use hotlab_specs::morpho::{HostExec, SlotPool, StreamWait};
use hotlab_specs::morpho::{GRAPH_REPLAYS, HOST_PASSES, HOST_STEPS_SKIPPED, STREAM_WAITS};
use hotlab_specs::MorphoSpec;
use hotlab_specs::WorkloadSpec;
use hotlab_train::cuda::shim::{Graph, Stream};
use hotlab_train::gpu_check::{check, progress};
use serde_json::{json, Value};
use std::time::Instant;
use tch::{Device, Kind, Tensor};

/// A short morpho run on CUDA: its learning figures per update and its report.
fn short_run(
    settings: MorphoSpec,
    envs: usize,
    steps: usize,
) -> anyhow::Result<(Vec<Value>, hotlab_train::TrainReport)> {
    let mut spec = RunSpec {
        workload: WorkloadSpec::Morpho(settings),
        device: "cuda".into(),
        envs,
        steps,
        total_steps: (envs * steps * 2) as u64,
        seed: 4,
        ..RunSpec::default()
    };
    spec.exec.backend = Backend::Vectorized;
    spec.ppo.minibatches = 2;
    let mut figures = Vec::new();
    let trained = crate::train(&spec, &mut |m| {
        let p = &m.point;
        let loss = |name| p.losses.get(name);
        figures.push(json!([
            p.global_step,
            p.mean_return_last_100,
            loss("policy_loss"),
            loss("value_loss"),
            loss("entropy")
        ]));
    })?;
    Ok((figures, trained.report))
}

fn small(stream_wait: StreamWait, host_exec: HostExec, slots: SlotPool) -> MorphoSpec {
    MorphoSpec { images: 256, epochs: 3, width: 8, tasks: 2, stream_wait, host_exec, slots, ..MorphoSpec::default() }
}

/// `x ← 2x + 1` three times, captured once and replayed, against the same ops eagerly.
fn graph_check() -> Value {
    let run = || -> anyhow::Result<(Vec<f32>, Vec<f32>)> {
        let side = Stream::new(0)?;
        let default = Stream::current(0)?;
        let mut x = Tensor::arange(8, (Kind::Float, Device::Cuda(0)));
        let mut eager = x.copy();
        for _ in 0..3 {
            let _ = eager.g_mul_scalar_(2.0).g_add_scalar_(1.0);
        }
        side.wait_for(&default)?;
        side.make_current()?;
        let graph = Graph::capture(|| {
            let _ = x.g_mul_scalar_(2.0).g_add_scalar_(1.0);
            Ok(())
        });
        default.make_current()?;
        let graph = graph?;
        // Captured ops do not run: x is still 0..8; three replays make it the eager result.
        for _ in 0..3 {
            graph.replay()?;
        }
        default.synchronize()?;
        Ok((Vec::<f32>::try_from(&x)?, Vec::<f32>::try_from(&eager)?))
    };
    match run() {
        Ok((replayed, eager)) => check(
            "cuda_shim_graph_replays_libtorch_ops",
            replayed == eager,
            "bit for bit",
            json!({"replayed": replayed, "eager": eager}),
        ),
        Err(e) => check("cuda_shim_graph_replays_libtorch_ops", false, "-", json!(format!("{e:#}"))),
    }
}

/// Two runs' figures per update, equal to 1e-3 relative (counts exactly).
fn close_figures(a: &[Value], b: &[Value]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(a, b)| {
            a.as_array().into_iter().flatten().zip(b.as_array().into_iter().flatten()).all(|(x, y)| {
                match (x.as_f64(), y.as_f64()) {
                    (Some(x), Some(y)) => (x - y).abs() <= 1e-3 * (1.0 + y.abs()),
                    _ => x == y,
                }
            })
        })
}

pub fn checks() -> Vec<Value> {
    // The `stream-waits` lesson: a host stream's waits per env step fall with `moved`.
    let mut out = vec![graph_check()];
    let mut runs = Vec::new();
    for wait in [StreamWait::Moved, StreamWait::Every] {
        progress(&format!("morpho, hosts on CUDA with a stream each, --stream-wait {wait}"));
        match short_run(small(wait, HostExec::PerEnv, SlotPool::Dynamic), 4, 3) {
            Ok(r) => runs.push(r),
            Err(e) => out.push(check(&format!("morpho_streams_{wait}"), false, "-", json!(format!("{e:#}")))),
        }
    }
    progress("morpho on CUDA, --slots sleeper: each host's step captured as a graph");
    let sleeper = short_run(small(StreamWait::Moved, HostExec::PerEnv, SlotPool::Sleeper), 4, 3);
    match (&sleeper, runs.first()) {
        (Ok((figures, report)), Some((dynamic, _))) => {
            let close = close_figures(figures, dynamic);
            let replays = report.counters.own.get(GRAPH_REPLAYS);
            out.push(check(
                "morpho_sleeper_step_captured",
                replays > 0 && close,
                "graph replays > 0; the dynamic run's figures to 1e-3",
                json!({"graph_replays": replays, "host_passes": report.counters.own.get(HOST_PASSES),
                       "figures": {"sleeper": figures, "dynamic": dynamic}}),
            ));
        }
        (Err(e), _) => out.push(check("morpho_sleeper_step_captured", false, "-", json!(format!("{e:#}")))),
        _ => {}
    }
    for slots in [SlotPool::Dynamic, SlotPool::Sleeper] {
        progress(&format!("morpho on CUDA, fp16 hosts with their loss scaler, --slots {slots}"));
        let s = MorphoSpec { host_precision: Precision::Fp16, ..small(StreamWait::Moved, HostExec::PerEnv, slots) };
        let name = format!("morpho_fp16_hosts_{slots}");
        match short_run(s, 4, 3) {
            Ok((figures, report)) => {
                let finite = figures.len() == 2
                    && figures
                        .iter()
                        .flat_map(|f| f.as_array().cloned().unwrap_or_default())
                        .all(|v| v.as_f64().is_none_or(f64::is_finite));
                let captured = slots == SlotPool::Dynamic || report.counters.own.get(GRAPH_REPLAYS) > 0;
                out.push(check(
                    &name,
                    finite && captured,
                    "finite figures; sleeper steps captured with the scaler inside",
                    json!({"figures": figures, "graph_replays": report.counters.own.get(GRAPH_REPLAYS),
                           "host_steps_skipped": report.counters.own.get(HOST_STEPS_SKIPPED),
                           "host_passes": report.counters.own.get(HOST_PASSES)}),
                ));
            }
            Err(e) => out.push(check(&name, false, "-", json!(format!("{e:#}")))),
        }
    }
    if let [(moved, r_moved), (every, r_every)] = runs.as_slice() {
        let streams = r_moved.notes.iter().any(|n| n.contains("own CUDA stream"));
        let (w_moved, w_every) = (r_moved.counters.own.get(STREAM_WAITS), r_every.counters.own.get(STREAM_WAITS));
        out.push(check(
            "morpho_hosts_train_on_cuda_streams",
            streams && moved.len() == 2 && w_moved > 0 && w_every > w_moved && close_figures(moved, every),
            "the same figures to 1e-3 (cuDNN's backward on CUDA is not bit-reproducible); more waits with every",
            json!({"notes": r_moved.notes, "stream_waits": {"moved": w_moved, "every": w_every},
                   "figures": {"moved": moved, "every": every}, "host_passes": r_moved.counters.own.get(HOST_PASSES)}),
        ));
    }
    out
}

/// Decisions/s of a morpho run on CUDA per setting (16 envs, width 16), never asserted.
pub fn bench() -> Value {
    let settings = [
        ("per_env streams, moved", StreamWait::Moved, HostExec::PerEnv, SlotPool::Dynamic),
        ("per_env streams, every", StreamWait::Every, HostExec::PerEnv, SlotPool::Dynamic),
        ("per_env streams, sleeper (captured)", StreamWait::Moved, HostExec::PerEnv, SlotPool::Sleeper),
        ("batched", StreamWait::Moved, HostExec::Batched, SlotPool::Dynamic),
    ];
    let mut out = Vec::new();
    for (name, wait, exec, slots) in settings {
        progress(&format!("morpho on CUDA, 16 envs: {name}"));
        let s =
            MorphoSpec { stream_wait: wait, host_exec: exec, slots, images: 1024, epochs: 4, ..MorphoSpec::default() };
        let t = Instant::now();
        match short_run(s, 16, 4) {
            Ok((_, r)) => out.push(json!({
                "setting": name, "decisions_per_s": r.sps, "wall_s": r.wall_s, "total_s": t.elapsed().as_secs_f64(),
                "stream_waits": r.counters.own.get(STREAM_WAITS), "host_passes": r.counters.own.get(HOST_PASSES),
                "graph_replays": r.counters.own.get(GRAPH_REPLAYS),
            })),
            Err(e) => out.push(json!({"setting": name, "error": format!("{e:#}")})),
        }
    }
    json!(out)
}
