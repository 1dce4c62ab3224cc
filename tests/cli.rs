//! The `hotlab` command line: rejected values, the JSON contract, checkpoints, seeding.

mod common;
use common::*;

/// Runs `hotlab ARGS`, expects exit code 2 and one stderr line naming `flag`.
fn rejected(args: &[&str], flag: &str) {
    let out = run(hotlab().args(args));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{args:?} should exit 2; stderr: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: one line expected, got: {err}");
    assert!(err.contains(flag), "{args:?}: the message should name {flag}: {err}");
}

fn has_cuda() -> bool {
    let out = run(hotlab().args(["system", "--json"]));
    last_json(&out)["cuda_available"].as_bool().unwrap()
}

#[test]
fn invalid_values_exit_2_naming_the_flag() {
    rejected(&["train", "--envs", "0"], "--envs");
    rejected(&["train", "--envs", "-3"], "--envs");
    rejected(&["train", "--steps", "0"], "--steps");
    rejected(&["train", "--minibatches", "3"], "--minibatches");
    rejected(&["train", "--minibatches", "0"], "--minibatches");
    rejected(&["train", "--epochs", "0"], "--epochs");
    rejected(&["train", "--total-steps", "100"], "--total-steps");
    rejected(&["train", "--lr", "abc"], "--lr");
    rejected(&["train", "--lr", "0"], "--lr");
    rejected(&["train", "--gamma", "1.5"], "--gamma");
    rejected(&["train", "--gae-lambda", "-0.1"], "--gae-lambda");
    rejected(&["train", "--clip", "0"], "--clip");
    rejected(&["train", "--ent-coef", "-1"], "--ent-coef");
    rejected(&["train", "--max-grad-norm", "0"], "--max-grad-norm");
    rejected(&["train", "--hidden", "64,0"], "--hidden");
    rejected(&["train", "--hidden", "64,x"], "--hidden");
    rejected(&["train", "--device", "gpu"], "--device");
    rejected(&["train", "--device", "cuda:99"], "--device");
    rejected(&["train", "--preset", "huge"], "--preset");
    rejected(&["train", "--env", "mujoco"], "--env");
    rejected(&["train", "--inference", "graph"], "--inference");
    rejected(&["train", "--frobnicate"], "--frobnicate");
    rejected(&["train", "--backend", "gpu"], "--backend");
    rejected(&["train", "--backend", "threads", "--envs", "4", "--workers", "9"], "--workers");
    rejected(&["train", "--wait", "sometimes"], "--wait");
    rejected(&["train", "--transfer", "teleport"], "--transfer");
    rejected(&["train", "--action-sync", "never"], "--action-sync");
    rejected(&["bench", "envs", "--envs", "0"], "--envs");
    rejected(&["bench", "envs", "--seconds", "0"], "--seconds");
    rejected(&["bench", "envs", "--peer", "envpol"], "--peer");
    rejected(&["eval", "--checkpoint", "/nonexistent/dir"], "--checkpoint");
    rejected(&["serve", "--port", "0", "--token", "short-token"], "--token");
    rejected(&["train", "--backend", "subprocess", "--worker-timeout", "0"], "--worker-timeout");
    let huge = ["train", "--env", "proof", "--envs", "1024", "--steps", "65536", "--total-steps", "67108864"];
    rejected(&huge, "GiB available");
    rejected(&["serve", "--port", "99999"], "--port");
    rejected(&["train", "--backend", "device", "--inference", "graph", "--device", "cpu"], "--inference");
    rejected(&["train", "--env", "proof", "--inference", "graph", "--device", "cuda"], "--inference");
    rejected(&["gpu-check", "--max-log2-envs", "30"], "--max-log2-envs");
    if !has_cuda() {
        // `auto` resolves to the CPU here: the graph needs CUDA.
        rejected(&["train", "--backend", "device", "--inference", "graph"], "--inference");
        let out = run(hotlab().args(["train", "--backend", "device", "--inference", "graph"]));
        assert!(stderr(&out).contains("needs a CUDA GPU"), "{}", stderr(&out));
        rejected(&["train", "--device", "cuda"], "--device");
        let out = run(hotlab().args(["train", "--device", "cuda"]));
        assert!(stderr(&out).contains("no CUDA device is available"), "{}", stderr(&out));
    }
}

