//! The run manager: a queue, the machines' limits on concurrent runs ([`Machines`]), one
//! process per run (here, or on a worker: watched by one OS thread of the lab either way,
//! never the async runtime), stop flags, and each run's event log, published to the
//! store and to viewers.
//!
//! What a publish does is short and the same whoever watches: it takes the run's lock
//! for a push onto a window of at most [`WINDOW`] events (older ones are read from the
//! store) and queues the event for the store (which never waits). It wakes no one:
//! viewers look for new events at their own pace, holding the same lock only to copy
//! the new events' pointers. What is stored does not depend on viewers either: a
//! rollout frame is kept once a second ([`KEPT_FRAME_GAP`]), and viewers read the newest
//! frame from memory at their own rate.
//!
//! When the store cannot write (a full disk: [`Store::failure`]), the live runs are
//! stopped and end `failed` saying why (their history so far is kept; their ends wait in
//! the store's queue), queued runs wait, and new runs are refused; once the store writes
//! again, the queue moves on (`watch`).

use super::machines::Machines;
use super::store::{Logged, Resumable, Store};
use super::{ray, remote};
use crate::clock::now_ms;
use crate::wire::link::FileCopy;
use crate::wire::process::{self as run_process, FromRun};
use hotlab_protocol::{
    Event, EventBody, Frame, RayJob, RunInfo, RunStatus, RunSummary, LIVE_FRAME_SEQ, PROTOCOL_VERSION,
};
use hotlab_spec::RunSpec;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Events a live run keeps in memory; viewers read older ones from the store.
pub const WINDOW: usize = 4096;

/// The history keeps a rollout frame a second, however often the run takes them.
pub const KEPT_FRAME_GAP: Duration = Duration::from_secs(1);

/// One run of this server's life.
pub struct Run {
    pub id: u64,
    pub spec: RunSpec,
    pub created_ms: u64,
    /// Where it runs (a queued run placed by the lab moves when its worker is gone).
    place: Mutex<Place>,
    /// Whether its machine was named for it (a pinned run waits for its machine, or ends
    /// when that machine is gone past the grace period).
    pinned: bool,
    stop: Arc<AtomicBool>,
    state: Mutex<RunState>,
    /// The newest rollout frame (kept or not), for viewers at their own rate.
    /// The newest rollout frame, with the log's last seq when it came (see [`Run::frame`]).
    frame: Mutex<Option<(Arc<Logged>, u64)>>,
    /// Nanoseconds the run's trainer has spent handing out events (its process says).
    publish_ns: AtomicU64,
    /// Viewers following the run now (frames are taken more often while there are any).
    viewers: AtomicUsize,
    /// Its Ray job, on a lab with `--ray`.
    ray_job: Mutex<Option<RayJob>>,
    /// Why the lab stopped it (its end is then `failed`, saying so).
    failed_by: Mutex<Option<String>>,
}

/// A run's machine, and whether that is a worker.
#[derive(Clone)]
struct Place {
    machine: String,
    remote: bool,
}

struct RunState {
    /// The newest events, at most [`WINDOW`].
    window: VecDeque<Arc<Logged>>,
    /// The last event's `seq`.
    last_seq: u64,
    summary: RunSummary,
    last_kept_frame: Option<Instant>,
}

/// What a viewer gets from [`Run::follow`].
pub struct Following {
    /// Events after `since` that have left memory (`since` to the `seq` before the
    /// window): read them from the store.
    pub stored: Option<(u64, u64)>,
    /// Events after `since` still in memory.
    pub recent: Vec<Arc<Logged>>,
    /// Whether the run had ended when these were read.
    pub over: bool,
}

/// A viewer counted while it follows a run.
pub struct Watching(Arc<Run>);

