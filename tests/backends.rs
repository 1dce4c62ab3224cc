//! Env backends: the same trajectories everywhere, worker death handled, counters exact.

mod common;
use common::*;
use hotlab_core::choices::WaitMode;
use hotlab_env::cartpole::CartPoleBatch;
use hotlab_env::rng::HostRng;
use hotlab_env::{BatchEnv, Observations, StepBatch};
use hotlab_specs::ProofSpec;
use hotlab_train::exec::sequential::Sequential;
use hotlab_train::exec::subprocess::Subprocess;
use hotlab_train::exec::threads::Threads;
use hotlab_train::exec::EnvMaker;
use hotlab_workloads::cartpole::device::env::DeviceCartPole;
use hotlab_workloads::cartpole::CartPole;
use hotlab_workloads::proof::Proof;
use std::time::Duration;
use tch::{Device, Tensor};

fn backends(def: &dyn EnvMaker, envs: usize, seed: u64, workers: usize) -> Vec<(String, Box<dyn BatchEnv>)> {
    let exe = std::path::Path::new(env!("CARGO_BIN_EXE_hotlab"));
    let sub = |wait| Subprocess::spawn_with(exe, def, envs, seed, workers, wait).unwrap();
    vec![
        ("vectorized".into(), def.vector_env(envs, seed, 0)),
        ("sequential".into(), Box::new(Sequential::new(def, envs, seed))),
        ("threads".into(), Box::new(Threads::new(def, envs, seed, workers))),
        ("subprocess spin".into(), Box::new(sub(WaitMode::Spin))),
        ("subprocess block".into(), Box::new(sub(WaitMode::Block))),
    ]
}

/// Row `e` (of `envs`) of every field, as bytes.
fn row(obs: &Observations, envs: usize, e: usize) -> Vec<u8> {
    obs.fields
        .iter()
        .flat_map(|f| {
            let per_env = f.as_bytes().len() / envs;
            f.as_bytes()[e * per_env..(e + 1) * per_env].to_vec()
        })
        .collect()
}

#[test]
fn every_host_backend_gives_the_same_trajectories() {
    same_trajectories(&CartPole, 300);
}

#[test]
fn every_host_backend_gives_the_same_proof_trajectories() {
    // Seed 000's three index fields through every backend (shared memory included).
    let settings = ProofSpec { kb: "family:people=40,seed=2".into(), depth: 6, ..ProofSpec::default() };
    let def = Proof::load(&settings).unwrap();
    same_trajectories(&def, 120);
}

fn same_trajectories(def: &dyn EnvMaker, steps: usize) {
    for (envs, workers, seed) in [(7, 3, 1), (10, 4, 2), (5, 2, 3), (1, 1, 4)] {
        let mut all = backends(def, envs, seed, workers);
        let spec = all[0].1.spec().clone();
        let mut obs: Vec<Observations> = all.iter().map(|_| Observations::zeros(&spec, envs)).collect();
        for ((_, b), o) in all.iter_mut().zip(&mut obs) {
            b.reset(o).unwrap();
        }
        assert!(obs.iter().all(|o| *o == obs[0]), "reset observations differ ({envs} envs)");
        let mut outs: Vec<StepBatch> = all.iter().map(|_| StepBatch::new(&spec, envs)).collect();
        let mut rng = HostRng::new(seed);
        let mut ended = 0;
        let choices = spec.total_choices() as u64;
        for step in 0..steps {
            let actions: Vec<i64> = (0..envs).map(|_| rng.below(choices) as i64).collect();
            for ((_, b), out) in all.iter_mut().zip(&mut outs) {
                b.step(&actions, out).unwrap();
            }
            let reference = &outs[0];
            ended += reference.episodes.len();
            for ((name, _), out) in all.iter().zip(&outs).skip(1) {
                let ctx = format!("{name}, {envs} envs, {workers} workers, seed {seed}, step {step}");
                assert_eq!(out.obs, reference.obs, "observations: {ctx}");
                assert_eq!(out.reward, reference.reward, "rewards: {ctx}");
                assert_eq!(out.terminated, reference.terminated, "terminated: {ctx}");
                assert_eq!(out.truncated, reference.truncated, "truncated: {ctx}");
                assert_eq!(out.episodes, reference.episodes, "episode ends: {ctx}");
                for end in &reference.episodes {
                    assert_eq!(
                        row(&out.final_obs, envs, end.env),
                        row(&reference.final_obs, envs, end.env),
                        "final obs: {ctx}"
                    );
                }
            }
        }
        assert!(ended > envs * 5, "episodes must end and reset mid-run ({ended})");
    }
}

