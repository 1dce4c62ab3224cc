//! The run manager: a queue, a limit on concurrent runs, one OS thread per run (never
//! the async runtime), stop flags, and each run's event log, published to the store
//! and to live subscribers.

use super::store::{Logged, Store};
use crate::train::frames::FrameFeed;
use crate::train::{TrainOptions, UpdateMetrics};
use crate::workloads::train_with;
use hotlab_shared::protocol::{Event, EventBody, RunInfo, RunStatus, PROTOCOL_VERSION};
use hotlab_shared::spec::RunSpec;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::broadcast;

/// Events buffered per run for live subscribers; one that falls further behind is
/// told so and catches up from the log.
const LIVE_BUFFER: usize = 1024;

/// Rollout frames: 30 per second while someone watches the run, one per second otherwise
/// (the history keeps a glimpse without growing by megabytes an hour).
const FRAME_GAP_WATCHED: Duration = Duration::from_millis(33);
const FRAME_GAP_UNWATCHED: Duration = Duration::from_secs(1);

/// One run of this server's life.
pub struct Run {
    pub id: u64,
    pub spec: RunSpec,
    pub created_ms: u64,
    stop: Arc<AtomicBool>,
    state: Mutex<RunState>,
    live: broadcast::Sender<Arc<Logged>>,
}

struct RunState {
    status: RunStatus,
    message: Option<String>,
    events: Vec<Arc<Logged>>,
    sps: Option<f64>,
}

impl Run {
    pub fn info(&self) -> RunInfo {
        let s = self.state.lock().expect("run state");
        RunInfo {
            id: self.id,
            status: s.status,
            message: s.message.clone(),
            created_ms: self.created_ms,
            spec: self.spec.clone(),
            events: s.events.len() as u64,
            sps: s.sps,
        }
    }

    /// The events after `since`, and (when the run is not over) a subscription that
    /// continues exactly where they end.
    pub fn follow(&self, since: u64) -> (Vec<Arc<Logged>>, Option<broadcast::Receiver<Arc<Logged>>>) {
        let s = self.state.lock().expect("run state");
        let past = s.events.iter().skip(since as usize).cloned().collect();
        let live = (!s.status.is_final()).then(|| self.live.subscribe());
        (past, live)
    }
}

/// All runs, the queue and the limit.
pub struct Manager {
    store: Store,
    max_running: usize,
    inner: Mutex<Inner>,
}

