//! Structured observations (a Gymnasium `Dict` or `Tuple`, nested too, or a lone
//! `Discrete`; issue 78, item 3): each leaf crosses the region in its own form as
//! Gymnasium's own vector env gives it (`tests/structured_vector.py`), the combined policy
//! equals a PyTorch reference written as SB3's `CombinedExtractor` lays it out
//! (`tests/combined_torch.py`), a goal given only in a `Discrete` leaf is learned, image
//! leaves move as bytes, and leaves no encoder reads are refused naming the leaf
//! (`tests/fixtures/structured/dict_envs.py`).

mod common;

use common::*;
use hotlab_core::choices::WaitMode;
use hotlab_env::rng::HostRng;
use hotlab_env::{BatchEnv, FieldData, FieldKind, FieldSpec, Observations, StepBatch};
use hotlab_train::exec::EnvMaker;
use hotlab_train::models::cnn::{Compute, Layout};
use hotlab_train::models::combined::{CombinedNet, CombinedShape, Inputs};
use hotlab_workloads::gym::GymEnv;
use serde_json::{json, Value};
use tch::{Device, Kind, Tensor};

/// The fixture envs' module on the `PYTHONPATH` of this process (its workers and runs
/// inherit it).
fn fixtures() {
    static SET: std::sync::Once = std::sync::Once::new();
    SET.call_once(|| std::env::set_var("PYTHONPATH", repo().join("tests/fixtures/structured")));
}

fn f32s(path: &std::path::Path) -> Vec<f32> {
    std::fs::read(path).unwrap().chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect()
}

