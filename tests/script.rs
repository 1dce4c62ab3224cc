//! A user's own training script under hotlab's probe (`hotlab profile -- CMD…`): a small
//! trainer with bottlenecks planted alone and together (`tests/fixtures/external/planted.py`)
//! is counted exactly and advised the right catalogue row, its clean version is advised
//! nothing; stopping, a budget, a crash or a bad command leave no process behind and say
//! what went wrong.

mod common;
use common::*;
use hotlab_spec::{PresetSpec, RunSpec};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

fn planted() -> PathBuf {
    repo().join("tests/fixtures/external/planted.py")
}

/// `hotlab profile --json -- PYTHON planted.py ARGS`, its summary, and its stderr (the
/// script's output passes through there).
fn profile(args: &[&str]) -> (Value, String) {
    let mut cmd = hotlab();
    cmd.args(["profile", "--json", "--"]).arg(python()).arg(planted()).args(args);
    let out = run(&mut cmd);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    (last_json(&out), stderr(&out))
}

/// The returns the script printed (`episode return=R length=L`).
fn printed_returns(stderr: &str) -> Vec<f64> {
    stderr.lines().filter_map(|l| l.strip_prefix("episode return=")?.split_whitespace().next()?.parse().ok()).collect()
}

/// The catalogue rows advised, and each advice's lesson.
fn advised(summary: &Value) -> BTreeSet<(u64, String)> {
    let recs = summary["report"]["recommendations"].as_array().expect("recommendations");
    recs.iter().map(|r| (r["row"].as_u64().unwrap_or(0), r["lesson"].as_str().unwrap_or("").to_string())).collect()
}

/// Each bottleneck planted alone, and all of them together, over several shapes: the counts
/// per step are the planted ones exactly, the env steps and episodes are the script's, the
/// advice names the planted rows (with their lessons and call sites) and no other; the
/// clean trainer is advised nothing.
#[test]
fn planted_bottlenecks_are_counted_exactly_and_advised_by_their_rows() {
    struct Case {
        plants: &'static [&'static str],
        envs: u64,
        steps: u64,
        rows: &'static [(u64, &'static str)],
    }
    let cases = [
        Case { plants: &[], envs: 32, steps: 16, rows: &[] },
        Case { plants: &["item"], envs: 32, steps: 16, rows: &[(4, "per-item-sync")] },
        Case { plants: &["item"], envs: 40, steps: 8, rows: &[(4, "per-item-sync")] },
        Case { plants: &["copies"], envs: 36, steps: 16, rows: &[(2, "observation-copies")] },
        Case { plants: &["grad_log"], envs: 32, steps: 8, rows: &[(7, "telemetry")] },
        Case { plants: &["slow_env"], envs: 4, steps: 8, rows: &[(1, "python-processes")] },
        Case {
            plants: &["item", "copies", "slow_env", "grad_log"],
            envs: 5,
            steps: 8,
            rows: &[(1, "python-processes"), (2, "observation-copies"), (4, "per-item-sync"), (7, "telemetry")],
        },
    ];
    for case in cases {
        let updates = 3;
        let (envs, steps) = (case.envs.to_string(), case.steps.to_string());
        let mut args = vec!["--updates", "3", "--num-envs", &envs, "--num-steps", &steps];
        for p in case.plants {
            args.extend(["--plant", p]);
        }
        let (r, err) = profile(&args);
        let what = format!("{:?} at {} envs × {} steps", case.plants, case.envs, case.steps);
        let taken = updates * case.envs * case.steps;
        assert_eq!(r["total_steps"].as_u64(), Some(taken), "{what}: env steps");
        assert!(err.contains(&format!("env_steps={taken}")), "{what}: the script's own count");
        let step = &r["per_vector_step"];
        let item = case.plants.contains(&"item");
        assert_eq!(step["reads"].as_u64(), Some(1 + if item { case.envs } else { 0 }), "{what}: {step}");
        let copies = if case.plants.contains(&"copies") { 3 } else { 1 };
        assert_eq!(step["copies"].as_u64(), Some(copies), "{what}: {step}");
        let grad = if case.plants.contains(&"grad_log") { 1.0 } else { 0.0 };
        assert_eq!(step["grad_reads_per_optimizer_step"].as_f64(), Some(grad), "{what}: {step}");
        let slow = case.plants.contains(&"slow_env");
        let (kind, class) = if slow { ("python_in_process", "SyncVectorEnv") } else { ("batched", "BatchedWalk") };
        assert_eq!((step["kind"].as_str(), step["env_class"].as_str()), (Some(kind), Some(class)), "{what}");
        assert_eq!(step["envs"].as_u64(), Some(case.envs), "{what}");
        // Every episode the script printed, and the same returns.
        let returns = printed_returns(&err);
        assert_eq!(r["episodes"].as_u64(), Some(returns.len() as u64), "{what}: episodes");
        let last: Vec<f64> = returns.iter().rev().take(100).copied().collect();
        if !last.is_empty() {
            let mean = last.iter().sum::<f64>() / last.len() as f64;
            let seen = r["mean_return_last_100"].as_f64().expect("a mean return");
            assert!((seen - mean).abs() < 1e-6, "{what}: mean return {seen} against the script's {mean}");
        }
        let want: BTreeSet<(u64, String)> = case.rows.iter().map(|(r, l)| (*r, l.to_string())).collect();
        assert_eq!(advised(&r), want, "{what}: {}", r["report"]["recommendations"]);
        for rec in r["report"]["recommendations"].as_array().unwrap() {
            if rec["row"] != 1 {
                let site = rec["site"].as_str().unwrap_or_else(|| panic!("{what}: no call site: {rec}"));
                assert!(site.starts_with("planted.py:"), "{what}: {site}");
            }
            assert!(rec["fix"].as_str().is_some_and(|f| !f.is_empty()), "{what}: {rec}");
        }
        assert!(r["report"]["notes"].as_array().unwrap().iter().any(|n| n.as_str().unwrap().contains("probe cost")));
    }
}

