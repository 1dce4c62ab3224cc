//! Continuous control (issue 59): a Box action space is the policy's diagonal Gaussian head,
//! equal to PyTorch's `Normal`; the env gets the sample clipped to its bounds while the
//! rollout keeps the sample; bad spaces and envs that return NaN are refused or failed,
//! naming what is wrong (a real Python, a real gymnasium, a real PyTorch).

mod common;
use common::*;
use hotlab_core::choices::WaitMode;
use hotlab_env::rng::HostRng;
use hotlab_env::{Actions, BatchEnv, Observations, StepBatch};
use hotlab_lab::wire::process::FromRun;
use hotlab_protocol::{EventBody, RunStatus};
use hotlab_specs::gym::GymFrame;
use hotlab_specs::EnvName;
use hotlab_train::distribution::gaussian;
use hotlab_train::exec::EnvMaker;
use hotlab_workloads::gym::GymEnv;
use serde_json::{json, Value};
use std::io::Write;
use std::process::Stdio;
use tch::{Kind, Tensor};

/// Envs of the test's own with Box actions, on the `PYTHONPATH` of this test process
/// (which the workers and runs it starts inherit); written once.
fn own_envs() {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("box_envs.py"), BOX_ENVS).unwrap();
        std::env::set_var("PYTHONPATH", dir.path());
        dir
    });
}

const BOX_ENVS: &str = r#"
import numpy as np
import gymnasium as gym

class Strict(gym.Env):
    """Raises on an action outside [-0.5, 0.5] in its first component (its second is
    unbounded) and echoes the action it got; 16 steps an episode."""
    def __init__(self):
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, shape=(3,), dtype=np.float32)
        self.action_space = gym.spaces.Box(np.array([-0.5, -np.inf]), np.array([0.5, np.inf]), dtype=np.float32)
        self.t = 0
    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(3, dtype=np.float32), {}
    def step(self, action):
        if action.shape != (2,) or action.dtype != np.float32:
            raise ValueError(f"an action of shape {action.shape} and dtype {action.dtype}")
        if not -0.5 <= action[0] <= 0.5:
            raise ValueError(f"action {action[0]} out of bounds")
        self.t += 1
        obs = np.array([action[0], action[1], self.t], dtype=np.float32)
        return obs, -float(action[0] ** 2), False, self.t >= 16, {}

class IntBox(Strict):
    def __init__(self):
        super().__init__()
        self.action_space = gym.spaces.Box(-3, 3, shape=(2,), dtype=np.int64)

class Wide(Strict):
    def __init__(self):
        super().__init__()
        self.action_space = gym.spaces.Box(-1, 1, shape=(5, 13), dtype=np.float32)

class NaNs(Strict):
    """At its 7th step returns NaN in its reward or in its observation's last element."""
    def __init__(self, field="reward"):
        super().__init__()
        self.field = field
    def step(self, action):
        obs, reward, term, trunc, info = super().step(np.clip(action, -0.5, 0.5))
        if self.t == 7:
            if self.field == "reward":
                reward = float("nan")
            else:
                obs[2] = np.nan
        return obs, reward, term, trunc, info
"#;