fn write_f32s(path: &std::path::Path, v: &[f32]) {
    std::fs::write(path, v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
}

fn host(t: &Tensor) -> Vec<f32> {
    Vec::<f32>::try_from(t.detach().contiguous().view([-1])).unwrap()
}

/// The largest difference of `a` from `b`, relative to `b`'s largest magnitude.
fn relative_gap(a: &[f32], b: &[f32]) -> f64 {
    assert_eq!(a.len(), b.len());
    let scale = b.iter().map(|v| v.abs() as f64).fold(1e-12, f64::max);
    a.iter().zip(b).map(|(x, y)| (x - y).abs() as f64).fold(0.0, f64::max) / scale
}

fn leaf(name: &str, shape: &[usize], kind: FieldKind, classes: &[usize]) -> FieldSpec {
    FieldSpec { classes: classes.to_vec(), ..FieldSpec::new(name, shape.to_vec(), kind) }
}

/// Over shapes and seeds, in both convolution layouts: the combined policy's actor outputs,
/// values and gradients (of a weighted sum of both) equal PyTorch's reference, its weights
/// copied, each leaf given to the reference in the env's own form (an image in its shape, a
/// Discrete's indices) while hotlab's network reads them as its rollout keeps them (the floats
/// side by side, the bytes side by side, each index leaf): the goal env's leaves (a Discrete,
/// floats, a small image), the nested Tuple's (a Discrete, a grid of flags, a MultiDiscrete,
/// floats), a lone Discrete of 16 (FrozenLake's), and two images (channels first, and one
/// large enough for the Nature CNN) beside floats.
#[test]
fn the_combined_policy_equals_a_pytorch_reference_of_sb3s_layout() {
    let _seeded = hotlab_train::testing::torch_seed(78);
    let cases: Vec<(Vec<FieldSpec>, Vec<usize>, usize, usize)> = vec![
        (
            vec![
                leaf("goal", &[1], FieldKind::I64, &[4]),
                leaf("noise", &[3], FieldKind::F32, &[]),
                leaf("view", &[6, 6, 1], FieldKind::U8, &[]),
            ],
            vec![64, 64],
            4,
            5,
        ),
        (
            vec![
                leaf("0", &[1], FieldKind::I64, &[3]),
                leaf("1.grid", &[3, 4], FieldKind::Bool, &[]),
                leaf("1.keys", &[2], FieldKind::I64, &[2, 5]),
                leaf("1.pos", &[4], FieldKind::F32, &[]),
            ],
            vec![8],
            2,
            3,
        ),
        (vec![leaf("obs", &[1], FieldKind::I64, &[16])], vec![64, 64], 4, 4),
        (
            vec![
                leaf("a", &[2, 5, 7], FieldKind::U8, &[]),
                leaf("b", &[36, 36, 3], FieldKind::U8, &[]),
                leaf("c", &[2], FieldKind::F32, &[]),
            ],
            vec![16, 16],
            5,
            2,
        ),
    ];
    let root = tempfile::tempdir().unwrap();
    let (mut written, mut ours) = (Vec::new(), Vec::new());
    let mut i = 0;
    for (layout, seed) in [(Layout::Nchw, 1u64), (Layout::Nhwc, 2)] {
        for (leaves, hidden, logits, rows) in &cases {
            i += 1;
            let dir = root.path().join(i.to_string());
            std::fs::create_dir(&dir).unwrap();
            tch::manual_seed(seed as i64 * 100 + i as i64);
            let shape = CombinedShape { leaves: leaves.clone(), hidden: hidden.clone(), logits: *logits, gaussian: 0 };
            let mut net = CombinedNet::new(shape, Device::Cpu, Compute { kind: Kind::Float, layout }).unwrap();
            // Away from the drawn start (zero biases would hide a swapped one).
            tch::no_grad(|| {
                let noise = net.params.flat.randn_like() * 0.1;
                let _ = net.params.flat.f_add_(&noise);
            });
            let mut rng = HostRng::new(seed * 1000 + i as u64);
            let (mut features, mut index, mut bytes) = (Vec::new(), Vec::new(), Vec::new());
            let mut per_leaf: Vec<Vec<Vec<u8>>> = Vec::new();
            let mut json_leaves = Vec::new();
            for (k, f) in leaves.iter().enumerate() {
                let n = f.numel();
                let rows_of: Vec<Vec<u8>>;
                let mut leaf_json = json!({"name": f.name, "shape": f.shape, "classes": f.classes});
                match f.kind {
                    FieldKind::F32 => {
                        let v: Vec<f32> = (0..rows * n).map(|_| rng.next_f64() as f32 * 4.0 - 2.0).collect();
                        rows_of = v.chunks(n).map(|r| r.iter().flat_map(|x| x.to_le_bytes()).collect()).collect();
                        features.push((v, n));
                        leaf_json["kind"] = json!("f32");
                    }
                    FieldKind::I64 => {
                        let v: Vec<i64> =
                            (0..rows * n).map(|j| (rng.next_u64() % f.classes[j % n] as u64) as i64).collect();
                        rows_of = v.chunks(n).map(|r| r.iter().flat_map(|x| x.to_le_bytes()).collect()).collect();
                        index.push(Tensor::from_slice(&v).view([*rows as i64, n as i64]));
                        leaf_json["kind"] = json!("i64");
                    }
                    FieldKind::U8 | FieldKind::Bool => {
                        let top = if f.kind == FieldKind::Bool { 2 } else { 256 };
                        let v: Vec<u8> = (0..rows * n).map(|_| (rng.next_u64() % top) as u8).collect();
                        rows_of = v.chunks(n).map(<[u8]>::to_vec).collect();
                        bytes.push((v, n));
                        // The reference builds the image's network from its shape alone.
                        leaf_json["kind"] = json!(if f.kind == FieldKind::Bool { "bool" } else { "u8" });
                    }
                }
                std::fs::write(dir.join(format!("leaf{k}.bin")), rows_of.concat()).unwrap();
                per_leaf.push(rows_of);
                json_leaves.push(leaf_json);
            }
            // As the rollout keeps them: each row's floats side by side, its bytes side by side.
            let side_by_side = |parts: &[(Vec<u8>, usize)]| -> Vec<u8> {
                (0..*rows).flat_map(|r| parts.iter().flat_map(move |(v, n)| v[r * n..(r + 1) * n].to_vec())).collect()
            };
            let floats: Vec<f32> = (0..*rows)
                .flat_map(|r| {
                    features.iter().flat_map(move |(v, n): &(Vec<f32>, usize)| v[r * n..(r + 1) * n].to_vec())
                })
                .collect();
            let x_features = Tensor::from_slice(&floats).view([*rows as i64, -1]);
            let x_bytes =
                (!bytes.is_empty()).then(|| Tensor::from_slice(&side_by_side(&bytes)).view([*rows as i64, -1]));
            let x = Inputs { features: &x_features, index: &index, bytes: x_bytes.as_ref() };
            let f = net.features(&x);
            let (outputs, value) = (net.outputs(&f), net.value(&f));
            let r_out: Vec<f32> = (0..rows * logits).map(|_| rng.next_f64() as f32 * 2.0 - 1.0).collect();
            let r_val: Vec<f32> = (0..*rows).map(|_| rng.next_f64() as f32 * 2.0 - 1.0).collect();
            let loss = (&outputs * Tensor::from_slice(&r_out).view([*rows as i64, *logits as i64])).sum(Kind::Float)
                + (&value * Tensor::from_slice(&r_val)).sum(Kind::Float);
            loss.backward();
            write_f32s(&dir.join("params.f32"), &host(&net.params.flat));
            write_f32s(&dir.join("r_out.f32"), &r_out);
            write_f32s(&dir.join("r_val.f32"), &r_val);
            written.push(json!({
                "dir": dir, "rows": rows, "leaves": json_leaves, "hidden": hidden, "outputs": logits,
                "layout": net.params.layout.iter().map(|s| json!({"name": s.name, "shape": s.shape})).collect::<Vec<_>>(),
            }));
            let name = format!("case {i}: {:?} {layout:?}", leaves.iter().map(|f| &f.name).collect::<Vec<_>>());
            ours.push((dir, host(&outputs), host(&value), host(&net.params.grad), name));
        }
    }
    let list = root.path().join("cases.json");
    std::fs::write(&list, serde_json::to_string(&written).unwrap()).unwrap();
    let out = run(std::process::Command::new(python()).arg(repo().join("tests/combined_torch.py")).arg(&list));
    assert!(out.status.success(), "{}", stderr(&out));
    for (dir, outputs, value, grads, case) in ours {
        assert!(grads.iter().any(|g| *g != 0.0), "{case}: a gradient reached the weights");
        let gaps = [
            ("outputs", relative_gap(&outputs, &f32s(&dir.join("outputs.f32")))),
            ("values", relative_gap(&value, &f32s(&dir.join("value.f32")))),
            ("gradients", relative_gap(&grads, &f32s(&dir.join("grads.f32")))),
        ];
        for (what, gap) in gaps {
            assert!(gap <= 1e-5, "{case}: the {what} differ from PyTorch's by {gap:e} (relative)");
        }
    }
}

/// A field's values as float32s (indices, bytes and floats alike: every value the test envs
/// give is one exactly).
fn numbers(field: &FieldData) -> Vec<f32> {
    match field {
        FieldData::F32(v) => v.clone(),
        FieldData::I64(v) => v.iter().map(|&x| x as f32).collect(),
        FieldData::U8(v) | FieldData::Bool(v) => v.iter().map(|&b| b as f32).collect(),
    }
}

/// The reference's rows of one leaf, as one list (env after env), each float32 it wrote
/// (JSON's decimal read back to the nearest float32).
fn rows(v: &Value) -> Vec<f32> {
    v.as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r.as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32))
        .collect()
}

