//! The `gym` workload's engine (issue 42): any Gymnasium env stepped by Python worker
//! processes through shared memory, equal to Gymnasium's own `SyncVectorEnv` step for
//! step, and refusing or failing clearly (a real Python, a real gymnasium).

mod common;
use common::*;
use hotlab_core::choices::WaitMode;
use hotlab_env::rng::HostRng;
use hotlab_env::{Actions, BatchEnv, FieldData, FieldKind, Observations, StepBatch};
use hotlab_train::exec::EnvMaker;
use hotlab_workloads::gym::python::Engine;
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
fn reference(id: &str, envs: usize, seed: u64, actions: &[Value]) -> Vec<Value> {
    reference_of(json!({"id": id, "envs": envs, "seed": seed, "actions": actions}))
}

/// [`reference`] of a whole case (with its options: `atari`, `digest`).
fn reference_of(case: Value) -> Vec<Value> {
    reference_by(&python(), "tests/gym_vector.py", case)
}

/// The reference `script` run by `python` on `case`: one JSON line for the reset, then
/// one per step.
fn reference_by(python: &std::path::Path, script: &str, case: Value) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = (dir.path().join("case.json"), dir.path().join("steps.jsonl"));
    std::fs::write(&input, case.to_string()).unwrap();
    let out = run(std::process::Command::new(python).arg(repo().join(script)).arg(&input).arg(&output));
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
/// step, through episode ends (CartPole's terminations, Acrobot's truncation at 500, the
/// echo env's at 20, the frame envs' at 7 to 12). Registered ids, and a user's
/// `module:callable` with a MultiDiscrete action whose dimensions start at −1 and 5 (each
/// head's choice shifted by its start). Images (uint8, channels last and first) and grids of
/// flags (bool) cross as bytes and equal Gymnasium's, bit for bit.
#[test]
fn python_workers_step_as_gymnasium_s_own_vector_env() {
    own_envs();
    let cases = [
        ("CartPole-v1", 3, 1, WaitMode::Block, 0u64, 200),
        ("CartPole-v1", 5, 2, WaitMode::Block, 7, 200),
        ("CartPole-v1", 4, 2, WaitMode::Spin, 123, 120),
        ("Acrobot-v1", 3, 3, WaitMode::Block, 5, 510),
        ("Acrobot-v1", 2, 1, WaitMode::Block, 42, 510),
        ("echo_envs:twenty", 3, 2, WaitMode::Block, 9, 45),
        ("echo_envs:twenty", 4, 1, WaitMode::Spin, 3, 25),
        // Images and flags: bytes, channels last and first, through episode ends.
        ("frame_envs:rgb_last", 3, 2, WaitMode::Block, 11, 40),
        ("frame_envs:rgb_last", 2, 1, WaitMode::Spin, 4, 30),
        ("frame_envs:gray_first", 5, 3, WaitMode::Block, 8, 35),
        ("frame_envs:flags", 4, 2, WaitMode::Spin, 21, 35),
        ("frame_envs:flags", 1, 1, WaitMode::Block, 2, 30),
        // Atari's raw frames (ALE's sticky actions drawn from each env's seeded generator).
        ("ALE/Breakout-v5", 2, 2, WaitMode::Block, 3, 12),
    ];
    let mut ended = 0;
    for (id, envs, workers, wait, seed, steps) in cases {
        let env = open(id);
        let heads: Vec<u64> = env.spec().heads.iter().map(|h| h.n as u64).collect();
        let starts = env.probe.starts.clone();
        let mut rng = HostRng::new(seed ^ 0x9e37);
        // Per step, every env's choice of each head (flat, as the policy gives them).
        let actions: Vec<Vec<i64>> = (0..steps)
            .map(|_| {
                (0..envs).flat_map(|_| heads.iter().map(|&n| (rng.next_u64() % n) as i64).collect::<Vec<_>>()).collect()
            })
            .collect();
        // Gymnasium's: each choice shifted by its dimension's start; a scalar per env for a
        // Discrete action, a row for a MultiDiscrete one.
        let theirs: Vec<Value> = actions
            .iter()
            .map(|step| {
                let rows = step.chunks(heads.len()).map(|row| {
                    let values: Vec<i64> = row.iter().zip(&starts).map(|(a, s)| a + s).collect();
                    if heads.len() == 1 {
                        json!(values[0])
                    } else {
                        json!(values)
                    }
                });
                Value::Array(rows.collect())
            })
            .collect();
        let want = reference(id, envs, seed, &theirs);
        let mut b = batch(&env, envs, seed, workers, wait);
        let mut obs = Observations::zeros(env.spec(), envs);
        let mut out = StepBatch::new(env.spec(), envs);
        b.reset(&mut obs).unwrap();
        let shape = format!("{id}, {envs} envs in {workers} processes, {wait:?}, seed {seed}");
        assert_eq!(as_sent(&obs.fields[0]), floats(&want[0]["obs"]), "{shape}: reset");
        for (t, a) in actions.iter().enumerate() {
            b.step(a, &mut out).unwrap();
            let w = &want[t + 1];
            let at = format!("{shape}: step {t}");
            assert_eq!(as_sent(&out.obs.fields[0]), floats(&w["obs"]), "{at}: obs");
            assert_eq!(out.reward, floats(&w["reward"]), "{at}: reward");
            assert_eq!(out.terminated, bools(&w["terminated"]), "{at}: terminated");
            assert_eq!(out.truncated, bools(&w["truncated"]), "{at}: truncated");
            let finals = w["final_obs"].as_object().unwrap();
            assert_eq!(out.episodes.len(), finals.len(), "{at}: episodes ended");
            for end in &out.episodes {
                let width = env.spec().fields[0].numel();
                let row = &as_sent(&out.final_obs.fields[0])[end.env * width..(end.env + 1) * width];
                assert_eq!(row, floats(&finals[&end.env.to_string()]), "{at}: final obs");
                assert!(end.length > 0, "{at}");
            }
            ended += out.episodes.len();
        }
    }
    assert!(ended > 20, "episodes ended mid-test: {ended}");
}

