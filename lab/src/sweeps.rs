//! The lab's sweeps (`POST /api/sweeps`): a grid's cells launched together as ordinary
//! runs, each on a machine of its own choosing (`on`: the local machine, the workers in
//! turn, Ray, or any free machine), then a table of steps/s and return per cell with the
//! best cell. A sweep is one row of the store, rewritten as its runs end.
//!
//! Unlike an audit, a sweep's runs may run side by side (on different machines, or as the
//! machines' limits allow): a sweep answers "which setting is fastest where it runs", not
//! "did this change help on this machine".

use super::machines::RAY;
use super::runs::Manager;
use hotlab_protocol::sweep::{Grid, SweepCell, SweepInfo};
use hotlab_protocol::{RunStatus, RunSummary};
use hotlab_spec::{RunSpec, SpecError};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often a sweep looks at its runs.
const POLL: Duration = Duration::from_millis(100);

/// Where a sweep's runs go.
pub const PLACES: [&str; 4] = ["any", "local", "workers", "ray"];

pub struct Sweeps {
    manager: Arc<Manager>,
    inner: Mutex<Inner>,
}

struct Inner {
    next_id: u64,
    live: HashMap<u64, Arc<Mutex<SweepInfo>>>,
}

impl Sweeps {
    pub fn new(manager: Arc<Manager>) -> anyhow::Result<Arc<Self>> {
        let next_id = manager.store().last_sweep_id()? + 1;
        Ok(Arc::new(Self { manager, inner: Mutex::new(Inner { next_id, live: HashMap::new() }) }))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A live sweep's state now.
    pub fn live(&self, id: u64) -> Option<SweepInfo> {
        let sweep = self.lock().live.get(&id).cloned()?;
        let info = sweep.lock().unwrap_or_else(|p| p.into_inner()).clone();
        Some(info)
    }

    /// The machine of each of `cells` runs for `on`, or the refusal naming the field.
    fn places(&self, on: &str, cells: usize, device: &str) -> Result<Vec<String>, SpecError> {
        let machines = self.manager.machines();
        let queued = self.manager.queued_per_machine();
        let listed = machines.list(&queued);
        let named = |want: &dyn Fn(&hotlab_protocol::MachineInfo) -> bool, what: &str| {
            let names: Vec<String> = listed.iter().filter(|m| want(m)).map(|m| m.name.clone()).collect();
            match names.is_empty() {
                true => Err(SpecError::new("on", format!("{on}: this lab has no {what}"))),
                false => Ok((0..cells).map(|i| names[i % names.len()].clone()).collect()),
            }
        };
        match on {
            "local" => named(&|m| m.local, "local machine (it serves with --local-worker off)"),
            "ray" => named(&|m| m.ray && m.name == RAY, "Ray head (serve it with --ray)"),
            "workers" => named(&|m| !m.local && !m.ray && m.connected, "worker connected"),
            "any" => (0..cells)
                .map(|_| machines.choose(None, device, &queued).map_err(|(field, m)| SpecError::new(field, m)))
                .collect(),
            other => Err(SpecError::new("on", format!("'{other}': allowed {}", PLACES.join(", ")))),
        }
    }

    /// Launches every cell of `grid` on `spec` (placed by `on`) and follows them on a
    /// thread of its own; the sweep as it starts.
    pub fn start(self: &Arc<Self>, grid: &str, spec: RunSpec, on: &str) -> Result<SweepInfo, SpecError> {
        let specs = Grid::parse(grid)?.specs(&spec)?;
        let places = self.places(on, specs.len(), &spec.device)?;
        let id = {
            let mut inner = self.lock();
            inner.next_id += 1;
            inner.next_id - 1
        };
        let mut info = SweepInfo {
            id,
            created_ms: crate::clock::now_ms(),
            grid: grid.trim().to_string(),
            on: on.to_string(),
            spec,
            status: RunStatus::Running,
            ..SweepInfo::default()
        };
        for ((label, cell_spec), machine) in specs.into_iter().zip(places) {
            let run = self.manager.launch(cell_spec, machine.clone(), true);
            info.cells.push(SweepCell { label, run: Some(run), machine: Some(machine), ..SweepCell::default() });
        }
        self.manager.store().add_sweep(&info);
        let shared = Arc::new(Mutex::new(info.clone()));
        self.lock().live.insert(id, Arc::clone(&shared));
        let me = Arc::clone(self);
        let spawned = std::thread::Builder::new().name(format!("hotlab-sweep-{id}")).spawn(move || {
            me.follow(&shared);
            me.lock().live.remove(&id);
        });
        if let Err(e) = spawned {
            tracing::error!("sweep {id}: cannot follow its runs: {e}");
        }
        Ok(info)
    }

    /// Waits for each cell's run, recording what it measured as it ends.
    fn follow(&self, sweep: &Mutex<SweepInfo>) {
        let lock = || sweep.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            let pending: Vec<(usize, u64)> = lock()
                .cells
                .iter()
                .enumerate()
                .filter(|(_, c)| c.status.is_none())
                .filter_map(|(i, c)| c.run.map(|r| (i, r)))
                .collect();
            if pending.is_empty() {
                break;
            }
            let mut changed = false;
            for (i, run) in pending {
                let ended = match self.manager.summary(run) {
                    Ok(Some(s)) if s.info.status.is_final() => Some(cell_of(&s)),
                    Ok(_) => None,
                    Err(e) => Some((RunStatus::Failed, None, None, Some(format!("reading run {run}: {e:#}")))),
                };
                if let Some((status, sps, mean_return, message)) = ended {
                    let mut s = lock();
                    let cell = &mut s.cells[i];
                    (cell.status, cell.sps, cell.mean_return, cell.message) = (Some(status), sps, mean_return, message);
                    changed = true;
                }
            }
            if changed {
                let mut s = lock();
                s.judge();
                self.manager.store().add_sweep(&s);
            }
            std::thread::sleep(POLL);
        }
        let mut s = lock();
        s.judge();
        s.status = RunStatus::Finished;
        if s.best.is_none() {
            s.message = Some("no cell finished".into());
        }
        self.manager.store().add_sweep(&s);
    }
}

/// What a sweep keeps of a cell's run: how it ended, its steps/s and return.
fn cell_of(s: &RunSummary) -> (RunStatus, Option<f64>, Option<f64>, Option<String>) {
    let sps = s.report.as_ref().map(|r| r.steps_per_s).or(s.last.as_ref().map(|m| m.sps));
    let mean_return = s.last.as_ref().and_then(|m| m.mean_return_last_100);
    (s.info.status, sps, mean_return, s.info.message.clone())
}
