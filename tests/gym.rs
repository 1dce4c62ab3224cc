//! The `gym` workload's engine (issue 42): any Gymnasium env stepped by Python worker
//! processes through shared memory, equal to Gymnasium's own `SyncVectorEnv` step for
//! step, and refusing or failing clearly (a real Python, a real gymnasium).

mod common;
use common::*;
use hotlab_shared::env::{BatchEnv, Observations, StepBatch};
use hotlab_shared::rng::HostRng;
use hotlab_shared::spec::WaitMode;
use hotlab_train::exec::EnvMaker;
use hotlab_workloads::gym::GymEnv;
use serde_json::{json, Value};
use std::time::Duration;

fn open(id: &str) -> GymEnv {
    GymEnv::open(id, Some(python()), json!({})).unwrap_or_else(|e| panic!("{id}: {e}"))
}

/// The batch of `envs` envs in `workers` Python processes (1: the single-process mode).
fn batch(env: &GymEnv, envs: usize, seed: u64, workers: usize, wait: WaitMode) -> Box<dyn BatchEnv> {
    match workers {
        1 => env.vector_env(envs, seed, 0),
        w => Box::new(env.worker_processes(envs, seed, w, wait).unwrap().unwrap()),
    }
}

/// Gymnasium's `SyncVectorEnv` (same-step autoreset) on the same actions: one JSON line
/// for the reset, then one per step.
fn reference(id: &str, envs: usize, seed: u64, actions: &[Vec<i64>]) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = (dir.path().join("case.json"), dir.path().join("steps.jsonl"));
    let case = json!({"id": id, "envs": envs, "seed": seed, "actions": actions});
    std::fs::write(&input, case.to_string()).unwrap();
    let out =
        run(std::process::Command::new(python()).arg(repo().join("tests/gym_vector.py")).arg(&input).arg(&output));
    assert!(out.status.success(), "{}", stderr(&out));
    std::fs::read_to_string(&output).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn floats(v: &Value) -> Vec<f32> {
    v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect()
}

fn bools(v: &Value) -> Vec<bool> {
    v.as_array().unwrap().iter().map(|x| x.as_bool().unwrap()).collect()
}

/// Over ids, seeds and shapes (envs, worker processes, waits): the same observations,
/// rewards, terminations, truncations and final observations as Gymnasium's, step for
/// step, through episode ends (CartPole's terminations, Acrobot's truncation at 500).
#[test]
fn python_workers_step_as_gymnasium_s_own_vector_env() {
    let cases = [
        ("CartPole-v1", 3, 1, WaitMode::Block, 0u64, 200),
        ("CartPole-v1", 5, 2, WaitMode::Block, 7, 200),
        ("CartPole-v1", 4, 2, WaitMode::Spin, 123, 120),
        ("Acrobot-v1", 3, 3, WaitMode::Block, 5, 510),
        ("Acrobot-v1", 2, 1, WaitMode::Block, 42, 510),
    ];
    let mut ended = 0;
    for (id, envs, workers, wait, seed, steps) in cases {
        let env = open(id);
        let heads = env.spec().heads.clone();
        let mut rng = HostRng::new(seed ^ 0x9e37);
        let actions: Vec<Vec<i64>> =
            (0..steps).map(|_| (0..envs).map(|_| (rng.next_u64() % heads[0].n as u64) as i64).collect()).collect();
        let want = reference(id, envs, seed, &actions);
        let mut b = batch(&env, envs, seed, workers, wait);
        let mut obs = Observations::zeros(env.spec(), envs);
        let mut out = StepBatch::new(env.spec(), envs);
        b.reset(&mut obs).unwrap();
        let shape = format!("{id}, {envs} envs in {workers} processes, {wait:?}, seed {seed}");
        assert_eq!(obs.fields[0].as_f32().unwrap(), floats(&want[0]["obs"]), "{shape}: reset");
        for (t, a) in actions.iter().enumerate() {
            b.step(a, &mut out).unwrap();
            let w = &want[t + 1];
            let at = format!("{shape}: step {t}");
            assert_eq!(out.obs.fields[0].as_f32().unwrap(), floats(&w["obs"]), "{at}: obs");
            assert_eq!(out.reward, floats(&w["reward"]), "{at}: reward");
            assert_eq!(out.terminated, bools(&w["terminated"]), "{at}: terminated");
            assert_eq!(out.truncated, bools(&w["truncated"]), "{at}: truncated");
            let finals = w["final_obs"].as_object().unwrap();
            assert_eq!(out.episodes.len(), finals.len(), "{at}: episodes ended");
            for end in &out.episodes {
                assert_eq!(out.final_row(0, end.env), floats(&finals[&end.env.to_string()]), "{at}: final obs");
                assert!(end.length > 0, "{at}");
            }
            ended += out.episodes.len();
        }
    }
    assert!(ended > 20, "episodes ended mid-test: {ended}");
}