/// hotlab's Gaussian head is PyTorch's `Normal(mean, exp(log_std))`: each row's
/// `log_prob(a).sum(-1)` and `entropy().sum(-1)`, over seeds and shapes (1 to 17
/// components, actions within and far beyond a σ). The tensor ops (the update's loss) in
/// f64 to 1e-6, and in the trainer's f32 with the host rows (the fused rollout's) to f32's
/// rounding of the sum.
#[test]
fn the_gaussian_head_is_pytorchs_normal() {
    let shapes =
        [(1u64, 1usize, 7usize), (2, 2, 5), (3, 3, 9), (4, 6, 4), (5, 8, 6), (6, 11, 3), (7, 17, 8), (8, 17, 2)];
    let mut cases = Vec::new();
    for &(seed, dims, rows) in &shapes {
        let mut rng = HostRng::new(seed);
        let mean: Vec<f32> = gaussian::draw_normals(rows * dims, &mut rng);
        let log_std: Vec<f32> = gaussian::draw_normals(dims, &mut rng).iter().map(|v| 0.8 * v).collect();
        let actions: Vec<f32> = gaussian::draw_normals(rows * dims, &mut rng).iter().map(|v| 3.0 * v).collect();
        cases.push((rows, dims, mean, log_std, actions));
    }
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = (dir.path().join("cases.json"), dir.path().join("torch.json"));
    let written: Vec<Value> = cases
        .iter()
        .map(|(rows, dims, m, l, a)| json!({"rows": rows, "dims": dims, "mean": m, "log_std": l, "actions": a}))
        .collect();
    std::fs::write(&input, serde_json::to_string(&written).unwrap()).unwrap();
    let out =
        run(std::process::Command::new(python()).arg(repo().join("tests/gaussian_torch.py")).arg(&input).arg(&output));
    assert!(out.status.success(), "{}", stderr(&out));
    let torch: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(&output).unwrap()).unwrap();
    let floats = |v: &Value| -> Vec<f64> { v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect() };
    for ((rows, dims, m, l, a), want) in cases.iter().zip(&torch) {
        let (want_lp, want_h) = (floats(&want["log_prob"]), floats(&want["entropy"]));
        let shape = format!("{rows} rows of {dims} components");
        for kind in [Kind::Double, Kind::Float] {
            let t = |v: &[f32], s: &[i64]| Tensor::from_slice(v).view(s).to_kind(kind);
            let (r, d) = (*rows as i64, *dims as i64);
            let (mean, log_std, actions) = (t(m, &[r, d]), t(l, &[d]), t(a, &[r, d]));
            let lp = Vec::<f64>::try_from(gaussian::log_prob(&mean, &log_std, &actions).to_kind(Kind::Double)).unwrap();
            let h = Vec::<f64>::try_from(gaussian::entropy(&mean, &log_std).to_kind(Kind::Double)).unwrap();
            // f64 to 1e-6; f32 to its rounding (a few ulps of each of the sum's terms).
            let tol = |w: f64| if kind == Kind::Double { 1e-6 } else { 4e-7 * (*dims as f64 + 1.0) * w.abs().max(1.0) };
            for row in 0..*rows {
                assert!(
                    (lp[row] - want_lp[row]).abs() <= tol(want_lp[row]),
                    "{shape}, {kind:?}, row {row}: log-prob {} vs torch {}",
                    lp[row],
                    want_lp[row]
                );
                assert!(
                    (h[row] - want_h[row]).abs() <= tol(want_h[row]),
                    "{shape}, {kind:?}: entropy {} vs torch {}",
                    h[row],
                    want_h[row]
                );
            }
        }
        for row in 0..*rows {
            let at = row * dims..(row + 1) * dims;
            let lp = gaussian::row_log_prob(&m[at.clone()], l, &a[at]) as f64;
            let tol = 4e-7 * (*dims as f64 + 1.0) * want_lp[row].abs().max(1.0);
            assert!((lp - want_lp[row]).abs() <= tol, "{shape}, host row {row}: {lp} vs torch {}", want_lp[row]);
            let h = gaussian::row_entropy(l) as f64;
            assert!(
                (h - want_h[row]).abs() <= 4e-7 * (*dims as f64 + 1.0) * want_h[row].abs().max(1.0),
                "{shape}: host entropy {h}"
            );
        }
    }
}

/// The batch of `envs` envs of `env` in `workers` processes (1: one process holds them all).
fn batch(env: &GymEnv, envs: usize, workers: usize) -> Box<dyn BatchEnv> {
    match workers {
        1 => env.vector_env(envs, 0, 0),
        w => Box::new(env.worker_processes(envs, 0, w, WaitMode::Block).unwrap().unwrap()),
    }
}

