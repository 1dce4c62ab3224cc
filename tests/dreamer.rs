//! The world-model workload from the command line: its world model learns, seed 004's
//! knobs change where time goes and not what is learned, bad settings are refused, and a
//! checkpoint is evaluated against random actions.

mod common;
use common::*;
use std::path::Path;

/// A short run: 2 envs × 32 steps per iteration, 4 iterations, 16 train steps of 8
/// sequences × 8 steps after each (64 in all: one `[PROFILE]` window).
const SMALL: &str = "--env dreamer --envs 2 --steps 32 --total-steps 256 --prefill 64 --batch-size 8 \
    --seq-len 8 --train-ratio 16 --device cpu --threads 1 --seed 1";

fn train(dir: &Path, extra: &[&str]) -> (serde_json::Value, String) {
    let out = run(hotlab().args(["train", "--json", "--out"]).arg(dir).args(SMALL.split_whitespace()).args(extra));
    assert!(out.status.success(), "train {extra:?} failed: {}", stderr(&out));
    (last_json(&out), stderr(&out))
}

/// The world model's losses per iteration: image, reward, continue, KL.
fn world_losses(dir: &Path) -> Vec<[f64; 4]> {
    terms(dir, "world", ["image", "reward", "cont", "kl"])
}

/// A group of loss figures per iteration that has them (`world`, `floor`), by name.
fn terms<const N: usize>(dir: &Path, group: &str, names: [&str; N]) -> Vec<[f64; N]> {
    let text = std::fs::read_to_string(dir.join("metrics.jsonl")).unwrap();
    text.lines()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let w = v.get(group)?;
            Some(names.map(|k| w[k].as_f64().unwrap()))
        })
        .collect()
}

fn weights(dir: &Path) -> Vec<u8> {
    std::fs::read(dir.join("policy.safetensors")).unwrap()
}

/// The actor learns CartPole in the world model's imagination: after 16,384 env steps at the
/// workload's defaults (4 envs × 64 steps, batch 16 × 16, train ratio 64, a 1,024-step
/// prefill; 3,840 train steps; seed 1, one thread), its greedy return on the report's 8
/// held-out episodes is at least three times random actions' on the same envs. Any policy
/// that has not learned to balance scores near random (about 22) or below (one action
/// always: about 9); measured on an Intel Xeon: 215.0 against 29.1. This is the smallest
/// budget tried that learns at the default learning rates (at 5,632 steps of the `dreamer`
/// preset as it was then, 256-step prefill and train ratio 32, the actor had fallen onto one
/// action, return 12), and it takes about 20 minutes of one core (1,865 s beside other work;
/// 13 minutes on a faster AMD EPYC): more than CI's budget, so it runs on request, `cargo
/// xtask test learning`. CI proves the same claims at the `dreamer` preset's faster learning
/// rates in a quarter of the steps
/// ([`the_dreamer_preset_learns_cartpole_its_prior_predicts_frames_and_its_model_beats_constants`]).
///
/// Its world model predicts from its prior by then: 5 frames seen, the next 15 imagined from
/// the actions taken are nearer the true frames than repeating the last frame seen, and than
/// the same imagination from the opposite actions (a model whose dynamics ignore the actions
/// predicts as well with them), each by at least a quarter. Measured (AMD EPYC, seed 1): the
/// report's check 12.5 per frame against 28.8 for the last frame; `hotlab eval` seeds 1–3:
/// 10.1–13.7 against 23.4–28.8 for the last frame and 27.2–30.7 for the opposite actions.
/// At 6,144 steps of the preset as it was (default learning rates) the prior did not yet:
/// 26.4–30.6 against 23.4–28.8 and 26.5–27.3.
#[test]
#[ignore = "20 minutes of one core: run with `cargo xtask test learning`"]
fn the_dreamer_actor_beats_random_actions_threefold_after_16k_steps() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(hotlab()
        .args(["train", "--env", "dreamer", "--envs", "4", "--steps", "64", "--total-steps", "16384"])
        .args(["--device", "cpu", "--threads", "1", "--seed", "1", "--json", "--out"])
        .arg(dir.path()));
    assert!(out.status.success(), "{}", stderr(&out));
    actor_and_prior_learned(&last_json(&out)["dreamer"]);
}