#[test]
fn system_json_reports_versions_devices_and_cores() {
    let info = last_json(&run(hotlab().args(["system", "--json"])));
    assert_eq!(info["name"], "hotlab");
    assert!(info["torch_version"].as_str().unwrap().starts_with("2.11.0"), "{info}");
    assert!(info["cpu_cores"].as_u64().unwrap() >= 1);
    assert_eq!(info["devices"][0]["id"], "cpu");
    let gpus = info["devices"].as_array().unwrap().len() - 1;
    assert_eq!(gpus > 0, info["cuda_available"].as_bool().unwrap());
}

/// Every NVRTC kernel compiles here (no GPU: NVRTC is a library of the torch wheel), and
/// `scripts/gpu-check` finds the venv, sees no GPU and falls back to compiling only, without
/// its lab part.
#[test]
fn gpu_check_compiles_every_kernel_without_a_gpu_and_the_script_falls_back() {
    let out = run(hotlab().args(["gpu-check", "--compile-only", "--json"]));
    assert!(out.status.success(), "{}", stderr(&out));
    let s = last_json(&out);
    assert_eq!(s["ok"], true, "{s}");
    assert!(s["nvrtc"]["version"].as_str().unwrap().starts_with("13."), "{s}");
    assert!(s["torch"].as_str().unwrap().starts_with("2.11.0"), "the libtorch it was built against: {s}");
    let compiled = s["nvrtc"]["compiled"].as_array().unwrap();
    assert_eq!(compiled.len(), 3);
    assert!(compiled.iter().all(|c| c["ok"] == true && c["ptx_bytes"].as_u64().unwrap() > 1000), "{s}");
    assert_eq!(
        s["nvrtc"]["kernels"],
        serde_json::json!(["cartpole_step", "cartpole_multistep", "rollout_step", "gae", "clip_adam", "ppo_loss_grad"])
    );
    if has_cuda() {
        return; // on a GPU box the script runs the whole check instead
    }
    let plain = run(hotlab().args(["gpu-check", "--no-bench"]));
    assert_eq!(plain.status.code(), Some(1), "no GPU: the full check fails");
    assert!(stdout(&plain).contains("--compile-only"), "and says what runs here: {}", stdout(&plain));

    let results = tempfile::tempdir().unwrap();
    let docs_before = std::fs::read_to_string(repo().join("docs/gpu-results.md")).unwrap();
    let script = run(std::process::Command::new(repo().join("scripts/gpu-check"))
        .arg(python().parent().and_then(|bin| bin.parent()).unwrap())
        .arg(results.path())
        .env("HOTLAB_BIN", env!("CARGO_BIN_EXE_hotlab")));
    assert!(script.status.success(), "{}{}", stdout(&script), stderr(&script));
    assert!(stdout(&script).contains("no GPU on this machine"), "{}", stdout(&script));
    assert!(stdout(&script).contains("no lab part"), "the lab part needs the GPU: {}", stdout(&script));
    assert!(!results.path().join("lab-check.json").exists());
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(results.path().join("gpu-check.json")).unwrap()).unwrap();
    assert_eq!((json["ok"].clone(), json["gpu"].clone()), (true.into(), serde_json::Value::Null));
    let md = std::fs::read_to_string(results.path().join("gpu-results.md")).unwrap();
    assert!(md.contains("no GPU (compile only)") && md.contains("| compute_90 |"), "{md}");
    assert!(std::fs::read_to_string(results.path().join("gpu-check.log")).unwrap().contains("compiling the kernels"));
    assert_eq!(std::fs::read_to_string(repo().join("docs/gpu-results.md")).unwrap(), docs_before, "docs untouched");

    let bad = run(std::process::Command::new(repo().join("scripts/gpu-check")).arg("/nonexistent/venv"));
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("VENV"), "{}", stderr(&bad));
}