struct Inner {
    next_id: u64,
    runs: HashMap<u64, Arc<Run>>,
    queue: VecDeque<u64>,
    running: usize,
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

impl Manager {
    pub fn new(store: Store, max_running: usize) -> anyhow::Result<Arc<Self>> {
        let next_id = store.last_id()? + 1;
        let inner = Inner { next_id, runs: HashMap::new(), queue: VecDeque::new(), running: 0 };
        Ok(Arc::new(Self { store, max_running: max_running.max(1), inner: Mutex::new(inner) }))
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn max_running(&self) -> usize {
        self.max_running
    }

    /// A run of this server's life.
    pub fn get(&self, id: u64) -> Option<Arc<Run>> {
        self.inner.lock().expect("manager").runs.get(&id).cloned()
    }

    /// The runs held in memory (queued, running, or just ended).
    pub fn infos(&self) -> Vec<RunInfo> {
        self.inner.lock().expect("manager").runs.values().map(|r| r.info()).collect()
    }

    /// Queues a validated spec; returns its id.
    pub fn launch(self: &Arc<Self>, spec: RunSpec) -> u64 {
        let (live, _) = broadcast::channel(LIVE_BUFFER);
        let mut inner = self.inner.lock().expect("manager");
        let id = inner.next_id;
        inner.next_id += 1;
        let run = Arc::new(Run {
            id,
            spec,
            created_ms: now_ms(),
            stop: Arc::new(AtomicBool::new(false)),
            state: Mutex::new(RunState { status: RunStatus::Queued, message: None, events: Vec::new(), sps: None }),
            live,
        });
        self.store.add_run(id, run.created_ms, &run.spec);
        self.publish(&run, EventBody::Status { status: RunStatus::Queued, message: None });
        inner.runs.insert(id, run);
        inner.queue.push_back(id);
        self.start_queued(&mut inner);
        id
    }

    /// Stops a queued or running run; false when it was already over.
    pub fn stop(self: &Arc<Self>, id: u64) -> bool {
        let mut inner = self.inner.lock().expect("manager");
        let Some(run) = inner.runs.get(&id).cloned() else { return false };
        let status = run.state.lock().expect("run state").status;
        match status {
            RunStatus::Queued => {
                inner.queue.retain(|&q| q != id);
                self.publish(&run, EventBody::Status { status: RunStatus::Stopped, message: None });
                // It will never run: once the store holds its end, it leaves memory, as
                // an ended run does (off this thread: the commit takes up to a flush).
                let me = Arc::clone(self);
                let _ = std::thread::Builder::new().name(format!("hotlab-drop-{id}")).spawn(move || {
                    me.store.flush();
                    me.inner.lock().expect("manager").runs.remove(&id);
                });
                true
            }
            RunStatus::Running => {
                run.stop.store(true, Ordering::Relaxed);
                true
            }
            _ => false,
        }
    }

    /// Appends an event to the run's log, the store and the live stream.
    fn publish(&self, run: &Run, body: EventBody) {
        let mut s = run.state.lock().expect("run state");
        match &body {
            EventBody::Status { status, message } => {
                s.status = *status;
                s.message = message.clone();
            }
            EventBody::Metrics { metrics } => s.sps = Some(metrics.sps),
            _ => {}
        }
        let e = Logged::new(Event { v: PROTOCOL_VERSION, run: run.id, seq: s.events.len() as u64 + 1, body });
        self.store.add_event(&e);
        s.events.push(Arc::clone(&e));
        // No subscriber is not an error.
        let _ = run.live.send(e);
    }

    fn start_queued(self: &Arc<Self>, inner: &mut Inner) {
        while inner.running < self.max_running {
            let Some(id) = inner.queue.pop_front() else { return };
            let Some(run) = inner.runs.get(&id).cloned() else { continue };
            inner.running += 1;
            let me = Arc::clone(self);
            let spawned = std::thread::Builder::new().name(format!("hotlab-run-{id}")).spawn(move || {
                me.execute(&run);
                // Once the store holds all of it, the run is read from there (viewers
                // still streaming keep their own reference).
                me.store.flush();
                let mut inner = me.inner.lock().expect("manager");
                inner.runs.remove(&id);
                inner.running -= 1;
                me.start_queued(&mut inner);
            });
            if let Err(e) = spawned {
                inner.running -= 1;
                let run = inner.runs.get(&id).cloned();
                if let Some(run) = run {
                    let message = Some(format!("cannot start a thread for the run: {e}"));
                    self.publish(&run, EventBody::Status { status: RunStatus::Failed, message });
                }
            }
        }
    }

    /// Trains on this thread; every outcome ends in a final status.
    fn execute(self: &Arc<Self>, run: &Arc<Run>) {
        self.publish(run, EventBody::Status { status: RunStatus::Running, message: None });
        let (me, to) = (Arc::clone(self), Arc::clone(run));
        let watched = Arc::clone(run);
        let frames = FrameFeed {
            sink: Box::new(move |frame| me.publish(&to, EventBody::Rollout { frame })),
            gap: Box::new(move || match watched.live.receiver_count() {
                0 => FRAME_GAP_UNWATCHED,
                _ => FRAME_GAP_WATCHED,
            }),
        };
        let opts = TrainOptions {
            trace: Some(crate::profiler::TraceWindow { first: 0, end: 64 }),
            telemetry_sink: None,
            stop: Some(Arc::clone(&run.stop)),
            frames: Some(frames),
        };
        let mut observe = |m: &UpdateMetrics| {
            self.publish(run, EventBody::Metrics { metrics: m.point.clone() });
            self.publish(run, EventBody::Profile { profile: m.profile.clone() });
        };
        let outcome =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| train_with(&run.spec, opts, &mut observe)));
        let (status, message) = match outcome {
            Ok(Ok(trained)) => {
                let report = hotlab_shared::report::analyze(&trained.report.profile, &trained.report.config);
                self.publish(run, EventBody::Report { report });
                if let Some(trace) = &trained.trace {
                    self.store.add_blob(run.id, "trace", trace.to_string().into_bytes());
                }
                if let Ok(policy) = policy_json(&trained) {
                    self.store.add_blob(run.id, "policy", policy.into_bytes());
                }
                self.store.add_blob(run.id, "summary", serde_json::to_vec(&trained.report).unwrap_or_default());
                match run.stop.load(Ordering::Relaxed) {
                    true => (RunStatus::Stopped, None),
                    false => (RunStatus::Finished, None),
                }
            }
            Ok(Err(e)) => (RunStatus::Failed, Some(format!("{e:#}"))),
            Err(panic) => {
                let what = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "unknown".into());
                (RunStatus::Failed, Some(format!("internal error: {what}")))
            }
        };
        self.publish(run, EventBody::Status { status, message });
    }
}

/// The trained weights for the in-browser env: the shape and the flat parameters.
fn policy_json(trained: &crate::train::Trained) -> anyhow::Result<String> {
    let policy = &trained.policy;
    let layout: Vec<serde_json::Value> = policy
        .layout()
        .iter()
        .map(|s| serde_json::json!({"name": s.name, "shape": s.shape, "offset": s.offset}))
        .collect();
    let (env, shape, params) = (&trained.report.env, policy.shape(), policy.host_params());
    Ok(serde_json::json!({"env": env, "shape": shape, "layout": layout, "params": params}).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// Polls `done` for up to 30 s.
    fn eventually(what: &str, done: impl Fn() -> bool) {
        let start = Instant::now();
        while !done() {
            assert!(start.elapsed() < Duration::from_secs(30), "{what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn a_stopped_queued_run_leaves_memory_and_stays_in_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let manager = Manager::new(store.clone(), 1).unwrap();
        let long: RunSpec =
            serde_json::from_value(serde_json::json!({"envs": 8, "total_steps": 50_000_000, "device": "cpu"})).unwrap();
        let first = manager.launch(long.clone());
        let second = manager.launch(long);
        assert_eq!(manager.get(second).map(|r| r.info().status), Some(RunStatus::Queued), "one run at a time");
        assert!(manager.stop(second));
        eventually("the stopped queued run leaves memory", || manager.get(second).is_none());
        let stored = store.run(second).unwrap().expect("in the store");
        assert_eq!(stored.status, RunStatus::Stopped);
        assert!(manager.stop(first));
        eventually("the running run ends and leaves memory", || manager.get(first).is_none());
        assert_eq!(store.run(first).unwrap().map(|r| r.status), Some(RunStatus::Stopped));
    }
}