/// A run's evaluation (`report["dreamer"]`) shows an actor that learned CartPole and a prior
/// that predicts: the actor's greedy return on the 8 held-out episodes at least three times
/// random actions', and the prior's imagined frames nearer the true ones than repeating the
/// last frame seen and than the opposite actions' imagination, each by at least a quarter.
fn actor_and_prior_learned(eval: &serde_json::Value) {
    let (agent, random) = (eval["agent_return"].as_f64().unwrap(), eval["random_return"].as_f64().unwrap());
    eprintln!("the actor {agent} against random actions {random} over 8 held-out episodes: {}", eval["open_loop"]);
    assert_eq!(eval["episodes"], 8, "{eval}");
    assert!(agent >= 3.0 * random, "the actor's {agent} against random actions' {random}: {eval}");
    let open = &eval["open_loop"];
    let error = |key: &str| open[key].as_f64().unwrap_or(f64::NAN);
    let model = error("model");
    for baseline in ["repeat_last", "wrong_actions"] {
        assert!(
            model < 0.75 * error(baseline),
            "the prior's frames {model} against {baseline}'s {}: {open}",
            error(baseline)
        );
    }
}

/// The `dreamer` preset, whole, learns what it claims: the actor learns CartPole in its
/// world model's imagination, the model's prior predicts frames, and its reconstructions
/// beat every constant. The preset is 4,096 env steps at the workload's defaults (4 envs ×
/// 64 steps, batches of 16 × 16, train ratio 64, a 1,024-step prefill: 1,024 train steps;
/// here seed 1, one thread) but for faster learning rates, the world model's 2e-3 and the
/// actor's and critic's 6e-4 (the defaults, 3e-4 and 1e-4, need four times the steps:
/// [`the_dreamer_actor_beats_random_actions_threefold_after_16k_steps`]).
///
/// - The actor's greedy return on the report's 8 held-out episodes is at least three times
///   random actions' on the same envs: a policy that has not learned to balance scores near
///   random (about 22–29) or below (one action always: about 9). An actor that learns
///   nothing (`--ac-lr 1e-12`) fails.
/// - Its prior, 5 frames seen and the next 15 imagined from the actions taken, is nearer the
///   true frames than repeating the last frame seen and than the same imagination from the
///   opposite actions (a model whose dynamics ignore the actions predicts as well with
///   them), each by at least a quarter; the report gives that check per imagined step.
/// - Every iteration from the prefill's end trains the world model, and at the last one its
///   frame, reward and continue losses (each decoded from the posterior, which has seen that
///   frame) are each below the best constant predictor's on the same batches (the batch's
///   mean frame, its rewards' mean, its continuation's base rate). A model that falls from
///   its random start without learning the frames does not pass: at 64 train steps the frame
///   loss has fallen 5× and is still 8× the mean frame's.
///
/// Measured (Intel Xeon, 2 cores, two runs side by side, 233 s each): seed 1, the actor
/// 369.6 against random 29.1, the prior's frames 12.4 per frame against 28.8 for the last
/// frame and 26.2 for the opposite actions; seed 2, 372.4 against 25.3, 15.0 against 23.4
/// and 34.9. At the default learning rates and these 4,096 steps the actor scores 69 and
/// 158 (seeds 1, 2) and seed 2's prior does not beat the last frame.
#[test]
fn the_dreamer_preset_learns_cartpole_its_prior_predicts_frames_and_its_model_beats_constants() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(hotlab()
        .args(["train", "--preset", "dreamer", "--device", "cpu", "--threads", "1", "--seed", "1", "--json", "--out"])
        .arg(dir.path()));
    assert!(out.status.success(), "{}", stderr(&out));
    let eval = &last_json(&out)["dreamer"];
    actor_and_prior_learned(eval);
    let open = &eval["open_loop"];
    assert_eq!((open["context"].as_u64(), open["horizon"].as_u64()), (Some(5), Some(15)), "{open}");
    for key in ["model_by_step", "repeat_by_step"] {
        assert_eq!(open[key].as_array().map(Vec::len), Some(15), "{open}");
    }
    let (world, floor) = (world_losses(dir.path()), terms(dir.path(), "floor", ["image", "reward", "cont"]));
    // 16 iterations of 256 env steps: the prefill fills the first 4, the 4th trains on it.
    assert_eq!((world.len(), floor.len()), (13, 13), "every iteration from the prefill's end trains");
    let (w, f) = (world[12], floor[12]);
    for (i, name) in ["frame", "reward", "continue"].into_iter().enumerate() {
        assert!(w[i] < f[i], "{name}: the model's {} against a constant's {}: {world:?} {floor:?}", w[i], f[i]);
    }
}

