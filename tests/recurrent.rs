//! The recurrent policy (`--rnn lstm|gru`): its core equals PyTorch's `nn.LSTM`/`nn.GRU`
//! through episode resets (`tests/rnn_torch.py`), it remembers what a memoryless policy
//! cannot (the `memory` preset's `hotlab/CueRecall-v0`), it reads images through the CNN, and bad
//! settings are refused naming the flag.

mod common;

use common::*;
use hotlab_core::choices::Rnn;
use hotlab_env::rng::HostRng;
use hotlab_train::models::layers::Builder;
use hotlab_train::models::rnn::core::Core;
use serde_json::{json, Value};
use tch::{Device, Kind, Tensor};

fn f32s(path: &std::path::Path) -> Vec<f32> {
    std::fs::read(path).unwrap().chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect()
}

fn write(path: &std::path::Path, t: &Tensor) {
    let v = Vec::<f32>::try_from(t.contiguous().view([-1])).unwrap();
    std::fs::write(path, v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
}

fn host(t: &Tensor) -> Vec<f32> {
    Vec::<f32>::try_from(t.detach().contiguous().view([-1])).unwrap()
}

/// The largest difference of `a` from `b`.
fn gap(a: &[f32], b: &[f32]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs() as f64).fold(0.0, f64::max)
}

/// The core's cell stepped `T` times (as the rollout steps it) and both of the update's
/// forms (`--rnn-update sequence`: a call per stretch between episode starts; `stepped`: a
/// cell call per step) equal one layer of PyTorch's `nn.LSTM` and `nn.GRU`, its weights
/// copied, stepped env by env with the state zeroed where an episode starts: the outputs to
/// 1e-6, over seeds and shapes with resets in the middle of segments, at the first step and
/// none at all; the update's gradients to 1e-5 (relative); the calls each form makes.
#[test]
fn the_core_equals_pytorchs_lstm_and_gru_through_resets() {
    let _seeded = hotlab_train::testing::torch_seed(78);
    let root = tempfile::tempdir().unwrap();
    let (mut cases, mut ours) = (Vec::new(), Vec::new());
    // (steps, envs, inputs, width, chance of a start)
    let shapes = [(1, 1, 3, 4, 0.0), (6, 3, 5, 8, 0.25), (17, 5, 4, 16, 0.1), (9, 2, 7, 3, 0.6), (12, 4, 6, 5, 0.0)];
    for (i, (cell, (steps, envs, inputs, width, p))) in
        [Rnn::Lstm, Rnn::Gru].into_iter().flat_map(|c| shapes.iter().map(move |s| (c, *s))).enumerate()
    {
        let dir = root.path().join(i.to_string());
        std::fs::create_dir(&dir).unwrap();
        tch::manual_seed(i as i64);
        let mut b = Builder::new(Kind::Float);
        let core = Core::new(&mut b, "core", cell, inputs, width);
        let mut params = b.finish(Device::Cpu);
        // Biases and weights away from their drawn start (zero biases hide a swapped one).
        tch::no_grad(|| {
            let noise = params.flat.randn_like() * 0.3;
            let _ = params.flat.f_add_(&noise);
        });
        let mut rng = HostRng::new(i as u64);
        let starts: Vec<bool> = (0..steps * envs).map(|_| rng.next_f64() < p).collect();
        let x = Tensor::randn([steps, envs, inputs], (Kind::Float, Device::Cpu));
        let state: Vec<Tensor> = core.zeros(envs as usize, Device::Cpu).iter().map(|z| z.randn_like()).collect();
        let r = Tensor::randn([steps, envs, width], (Kind::Float, Device::Cpu));

        // As the rollout steps it.
        let mut now: Vec<Tensor> = state.iter().map(Tensor::shallow_clone).collect();
        let mut stepped = Vec::new();
        for t in 0..steps as usize {
            let row = &starts[t * envs as usize..(t + 1) * envs as usize];
            let keep: Vec<f32> = row.iter().map(|&s| if s { 0.0 } else { 1.0 }).collect();
            let keep = Tensor::from_slice(&keep).view([envs, 1]);
            let (h, next) = tch::no_grad(|| core.step(&params, &x.get(t as i64), &now, Some(&keep)));
            stepped.push(h);
            now = next;
        }
        let stepped = host(&Tensor::stack(&stepped, 0));
        // As the update runs it, both ways, with their gradients.
        let cut = (1..steps as usize).filter(|&t| starts[t * envs as usize..(t + 1) * envs as usize].contains(&true));
        let mut update = Vec::new();
        for stepped in [false, true] {
            let (out, calls) = match stepped {
                false => core.sequence(&params, &x, &state, &starts),
                true => core.stepped(&params, &x, &state, &starts),
            };
            let want_calls = if stepped { steps as usize } else { 1 + cut.clone().count() };
            assert_eq!(calls, want_calls, "{cell} case {i}: one call per stretch, or per step");
            (&out * &r).sum(Kind::Float).backward();
            update.push((if stepped { "stepped" } else { "sequence" }, host(&out), host(&params.grad)));
            params.zero_grad();
        }

        write(&dir.join("params.f32"), &params.flat);
        write(&dir.join("x.f32"), &x);
        write(&dir.join("h0.f32"), &state[0]);
        if cell == Rnn::Lstm {
            write(&dir.join("c0.f32"), &state[1]);
        }
        write(&dir.join("r.f32"), &r);
        std::fs::write(dir.join("starts.u8"), starts.iter().map(|&s| s as u8).collect::<Vec<u8>>()).unwrap();
        cases.push(
            json!({"dir": dir, "cell": cell.as_str(), "steps": steps, "envs": envs, "inputs": inputs, "width": width}),
        );
        let case = format!(
            "{cell} {steps} steps × {envs} envs, {inputs} → {width}, {} starts",
            starts.iter().filter(|s| **s).count()
        );
        ours.push((dir, stepped, update, case));
    }
    let list = root.path().join("cases.json");
    std::fs::write(&list, serde_json::to_string(&cases).unwrap()).unwrap();
    let out = run(std::process::Command::new(python()).arg(repo().join("tests/rnn_torch.py")).arg(&list));
    assert!(out.status.success(), "{}", stderr(&out));
    for (dir, acting, update, case) in ours {
        let (want, want_grads) = (f32s(&dir.join("out.f32")), f32s(&dir.join("grads.f32")));
        let g = gap(&acting, &want);
        assert!(g <= 1e-6, "{case}: the rollout's cell differs from PyTorch's by {g:e}");
        let scale = want_grads.iter().map(|g| g.abs() as f64).fold(1.0, f64::max);
        for (how, out, grads) in update {
            let g = gap(&out, &want);
            assert!(g <= 1e-6, "{case}: the update's {how} form differs from PyTorch's by {g:e}");
            let g = gap(&grads, &want_grads) / scale;
            assert!(g <= 1e-5, "{case}: the update's {how} gradients differ from PyTorch's by {g:e} (relative)");
        }
    }
}