#[test]
fn the_device_backend_follows_the_host_batch() {
    // libtorch's sin/cos may differ from Rust's by an ulp and the difference grows within
    // an episode (resets start both from the same draws): states agree within 1e-4, and
    // every termination and reset happens at the same step.
    for (envs, seed) in [(9, 1), (64, 5)] {
        let mut host = CartPoleBatch::new(envs, seed, 0);
        let spec = host.spec().clone();
        let mut obs = Observations::zeros(&spec, envs);
        host.reset(&mut obs).unwrap();
        let mut device = DeviceCartPole::new(envs, seed, Device::Cpu);
        let first = Vec::<f32>::try_from(device.reset().reshape([-1])).unwrap();
        assert_eq!(first, obs.fields[0].as_f32().unwrap(), "resets draw the same numbers");
        let mut out = StepBatch::new(&spec, envs);
        let mut rng = HostRng::new(seed);
        let mut ended = 0;
        for step in 0..150 {
            let actions: Vec<i64> = (0..envs).map(|_| rng.below(2) as i64).collect();
            host.step(&actions, &mut out).unwrap();
            let d = device.step(&Tensor::from_slice(&actions));
            let done = Vec::<bool>::try_from(d.done).unwrap();
            let want: Vec<bool> = (0..envs).map(|e| out.terminated[e] || out.truncated[e]).collect();
            assert_eq!(done, want, "seed {seed} step {step}");
            ended += want.iter().filter(|&&x| x).count();
            let got = Vec::<f32>::try_from(d.obs.reshape([-1])).unwrap();
            for (g, h) in got.iter().zip(out.obs.fields[0].as_f32().unwrap()) {
                assert!((g - h).abs() <= 1e-4, "seed {seed} step {step}: {g} vs {h}");
            }
            let returns = Vec::<f64>::try_from(d.episode_return).unwrap();
            for end in &out.episodes {
                assert_eq!(returns[end.env], end.episode_return);
            }
        }
        assert!(ended > envs * 3);
    }
}

fn alive(pid: u32) -> bool {
    // A zombie (state Z) has exited; only its entry waits for a reaper.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rsplit(')').next().and_then(|r| r.split_whitespace().next()) != Some("Z"),
        Err(_) => false,
    }
}

#[test]
fn a_killed_worker_fails_the_step_clearly_and_leaves_no_process() {
    for wait in [WaitMode::Spin, WaitMode::Block] {
        let exe = std::path::Path::new(env!("CARGO_BIN_EXE_hotlab"));
        let mut env = Subprocess::spawn_with(exe, &CartPole, 6, 1, 3, wait).unwrap();
        let pids = env.pids();
        let spec = env.spec().clone();
        let mut obs = Observations::zeros(&spec, 6);
        env.reset(&mut obs).unwrap();
        let mut out = StepBatch::new(&spec, 6);
        env.step(&[0; 6], &mut out).unwrap();
        // SAFETY: sending a signal to our own child.
        unsafe { libc::kill(pids[1] as i32, libc::SIGKILL) };
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut result = Ok(());
            for _ in 0..100 {
                result = env.step(&[1; 6], &mut out);
                if result.is_err() {
                    break;
                }
            }
            tx.send(result).unwrap();
        });
        let result = rx.recv_timeout(Duration::from_secs(20)).expect("the step must not hang");
        let message = result.expect_err("a dead worker must fail the step").to_string();
        assert!(message.contains("env worker 1"), "{message}");
        assert!(message.contains(&pids[1].to_string()) && message.contains("signal"), "{message}");
        assert!(message.contains("stopped"), "{message}");
        for pid in pids {
            assert!(!alive(pid), "worker {pid} still running ({wait:?})");
        }
    }
}

fn child_pids(parent: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        if let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            let ppid = stat.rsplit(')').next().and_then(|r| r.split_whitespace().nth(1)).and_then(|p| p.parse().ok());
            if ppid == Some(parent) {
                found.push(pid);
            }
        }
    }
    found
}

