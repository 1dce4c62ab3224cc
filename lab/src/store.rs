//! The run history in SQLite (`<data dir>/hotlab.sqlite`): runs, their events, blobs
//! (the trace, the trained policy) and audits (each one row, its JSON replaced as it goes).
//!
//! One writer thread owns the writing connection and commits what arrived in one
//! transaction every [`FLUSH`] at most (at once when half the queue waits), so a trainer
//! never waits on the disk and a crash loses at most about that much. Readers open their own connections (WAL mode lets
//! them read while the writer writes).
//!
//! The queue to the writer is bounded ([`QUEUE`] writes) and never blocks: when it is
//! full, a new rollout frame replaces the run's newest queued one, a metric pushes out
//! the oldest queued frame, and only when no frame is left is a metric dropped. Every
//! drop is counted per run (`RunInfo.dropped`). Runs, statuses, reports and blobs are
//! always queued. A worker's messages do wait ([`Store::behind`]): the lab reads no more
//! from its connection while the writer is behind (the messages on their way to the queue
//! counted), and the worker keeps what it has not had acknowledged, so a backlog sent
//! after an outage is stored whole. `HOTLAB_STORE_QUEUE` sets a smaller queue for tests.
//!
//! A commit that fails (a full disk, a database another process holds locked past the
//! busy wait) loses nothing it was given: the writes go back to the head of the queue and
//! the writer tries again every [`RETRY`], while [`Store::health`] says `failing` and why
//! (the lab then stops its live runs and takes no new ones: see `runs.rs`). Readers are
//! not affected: they read what was committed. Nothing waits on the writer unboundedly on
//! a request's path: handlers flush with [`Store::flush_within`].

use anyhow::{Context, Result};
use axum::extract::ws::Utf8Bytes;
use hotlab_protocol::sweep::SweepInfo;
use hotlab_protocol::system::{StoreHealth, StoreState};
use hotlab_protocol::{AuditInfo, Event, EventBody, RayJob, RunInfo, RunStatus, RunSummary, PROTOCOL_VERSION};
use hotlab_spec::RunSpec;
use rusqlite::{params, Connection, OptionalExtension};
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// The longest a write waits before it is committed.
pub const FLUSH: Duration = Duration::from_millis(250);

/// Writes waiting for the writer, at most (status events, reports and blobs go past it).
pub const QUEUE: usize = 8192;

/// The longest the writer waits for a lock another process holds (`hotlab prune`, a
/// backup) before its commit counts as failed.
const BUSY_WAIT: Duration = Duration::from_secs(30);

/// How often a failing store tries its commit again.
pub const RETRY: Duration = Duration::from_secs(1);

/// A commit under way this long makes the store `slow` in [`Store::health`].
pub const SLOW: Duration = Duration::from_secs(2);