/// A cue shown once, four blank steps, then a choice that pays +1 only if it matches the
/// cue (-1 if not; hotlab's own `hotlab/CueRecall-v0`): the `memory` preset (an LSTM of
/// 32, 40,960 steps, about 3 s here) and the same with a GRU learn it and beat chance (0) and the same run without memory (`--rnn none`), each by a
/// paired bootstrap 95 % interval on the same 200 held-out episodes; the run without
/// memory does not beat chance: at the choice it sees the same observation whatever the
/// cue, so it chooses one side always. The checkpoints play through `hotlab eval`, their
/// state carried through each episode.
#[test]
fn a_recurrent_policy_remembers_a_cue_that_a_memoryless_one_cannot() {
    use hotlab_workloads::morpho::eval::paired;
    let dir = tempfile::tempdir().unwrap();
    let episodes = 200;
    let returns = |rnn: &str| -> Vec<f64> {
        let ckpt = dir.path().join(rnn);
        let out = run(hotlab()
            .args(["train", "--preset", "memory", "--rnn", rnn, "--seed", "2", "--json"])
            .arg("--out")
            .arg(&ckpt));
        assert!(out.status.success(), "--rnn {rnn}: {}", stderr(&out));
        let report = last_json(&out);
        assert_eq!(report["config"]["ppo"]["rnn"], rnn, "{report}");
        let out = run(hotlab()
            .args(["eval", "--json", "--episodes", &episodes.to_string(), "--seed", "12345", "--checkpoint"])
            .arg(&ckpt));
        assert!(out.status.success(), "--rnn {rnn}: {}", stderr(&out));
        last_json(&out)["returns"].as_array().unwrap().iter().map(|r| r.as_f64().unwrap()).collect()
    };
    let mut rng = HostRng::new(78);
    let chance = vec![0.0; episodes];
    let none = returns("none");
    let blind = paired("chance", &none, &chance, &mut rng);
    assert!(blind.low <= 0.0, "without memory the policy cannot beat chance: {blind:?}");
    for rnn in ["lstm", "gru"] {
        let remembered = returns(rnn);
        let p = paired("chance", &remembered, &chance, &mut rng);
        assert!(p.low > 0.0, "--rnn {rnn} against chance: {p:?} ({remembered:?})");
        let p = paired("--rnn none", &remembered, &none, &mut rng);
        assert!(p.low > 0.0, "--rnn {rnn} against the same run without memory: {p:?}");
    }
}

