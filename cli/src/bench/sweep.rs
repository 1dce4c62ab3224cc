//! `hotlab sweep --on local`: a grid's cells trained here, one after another (side by
//! side they would measure each other).

use crate::failure::Outcome;
use hotlab_protocol::sweep::{Grid, SweepCell, SweepInfo};
use hotlab_protocol::RunStatus;
use hotlab_spec::RunSpec;

/// Trains every cell of `grid` on `spec`; `progress` hears of each before it starts (its
/// label, cell i of n). A cell that fails is kept with its message; the sweep goes on.
pub fn sweep(grid: &str, spec: &RunSpec, progress: &mut dyn FnMut(&str, usize, usize)) -> Outcome<SweepInfo> {
    let specs = Grid::parse(grid)?.specs(spec)?;
    let mut info = SweepInfo {
        grid: grid.trim().to_string(),
        on: "local".into(),
        spec: spec.clone(),
        status: RunStatus::Finished,
        ..SweepInfo::default()
    };
    let n = specs.len();
    for (i, (label, cell_spec)) in specs.into_iter().enumerate() {
        progress(&label, i, n);
        let mut cell = SweepCell { label, machine: Some("local".into()), ..SweepCell::default() };
        match hotlab_workloads::train(&cell_spec, &mut |_| {}) {
            Ok(trained) => {
                cell.status = Some(RunStatus::Finished);
                cell.sps = Some(trained.report.sps);
                cell.mean_return = trained.report.mean_return_last_100;
            }
            Err(e) => {
                cell.status = Some(RunStatus::Failed);
                cell.message = Some(format!("{e:#}"));
            }
        }
        info.cells.push(cell);
    }
    info.judge();
    Ok(info)
}
