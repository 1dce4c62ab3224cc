//! `hotlab profile --torch-trace trace.json`: a PyTorch Profiler trace you already have
//! (`prof.export_chrome_trace`, seed 004's plan), read into the same catalogue-mapped table:
//! where its wall went (the update's backward and optimizer, reads of tensor values,
//! copies to the device, the rest), what its ops cost per step, and the advice its counts
//! and times argue for, each naming its row and lesson.
//!
//! A trace knows ops, not env steps: a step here is a `ProfilerStep#N` (what `prof.step()`
//! marks), else an optimizer step, else the whole trace, and the report says which.

use anyhow::{Context, Result};
use hotlab_core::advice::{amdahl, Recommendation};
use hotlab_core::profile::Phase;
use hotlab_report::{Report, Row, Split};
use hotlab_specs::external::HOST_READ;
use serde::Deserialize;
use std::collections::HashMap;
use std::path::Path;

/// One trace event, as far as the report reads it.
#[derive(Deserialize)]
struct Event {
    #[serde(default)]
    ph: String,
    #[serde(default)]
    cat: Option<String>,
    #[serde(default)]
    name: String,
    #[serde(default)]
    ts: f64,
    #[serde(default)]
    dur: f64,
    #[serde(default)]
    tid: serde_json::Value,
    #[serde(default)]
    args: Option<Args>,
}

#[derive(Deserialize)]
struct Args {
    #[serde(default)]
    bytes: Option<f64>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Document {
    Object {
        #[serde(rename = "traceEvents")]
        trace_events: Vec<Event>,
    },
    List(Vec<Event>),
}

/// What a trace says, summed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TraceFacts {
    /// From its first event to its last, seconds.
    pub wall_s: f64,
    /// Its steps, and what one is.
    pub steps: u64,
    pub per: &'static str,
    /// CPU ops that no other op holds (what Python dispatched) and their seconds.
    pub top_ops: u64,
    pub top_ops_s: f64,
    /// Reads of tensor values (`aten::_local_scalar_dense`: `.item()`, `.tolist()`, `bool()`).
    pub reads: u64,
    pub reads_s: f64,
    /// The device runtime's waits (`cudaStreamSynchronize`, `cudaDeviceSynchronize`…).
    pub syncs: u64,
    pub syncs_s: f64,
    /// Host→device copies on the device (`Memcpy HtoD`), their bytes and seconds.
    pub h2d: u64,
    pub h2d_bytes: u64,
    pub h2d_s: f64,
    /// The backward: autograd's functions that no other op holds.
    pub backward_s: f64,
    pub backward_calls: u64,
    /// `Optimizer.step#…` annotations.
    pub optimizer_steps: u64,
    pub optimizer_s: f64,
    /// Device kernels and their seconds (a CPU trace has none).
    pub kernels: u64,
    pub kernels_s: f64,
    /// The CPU ops dispatched most: name, calls, seconds.
    pub busiest: Vec<(String, u64, f64)>,
}

/// Reads a Chrome trace of PyTorch Profiler; a file that is not one is refused saying so.
pub fn read(path: &Path) -> Result<TraceFacts> {
    let text = std::fs::read(path).with_context(|| format!("--torch-trace: cannot read {}", path.display()))?;
    let doc: Document = serde_json::from_slice(&text).with_context(|| {
        format!("--torch-trace: {} is not a Chrome trace (a JSON object with traceEvents, as prof.export_chrome_trace writes)", path.display())
    })?;
    let events = match doc {
        Document::Object { trace_events } => trace_events,
        Document::List(events) => events,
    };
    let facts = summarize(&events);
    if facts.top_ops == 0 {
        anyhow::bail!(
            "--torch-trace: {} holds no CPU ops (cat cpu_op): record it with ProfilerActivity.CPU",
            path.display()
        );
    }
    Ok(facts)
}

/// An event's category (empty where it has none).
fn cat(e: &Event) -> &str {
    e.cat.as_deref().unwrap_or("")
}