/// A long `hotlab train` on the `subprocess` backend with two workers, once both are up:
/// the trainer and the workers' pids.
fn trainer_with_two_workers(extra: &[&str], stderr: std::process::Stdio) -> (std::process::Child, Vec<u32>) {
    let trainer = hotlab()
        .args(["train", "--backend", "subprocess", "--workers", "2", "--total-steps", "100000000", "--json"])
        .args(["--device", "cpu"])
        .args(extra)
        .stdout(std::process::Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let mut workers = Vec::new();
    for _ in 0..200 {
        workers = child_pids(trainer.id());
        if workers.len() == 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(workers.len(), 2, "the trainer starts two worker processes");
    (trainer, workers)
}

#[test]
fn workers_exit_when_the_trainer_is_killed() {
    let (mut trainer, workers) = trainer_with_two_workers(&[], std::process::Stdio::null());
    trainer.kill().unwrap();
    trainer.wait().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while workers.iter().any(|&w| alive(w)) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    for w in workers {
        assert!(!alive(w), "worker {w} outlived its trainer");
    }
}

/// A worker that is alive but stuck (SIGSTOP) fails the run once it has been silent for
/// `--worker-timeout`, naming it and its pid; no worker process is left behind.
#[test]
fn a_stuck_worker_fails_the_run_after_the_timeout_and_leaves_no_process() {
    let (mut trainer, workers) = trainer_with_two_workers(&["--worker-timeout", "1.5"], std::process::Stdio::piped());
    std::thread::sleep(Duration::from_millis(300)); // stepping
    unsafe { libc::kill(workers[1] as i32, libc::SIGSTOP) };
    // Without the timeout the trainer would wait forever: give up (and fail) after 60 s.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = trainer.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = trainer.kill();
            let _ = trainer.wait();
            workers.iter().for_each(|&w| unsafe {
                libc::kill(w as i32, libc::SIGKILL);
            });
            panic!("the trainer still waits on its stopped worker after 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut trainer.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("env worker 1 (pid {})", workers[1])) && err.contains("not answered"), "{err}");
    for w in workers {
        assert!(!alive(w), "worker {w} outlived the failed run");
    }
}

/// `hotlab train --json` counters of a short eager run.
fn counters(extra: &[&str]) -> serde_json::Value {
    let out = run(hotlab()
        .args(["train", "--device", "cpu", "--inference", "eager", "--envs", "6", "--steps", "16"])
        .args(["--total-steps", "192", "--minibatches", "2", "--json"])
        .args(extra));
    assert!(out.status.success(), "{}", stderr(&out));
    last_json(&out)["counters"].clone()
}

#[test]
fn counters_are_exact() {
    let (envs, steps, updates, heads, fields) = (6u64, 16u64, 2u64, 1u64, 1u64);
    let per_item = counters(&["--action-sync", "per_item"]);
    let stacked = counters(&["--action-sync", "stacked"]);
    let syncs = |c: &serde_json::Value| c["host_syncs"].as_u64().unwrap();
    // per_item reads envs × heads scalars per step where stacked reads once.
    assert_eq!(syncs(&per_item) - syncs(&stacked), (envs * heads - 1) * steps * updates);
    assert!(syncs(&stacked) >= steps * updates);

    let per_tensor = counters(&["--transfer", "per_tensor"]);
    let packed = counters(&["--transfer", "packed"]);
    let copies = |c: &serde_json::Value| c["h2d_copies"].as_u64().unwrap();
    assert_eq!(copies(&per_tensor) - copies(&packed), (fields * envs - 1) * steps * updates);
    assert_eq!(per_tensor["h2d_bytes"], packed["h2d_bytes"], "same bytes, more copies");
    assert_eq!(per_tensor["env_steps"], envs * steps * updates);

    // The rollout to the device per step at update time: obs, actions, advantages and
    // returns (an eager forward keeps log-probs and values there) each copied per step.
    let per_step = counters(&["--rollout-copy", "per_step"]);
    let whole = counters(&["--rollout-copy", "whole"]);
    assert_eq!(copies(&per_step) - copies(&whole), 4 * (steps - 1) * updates);
    assert_eq!(per_step["h2d_bytes"], whole["h2d_bytes"], "same bytes, more copies");

    // Kept on the device where the forward put them (the default), the observations (4
    // floats) and the sampled actions (one i64) are not copied again for the update.
    let kept = counters(&["--rollout-copy", "kept"]);
    assert_eq!(copies(&whole) - copies(&kept), 2 * updates);
    let bytes = |c: &serde_json::Value| c["h2d_bytes"].as_u64().unwrap();
    assert_eq!(bytes(&whole) - bytes(&kept), (4 * 4 + 8) * envs * steps * updates);

    // The device backend copies nothing per step: doubling the steps leaves the copies alone.
    let dev = |steps: &str, total: &str| {
        counters(&["--backend", "device", "--steps", steps, "--total-steps", total, "--minibatches", "2"])
    };
    let (short, long) = (dev("8", "96"), dev("16", "192"));
    for key in ["h2d_copies", "d2h_copies", "host_syncs"] {
        assert_eq!(short[key], long[key], "{key} must not grow with steps");
    }
    // Subprocess round trips: one per worker per step (plus the reset).
    let out = run(hotlab()
        .args(["train", "--device", "cpu", "--backend", "subprocess", "--workers", "3", "--envs", "6"])
        .args(["--steps", "16", "--total-steps", "192", "--minibatches", "2", "--json"]));
    assert!(out.status.success(), "{}", stderr(&out));
    let c = last_json(&out)["counters"].clone();
    assert_eq!(c["ipc_round_trips"].as_u64().unwrap(), 3 * (steps * updates + 1));
}

#[test]
fn bench_envs_reports_every_backend_and_the_gymnasium_peer() {
    let out = run(hotlab()
        .args(["bench", "envs", "--envs", "8,33", "--workers", "2", "--seconds", "0.05", "--json"])
        .args(["--peer", "gymnasium"])
        .env("HOTLAB_PYTHON", python()));
    assert!(out.status.success(), "{}", stderr(&out));
    let lines: Vec<serde_json::Value> = stdout(&out).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let ours: Vec<&serde_json::Value> = lines.iter().filter(|l| l.get("backend").is_some()).collect();
    assert_eq!(ours.len(), 10, "5 backends × 2 env counts");
    for r in &ours {
        assert!(r["steps_per_s"].as_f64().unwrap() > 0.0, "{r}");
        let sps = r["counters"]["env_steps"].as_f64().unwrap() / r["seconds"].as_f64().unwrap();
        assert!((sps / r["steps_per_s"].as_f64().unwrap() - 1.0).abs() < 1e-9, "{r}");
    }
    let peers: Vec<&serde_json::Value> = lines.iter().filter(|l| l.get("peer").is_some()).collect();
    assert_eq!(peers.len(), 6, "CartPoleVectorEnv, make_vec sync and async at 8 and 33 envs");
    assert!(peers.iter().all(|p| p["hotlab_over_peer"]["vectorized"].as_f64().unwrap() > 0.0));
    let bad = run(hotlab().args(["bench", "envs", "--backends", "gpu"]));
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("--backends"));
}

#[test]
fn the_proof_env_trains_under_every_transfer_and_read_back_mode() {
    // Seed 000's copy pattern (an eager forward): per_tensor copies each of the three
    // fields of each env.
    let run_with = |extra: &[&str]| {
        let out = run(hotlab()
            .args([
                "train",
                "--env",
                "proof",
                "--kb",
                "family:people=30,seed=1",
                "--device",
                "cpu",
                "--inference",
                "eager",
            ])
            .args(["--envs", "4", "--steps", "8", "--total-steps", "64", "--minibatches", "2", "--json"])
            .args(extra));
        assert!(out.status.success(), "{extra:?}: {}", stderr(&out));
        last_json(&out)
    };
    let (envs, steps, updates, fields) = (4u64, 8u64, 2u64, 3u64);
    let packed = run_with(&["--transfer", "packed"]);
    let per_tensor = run_with(&["--transfer", "per_tensor"]);
    let pinned = run_with(&["--transfer", "pinned", "--action-sync", "per_item"]);
    let copies = |r: &serde_json::Value| r["counters"]["h2d_copies"].as_u64().unwrap();
    assert_eq!(copies(&per_tensor) - copies(&packed), (fields * envs - fields) * steps * updates);
    assert_eq!(per_tensor["counters"]["h2d_bytes"], packed["counters"]["h2d_bytes"]);
    assert_eq!(copies(&pinned), copies(&packed), "pinned on a CPU behaves as packed");
    assert_eq!(pinned["episodes"], packed["episodes"], "the transfer mode does not change the run");
    let lookups = packed["profile"]["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["phase"] == "embedding_lookup")
        .expect("an embedding_lookup phase");
    assert!(lookups["calls"].as_u64().unwrap() >= steps * updates, "{lookups}");

    let bad = run(hotlab().args(["train", "--env", "proof", "--kb", "/nonexistent.pl", "--queries", "/no.q"]));
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    assert!(stderr(&bad).contains("--kb"), "{}", stderr(&bad));
    let bad = run(hotlab().args(["train", "--env", "proof", "--backend", "device"]));
    assert!(stderr(&bad).contains("--backend") && stderr(&bad).contains("host"), "{}", stderr(&bad));
}