/// Over envs, seeds, worker processes and waits, through episode ends: each leaf of a
/// nested Tuple (a Discrete starting at −1, a grid of flags, a MultiDiscrete, float64s) and
/// of a Dict (a Discrete starting at 2, floats, an image) crosses the region as its own field,
/// its values those of Gymnasium's `SyncVectorEnv` (indices less their start, flags 0 and 1,
/// floats to float32), final observations included; the fields are named by their keys,
/// images stay bytes in their shape, and index leaves carry their choices.
#[test]
fn each_leaf_crosses_in_its_own_form_as_gymnasium_gives_it() {
    fixtures();
    let nested = GymEnv::open("dict_envs:Nested", Some(python()), json!({})).unwrap();
    let fields: Vec<(&str, &[usize], FieldKind, &[usize])> = nested
        .spec()
        .fields
        .iter()
        .map(|f| (f.name.as_str(), f.shape.as_slice(), f.kind, f.classes.as_slice()))
        .collect();
    assert_eq!(
        fields,
        [
            ("0", &[1][..], FieldKind::I64, &[3][..]),
            ("1.grid", &[3, 4], FieldKind::Bool, &[]),
            ("1.keys", &[2], FieldKind::I64, &[2, 5]),
            ("1.pos", &[4], FieldKind::F32, &[]),
        ]
    );
    for (target, kwargs, actions_n) in
        [("dict_envs:Nested", json!({}), 2u64), ("dict_envs:GoalDict", json!({"start": 2, "length": 5}), 4)]
    {
        let env = GymEnv::open(target, Some(python()), kwargs.clone()).unwrap();
        for (envs, workers, seed) in [(1, 1, 0u64), (3, 1, 5), (4, 2, 9)] {
            let steps = 13;
            let mut rng = HostRng::new(seed);
            let actions: Vec<Vec<i64>> =
                (0..steps).map(|_| (0..envs).map(|_| (rng.next_u64() % actions_n) as i64).collect()).collect();
            let dir = tempfile::tempdir().unwrap();
            let (case, lines) = (dir.path().join("case.json"), dir.path().join("steps.jsonl"));
            let spec = json!({"target": target, "kwargs": kwargs, "envs": envs, "seed": seed, "actions": actions});
            std::fs::write(&case, spec.to_string()).unwrap();
            let out = run(std::process::Command::new(python())
                .arg(repo().join("tests/structured_vector.py"))
                .arg(&case)
                .arg(&lines));
            assert!(out.status.success(), "{}", stderr(&out));
            let want: Vec<Value> =
                std::fs::read_to_string(&lines).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
            let mut batch: Box<dyn BatchEnv> = match workers {
                1 => env.vector_env(envs, seed, 0),
                w => Box::new(env.worker_processes(envs, seed, w, WaitMode::Spin).unwrap().unwrap()),
            };
            let spec = batch.spec().clone();
            let mut obs = Observations::zeros(&spec, envs);
            batch.reset(&mut obs).unwrap();
            let what = format!("{target}, {envs} envs, {workers} workers, seed {seed}");
            for (f, field) in spec.fields.iter().enumerate() {
                assert_eq!(
                    numbers(&obs.fields[f]),
                    rows(&want[0]["obs"][&field.name]),
                    "{what}: reset, '{}'",
                    field.name
                );
            }
            let mut out = StepBatch::new(&spec, envs);
            let mut ends = 0;
            for (t, a) in actions.iter().enumerate() {
                batch.step(a, &mut out).unwrap();
                let w = &want[t + 1];
                let at = format!("{what}, step {t}");
                assert_eq!(out.reward, rows(&json!([w["reward"]])), "{at}");
                for (f, field) in spec.fields.iter().enumerate() {
                    assert_eq!(numbers(&out.obs.fields[f]), rows(&w["obs"][&field.name]), "{at}: '{}'", field.name);
                    let width = field.numel();
                    for (e, final_obs) in w["final_obs"].as_object().unwrap() {
                        let e: usize = e.parse().unwrap();
                        let got = &numbers(&out.final_obs.fields[f])[e * width..(e + 1) * width];
                        assert_eq!(
                            got,
                            rows(&json!([final_obs[&field.name]])),
                            "{at}: env {e}'s final '{}'",
                            field.name
                        );
                    }
                }
                ends += w["final_obs"].as_object().unwrap().len();
            }
            assert!(ends > 0, "{what}: episodes ended inside the run");
        }
    }
}