/// What a run of frame stacks through episode ends saw: games over, lives lost without a
/// game over, truncations, and the scores summed.
#[derive(Default)]
struct Ends {
    games: usize,
    lives_lost: usize,
    truncated: usize,
    scored: f64,
}

/// Steps `envs` envs of `env` (`[4, 84, 84]` frame stacks) in `workers` processes through
/// `actions` and asserts each step equals the reference's line `want[t + 1]` (the reset's
/// is `want[0]`): every env's frames (CRC-32), the rewards, terminations and truncations,
/// the final frames of every env whose learner's episode ended, and the games that ended
/// (`scores`: env → the game's score), env for env.
fn assert_stacks_as(
    env: &GymEnv,
    (envs, workers, seed): (usize, usize, u64),
    actions: &[Vec<i64>],
    want: &[Value],
    ends: &mut Ends,
) {
    let mut b = batch(env, envs, seed, workers, WaitMode::Block);
    let mut obs = Observations::zeros(env.spec(), envs);
    let mut out = StepBatch::new(env.spec(), envs);
    b.reset(&mut obs).unwrap();
    let digests = |field: &FieldData| -> Vec<u64> {
        field.as_bytes().chunks_exact(4 * 84 * 84).map(|row| crc32fast::hash(row) as u64).collect()
    };
    let ints = |v: &Value| -> Vec<u64> { v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect() };
    let shape = format!("{} {envs} envs in {workers} processes, seed {seed}", env.id);
    assert_eq!(digests(&obs.fields[0]), ints(&want[0]["obs"]), "{shape}: reset");
    for (t, a) in actions.iter().enumerate() {
        b.step(a, &mut out).unwrap();
        let (w, at) = (&want[t + 1], format!("{shape}: step {t}"));
        assert_eq!(digests(&out.obs.fields[0]), ints(&w["obs"]), "{at}: frames");
        assert_eq!(out.reward, floats(&w["reward"]), "{at}: reward");
        assert_eq!(
            (out.terminated.clone(), out.truncated.clone()),
            (bools(&w["terminated"]), bools(&w["truncated"])),
            "{at}"
        );
        let finals = digests(&out.final_obs.fields[0]);
        for e in out.ends() {
            assert_eq!(finals[e], w["final_obs"][&e.to_string()].as_u64().unwrap(), "{at}: env {e}'s final frames");
        }
        let scores = w["scores"].as_object().unwrap();
        let mut games: Vec<usize> = scores.keys().map(|k| k.parse().unwrap()).collect();
        let mut over: Vec<usize> = out.episodes.iter().map(|end| end.env).collect();
        games.sort();
        over.sort();
        assert_eq!(over, games, "{at}: the games that ended (a lost life ends none)");
        for end in &out.episodes {
            assert_eq!(end.episode_return, scores[&end.env.to_string()].as_f64().unwrap(), "{at}: the game's score");
            ends.scored += end.episode_return;
        }
        ends.games += out.episodes.len();
        ends.lives_lost += out.ends().count() - out.episodes.len();
        ends.truncated += out.truncated.iter().filter(|&&t| t).count();
    }
}

