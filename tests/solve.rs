//! PPO solves CartPole at the `cleanrl` preset with a fixed seed.

mod common;
use common::*;

#[test]
fn ppo_solves_cartpole_at_the_cleanrl_preset() {
    let out = run(hotlab().args([
        "train",
        "--preset",
        "cleanrl",
        "--device",
        "cpu",
        "--seed",
        "1",
        "--json",
        "--backend",
        "vectorized",
    ]));
    assert!(out.status.success(), "{}", stderr(&out));
    let report = last_json(&out);
    assert_eq!(report["total_steps"], 499_712, "976 updates of 512 steps");
    let ret = report["mean_return_last_100"].as_f64().unwrap();
    assert!(ret >= 475.0, "mean return of the last 100 episodes: {ret} (report: {report})");
}

#[test]
fn ppo_solves_cartpole_with_subprocess_workers() {
    let out = run(hotlab().args([
        "train",
        "--preset",
        "cleanrl",
        "--device",
        "cpu",
        "--seed",
        "1",
        "--json",
        "--backend",
        "subprocess",
        "--workers",
        "2",
    ]));
    assert!(out.status.success(), "{}", stderr(&out));
    let report = last_json(&out);
    assert_eq!(report["backend"], "subprocess");
    let ret = report["mean_return_last_100"].as_f64().unwrap();
    assert!(ret >= 475.0, "mean return of the last 100 episodes: {ret} (report: {report})");
    assert!(report["counters"]["ipc_round_trips"].as_u64().unwrap() > 0);
}
