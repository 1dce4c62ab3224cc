//! The run history in SQLite (`<data dir>/hotlab.sqlite`): runs, their events, and
//! blobs (the trace, the trained policy).
//!
//! One writer thread owns the writing connection and commits what arrived in one
//! transaction every [`FLUSH`] at most, so a trainer never waits on the disk and a crash
//! loses at most about that much. Readers open their own connections (WAL mode lets
//! them read while the writer writes).

use anyhow::{Context, Result};
use axum::extract::ws::Utf8Bytes;
use hotlab_shared::protocol::{Event, EventBody, RunInfo, RunStatus, PROTOCOL_VERSION};
use hotlab_shared::spec::RunSpec;
use rusqlite::{params, Connection, OptionalExtension};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The longest a write waits before it is committed.
pub const FLUSH: Duration = Duration::from_millis(250);

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
CREATE TABLE IF NOT EXISTS blobs (
    run INTEGER NOT NULL,
    name TEXT NOT NULL,
    body BLOB NOT NULL,
    PRIMARY KEY (run, name)
);
";

/// An event and its JSON text, serialized once for the store and every viewer.
#[derive(Debug)]
pub struct Logged {
    pub event: Event,
    /// Shared, not copied, by every WebSocket message that carries it.
    pub json: Utf8Bytes,
}

impl Logged {
    pub fn new(event: Event) -> Arc<Self> {
        let json = serde_json::to_string(&event).unwrap_or_default().into();
        Arc::new(Self { event, json })
    }
}

/// What the writer thread is asked to do.
enum Write {
    Run {
        id: u64,
        created_ms: u64,
        spec: String,
    },
    Event(Arc<Logged>),
    Blob {
        run: u64,
        name: &'static str,
        body: Vec<u8>,
    },
    /// Answers once everything sent before it is committed.
    Flush(Sender<()>),
}

/// The store's handle: writes go to the writer thread, reads open a connection.
#[derive(Clone)]
pub struct Store {
    path: PathBuf,
    tx: Sender<Write>,
}

impl Store {
    /// Opens (or creates) the database in `dir`; runs left `queued` or `running` by a
    /// server that died are marked `interrupted` (with a status event).
    pub fn open(dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir).with_context(|| format!("--data-dir: cannot create {}", dir.display()))?;
        let path = dir.join("hotlab.sqlite");
        let conn = Connection::open(&path).with_context(|| format!("cannot open {}", path.display()))?;
        conn.execute_batch(SCHEMA).context("creating the schema")?;
        mark_interrupted(&conn)?;
        let (tx, rx) = channel();
        std::thread::Builder::new().name("hotlab-store".into()).spawn(move || writer(conn, rx))?;
        Ok(Self { path, tx })
    }

    pub fn add_run(&self, id: u64, created_ms: u64, spec: &RunSpec) {
        let spec = serde_json::to_string(spec).unwrap_or_default();
        let _ = self.tx.send(Write::Run { id, created_ms, spec });
    }

    pub fn add_event(&self, e: &Arc<Logged>) {
        let _ = self.tx.send(Write::Event(Arc::clone(e)));
    }

    pub fn add_blob(&self, run: u64, name: &'static str, body: Vec<u8>) {
        let _ = self.tx.send(Write::Blob { run, name, body });
    }

    /// Waits until everything written so far is committed.
    pub fn flush(&self) {
        let (tx, rx) = channel();
        if self.tx.send(Write::Flush(tx)).is_ok() {
            let _ = rx.recv();
        }
    }

    fn read(&self) -> Result<Connection> {
        let c = Connection::open_with_flags(&self.path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .with_context(|| format!("cannot read {}", self.path.display()))?;
        c.busy_timeout(Duration::from_secs(5))?;
        Ok(c)
    }

    /// The largest run id so far (0 for none).
    pub fn last_id(&self) -> Result<u64> {
        let c = self.read()?;
        Ok(c.query_row("SELECT COALESCE(MAX(id), 0) FROM runs", [], |r| r.get::<_, i64>(0))? as u64)
    }

    pub fn runs(&self) -> Result<Vec<RunInfo>> {
        let c = self.read()?;
        let mut q = c.prepare("SELECT id, created_ms, spec, status, message, events, sps FROM runs ORDER BY id")?;
        let rows = q.query_map([], run_info)?;
        Ok(rows.filter_map(|r| r.ok().flatten()).collect())
    }

    pub fn run(&self, id: u64) -> Result<Option<RunInfo>> {
        let c = self.read()?;
        let row = c
            .query_row(
                "SELECT id, created_ms, spec, status, message, events, sps FROM runs WHERE id = ?1",
                [id as i64],
                run_info,
            )
            .optional()?;
        Ok(row.flatten())
    }

    /// The run's events after `since`, in order.
    pub fn events(&self, run: u64, since: u64) -> Result<Vec<Arc<Logged>>> {
        let c = self.read()?;
        let mut q = c.prepare("SELECT body FROM events WHERE run = ?1 AND seq > ?2 ORDER BY seq")?;
        let rows = q.query_map(params![run as i64, since as i64], |r| r.get::<_, String>(0))?;
        let logged =
            |json: String| Some(Arc::new(Logged { event: serde_json::from_str(&json).ok()?, json: json.into() }));
        Ok(rows.filter_map(|r| r.ok()).filter_map(logged).collect())
    }

    pub fn blob(&self, run: u64, name: &str) -> Result<Option<Vec<u8>>> {
        let c = self.read()?;
        Ok(c.query_row("SELECT body FROM blobs WHERE run = ?1 AND name = ?2", params![run as i64, name], |r| r.get(0))
            .optional()?)
    }
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
    }))
}

/// How far past the last committed event an `interrupted` status is numbered: viewers
/// saw events that had not been committed when the server died (up to [`FLUSH`] of them),
/// and a viewer that reconnects with its `since` must still receive the outcome.
const SEQ_GAP_AFTER_CRASH: u64 = 1_000_000;

fn mark_interrupted(conn: &Connection) -> Result<()> {
    let mut q = conn.prepare("SELECT id, events FROM runs WHERE status IN ('queued', 'running')")?;
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

/// Applies one write (inside the writer's transaction).
fn apply(c: &Connection, w: &Write) -> rusqlite::Result<()> {
    match w {
        Write::Run { id, created_ms, spec } => {
            c.execute(
                "INSERT OR REPLACE INTO runs (id, created_ms, spec, status, events) VALUES (?1, ?2, ?3, 'queued', 0)",
                params![*id as i64, *created_ms as i64, spec],
            )?;
        }
        Write::Event(logged) => {
            let e = &logged.event;
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
        Write::Flush(_) => {}
    }
    Ok(())
}

/// The writer thread: gathers writes for up to [`FLUSH`], commits them together.
fn writer(mut conn: Connection, rx: Receiver<Write>) {
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        let deadline = Instant::now() + FLUSH;
        let mut closed = false;
        while !matches!(batch.last(), Some(Write::Flush(_))) {
            match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(w) => batch.push(w),
                Err(RecvTimeoutError::Timeout) => break,
                Err(RecvTimeoutError::Disconnected) => {
                    closed = true;
                    break;
                }
            }
        }
        let result = conn.transaction().and_then(|tx| {
            for w in &batch {
                apply(&tx, w)?;
            }
            tx.commit()
        });
        if let Err(e) = result {
            tracing::error!("the run store could not commit {} writes: {e}", batch.len());
        }
        for w in batch {
            if let Write::Flush(done) = w {
                let _ = done.send(());
            }
        }
        if closed {
            break;
        }
    }
}