/// `steps` random actions of 4 for `envs` envs, drawn from `seed`.
fn random_actions(envs: usize, steps: usize, seed: u64) -> Vec<Vec<i64>> {
    let mut rng = HostRng::new(seed);
    (0..steps).map(|_| (0..envs).map(|_| (rng.next_u64() % 4) as i64).collect()).collect()
}

/// With Atari's preprocessing (`--gym-wrappers atari`), each env's stacked frames
/// (`[4, 84, 84]` bytes) equal those of Gymnasium's `AtariPreprocessing` and
/// `FrameStackObservation` (the FIRE press, episodic life and the reward's sign beside
/// them) in its own vector env, step for step and through episode ends, autoreset included
/// (compared by their bytes' CRC-32); rewards are the sign; a lost life ends the learner's
/// episode (`terminated`, its final frames kept) and not the game's, and each game's return
/// is its score over all its lives (Q*bert's 25 points a cube, not 1). In one process and
/// in two, over seeds.
#[test]
fn atari_preprocessing_and_its_frame_stack_equal_gymnasium_s_through_episode_ends() {
    let (id, steps) = ("ALE/Qbert-v5", 400);
    let env = GymEnv::open_with(id, Some(python()), json!({}), Engine::Gymnasium { atari: Some(4) }).unwrap();
    let field = &env.spec().fields[0];
    assert_eq!((field.shape.as_slice(), field.kind), (&[4, 84, 84][..], FieldKind::U8));
    let mut ends = Ends::default();
    for (envs, workers, seed) in [(2, 1, 3u64), (3, 2, 11)] {
        let actions = random_actions(envs, steps, seed);
        let want = reference_of(
            json!({"id": id, "envs": envs, "seed": seed, "actions": actions, "atari": true, "digest": true}),
        );
        assert_stacks_as(&env, (envs, workers, seed), &actions, &want, &mut ends);
    }
    assert!(ends.games >= 3 && ends.scored > 0.0, "games ended mid-test: {}, scoring {}", ends.games, ends.scored);
    assert!(ends.lives_lost >= 3, "lives lost without a game over mid-test: {}", ends.lives_lost);
}