const SCHEMA: &str = "
PRAGMA journal_mode = WAL;
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,
    created_ms INTEGER NOT NULL,
    spec TEXT NOT NULL,
    status TEXT NOT NULL,
    message TEXT,
    events INTEGER NOT NULL DEFAULT 0,
    sps REAL
);
CREATE TABLE IF NOT EXISTS events (
    run INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (run, seq)
);
CREATE TABLE IF NOT EXISTS audits (
    id INTEGER PRIMARY KEY,
    created_ms INTEGER NOT NULL,
    run INTEGER,
    lesson TEXT,
    status TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS sweeps (
    id INTEGER PRIMARY KEY,
    created_ms INTEGER NOT NULL,
    status TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS blobs (
    run INTEGER NOT NULL,
    name TEXT NOT NULL,
    body BLOB NOT NULL,
    PRIMARY KEY (run, name)
);
";

/// Columns added since the first schema (a store written by an earlier version gets them).
const ADDED_COLUMNS: &[(&str, &str)] = &[
    ("dropped", "INTEGER NOT NULL DEFAULT 0"),
    ("publish_s", "REAL"),
    ("machine", "TEXT"),
    // A run on a worker: it outlives a restart of the lab (the worker still trains it).
    ("remote", "INTEGER NOT NULL DEFAULT 0"),
    // The last message of a remote run's worker whose events are all stored, and the
    // last event `seq` they make up (see [`Write::WorkerMark`]).
    ("worker_n", "INTEGER NOT NULL DEFAULT 0"),
    ("worker_seq", "INTEGER NOT NULL DEFAULT 0"),
    // A run's Ray job (`RayJob` as JSON), on a lab with `--ray`.
    ("ray_job", "TEXT"),
];

/// An event and its JSON text, serialized once for the store and every viewer.
#[derive(Debug)]
pub struct Logged {
    pub run: u64,
    pub seq: u64,
    /// The event's `kind` ([`EventBody::kind`]).
    pub kind: &'static str,
    /// The event itself, for those this server made; one read back from the store is
    /// text only (parsing every event of a long history for a reader would cost more
    /// than the reading).
    pub event: Option<Event>,
    /// Shared, not copied, by every WebSocket message that carries it.
    pub json: Utf8Bytes,
}

/// Every `kind` of event.
const KINDS: [&str; 5] = ["status", "metrics", "profile", "report", "rollout"];

impl Logged {
    pub fn new(event: Event) -> Arc<Self> {
        let json = serde_json::to_string(&event).unwrap_or_default().into();
        Arc::new(Self { run: event.run, seq: event.seq, kind: event.body.kind(), event: Some(event), json })
    }

    pub fn is_frame(&self) -> bool {
        self.kind == "rollout"
    }

    /// What the history can do without when the store falls behind.
    fn is_sheddable(&self) -> bool {
        matches!(self.kind, "rollout" | "metrics" | "profile")
    }
}

/// What the writer thread is asked to do.
enum Write {
    Run {
        id: u64,
        created_ms: u64,
        spec: String,
        machine: String,
        remote: bool,
    },
    /// A remote run's worker messages up to `n` are all in events up to `seq`. Queued
    /// after those events, so a crash leaves the mark at or before what is stored; the
    /// events a restart finds past the mark are deleted, and the worker resends them.
    WorkerMark {
        run: u64,
        n: u64,
        seq: u64,
    },
    /// A queued run moved to another machine.
    Machine {
        run: u64,
        machine: String,
        remote: bool,
    },
    /// A run's Ray job as the head last said.
    RayJob {
        run: u64,
        job: String,
    },
    Event(Arc<Logged>),
    Blob {
        run: u64,
        name: &'static str,
        body: Vec<u8>,
    },
    /// The trainer's publishing time, at the end of a run.
    PublishTime {
        run: u64,
        seconds: f64,
    },
    /// Keeps `keep` of a run's frames.
    Thin {
        run: u64,
        keep: usize,
    },
    /// Deletes runs; answers with their ids.
    Prune {
        before_ms: u64,
        live: Vec<u64>,
        done: std::sync::mpsc::Sender<Vec<u64>>,
    },
    /// An audit as it is now (replacing what was stored of it).
    Audit(Box<AuditInfo>),
    /// A sweep as it is now (replacing what was stored of it).
    Sweep(Box<SweepInfo>),
    /// Answers once everything sent before it is committed.
    Flush(std::sync::mpsc::Sender<()>),
}

impl Write {
    fn frame_of(&self) -> Option<u64> {
        match self {
            Write::Event(e) if e.is_frame() => Some(e.run),
            _ => None,
        }
    }
}

/// The writes waiting for the writer thread, and the drops not yet recorded.
#[derive(Default)]
struct Pending {
    writes: VecDeque<Write>,
    flushes: usize,
    /// Drops per run since the last commit (the writer adds them to `runs.dropped`).
    dropped: HashMap<u64, u64>,
    /// Drops per run of this server's life (for live runs' info).
    dropped_total: HashMap<u64, u64>,
    /// Drops of this server's life, all runs.
    shed: u64,
    /// Why the last commit failed, while commits fail.
    failure: Option<String>,
    /// When the commit under way began.
    committing: Option<Instant>,
    closed: bool,
}

impl Pending {
    fn drop_one(&mut self, run: u64) {
        *self.dropped.entry(run).or_default() += 1;
        *self.dropped_total.entry(run).or_default() += 1;
        self.shed += 1;
    }

    /// Queues `w` under the rules in the module docs.
    fn push(&mut self, w: Write, capacity: usize) {
        let sheddable = match &w {
            Write::Event(e) => e.is_sheddable().then_some(e.run),
            _ => None,
        };
        let Some(run) = sheddable.filter(|_| self.writes.len() >= capacity) else {
            self.flushes += matches!(w, Write::Flush(_)) as usize;
            self.writes.push_back(w);
            return;
        };
        if w.frame_of().is_some() {
            // The newer frame takes the older one's place.
            if let Some(i) = self.writes.iter().rposition(|q| q.frame_of() == Some(run)) {
                self.writes[i] = w;
            }
            self.drop_one(run);
            return;
        }
        match self.writes.iter().position(|q| q.frame_of().is_some()) {
            Some(i) => {
                let victim = self.writes.remove(i).and_then(|q| q.frame_of()).unwrap_or(run);
                self.drop_one(victim);
                self.writes.push_back(w);
            }
            None => self.drop_one(run),
        }
    }
}

/// The queue between every publisher and the writer thread.
struct Queue {
    pending: Mutex<Pending>,
    ready: Condvar,
    capacity: usize,
}

impl Queue {
    /// See [`Store::behind`].
    fn behind(&self, in_flight: usize) -> bool {
        self.lock().writes.len() + in_flight >= self.capacity / 2
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        // A panic elsewhere while holding it leaves the queue itself consistent.
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Closes the queue when the last [`Store`] handle goes (the writer then commits what
/// is left and ends).
struct Handle {
    path: PathBuf,
    queue: Arc<Queue>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.queue.lock().closed = true;
        self.queue.ready.notify_all();
    }
}

/// The store's handle: writes go to the writer thread, reads open a connection.
#[derive(Clone)]
pub struct Store {
    handle: Arc<Handle>,
}

impl Store {
    /// Opens (or creates) the database in `dir`; runs left `queued` or `running` by a
    /// server that died are marked `interrupted` (with a status event).
    pub fn open(dir: &Path) -> Result<Self> {
        Self::open_with(dir, QUEUE)
    }

    /// [`Store::open`] with the queue `HOTLAB_STORE_QUEUE` sets, a test hook (as
    /// `HOTLAB_SLOW_END_MS` is): a queue small enough that a test reaches the back-pressure
    /// and the shedding; unset or not a number, [`QUEUE`].
    pub fn open_from_env(dir: &Path) -> Result<Self> {
        let capacity = std::env::var("HOTLAB_STORE_QUEUE").ok().and_then(|v| v.parse::<usize>().ok());
        Self::open_with(dir, capacity.unwrap_or(QUEUE))
    }

    /// [`Store::open`] with a queue of `capacity` writes.
    pub fn open_with(dir: &Path, capacity: usize) -> Result<Self> {
        Self::open_waiting(dir, capacity, BUSY_WAIT)
    }

    /// [`Store::open_with`], its writer waiting at most `busy` for a lock another process holds.
    fn open_waiting(dir: &Path, capacity: usize, busy: Duration) -> Result<Self> {
        std::fs::create_dir_all(dir).with_context(|| format!("--data-dir: cannot create {}", dir.display()))?;
        let path = dir.join("hotlab.sqlite");
        let conn = Connection::open(&path).with_context(|| format!("cannot open {}", path.display()))?;
        conn.execute_batch(SCHEMA).context("creating the schema")?;
        for (column, decl) in ADDED_COLUMNS {
            if conn.prepare(&format!("SELECT {column} FROM runs LIMIT 0")).is_err() {
                conn.execute_batch(&format!("ALTER TABLE runs ADD COLUMN {column} {decl}"))
                    .with_context(|| format!("adding the column {column} to {}", path.display()))?;
            }
        }
        // Another process reading (or `hotlab prune`) may hold the lock a moment.
        conn.busy_timeout(busy)?;
        mark_interrupted(&conn)?;
        let queue = Arc::new(Queue { pending: Mutex::default(), ready: Condvar::new(), capacity: capacity.max(1) });
        let (for_writer, at) = (Arc::clone(&queue), path.clone());
        std::thread::Builder::new().name("hotlab-store".into()).spawn(move || writer(conn, &for_writer, &at))?;
        Ok(Self { handle: Arc::new(Handle { path, queue }) })
    }

    fn send(&self, w: Write) {
        let queue = &self.handle.queue;
        let mut p = queue.lock();
        let wake = p.writes.is_empty() || matches!(w, Write::Flush(_));
        p.push(w, queue.capacity);
        // Half full: the writer commits now rather than at the end of its wait.
        let wake = wake || p.writes.len() == queue.capacity / 2;
        drop(p);
        if wake {
            queue.ready.notify_one();
        }
    }

    pub fn add_run(&self, id: u64, created_ms: u64, spec: &RunSpec, machine: &str, remote: bool) {
        let spec = serde_json::to_string(spec).unwrap_or_default();
        self.send(Write::Run { id, created_ms, spec, machine: machine.to_string(), remote });
    }

    /// A queued run's new machine.
    pub fn set_machine(&self, run: u64, machine: &str, remote: bool) {
        self.send(Write::Machine { run, machine: machine.to_string(), remote });
    }

    /// A run's Ray job, as the head last said.
    pub fn set_ray_job(&self, run: u64, job: &RayJob) {
        self.send(Write::RayJob { run, job: serde_json::to_string(job).unwrap_or_default() });
    }

    /// A remote run's events up to `seq` hold its worker's messages up to `n`.
    pub fn mark_worker(&self, run: u64, n: u64, seq: u64) {
        self.send(Write::WorkerMark { run, n, seq });
    }

    /// The remote runs left queued or running by a lab that stopped (their workers may
    /// still train them), each with its worker mark.
    pub fn resumable(&self) -> Result<Vec<Resumable>> {
        let c = self.read()?;
        let mut q = c.prepare(&format!(
            "SELECT {RUN_COLUMNS}, worker_n, worker_seq FROM runs WHERE remote = 1 AND status IN ('queued', 'running') ORDER BY id"
        ))?;
        let rows = q.query_map([], |r| {
            let info = run_info(r)?;
            Ok(info.map(|info| Resumable {
                info,
                worker_n: r.get::<_, i64>(11).unwrap_or(0) as u64,
                worker_seq: r.get::<_, i64>(12).unwrap_or(0) as u64,
            }))
        })?;
        Ok(rows.filter_map(|r| r.ok().flatten()).collect())
    }

    /// Queues an event; never waits (see the module docs for what a full queue does).
    pub fn add_event(&self, e: &Arc<Logged>) {
        self.send(Write::Event(Arc::clone(e)));
    }

    pub fn add_blob(&self, run: u64, name: &'static str, body: Vec<u8>) {
        self.send(Write::Blob { run, name, body });
    }

    pub fn add_publish_time(&self, run: u64, seconds: f64) {
        self.send(Write::PublishTime { run, seconds });
    }

    /// Whether the writer is behind: half its queue or more waits, counting `in_flight`
    /// writes on their way to it (a worker's messages delivered to their runs' threads and
    /// not yet published). What can wait (a worker's backlog, which the worker keeps until
    /// acknowledged) waits then, instead of being shed when the queue is full.
    pub fn behind(&self, in_flight: usize) -> bool {
        self.handle.queue.behind(in_flight)
    }

    /// Events of `run` dropped by this server so far.
    pub fn dropped(&self, run: u64) -> u64 {
        self.handle.queue.lock().dropped_total.get(&run).copied().unwrap_or(0)
    }

    /// Forgets this server's drop count of a run that has left memory (the store has it).
    pub fn forget(&self, run: u64) {
        self.handle.queue.lock().dropped_total.remove(&run);
    }

    /// Waits until everything written so far is committed (as long as that takes: a
    /// failing store's writes are kept and retried).
    pub fn flush(&self) {
        let (tx, rx) = std::sync::mpsc::channel();
        self.send(Write::Flush(tx));
        let _ = rx.recv();
    }

    /// [`Store::flush`] for at most `wait`; whether everything written so far is committed.
    pub fn flush_within(&self, wait: Duration) -> bool {
        let (tx, rx) = std::sync::mpsc::channel();
        self.send(Write::Flush(tx));
        rx.recv_timeout(wait).is_ok()
    }

    /// Why the store cannot write now (None while its commits succeed).
    pub fn failure(&self) -> Option<String> {
        self.handle.queue.lock().failure.clone()
    }

    /// Whether the store keeps up: `failing` while its commits fail, `slow` while a commit
    /// has taken [`SLOW`] or more or half its queue waits, else `ok`.
    pub fn health(&self) -> StoreHealth {
        let queue = &self.handle.queue;
        let p = queue.lock();
        let waiting = p.writes.len();
        let (state, message) = if let Some(why) = &p.failure {
            (StoreState::Failing, Some(why.clone()))
        } else if let Some(t) = p.committing.filter(|t| t.elapsed() >= SLOW) {
            let message = format!(
                "a commit has taken {:.0} s so far ({waiting} writes waiting; live events are shed, and counted, when the queue of {} fills)",
                t.elapsed().as_secs_f64(),
                queue.capacity
            );
            (StoreState::Slow, Some(message))
        } else if waiting >= queue.capacity / 2 {
            let message = format!(
                "{waiting} writes waiting, half the queue of {} or more (live events are shed, and counted, when it fills)",
                queue.capacity
            );
            (StoreState::Slow, Some(message))
        } else {
            (StoreState::Ok, None)
        };
        StoreHealth { state, message, waiting: waiting as u64, shed: p.shed }
    }

    pub fn path(&self) -> &Path {
        &self.handle.path
    }

    fn read(&self) -> Result<Connection> {
        let path = self.path();
        let c = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .with_context(|| format!("cannot read {}", path.display()))?;
        c.busy_timeout(Duration::from_secs(5))?;
        Ok(c)
    }

    /// The largest run id so far (0 for none).
    pub fn last_id(&self) -> Result<u64> {
        let c = self.read()?;
        Ok(c.query_row("SELECT COALESCE(MAX(id), 0) FROM runs", [], |r| r.get::<_, i64>(0))? as u64)
    }

    /// Up to `limit` runs with ids below `before` (all when None), newest first.
    pub fn runs(&self, before: Option<u64>, limit: usize) -> Result<Vec<RunInfo>> {
        let c = self.read()?;
        let mut q = c.prepare(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE id < ?1 ORDER BY id DESC LIMIT ?2"))?;
        let before = before.map_or(i64::MAX, |b| b.min(i64::MAX as u64) as i64);
        let rows = q.query_map(params![before, limit.min(i64::MAX as usize) as i64], run_info)?;
        Ok(rows.filter_map(|r| r.ok().flatten()).collect())
    }

    pub fn run(&self, id: u64) -> Result<Option<RunInfo>> {
        let c = self.read()?;
        let row =
            c.query_row(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?1"), [id as i64], run_info).optional()?;
        Ok(row.flatten())
    }

    /// A run's totals from its stored events: the profile windows summed, the last
    /// metrics and the report (None for a run the store lacks).
    pub fn summary(&self, id: u64) -> Result<Option<RunSummary>> {
        let Some(info) = self.run(id)? else { return Ok(None) };
        let c = self.read()?;
        let mut q = c.prepare(
            "SELECT body FROM events WHERE run = ?1 AND kind IN ('profile', 'report', 'metrics') ORDER BY seq",
        )?;
        let mut summary = RunSummary { info, ..RunSummary::default() };
        for body in q.query_map([id as i64], |r| r.get::<_, String>(0))?.filter_map(|r| r.ok()) {
            if let Ok(e) = serde_json::from_str::<Event>(&body) {
                summary.add(&e.body);
            }
        }
        Ok(Some(summary))
    }

    /// Queues an audit's current state (it replaces the stored one).
    pub fn add_audit(&self, audit: &AuditInfo) {
        self.send(Write::Audit(Box::new(audit.clone())));
    }

    /// Queues a sweep's current state (it replaces the stored one).
    pub fn add_sweep(&self, sweep: &SweepInfo) {
        self.send(Write::Sweep(Box::new(sweep.clone())));
    }

    /// The largest sweep id so far (0 for none).
    pub fn last_sweep_id(&self) -> Result<u64> {
        let c = self.read()?;
        Ok(c.query_row("SELECT COALESCE(MAX(id), 0) FROM sweeps", [], |r| r.get::<_, i64>(0))? as u64)
    }

    /// Up to `limit` sweeps, newest first.
    pub fn sweeps(&self, limit: usize) -> Result<Vec<SweepInfo>> {
        let c = self.read()?;
        let mut q = c.prepare("SELECT body FROM sweeps ORDER BY id DESC LIMIT ?1")?;
        let rows = q.query_map([limit.min(i64::MAX as usize) as i64], |r| r.get::<_, String>(0))?;
        Ok(rows.filter_map(|r| serde_json::from_str(&r.ok()?).ok()).collect())
    }

    pub fn sweep(&self, id: u64) -> Result<Option<SweepInfo>> {
        let c = self.read()?;
        let body: Option<String> = c
            .query_row("SELECT body FROM sweeps WHERE id = ?1", [id.min(i64::MAX as u64) as i64], |r| r.get(0))
            .optional()?;
        Ok(body.and_then(|b| serde_json::from_str(&b).ok()))
    }

    /// The largest audit id so far (0 for none).
    pub fn last_audit_id(&self) -> Result<u64> {
        let c = self.read()?;
        Ok(c.query_row("SELECT COALESCE(MAX(id), 0) FROM audits", [], |r| r.get::<_, i64>(0))? as u64)
    }

    /// Up to `limit` audits, newest first: of one run, of one lesson, or all.
    pub fn audits(&self, run: Option<u64>, lesson: Option<&str>, limit: usize) -> Result<Vec<AuditInfo>> {
        let c = self.read()?;
        let mut q = c.prepare(
            "SELECT body FROM audits WHERE (?1 IS NULL OR run = ?1) AND (?2 IS NULL OR lesson = ?2) ORDER BY id DESC LIMIT ?3",
        )?;
        let rows = q.query_map(
            params![run.map(|r| r.min(i64::MAX as u64) as i64), lesson, limit.min(i64::MAX as usize) as i64],
            |r| r.get::<_, String>(0),
        )?;
        // A row this version cannot read is left out, not fatal.
        Ok(rows.filter_map(|r| serde_json::from_str(&r.ok()?).ok()).collect())
    }

    pub fn audit(&self, id: u64) -> Result<Option<AuditInfo>> {
        let c = self.read()?;
        let body: Option<String> = c
            .query_row("SELECT body FROM audits WHERE id = ?1", [id.min(i64::MAX as u64) as i64], |r| r.get(0))
            .optional()?;
        Ok(body.and_then(|b| serde_json::from_str(&b).ok()))
    }

    /// The database's size on disk (with its write-ahead log), in bytes.
    pub fn size_bytes(&self) -> u64 {
        let path = self.path();
        let wal = path.with_extension("sqlite-wal");
        [path.to_path_buf(), wal].iter().filter_map(|p| std::fs::metadata(p).ok()).map(|m| m.len()).sum()
    }

    /// Deletes the runs created before `before_ms` (ms since the epoch) that are over and not in
    /// `live`, with their events and blobs; returns their ids. Through the writer, so
    /// nothing queued before it is lost.
    pub fn prune(&self, before_ms: u64, live: Vec<u64>) -> Vec<u64> {
        let (tx, rx) = std::sync::mpsc::channel();
        self.send(Write::Prune { before_ms, live, done: tx });
        rx.recv().unwrap_or_default()
    }

    /// Thins a finished run's rollout frames to at most `per_minute` per minute of its
    /// wall time (evenly, keeping the last).
    pub fn thin_frames(&self, run: u64, wall_s: f64, per_minute: f64) {
        let keep = (wall_s / 60.0 * per_minute).ceil().max(0.0) as usize;
        self.send(Write::Thin { run, keep });
    }

    /// At most `limit` of the run's events with `since < seq <= to` (of `kind`, when
    /// given), in order.
    pub fn events(&self, run: u64, since: u64, to: u64, kind: Option<&str>, limit: usize) -> Result<Vec<Arc<Logged>>> {
        let c = self.read()?;
        let mut q = c.prepare(
            "SELECT seq, kind, body FROM events WHERE run = ?1 AND seq > ?2 AND seq <= ?3 \
             AND (?4 IS NULL OR kind = ?4) ORDER BY seq LIMIT ?5",
        )?;
        let clamp = |n: u64| n.min(i64::MAX as u64) as i64;
        let args = params![run as i64, clamp(since), clamp(to), kind, clamp(limit as u64)];
        let rows = q.query_map(args, |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?)))?;
        let logged = |(seq, kind, json): (i64, String, String)| {
            let kind = KINDS.into_iter().find(|k| *k == kind)?; // a kind this version does not know is left out
            Some(Arc::new(Logged { run, seq: seq as u64, kind, event: None, json: json.into() }))
        };
        Ok(rows.filter_map(|r| r.ok()).filter_map(logged).collect())
    }

    pub fn blob(&self, run: u64, name: &str) -> Result<Option<Vec<u8>>> {
        let c = self.read()?;
        Ok(c.query_row("SELECT body FROM blobs WHERE run = ?1 AND name = ?2", params![run as i64, name], |r| r.get(0))
            .optional()?)
    }
}

const RUN_COLUMNS: &str = "id, created_ms, spec, status, message, events, sps, dropped, publish_s, machine, ray_job";

/// A remote run a restarted lab goes on with ([`Store::resumable`]).
pub struct Resumable {
    pub info: RunInfo,
    /// Its worker's messages up to this one are stored.
    pub worker_n: u64,
    /// In events up to this `seq`.
    pub worker_seq: u64,
}

fn run_info(r: &rusqlite::Row<'_>) -> rusqlite::Result<Option<RunInfo>> {
    let spec: String = r.get(2)?;
    let status: String = r.get(3)?;
    let (Ok(spec), Some(status)) = (serde_json::from_str::<RunSpec>(&spec), RunStatus::parse(&status)) else {
        return Ok(None); // a row this version cannot read is left out, not fatal
    };
    Ok(Some(RunInfo {
        id: r.get::<_, i64>(0)? as u64,
        created_ms: r.get::<_, i64>(1)? as u64,
        spec,
        status,
        message: r.get(4)?,
        events: r.get::<_, i64>(5)? as u64,
        sps: r.get(6)?,
        dropped: r.get::<_, i64>(7)? as u64,
        publish_s: r.get(8)?,
        machine: r.get(9)?,
        ray_job: r.get::<_, Option<String>>(10)?.and_then(|j| serde_json::from_str(&j).ok()),
    }))
}

/// How far past the last committed event an `interrupted` status is numbered: viewers
/// saw events that had not been committed when the server died (up to [`FLUSH`] of them),
/// and a viewer that reconnects with its `since` must still receive the outcome.
pub const SEQ_GAP_AFTER_CRASH: u64 = 1_000_000;

fn mark_interrupted(conn: &Connection) -> Result<()> {
    let mut q = conn.prepare("SELECT body FROM audits WHERE status IN ('queued', 'running')")?;
    let audits: Vec<String> = q.query_map([], |r| r.get(0))?.filter_map(|r| r.ok()).collect();
    for body in audits {
        if let Ok(mut a) = serde_json::from_str::<AuditInfo>(&body) {
            a.status = RunStatus::Interrupted;
            a.message = Some("the server stopped while this audit was live".into());
            apply(conn, &Write::Audit(Box::new(a)))?;
        }
    }
    let mut q = conn.prepare("SELECT body FROM sweeps WHERE status IN ('queued', 'running')")?;
    let sweeps: Vec<String> = q.query_map([], |r| r.get(0))?.filter_map(|r| r.ok()).collect();
    for body in sweeps {
        if let Ok(mut s) = serde_json::from_str::<SweepInfo>(&body) {
            s.status = RunStatus::Interrupted;
            s.message = Some("the server stopped while this sweep was live".into());
            apply(conn, &Write::Sweep(Box::new(s)))?;
        }
    }
    mark_runs_interrupted(conn)
}

fn mark_runs_interrupted(conn: &Connection) -> Result<()> {
    // A remote run's worker may still train it: the lab goes on with it ([`Store::resumable`]);
    // what the store holds past its worker mark goes (the worker sends it again).
    let mut q = conn.prepare("SELECT id, worker_seq FROM runs WHERE remote = 1 AND status = 'running'")?;
    let remote: Vec<(i64, i64)> = q.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.filter_map(|r| r.ok()).collect();
    for (id, seq) in remote {
        conn.execute("DELETE FROM events WHERE run = ?1 AND seq > ?2 AND kind != 'status'", params![id, seq])?;
    }
    let mut q = conn.prepare("SELECT id, events FROM runs WHERE status IN ('queued', 'running') AND remote = 0")?;
    let live: Vec<(i64, i64)> = q.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.filter_map(|r| r.ok()).collect();
    let message = "the server stopped while this run was live";
    for (id, events) in live {
        let e = Event {
            v: PROTOCOL_VERSION,
            run: id as u64,
            seq: events as u64 + SEQ_GAP_AFTER_CRASH,
            body: EventBody::Status { status: RunStatus::Interrupted, message: Some(message.into()) },
        };
        apply(conn, &Write::Event(Logged::new(e)))?;
    }
    Ok(())
}

/// Applies one write (inside the writer's transaction); a prune returns the runs it
/// deleted, to be answered once they are committed.
fn apply(c: &Connection, w: &Write) -> rusqlite::Result<Option<Vec<u64>>> {
    match w {
        Write::Run { id, created_ms, spec, machine, remote } => {
            c.execute(
                "INSERT OR REPLACE INTO runs (id, created_ms, spec, status, events, machine, remote) VALUES (?1, ?2, ?3, 'queued', 0, ?4, ?5)",
                params![*id as i64, *created_ms as i64, spec, machine, *remote as i64],
            )?;
        }
        Write::RayJob { run, job } => {
            c.execute("UPDATE runs SET ray_job = ?2 WHERE id = ?1", params![*run as i64, job])?;
        }
        Write::Machine { run, machine, remote } => {
            c.execute(
                "UPDATE runs SET machine = ?2, remote = ?3 WHERE id = ?1",
                params![*run as i64, machine, *remote as i64],
            )?;
        }
        Write::WorkerMark { run, n, seq } => {
            c.execute(
                "UPDATE runs SET worker_n = ?2, worker_seq = ?3 WHERE id = ?1",
                params![*run as i64, *n as i64, *seq as i64],
            )?;
        }
        Write::Event(logged) => {
            let Some(e) = &logged.event else { return Ok(None) }; // read back, not new
            c.execute(
                "INSERT OR REPLACE INTO events (run, seq, kind, body) VALUES (?1, ?2, ?3, ?4)",
                params![e.run as i64, e.seq as i64, e.body.kind(), logged.json.as_str()],
            )?;
            c.execute("UPDATE runs SET events = MAX(events, ?2) WHERE id = ?1", params![e.run as i64, e.seq as i64])?;
            match &e.body {
                EventBody::Status { status, message } => {
                    c.execute(
                        "UPDATE runs SET status = ?2, message = ?3 WHERE id = ?1",
                        params![e.run as i64, status.as_str(), message],
                    )?;
                }
                EventBody::Metrics { metrics } => {
                    c.execute("UPDATE runs SET sps = ?2 WHERE id = ?1", params![e.run as i64, metrics.sps])?;
                }
                _ => {}
            }
        }
        Write::Blob { run, name, body } => {
            c.execute(
                "INSERT OR REPLACE INTO blobs (run, name, body) VALUES (?1, ?2, ?3)",
                params![*run as i64, name, body],
            )?;
        }
        Write::PublishTime { run, seconds } => {
            c.execute("UPDATE runs SET publish_s = ?2 WHERE id = ?1", params![*run as i64, seconds])?;
        }
        Write::Thin { run, keep } => thin(c, *run, *keep)?,
        Write::Prune { before_ms, live, .. } => return Ok(Some(prune(c, *before_ms, live)?)),
        Write::Audit(a) => {
            c.execute(
                "INSERT OR REPLACE INTO audits (id, created_ms, run, lesson, status, body) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    a.id as i64,
                    a.created_ms as i64,
                    a.run.map(|r| r as i64),
                    a.lesson,
                    a.status.as_str(),
                    serde_json::to_string(a).unwrap_or_default()
                ],
            )?;
        }
        Write::Sweep(s) => {
            c.execute(
                "INSERT OR REPLACE INTO sweeps (id, created_ms, status, body) VALUES (?1, ?2, ?3, ?4)",
                params![
                    s.id as i64,
                    s.created_ms as i64,
                    s.status.as_str(),
                    serde_json::to_string(s).unwrap_or_default()
                ],
            )?;
        }
        Write::Flush(_) => {}
    }
    Ok(None)
}

/// Deletes the ended runs created before `before_ms` from the store in `dir`, beside a
/// lab that may be serving it (`hotlab prune`): queued and running runs are never touched.
pub fn prune_dir(dir: &Path, before_ms: u64) -> Result<Vec<u64>> {
    let path = dir.join("hotlab.sqlite");
    anyhow::ensure!(path.exists(), "--data-dir: {} has no run store (hotlab.sqlite)", dir.display());
    let mut conn = Connection::open(&path).with_context(|| format!("cannot open {}", path.display()))?;
    conn.busy_timeout(Duration::from_secs(30))?;
    let tx = conn.transaction()?;
    let ids = prune(&tx, before_ms, &[])?;
    tx.commit()?;
    Ok(ids)
}

/// Deletes all but `keep` frames of `run`, evenly spaced, the last one kept.
fn thin(c: &Connection, run: u64, keep: usize) -> rusqlite::Result<()> {
    let mut q = c.prepare("SELECT seq FROM events WHERE run = ?1 AND kind = 'rollout' ORDER BY seq")?;
    let seqs: Vec<i64> = q.query_map([run as i64], |r| r.get(0))?.filter_map(|r| r.ok()).collect();
    if seqs.len() <= keep {
        return Ok(());
    }
    let n = seqs.len();
    // Frame i is kept when it is the last of its share of the run (keep of n).
    let kept = |i: usize| keep > 0 && (i + 1) * keep / n != i * keep / n;
    let mut delete = c.prepare("DELETE FROM events WHERE run = ?1 AND seq = ?2")?;
    for (i, seq) in seqs.iter().enumerate() {
        if !kept(i) {
            delete.execute(params![run as i64, seq])?;
        }
    }
    Ok(())
}

fn prune(c: &Connection, before_ms: u64, live: &[u64]) -> rusqlite::Result<Vec<u64>> {
    let mut q = c.prepare("SELECT id FROM runs WHERE created_ms < ?1 AND status NOT IN ('queued', 'running')")?;
    let ids: Vec<u64> = q
        .query_map([before_ms.min(i64::MAX as u64) as i64], |r| r.get::<_, i64>(0))?
        .filter_map(|r| r.ok())
        .map(|id| id as u64)
        .filter(|id| !live.contains(id))
        .collect();
    for id in &ids {
        for table in ["events WHERE run", "blobs WHERE run", "runs WHERE id"] {
            c.execute(&format!("DELETE FROM {table} = ?1"), [*id as i64])?;
        }
    }
    for table in ["audits", "sweeps"] {
        c.execute(
            &format!("DELETE FROM {table} WHERE created_ms < ?1 AND status NOT IN ('queued', 'running')"),
            [before_ms.min(i64::MAX as u64) as i64],
        )?;
    }
    Ok(ids)
}

/// The writer thread: gathers writes for up to [`FLUSH`] (less when a flush is asked
/// for), commits them and the drops counted meanwhile together. A failed commit's writes
/// go back to the head of the queue, tried again [`RETRY`] later (once more when the store
/// closes).
fn writer(mut conn: Connection, queue: &Queue, path: &Path) {
    loop {
        let mut p = queue.lock();
        while p.writes.is_empty() && p.dropped.is_empty() && !p.closed {
            p = queue.ready.wait(p).unwrap_or_else(|e| e.into_inner());
        }
        let deadline = Instant::now() + if p.failure.is_some() { RETRY } else { FLUSH };
        // A queue half full is committed at once: back-pressure (`Store::behind`) waits on it.
        let hurry = |p: &Pending| p.failure.is_none() && (p.flushes > 0 || p.writes.len() >= queue.capacity / 2);
        while !hurry(&p) && !p.closed {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            p = queue.ready.wait_timeout(p, left).unwrap_or_else(|e| e.into_inner()).0;
        }
        let (batch, dropped, closed) = (std::mem::take(&mut p.writes), std::mem::take(&mut p.dropped), p.closed);
        p.flushes = 0;
        p.committing = Some(Instant::now());
        drop(p);
        let mut pruned = Vec::new();
        let result = conn.transaction().and_then(|tx| {
            for w in &batch {
                if let Some(ids) = apply(&tx, w)? {
                    pruned.push(ids);
                }
            }
            for (run, n) in &dropped {
                tx.execute("UPDATE runs SET dropped = dropped + ?2 WHERE id = ?1", params![*run as i64, *n as i64])?;
            }
            tx.commit()
        });
        let mut p = queue.lock();
        p.committing = None;
        if let Err(e) = result {
            let why = failure(&e, path);
            if p.failure.is_none() {
                tracing::error!(
                    "the run store cannot commit {} writes, and keeps them to try again: {why}",
                    batch.len()
                );
            }
            p.failure = Some(why);
            keep(&mut p, batch, dropped);
            if closed {
                tracing::error!("the run store closes with {} writes it could not write", p.writes.len());
                break;
            }
            continue;
        }
        if p.failure.take().is_some() {
            tracing::info!("the run store writes again");
        }
        drop(p);
        let mut pruned = pruned.into_iter();
        for w in batch {
            match w {
                Write::Flush(done) => {
                    let _ = done.send(());
                }
                Write::Prune { done, .. } => {
                    let _ = done.send(pruned.next().unwrap_or_default());
                }
                _ => {}
            }
        }
        if closed {
            break;
        }
    }
}

/// Puts a failed commit's writes back at the head of the queue, before what came since,
/// and its drop counts back; a prune among them is answered with nothing pruned (its
/// caller is a request, which should not wait for a disk).
fn keep(p: &mut Pending, batch: VecDeque<Write>, dropped: HashMap<u64, u64>) {
    let mut kept = VecDeque::with_capacity(batch.len() + p.writes.len());
    for w in batch {
        match w {
            Write::Prune { done, .. } => {
                let _ = done.send(Vec::new());
            }
            Write::Flush(done) => {
                p.flushes += 1;
                kept.push_back(Write::Flush(done));
            }
            w => kept.push_back(w),
        }
    }
    kept.append(&mut p.writes);
    p.writes = kept;
    for (run, n) in dropped {
        *p.dropped.entry(run).or_default() += n;
    }
}

/// A failed commit in words, with what to do where the cause is known.
fn failure(e: &rusqlite::Error, path: &Path) -> String {
    use rusqlite::ErrorCode;
    let dir = path.parent().unwrap_or(path).display();
    match e.sqlite_error_code() {
        Some(ErrorCode::DiskFull) => format!(
            "the disk under the data dir {dir} is full ({e}): free space there and the lab writes what it kept"
        ),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => format!(
            "{} is locked by another process past the wait ({e}): the lab writes what it kept once the lock is released",
            path.display()
        ),
        _ => format!("cannot write {} ({e})", path.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hotlab_protocol::{Frame, MetricsPoint};
    use hotlab_specs::cartpole::CartpoleFrame;
    use hotlab_specs::EnvName;

    fn event(seq: u64, body: EventBody) -> Write {
        Write::Event(Logged::new(Event { v: PROTOCOL_VERSION, run: 1, seq, body }))
    }

    fn frame(seq: u64) -> Write {
        let frame = Frame::new(EnvName::Cartpole, seq, &CartpoleFrame::default());
        event(seq, EventBody::Rollout { frame })
    }

    fn metric(seq: u64) -> Write {
        let m = MetricsPoint { update: seq, ..MetricsPoint::default() };
        event(seq, EventBody::Metrics { metrics: m })
    }

    fn seqs(p: &Pending) -> Vec<(u64, &'static str)> {
        p.writes
            .iter()
            .filter_map(|w| match w {
                Write::Event(e) => Some((e.seq, e.kind)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_full_queue_sheds_frames_before_metrics_never_a_status_and_counts_each_drop() {
        let mut p = Pending::default();
        for w in [frame(1), metric(2), frame(3), metric(4)] {
            p.push(w, 4);
        }
        p.push(metric(5), 4); // pushes out the oldest frame
        p.push(frame(6), 4); // takes the newest queued frame's place
        assert_eq!(seqs(&p), [(2, "metrics"), (6, "rollout"), (4, "metrics"), (5, "metrics")]);
        p.push(metric(7), 4); // the last frame goes
        p.push(metric(8), 4); // no frame left: this metric is dropped
        p.push(event(9, EventBody::Status { status: RunStatus::Finished, message: None }), 4);
        assert_eq!(seqs(&p), [(2, "metrics"), (4, "metrics"), (5, "metrics"), (7, "metrics"), (9, "status")]);
        assert_eq!(p.dropped_total.get(&1), Some(&4), "frames 1, 3, 6 and metric 8");
        assert_eq!(p.dropped.get(&1), Some(&4));
    }

    /// Behind from half the queue on (a worker's backlog then waits), and not before; a
    /// write that goes past the queue (a status) counts as waiting too.
    #[test]
    fn the_queue_is_behind_from_half_full() {
        for capacity in [2, 8, 9, 64] {
            let queue = Queue { pending: Mutex::default(), ready: Condvar::new(), capacity };
            for seq in 0..capacity as u64 {
                assert_eq!(queue.behind(0), seq as usize >= capacity / 2, "{seq} of {capacity}");
                queue.lock().push(metric(seq + 1), capacity);
            }
            assert!(queue.behind(0));
            queue.lock().writes.clear();
            assert!(!queue.behind(0), "drained");
            assert!(queue.behind(capacity / 2) && !queue.behind(capacity / 2 - 1), "writes on their way count");
            for seq in 0..capacity.div_ceil(2) as u64 {
                let status = event(seq, EventBody::Status { status: RunStatus::Finished, message: None });
                queue.lock().push(status, capacity);
            }
            assert!(queue.behind(0), "{capacity}: statuses count");
        }
    }

    fn stored_kinds(store: &Store, run: u64) -> Vec<(u64, String)> {
        store.events(run, 0, u64::MAX, None, usize::MAX).unwrap().iter().map(|e| (e.seq, e.kind.to_string())).collect()
    }

    #[test]
    fn thinning_keeps_evenly_spread_frames_and_every_other_event() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store.add_run(1, 0, &RunSpec::default(), "local", false);
        for seq in 1..=20 {
            let w = if seq % 2 == 0 { frame(seq) } else { metric(seq) };
            store.send(w);
        }
        // 10 frames over 2 minutes at 2 a minute: 4 kept, the last among them.
        store.thin_frames(1, 120.0, 2.0);
        store.flush();
        let kinds = stored_kinds(&store, 1);
        let frames: Vec<u64> = kinds.iter().filter(|(_, k)| k == "rollout").map(|(s, _)| *s).collect();
        assert_eq!(frames.len(), 4, "{frames:?}");
        assert_eq!(frames.last(), Some(&20));
        assert_eq!(kinds.iter().filter(|(_, k)| k == "metrics").count(), 10);
    }

    /// A commit that fails (here: another process holds the database locked past the
    /// writer's wait) loses nothing: the store says `failing` and why, a flush within a
    /// bound says it did not commit, reads go on, and once the lock goes every write is
    /// stored, in order, and the store is `ok` again.
    #[test]
    fn a_failed_commit_keeps_its_writes_and_writes_them_once_it_can() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_waiting(dir.path(), 64, Duration::from_millis(50)).unwrap();
        store.add_run(1, 0, &RunSpec::default(), "local", false);
        store.send(metric(1));
        store.flush();
        assert_eq!(store.health().state, StoreState::Ok);
        let other = Connection::open(dir.path().join("hotlab.sqlite")).unwrap();
        other.execute_batch("BEGIN EXCLUSIVE").unwrap();
        for seq in 2..=40 {
            store.send(metric(seq));
        }
        assert!(!store.flush_within(Duration::from_millis(600)), "nothing commits while the lock is held");
        let health = store.health();
        assert_eq!(health.state, StoreState::Failing, "{health:?}");
        let why = health.message.unwrap();
        assert!(why.contains("locked by another process") && why.contains("hotlab.sqlite"), "{why}");
        assert_eq!(store.failure().as_deref(), Some(why.as_str()));
        assert_eq!(stored_kinds(&store, 1).len(), 1, "reads go on: what was committed");
        store.send(metric(41));
        other.execute_batch("COMMIT").unwrap();
        store.flush();
        let seqs: Vec<u64> = stored_kinds(&store, 1).iter().map(|(s, _)| *s).collect();
        assert_eq!(seqs, (1..=41).collect::<Vec<_>>(), "every write, once, in order");
        assert_eq!(store.health().state, StoreState::Ok);
        assert_eq!(store.failure(), None);
    }

    #[test]
    fn pruning_deletes_old_ended_runs_only_and_a_store_of_the_first_schema_opens() {
        let dir = tempfile::tempdir().unwrap();
        {
            // The first schema, without the columns added since.
            let c = Connection::open(dir.path().join("hotlab.sqlite")).unwrap();
            c.execute_batch(SCHEMA).unwrap();
            c.execute("INSERT INTO runs (id, created_ms, spec, status) VALUES (1, 10, '{}', 'finished')", []).unwrap();
        }
        let store = Store::open(dir.path()).unwrap();
        for (id, created_ms) in [(2, 20), (3, 30), (4, 10_000)] {
            store.add_run(id, created_ms, &RunSpec::default(), "local", false);
        }
        for id in [2, 4] {
            let done = EventBody::Status { status: RunStatus::Finished, message: None };
            store.send(Write::Event(Logged::new(Event { v: PROTOCOL_VERSION, run: id, seq: 1, body: done })));
        }
        store.flush();
        assert_eq!(store.run(1).unwrap().map(|r| r.dropped), Some(0), "the old store gained its columns");
        // Run 3 is queued: kept, however old; run 4 is too young.
        assert_eq!(store.prune(1000, vec![]), [1, 2]);
        let left: Vec<u64> = store.runs(None, 10).unwrap().iter().map(|r| r.id).collect();
        assert_eq!(left, [4, 3]);
        assert_eq!(prune_dir(dir.path(), 100_000).unwrap(), [4], "beside the lab, the same rule");
    }
}