/// A short run (64 train steps) prints seed 004's split line, reports its phases, and
/// evaluates the actor against random actions over its episodes (what the actor learned
/// at this budget is not claimed: a few hours of a CPU are).
#[test]
fn a_short_run_reports_seed_004s_split_and_phases_and_evaluates_its_actor() {
    let dir = tempfile::tempdir().unwrap();
    let (report, err) = train(dir.path(), &[]);
    let losses = world_losses(dir.path());
    assert_eq!(losses.len(), 4, "every iteration trains: {losses:?}");
    let line = err.lines().find(|l| l.starts_with("[PROFILE] data: ")).expect("a [PROFILE] line");
    assert!(line.contains("% | fwd: ") && line.contains("% | bwd: ") && line.ends_with("/50 steps"), "{line}");
    let phases = report["profile"]["phases"].as_array().unwrap();
    let calls = |name: &str| phases.iter().find(|p| p["phase"] == name).map_or(0, |p| p["calls"].as_u64().unwrap());
    for phase in ["replay", "encoder", "rssm", "decoder", "imagine", "world_backward", "actor_critic_backward"] {
        assert!(calls(phase) >= 64, "{phase}: {phases:?}");
    }
    assert_eq!(calls("rssm"), 64 * 8, "one RSSM span per step of every batch");
    let eval = &report["dreamer"];
    assert_eq!(eval["episodes"], 8);
    for who in ["agent_return", "random_return"] {
        // CartPole's shortest episode is 8 steps; a return is a whole number of steps.
        let r = eval[who].as_f64().unwrap();
        assert!((8.0..=500.0).contains(&r), "{who}: {eval}");
    }
}

/// `--loss-read per_item` reads 10 figures per train step (a host sync each); `deferred`
/// one per iteration. What is learned is the same, bit for bit.
#[test]
fn reading_losses_per_item_costs_syncs_and_changes_nothing_learned() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (per_item, _) = train(a.path(), &["--loss-read", "per_item"]);
    let (deferred, _) = train(b.path(), &["--loss-read", "deferred"]);
    assert_eq!(per_item["counters"]["host_syncs"], 10 * 64, "ten figures a train step, one read each");
    assert_eq!(deferred["counters"]["host_syncs"], 4);
    assert_eq!(weights(a.path()), weights(b.path()));
    for (x, y) in world_losses(a.path()).iter().zip(&world_losses(b.path())) {
        for (p, q) in x.iter().zip(y) {
            assert!((p - q).abs() <= 1e-5 * p.abs().max(1.0), "{x:?} vs {y:?}");
        }
    }
}

/// Frames in host memory or in a tensor beside the model: the same batches, so the same
/// run bit for bit; the envs on worker processes step the same episodes. Page-locked
/// memory without a GPU is refused, naming the flag and what is allowed.
#[test]
fn the_replay_buffer_and_the_env_backend_change_nothing_learned() {
    let base = tempfile::tempdir().unwrap();
    train(base.path(), &["--replay", "device"]);
    for extra in [&["--replay", "host"][..], &["--backend", "subprocess", "--workers", "2"]] {
        let dir = tempfile::tempdir().unwrap();
        train(dir.path(), extra);
        assert_eq!(weights(dir.path()), weights(base.path()), "{extra:?}");
    }
    let out = run(hotlab().args(["train", "--replay", "pinned"]).args(SMALL.split_whitespace()));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "a value not allowed here: {err}");
    assert!(err.contains("--replay: pinned") && err.contains("allowed here: host, device"), "{err}");
}