/// The `envpool` workload's batch (one EnvPool batch per worker process, stepped by
/// EnvPool's threads, same-step autoreset in the region) equals EnvPool's own envs, each a
/// pool of its own at EnvPool's next-step autoreset (`tests/envpool_single.py`), step for
/// step: frames (CRC-32), rewards (clipped, Atari's `reward_clip`), terminations (a lost
/// life too, under episodic life), final frames, and each game's score at its end, over
/// seeds, env counts and worker counts.
#[test]
fn envpool_batches_step_as_envpool_s_own_envs_through_lives_and_games() {
    let (id, steps, envpool) = ("Breakout-v5", 300, envpool_python());
    let env = GymEnv::open_with(id, Some(envpool.clone()), json!({}), Engine::EnvPool { threads: 2 }).unwrap();
    assert_eq!(env.name(), "envpool");
    let field = &env.spec().fields[0];
    assert_eq!((field.shape.as_slice(), field.kind), (&[4, 84, 84][..], FieldKind::U8));
    let kwargs = json!({"episodic_life": true, "reward_clip": true, "max_episode_steps": 150});
    let env = GymEnv::open_with(id, Some(envpool.clone()), kwargs.clone(), Engine::EnvPool { threads: 2 }).unwrap();
    let mut ends = Ends::default();
    for (envs, workers, seed) in [(3, 1, 7u64), (4, 2, 21)] {
        let actions = random_actions(envs, steps, seed);
        let case = json!({"id": id, "envs": envs, "seed": seed, "kwargs": kwargs, "actions": actions});
        let want = reference_by(&envpool, "tests/envpool_single.py", case);
        assert_stacks_as(&env, (envs, workers, seed), &actions, &want, &mut ends);
    }
    let Ends { games, lives_lost, truncated, .. } = ends;
    assert!(
        games >= 3 && lives_lost >= 3 && truncated >= 1,
        "games {games}, lives lost {lives_lost}, truncations {truncated}"
    );
}

/// EnvPool's refusals name the knob and the fix: an id EnvPool does not have (with the ids
/// near it), a Python without envpool (with the command that installs it), keywords
/// EnvPool refuses, and keywords that are not an object.
#[test]
fn envpool_refusals_name_the_knob_and_the_fix() {
    let open = |id: &str, python: std::path::PathBuf, kwargs: Value| {
        GymEnv::open_with(id, Some(python), kwargs, Engine::EnvPool { threads: 0 }).err().unwrap()
    };
    let typo = open("Breakot-v5", envpool_python(), json!({}));
    assert_eq!(typo.field, "envpool_id", "{typo}");
    assert!(typo.message.contains("no env 'Breakot-v5'") && typo.message.contains("Breakout-v5"), "{typo}");
    let missing = open("Breakout-v5", python(), json!({}));
    assert_eq!(missing.field, "envpool_python", "{missing}");
    assert!(missing.message.contains("no envpool") && missing.message.contains("pip install envpool"), "{missing}");
    let bad = open("Breakout-v5", envpool_python(), json!({"no_such_option": 1}));
    assert_eq!(bad.field, "envpool_kwargs", "{bad}");
    assert!(bad.message.contains("no_such_option"), "{bad}");
    let not_object = open("Breakout-v5", envpool_python(), json!([1]));
    assert_eq!(not_object.field, "envpool_kwargs", "{not_object}");
}

/// On the command line `--env envpool:ID` trains through EnvPool's batch: its report names
/// the workload, its workers' round trips and EnvPool's own phase, and episodes end.
#[test]
fn the_cli_trains_through_envpool() {
    let args = ["train", "--env", "envpool:CartPole-v1", "--envs", "4", "--steps", "64", "--total-steps", "8192"];
    let out = run(hotlab().args(args).args(["--envpool-threads", "2", "--device", "cpu", "--json"]));
    assert!(out.status.success(), "{}", stderr(&out));
    let report = last_json(&out);
    assert_eq!(report["env"], "envpool", "{report}");
    assert_eq!(report["config"]["workload"]["envpool"]["id"], "CartPole-v1", "{report}");
    assert!(report["counters"]["ipc_round_trips"].as_u64().unwrap() > 0, "stepped in its worker: {report}");
    assert!(report["episodes"].as_u64().unwrap_or(0) > 0, "episodes ended: {report}");
    let phases = report["profile"]["phases"].to_string();
    assert!(phases.contains("envpool_step"), "EnvPool's own phase: {phases}");
}

/// A field's values as the env sent them: floats as they are, bytes one by one (the
/// reference writes Gymnasium's uint8 and bool arrays as float32, which holds them exactly).
fn as_sent(field: &FieldData) -> Vec<f32> {
    match field {
        FieldData::F32(v) => v.clone(),
        FieldData::U8(v) | FieldData::Bool(v) => v.iter().map(|&b| f32::from(b)).collect(),
        FieldData::I64(_) => panic!("a gym env has no index fields"),
    }
}