/// Every refusal names its field and says what to do.
#[test]
fn unknown_ids_unsupported_spaces_and_a_missing_python_are_refused_clearly() {
    let refused = |id: &str, python: Option<std::path::PathBuf>| match GymEnv::open(id, python, json!({})) {
        Ok(_) => panic!("{id} was accepted"),
        Err(e) => (e.field.clone(), e.message.clone()),
    };
    let (field, message) = refused("CartPol-v1", Some(python()));
    assert_eq!(field, "gym_id");
    assert!(
        message.contains("CartPol-v1") && message.contains("CartPole-v1"),
        "names the id and those near it: {message}"
    );
    let (field, message) = refused("Pendulum-v1", Some(python()));
    assert_eq!(field, "gym_id");
    assert!(message.contains("Box") && message.contains("action space"), "names the space: {message}");
    let (field, message) = refused("FrozenLake-v1", Some(python()));
    assert!(field == "gym_id" && message.contains("observation space Discrete"), "{message}");
    let (field, message) = refused("CartPole-v1", Some("/nonexistent/bin/python".into()));
    assert_eq!(field, "python");
    assert!(message.contains("/nonexistent/bin/python") && message.contains("--python"), "{message}");
    // An interpreter without gymnasium: the system's, isolated from every site-packages.
    let bare = tempfile::tempdir().unwrap();
    let script = bare.path().join("python");
    std::fs::write(&script, format!("#!/bin/sh\nexec {} -I -S \"$@\"\n", python().display())).unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let (field, message) = refused("CartPole-v1", Some(script.clone()));
    assert_eq!(field, "python");
    assert!(message.contains("pip install gymnasium"), "says what to install: {message}");
    let bad_kwargs = GymEnv::open("CartPole-v1", Some(python()), json!([1])).err().unwrap();
    assert_eq!(bad_kwargs.field, "gym_kwargs");
}

/// An env that raises mid-run fails the step naming the env with Python's traceback; a
/// worker that hangs fails it within the timeout; no worker process stays behind.
#[test]
fn an_env_that_raises_or_hangs_fails_the_step_and_leaves_no_process() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("flaky_envs.py"),
        r#"
import time
import gymnasium as gym

class Flaky(gym.Wrapper):
    def __init__(self, after, hang):
        super().__init__(gym.make("CartPole-v1"))
        self.left, self.hang = after, hang
    def step(self, action):
        self.left -= 1
        if self.left == 0:
            if self.hang:
                time.sleep(3600)
            raise RuntimeError("the physics blew up")
        return self.env.step(action)

def raises():
    return Flaky(5, False)

def hangs():
    return Flaky(5, True)
"#,
    )
    .unwrap();
    // The workers inherit the trainer's environment: the module is on their PYTHONPATH.
    std::env::set_var("PYTHONPATH", dir.path());
    let open = |id: &str| GymEnv::open(id, Some(python()), json!({})).unwrap();
    for (id, timeout) in [("flaky_envs:raises", 60.0), ("flaky_envs:hangs", 1.5)] {
        let env = open(id);
        let mut b = env.worker_processes(4, 0, 2, WaitMode::Block).unwrap().unwrap();
        let pids = b.pids();
        b = b.with_timeout(Duration::from_secs_f64(timeout));
        let mut obs = Observations::zeros(env.spec(), 4);
        let mut out = StepBatch::new(env.spec(), 4);
        b.reset(&mut obs).unwrap();
        let mut failed = None;
        for _ in 0..10 {
            if let Err(e) = b.step(&[0, 1, 0, 1], &mut out) {
                failed = Some(e.0);
                break;
            }
        }
        let message = failed.unwrap_or_else(|| panic!("{id}: no step failed"));
        if id.ends_with("raises") {
            assert!(message.contains("env 0 raised in step") || message.contains("env 2 raised in step"), "{message}");
            assert!(
                message.contains("RuntimeError: the physics blew up") && message.contains("Traceback"),
                "{message}"
            );
        } else {
            assert!(message.contains("has not answered") && message.contains("--worker-timeout"), "{message}");
        }
        drop(b);
        for pid in pids {
            // SAFETY: kill with signal 0 only asks whether the process exists.
            let alive = unsafe { libc::kill(pid as i32, 0) } == 0;
            assert!(!alive, "{id}: worker {pid} stayed behind");
        }
    }
}