/// Off CUDA the device backend's fused env kernel falls back to tensor ops, and says so;
/// no device timer runs, so no phase has device time.
#[test]
fn the_device_backend_says_what_falls_back_without_cuda() {
    if has_cuda() {
        return; // gpu-check covers the CUDA side
    }
    let dir = tempfile::tempdir().unwrap();
    let s = short_run(dir.path(), "3", &["--backend", "device", "--inference", "fused"]);
    let notes = s["notes"].to_string();
    assert!(notes.contains("the envs step as tensor ops (the fused env kernel needs CUDA)"), "{notes}");
    assert!(s["profile"]["phases"].as_array().unwrap().iter().all(|p| p["device_s"].is_null()), "{s}");
    assert!(s["profile"].get("gpu_memory").is_none(), "{s}");
}

fn short_run(dir: &std::path::Path, seed: &str, extra: &[&str]) -> serde_json::Value {
    let out = run(hotlab()
        .args(["train", "--device", "cpu", "--total-steps", "4096", "--seed", seed, "--json", "--out"])
        .arg(dir)
        .args(extra));
    assert!(out.status.success(), "train failed: {}", stderr(&out));
    last_json(&out)
}

#[test]
fn train_json_summary_checkpoint_metrics_and_eval() {
    let dir = tempfile::tempdir().unwrap();
    let report = short_run(dir.path(), "3", &["--envs", "8", "--steps", "64", "--minibatches", "8"]);
    for key in ["env", "device", "total_steps", "wall_s", "sps", "episodes", "mean_return_last_100", "config"] {
        assert!(report.get(key).is_some(), "missing {key}: {report}");
    }
    assert_eq!(report["env"], "cartpole");
    assert_eq!(report["device"], "cpu");
    assert_eq!(report["total_steps"], 4096);
    assert_eq!(report["config"]["envs"], 8);
    assert_eq!(report["config"]["ppo"]["minibatches"], 8);
    assert_eq!(report["config"]["ppo"]["epochs"], 4, "preset values fill what was not given");
    let sps = report["sps"].as_f64().unwrap();
    let wall = report["wall_s"].as_f64().unwrap();
    assert!((sps * wall - 4096.0).abs() < 1.0, "sps = total_steps / wall_s");

    let metrics = std::fs::read_to_string(dir.path().join("metrics.jsonl")).unwrap();
    assert_eq!(metrics.lines().count(), 8, "one line per update");
    let last: serde_json::Value = serde_json::from_str(metrics.lines().last().unwrap()).unwrap();
    assert_eq!(last["global_step"], 4096);
    assert!(last["policy_loss"].as_f64().unwrap().is_finite());

    let out = run(hotlab().args(["eval", "--episodes", "5", "--json", "--checkpoint"]).arg(dir.path()));
    assert!(out.status.success(), "{}", stderr(&out));
    let eval = last_json(&out);
    assert_eq!(eval["episodes"], 5);
    let mean = eval["mean_return"].as_f64().unwrap();
    assert!((1.0..=500.0).contains(&mean), "{eval}");
    // CartPole has no tasks of its own, so no validation set to tune on.
    let out = run(hotlab().args(["eval", "--task-set", "validation", "--checkpoint"]).arg(dir.path()));
    assert!(!out.status.success() && stderr(&out).contains("--task-set validation"), "{}", stderr(&out));
    // Nor baselines to leave out.
    rejected(&["eval", "--no-baselines", "--checkpoint", dir.path().to_str().unwrap()], "--no-baselines");
}

