//! Pixels (issue 60): the PPO policy's CNN encoder equals PyTorch's, built as CleanRL's
//! `ppo_atari.py` builds it, in its features and in the gradient of every weight, over
//! image layouts (channels first and last, one channel), pixels and flags, both trunks,
//! seeds and batch sizes, with its convolutions reading channels first or last in memory
//! (`--conv-layout`; a real PyTorch, `tests/cnn_torch.py`).

mod common;
use common::*;
use hotlab_env::rng::HostRng;
use hotlab_env::{FieldKind, FieldSpec};
use hotlab_train::models::cnn::{Encoder, Layout};
use hotlab_train::models::layers::Builder;
use serde_json::json;
use tch::{Device, Kind, Tensor};

fn f32s(path: &std::path::Path) -> Vec<f32> {
    std::fs::read(path).unwrap().chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect()
}

fn write_f32s(path: &std::path::Path, v: &[f32]) {
    std::fs::write(path, v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
}

/// Largest difference of `a` from `b`, against `b`'s largest magnitude (at least 1).
fn relative_gap(a: &[f32], b: &[f32]) -> f64 {
    assert_eq!(a.len(), b.len());
    let gap = a.iter().zip(b).map(|(x, y)| (x - y).abs() as f64).fold(0.0, f64::max);
    gap / b.iter().map(|y| y.abs() as f64).fold(1.0, f64::max)
}

#[test]
fn the_cnn_encoder_equals_pytorch_s_in_features_and_gradients() {
    let _seeded = hotlab_train::testing::torch_seed(60);
    // (shape, kind, rows, seed): Atari's frame stack (channels first), a gray frame, an RGB
    // frame (channels last), MinAtar's grids of flags and of bytes (the small trunk).
    let cases: [(&[usize], FieldKind, usize, u64); 6] = [
        (&[4, 84, 84], FieldKind::U8, 3, 1),
        (&[4, 84, 84], FieldKind::U8, 1, 2),
        (&[84, 84], FieldKind::U8, 2, 3),
        (&[64, 48, 3], FieldKind::U8, 4, 4),
        (&[10, 10, 4], FieldKind::Bool, 8, 5),
        (&[10, 10, 7], FieldKind::U8, 5, 6),
    ];
    let root = tempfile::tempdir().unwrap();
    let mut written = Vec::new();
    let mut ours = Vec::new();
    let laid = [Layout::Nchw, Layout::Nhwc].into_iter().flat_map(|l| cases.iter().map(move |c| (l, *c)));
    for (i, (layout, (shape, kind, rows, seed))) in laid.enumerate() {
        let dir = root.path().join(i.to_string());
        std::fs::create_dir(&dir).unwrap();
        let field = FieldSpec::new("obs", shape.to_vec(), kind);
        tch::manual_seed(seed as i64);
        let mut b = Builder::new(Kind::Float);
        let enc = Encoder::new(&mut b, "encoder", &field, layout).unwrap();
        let mut p = b.finish(Device::Cpu);
        let mut rng = HostRng::new(seed);
        let top = if kind == FieldKind::Bool { 2 } else { 256 };
        let n: usize = shape.iter().product::<usize>() * rows;
        let x: Vec<u8> = (0..n).map(|_| (rng.next_u64() % top) as u8).collect();
        let r: Vec<f32> = (0..rows * enc.width as usize).map(|_| rng.next_f64() as f32 * 2.0 - 1.0).collect();
        let dims: Vec<i64> = std::iter::once(rows as i64).chain(shape.iter().map(|&d| d as i64)).collect();
        let images = enc.convert(&Tensor::from_slice(&x).view(dims.as_slice()));
        let strides = images.tensor().stride();
        let channels_last = strides[1] == 1 && images.tensor().size()[1] > 1;
        assert_eq!(
            channels_last,
            layout == Layout::Nhwc && enc.image.channels > 1,
            "{shape:?} in {layout:?}: {strides:?}"
        );
        let features = enc.forward(&p, &images);
        (&features * Tensor::from_slice(&r).view([rows as i64, enc.width])).sum(Kind::Float).backward();
        let features = Vec::<f32>::try_from(features.detach().view([-1])).unwrap();
        let grads = Vec::<f32>::try_from(&p.grad).unwrap();
        assert!(grads.iter().any(|g| *g != 0.0), "case {i}: a gradient reached the weights");
        write_f32s(&dir.join("params.f32"), &Vec::<f32>::try_from(&p.flat).unwrap());
        std::fs::write(dir.join("x.u8"), &x).unwrap();
        write_f32s(&dir.join("r.f32"), &r);
        // The reference builds its own network from the image's shape (CleanRL's or
        // MinAtar's): only the weights' order crosses, to copy them.
        written.push(json!({
            "dir": dir, "rows": rows, "shape": shape, "kind": if kind == FieldKind::Bool { "bool" } else { "u8" },
            "layout": p.layout.iter().map(|s| json!({"name": s.name, "shape": s.shape})).collect::<Vec<_>>(),
        }));
        ours.push((
            dir,
            features,
            grads,
            format!("{shape:?} {kind:?}, {rows} rows, seed {seed}, {:?}, {layout:?}", enc.trunk),
        ));
        p.zero_grad();
    }
    let list = root.path().join("cases.json");
    std::fs::write(&list, serde_json::to_string(&written).unwrap()).unwrap();
    let out = run(std::process::Command::new(python()).arg(repo().join("tests/cnn_torch.py")).arg(&list));
    assert!(out.status.success(), "{}", stderr(&out));
    for (dir, features, grads, case) in ours {
        let (want_f, want_g) = (f32s(&dir.join("features.f32")), f32s(&dir.join("grads.f32")));
        assert!(features.iter().any(|v| *v > 0.0), "{case}: some features pass the ReLU");
        let (gf, gg) = (relative_gap(&features, &want_f), relative_gap(&grads, &want_g));
        assert!(gf <= 1e-5, "{case}: features differ from PyTorch's by {gf:e} (relative)");
        assert!(gg <= 1e-5, "{case}: gradients differ from PyTorch's by {gg:e} (relative)");
    }
}

/// Atari's ids open through ale-py as bytes in the frame's own shape, and with Atari's
/// preprocessing as a stack of four 84×84 frames; an id that does not exist is refused with
/// the ids near it, the preprocessing of an env that is not Atari's naming the flag, and a
/// Python without ale-py with the command that installs it (the EnvPool venv's Python has
/// gymnasium and no ale-py).
#[test]
fn atari_ids_open_as_bytes_and_bad_ones_are_refused_naming_the_fix() {
    use hotlab_workloads::gym::python::Engine;
    use hotlab_workloads::gym::GymEnv;
    let env = GymEnv::open("ALE/Breakout-v5", Some(python()), json!({})).unwrap();
    let field = &env.spec().fields[0];
    assert_eq!((field.shape.as_slice(), field.kind), (&[210, 160, 3][..], FieldKind::U8));
    assert_eq!(env.spec().heads.iter().map(|h| h.n).collect::<Vec<_>>(), [4]);

    let typo = GymEnv::open("ALE/Breakot-v5", Some(python()), json!({})).err().unwrap();
    assert_eq!(typo.field, "gym_id", "{typo}");
    assert!(typo.message.contains("no env 'ALE/Breakot-v5'") && typo.message.contains("ALE/Breakout-v5"), "{typo}");

    let wrapped =
        GymEnv::open_with("ALE/Breakout-v5", Some(python()), json!({}), Engine::Gymnasium { atari: Some(4) }).unwrap();
    let field = &wrapped.spec().fields[0];
    assert_eq!((field.shape.as_slice(), field.kind), (&[4, 84, 84][..], FieldKind::U8), "preprocessed and stacked");
    let not_atari = GymEnv::open_with("CartPole-v1", Some(python()), json!({}), Engine::Gymnasium { atari: Some(4) })
        .err()
        .unwrap();
    assert_eq!(not_atari.field, "gym_wrappers", "{not_atari}");
    assert!(not_atari.message.contains("'CartPole-v1' is not an Atari env"), "{not_atari}");

    let bare = repo().join(".venv-envpool/bin/python");
    let probe = run(std::process::Command::new(&bare)
        .args(["-c", "import gymnasium\ntry:\n import ale_py\nexcept ImportError:\n print('none')"]));
    assert_eq!(
        stdout(&probe).trim(),
        "none",
        "{} must have gymnasium and no ale-py: run `cargo xtask test`",
        bare.display()
    );
    let missing = GymEnv::open("ALE/Pong-v5", Some(bare.clone()), json!({})).err().unwrap();
    assert_eq!(missing.field, "gym_id", "{missing}");
    assert!(missing.message.contains("no ale-py") && missing.message.contains("gymnasium[atari]"), "{missing}");
}

/// A bright quadrant on a noisy frame: guess which (1 for right), 16 guesses an episode.
/// Every policy that does not see gets 4 an episode on average, the best constant one too.
/// `small`: 12×12×1 (channels last, the small trunk); `nature`: 1×36×36 (channels first,
/// the Nature trunk).
const QUADRANTS: &str = r#"
import numpy as np
import gymnasium as gym

class Quadrants(gym.Env):
    def __init__(self, side, channels_last):
        self.side, self.last = side, channels_last
        shape = (side, side, 1) if channels_last else (1, side, side)
        self.observation_space = gym.spaces.Box(0, 255, shape=shape, dtype=np.uint8)
        self.action_space = gym.spaces.Discrete(4)
    def frame(self):
        self.q = int(self.np_random.integers(4))
        img = self.np_random.integers(0, 100, size=(self.side, self.side), dtype=np.uint8)
        h = self.side // 2
        r, c = divmod(self.q, 2)
        img[r * h:(r + 1) * h, c * h:(c + 1) * h] += 120
        return img[:, :, None] if self.last else img[None]
    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.frame(), {}
    def step(self, action):
        reward = float(int(action) == self.q)
        self.t += 1
        return self.frame(), reward, False, self.t >= 16, {}

def small():
    return Quadrants(12, True)

def nature():
    return Quadrants(36, False)
"#;

/// PPO with the CNN learns to see: on the quadrant env, with each trunk and two training
/// seeds, the greedy policy's returns on 16 held-out episodes beat, by a paired bootstrap
/// 95 % interval, the best constant action and uniform random actions on the same episodes
/// (both about 4 of 16), and what an encoder that sees only two of the four quadrants earns
/// (12 of 16; one quadrant, 8). Measured here: 16 of 16 in every episode, all four runs. Seed 1 trains in fp32 in the CPU's automatic layout (channels
/// last), seed 2 with bf16 products and channels first. The run says which trunk, layout
/// and precision it built; eval reads the checkpoint's CNN.
#[test]
fn ppo_with_the_cnn_learns_to_see_beyond_every_policy_that_does_not() {
    use hotlab_workloads::morpho::eval::paired;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("quadrant_envs.py"), QUADRANTS).unwrap();
    let path = dir.path().to_str().unwrap().to_string();
    let (episodes, eval_seed) = (16, 777u64);
    let floats =
        |v: &serde_json::Value| -> Vec<f64> { v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect() };
    let mut rng = HostRng::new(60);
    for (id, trunk) in [("quadrant_envs:small", "Small"), ("quadrant_envs:nature", "Nature")] {
        let (input, output) = (dir.path().join("case.json"), dir.path().join("baselines.json"));
        std::fs::write(&input, json!({"id": id, "seed": eval_seed, "episodes": episodes}).to_string()).unwrap();
        let out = run(std::process::Command::new(python())
            .env("PYTHONPATH", &path)
            .arg(repo().join("tests/gym_baselines.py"))
            .arg(&input)
            .arg(&output));
        assert!(out.status.success(), "{}", stderr(&out));
        let baselines: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&output).unwrap()).unwrap();
        let (constant, random) = (floats(&baselines["constant"]["returns"]), floats(&baselines["random"]));
        for (seed, precision, layout) in [(1u64, "fp32", "auto"), (2, "bf16", "nchw")] {
            let ckpt = dir.path().join(format!("{trunk}-{seed}"));
            let out = run(hotlab()
                .env("PYTHONPATH", &path)
                .args(["train", "--env", &format!("gym:{id}"), "--envs", "8", "--steps", "64", "--minibatches", "4"])
                .args(["--epochs", "4", "--lr", "0.001", "--total-steps", "12288", "--seed", &seed.to_string()])
                .args(["--precision", precision, "--conv-layout", layout])
                .arg("--out")
                .arg(&ckpt));
            assert!(out.status.success(), "{id} seed {seed}: {}", stderr(&out));
            let layout = if layout == "auto" { "nhwc" } else { layout };
            for built in [format!("the {trunk} CNN"), format!("convolutions in {layout}, products in {precision}")] {
                assert!(stdout(&out).contains(&built), "{id}: wanted '{built}' in {}", stdout(&out));
            }
            let out = run(hotlab()
                .env("PYTHONPATH", &path)
                .args(["eval", "--json", "--episodes", &episodes.to_string(), "--seed", &eval_seed.to_string()])
                .arg("--checkpoint")
                .arg(&ckpt));
            assert!(out.status.success(), "{id} seed {seed}: {}", stderr(&out));
            let learned = floats(&last_json(&out)["returns"]);
            // An encoder that sees part of the frame: one quadrant earns 8 of 16 in
            // expectation (right when the bright one is its own, a third of the rest), two
            // earn 12; only three or more, which tell all four apart, earn 16.
            let part_of_it = vec![12.0; episodes];
            let others = [
                ("the best constant action", &constant),
                ("uniform random actions", &random),
                ("an encoder that sees two quadrants", &part_of_it),
            ];
            for (name, theirs) in others {
                let p = paired(name, &learned, theirs, &mut rng);
                assert!(
                    p.low > 0.0,
                    "{id} seed {seed}: against {name}: {p:?} (learned {learned:?}, theirs {theirs:?})"
                );
            }
        }
    }
}

