//! The workload seam changed where the code lives, not what it computes: the same seed
//! gives the same losses, returns and weights as the commit before it, and the
//! checkpoints that commit wrote still load and play.
//!
//! `tests/fixtures/seam/{cartpole,proof}` and `tests/fixtures/seam/portable/{cartpole,proof}`
//! were written by the worker of the commit before the restructuring (669a5a5, `hotlab train
//! … --out`; the portable set on 2026-11-28, from a worktree of that commit): `metrics.jsonl`
//! (cut to the learning figures), `policy.safetensors` and `spec.json` (the old flat spec).
//! libtorch's CPU kernels round differently per instruction set, so each set was recorded,
//! and is compared, with MKL and ATen pinned to one code path:
//! - `portable/`: MKL's `COMPATIBLE` branch and ATen's `default` kernels, the code paths MKL
//!   documents as giving the same results on Intel and non-Intel CPUs alike (on a non-Intel
//!   CPU MKL ignores the `AVX2` pin and picks its own branch). Compared on every CPU.
//! - the first set: MKL's and ATen's AVX2 paths, the same bits on any Intel CPU with AVX2,
//!   with or without AVX-512. Compared on Intel CPUs, where it was recorded.

mod common;
use common::*;
use std::path::Path;

/// The figures of `metrics.jsonl` that learning decides (the rest are timings).
const LEARNING: &[&str] = &[
    "update",
    "global_step",
    "episodes",
    "mean_return_last_100",
    "lr",
    "policy_loss",
    "value_loss",
    "entropy",
    "approx_kl",
    "clip_fraction",
];

/// A fixture set's folder ("" for the first set).
fn fixture(set: &str) -> std::path::PathBuf {
    repo().join("tests/fixtures/seam").join(set)
}

fn learning_figures(path: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .map(|line| {
            let all: serde_json::Value = serde_json::from_str(line).unwrap();
            LEARNING.iter().map(|k| (k.to_string(), all[k].clone())).collect::<serde_json::Map<_, _>>().into()
        })
        .collect()
}

/// How a fixture set's runs pin libtorch's CPU kernels, and where the set lies.
struct Pins {
    dir: &'static str,
    mkl: &'static str,
    aten: &'static str,
}

/// Recorded with the kernels MKL and ATen run on every x86-64 CPU alike.
const PORTABLE: Pins = Pins { dir: "portable", mkl: "COMPATIBLE", aten: "default" };
/// Recorded with the AVX2 kernels, which MKL honours on Intel CPUs only.
const INTEL_AVX2: Pins = Pins { dir: "", mkl: "AVX2", aten: "avx2" };

/// The fixture sets this CPU can reproduce bit for bit.
fn pins_here() -> Vec<Pins> {
    let intel = std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|c| c.contains("GenuineIntel"));
    if intel {
        vec![PORTABLE, INTEL_AVX2]
    } else {
        vec![PORTABLE]
    }
}

/// Trains as each fixture set was trained and compares figure for figure and byte for byte.
fn same_as_before(name: &str, args: &[&str]) {
    for pins in pins_here() {
        let fixture = fixture(pins.dir).join(name);
        let dir = tempfile::tempdir().unwrap();
        let out = run(hotlab()
            .args(["train", "--device", "cpu", "--total-steps", "100000", "--threads", "1", "--json", "--out"])
            .arg(dir.path())
            .args(args)
            .env("MKL_CBWR", pins.mkl)
            .env("ATEN_CPU_CAPABILITY", pins.aten));
        assert!(out.status.success(), "train failed: {}", stderr(&out));
        let set = format!("{name} (MKL_CBWR={}, ATEN_CPU_CAPABILITY={})", pins.mkl, pins.aten);
        let (now, before) =
            (learning_figures(&dir.path().join("metrics.jsonl")), learning_figures(&fixture.join("metrics.jsonl")));
        assert_eq!(now.len(), before.len(), "{set}: updates");
        for (i, (a, b)) in now.iter().zip(&before).enumerate() {
            assert_eq!(a, b, "{set}: update {} differs from the fixture", i + 1);
        }
        let weights = |d: &Path| std::fs::read(d.join("policy.safetensors")).unwrap();
        assert!(weights(dir.path()) == weights(&fixture), "{set}: policy.safetensors differs from the fixture");
    }
}

#[test]
fn cartpole_trains_bit_for_bit_as_before_the_seam() {
    same_as_before("cartpole", &["--preset", "cleanrl"]);
}

#[test]
fn proof_trains_bit_for_bit_as_before_the_seam() {
    same_as_before("proof", &["--preset", "proof"]);
}

/// The checkpoints the commit before the seam wrote load, and play as trained: CartPole's
/// greedy policy balances (its fixtures' mean returns are 396–463 on these seeds, a random
/// policy's about 22) and the prover's greedy choices prove more held-out queries than
/// random ones.
#[test]
fn checkpoints_written_before_the_seam_still_load_and_play() {
    for set in ["", "portable"] {
        let cartpole = fixture(set).join("cartpole");
        for seed in ["1", "2", "12345"] {
            let out = run(hotlab()
                .args(["eval", "--episodes", "20", "--seed", seed, "--json", "--checkpoint"])
                .arg(&cartpole));
            assert!(out.status.success(), "cartpole eval failed: {}", stderr(&out));
            let eval = last_json(&out);
            assert_eq!((eval["env"].as_str(), eval["episodes"].as_u64()), (Some("cartpole"), Some(20)), "{eval}");
            assert!(eval["mean_return"].as_f64().unwrap() >= 200.0, "{}, seed {seed}: {eval}", cartpole.display());
        }
        let proof = fixture(set).join("proof");
        let out = run(hotlab().args(["eval", "--episodes", "2", "--json", "--checkpoint"]).arg(&proof));
        assert!(out.status.success(), "proof eval failed: {}", stderr(&out));
        let eval = last_json(&out);
        let (greedy, random) = (eval["greedy"].as_f64().unwrap(), eval["random"].as_f64().unwrap());
        assert!(greedy > random, "{}: {eval}", proof.display());
    }
}