/// The goal env's goal is shown only in its `Discrete` leaf, beside noise floats and a noise
/// image: the combined policy learns it (32,768 steps, a few seconds here) and beats, by a
/// paired bootstrap 95 % interval on the same 200 held-out episodes, both the best policy
/// that ignores the leaf (a quarter of the 8 steps: 2 an episode) and the same run with the
/// goal hidden (the leaf constant, the reward unchanged), whose mean stays within sampling
/// noise of 2 (its greedy action meets the goal a quarter of the time: below 2.5, over five
/// standard errors). The checkpoints play through `hotlab eval`.
#[test]
fn a_goal_given_only_in_a_discrete_leaf_is_learned() {
    use hotlab_workloads::morpho::eval::paired;
    fixtures();
    let dir = tempfile::tempdir().unwrap();
    let episodes = 200;
    let returns = |shown: bool| -> Vec<f64> {
        let ckpt = dir.path().join(shown.to_string());
        let kwargs = json!({"shown": shown}).to_string();
        let out = run(hotlab()
            .args(["train", "--env", "gym:dict_envs:GoalDict", "--gym-kwargs", &kwargs])
            .args(["--envs", "8", "--steps", "64", "--total-steps", "32768", "--lr", "0.001", "--seed", "3", "--json"])
            .arg("--out")
            .arg(&ckpt));
        assert!(out.status.success(), "shown {shown}: {}", stderr(&out));
        let report = last_json(&out);
        let notes = report["notes"].to_string();
        assert!(notes.contains("'goal' one-hot [4]") && notes.contains("'view' [6, 6, 1] bytes"), "{notes}");
        let out = run(hotlab()
            .env("PYTHONPATH", repo().join("tests/fixtures/structured"))
            .args(["eval", "--json", "--episodes", &episodes.to_string(), "--seed", "12345", "--checkpoint"])
            .arg(&ckpt));
        assert!(out.status.success(), "shown {shown}: {}", stderr(&out));
        last_json(&out)["returns"].as_array().unwrap().iter().map(|r| r.as_f64().unwrap()).collect()
    };
    let mut rng = HostRng::new(78);
    let blind_best = vec![2.0; episodes];
    let hidden = returns(false);
    let mean = hidden.iter().sum::<f64>() / episodes as f64;
    assert!(mean < 2.5, "with the goal hidden the policy cannot beat a quarter of the steps: {mean} ({hidden:?})");
    let learned = returns(true);
    let p = paired("a quarter of the steps", &learned, &blind_best, &mut rng);
    assert!(p.low > 0.0, "the goal read from its Discrete leaf: {p:?} ({learned:?})");
    let p = paired("the goal hidden", &learned, &hidden, &mut rng);
    assert!(p.low > 0.0, "against the same run with the goal hidden: {p:?}");
}

