//! The audit's verdicts and the search for the fastest setup (`hotlab tune`, and a lab's)
//! on changes whose truth is known by construction. They compare timings: `cargo xtask
//! test` runs this binary with the machine to itself, and its tests one at a time.

mod common;
mod lab_client;
use common::*;
use lab_client::*;
use serde_json::json;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// These tests run one at a time, not beside each other.
fn alone() -> MutexGuard<'static, ()> {
    static ONE: Mutex<()> = Mutex::new(());
    ONE.lock().unwrap_or_else(|p| p.into_inner())
}

/// Verdicts on changes whose truth is known by construction: a setting the run never reads
/// (`worker_timeout` without worker processes) has no effect; adding worker processes that
/// spin on two cores is a regression; removing them, where the profile shows waiting on
/// them is nearly all of the time, is confirmed.
#[test]
fn audit_verdicts_hold_where_the_truth_is_known() {
    let _alone = alone();
    let audit = |backend: &str, changes: &[&str]| {
        let mut args =
            vec!["audit", "--envs", "8", "--total-steps", "100000000", "--seconds", "0.3", "--device", "cpu"];
        args.extend(["--workers", "2", "--wait", "spin", "--repeats", "3", "--json", "--backend", backend]);
        for c in changes {
            args.extend(["--change", c]);
        }
        let out = run(hotlab().args(&args));
        assert!(out.status.success(), "{}", stderr(&out));
        last_json(&out)
    };
    let r = audit("vectorized", &["worker_timeout=30", "backend=subprocess"]);
    let verdicts: Vec<&str> = r["changes"].as_array().unwrap().iter().map(|c| c["verdict"].as_str().unwrap()).collect();
    assert_eq!(verdicts, ["no_effect", "regression"], "{r}");
    assert_eq!(r["changes"][1]["phase"], "env_wait", "{r}");
    let r = audit("subprocess", &["backend=vectorized"]);
    let c = &r["changes"][0];
    assert_eq!(c["verdict"], "confirmed", "{r}");
    assert!(c["phase_share_before"].as_f64().unwrap() > 0.5 && c["phase_share_after"].as_f64().unwrap() < 0.1, "{r}");
}