/// The helper thread (the critic's half of each minibatch, half of each rollout step
/// at 64 envs) changes where the work runs, not what it computes: `--threads 2` and
/// `--threads 1` train the same weights.
#[test]
fn the_helper_thread_does_not_change_the_run() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let shape = ["--envs", "64", "--steps", "16", "--minibatches", "4"];
    let ra = short_run(a.path(), "5", &[&shape[..], &["--threads", "2"]].concat());
    let rb = short_run(b.path(), "5", &[&shape[..], &["--threads", "1"]].concat());
    let weights = |d: &tempfile::TempDir| std::fs::read(d.path().join("policy.safetensors")).unwrap();
    assert_eq!(weights(&a), weights(&b), "two threads and one thread give the same weights");
    assert_eq!(ra["episodes"], rb["episodes"]);
    if std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2 {
        let notes = ra["notes"].to_string();
        assert!(notes.contains("two threads"), "the helper ran: {notes}");
    }
}

/// `--rollout-copy` changes how the rollout reaches the device, not what the update sees:
/// kept on the device by the forward, copied whole or copied per step, the same weights
/// byte for byte, over policies (an eager MLP, an LSTM, a GRU, the proof env's embeddings),
/// seeds and shapes; kept moves fewer bytes than whole, per_step more copies.
#[test]
fn the_rollout_kept_copied_whole_or_per_step_trains_the_same_weights() {
    let eager = ["--inference", "eager", "--total-steps", "1024"];
    let cases: [(&str, &[&str]); 5] = [
        ("3", &["--envs", "8", "--steps", "64", "--minibatches", "4"]),
        ("4", &["--envs", "5", "--steps", "32", "--minibatches", "2"]),
        ("5", &["--envs", "8", "--steps", "32", "--minibatches", "2", "--rnn", "lstm"]),
        ("6", &["--envs", "4", "--steps", "32", "--minibatches", "2", "--rnn", "gru"]),
        ("7", &["--env", "proof", "--envs", "4", "--steps", "32", "--minibatches", "2"]),
    ];
    for (seed, shape) in cases {
        let mut seen = Vec::new();
        for copy in ["kept", "whole", "per_step"] {
            let dir = tempfile::tempdir().unwrap();
            let report = short_run(dir.path(), seed, &[&eager[..], shape, &["--rollout-copy", copy]].concat());
            let counters = &report["counters"];
            let weights = std::fs::read(dir.path().join("policy.safetensors")).unwrap();
            seen.push((weights, counters["h2d_bytes"].as_u64().unwrap(), counters["h2d_copies"].as_u64().unwrap()));
        }
        let [(kept, kept_bytes, _), (whole, whole_bytes, whole_copies), (per_step, _, per_step_copies)] = &seen[..]
        else {
            unreachable!()
        };
        let at = format!("seed {seed}, {shape:?}");
        assert!(kept == whole && whole == per_step, "{at}: the same weights");
        assert!(kept_bytes < whole_bytes, "{at}: kept moves less ({kept_bytes} against {whole_bytes})");
        assert!(per_step_copies > whole_copies, "{at}: per_step copies more");
    }
}

