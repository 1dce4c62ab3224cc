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