fn summarize(events: &[Event]) -> TraceFacts {
    let spans: Vec<&Event> = events.iter().filter(|e| e.ph == "X").collect();
    let first = spans.iter().map(|e| e.ts).fold(f64::INFINITY, f64::min);
    let last = spans.iter().map(|e| e.ts + e.dur).fold(f64::NEG_INFINITY, f64::max);
    let mut f = TraceFacts { wall_s: ((last - first) / 1e6).max(0.0), ..TraceFacts::default() };
    // Top-level CPU ops per thread: an op inside another one's span is its child.
    let mut threads: HashMap<String, Vec<&Event>> = HashMap::new();
    for e in spans.iter().filter(|e| cat(e) == "cpu_op") {
        threads.entry(e.tid.to_string()).or_default().push(e);
    }
    let mut by_name: HashMap<&str, (u64, f64)> = HashMap::new();
    for ops in threads.values_mut() {
        ops.sort_by(|a, b| a.ts.total_cmp(&b.ts).then(b.dur.total_cmp(&a.dur)));
        let mut open_until = f64::NEG_INFINITY;
        for e in ops.iter() {
            if e.ts >= open_until {
                open_until = e.ts + e.dur;
                f.top_ops += 1;
                f.top_ops_s += e.dur / 1e6;
                let slot = by_name.entry(e.name.as_str()).or_default();
                slot.0 += 1;
                slot.1 += e.dur / 1e6;
                if e.name.starts_with("autograd::engine::evaluate_function") {
                    f.backward_calls += 1;
                    f.backward_s += e.dur / 1e6;
                }
            }
        }
    }
    let mut busiest: Vec<(String, u64, f64)> = by_name.into_iter().map(|(n, (c, s))| (n.to_string(), c, s)).collect();
    busiest.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    busiest.truncate(8);
    f.busiest = busiest;
    let mut profiler_steps = 0;
    for e in &spans {
        match (cat(e), e.name.as_str()) {
            ("cpu_op", "aten::_local_scalar_dense") => {
                f.reads += 1;
                f.reads_s += e.dur / 1e6;
            }
            ("cuda_runtime" | "hip_runtime", n) if n.ends_with("Synchronize") => {
                f.syncs += 1;
                f.syncs_s += e.dur / 1e6;
            }
            ("gpu_memcpy", n) if n.contains("HtoD") => {
                f.h2d += 1;
                f.h2d_s += e.dur / 1e6;
                f.h2d_bytes += e.args.as_ref().and_then(|a| a.bytes).unwrap_or(0.0) as u64;
            }
            ("kernel", _) => {
                f.kernels += 1;
                f.kernels_s += e.dur / 1e6;
            }
            ("user_annotation" | "cpu_op", n) if n.starts_with("Optimizer.step#") => {
                f.optimizer_steps += 1;
                f.optimizer_s += e.dur / 1e6;
            }
            (_, n) if n.starts_with("ProfilerStep#") => profiler_steps += 1,
            _ => {}
        }
    }
    (f.steps, f.per) = match (profiler_steps, f.optimizer_steps) {
        (0, 0) => (1, "the whole trace"),
        (0, n) => (n, "optimizer step"),
        (n, _) => (n, "profiler step"),
    };
    f
}