/// What the CNN has no form for is refused before anything runs, naming the flag and what
/// is allowed: a captured update, pixels normalized, a layout that is not one.
#[test]
fn cnn_runs_refuse_what_the_cnn_has_no_form_for() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("quadrant_envs.py"), QUADRANTS).unwrap();
    for (flag, value, says) in [
        (
            "--update",
            "graph",
            "--update: graph: the CNN policy's update runs libtorch's ops and autograd; allowed: eager",
        ),
        (
            "--conv-layout",
            "nwhc",
            "invalid value 'nwhc' for '--conv-layout <auto|nchw|nhwc>': allowed: auto, nchw, nhwc",
        ),
        ("--obs-norm", "on", "env observes no floats to normalize (its fields: obs U8); allowed: auto, off"),
    ] {
        let out = run(hotlab().env("PYTHONPATH", dir.path()).args([
            "train",
            "--env",
            "gym:quadrant_envs:small",
            "--total-steps",
            "1024",
            flag,
            value,
        ]));
        assert_eq!(out.status.code(), Some(2), "{flag} {value}: a value not allowed: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{flag} {value}: {}", stderr(&out));
    }
}

/// The frames go to the device as bytes, never as floats, and once (issue 81): a CNN run's
/// host→device bytes are, exactly, each step's frames (144 bytes an env), one frame per env
/// for the last values and one per truncated episode for its bootstrap, and the update's
/// advantages and returns (4 bytes each) per row: the step's frames and sampled actions
/// stay on the device for the update (`--rollout-copy kept`, the default). With
/// `--rollout-copy whole` the update copies the rollout's frames and actions (8 bytes) again
/// from the host, and trains the same weights, byte for byte. With `--frames float` (made
/// floats on the host) the frames are four times that, and nothing else moves more. The
/// conversion is its own phase, once per step and minibatch. Over envs and steps.
#[test]
fn a_cnn_run_moves_its_frames_to_the_device_as_bytes_and_once() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("quadrant_envs.py"), QUADRANTS).unwrap();
    let cases = [(2u64, 32u64, "bytes", 1), (3, 48, "bytes", 1), (2, 32, "float", 4), (3, 32, "float", 4)];
    for (envs, steps, frames, k) in cases {
        let mut weights = Vec::new();
        for copy in ["kept", "whole"] {
            let out_dir = dir.path().join(format!("{envs}-{steps}-{frames}-{copy}"));
            let out = run(hotlab().env("PYTHONPATH", dir.path()).args([
                "train",
                "--env",
                "gym:quadrant_envs:small",
                "--envs",
                &envs.to_string(),
                "--steps",
                &steps.to_string(),
                "--total-steps",
                &(2 * envs * steps).to_string(),
                "--minibatches",
                "2",
                "--frames",
                frames,
                "--rollout-copy",
                copy,
                "--out",
                out_dir.to_str().unwrap(),
                "--json",
            ]));
            assert!(out.status.success(), "{}", stderr(&out));
            weights.push(std::fs::read(out_dir.join("policy.safetensors")).unwrap());
            let report = last_json(&out);
            let (frame, rows, ended) = (12 * 12, 2 * envs * steps, report["episodes"].as_u64().unwrap());
            assert!(ended >= envs * 4, "episodes of 16 steps ended: {ended}");
            let once = k * (rows * frame + (2 * envs + ended) * frame) + rows * (4 + 4);
            let want = if copy == "kept" { once } else { once + k * rows * frame + rows * 8 };
            let at = format!("{envs} envs × {steps} steps, frames {frames}, rollout copy {copy}");
            assert_eq!(report["counters"]["h2d_bytes"].as_u64(), Some(want), "{at}: {report}");
            let phases = report["profile"]["phases"].as_array().unwrap();
            let convert =
                phases.iter().find(|p| p["phase"] == "obs_convert").unwrap_or_else(|| panic!("{at}: {report}"));
            let epochs = report["config"]["ppo"]["epochs"].as_u64().unwrap();
            assert_eq!(
                convert["calls"].as_u64(),
                Some(2 * steps + 2 * epochs * 2),
                "{at}: each step's and minibatch's"
            );
        }
        assert!(
            weights[0] == weights[1],
            "{envs} envs × {steps} steps, frames {frames}: kept and whole train the same weights"
        );
    }
}