/// PPO learns `gym:CartPole-v1` through a Python worker at CleanRL's settings (4 envs ×
/// 128 steps, 500k steps, about 15 s on 2 cores): a mean return of at least 475 over the
/// last 100 episodes, where a policy that does not learn (uniform actions) averages ~22.
#[test]
fn ppo_learns_gym_cartpole() {
    let out = run(hotlab().args(["train", "--env", "gym:CartPole-v1", "--device", "cpu", "--seed", "1", "--json"]));
    assert!(out.status.success(), "{}", stderr(&out));
    let report = last_json(&out);
    assert_eq!(report["env"], "gym", "{report}");
    let ret = report["mean_return_last_100"].as_f64().unwrap();
    assert!(ret >= 475.0, "mean return of the last 100 episodes: {ret} (report: {report})");
    assert!(report["counters"]["ipc_round_trips"].as_u64().unwrap() > 0, "stepped in a Python process");
}

/// On the command line: an unknown id and a backend the envs cannot run on are refused
/// before anything runs, naming the flag (exit 2); `--env gym:ID` and `--gym-id` agree.
#[test]
fn the_cli_refuses_bad_gym_runs_naming_the_flag() {
    let out = run(hotlab().args(["train", "--env", "gym:NoSuchEnv-v9", "--total-steps", "1024"]));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--gym-id") && stderr(&out).contains("NoSuchEnv-v9"), "{}", stderr(&out));
    let out = run(hotlab().args(["train", "--env", "gym:CartPole-v1", "--backend", "threads"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--backend") && stderr(&out).contains("subprocess, vectorized"), "{}", stderr(&out));
    let python = python().display().to_string();
    let workload = |args: &[&str]| {
        let short = ["train", "--total-steps", "64", "--envs", "2", "--steps", "32", "--json"];
        let out = run(hotlab().args(short).args(args));
        assert!(out.status.success(), "{}", stderr(&out));
        last_json(&out)["config"]["workload"].clone()
    };
    let by_env = workload(&["--env", "gym:Acrobot-v1", "--python", &python]);
    assert_eq!(by_env, json!({"gym": {"id": "Acrobot-v1", "python": python, "kwargs": {}}}));
    assert_eq!(workload(&["--python", &python, "--gym-id", "Acrobot-v1", "--env", "gym"]), by_env);
}

/// The report of a Python env in one process: the envs' own Python is its own phase, named
/// with its time per env step, and the report advises worker processes; in worker
/// processes it does not (the `python-processes` lesson verifies the advice by re-running).
#[test]
fn the_report_names_the_envs_python_and_advises_worker_processes() {
    let profile =
        |backend: &str| {
            let out = run(hotlab()
                .args(["profile", "--env", "gym:Acrobot-v1", "--envs", "64", "--steps", "16"])
                .args(["--total-steps", "20480", "--backend", backend, "--json"]));
            assert!(out.status.success(), "{}", stderr(&out));
            last_json(&out)
        };
    let one = profile("vectorized");
    let top = &one["rows"][0];
    assert_eq!(top["phase"], "python_step", "Acrobot's Python dominates at 64 envs: {one}");
    assert!(top["diagnosis"].as_str().unwrap().contains("µs per env step, in one process"), "{top}");
    let knobs: Vec<&str> =
        one["recommendations"].as_array().unwrap().iter().map(|r| r["knob"].as_str().unwrap()).collect();
    assert!(knobs.contains(&"--backend subprocess"), "{knobs:?}");
    let workers = profile("subprocess");
    let knobs: Vec<&str> =
        workers["recommendations"].as_array().unwrap().iter().map(|r| r["knob"].as_str().unwrap()).collect();
    assert!(!knobs.contains(&"--backend subprocess"), "{knobs:?}");
    assert!(workers["rows"].as_array().unwrap().iter().any(|r| r["phase"] == "python_step"), "{workers}");
}