/// A Box action reaches the env clipped to its finite bounds, in its space's shape and
/// dtype (the env raises on anything else); an infinite bound clips nothing. In one
/// process and in two.
#[test]
fn box_actions_reach_the_env_clipped_to_its_bounds() {
    own_envs();
    let env = GymEnv::open("box_envs:Strict", Some(python()), json!({})).unwrap();
    assert_eq!((env.spec().heads.len(), env.spec().continuous), (0, 2));
    let sampled: [f32; 8] = [2.0, -3.0, -0.7, 5.5, 0.1, 0.2, -0.5, 1e6];
    let want: [f32; 8] = [0.5, -3.0, -0.5, 5.5, 0.1, 0.2, -0.5, 1e6];
    for workers in [1, 2] {
        let mut b = batch(&env, 4, workers);
        let (mut obs, mut out) = (Observations::zeros(env.spec(), 4), StepBatch::new(env.spec(), 4));
        b.reset(&mut obs).unwrap();
        b.step_actions(Actions { index: &[], real: &sampled }, &mut out).unwrap();
        let seen = out.obs.fields[0].as_f32().unwrap();
        for e in 0..4 {
            assert_eq!(&seen[e * 3..e * 3 + 2], &want[e * 2..e * 2 + 2], "{workers} processes, env {e}");
        }
        // The wrong number of components is refused before any env steps.
        let e = b.step_actions(Actions { index: &[], real: &sampled[..6] }, &mut out).unwrap_err();
        assert!(e.0.contains("2 real-valued action components per env"), "{e}");
    }
}