/// The trace as the bottleneck report: its phases ranked, and the advice its counts argue for.
pub fn report(f: &TraceFacts) -> Report {
    let wall = f.wall_s.max(1e-12);
    let per = |n: f64| n / f.steps.max(1) as f64;
    let device = f.kernels > 0;
    let read_s = if device { f.syncs_s } else { f.reads_s };
    let claimed = f.backward_s + f.optimizer_s + read_s + f.h2d_s;
    let mut rows = vec![
        row(Phase::BACKWARD, f.backward_s, f.backward_calls, wall, "autograd's functions (the backward)".into()),
        row(Phase::OPTIMIZER, f.optimizer_s, f.optimizer_steps, wall, "Optimizer.step".into()),
        row(HOST_READ, read_s, if device { f.syncs } else { f.reads }, wall, reads_line(f, device)),
        row(Phase::OBS_TRANSFER, f.h2d_s, f.h2d, wall, format!("Memcpy HtoD on the device, {} bytes", f.h2d_bytes)),
        row(
            Phase::OTHER,
            (wall - claimed).max(0.0),
            f.top_ops,
            wall,
            format!(
                "forwards, losses and the script's own Python (a trace does not tell passes apart without its stacks); the ops dispatched most: {}",
                f.busiest.iter().take(4).map(|(n, c, _)| format!("{n} ×{c}")).collect::<Vec<_>>().join(", ")
            ),
        ),
    ];
    rows.retain(|r| r.wall_s > 0.0);
    rows.sort_by(|a, b| b.wall_s.total_cmp(&a.wall_s));
    let backward = 100.0 * (f.backward_s + f.optimizer_s) / wall;
    let data = 100.0 * (read_s + f.h2d_s) / wall;
    let split = Split {
        data_pct: data,
        forward_pct: (100.0 - backward - data).max(0.0),
        backward_pct: backward,
        verdict: format!(
            "{:.1} top-level ops per {} ({:.1} µs each)",
            per(f.top_ops as f64),
            f.per,
            1e6 * f.top_ops_s / f.top_ops.max(1) as f64
        ),
        next_action:
            "profile your script with hotlab (hotlab profile -- python …) for env steps, call sites and verified advice"
                .into(),
    };
    let what = match f.per {
        "profiler step" => format!("a step here is a profiler step (prof.step()): {} of them", f.steps),
        "optimizer step" => {
            format!("a step here is an optimizer step (the trace marks no profiler step): {} of them", f.steps)
        }
        _ => "the whole trace is one step (it marks neither profiler nor optimizer steps)".to_string(),
    };
    let mut notes = vec![format!("{what} in {:.2} s", f.wall_s)];
    if !device {
        notes.push("a CPU-only trace: no device kernels, copies or syncs; reads of tensor values (aten::_local_scalar_dense) are counted where a GPU would sync, torch's own reads of host values (Adam's step count) among them".into());
    }
    Report {
        wall_s: f.wall_s,
        env_steps: 0,
        steps_per_s: 0.0,
        rows,
        split,
        recommendations: advice(f, device),
        profiler_overhead_pct: 0.0,
        steady_sps: None,
        notes,
    }
}

fn row(phase: Phase, wall_s: f64, calls: u64, wall: f64, diagnosis: String) -> Row {
    let per_call_us = if calls > 0 { 1e6 * wall_s / calls as f64 } else { 0.0 };
    Row { phase, wall_s, percent: 100.0 * wall_s / wall, calls, per_call_us, diagnosis }
}

fn reads_line(f: &TraceFacts, device: bool) -> String {
    let per = |n: u64| n as f64 / f.steps.max(1) as f64;
    match device {
        true => format!(
            "{} waits on the device ({:.1} per {}); {} reads of tensor values",
            f.syncs,
            per(f.syncs),
            f.per,
            f.reads
        ),
        false => {
            format!("{} reads of tensor values (aten::_local_scalar_dense), {:.1} per {}", f.reads, per(f.reads), f.per)
        }
    }
}

/// Ops per step past which, at this cost each, dispatch rather than arithmetic is the cost.
const MANY_OPS: f64 = 200.0;
const CHEAP_OP_US: f64 = 20.0;