/// `--precision bf16`: the world model's products in bf16 on fp32 master weights learns as
/// fp32 does at the same seed, over two seeds and shapes (2 envs, batches of 8 × 8, seed 1;
/// 3 envs, batches of 4 × 16, seed 2): iteration by iteration its frame, continue and KL
/// losses lie within 5 % of fp32's and its reward loss within 25 % (a tiny figure by then).
/// Measured: seed 1, frame 979.3 → 186.2 in fp32 and → 185.4 in bf16, KL 0.784 and 0.794;
/// seed 2, frame 970.9 → 233.6 and → 233.7, KL 0.861 and 0.868. A bf16 world model that
/// learned nothing (its learning rate 1e-12) stays at a frame loss of 1,000 and fails; an
/// fp32 run labelled bf16 gives fp32's losses bit for bit and fails. fp16
/// (loss-scaled, CUDA only: `gpu-check` trains it) is refused on the CPU.
#[test]
fn a_bf16_world_model_learns_as_fp32_does_and_fp16_is_refused_on_the_cpu() {
    let other = "--env dreamer --envs 3 --steps 32 --total-steps 288 --prefill 64 --batch-size 4 \
        --seq-len 16 --train-ratio 16 --device cpu --threads 1 --seed 2";
    for (shape, iterations) in [(SMALL, 4), (other, 3)] {
        let losses = |precision: &str| {
            let dir = tempfile::tempdir().unwrap();
            let out = run(hotlab()
                .args(["train", "--json", "--out"])
                .arg(dir.path())
                .args(shape.split_whitespace())
                .args(["--precision", precision]));
            assert!(out.status.success(), "{precision}: {}", stderr(&out));
            assert_eq!(last_json(&out)["precision"], precision);
            world_losses(dir.path())
        };
        let (bf16, fp32) = (losses("bf16"), losses("fp32"));
        assert_eq!((bf16.len(), fp32.len()), (iterations, iterations), "{shape:?}");
        // bf16 ran: its rounding shows in every iteration after the first update (an fp32
        // run labelled bf16 gives fp32's losses bit for bit: one thread, the same seed).
        let differ = bf16.iter().zip(&fp32).filter(|(b, f)| b != f).count();
        assert!(differ >= iterations - 1, "{shape:?}: bf16's losses are fp32's: {bf16:?}");
        assert!(fp32[0][0] > 3.0 * fp32[iterations - 1][0], "fp32 learns: {fp32:?}");
        for (i, (b, f)) in bf16.iter().zip(&fp32).enumerate() {
            let terms = [("frame", 0.05), ("reward", 0.25), ("continue", 0.05), ("KL", 0.05)];
            for (k, (name, within)) in terms.into_iter().enumerate() {
                let at = format!("{shape:?}, iteration {i}, {name}");
                assert!((b[k] / f[k] - 1.0).abs() < within, "{at}: bf16 {} against fp32 {}", b[k], f[k]);
            }
        }
    }
    let out = run(hotlab().args(["train"]).args(SMALL.split_whitespace()).args(["--precision", "fp16"]));
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("--precision") && err.contains("allowed on the CPU: fp32, bf16, auto"), "{err}");
}

/// Bad settings are refused before anything runs, each naming its flag.
#[test]
fn bad_dreamer_settings_are_refused_naming_the_flag() {
    for (args, expect) in [
        (&["--batch-size", "0"][..], "--batch-size: must be between 1 and 4096"),
        (&["--seq-len", "1"], "--seq-len"),
        (&["--train-ratio", "0"], "--train-ratio"),
        (&["--wm-lr", "nan"], "--wm-lr"),
        (&["--encoder", "sideways"], "allowed: per_step, batched"),
        (&["--backend", "device"], "backend"),
    ] {
        let out = run(hotlab().args(["train"]).args(SMALL.split_whitespace()).args(args));
        assert!(!out.status.success(), "{args:?} accepted");
        assert!(stderr(&out).contains(expect), "{args:?}: {}", stderr(&out));
    }
    let out = run(hotlab().args(["train", "--env", "cartpole", "--seq-len", "8", "--total-steps", "512"]));
    assert!(!out.status.success());
    assert!(stderr(&out).contains("is a setting of --env dreamer"), "{}", stderr(&out));
}