/// An image leaf moves to the device as bytes, one per pixel, and once: the same run with and
/// without the goal env's 6×6 image differs in host→device bytes by exactly 36 per
/// observation moved (each step's forward, each rollout's bootstrap and each truncated
/// episode's final value; the update reads what the forward kept), where floats would be
/// four times that. Copied again for the update (`--rollout-copy whole`), every leaf moves
/// once more and the weights are the same, byte for byte.
#[test]
fn image_leaves_move_as_bytes() {
    fixtures();
    let root = tempfile::tempdir().unwrap();
    let trained = |image: bool, copy: &str| -> Value {
        let kwargs = json!({"image": image}).to_string();
        let dir = root.path().join(format!("{image}-{copy}"));
        let out = run(hotlab().args(["train", "--env", "gym:dict_envs:GoalDict", "--gym-kwargs", &kwargs]).args([
            "--envs",
            "4",
            "--steps",
            "16",
            "--total-steps",
            "128",
            "--rollout-copy",
            copy,
            "--out",
            dir.to_str().unwrap(),
            "--json",
        ]));
        assert!(out.status.success(), "image {image}: {}", stderr(&out));
        last_json(&out)
    };
    let moved = |image: bool| trained(image, "kept");
    let (with, without) = (moved(true), moved(false));
    let count = |r: &Value, k: &str| r["counters"][k].as_u64().unwrap();
    let (steps, updates, episodes) =
        (count(&with, "env_steps"), with["updates"].as_u64().unwrap(), with["episodes"].as_u64().unwrap());
    assert_eq!((steps, updates, episodes), (128, 2, 16), "{with}");
    let observations = steps + updates * 4 + episodes;
    assert_eq!(count(&with, "h2d_bytes") - count(&without, "h2d_bytes"), 36 * observations);
    let whole = trained(true, "whole");
    assert!(count(&whole, "h2d_bytes") >= count(&with, "h2d_bytes") + 36 * steps, "{whole}");
    let weights =
        |copy: &str| std::fs::read(root.path().join(format!("true-{copy}")).join("policy.safetensors")).unwrap();
    assert!(weights("kept") == weights("whole"), "kept and whole train the same weights");
}