impl Drop for Watching {
    fn drop(&mut self) {
        self.0.viewers.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Run {
    fn state(&self) -> MutexGuard<'_, RunState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The run's info alone (the run list asks for it every few seconds: no profile or
    /// report is copied for it).
    pub fn info(&self) -> RunInfo {
        let info = self.state().summary.info.clone();
        let publish_s = Some(self.publish_ns.load(Ordering::Relaxed) as f64 * 1e-9);
        let ray_job = self.ray_job.lock().unwrap_or_else(|p| p.into_inner()).clone();
        RunInfo { spec: self.spec.clone(), publish_s, machine: Some(self.machine()), ray_job, ..info }
    }

    /// The machine it runs (or waits) on.
    pub fn machine(&self) -> String {
        self.place().machine
    }

    fn place(&self) -> Place {
        self.place.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The run's totals so far, kept as it goes (no event is re-read).
    pub fn summary(&self) -> RunSummary {
        let summary = self.state().summary.clone();
        RunSummary { info: self.info(), ..summary }
    }

    /// The events after `since`: those still in memory, and the range to read from the store.
    pub fn follow(&self, since: u64) -> Following {
        let s = self.state();
        let first = s.window.front().map_or(s.last_seq + 1, |e| e.seq);
        let stored = (since + 1 < first).then_some((since, first - 1));
        let skip = s.window.partition_point(|e| e.seq <= since);
        let recent = s.window.range(skip..).cloned().collect();
        Following { stored, recent, over: s.summary.info.status.is_final() }
    }

    /// Counts a viewer until the guard is dropped.
    pub fn watch(self: &Arc<Self>) -> Watching {
        self.viewers.fetch_add(1, Ordering::Relaxed);
        Watching(Arc::clone(self))
    }

    /// The newest rollout frame, if any, with the log's last seq when it came: every frame
    /// kept in the log up to that seq is this one or older (a viewer shown it needs none of
    /// them).
    pub fn frame(&self) -> Option<(Arc<Logged>, u64)> {
        self.frame.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// All runs, the queue and the limit.
pub struct Manager {
    store: Store,
    machines: Arc<Machines>,
    /// Where runs placed on the machine `ray` go (`--ray`).
    ray: Option<ray::RayConfig>,
    /// Rollout frames a finished run keeps per minute of its wall time.
    frames_per_minute: f64,
    /// The `hotlab` binary each run's process runs.
    processes: run_process::RunProcesses,
    inner: Mutex<Inner>,
    /// Summaries of runs that are over, read from the store once.
    summaries: Mutex<SummaryCache>,
}

/// The newest [`SUMMARIES`] summaries of ended runs.
#[derive(Default)]
struct SummaryCache {
    by_id: HashMap<u64, Arc<RunSummary>>,
    order: VecDeque<u64>,
}

/// Ended runs' summaries kept in memory.
const SUMMARIES: usize = 256;

struct Inner {
    next_id: u64,
    runs: HashMap<u64, Arc<Run>>,
    queue: VecDeque<u64>,
}

impl Inner {
    fn queued_per_machine(&self) -> HashMap<String, usize> {
        let mut queued = HashMap::new();
        for run in self.queue.iter().filter_map(|id| self.runs.get(id)) {
            *queued.entry(run.machine()).or_default() += 1;
        }
        queued
    }

    fn queued(&self) -> Vec<Arc<Run>> {
        self.queue.iter().filter_map(|id| self.runs.get(id).cloned()).collect()
    }
}

impl Manager {
    /// The manager, going on with the remote runs a previous life of the lab left live
    /// (their workers may still train them: each waits for its worker for the grace period).
    pub fn new(
        store: Store,
        machines: Arc<Machines>,
        ray: Option<ray::RayConfig>,
        frames_per_minute: f64,
        processes: run_process::RunProcesses,
    ) -> anyhow::Result<Arc<Self>> {
        let next_id = store.last_id()? + 1;
        let inner = Inner { next_id, runs: HashMap::new(), queue: VecDeque::new() };
        let resumable = store.resumable()?;
        let me = Arc::new(Self {
            store,
            machines,
            ray,
            frames_per_minute,
            processes,
            inner: Mutex::new(inner),
            summaries: Mutex::default(),
        });
        for r in resumable {
            me.resume(r)?;
        }
        watch(Arc::downgrade(&me));
        Ok(me)
    }

    /// Stops every running run, which then ends `failed` with `why`.
    fn fail_live(&self, why: &str) {
        let runs: Vec<Arc<Run>> = self.inner.lock().expect("manager").runs.values().cloned().collect();
        for run in runs.iter().filter(|r| r.state().summary.info.status == RunStatus::Running) {
            tracing::warn!("run {} is stopped: {why}", run.id);
            *run.failed_by.lock().unwrap_or_else(|p| p.into_inner()) = Some(why.to_string());
            run.stop.store(true, Ordering::Relaxed);
        }
    }

    /// Takes back a remote run the store says was live: queued again, or followed on
    /// its worker from the last message the store holds.
    fn resume(self: &Arc<Self>, r: Resumable) -> anyhow::Result<()> {
        let Resumable { info, worker_n, worker_seq } = r;
        let machine = info.machine.clone().unwrap_or_default();
        self.machines.expect(&machine);
        let summary = self.store.summary(info.id)?.unwrap_or_default();
        let ray_job = info.ray_job.clone();
        let running = info.status == RunStatus::Running;
        // Viewers may have seen events the store lost: new ones are numbered past them.
        let last_seq = match running {
            true => info.events.max(worker_seq) + super::store::SEQ_GAP_AFTER_CRASH,
            false => info.events,
        };
        let run = Arc::new(Run {
            id: info.id,
            spec: info.spec.clone(),
            created_ms: info.created_ms,
            place: Mutex::new(Place { machine: machine.clone(), remote: true }),
            pinned: true,
            stop: Arc::new(AtomicBool::new(false)),
            state: Mutex::new(RunState {
                window: VecDeque::new(),
                last_seq,
                summary: RunSummary { info, ..summary },
                last_kept_frame: None,
            }),
            frame: Mutex::new(None),
            publish_ns: AtomicU64::new(0),
            viewers: AtomicUsize::new(0),
            ray_job: Mutex::new(ray_job),
            failed_by: Mutex::new(None),
        });
        let mut inner = self.inner.lock().expect("manager");
        inner.runs.insert(run.id, Arc::clone(&run));
        if !running {
            inner.queue.push_back(run.id);
            return Ok(());
        }
        self.machines.take_resumed(&machine);
        tracing::info!("run {} goes on with its worker '{machine}' (from its message {worker_n})", run.id);
        // Open before the lab takes connections: a worker's hello that came first would
        // find no route, and the run would wait on it for ever.
        let worker = self.worker_of(&run);
        let route = self.machines.open_route(run.id, &worker, run.spec.clone(), Vec::new(), worker_n);
        self.spawn_run(&mut inner, run, Some((worker_n, route)));
        Ok(())
    }

    /// A run's summary: a live one's from memory, an ended one's from the store (read
    /// once, then cached). Blocks on the store: call it off the async runtime.
    pub fn summary(&self, id: u64) -> anyhow::Result<Option<Arc<RunSummary>>> {
        if let Some(run) = self.get(id) {
            let mut summary = run.summary();
            summary.info.dropped = self.store.dropped(id);
            return Ok(Some(Arc::new(summary)));
        }
        if let Some(s) = self.summaries.lock().expect("summaries").by_id.get(&id) {
            return Ok(Some(Arc::clone(s)));
        }
        let Some(summary) = self.store.summary(id)?.map(Arc::new) else { return Ok(None) };
        if summary.info.status.is_final() {
            let mut cache = self.summaries.lock().expect("summaries");
            if cache.order.len() == SUMMARIES {
                let oldest = cache.order.pop_front();
                oldest.map(|o| cache.by_id.remove(&o));
            }
            cache.order.push_back(id);
            cache.by_id.insert(id, Arc::clone(&summary));
        }
        Ok(Some(summary))
    }

    /// Deletes ended runs created before `before_ms`; returns their ids.
    pub fn prune(&self, before_ms: u64) -> Vec<u64> {
        let live: Vec<u64> = self.inner.lock().expect("manager").runs.keys().copied().collect();
        let pruned = self.store.prune(before_ms, live);
        let mut cache = self.summaries.lock().expect("summaries");
        let SummaryCache { by_id, order } = &mut *cache;
        for id in &pruned {
            by_id.remove(id);
        }
        order.retain(|id| by_id.contains_key(id));
        pruned
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn machines(&self) -> &Arc<Machines> {
        &self.machines
    }

    /// Runs waiting, per machine.
    pub fn queued_per_machine(&self) -> HashMap<String, usize> {
        self.inner.lock().expect("manager").queued_per_machine()
    }

    /// The machine a run (live or stored) ran on.
    pub fn machine_of(&self, id: u64) -> Option<String> {
        match self.get(id) {
            Some(run) => Some(run.machine()),
            None => self.store.run(id).ok().flatten()?.machine,
        }
    }

    /// Starts what can start now (a machine connected or freed a place).
    pub fn kick(self: &Arc<Self>) {
        let mut inner = self.inner.lock().expect("manager");
        self.start_queued(&mut inner);
    }

    /// A run of this server's life.
    pub fn get(&self, id: u64) -> Option<Arc<Run>> {
        self.inner.lock().expect("manager").runs.get(&id).cloned()
    }

    /// The runs held in memory (queued, running, or just ended).
    pub fn infos(&self) -> Vec<RunInfo> {
        let runs: Vec<Arc<Run>> = self.inner.lock().expect("manager").runs.values().cloned().collect();
        runs.iter().map(|r| self.info(r)).collect()
    }

    /// A live run's info with the store's drop count.
    pub fn info(&self, run: &Run) -> RunInfo {
        RunInfo { dropped: self.store.dropped(run.id), ..run.info() }
    }

    /// Queues a validated spec for `machine` (see [`Machines::choose`]), `pinned` when the
    /// launch named it; returns its id.
    pub fn launch(self: &Arc<Self>, spec: RunSpec, machine: String, pinned: bool) -> u64 {
        let remote = !self.machines.is_local(&machine);
        let mut inner = self.inner.lock().expect("manager");
        let id = inner.next_id;
        inner.next_id += 1;
        let created_ms = now_ms();
        let info = RunInfo { id, created_ms, machine: Some(machine.clone()), ..RunInfo::default() };
        let run = Arc::new(Run {
            id,
            spec,
            created_ms,
            place: Mutex::new(Place { machine: machine.clone(), remote }),
            pinned,
            stop: Arc::new(AtomicBool::new(false)),
            state: Mutex::new(RunState {
                window: VecDeque::new(),
                last_seq: 0,
                summary: RunSummary { info, ..RunSummary::default() },
                last_kept_frame: None,
            }),
            frame: Mutex::new(None),
            publish_ns: AtomicU64::new(0),
            viewers: AtomicUsize::new(0),
            ray_job: Mutex::new(None),
            failed_by: Mutex::new(None),
        });
        self.store.add_run(id, run.created_ms, &run.spec, &machine, remote);
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
        let status = run.state().summary.info.status;
        match status {
            RunStatus::Queued => {
                inner.queue.retain(|&q| q != id);
                self.publish(&run, EventBody::Status { status: RunStatus::Stopped, message: None });
                self.forget_once_stored(id);
                true
            }
            RunStatus::Running => {
                run.stop.store(true, Ordering::Relaxed);
                true
            }
            _ => false,
        }
    }

    /// A queued run that will never run: once the store holds its end, it leaves memory,
    /// as an ended run does (off this thread: the commit takes up to a flush).
    fn forget_once_stored(self: &Arc<Self>, id: u64) {
        let me = Arc::clone(self);
        let _ = std::thread::Builder::new().name(format!("hotlab-drop-{id}")).spawn(move || {
            me.store.flush();
            me.inner.lock().expect("manager").runs.remove(&id);
        });
    }

    /// Queued runs whose worker has been away past the grace period move on: one the lab
    /// placed goes to another connected machine with its device (a queued status says
    /// so; with none, it waits for one), one whose machine was named ends `interrupted`.
    fn move_from_gone_machines(self: &Arc<Self>) {
        let mut inner = self.inner.lock().expect("manager");
        let mut moved = false;
        for run in inner.queued() {
            let machine = run.machine();
            let Some(away) = self.machines.away_for(&machine).filter(|a| *a > self.machines.grace) else { continue };
            let gone = format!(
                "the worker '{machine}' has been away for {:.0} s (the grace period is {:.0} s)",
                away.as_secs_f64(),
                self.machines.grace.as_secs_f64()
            );
            if run.pinned {
                inner.queue.retain(|&q| q != run.id);
                let message = Some(format!("{gone}; the run was queued for it and did not start"));
                self.publish(&run, EventBody::Status { status: RunStatus::Interrupted, message });
                self.forget_once_stored(run.id);
                continue;
            }
            let counts = inner.queued_per_machine();
            let Ok(other) = self.machines.choose(None, &run.spec.device, &counts) else { continue };
            if other == machine {
                continue;
            }
            let remote = !self.machines.is_local(&other);
            *run.place.lock().unwrap_or_else(|p| p.into_inner()) = Place { machine: other.clone(), remote };
            self.store.set_machine(run.id, &other, remote);
            let message = Some(format!("{gone}: moved to '{other}'"));
            self.publish(&run, EventBody::Status { status: RunStatus::Queued, message });
            moved = true;
        }
        if moved {
            self.start_queued(&mut inner);
        }
    }

    /// Appends an event to the run's log and the store.
    fn publish(&self, run: &Run, body: EventBody) {
        let mut s = run.state();
        self.append(run, &mut s, body);
    }

    fn append(&self, run: &Run, s: &mut RunState, body: EventBody) -> Arc<Logged> {
        let info = &mut s.summary.info;
        match &body {
            EventBody::Status { status, message } => {
                info.status = *status;
                info.message = message.clone();
            }
            EventBody::Metrics { metrics } => info.sps = Some(metrics.sps),
            _ => {}
        }
        s.summary.add(&body);
        s.last_seq += 1;
        s.summary.info.events = s.last_seq;
        let e = Logged::new(Event { v: PROTOCOL_VERSION, run: run.id, seq: s.last_seq, body });
        self.store.add_event(&e);
        if s.window.len() == WINDOW {
            s.window.pop_front();
        }
        s.window.push_back(Arc::clone(&e));
        e
    }

    /// A rollout frame: the newest for viewers; kept in the history once a second.
    fn publish_frame(&self, run: &Run, frame: Frame) {
        let body = EventBody::Rollout { frame };
        let mut s = run.state();
        let keep = s.last_kept_frame.is_none_or(|t| t.elapsed() >= KEPT_FRAME_GAP);
        let logged = match keep {
            true => {
                s.last_kept_frame = Some(Instant::now());
                self.append(run, &mut s, body)
            }
            false => Logged::new(Event { v: PROTOCOL_VERSION, run: run.id, seq: LIVE_FRAME_SEQ, body }),
        };
        let upto = s.last_seq;
        drop(s);
        *run.frame.lock().unwrap_or_else(|p| p.into_inner()) = Some((logged, upto));
    }

    /// Starts every queued run whose machine has a place now, in queue order (none while
    /// the store cannot write).
    fn start_queued(self: &Arc<Self>, inner: &mut Inner) {
        if self.store.failure().is_some() {
            return;
        }
        let mut i = 0;
        while i < inner.queue.len() {
            let Some(run) = inner.runs.get(&inner.queue[i]).cloned() else {
                inner.queue.remove(i);
                continue;
            };
            if !self.machines.try_take(&run.machine()) {
                i += 1;
                continue;
            }
            inner.queue.remove(i);
            self.spawn_run(inner, run, None);
        }
    }

    /// A thread that follows the run (which holds a place on its machine) to its end;
    /// `resume` goes on with a remote run from its worker's message `n`, on its open route.
    fn spawn_run(self: &Arc<Self>, inner: &mut Inner, run: Arc<Run>, resume: Option<Resumed>) {
        let (me, id, for_thread) = (Arc::clone(self), run.id, Arc::clone(&run));
        let spawned = std::thread::Builder::new().name(format!("hotlab-run-{id}")).spawn(move || {
            me.execute(&for_thread, resume);
            me.machines.release(&for_thread.machine());
            // Once the store holds all of it, the run is read from there (viewers
            // still streaming keep their own reference).
            me.store.flush();
            me.store.forget(id);
            let mut inner = me.inner.lock().expect("manager");
            inner.runs.remove(&id);
            me.start_queued(&mut inner);
        });
        if let Err(e) = spawned {
            self.machines.release(&run.machine());
            let message = Some(format!("cannot start a thread to watch the run: {e}"));
            self.publish(&run, EventBody::Status { status: RunStatus::Failed, message });
            inner.runs.remove(&id);
        }
    }

    /// Trains in a process of its own (here, see [`crate::wire::process`], or on its worker, see
    /// [`remote`]), publishing what it says; every outcome, its process's death or its
    /// worker's absence included, ends in a final status.
    fn execute(self: &Arc<Self>, run: &Arc<Run>, resume: Option<Resumed>) {
        if resume.is_none() {
            self.publish(run, EventBody::Status { status: RunStatus::Running, message: None });
        }
        let watched = Arc::clone(run);
        let control = run_process::Control {
            stop: Arc::clone(&run.stop),
            watched: Box::new(move || watched.viewers.load(Ordering::Relaxed) > 0),
        };
        let publish_time = |seconds: f64| run.publish_ns.store((seconds * 1e9) as u64, Ordering::Relaxed);
        let mut on = |msg: FromRun| match msg {
            FromRun::Update { metrics, profile, publish_s } => {
                self.publish(run, EventBody::Metrics { metrics });
                self.publish(run, EventBody::Profile { profile });
                publish_time(publish_s);
            }
            FromRun::Event(EventBody::Rollout { frame }) => self.publish_frame(run, frame),
            FromRun::Event(body) => self.publish(run, body),
            FromRun::Blob { name, body } => {
                if let Some(name) = BLOBS.into_iter().find(|b| *b == name) {
                    self.store.add_blob(run.id, name, body.into_bytes());
                }
            }
            FromRun::End { publish_s, .. } => publish_time(publish_s),
        };
        let mut last_message = None;
        let (status, message) = match run.place().remote {
            false => self
                .processes
                .run(&format!("run-{}", run.id), &run.spec, control, &mut on)
                .unwrap_or_else(|e| (RunStatus::Failed, Some(format!("{e:#}")))),
            true => self.execute_remote(run, resume, control, &mut on, &mut last_message).unwrap_or_else(|e| {
                // A resumed run's route is open already.
                self.machines.close_route(run.id);
                (RunStatus::Failed, Some(format!("{e:#}")))
            }),
        };
        if run.place().remote {
            slow_end();
        }
        let failed_by = run.failed_by.lock().unwrap_or_else(|p| p.into_inner()).take();
        let (status, message) = match failed_by {
            // Stopped for it (a run that ended by itself meanwhile keeps its own end).
            Some(why) if status == RunStatus::Stopped => {
                (RunStatus::Failed, Some(format!("stopped by the lab: its run store cannot write: {why}")))
            }
            _ => (status, message),
        };
        self.publish(run, EventBody::Status { status, message });
        if let Some((worker, n)) = last_message {
            // Only now: a worker drops what is acknowledged, and the final status is
            // queued behind it, so a lab killed now still finds the run ended.
            self.ack_last(&worker, run.id, n);
        }
        self.store.add_publish_time(run.id, run.publish_ns.load(Ordering::Relaxed) as f64 * 1e-9);
        let wall_s = run.state().summary.last.as_ref().map_or(0.0, |m| m.wall_s);
        self.store.thin_frames(run.id, wall_s, self.frames_per_minute);
    }
}

impl Manager {
    /// A run on a worker, or on Ray (through a worker of its own, started as a Ray job).
    /// `last_message` gets its worker and the number of the last message it sent, to
    /// acknowledge once the final status is published.
    fn execute_remote(
        &self,
        run: &Arc<Run>,
        resume: Option<Resumed>,
        control: run_process::Control,
        on: &mut dyn FnMut(FromRun),
        last_message: &mut Option<(String, u64)>,
    ) -> anyhow::Result<(RunStatus, Option<String>)> {
        let resumed = resume.is_some();
        let from = match resume {
            Some((n, route)) => remote::From::Resume(n, route),
            None => remote::From::Start(files_of(&run.spec)?),
        };
        // The mark follows the message's events into the store (see `Write::WorkerMark`).
        self.store.mark_worker(run.id, 0, run.state().last_seq);
        let mut last = 0;
        let mut publish = |n: u64, msg: FromRun| {
            // The end is neither marked nor acknowledged with the others: the run's final
            // status comes after it, and a lab that dies before that is stored must have
            // the end resent (the worker drops what is acknowledged).
            let end = matches!(msg, FromRun::End { .. });
            on(msg);
            if !end {
                self.store.mark_worker(run.id, n, run.state().last_seq);
                self.machines.published(run.id, n);
            }
            last = n;
        };
        let machine = run.machine();
        if !self.machines.is_ray(&machine) {
            let mut grace = remote::grace(&self.machines, &machine);
            let at = remote::Placed { machines: &self.machines, machine: &machine, run: run.id };
            let end = remote::run(at, &run.spec, from, control, &mut publish, &mut grace);
            *last_message = Some((machine.clone(), last));
            return Ok(end);
        }
        let ray =
            self.ray.as_ref().ok_or_else(|| anyhow::anyhow!("this lab has no Ray head now (serve it with --ray)"))?;
        let worker = self.worker_of(run);
        let known = run.ray_job.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let job = match (resumed, known) {
            (true, Some(job)) => job.id,
            (true, None) => anyhow::bail!("the lab restarted before this run's Ray job was submitted"),
            (false, _) => {
                let id = format!("hotlab-run-{}-{}", run.id, run.created_ms);
                let submitted = ray.head.submit(&ray.submission(&id, run.id, &worker, &run.spec.device));
                let job = submitted.map_err(|e| anyhow::anyhow!("Ray: {e:#}"))?;
                self.set_ray_job(run, RayJob { id: job.clone(), status: "PENDING".into() });
                job
            }
        };
        let on_state = |state: &ray::JobState| {
            let changed =
                run.ray_job.lock().unwrap_or_else(|p| p.into_inner()).as_ref().is_none_or(|j| j.status != state.status);
            if changed {
                self.set_ray_job(run, RayJob { id: job.clone(), status: state.status.clone() });
            }
        };
        let mut watch = ray::JobWatch::new(&ray.head, job.clone(), &self.machines, &worker, &on_state);
        let mut watchdog = |stop: bool| watch.check(stop);
        let at = remote::Placed { machines: &self.machines, machine: &worker, run: run.id };
        let end = remote::run(at, &run.spec, from, control, &mut publish, &mut watchdog);
        *last_message = Some((worker, last));
        self.follow_job_to_its_end(run, ray.head.clone(), job);
        Ok(end)
    }

    /// The worker a remote run's messages come from: its machine's, or on Ray, one of its own.
    fn worker_of(&self, run: &Run) -> String {
        let machine = run.machine();
        match self.machines.is_ray(&machine) {
            true => format!("ray-run-{}", run.id),
            false => machine,
        }
    }

    /// The run has ended: once the store has its last messages, its worker may drop them
    /// (a `--once` worker then ends).
    fn ack_last(&self, worker: &str, run: u64, n: u64) {
        if n > 0 {
            self.store.flush();
            self.machines.send(worker, crate::wire::link::ToWorker::Ack { run, n });
        }
    }

    /// A run's job outlives it by a moment (its worker hands over the last messages, then
    /// exits): its final state is kept when it comes (asked for a minute at most).
    fn follow_job_to_its_end(&self, run: &Arc<Run>, head: ray::Head, job: String) {
        let (store, run) = (self.store.clone(), Arc::clone(run));
        let _ = std::thread::Builder::new().name(format!("hotlab-ray-{}", run.id)).spawn(move || {
            let until = Instant::now() + Duration::from_secs(60);
            while Instant::now() < until {
                if let Ok(state) = head.state(&job).inspect_err(|e| tracing::debug!("Ray job {job}: {e:#}")) {
                    if state.is_final() {
                        let final_state = RayJob { id: job.clone(), status: state.status };
                        store.set_ray_job(run.id, &final_state);
                        *run.ray_job.lock().unwrap_or_else(|p| p.into_inner()) = Some(final_state);
                        return;
                    }
                }
                std::thread::sleep(Duration::from_millis(500));
            }
        });
    }

    fn set_ray_job(&self, run: &Run, job: RayJob) {
        self.store.set_ray_job(run.id, &job);
        *run.ray_job.lock().unwrap_or_else(|p| p.into_inner()) = Some(job);
    }
}

/// How often the lab looks at its store's health and its workers' absences.
const LOOK: Duration = Duration::from_millis(250);

/// Follows the store's health and the workers' absences while the manager lives: when
/// the store's commits start failing, the live runs are stopped (each ends `failed`,
/// saying why); when it writes again, the queue moves on; queued runs whose worker is
/// gone move on too ([`Manager::move_from_gone_machines`]).
fn watch(manager: std::sync::Weak<Manager>) {
    let _ = std::thread::Builder::new().name("hotlab-watch".into()).spawn(move || {
        let mut failing = false;
        loop {
            std::thread::sleep(LOOK);
            let Some(me) = manager.upgrade() else { return };
            me.move_from_gone_machines();
            match (me.store.failure(), failing) {
                (Some(why), false) => {
                    failing = true;
                    me.fail_live(&why);
                }
                (None, true) => {
                    failing = false;
                    me.kick();
                }
                _ => {}
            }
        }
    });
}

/// A remote run taken back after a restart: its worker's last stored message, and its
/// route (opened already).
type Resumed = (u64, remote::Route);

/// A deliberately slow end: `HOTLAB_SLOW_END_MS` milliseconds between a remote run's last
/// message and its final status (tests kill the lab in that window); unset, nothing.
fn slow_end() {
    if let Some(ms) = std::env::var("HOTLAB_SLOW_END_MS").ok().and_then(|v| v.parse::<u64>().ok()) {
        std::thread::sleep(Duration::from_millis(ms.min(60_000)));
    }
}

/// The files a remote run's spec names (inside the lab's data dir), to send with it.
fn files_of(spec: &RunSpec) -> anyhow::Result<Vec<FileCopy>> {
    let mut spec = spec.clone();
    let files = spec.workload.files();
    files
        .into_iter()
        .map(|(field, path)| {
            let body = std::fs::read_to_string(&*path).map_err(|e| anyhow::anyhow!("{field}: reading {path}: {e}"))?;
            Ok(FileCopy { field: field.to_string(), body })
        })
        .collect()
}

/// The outputs a run may leave (`GET /api/runs/{id}/trace`, `/policy`; the summary).
const BLOBS: [&str; 3] = ["trace", "policy", "summary"];

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 41: a live run keeps at most [`WINDOW`] events in memory however many it
    /// publishes (the newest, in order), and the store keeps every one.
    #[test]
    fn a_live_runs_window_stays_within_its_limit_and_the_store_keeps_every_event() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        // A machine that is not there: the run stays queued, and this test publishes for it.
        let machines = Arc::new(Machines::new(Duration::from_secs(60)));
        let processes = run_process::RunProcesses { exe: "/nonexistent/hotlab".into(), memory: None };
        let manager = Manager::new(store, machines, None, 60.0, processes).unwrap();
        let id = manager.launch(RunSpec::default(), "away".into(), true);
        let run = manager.get(id).expect("a queued run");
        let published = 3 * WINDOW + 17;
        for i in 0..published {
            let message = Some(format!("event {i}"));
            manager.publish(&run, EventBody::Status { status: RunStatus::Queued, message });
            let s = run.state();
            assert!(s.window.len() <= WINDOW, "{} events in memory after {i}", s.window.len());
        }
        let last = (published + 1) as u64; // and the launch's own status
        let seqs: Vec<u64> = run.state().window.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, ((last - WINDOW as u64 + 1)..=last).collect::<Vec<_>>(), "the newest, in order");
        manager.store.flush();
        let stored = manager.store.events(id, 0, u64::MAX, None, usize::MAX).unwrap();
        assert_eq!(stored.len() as u64, last, "the store keeps every event");
    }
}