/// A run on an env that raises on any action out of its bounds trains to its end, while the
/// actions the policy sampled (a σ of 1 about a mean near 0, the rollout's own buffer, which
/// the frames show) fall outside them: the env got them clipped, the rollout kept them whole.
#[test]
fn a_run_clips_for_the_env_and_keeps_the_sample() {
    own_envs();
    let spec = json!({
        "workload": {"gym": {"id": "box_envs:Strict", "python": python()}},
        "envs": 4, "steps": 32, "total_steps": 4096, "device": "cpu", "seed": 3,
    });
    let mut child = hotlab()
        .args(["run-worker", "--spec", &spec.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Watched: a frame every 33 ms rather than every second. The pipe stays open until the
    // run ends: a run whose lab closes it stops.
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"watched\n").unwrap();
    let out = child.wait_with_output().unwrap();
    drop(stdin);
    let lines: Vec<FromRun> =
        stdout(&out).lines().filter_map(|l| serde_json::from_str(l).ok()).collect::<Vec<FromRun>>();
    let end = lines.iter().find_map(|l| match l {
        FromRun::End { status, message, .. } => Some((*status, message.clone())),
        _ => None,
    });
    assert_eq!(end.as_ref().map(|e| e.0), Some(RunStatus::Finished), "{end:?}: {}", stderr(&out));
    let real: Vec<f32> = lines
        .iter()
        .filter_map(|l| match l {
            FromRun::Event(EventBody::Rollout { frame }) => frame.read::<GymFrame>(EnvName::Gym),
            _ => None,
        })
        .flat_map(|f| f.real.into_iter().map(|a| a[0]))
        .collect();
    assert!(real.len() >= 8, "frames with actions: {}", real.len());
    let beyond = real.iter().filter(|a| a.abs() > 0.5).count();
    assert!(beyond > 0, "no sampled action beyond the bounds among {}: {real:?}", real.len());
}

/// A Box of integers and one of more components than allowed are refused naming the env's
/// id and what is allowed; an env that returns NaN fails its run naming the env, the step
/// and the field.
#[test]
fn bad_box_spaces_and_non_finite_envs_are_refused_naming_the_field() {
    own_envs();
    let refused = |id: &str| match GymEnv::open(id, Some(python()), json!({})) {
        Ok(_) => panic!("{id} was accepted"),
        Err(e) => (e.field.clone(), e.message.clone()),
    };
    let (field, message) = refused("box_envs:IntBox");
    assert_eq!(field, "gym_id");
    assert!(message.contains("float dtype") && message.contains("int64"), "{message}");
    let (field, message) = refused("box_envs:Wide");
    assert_eq!(field, "gym_id");
    assert!(message.contains("65 real-valued components") && message.contains("at most 64"), "{message}");
    for (kwargs, says) in [
        ("reward", "non-finite reward (NaN) at step 6"),
        ("obs", "non-finite observation (NaN in field 'obs', element 2) at step 6"),
    ] {
        let out = run(hotlab()
            .args(["train", "--env", "gym:box_envs:NaNs", "--envs", "2", "--steps", "16", "--total-steps", "64"])
            .args(["--device", "cpu", "--gym-kwargs", &json!({"field": kwargs}).to_string()]));
        assert!(!out.status.success(), "{kwargs}: the run succeeded");
        let err = stderr(&out);
        assert!(err.contains("env 0 of gym:box_envs:NaNs returned a") && err.contains(says), "{kwargs}: {err}");
    }
}

/// hotlab's normalizers, fed what the envs gave, return what Gymnasium's vector
/// `NormalizeObservation` and `NormalizeReward` (then clipped at ±10) return on the same
/// record, step for step: terminations (InvertedPendulum falls within steps), a truncation
/// (Pendulum's 200th step) and its same-step reset, over envs, seeds and discounts.
#[test]
fn the_normalizers_are_gymnasiums_step_for_step() {
    use hotlab_train::normalize::{ObsNorm, RewardNorm};
    let cases = [
        ("InvertedPendulum-v5", 3usize, 60usize, 5u64, 0.99),
        ("InvertedPendulum-v5", 1, 40, 9, 0.95),
        ("Pendulum-v1", 2, 210, 1, 0.9),
    ];
    let (mut terminations, mut truncations) = (0, 0);
    for (id, envs, steps, seed, gamma) in cases {
        let dir = tempfile::tempdir().unwrap();
        let (input, output) = (dir.path().join("case.json"), dir.path().join("record.json"));
        std::fs::write(
            &input,
            json!({"id": id, "envs": envs, "steps": steps, "seed": seed, "gamma": gamma}).to_string(),
        )
        .unwrap();
        let out = run(std::process::Command::new(python())
            .arg(repo().join("tests/gym_normalize.py"))
            .arg(&input)
            .arg(&output));
        assert!(out.status.success(), "{}", stderr(&out));
        let record: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(&output).unwrap()).unwrap();
        let floats =
            |v: &Value| -> Vec<f32> { v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect() };
        let bools = |v: &Value| -> Vec<bool> { v.as_array().unwrap().iter().map(|x| x.as_bool().unwrap()).collect() };
        let dim = floats(&record[0]["obs"]).len() / envs;
        let (mut obs_norm, mut reward_norm) = (ObsNorm::new(dim), RewardNorm::new(envs, gamma));
        // Normalized values agree to f32's rounding of the same f64 arithmetic.
        let same = |got: &[f32], want: &[f32], what: &str| {
            assert_eq!(got.len(), want.len());
            for (i, (g, w)) in got.iter().zip(want).enumerate() {
                assert!(
                    (g - w).abs() <= 2e-6 * w.abs().max(1.0),
                    "{id}, {envs} envs, seed {seed}: {what}, element {i}: {g} vs Gymnasium's {w}"
                );
            }
        };
        for (t, step) in record.iter().enumerate() {
            let mut obs = floats(&step["obs"]);
            obs_norm.observe(&mut obs);
            same(&obs, &floats(&step["norm_obs"]), &format!("observation at step {t}"));
            if t == 0 {
                continue;
            }
            let (terminated, truncated) = (bools(&step["terminated"]), bools(&step["truncated"]));
            terminations += terminated.iter().filter(|&&d| d).count();
            truncations += truncated.iter().filter(|&&d| d).count();
            let mut reward = floats(&step["reward"]);
            reward_norm.step(&mut reward, &terminated, &truncated);
            same(&reward, &floats(&step["norm_reward"]), &format!("reward at step {t}"));
        }
    }
    assert!(
        terminations >= 5 && truncations >= 2,
        "episode ends in the records: {terminations} terminated, {truncations} truncated"
    );
}