/// Stable-Baselines3's PPO (the library unmodified, its `DummyVecEnv` and `Monitor`) under
/// the probe, over several shapes: the env steps are SB3's own count, the episodes and their
/// returns those its `Monitor` reported, and SB3's three reads a step (the actions, the
/// values and the log-probs, each read apart) are counted and advised as row 4.
#[test]
fn stable_baselines3_s_steps_and_episodes_are_what_it_reports() {
    let script = repo().join("tests/fixtures/external/sb3_ppo.py");
    for (envs, steps, total, seed) in [("4", "64", "1024", "0"), ("3", "32", "960", "5")] {
        let mut cmd = hotlab();
        cmd.args(["profile", "--json", "--"]).arg(python()).arg(&script);
        cmd.args(["--num-envs", envs, "--num-steps", steps, "--total-timesteps", total, "--seed", seed]);
        let out = run(&mut cmd);
        assert!(out.status.success(), "{}", stderr(&out));
        let (r, err) = (last_json(&out), stderr(&out));
        let counted: u64 = err.lines().find_map(|l| l.strip_prefix("env_steps=")?.parse().ok()).expect("SB3's count");
        assert_eq!(r["total_steps"].as_u64(), Some(counted), "{envs} envs: {err}");
        let returns = printed_returns(&err);
        assert!(!returns.is_empty(), "CartPole ends episodes in {total} steps");
        assert_eq!(r["episodes"].as_u64(), Some(returns.len() as u64), "{envs} envs");
        let last: Vec<f64> = returns.iter().rev().take(100).copied().collect();
        let mean = last.iter().sum::<f64>() / last.len() as f64;
        assert!((r["mean_return_last_100"].as_f64().unwrap() - mean).abs() < 1e-6, "{envs} envs");
        let step = &r["per_vector_step"];
        assert_eq!(
            (step["kind"].as_str(), step["env_class"].as_str()),
            (Some("python_in_process"), Some("DummyVecEnv"))
        );
        assert_eq!(step["reads"].as_u64(), Some(3), "{step}");
        assert!(advised(&r).contains(&(4, "per-item-sync".to_string())), "{}", r["report"]["recommendations"]);
    }
}