/// Images stay bytes, in the env's own shape and dtype: one byte per pixel or flag through
/// the region, never floats.
#[test]
fn image_and_flag_observations_cross_as_bytes_in_their_own_shape() {
    own_envs();
    for (id, shape, kind) in [
        ("frame_envs:rgb_last", vec![6, 5, 3], FieldKind::U8),
        ("frame_envs:gray_first", vec![4, 7, 6], FieldKind::U8),
        ("frame_envs:flags", vec![10, 10, 4], FieldKind::Bool),
        ("CartPole-v1", vec![4], FieldKind::F32),
    ] {
        let env = open(id);
        let field = &env.spec().fields[0];
        assert_eq!((&field.shape, field.kind), (&shape, kind), "{id}");
        let bytes = shape.iter().product::<usize>() * if kind == FieldKind::F32 { 4 } else { 1 };
        assert_eq!(field.row_bytes(), bytes, "{id}: bytes per env in the region");
    }
}

/// Envs of a user's own, as modules on the `PYTHONPATH` of this test process (which every
/// worker and run it starts inherits); written once, for every test here.
fn own_envs() {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in [
            ("flaky_envs.py", FLAKY),
            ("echo_envs.py", ECHO),
            ("broken_envs.py", BROKEN),
            ("unpainted_envs.py", UNPAINTED),
            ("binary_envs.py", BINARY),
            ("frame_envs.py", FRAMES),
        ] {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        std::env::set_var("PYTHONPATH", dir.path());
        dir
    });
}

/// Raises, or hangs, at an env's fifth step.
const FLAKY: &str = r#"
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
"#;

/// Echoes the action it was given in its observation, with a keyword's value.
const ECHO: &str = r#"
import numpy as np
import gymnasium as gym

class Echo(gym.Env):
    def __init__(self, scale=1.0, limit=4):
        self.observation_space = gym.spaces.Box(-100, 100, shape=(3,), dtype=np.float32)
        self.action_space = gym.spaces.MultiDiscrete([3, 2], start=[-1, 5])
        self.scale, self.limit, self.t = scale, limit, 0
    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(3, dtype=np.float32), {}
    def step(self, action):
        self.t += 1
        obs = np.array([action[0], action[1], self.scale], dtype=np.float32)
        # A point for each head that chose right: 0 (the first's middle), 6 (the second's last).
        reward = float(action[0] == 0) + float(action[1] == 6)
        return obs, reward, False, self.t >= self.limit, {}

def twenty():
    return Echo(limit=20)
"#;

/// Random frames of uint8 (channels last or first) or bool, drawn from the env's own seeded
/// generator, the action written into the first byte; truncated every 7 to 12 steps.
const FRAMES: &str = r#"
import numpy as np
import gymnasium as gym

class Frames(gym.Env):
    def __init__(self, shape, dtype):
        high = 1 if dtype == np.bool_ else 255
        self.observation_space = gym.spaces.Box(0, high, shape=shape, dtype=dtype)
        self.action_space = gym.spaces.Discrete(4)
        self.t, self.limit = 0, 7
    def frame(self, action=0):
        if self.observation_space.dtype == np.bool_:
            o = self.np_random.random(self.observation_space.shape) < 0.5
            o.flat[0] = action % 2 == 1
        else:
            o = self.np_random.integers(0, 256, size=self.observation_space.shape, dtype=np.uint8)
            o.flat[0] = 60 * action
        return o
    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.limit = 0, int(self.np_random.integers(7, 13))
        return self.frame(), {}
    def step(self, action):
        self.t += 1
        return self.frame(int(action)), float(action), False, self.t >= self.limit, {}

def rgb_last():
    return Frames((6, 5, 3), np.uint8)

def gray_first():
    return Frames((4, 7, 6), np.uint8)

def flags():
    return Frames((10, 10, 4), np.bool_)
"#;

