//! The compare view's numbers: the same rows for every run, and each run's ratio to the
//! first (the "before").

use crate::run_data::RunData;
use hotlab_spec::knobs::KNOBS;
use hotlab_spec::RunSpec;

/// How a row's values read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    PerSecond,
    Percent,
    Count,
    Bytes,
    Seconds,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub label: String,
    pub unit: Unit,
    /// Bigger is better (steps/s) or smaller is (everything else).
    pub higher_is_better: bool,
    pub values: Vec<Option<f64>>,
    /// Each value over the first run's (None for the first, or without a base).
    pub ratios: Vec<Option<f64>>,
}

/// The knobs whose values differ between the runs (by name), with each run's value; a
/// workload's own setting shows empty for a run of another workload.
pub fn differences(specs: &[&RunSpec]) -> Vec<(String, Vec<String>)> {
    let values: Vec<serde_json::Map<String, serde_json::Value>> =
        specs.iter().filter_map(|s| serde_json::to_value(s).ok()?.as_object().cloned()).collect();
    let mut diffs: Vec<(String, Vec<String>)> = KNOBS
        .iter()
        .filter_map(|k| {
            let each: Vec<Option<serde_json::Value>> = values.iter().map(|v| k.get(v)).collect();
            let first = each.first()?;
            each.iter()
                .any(|v| v != first)
                .then(|| (k.name.to_string(), each.iter().map(|v| v.as_ref().map_or(String::new(), show)).collect()))
        })
        .collect();
    diffs.sort();
    diffs
}

fn show(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn row(label: &str, unit: Unit, higher_is_better: bool, values: Vec<Option<f64>>) -> Row {
    let base = values.first().copied().flatten();
    let ratios = values
        .iter()
        .enumerate()
        .map(|(i, v)| if i == 0 { None } else { crate::format::ratio((*v)?, base?) })
        .collect();
    Row { label: label.into(), unit, higher_is_better, values, ratios }
}

/// Steps/s, wall time, the phases' shares (those over 0.5 % somewhere) and the counters
/// per thousand env steps.
pub fn rows(runs: &[&RunData]) -> Vec<Row> {
    let mut out = Vec::new();
    let sps = runs.iter().map(|r| r.report.as_ref().map(|p| p.steps_per_s).or(r.sps())).collect();
    out.push(row("steps/s", Unit::PerSecond, true, sps));
    out.push(row("profiled wall", Unit::Seconds, false, runs.iter().map(|r| Some(r.total.wall_s)).collect()));
    for phase in hotlab_specs::PHASES.iter().map(|i| i.phase) {
        let shares: Vec<Option<f64>> = runs.iter().map(|r| Some(100.0 * r.total.share(phase))).collect();
        if shares.iter().flatten().any(|&s| s >= 0.5) {
            out.push(row(phase.name(), Unit::Percent, false, shares));
        }
    }
    let per_k = |r: &RunData, x: f64| {
        let steps = r.total.counters.env_steps;
        (steps > 0).then(|| 1000.0 * x / steps as f64)
    };
    type Counter = fn(&hotlab_core::counters::Counters) -> f64;
    let counters: [(&str, Unit, Counter); 6] = [
        ("host syncs / 1k steps", Unit::Count, |c| c.host_syncs as f64),
        ("h2d copies / 1k steps", Unit::Count, |c| c.h2d_copies as f64),
        ("h2d bytes / 1k steps", Unit::Bytes, |c| c.h2d_bytes as f64),
        ("d2h copies / 1k steps", Unit::Count, |c| c.d2h_copies as f64),
        ("IPC round trips / 1k steps", Unit::Count, |c| c.ipc_round_trips as f64),
        ("worker wait / 1k steps", Unit::Seconds, |c| c.worker_wait_s),
    ];
    for (label, unit, get) in counters {
        out.push(row(label, unit, false, runs.iter().map(|r| per_k(r, get(&r.total.counters))).collect()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use hotlab_core::choices::Backend;
    use hotlab_core::run::ExecSpec;

    #[test]
    fn ratios_are_against_the_first_run() {
        let (mut a, mut b) = (RunData::default(), RunData::default());
        a.total.wall_s = 2.0;
        b.total.wall_s = 1.0;
        a.total.counters.env_steps = 1000;
        b.total.counters.env_steps = 1000;
        a.total.counters.host_syncs = 500;
        let rows = rows(&[&a, &b]);
        let wall = rows.iter().find(|r| r.label == "profiled wall").unwrap();
        assert_eq!(wall.ratios, vec![None, Some(0.5)]);
        let syncs = rows.iter().find(|r| r.label.starts_with("host syncs")).unwrap();
        assert_eq!(syncs.values, vec![Some(500.0), Some(0.0)]);
        assert_eq!(syncs.ratios, vec![None, Some(0.0)]);
        let sps = rows.iter().find(|r| r.label == "steps/s").unwrap();
        assert_eq!(sps.values, vec![None, None], "no metrics yet");
        assert!(sps.higher_is_better);
    }

    #[test]
    fn differences_name_the_knobs_that_changed() {
        let a = RunSpec::default();
        let b = RunSpec {
            envs: 8,
            exec: ExecSpec { backend: Backend::Threads, ..ExecSpec::default() },
            ..RunSpec::default()
        };
        let d = differences(&[&a, &b]);
        assert_eq!(
            d,
            vec![
                ("backend".to_string(), vec!["vectorized".to_string(), "threads".to_string()]),
                ("envs".to_string(), vec!["4".to_string(), "8".to_string()]),
            ]
        );
    }
}
