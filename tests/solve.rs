//! PPO solves CartPole at the `cleanrl` preset with a fixed seed, on more than one backend.

mod common;
use common::*;

/// Trains at the cleanrl preset (seed 1) with `extra` flags; checks the solve; returns the report.
fn solve(extra: &[&str]) -> serde_json::Value {
    let out =
        run(hotlab().args(["train", "--preset", "cleanrl", "--device", "cpu", "--seed", "1", "--json"]).args(extra));
    assert!(out.status.success(), "{}", stderr(&out));
    let report = last_json(&out);
    assert_eq!(report["total_steps"], 499_712, "976 updates of 512 steps");
    let ret = report["mean_return_last_100"].as_f64().unwrap();
    assert!(ret >= 475.0, "{extra:?}: mean return of the last 100 episodes: {ret} (report: {report})");
    report
}

#[test]
fn ppo_solves_cartpole_at_the_cleanrl_preset() {
    assert_eq!(solve(&["--backend", "vectorized"])["backend"], "vectorized");
}

#[test]
fn ppo_solves_cartpole_with_subprocess_workers() {
    let report = solve(&["--backend", "subprocess", "--workers", "2"]);
    assert_eq!(report["backend"], "subprocess");
    assert!(report["counters"]["ipc_round_trips"].as_u64().unwrap() > 0);
}

/// The proof env (issue 5): on a small generated family world, the trained embedding
/// policy proves more held-out queries (their constants never appear in a training
/// query) than a uniform choice among the same successors, at the same depth limit.
#[test]
fn the_proof_policy_beats_random_choice_on_held_out_queries() {
    let out = run(hotlab().args([
        "train",
        "--preset",
        "proof",
        "--kb",
        "family:people=30,seed=3",
        "--total-steps",
        "500000",
        "--device",
        "cpu",
        "--seed",
        "1",
        "--json",
    ]));
    assert!(out.status.success(), "{}", stderr(&out));
    let report = last_json(&out);
    let p = &report["proof"];
    let rate = |k: &str| p[k].as_f64().unwrap_or_else(|| panic!("proof.{k} in {report}"));
    assert!(p["queries"].as_u64().unwrap() >= 40, "enough provable held-out queries: {p}");
    assert_eq!(p["depth"], 10);
    let (greedy, sampled, random) = (rate("greedy"), rate("sampled"), rate("random"));
    assert!(greedy >= random + 0.20, "greedy {greedy:.3} vs random {random:.3}: {p}");
    assert!(sampled > random, "sampled {sampled:.3} vs random {random:.3}: {p}");
}