/// Says it draws itself in `rgb_array` mode, and raises when asked to.
const UNPAINTED: &str = r#"
from echo_envs import Echo

class Unpainted(Echo):
    metadata = {"render_modes": ["rgb_array"]}
    def __init__(self, render_mode=None):
        super().__init__()
        self.render_mode = render_mode
    def render(self):
        raise RuntimeError("no canvas here")
"#;

/// Acts with a MultiBinary: a space hotlab has no head for.
const BINARY: &str = r#"
from echo_envs import Echo
import gymnasium as gym

class Switches(Echo):
    def __init__(self):
        super().__init__()
        self.action_space = gym.spaces.MultiBinary(4)
"#;

/// Raises at its 300th step.
const BROKEN: &str = r#"
import gymnasium as gym

class Broken(gym.Wrapper):
    def __init__(self):
        super().__init__(gym.make("CartPole-v1"))
        self.n = 0
    def step(self, action):
        self.n += 1
        if self.n == 300:
            raise ValueError("the env's own bug")
        return self.env.step(action)
"#;

/// Env 0's picture in a frame is what Gymnasium draws of env 0 after the same steps, pixel
/// for pixel (one in k each way; the PNG decoded by the reference). None is drawn before the
/// trainer asks (a frame asks for the next); the next is drawn at the first step after it
/// is asked for, and not within a second of the last. Over ids, seeds and both process
/// modes. An env without pictures sends none; one whose `render()` raises sends why.
#[test]
fn env_zero_is_drawn_as_gymnasium_draws_it() {
    use hotlab_specs::gym::{GymFrame, GymImage};
    use hotlab_specs::EnvName;
    use hotlab_train::workload::Workload;
    use std::time::Instant;
    let image = |env: &GymEnv, obs: &Observations| -> Option<GymImage> {
        env.frame(0, obs, Actions::default()).and_then(|f| f.read::<GymFrame>(EnvName::Gym)).and_then(|f| f.image)
    };
    for (id, envs, workers, seed) in [("CartPole-v1", 3, 1, 3u64), ("Acrobot-v1", 4, 2, 11), ("CartPole-v1", 2, 2, 40)]
    {
        let shape = format!("{id}, {envs} envs in {workers} processes, seed {seed}");
        let env = open(id);
        let mut b = batch(&env, envs, seed, workers, WaitMode::Block);
        let (mut obs, mut out) = (Observations::zeros(env.spec(), envs), StepBatch::new(env.spec(), envs));
        b.reset(&mut obs).unwrap();
        let n = env.spec().heads[0].n as u64;
        let mut rng = HostRng::new(seed);
        let mut actions: Vec<Vec<i64>> = Vec::new();
        let mut step = |b: &mut Box<dyn BatchEnv>| {
            actions.push((0..envs).map(|_| (rng.next_u64() % n) as i64).collect());
            b.step(actions.last().unwrap(), &mut out).unwrap();
        };
        step(&mut b);
        step(&mut b);
        assert_eq!(image(&env, &obs), None, "{shape}: nothing drawn before a frame asks");
        let asked = Instant::now();
        step(&mut b);
        let first = image(&env, &obs).unwrap_or_else(|| panic!("{shape}: a picture at step 3"));
        assert_eq!((first.at_step, &first.error), (3, &None), "{shape}: {first:?}");
        assert!(first.width <= GymImage::MAX_SIDE && first.height <= GymImage::MAX_SIDE, "{shape}: {first:?}");
        step(&mut b);
        let again = image(&env, &obs).map(|i| i.at_step);
        // Asked again at once, but drawn less than a second ago (where this machine
        // stepped in time to tell): the same picture.
        if asked.elapsed() < Duration::from_secs(1) {
            assert_eq!(again, Some(3), "{shape}");
        }
        std::thread::sleep(Duration::from_millis(1100));
        step(&mut b);
        let second = image(&env, &obs).unwrap_or_else(|| panic!("{shape}: a picture at step 5"));
        assert_eq!(second.at_step, 5, "{shape}");
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("case.json");
        let env0: Vec<i64> = actions.iter().map(|a| a[0]).collect();
        let case = json!({"id": id, "seed": seed, "actions": env0, "pictures": [first, second]});
        std::fs::write(&input, case.to_string()).unwrap();
        let out = run(std::process::Command::new(python()).arg(repo().join("tests/gym_render.py")).arg(&input));
        assert!(out.status.success(), "{shape}: {}", stderr(&out));
        let verdict: Value = serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).unwrap();
        assert_eq!(verdict["same"], json!([true, true]), "{shape}: {verdict}");
    }
    own_envs();
    for (id, drawn) in [("echo_envs:Echo", false), ("unpainted_envs:Unpainted", true)] {
        let env = GymEnv::open(id, Some(python()), json!({})).unwrap();
        let mut b = batch(&env, 2, 0, 1, WaitMode::Block);
        let (mut obs, mut out) = (Observations::zeros(env.spec(), 2), StepBatch::new(env.spec(), 2));
        b.reset(&mut obs).unwrap();
        b.step(&[1, 0, 1, 0], &mut out).unwrap();
        assert_eq!(image(&env, &obs), None, "{id}: not asked yet");
        b.step(&[1, 0, 1, 0], &mut out).unwrap();
        let got = image(&env, &obs);
        if drawn {
            let error = got.and_then(|i| i.error).unwrap_or_default();
            assert!(error.contains("RuntimeError: no canvas here"), "{id}: {error}");
        } else {
            assert_eq!(got, None, "{id}: no rgb_array mode, no picture");
        }
    }
}