/// An image reaches the recurrent core through the CNN: the `atari-lstm` preset (CleanRL's
/// `ppo_atari_lstm.py`: Atari's preprocessing with one frame a step, the Nature CNN, an LSTM
/// of 128), cut short, trains, says what it built, and its checkpoint plays; a GRU on the
/// usual stack of four frames too.
#[test]
fn an_image_reaches_the_core_through_the_cnn() {
    for (args, note, shape) in [
        (&["--preset", "atari-lstm"][..], "CNN, then LSTM of width 128", [1, 84, 84]),
        (
            &["--env", "gym:ALE/Breakout-v5", "--rnn", "gru", "--rnn-width", "16"][..],
            "CNN, then GRU of width 16",
            [4, 84, 84],
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let out = run(hotlab()
            .arg("train")
            .args(args)
            .args(["--envs", "2", "--workers", "1", "--steps", "8", "--total-steps", "32", "--minibatches", "2"])
            .args(["--json", "--out"])
            .arg(dir.path()));
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        let report = last_json(&out);
        let notes: Vec<&str> = report["notes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
        assert!(notes.iter().any(|n| n.contains(note)), "{args:?}: {notes:?}");
        let spec: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join("spec.json")).unwrap()).unwrap();
        assert_eq!(spec["recurrent"]["input"]["image"]["shape"], json!(shape), "{args:?}: {spec}");
        let out = run(hotlab().args(["eval", "--json", "--episodes", "2", "--checkpoint"]).arg(dir.path()));
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        assert_eq!(last_json(&out)["episodes"], 2);
    }
}

/// Bad settings are refused before anything runs (exit 2), naming the flag and what is
/// allowed: a width that is not positive, an unknown core, minibatches that do not divide
/// the envs, a workload whose policy is its own, and the device rollout.
#[test]
fn bad_recurrent_settings_are_refused_naming_the_flag() {
    let cases: [(&[&str], &[&str]); 6] = [
        (&["--rnn", "lstm", "--rnn-width", "0"], &["--rnn-width", "between 1 and 4096"]),
        (&["--rnn", "lstm", "--rnn-width", "-3"], &["--rnn-width"]),
        (&["--rnn", "transformer"], &["--rnn", "none, lstm, gru"]),
        (&["--rnn", "gru", "--envs", "6", "--minibatches", "4"], &["--minibatches", "divide envs = 6", "3 or 6"]),
        (&["--rnn", "lstm", "--env", "proof"], &["--rnn", "allowed with --env proof: none"]),
        (&["--rnn", "lstm", "--backend", "device"], &["--backend", "the host backends"]),
    ];
    for (args, wanted) in cases {
        let out = run(hotlab().args(["train", "--total-steps", "4096"]).args(args));
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        for w in wanted {
            assert!(err.contains(w), "{args:?}: '{w}' not in: {err}");
        }
    }
}

/// The report of a recurrent run (catalogue row 12): stepped, the update calls its core once
/// per step of every minibatch (`update_core`: epochs × minibatches × steps a update) and the
/// report advises `--rnn-update sequence`, naming the row and the lesson; in sequence it makes
/// a call per stretch between episode starts and advises nothing of the kind; and an eager
/// recurrent forward is not advised a fused one (it has none).
#[test]
fn the_report_counts_the_cores_calls_and_advises_the_sequence_form() {
    let profile = |update: &str| {
        let out = run(hotlab()
            .args(["profile", "--rnn", "lstm", "--rnn-width", "32", "--inference", "eager", "--rnn-update", update])
            .args(["--total-steps", "1024", "--json"]));
        assert!(out.status.success(), "{}", stderr(&out));
        last_json(&out)
    };
    let core_calls = |report: &Value| {
        let rows = report["rows"].as_array().unwrap();
        rows.iter().find(|r| r["phase"] == "update_core").map(|r| r["calls"].as_u64().unwrap()).unwrap()
    };
    let knobs = |report: &Value| -> Vec<String> {
        let recs = report["recommendations"].as_array().unwrap();
        recs.iter().map(|r| r["knob"].as_str().unwrap().to_string()).collect()
    };
    let stepped = profile("stepped");
    // CartPole's defaults: 4 envs × 128 steps, 4 epochs of 4 minibatches (one env each), 2 updates.
    assert_eq!(core_calls(&stepped), 2 * 4 * 4 * 128, "{stepped}");
    let advice = stepped["recommendations"].as_array().unwrap();
    let rnn = advice.iter().find(|r| r["knob"] == "--rnn-update sequence").unwrap_or_else(|| panic!("{stepped}"));
    assert_eq!((rnn["row"].as_u64(), rnn["lesson"].as_str()), (Some(12), Some("rnn-sequence")), "{rnn}");
    assert!(!knobs(&stepped).contains(&"--inference fused".to_string()), "{stepped}");
    let sequence = profile("sequence");
    let calls = core_calls(&sequence);
    assert!((2 * 4 * 4..2 * 4 * 4 * 128).contains(&calls), "one call per stretch: {calls}");
    assert!(!knobs(&sequence).iter().any(|k| k.starts_with("--rnn-update")), "{sequence}");
}
