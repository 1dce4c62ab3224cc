//! The scalar CartPole matches Gymnasium's CartPole-v1 transition for transition.

mod common;
use common::*;
use hotlab_env::cartpole::CartPole;
use hotlab_env::rng::HostRng;
use std::io::Write;

#[test]
fn scalar_cartpole_matches_gymnasium_on_12000_random_transitions() {
    let python = python();
    assert!(
        python.exists(),
        "{} not found: run `cargo xtask test` (it installs torch and gymnasium into .venv) or set HOTLAB_PYTHON",
        python.display()
    );
    let mut rng = HostRng::new(2024);
    let mut uniform = |lo: f64, hi: f64| lo + (hi - lo) * rng.next_f64();
    let cases: Vec<([f64; 4], u32, i64)> = (0..12_000)
        .map(|i| {
            // Mostly in the live region, some beyond the thresholds; elapsed near 500 for truncation.
            let wide = if i % 10 == 0 { 1.3 } else { 1.0 };
            let state =
                [uniform(-2.4, 2.4) * wide, uniform(-3.0, 3.0), uniform(-0.21, 0.21) * wide, uniform(-3.5, 3.5)];
            let elapsed = if i % 7 == 0 { 499 } else { (uniform(0.0, 498.0)) as u32 };
            (state, elapsed, (i % 2) as i64)
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = (dir.path().join("in.jsonl"), dir.path().join("out.jsonl"));
    let mut f = std::fs::File::create(&input).unwrap();
    for (state, elapsed, action) in &cases {
        writeln!(f, "{}", serde_json::json!({"state": state, "elapsed": elapsed, "action": action})).unwrap();
    }
    drop(f);
    let out =
        run(std::process::Command::new(&python).arg(repo().join("tests/gym_cartpole.py")).arg(&input).arg(&output));
    assert!(out.status.success(), "gymnasium reference failed: {}", stderr(&out));
    assert!(stdout(&out).trim().starts_with('1'), "Gymnasium 1.x expected, got {}", stdout(&out));

    let results = std::fs::read_to_string(&output).unwrap();
    let (mut terminated, mut truncated) = (0, 0);
    for (line, (state, elapsed, action)) in results.lines().zip(&cases) {
        let want: serde_json::Value = serde_json::from_str(line).unwrap();
        let mut ours = CartPole::new(0, 0);
        ours.state = *state;
        ours.elapsed = *elapsed;
        let (reward, term, trunc) = ours.step_state(*action);
        for k in 0..4 {
            let g = want["state"][k].as_f64().unwrap();
            assert!(
                (ours.state[k] - g).abs() <= 1e-12,
                "{state:?} a={action}: component {k}: ours {} gym {g}",
                ours.state[k]
            );
        }
        assert_eq!(reward, want["reward"].as_f64().unwrap());
        assert_eq!(term, want["terminated"].as_bool().unwrap(), "{state:?}");
        assert_eq!(trunc, want["truncated"].as_bool().unwrap(), "{state:?} elapsed {elapsed}");
        terminated += term as usize;
        truncated += trunc as usize;
    }
    assert_eq!(results.lines().count(), cases.len());
    assert!(
        terminated > 500 && truncated > 500,
        "both endings covered: {terminated} terminated, {truncated} truncated"
    );
}
