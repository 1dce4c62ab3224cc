//! A sweep: a grid of knob values (`envs=64,256,1024 backend=vectorized,threads`), every
//! combination trained once on one spec, and a table of steps/s and return per cell with
//! the best cell (`hotlab sweep`, `POST /api/sweeps`).

use crate::RunStatus;
use hotlab_core::knob::{Knob, KnobKind};
use hotlab_spec::knobs;
use hotlab_spec::{json, RunSpec, SpecError};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Cells a sweep may have (each is a run).
pub const MAX_CELLS: usize = 64;

/// The knobs and their values, in the order written.
#[derive(Clone, Debug)]
pub struct Grid {
    pub axes: Vec<(&'static Knob, Vec<String>)>,
}

fn refuse(message: String) -> SpecError {
    SpecError::new("grid", message)
}

impl Grid {
    /// `KEY=V1,V2 KEY2=V3,…`: knobs by name (the flag in snake_case), values by comma.
    pub fn parse(text: &str) -> Result<Self, SpecError> {
        let mut axes: Vec<(&'static Knob, Vec<String>)> = Vec::new();
        for axis in text.split_whitespace() {
            let Some((key, values)) = axis.split_once('=') else {
                return Err(refuse(format!("'{axis}': write KEY=V1,V2, e.g. envs=64,256")));
            };
            let knob = knobs::find(key).ok_or_else(|| {
                let names: Vec<&str> = knobs::KNOBS.iter().map(|k| k.name).collect();
                refuse(format!("'{key}' is not a knob; the knobs: {}", names.join(", ")))
            })?;
            if matches!(knob.kind, KnobKind::IntList) {
                return Err(refuse(format!("{key}: a list-valued knob cannot be swept (its values hold commas)")));
            }
            if axes.iter().any(|(k, _)| k.name == knob.name) {
                return Err(refuse(format!("{key} appears twice")));
            }
            let values: Vec<String> = values.split(',').map(str::trim).map(str::to_string).collect();
            if values.iter().any(String::is_empty) {
                return Err(refuse(format!("'{axis}': an empty value")));
            }
            axes.push((knob, values));
        }
        if axes.is_empty() {
            return Err(refuse("empty: give at least one KEY=V1,V2".into()));
        }
        let cells: usize = axes.iter().map(|(_, v)| v.len()).product();
        if cells > MAX_CELLS {
            return Err(refuse(format!("{cells} cells: at most {MAX_CELLS} (each is a run)")));
        }
        Ok(Self { axes })
    }

    /// Every combination, the last knob varying fastest: each cell's (knob, value) pairs.
    pub fn cells(&self) -> Vec<Vec<(&'static Knob, String)>> {
        let mut cells: Vec<Vec<(&'static Knob, String)>> = vec![Vec::new()];
        for (knob, values) in &self.axes {
            cells = cells
                .into_iter()
                .flat_map(|cell| {
                    values.iter().map(move |v| {
                        let mut next = cell.clone();
                        next.push((*knob, v.clone()));
                        next
                    })
                })
                .collect();
        }
        cells
    }

    /// Each cell's label (`envs=64 backend=threads`) and spec: `base` with the cell's
    /// values, validated; a value the spec refuses is refused naming its knob.
    pub fn specs(&self, base: &RunSpec) -> Result<Vec<(String, RunSpec)>, SpecError> {
        let env = base.env();
        let Ok(Value::Object(fields)) = serde_json::to_value(base) else {
            return Err(refuse("the spec does not serialize".into()));
        };
        self.cells()
            .into_iter()
            .map(|cell| {
                let mut fields = fields.clone();
                for (knob, value) in &cell {
                    if !knob.applies_to(env.as_str()) {
                        return Err(SpecError::new(
                            knob.name,
                            format!("{} is not a setting of the {env} workload", knob.name),
                        ));
                    }
                    knob.set(&mut fields, knob.kind.value(value));
                }
                let spec = json::parse(Value::Object(fields)).map_err(|r| r.error)?;
                spec.validate()?;
                let label = cell.iter().map(|(k, v)| format!("{}={v}", k.name)).collect::<Vec<_>>().join(" ");
                Ok((label, spec))
            })
            .collect()
    }
}

/// One cell of a sweep: its values, its run and what it measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SweepCell {
    /// `envs=64 backend=threads`.
    pub label: String,
    /// The run that trains it, once launched (a lab's sweep).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<u64>,
    /// Where it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<RunStatus>,
    /// Env steps per second of training.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sps: Option<f64>,
    /// Mean return of the last 100 episodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_return: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A sweep as a lab keeps it (`GET /api/sweeps/{id}`) and `hotlab sweep --json` prints it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SweepInfo {
    pub id: u64,
    pub created_ms: u64,
    pub grid: String,
    /// Where its runs go: `local`, `workers`, `ray`, or `any` (a free machine each).
    pub on: String,
    pub spec: RunSpec,
    pub status: RunStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    pub cells: Vec<SweepCell>,
    /// The cell with the most steps/s among those that finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best: Option<usize>,
    /// The cell with the highest return among those that finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_return: Option<usize>,
}

impl SweepInfo {
    /// Fills in `best` and `best_return` from the finished cells.
    pub fn judge(&mut self) {
        let finished = |c: &&(usize, &SweepCell)| c.1.status == Some(RunStatus::Finished);
        let cells: Vec<(usize, &SweepCell)> = self.cells.iter().enumerate().collect();
        let top = |key: fn(&SweepCell) -> Option<f64>| {
            cells
                .iter()
                .filter(finished)
                .filter_map(|(i, c)| key(c).map(|v| (*i, v)))
                .max_by(|a, b| a.1.total_cmp(&b.1))
                .map(|(i, _)| i)
        };
        self.best = top(|c| c.sps);
        self.best_return = top(|c| c.mean_return);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grid_is_every_combination_in_order() {
        let g = Grid::parse("envs=8,16 backend=vectorized,threads,sequential").unwrap();
        let specs = g.specs(&RunSpec::default()).unwrap();
        assert_eq!(specs.len(), 6);
        assert_eq!(specs[0].0, "envs=8 backend=vectorized");
        assert_eq!(specs[5].0, "envs=16 backend=sequential");
        assert_eq!(specs[4].1.envs, 16);
        assert_eq!(specs[4].1.exec.backend.to_string(), "threads");
    }

    #[test]
    fn bad_grids_are_refused_naming_the_field() {
        for (text, says) in [
            ("", "empty"),
            ("envs", "KEY=V1,V2"),
            ("speed=1,2", "not a knob"),
            ("envs=8,,16", "empty value"),
            ("envs=8 envs=16", "twice"),
            ("hidden=64,64", "list-valued"),
            ("envs=1,2,3,4,5,6,7,8 seed=1,2,3,4,5,6,7,8,9", "at most 64"),
        ] {
            let e = Grid::parse(text).unwrap_err();
            assert_eq!(e.field, "grid", "{text}");
            assert!(e.message.contains(says), "{text}: {}", e.message);
        }
        let e = Grid::parse("envs=8,zero").unwrap().specs(&RunSpec::default()).unwrap_err();
        assert_eq!(e.field, "envs", "{}", e.message);
    }

    #[test]
    fn the_best_cell_is_the_fastest_that_finished() {
        let cell = |sps: f64, ret: f64, status| SweepCell {
            sps: Some(sps),
            mean_return: Some(ret),
            status: Some(status),
            ..Default::default()
        };
        let mut s = SweepInfo {
            cells: vec![
                cell(100.0, 50.0, RunStatus::Finished),
                cell(900.0, 10.0, RunStatus::Failed),
                cell(300.0, 20.0, RunStatus::Finished),
            ],
            ..Default::default()
        };
        s.judge();
        assert_eq!((s.best, s.best_return), (Some(2), Some(0)));
    }
}