/// A checkpoint loads and is evaluated: the actor and random actions on the same envs.
#[test]
fn a_dreamer_checkpoint_is_evaluated_against_random_actions() {
    let dir = tempfile::tempdir().unwrap();
    train(dir.path(), &["--total-steps", "128"]);
    let out = run(hotlab().args(["eval", "--episodes", "4", "--json", "--checkpoint"]).arg(dir.path()));
    assert!(out.status.success(), "{}", stderr(&out));
    let e = last_json(&out);
    assert_eq!(e["episodes"], 4, "{e}");
    assert!(e["agent_return"].as_f64().unwrap() >= 8.0 && e["random_return"].as_f64().unwrap() >= 8.0, "{e}");
}

/// `hotlab bench batch`: a figure per batch size (milliseconds per update among them) with
/// its split and the memory in use against the machine's, the model's parameters, and a
/// verdict; bad flags are refused by name before anything runs.
#[test]
fn the_batch_bench_measures_each_size_and_refuses_bad_flags() {
    let args = ["bench", "batch", "--sizes", "2,4", "--seq-len", "8", "--horizon", "3", "--seconds", "0.05"];
    let out = run(hotlab().args(args).args(["--threads", "1", "--json"]));
    assert!(out.status.success(), "{}", stderr(&out));
    let r = last_json(&out);
    assert_eq!(
        (r["device"].as_str(), r["precision"].as_str(), r["cudnn_benchmark"].as_bool()),
        (Some("cpu"), Some("fp32"), Some(false)),
        "{r}"
    );
    assert_eq!(r["params"], 704_822, "size 1: the world model, the actor and the critic: {r}");
    assert_eq!(r["graph"], false, "{r}");
    let figures = r["figures"].as_array().unwrap();
    assert_eq!(figures.iter().map(|f| f["batch"].as_u64().unwrap()).collect::<Vec<_>>(), [2, 4]);
    for f in figures {
        assert!(f["train_steps"].as_u64().unwrap() >= 3, "{f}");
        let ms = f["ms_per_update"].as_f64().unwrap();
        assert!((ms * f["train_steps_per_s"].as_f64().unwrap() / 1e3 - 1.0).abs() < 1e-9, "ms per update: {f}");
        assert!(f["samples_per_s"].as_f64().unwrap() > 0.0, "{f}");
        let split: f64 = ["data_pct", "fwd_pct", "bwd_pct"].iter().map(|k| f[k].as_f64().unwrap()).sum();
        assert!((split - 100.0).abs() < 1e-6, "the split sums to 100 %: {f}");
        assert!(f["memory_bytes"].as_u64().unwrap() < f["memory_total_bytes"].as_u64().unwrap(), "{f}");
        assert!(f["launches_per_update"].is_null() && f["replays"] == 0, "nothing captured eagerly: {f}");
    }
    assert!(!r["verdict"].as_str().unwrap().is_empty(), "{r}");
    for (bad, flag) in [
        (&["--sizes", "4,2"][..], "--sizes"),
        (&["--replay", "pinned"], "--replay"),
        (&["--precision", "fp16"], "--precision"),
        (&["--cudnn-heuristics"], "--cudnn-heuristics"),
        (&["--seconds", "0"], "--seconds"),
        (&["--update", "graph"], "--update"),
        (&["--update", "graph_fused"], "--update"),
    ] {
        let out = run(hotlab().args(["bench", "batch", "--device", "cpu"]).args(bad));
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(flag), "{bad:?}: {}", stderr(&out));
    }
}