/// PPO learns InvertedPendulum-v5 with the `mujoco` preset's settings (CleanRL's
/// `ppo_continuous_action.py`: one env of 2048 steps, normalizers on) in 40,960 steps,
/// about 5 s a seed here: on three training seeds, the greedy policy balances the pole
/// (a mean of at least 900 of the env's 1,000 on 16 held-out episodes; measured: 1,000 on
/// every episode of all three, where 20,480 steps gave 390 to 1,000), and beats, by a paired
/// bootstrap 95 % interval, the best constant action (chosen on those same episodes, about
/// 26) and uniform random actions (about 5) on the same episodes. The checkpoint keeps the run's observation statistics (every observation the
/// run saw counted), and eval reads them: moved, its returns change.
#[test]
fn ppo_learns_inverted_pendulum_beyond_every_policy_that_does_not_learn() {
    use hotlab_workloads::morpho::eval::paired;
    let (episodes, eval_seed, steps) = (16, 12_345u64, 40_960u64);
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = (dir.path().join("case.json"), dir.path().join("baselines.json"));
    let case = json!({"id": "InvertedPendulum-v5", "seed": eval_seed, "episodes": episodes, "grid": 21});
    std::fs::write(&input, case.to_string()).unwrap();
    let out =
        run(std::process::Command::new(python()).arg(repo().join("tests/gym_baselines.py")).arg(&input).arg(&output));
    assert!(out.status.success(), "{}", stderr(&out));
    let baselines: Value = serde_json::from_str(&std::fs::read_to_string(&output).unwrap()).unwrap();
    let floats = |v: &Value| -> Vec<f64> { v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect() };
    let (constant, random) = (floats(&baselines["constant"]["returns"]), floats(&baselines["random"]));
    let mut rng = HostRng::new(7);
    for seed in 1..=3u64 {
        let ckpt = dir.path().join(format!("seed{seed}"));
        let out = run(hotlab()
            .args(["train", "--preset", "mujoco", "--gym-id", "InvertedPendulum-v5", "--json", "--seed"])
            .arg(seed.to_string())
            .args(["--total-steps", &steps.to_string(), "--out"])
            .arg(&ckpt));
        assert!(out.status.success(), "seed {seed}: {}", stderr(&out));
        let eval = |ckpt: &std::path::Path| {
            let out = run(hotlab()
                .args([
                    "eval",
                    "--json",
                    "--episodes",
                    &episodes.to_string(),
                    "--seed",
                    &eval_seed.to_string(),
                    "--checkpoint",
                ])
                .arg(ckpt));
            assert!(out.status.success(), "seed {seed}: {}", stderr(&out));
            floats(&last_json(&out)["returns"])
        };
        let learned = eval(&ckpt);
        let mean = learned.iter().sum::<f64>() / learned.len() as f64;
        assert!(mean >= 900.0, "seed {seed}: the pole balanced through most episodes: {mean} ({learned:?})");
        for (name, theirs) in [("the best constant action", &constant), ("uniform random actions", &random)] {
            let p = paired(name, &learned, theirs, &mut rng);
            assert!(p.low > 0.0, "seed {seed}: against {name}: {p:?} (learned {learned:?}, theirs {theirs:?})");
        }
        // Every observation of the run (the reset's, then one a step) is in the statistics.
        let meta: Value = serde_json::from_str(&std::fs::read_to_string(ckpt.join("spec.json")).unwrap()).unwrap();
        let norm = &meta["architecture"]["obs_norm"];
        assert!((norm["rms"]["count"].as_f64().unwrap() - (1.0 + steps as f64 + 1e-4)).abs() < 1e-6, "{norm}");
        if seed == 1 {
            let mut moved = meta.clone();
            moved["architecture"]["obs_norm"]["rms"]["mean"] = json!([5.0, -5.0, 5.0, -5.0]);
            std::fs::write(ckpt.join("spec.json"), moved.to_string()).unwrap();
            assert_ne!(eval(&ckpt), learned, "eval reads the checkpoint's statistics");
        }
    }
}

/// `hotlab eval` plays the Gaussian head's mean, and with `--sample` draws from it: on the
/// env that pays −a² per step for its (clipped) action, a policy fresh from one update
/// (mean near 0, σ near 1) loses almost nothing greedy and about 16 × E[min(z², 0.25)] ≈ 3
/// an episode sampled.
#[test]
fn eval_plays_the_mean_and_samples_with_a_flag() {
    own_envs();
    let dir = tempfile::tempdir().unwrap();
    let out = run(hotlab()
        .args(["train", "--env", "gym:box_envs:Strict", "--envs", "2", "--steps", "32", "--total-steps", "64"])
        .args(["--device", "cpu", "--json", "--out"])
        .arg(dir.path()));
    assert!(out.status.success(), "{}", stderr(&out));
    let eval = |extra: &[&str]| {
        let out =
            run(hotlab().args(["eval", "--json", "--episodes", "16", "--checkpoint"]).arg(dir.path()).args(extra));
        assert!(out.status.success(), "{}", stderr(&out));
        last_json(&out)["mean_return"].as_f64().unwrap()
    };
    let (greedy, sampled) = (eval(&[]), eval(&["--sample"]));
    assert!(greedy > -0.5, "greedy: {greedy}");
    assert!(sampled < -1.5, "sampled: {sampled}");
    let out = run(hotlab().args(["eval", "--sample", "--task-set", "validation", "--checkpoint"]).arg(dir.path()));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--sample"), "{}", stderr(&out));
}

