//! How long a run takes on this lab: a preset's whole run from the speed a run of the same
//! spec measured here, and a running run's expected end from its own speed so far. Pure
//! (no browser), so it is unit-tested natively.

use hotlab_protocol::{MetricsPoint, RunInfo};
use hotlab_spec::RunSpec;
use serde_json::Value;

/// Seconds a preset's card runs when this lab has not timed it, or when its whole run takes
/// longer: long enough to time it (the card then gives the whole run's time), short enough
/// to watch; the whole run is the card's other button.
pub const DEMO_SECONDS: f64 = 120.0;

/// A spec's speed as a run of it measured on this lab.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Measured {
    /// The run it was measured in.
    pub run: u64,
    /// Env steps per second over that run so far (start-up included).
    pub sps: f64,
}

/// The newest run in `runs` whose spec is `spec` but for what does not change a step's
/// speed (its length, its time budget, its seed), with a speed.
pub fn measured(spec: &RunSpec, runs: &[RunInfo]) -> Option<Measured> {
    runs.iter()
        .filter(|r| r.sps.is_some_and(|s| s.is_finite() && s > 0.0))
        .filter(|r| same_speed(spec, &r.spec))
        .max_by_key(|r| r.id)
        .map(|r| Measured { run: r.id, sps: r.sps.unwrap_or_default() })
}

fn same_speed(a: &RunSpec, b: &RunSpec) -> bool {
    let mut b = b.clone();
    (b.total_steps, b.seconds, b.seed) = (a.total_steps, a.seconds, a.seed);
    // A stored spec has been through JSON twice, whose parsing may move a float by its last
    // bit: its figures compare as f32.
    match (serde_json::to_value(a), serde_json::to_value(&b)) {
        (Ok(a), Ok(b)) => alike(&a, &b),
        _ => false,
    }
}

fn alike(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64().map(|x| x as f32) == y.as_f64().map(|y| y as f32),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| alike(x, y)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| alike(v, w)))
        }
        _ => a == b,
    }
}

/// Seconds `spec`'s whole run takes at `sps` (its time budget, where it has one, ends it
/// sooner).
pub fn whole_run(spec: &RunSpec, sps: f64) -> f64 {
    capped(spec, spec.total_steps as f64 / sps)
}

fn capped(spec: &RunSpec, secs: f64) -> f64 {
    if spec.seconds > 0.0 {
        secs.min(spec.seconds)
    } else {
        secs
    }
}

/// Seconds left of a running run of `spec` after its update `last`, at its speed so far:
/// its steps still to go, or what is left of its time budget if that ends it sooner. None
/// where it has no length of its own (a user's script) or no speed yet.
pub fn remaining(spec: &RunSpec, last: &MetricsPoint) -> Option<f64> {
    if last.updates == 0 || !(last.sps.is_finite() && last.sps > 0.0) {
        return None;
    }
    let steps = spec.total_steps.saturating_sub(last.global_step) as f64;
    let left = steps / last.sps;
    Some(if spec.seconds > 0.0 { left.min((spec.seconds - last.wall_s).max(0.0)) } else { left })
}

/// A duration as a card says it: `40 s`, `3 min`, `2 h 05 min`, `3 days 4 h`.
pub fn duration(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    match s {
        0..=89 => format!("{s} s"),
        90..=5_399 => format!("{} min", (s + 30) / 60),
        5_400..=172_799 => {
            let m = (s + 30) / 60;
            format!("{} h {:02} min", m / 60, m % 60)
        }
        _ => {
            let h = (s + 1_800) / 3_600;
            format!("{} days {} h", h / 24, h % 24)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hotlab_protocol::RunStatus;
    use hotlab_spec::PresetSpec;
    use hotlab_specs::AnyPreset;

    fn run(id: u64, spec: RunSpec, sps: Option<f64>) -> RunInfo {
        let mut info: RunInfo = serde_json::from_value(serde_json::json!({
            "id": id, "status": RunStatus::Finished, "created_ms": 0, "spec": {}, "events": 0
        }))
        .unwrap();
        (info.spec, info.sps) = (spec, sps);
        info
    }

    fn preset(name: &str) -> RunSpec {
        AnyPreset::find(name).unwrap().spec()
    }

    #[test]
    fn a_preset_is_timed_by_the_newest_run_of_its_spec_whatever_its_length_budget_or_seed() {
        let atari = preset("atari");
        let mut demo = atari.clone();
        (demo.seconds, demo.total_steps, demo.seed) = (DEMO_SECONDS, 4096, 9);
        let mut other = atari.clone();
        other.envs = 16;
        let runs = [
            run(1, demo.clone(), Some(250.0)),
            run(2, other, Some(900.0)),
            run(3, demo.clone(), None),
            run(4, demo, Some(272.0)),
            run(5, preset("cleanrl"), Some(9_000.0)),
        ];
        assert_eq!(measured(&atari, &runs), Some(Measured { run: 4, sps: 272.0 }));
        // As the lab gives it back: through JSON, a float perhaps a bit off.
        let mut stored = atari.clone();
        stored.ppo.lr = f64::from_bits(atari.ppo.lr.to_bits() + 1);
        assert_eq!(measured(&atari, &[run(7, stored, Some(300.0))]).map(|m| m.run), Some(7));
        assert_eq!(measured(&preset("mujoco"), &runs), None, "no run of its spec here");
        // 10 M steps at 272 steps/s: about 10 hours; a demo's budget ends it at 2 minutes.
        assert_eq!(duration(whole_run(&atari, 272.0)), "10 h 13 min");
        let mut capped = atari.clone();
        capped.seconds = DEMO_SECONDS;
        assert_eq!(whole_run(&capped, 272.0), DEMO_SECONDS);
    }

    #[test]
    fn a_running_run_ends_when_its_steps_or_its_budget_run_out() {
        let mut spec = preset("cleanrl");
        spec.total_steps = 10_000;
        let at = |global_step: u64, wall_s: f64, updates: u64| -> MetricsPoint {
            serde_json::from_value(serde_json::json!({
                "update": 1, "updates": updates, "global_step": global_step, "wall_s": wall_s,
                "sps": global_step as f64 / wall_s, "episodes": 0, "lr": 0.0,
                "rollout_s": 0.0, "update_s": 0.0
            }))
            .unwrap()
        };
        assert_eq!(remaining(&spec, &at(2_000, 4.0, 20)), Some(16.0), "8,000 steps at 500 steps/s");
        spec.seconds = 10.0;
        assert_eq!(remaining(&spec, &at(2_000, 4.0, 20)), Some(6.0), "the budget ends it first");
        assert_eq!(remaining(&spec, &at(2_000, 12.0, 20)), Some(0.0), "past its budget: the update in progress");
        assert_eq!(remaining(&spec, &at(2_000, 4.0, 0)), None, "a script's run has no length of its own");
    }

    #[test]
    fn durations_read_as_a_card_says_them() {
        let cases = [(0.4, "0 s"), (42.0, "42 s"), (95.0, "2 min"), (3_599.0, "60 min"), (5_400.0, "1 h 30 min")];
        for (secs, text) in cases {
            assert_eq!(duration(secs), text, "{secs}");
        }
        assert_eq!(duration(36_780.0), "10 h 13 min");
        assert_eq!(duration(3.0 * 86_400.0 + 4.0 * 3_600.0), "3 days 4 h");
        assert_eq!(duration(-5.0), "0 s");
    }
}