/// The light probe (`--probe-mode light`) counts env steps and episodes as the full one
/// does and says it measured no torch call; `--probe-cost` runs the script under both and
/// reports both speeds.
#[test]
fn a_light_probe_counts_steps_and_episodes_and_the_probe_s_cost_is_measured() {
    let args = ["--updates", "2", "--num-envs", "4", "--num-steps", "16", "--plant", "slow_env"];
    let mut cmd = hotlab();
    cmd.args(["profile", "--json", "--probe-mode", "light", "--"]).arg(python()).arg(planted()).args(args);
    let out = run(&mut cmd);
    assert!(out.status.success(), "{}", stderr(&out));
    let (r, err) = (last_json(&out), stderr(&out));
    assert_eq!(r["total_steps"].as_u64(), Some(2 * 4 * 16));
    assert_eq!(r["episodes"].as_u64(), Some(printed_returns(&err).len() as u64));
    let notes = r["report"]["notes"].to_string();
    assert!(notes.contains("not measured: torch: a light probe"), "{notes}");
    assert_eq!(r["counters"]["host_syncs"], 0, "no read hooked");
    let mut cmd = hotlab();
    cmd.args(["profile", "--json", "--probe-cost", "--"]).arg(python()).arg(planted()).args(args);
    let out = run(&mut cmd);
    assert!(out.status.success(), "{}", stderr(&out));
    let cost = &last_json(&out)["probe_cost"];
    assert!(cost["full_sps"].as_f64().unwrap() > 0.0 && cost["light_sps"].as_f64().unwrap() > 0.0, "{cost}");
    assert!(cost["cost_pct"].as_f64().unwrap().is_finite(), "{cost}");
}

/// A PyTorch Profiler trace of the planted trainer (`--torch-trace`): the `.item()` per env
/// per step planted shows as exactly that many more reads of tensor values than the clean
/// trainer's trace has, and is advised as row 4; a file that is no trace is refused.
#[test]
fn a_torch_trace_is_read_into_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let traced = repo().join("tests/fixtures/external/traced.py");
    let trace = |name: &str, plants: &[&str]| {
        let path = dir.path().join(name);
        let mut cmd = std::process::Command::new(python());
        cmd.arg(&traced).arg(&path).args(["--updates", "2", "--num-envs", "8", "--num-steps", "8"]);
        for p in plants {
            cmd.args(["--plant", p]);
        }
        let out = run(&mut cmd);
        assert!(out.status.success(), "{}", stderr(&out));
        let out = run(hotlab().args(["profile", "--report", "json", "--torch-trace"]).arg(&path));
        assert!(out.status.success(), "{}", stderr(&out));
        last_json(&out)
    };
    let reads = |r: &Value| -> u64 {
        let row = r["rows"].as_array().unwrap().iter().find(|row| row["phase"] == "host_read").expect("a reads row");
        row["calls"].as_u64().unwrap()
    };
    let (clean, item) = (trace("clean.json", &[]), trace("item.json", &["item"]));
    assert_eq!(reads(&item) - reads(&clean), 2 * 8 * 8, "the planted reads, and only they, added");
    let wrapped = serde_json::json!({ "report": item });
    assert!(advised(&wrapped).contains(&(4, "per-item-sync".to_string())), "{}", item["recommendations"]);
    assert!(item["notes"][0].as_str().unwrap().contains("optimizer step"), "{}", item["notes"]);
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "[1, 2]").unwrap();
    let out = run(hotlab().args(["profile", "--torch-trace"]).arg(&bad));
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("is not a Chrome trace"), "{}", stderr(&out));
}