/// The browser's playground plays a CartPole run's actor (`GET /api/runs/{id}/policy`)
/// on the worker's own batch env. A run trained with `--obs-norm on` keeps its
/// statistics in that JSON, and the playground reads its inputs through them: its greedy
/// episodes are `hotlab eval`'s, env for env (same env, same resets), over seeds and
/// widths. The same actor fed raw observations plays other episodes: the test can fail.
#[test]
fn the_playground_plays_a_normalized_run_as_eval_does() {
    let episodes = 32;
    for (seed, hidden) in [(1, "64,64"), (2, "64,64"), (3, "32")] {
        let dir = tempfile::tempdir().unwrap();
        let out = run(hotlab()
            .args(["train", "--env", "cartpole", "--obs-norm", "on", "--total-steps", "20480", "--device", "cpu"])
            .args(["--seed", &seed.to_string(), "--hidden", hidden, "--json", "--out"])
            .arg(dir.path()));
        assert!(out.status.success(), "{}", stderr(&out));
        let eval_seed = 40 + seed;
        let out = run(hotlab()
            .args(["eval", "--json", "--episodes", &episodes.to_string(), "--seed", &eval_seed.to_string()])
            .arg("--checkpoint")
            .arg(dir.path()));
        assert!(out.status.success(), "{}", stderr(&out));
        let evaluated: Vec<u64> =
            last_json(&out)["returns"].as_array().unwrap().iter().map(|r| r.as_f64().unwrap() as u64).collect();

        let policy = hotlab_workloads::load_checkpoint(dir.path()).unwrap();
        let text = policy.policy_json("cartpole");
        let json: Value = serde_json::from_str(&text).unwrap();
        assert!(json["shape"]["obs_norm"]["rms"]["mean"].is_array(), "{}", json["shape"]);
        let actor = hotlab_wgpu::Actor::from_policy_json(&text).unwrap();
        assert!(actor.norm.is_some());
        let played = first_episodes(&actor, episodes, eval_seed);
        let same = played.iter().zip(&evaluated).filter(|(a, b)| a == b).count();
        // A greedy choice at an exact tie could flip between f32 paths; nothing more.
        assert!(same + 1 >= episodes, "seed {seed}: {same} of {episodes} equal: {played:?} vs {evaluated:?}");

        let raw = hotlab_wgpu::Actor { norm: None, ..actor };
        assert_ne!(first_episodes(&raw, episodes, eval_seed), evaluated, "seed {seed}: the statistics matter");
    }
}

/// Each env's first episode's length under the actor's greedy choices, on the playground's
/// CPU path (the worker's batch env, env `i` reset from `seed`'s stream `i`).
fn first_episodes(actor: &hotlab_wgpu::Actor, envs: usize, seed: u64) -> Vec<u64> {
    use hotlab_env::cartpole::CartPoleBatch;
    let policy = hotlab_wgpu::Policy::Actor { actor: std::sync::Arc::new(actor.clone()), greedy: true };
    let mut env = CartPoleBatch::new(envs, seed, 0);
    let spec = env.spec().clone();
    env.reset(&mut Observations::zeros(&spec, envs)).unwrap();
    let mut out = StepBatch::new(&spec, envs);
    let mut rngs: Vec<_> = (0..envs as u64).map(|i| hotlab_wgpu::action_rng(seed, i)).collect();
    let mut lengths = vec![None; envs];
    while lengths.iter().any(Option::is_none) {
        let actions: Vec<i64> =
            (0..envs).map(|i| hotlab_wgpu::actor::choose(&policy, env.state(i), &mut rngs[i])).collect();
        env.step_actions(Actions { index: &actions, real: &[] }, &mut out).unwrap();
        for end in &out.episodes {
            lengths[end.env].get_or_insert(end.length as u64);
        }
    }
    lengths.into_iter().map(Option::unwrap).collect()
}