/// `bench envs --peer envpool` steps EnvPool's own env of the same id beside hotlab's
/// workers and gives the ratio; where EnvPool has no such env (a user's own) it says so and
/// the bench still answers; a workload EnvPool has nothing of is refused, naming `--peer`.
#[test]
fn bench_envs_measures_envpool_where_it_has_the_env() {
    own_envs();
    let bench = |args: &[&str]| {
        let base = ["bench", "envs", "--envs", "8", "--seconds", "0.05", "--json", "--peer", "envpool"];
        run(hotlab().args(base).args(args).env("HOTLAB_PYTHON", python()))
    };
    let lines = |out: &std::process::Output| -> Vec<Value> {
        assert!(out.status.success(), "{}", stderr(out));
        String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    };
    let acrobot = lines(&bench(&["--env", "gym", "--gym-id", "Acrobot-v1", "--backends", "vectorized"]));
    let peer = acrobot.iter().find(|l| l["peer"] == "envpool").unwrap_or_else(|| panic!("{acrobot:?}"));
    assert_eq!((&peer["impl"], &peer["version"]), (&json!("make_gymnasium"), &json!("1.2.5")), "{peer}");
    assert_eq!(peer["envs"], 8, "{peer}");
    assert!(peer["steps_per_s"].as_f64().unwrap() > 0.0, "{peer}");
    let ours = acrobot.iter().find(|l| l["backend"] == "vectorized").unwrap();
    let ratio = ours["steps_per_s"].as_f64().unwrap() / peer["steps_per_s"].as_f64().unwrap();
    assert!((peer["hotlab_over_peer"]["vectorized"].as_f64().unwrap() / ratio - 1.0).abs() < 1e-9, "{peer}");
    let own = lines(&bench(&["--env", "gym", "--gym-id", "echo_envs:Echo", "--backends", "vectorized"]));
    let skipped = own.iter().find_map(|l| l["skipped"].as_str()).unwrap_or_else(|| panic!("{own:?}"));
    assert!(skipped.contains("EnvPool has no env 'echo_envs:Echo'"), "{skipped}");
    let proof = bench(&["--env", "proof"]);
    assert_eq!(proof.status.code(), Some(2), "{}", stderr(&proof));
    assert!(
        stderr(&proof).contains("--peer") && stderr(&proof).contains("envpool has no proof env"),
        "{}",
        stderr(&proof)
    );
    let nowhere = run(hotlab()
        .args(["bench", "envs", "--envs", "8", "--seconds", "0.05", "--peer", "envpool"])
        .env("HOTLAB_ENVPOOL_PYTHON", "/nonexistent/python"));
    assert_eq!(nowhere.status.code(), Some(2), "{}", stderr(&nowhere));
    assert!(stderr(&nowhere).contains("HOTLAB_ENVPOOL_PYTHON is /nonexistent/python"), "{}", stderr(&nowhere));
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
    own_envs();
    let (field, message) = refused("binary_envs:Switches", Some(python()));
    assert_eq!(field, "gym_id");
    assert!(message.contains("MultiBinary") && message.contains("action space"), "names the space: {message}");
    // A lone Discrete observation is no longer refused: it is one leaf of indices, one-hot
    // encoded by the combined policy (tests/structured.rs).
    let lake = open("FrozenLake-v1");
    let field = &lake.spec().fields[0];
    assert_eq!((field.kind, &field.shape, &field.classes), (FieldKind::I64, &vec![1], &vec![16]));
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
    own_envs();
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
    assert_eq!(
        by_env,
        json!({"gym": {"id": "Acrobot-v1", "python": python, "kwargs": {}, "wrappers": "auto", "frame_stack": 4}})
    );
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

/// A MultiDiscrete action space maps onto the policy's heads, one per dimension, each
/// head's choice shifted by its dimension's `start`; `make()`'s keywords reach the env.
/// The env under test echoes the action it was given in its observation.
#[test]
fn multi_discrete_actions_arrive_whole_and_keywords_reach_the_env() {
    own_envs();
    let env = GymEnv::open("echo_envs:Echo", Some(python()), json!({"scale": 2.5})).unwrap();
    assert_eq!(env.spec().heads.iter().map(|h| h.n).collect::<Vec<_>>(), [3, 2]);
    for workers in [1, 2] {
        let mut b = batch(&env, 3, 0, workers, WaitMode::Block);
        let mut obs = Observations::zeros(env.spec(), 3);
        let mut out = StepBatch::new(env.spec(), 3);
        b.reset(&mut obs).unwrap();
        for t in 0..6i64 {
            // Per env its two heads' choices: (t + e) % 3 and (t + e) % 2.
            let actions: Vec<i64> = (0..3).flat_map(|e| [(t + e) % 3, (t + e) % 2]).collect();
            b.step(&actions, &mut out).unwrap();
            for e in 0..3usize {
                let seen = if out.truncated[e] {
                    out.final_row(0, e).to_vec()
                } else {
                    out.obs.fields[0].as_f32().unwrap()[e * 3..e * 3 + 3].to_vec()
                };
                let want = [((t + e as i64) % 3 - 1) as f32, ((t + e as i64) % 2 + 5) as f32, 2.5];
                assert_eq!(seen, want, "{workers} processes, step {t}, env {e}");
            }
        }
    }
}

/// An env that raises mid-run fails the run itself (`hotlab train`), naming the env and
/// quoting Python's traceback, with the exit status of a failed run.
#[test]
fn a_run_whose_env_raises_fails_naming_the_env() {
    own_envs();
    let out = run(hotlab().args(["train", "--env", "gym:broken_envs:Broken", "--envs", "2", "--total-steps", "4096"]));
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("env 0 raised in step") && err.contains("ValueError: the env's own bug"), "{err}");
}

/// PPO learns both heads of a MultiDiscrete action: 20 steps an episode, a point per head
/// that chose right. Uniform actions average 16.7; a policy right on one head only, 30 at
/// best; at least 34 needs both.
#[test]
fn ppo_learns_both_heads_of_a_multi_discrete_action() {
    own_envs();
    let out = run(hotlab()
        .args(["train", "--env", "gym:echo_envs:twenty", "--envs", "8", "--total-steps", "60000"])
        .args(["--seed", "1", "--json"]));
    assert!(out.status.success(), "{}", stderr(&out));
    let report = last_json(&out);
    let ret = report["mean_return_last_100"].as_f64().unwrap();
    assert!(ret >= 34.0, "mean return of the last 100 episodes: {ret} (report: {report})");
}