#[test]
fn the_same_seed_gives_the_same_run_on_cpu() {
    let (a, b, c) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let ra = short_run(a.path(), "7", &[]);
    let rb = short_run(b.path(), "7", &[]);
    short_run(c.path(), "8", &[]);
    let weights = |d: &tempfile::TempDir| std::fs::read(d.path().join("policy.safetensors")).unwrap();
    assert_eq!(weights(&a), weights(&b), "same seed, same weights");
    assert_ne!(weights(&a), weights(&c), "another seed, other weights");
    assert_eq!(ra["episodes"], rb["episodes"]);
    assert_eq!(ra["mean_return_last_100"], rb["mean_return_last_100"]);
    let lines = |d: &tempfile::TempDir| {
        std::fs::read_to_string(d.path().join("metrics.jsonl"))
            .unwrap()
            .lines()
            .map(|l| {
                let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
                for timing in ["wall_s", "sps", "rollout_s", "update_s", "profile"] {
                    v.as_object_mut().unwrap().remove(timing);
                }
                v
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(lines(&a), lines(&b));
}

#[test]
fn eager_and_fused_inference_both_learn() {
    for mode in ["eager", "fused"] {
        let dir = tempfile::tempdir().unwrap();
        let r = short_run(dir.path(), "2", &["--inference", mode, "--total-steps", "16384", "--lr", "1e-3"]);
        assert_eq!(r["config"]["exec"]["inference"], mode);
        let ret = r["mean_return_last_100"].as_f64().unwrap();
        // Random play averages ~22; a few thousand steps of PPO already beat it clearly.
        assert!(ret > 35.0, "{mode}: mean return {ret}");
    }
}

/// A hand-edited checkpoint is refused with a message, never a panic: its spec is
/// validated as a launched one is, and its network must fit the workload's envs.
#[test]
fn an_edited_checkpoint_is_refused_clearly() {
    let fixture = repo().join("tests/fixtures/seam/cartpole");
    type Edit = fn(&mut serde_json::Value);
    let cases: &[(&str, Edit, &str)] = &[
        ("envs 0", |m| m["spec"]["envs"] = 0.into(), "--envs"),
        ("an unknown workload", |m| m["spec"]["env"] = "mountaincar".into(), "mountaincar"),
        ("a network for another env", |m| m["architecture"]["obs_dim"] = 5.into(), "observations"),
        ("no hidden layer", |m| m["architecture"]["hidden"] = serde_json::json!([]), "hidden"),
    ];
    for (what, edit, named) in cases {
        let dir = tempfile::tempdir().unwrap();
        for f in ["spec.json", "policy.safetensors"] {
            std::fs::copy(fixture.join(f), dir.path().join(f)).unwrap();
        }
        let path = dir.path().join("spec.json");
        let mut meta: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        edit(&mut meta);
        std::fs::write(&path, meta.to_string()).unwrap();
        let out = run(hotlab().args(["eval", "--episodes", "2", "--checkpoint"]).arg(dir.path()));
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{what}: {err}");
        assert!(err.contains(named) && !err.contains("panicked"), "{what}: {err}");
    }
}

/// `hotlab audit`: bad changes are refused naming the field; a small audit reports, per
/// change, a verdict, the ratio's interval, the phase that moved and learning parity
/// (which verdict comes out depends on this machine's noise: the test checks that it is
/// the one its interval and the noise's imply); the report's own recommendations, from a
/// run whose workers spin on two cores (waiting on them is most of its time, so the report
/// recommends), each with its bound.
#[test]
fn audit_refuses_bad_changes_and_reports_each_one() {
    let base = ["audit", "--envs", "4", "--total-steps", "1024", "--device", "cpu"];
    fn with<'a>(base: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
        base.iter().chain(extra).copied().collect()
    }
    rejected(&with(&base, &["--change", "speed=11"]), "--change");
    rejected(&with(&base, &["--change", "backend"]), "--change");
    rejected(&with(&base, &["--change", "envs=0"]), "--envs");
    rejected(&with(&base, &["--change", "envs=4"]), "--envs");
    rejected(&with(&base, &["--change", "proof_depth=6"]), "--proof-depth");
    rejected(&with(&base, &["--change", "lr=0.001", "--repeats", "1"]), "--repeats");

    let out = run(hotlab()
        .args(with(&base, &["--change", "backend=threads", "--change", "lr=0.001", "--repeats", "2", "--json"])));
    assert!(out.status.success(), "{}", stderr(&out));
    let r = last_json(&out);
    assert_eq!(r["repeats"], 2);
    let noise = &r["noise"];
    assert!(noise["low"].as_f64().unwrap() <= noise["median"].as_f64().unwrap());
    assert!(noise["median"].as_f64().unwrap() <= noise["high"].as_f64().unwrap());
    let changes = r["changes"].as_array().unwrap();
    assert_eq!(
        changes.iter().map(|c| c["change"].as_str().unwrap()).collect::<Vec<_>>(),
        ["backend=threads", "lr=0.001"]
    );
    assert_verdicts_follow(&r);
    for c in changes {
        assert!(c["phase"].is_string() && c["learning_worse"].is_boolean(), "{c}");
        assert!(c["learning"]["baseline"].is_number(), "CartPole has a mean return: {c}");
        assert!(c["bound"].is_null(), "a change of one's own has no predicted bound: {c}");
    }

    // The report's own recommendations, each with the bound it predicted.
    let sub = ["audit", "--envs", "4", "--total-steps", "1024", "--device", "cpu", "--backend", "subprocess"];
    let flags = ["--workers", "2", "--wait", "spin", "--recommendations", "--repeats", "2", "--json"];
    let out = run(hotlab().args(with(&sub, &flags)));
    assert!(out.status.success(), "spinning workers are recommended against: {}", stderr(&out));
    let r = last_json(&out);
    let changes = r["changes"].as_array().unwrap();
    assert!(changes.iter().any(|c| c["phase"] == "env_wait"), "the waits' fix among them: {r}");
    for c in changes {
        assert!(c["bound"].as_f64().is_some_and(|b| b >= 1.0), "{c}");
    }
    assert_verdicts_follow(&r);
}

/// Issue 43: every workload's presets are listed in `--help` with their lines, and a
/// preset is its workload's whole spec, under explicit flags.
#[test]
fn each_workload_has_a_preset_listed_in_help_and_flags_override_it() {
    let help = run(hotlab().args(["train", "--help"]));
    let text = String::from_utf8_lossy(&help.stdout);
    for (name, line) in [
        ("cleanrl", "CleanRL's ppo.py settings"),
        ("wide", "CartPole at throughput"),
        ("gpu", "CartPole on one CUDA GPU"),
        ("proof", "Seed 000's proof search"),
        ("morpho", "Seeds 001–003's growing hosts"),
        ("grow", "Morpho hosts that grow"),
        ("dreamer", "Seed 004's world model"),
    ] {
        assert!(text.contains(&format!("- {name}:")) && text.contains(line), "{name}: {text}");
    }
    // The flags' few train steps: what is checked is the spec the run had.
    let flags = ["--total-steps", "256", "--prefill", "64", "--train-ratio", "1", "--no-eval", "--json"];
    let out = run(hotlab().args(["train", "--preset", "dreamer"]).args(flags));
    assert!(out.status.success(), "{}", stderr(&out));
    let report = last_json(&out);
    let dreamer = &report["config"]["workload"]["dreamer"];
    assert_eq!(
        (dreamer["batch"].as_u64(), dreamer["seq_len"].as_u64()),
        (Some(16), Some(16)),
        "the preset's: {report}"
    );
    assert_eq!(
        (dreamer["prefill"].as_u64(), report["config"]["total_steps"].as_u64(), dreamer["train_ratio"].as_f64()),
        (Some(64), Some(256), Some(1.0)),
        "the flags'"
    );
    assert_eq!(report["config"]["envs"], 4);
    // The GPU preset is refused where there is no CUDA, naming the device.
    if !tch::Cuda::is_available() {
        let out = hotlab().args(["train", "--preset", "gpu", "--json"]).output().unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("--device") && err.contains("'cuda'") && err.contains("no CUDA device"), "{err}");
    }
}

/// Issue 38: a run's steady window starts after its warm-up iterations, so a start-up made
/// slow on purpose (1.5 s of sleep in the first iteration, standing for compilation or a
/// graph's capture) stays out of the rate audits compare; a run that ends within its
/// warm-up has no steady window.
#[test]
fn the_steady_window_leaves_a_slow_start_up_out() {
    let train = |total: &str| {
        let out = hotlab()
            .env("HOTLAB_SLOW_START_MS", "1500")
            .args(["train", "--envs", "8", "--steps", "16", "--minibatches", "4", "--device", "cpu", "--json"])
            .args(["--total-steps", total])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        last_json(&out)
    };
    let r = train("2560"); // 20 updates of 128 steps
    let steady = &r["steady"];
    assert_eq!((steady["warmup_updates"].as_u64(), steady["updates"].as_u64()), (Some(2), Some(18)), "{r}");
    assert_eq!(steady["env_steps"].as_u64(), Some(18 * 128));
    let (wall, window) = (r["wall_s"].as_f64().unwrap(), steady["seconds"].as_f64().unwrap());
    assert!(wall >= 1.5, "the sleep is in the run's wall: {wall}");
    assert!(window > 0.0 && window <= wall - 1.5, "the window leaves the sleep out: {window} of {wall}");
    let (sps, steady_sps) = (r["sps"].as_f64().unwrap(), steady["sps"].as_f64().unwrap());
    assert!(close(steady_sps, 18.0 * 128.0 / window), "{r}");
    assert!(steady_sps > sps, "without the start-up the rate is higher: {steady_sps} vs {sps}");
    assert!(train("256")["steady"].is_null(), "2 updates: all warm-up");
}

/// `--precision bf16` on a CPU with no bf16 instructions (issue 80, a newcomer's slow run):
/// the run warns at its start and in its notes, and its report advises `--precision fp32`
/// (catalogue row 6, the precision lesson), which the audit of its own recommendations
/// confirms. On a CPU with them (AVX512-BF16) none of that: bf16 is the CPU's own there.
/// Which of the two this machine proves is its CPU's (the shared machines have both); each
/// is a real run.
#[test]
fn bf16_that_the_cpu_emulates_is_named_and_advised_against() {
    let native = std::arch::is_x86_feature_detected!("avx512bf16");
    let flags =
        ["--precision", "bf16", "--hidden", "256,256", "--envs", "8", "--total-steps", "4096", "--device", "cpu"];
    let out = run(hotlab().args(["train", "--json"]).args(flags));
    assert!(out.status.success(), "{}", stderr(&out));
    let notes = last_json(&out)["notes"].to_string();
    let warned = stderr(&out).contains("warning: --precision bf16 on a CPU without AVX512-BF16");
    assert_eq!(warned, !native, "native bf16: {native}; stderr: {}", stderr(&out));
    assert_eq!(notes.contains("its products are emulated"), !native, "native bf16: {native}; notes: {notes}");
    let out = run(hotlab().args(["profile", "--report", "json"]).args(flags));
    assert!(out.status.success(), "{}", stderr(&out));
    let report = last_json(&out);
    let advice = report["recommendations"].as_array().unwrap().iter().find(|r| r["knob"] == "--precision fp32");
    assert_eq!(advice.is_some(), !native, "native bf16: {native}; {report}");
    if let Some(advice) = advice {
        assert_eq!(
            (&advice["row"], &advice["lesson"]),
            (&serde_json::json!(6), &serde_json::json!("precision")),
            "{advice}"
        );
        let out = run(hotlab()
            .args(["audit", "--recommendations", "--repeats", "2", "--json"])
            .args(flags.iter().map(|f| if *f == "4096" { "8192" } else { f })));
        assert!(out.status.success(), "{}", stderr(&out));
        let audit = last_json(&out);
        let change = audit["changes"].as_array().unwrap().iter().find(|c| c["change"] == "--precision fp32");
        assert_eq!(change.map(|c| &c["verdict"]), Some(&serde_json::json!("confirmed")), "{audit}");
    }
}