/// Leaves no encoder reads, a Dict of none or of more than the trainer takes, and settings
/// the combined policy has no form for are refused before anything is learned, naming the
/// flag, the leaf and what is allowed.
#[test]
fn bad_leaves_and_settings_are_refused_naming_the_field() {
    fixtures();
    let cases: [(&[&str], &[&str]); 5] = [
        (&["--env", "gym:dict_envs:WithText"], &["--gym-id", "'mission'", "Text", "allowed leaves: Box, Discrete"]),
        (&["--env", "gym:dict_envs:Empty"], &["--gym-id", "no leaves"]),
        (&["--env", "gym:dict_envs:TooMany"], &["--gym-id", "17 leaves", "at most 16"]),
        (
            &["--env", "gym:dict_envs:GoalDict", "--rnn", "lstm", "--minibatches", "2"],
            &["--rnn: lstm", "(goal, noise, view)", "allowed: none"],
        ),
        (&["--env", "gym:dict_envs:GoalDict", "--frames", "float"], &["--frames: float", "allowed: bytes"]),
    ];
    for (args, wanted) in cases {
        let out = run(hotlab().args(["train", "--total-steps", "256", "--envs", "2", "--steps", "8"]).args(args));
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: a refusal of the spec: {err}");
        for w in wanted {
            assert!(err.contains(w), "{args:?}: '{w}' not in: {err}");
        }
    }
}

/// `--obs-norm on` normalizes a Dict's float leaves (the goal env's three noise floats,
/// uniform on ±1: means near 0, variances near 1/3) and leaves its index and image alone;
/// the checkpoint keeps the statistics beside the leaves and `hotlab eval` plays it.
#[test]
fn obs_norm_keeps_the_float_leaves_statistics_in_the_checkpoint() {
    fixtures();
    let dir = tempfile::tempdir().unwrap();
    let out = run(hotlab()
        .args(["train", "--env", "gym:dict_envs:GoalDict", "--obs-norm", "on", "--total-steps", "1024"])
        .args(["--envs", "4", "--steps", "16", "--json", "--out"])
        .arg(dir.path()));
    assert!(out.status.success(), "{}", stderr(&out));
    let spec: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("spec.json")).unwrap()).unwrap();
    let rms = &spec["combined"]["obs_norm"]["rms"];
    let (mean, var) = (rms["mean"].as_array().unwrap(), rms["var"].as_array().unwrap());
    assert_eq!((mean.len(), var.len()), (3, 3), "one statistic per float component: {rms}");
    for (m, v) in mean.iter().zip(var) {
        let (m, v) = (m.as_f64().unwrap(), v.as_f64().unwrap());
        assert!(m.abs() < 0.1 && (v - 1.0 / 3.0).abs() < 0.05, "uniform on ±1: mean {m}, var {v}");
    }
    let out = run(hotlab().args(["eval", "--episodes", "4", "--json", "--checkpoint"]).arg(dir.path()));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(last_json(&out)["episodes"], 4);
}

/// A Dict's combined policy has no fused forward: asked for an eager one, its report does
/// not advise `--inference fused` (which would run the same ops), and its forward's row says
/// it ran eager because the policy has no other form.
#[test]
fn the_combined_policy_is_not_advised_a_fused_forward_it_has_no_form_for() {
    fixtures();
    for inference in ["eager", "fused"] {
        let out = run(hotlab()
            .args(["profile", "--env", "gym:dict_envs:GoalDict", "--inference", inference, "--total-steps", "2048"])
            .args(["--device", "cpu", "--json"]));
        assert!(out.status.success(), "{}", stderr(&out));
        let report = last_json(&out);
        let knobs: Vec<&str> =
            report["recommendations"].as_array().unwrap().iter().filter_map(|r| r["knob"].as_str()).collect();
        assert!(!knobs.contains(&"--inference fused"), "{inference}: {knobs:?}");
        let row = report["rows"].as_array().unwrap().iter().find(|r| r["phase"] == "policy_forward").expect("its row");
        let diagnosis = row["diagnosis"].as_str().unwrap();
        assert!(
            diagnosis.starts_with("eager inference (a policy whose forward has no fused form"),
            "{inference}: {diagnosis}"
        );
    }
}