/// A user's script audited through its command (`hotlab profile --verify`): its advice for
/// Python envs stepped one after another in one process (4 `SyncVectorEnv` envs of 5 ms a
/// step: at 1 ms the envs were 62 % of the wall and the gain, ×1.4–1.8, did not clear this
/// machine's A/A noise of ×0.83–1.30 on every run), worker processes through the command's `{async?--async}`, is confirmed; the
/// same command written otherwise (`--seed 1`, its default, as `--variant`) has no effect.
#[test]
fn a_script_s_advice_is_confirmed_through_its_flag_and_the_same_command_has_no_effect() {
    let _alone = alone();
    let planted = repo().join("tests/fixtures/external/planted.py");
    let args = ["--plant", "slow_env", "--num-envs", "4", "--num-steps", "16", "--updates", "8"];
    let args = [&args[..], &["--env-delay", "0.005"]].concat();
    let words = |more: &[&str]| {
        let mut w = vec![python().display().to_string(), planted.display().to_string()];
        w.extend(args.iter().chain(more).map(|s| s.to_string()));
        w
    };
    let variant = shlex::try_join(words(&["--seed", "1", "{async?--async}"]).iter().map(String::as_str)).unwrap();
    let mut cmd = hotlab();
    cmd.args(["profile", "--verify", "--repeats", "3", "--json", "--variant", &variant, "--"]);
    cmd.args(words(&["{async?--async}"]));
    let out = run(&mut cmd);
    assert!(out.status.success(), "{}", stderr(&out));
    let r = last_json(&out);
    let advice = &r["report"]["recommendations"][0];
    assert_eq!((advice["knob"].as_str(), advice["row"].as_u64()), (Some("--vars async=on"), Some(1)), "{r}");
    let audit = &r["audit"];
    assert_verdicts_follow(audit);
    let verdicts: Vec<(&str, &str)> = audit["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["change"].as_str().unwrap(), c["verdict"].as_str().unwrap()))
        .collect();
    assert_eq!(verdicts.len(), 2, "{audit}");
    assert_eq!(verdicts[0], ("--vars async=on", "confirmed"), "{audit}");
    assert!(verdicts[1].0.starts_with("command=") && verdicts[1].1 == "no_effect", "{audit}");
}

/// `hotlab tune` from worker processes that spin on two cores: an obvious gain (stepping
/// the envs in process, or workers that block; which of the two is faster is this
/// machine's coin to toss) is found, kept, and the configuration printed.
#[test]
fn tune_finds_an_obvious_gain() {
    let _alone = alone();
    let mut args = vec!["tune", "--backend", "subprocess", "--wait", "spin", "--envs", "8", "--workers", "2"];
    args.extend(["--total-steps", "100000000", "--seconds", "0.3", "--device", "cpu"]);
    args.extend(["--repeats", "3", "--max-steps", "1", "--json"]);
    let out = run(hotlab().args(&args));
    assert!(out.status.success(), "{}", stderr(&out));
    let r = last_json(&out);
    let step = &r["path"][0];
    // The kept change is a gain its audit confirmed (`tune::keep`); how large a gain is a
    // benchmark's figure (`hotlab tune --json`), not a test's: on a loaded machine it moves.
    assert!(step["ratio"].as_f64().unwrap() > 1.0, "{r}");
    assert_eq!(r["path"].as_array().unwrap().len(), 1, "--max-steps 1: {r}");
    let flags = r["flags"].as_str().unwrap();
    match step["kept"].as_str() {
        Some("--backend vectorized") => {
            assert_eq!(r["best"]["exec"]["backend"], "vectorized", "{r}");
            assert!(!flags.contains("--backend"), "vectorized is the default: {r}");
        }
        Some("--wait block") => {
            assert_eq!(r["best"]["exec"]["wait"], "block", "{r}");
            assert!(flags.contains("--backend subprocess"), "{r}");
        }
        other => panic!("kept {other:?}: {r}"),
    }
    let out = run(hotlab().args(["tune", "--repeats", "1"]));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

/// Issue 23: "find the fastest setup" from a run whose workers spin on two cores: a chain
/// of audits keeps stepping the envs in process, and its last audit carries the fastest
/// configuration (launchable as a spec).
#[test]
fn a_search_for_the_fastest_setup_finds_the_obvious_gain() {
    let _alone = alone();
    let data = tempfile::tempdir().unwrap();
    let server = start(data.path(), &[]);
    let addr = server.addr.clone();
    let spinning = json!({"env": "cartpole", "envs": 8, "steps": 128, "total_steps": 4096, "device": "cpu",
        "backend": "subprocess", "workers": 2, "wait": "spin"});
    let run = launch(&addr, spinning);
    wait_for(&addr, run, &["finished"]);
    let (status, e) = post_json(&addr, &format!("/api/runs/{run}/tune"), json!({"max_steps": 0}));
    assert_eq!((status, e["error"]["field"].as_str()), (400, Some("max_steps")), "{e}");
    let (status, first) =
        post_json(&addr, &format!("/api/runs/{run}/tune"), json!({"repeats": 3, "seconds": 0.3, "max_steps": 2}));
    assert_eq!(status, 201, "{first}");
    assert_eq!(first["tune"]["step"], 1);
    let start = Instant::now();
    let last = loop {
        let audits = get_json(&addr, &format!("/api/audits?run={run}"));
        let audits = audits.as_array().unwrap();
        if let Some(done) = audits.iter().find(|a| a["tune"]["best"].is_object()) {
            break done.clone();
        }
        assert!(!audits.iter().any(|a| a["status"] == "failed"), "{audits:?}");
        assert!(start.elapsed() < Duration::from_secs(240), "no end: {audits:?}");
        std::thread::sleep(Duration::from_millis(200));
    };
    // Step 1 keeps one of the two changes that end the spinning (which of the two is the
    // faster is this machine's coin to toss: both gain tens of times), and the best setup
    // no longer spins.
    let step1 = get_json(&addr, &format!("/api/audits/{}", first["id"]));
    let kept = step1["tune"]["kept"].as_str().unwrap_or_default();
    assert!(["--backend vectorized", "--wait block"].contains(&kept), "{step1}");
    let best = &last["tune"]["best"]["exec"];
    assert!(best["backend"] == "vectorized" || best["wait"] == "block", "{last}");
    // How much faster is a benchmark's figure (`hotlab tune --json`); here only that the
    // kept steps multiply to a gain, as confirmed gains must.
    assert!(last["tune"]["speedup"].as_f64().unwrap() > 1.0, "{last}");
    // The fastest configuration launches as it is.
    let best = launch(&addr, last["tune"]["best"].clone());
    wait_for(&addr, best, &["finished"]);
}