/// What the command could not do is named: a program that is not there (`--command`, exit
/// 2), a Python module the script lacks, a placeholder the command does not have, a script
/// that runs without the probe; a crash fails the run with the script's traceback.
#[test]
fn a_bad_command_a_missing_module_and_a_crash_are_named() {
    let out = run(hotlab().args(["profile", "--", "no-such-python-hotlab", "t.py"]));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--command") && stderr(&out).contains("'no-such-python-hotlab' was not found"));

    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("needs.py");
    std::fs::write(&script, "import hotlab_no_such_module_xyz\n").unwrap();
    let out = run(hotlab().args(["profile", "--"]).arg(python()).arg(&script));
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("needs the Python module 'hotlab_no_such_module_xyz'"), "{}", stderr(&out));

    let out = run(hotlab().args(["profile", "--vars", "envz=3", "--"]).arg(python()).args(["t.py", "{envs=8}"]));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--vars: 'envz' is not a placeholder of the command (its placeholders: envs)"));

    let out = run(hotlab().args(["profile", "--"]).arg(python()).args(["-I", "-c", "print(1)"]));
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("ran without hotlab's probe"), "{}", stderr(&out));

    let tag = "crash";
    let out = run(&mut tagged(tag, &["--plant", "slow_env", "--async", "--num-envs", "3", "--crash"], &[]));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let e = stderr(&out);
    assert!(e.contains("failed (exit status 1)") && e.contains("Traceback") && e.contains("planted crash"), "{e}");
    assert_eq!(leftovers(tag), Vec::<i32>::new(), "the crashed script's workers are gone");
}

/// A run's budget (`--seconds`) ends the script, its async env workers with it.
#[test]
fn a_budget_leaves_no_process_behind() {
    let tag = "budget";
    let args = ["--plant", "slow_env", "--async", "--num-envs", "3", "--updates", "100000"];
    let out = run(&mut tagged(tag, &args, &["--seconds", "3"]));
    assert!(out.status.success(), "{}", stderr(&out));
    let r = last_json(&out);
    assert!(r["notes"].to_string().contains("budget"), "{r}");
    assert!(r["total_steps"].as_u64().unwrap() > 0, "{r}");
    assert_eq!(leftovers(tag), Vec::<i32>::new(), "the script and its workers are gone");
}

/// Stopping a run (the lab's stop button sets the same flag) ends the script at once, its
/// async env workers with it, keeping what was measured.
#[test]
fn a_stopped_run_leaves_no_process_behind() {
    let tag = "stopped";
    let command = format!(
        "env HOTLAB_TEST_TAG={tag} {} {} --plant slow_env --async --num-envs 3 --updates 100000",
        python().display(),
        planted().display()
    );
    let mut spec: RunSpec = hotlab_specs::AnyPreset::find("cleanrl").unwrap().spec();
    spec = hotlab_spec::knobs::apply(
        spec,
        &[
            (hotlab_spec::knobs::find("env").unwrap(), "external".into()),
            (hotlab_spec::knobs::find("command").unwrap(), command.into()),
        ],
    )
    .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let opts = hotlab_train::TrainOptions { stop: Some(stop), ..Default::default() };
    let mut windows = 0;
    let trained = hotlab_workloads::train_with(&spec, opts, &mut |_| {
        windows += 1;
        if windows == 3 {
            flag.store(true, Ordering::Relaxed);
        }
    })
    .expect("a stopped run ends well");
    assert!(trained.report.notes.iter().any(|n| n.contains("stopped")), "{:?}", trained.report.notes);
    assert!(trained.report.total_steps > 0);
    assert_eq!(leftovers(tag), Vec::<i32>::new(), "the script and its workers are gone");
}

/// `hotlab profile --json -- env HOTLAB_TEST_TAG=TAG PYTHON planted.py ARGS`, with `flags`
/// before `--`: every process of the script carries TAG in its environment.
fn tagged(tag: &str, args: &[&str], flags: &[&str]) -> std::process::Command {
    let mut cmd = hotlab();
    cmd.arg("profile").args(flags).args(["--json", "--", "env", &format!("HOTLAB_TEST_TAG={tag}")]);
    cmd.arg(python()).arg(planted()).args(args);
    cmd
}

/// The processes alive whose environment carries `HOTLAB_TEST_TAG=tag` (zombies, whose
/// environment is gone, are not alive).
fn leftovers(tag: &str) -> Vec<i32> {
    let needle = format!("HOTLAB_TEST_TAG={tag}");
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        if let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) {
            if env.split(|&b| b == 0).any(|kv| kv == needle.as_bytes()) {
                found.push(pid);
            }
        }
    }
    found
}