/// The advice a trace's counts argue for (each a change to the code: a trace has no flags).
fn advice(f: &TraceFacts, device: bool) -> Vec<Recommendation> {
    let wall = f.wall_s.max(1e-12);
    let per = |n: u64| n as f64 / f.steps.max(1) as f64;
    let mut out = Vec::new();
    let (waits, waits_s) = if device { (f.syncs, f.syncs_s) } else { (f.reads, f.reads_s) };
    if per(waits) >= 2.0 {
        let what = if device { "waits on the device" } else { "reads of tensor values (syncs on a GPU)" };
        let signature = format!("{:.1} {what} per {}, {:.1}% of the wall", per(waits), f.per, 100.0 * waits_s / wall);
        out.push(
            Recommendation::bounded("", HOST_READ, amdahl(waits_s / wall), signature)
                .fixing("read values once per step (stack them, one .cpu()), or keep them on the device; find the call sites with hotlab profile -- python …")
                .teaching(4, "per-item-sync"),
        );
    }
    if device && per(f.h2d) >= 2.0 {
        let signature = format!(
            "{:.1} host→device copies per {} of {:.0} bytes each",
            per(f.h2d),
            f.per,
            f.h2d_bytes as f64 / f.h2d.max(1) as f64
        );
        out.push(
            Recommendation::bounded("", Phase::OBS_TRANSFER, amdahl(f.h2d_s / wall), signature)
                .fixing("copy once per step: one pinned host buffer, one non_blocking copy")
                .teaching(2, "observation-copies"),
        );
    }
    let each_us = 1e6 * f.top_ops_s / f.top_ops.max(1) as f64;
    if per(f.top_ops) >= MANY_OPS && each_us < CHEAP_OP_US {
        let signature = format!(
            "{:.0} ops dispatched per {} at {each_us:.1} µs each: the fixed cost of each op, not arithmetic",
            per(f.top_ops),
            f.per
        );
        out.push(
            Recommendation::bounded("", Phase::OTHER, amdahl(0.5 * f.top_ops_s / wall), signature)
                .fixing("fewer, larger ops: a fused or compiled forward (torch.compile), a captured CUDA graph, larger batches")
                .teaching(5, "op-dispatch"),
        );
    }
    if device && f.kernels_s / wall < 0.3 {
        let signature =
            format!("the device computed {:.0}% of the wall: it waits on the host", 100.0 * f.kernels_s / wall);
        out.push(
            Recommendation::bounded("", Phase::OTHER, amdahl(1.0 - f.kernels_s / wall), signature)
                .fixing("more work per launch: more envs per forward, larger minibatches")
                .teaching(10, "batch-size"),
        );
    }
    out.sort_by(|a, b| b.max_speedup.total_cmp(&a.max_speedup));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(cat: &str, name: &str, ts: f64, dur: f64) -> serde_json::Value {
        serde_json::json!({"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": 1})
    }

    #[test]
    fn a_trace_s_ops_reads_copies_and_steps_are_counted_and_advised() {
        let mut events = vec![
            ev("user_annotation", "ProfilerStep#1", 0.0, 100.0),
            ev("user_annotation", "ProfilerStep#2", 100.0, 100.0),
        ];
        for step in 0..2 {
            let t = 100.0 * step as f64;
            events.push(ev("cpu_op", "aten::linear", t, 10.0));
            events.push(ev("cpu_op", "aten::addmm", t + 1.0, 5.0)); // inside linear: not top-level
            for k in 0..3 {
                let at = t + 20.0 + 10.0 * k as f64;
                events.push(ev("cpu_op", "aten::item", at, 4.0));
                events.push(ev("cpu_op", "aten::_local_scalar_dense", at + 1.0, 2.0));
            }
            events.push(ev("cpu_op", "autograd::engine::evaluate_function: AddmmBackward0", t + 60.0, 20.0));
        }
        let doc = serde_json::json!({"traceEvents": events});
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.json");
        std::fs::write(&path, doc.to_string()).unwrap();
        let f = read(&path).unwrap();
        assert_eq!((f.steps, f.per), (2, "profiler step"));
        assert_eq!((f.top_ops, f.reads, f.backward_calls), (2 * 5, 6, 2), "{f:?}");
        assert!((f.wall_s - 200e-6).abs() < 1e-12 && (f.backward_s - 40e-6).abs() < 1e-12);
        let r = report(&f);
        let rows: Vec<Option<u8>> = r.recommendations.iter().map(|r| r.row).collect();
        assert_eq!(rows, [Some(4)], "3 reads a step; 5 ops a step are not many");
        assert!(r.recommendations[0].signature.starts_with("3.0 reads of tensor values"), "{:?}", r.recommendations);
        assert!(r.markdown().contains("a step here is a profiler step (prof.step()): 2 of them"), "{}", r.markdown());
        std::fs::write(&path, "{\"not\": \"a trace\"}").unwrap();
        assert!(format!("{:#}", read(&path).unwrap_err()).contains("is not a Chrome trace"));
    }
}
