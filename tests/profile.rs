//! `hotlab profile`: the report names the bottleneck a knob creates, the trace opens in
//! Perfetto, and the precision and telemetry knobs do what they say.

mod common;
use common::*;

/// Runs `hotlab profile … --report json` (short CartPole run on the CPU) and returns the report.
fn profile(extra: &[&str]) -> serde_json::Value {
    let out = run(hotlab()
        .args(["profile", "--device", "cpu", "--seed", "3", "--report", "json", "--total-steps", "8192"])
        .args(extra));
    assert!(out.status.success(), "{}", stderr(&out));
    last_json(&out)
}

fn knobs(report: &serde_json::Value) -> Vec<String> {
    report["recommendations"].as_array().unwrap().iter().map(|r| r["knob"].as_str().unwrap().to_string()).collect()
}

#[test]
fn spinning_subprocess_workers_rank_worker_wait_first_and_an_in_process_backend_is_advised() {
    let r = profile(&[
        "--envs",
        "8",
        "--backend",
        "subprocess",
        "--workers",
        "8",
        "--wait",
        "spin",
        "--total-steps",
        "4096",
    ]);
    assert_eq!(r["rows"][0]["phase"], "env_wait", "top bottleneck: {}", r["rows"][0]);
    assert!(r["rows"][0]["diagnosis"].as_str().unwrap().contains("spin polls"));
    let k = knobs(&r);
    assert!(k.iter().any(|x| x == "--backend vectorized"), "{k:?}");
    assert!(k.iter().any(|x| x == "--wait block"), "{k:?}");
    let rec = &r["recommendations"][0];
    assert!(rec["max_speedup"].as_f64().unwrap() > 1.0 && !rec["signature"].as_str().unwrap().is_empty());
}

#[test]
fn per_item_action_reads_show_up_as_read_back_and_stacked_is_advised() {
    let r = profile(&["--envs", "64", "--inference", "eager", "--action-sync", "per_item"]);
    let rows = r["rows"].as_array().unwrap();
    let readback = rows.iter().find(|row| row["phase"] == "action_readback").expect("a read-back row");
    assert!(readback["calls"].as_u64().unwrap() > 0);
    assert!(knobs(&r).iter().any(|x| x == "--action-sync stacked"), "{:?}", knobs(&r));
    // The split adds up, and the profiler says what it cost.
    let split = &r["split"];
    let sum: f64 = ["data_pct", "forward_pct", "backward_pct"].iter().map(|k| split[k].as_f64().unwrap()).sum();
    assert!((sum - 100.0).abs() < 1e-6, "{split}");
    assert!(r["profiler_overhead_pct"].as_f64().unwrap() >= 0.0);
    // The default knobs have none of those signatures.
    let fast = profile(&["--envs", "64"]);
    assert!(!knobs(&fast).iter().any(|x| x == "--action-sync stacked"));
}

#[test]
fn the_trace_has_what_perfetto_needs_and_markdown_is_the_default() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.json");
    let out = run(hotlab()
        .args(["profile", "--device", "cpu", "--total-steps", "4096", "--trace-steps", "2..6"])
        .arg("--trace")
        .arg(&path));
    assert!(out.status.success(), "{}", stderr(&out));
    let md = stdout(&out);
    assert!(md.contains("| bottleneck | time (s) | % of wall |"), "{md}");
    assert!(md.contains("**Split**"));
    let trace: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let spans: Vec<_> = events.iter().filter(|e| e["ph"] == "X").collect();
    assert!(!spans.is_empty());
    for e in &spans {
        for field in ["ph", "ts", "dur", "pid", "tid", "name"] {
            assert!(!e[field].is_null(), "span without {field}: {e}");
        }
        let step = e["args"]["step"].as_u64().unwrap();
        assert!((2..6).contains(&step), "span outside the window: {e}");
    }
    for phase in ["env_step", "policy_forward", "rollout_store"] {
        assert!(spans.iter().any(|e| e["name"] == phase), "no {phase} span");
    }
    assert!(events.iter().any(|e| e["ph"] == "C"), "counter events");
    let bad = run(hotlab().args(["profile", "--trace-steps", "5..2"]));
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("--trace-steps"), "{}", stderr(&bad));
}

#[test]
fn train_json_has_phase_totals_precision_and_telemetry() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(hotlab()
        .args(["train", "--device", "cpu", "--total-steps", "5120", "--telemetry-every", "2", "--json", "--out"])
        .arg(dir.path()));
    assert!(out.status.success(), "{}", stderr(&out));
    let r = last_json(&out);
    assert_eq!(r["precision"], "fp32");
    let phases = r["profile"]["phases"].as_array().unwrap();
    let wall: f64 = phases.iter().map(|p| p["wall_s"].as_f64().unwrap()).sum();
    assert!((wall - r["profile"]["wall_s"].as_f64().unwrap()).abs() < 1e-6, "phases add up to the profiled wall time");
    assert!(phases.iter().any(|p| p["phase"] == "telemetry" && p["calls"].as_u64().unwrap() > 0));
    // 10 updates, every 2nd: 5 events, all published (the queue holds 64).
    let t = &r["telemetry"];
    assert_eq!((t["sent"].as_u64(), t["dropped"].as_u64(), t["published"].as_u64()), (Some(5), Some(0), Some(5)));
    let lines = std::fs::read_to_string(dir.path().join("telemetry.jsonl")).unwrap();
    let events: Vec<serde_json::Value> = lines.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(events.iter().map(|e| e["update"].as_u64().unwrap()).collect::<Vec<_>>(), vec![2, 4, 6, 8, 10]);
    let e = &events[0];
    let sq: f64 = e["layers"].as_array().unwrap().iter().map(|l| l[1].as_f64().unwrap().powi(2)).sum();
    assert!((sq.sqrt() - e["global"].as_f64().unwrap()).abs() < 1e-4 * (1.0 + sq.sqrt()));
}

#[test]
fn fp16_on_the_cpu_is_refused_naming_the_flag() {
    let out = run(hotlab().args(["train", "--device", "cpu", "--precision", "fp16"]));
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("--precision") && err.contains("allowed on the CPU: fp32, bf16, auto"), "{err}");
    let out = run(hotlab().args(["train", "--precision", "fp8"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("fp32, fp16, bf16, auto"), "{}", stderr(&out));
}

#[test]
fn bf16_on_the_cpu_solves_cartpole_at_the_cleanrl_preset() {
    let out = run(hotlab().args(["train", "--preset", "cleanrl", "--device", "cpu", "--precision", "bf16", "--json"]));
    assert!(out.status.success(), "{}", stderr(&out));
    let r = last_json(&out);
    assert_eq!(r["precision"], "bf16");
    let ret = r["mean_return_last_100"].as_f64().unwrap();
    assert!(ret >= 475.0, "bf16: mean return of the last 100 episodes {ret}");
}
