//! Faults a shared lab box meets (issue 62), each with nothing already committed lost and
//! the lab still serving reads: the disk under the data dir fills while a run writes, and
//! the store's writes stall. Part of the `lab` test binary (`mod faults;` in tests/lab.rs).
//! A worker machine that dies without a goodbye is in tests/workers.rs; a run's process
//! killed for its memory in tests/lab.rs.

use crate::lab_client::*;
use futures_util::StreamExt;
use serde_json::{json, Value};
use std::io::Write;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn long_run() -> Value {
    json!({"envs": 8, "total_steps": 50_000_000, "device": "cpu"})
}

/// Asks `f` every 50 ms until it gives something (at most 120 s, then fails naming `what`).
fn until<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(t) = f() {
            return t;
        }
        assert!(start.elapsed() < Duration::from_secs(120), "waited 120 s for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn stored_metrics(addr: &str, id: u64) -> usize {
    get_json(addr, &format!("/api/runs/{id}/metrics")).as_array().unwrap().len()
}

fn store_state(addr: &str) -> Value {
    get_json(addr, "/api/system")["store"].clone()
}

/// A lab whose data dir is a filesystem of its own, `mb` MiB: a tmpfs mounted in a mount
/// namespace of the lab's alone (as root; otherwise in a user namespace too), so nothing
/// outside the lab sees it. This process reaches into it through `/proc/PID/root`.
struct SmallDisk {
    server: Server,
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn start(mb: u32) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = Command::new("unshare");
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            cmd.args(["--user", "--map-root-user"]);
        }
        let script = r#"mount -t tmpfs -o size="${1}m" hotlab-test "$2" && shift 2 && exec "$@""#;
        cmd.args(["--mount", "--propagation", "private", "sh", "-c", script, "sh", &mb.to_string()]);
        cmd.arg(dir.path()).arg(env!("CARGO_BIN_EXE_hotlab")).args(serve_args(dir.path(), 0));
        Self { server: serve_from(cmd), dir }
    }

    /// A file on the small disk, as this process reaches it.
    fn path(&self, name: &str) -> PathBuf {
        PathBuf::from(format!("/proc/{}/root{}", self.server.child.id(), self.dir.path().join(name).display()))
    }

    /// Fills the disk with a file of its own, to the last byte it takes.
    fn fill(&self) {
        let mut f = std::fs::File::create(self.path("filler")).unwrap();
        let chunk = vec![0u8; 64 << 10];
        loop {
            match f.write(&chunk) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => {
                    assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "filling the disk: {e}");
                    break;
                }
            }
        }
    }

    /// The run as the small disk's store holds it. SQLite follows `/proc/PID/root` to this
    /// process's own root, so the store's files are copied out and read here (a copy taken
    /// between two commits, or one the reading refuses, is read again).
    fn committed(&self, id: u64) -> Committed {
        until("a copy of the store to read", || {
            let copy = tempfile::tempdir().unwrap();
            for file in ["hotlab.sqlite", "hotlab.sqlite-wal"] {
                std::fs::copy(self.path(file), copy.path().join(file)).ok()?;
            }
            read_committed(&copy.path().join("hotlab.sqlite"), id).ok()
        })
    }
}

/// A run as the store's file holds it: what is committed, read by this process.
#[derive(Debug)]
struct Committed {
    status: String,
    message: String,
    /// The run's last event's `seq`: how many events it published.
    events: u64,
    /// Events shed, as counted.
    dropped: u64,
    /// Events stored, and metrics among them.
    stored: u64,
    metrics: u64,
}

fn committed(db: &std::path::Path, id: u64) -> Committed {
    read_committed(db, id).unwrap()
}

fn read_committed(db: &std::path::Path, id: u64) -> rusqlite::Result<Committed> {
    let db = rusqlite::Connection::open(db)?;
    let one = |sql: &str| db.query_row(sql, [id as i64], |r| r.get::<_, i64>(0)).map(|n| n as u64);
    let (status, message, events, dropped) = db.query_row(
        "SELECT status, COALESCE(message, ''), events, dropped FROM runs WHERE id = ?1",
        [id as i64],
        |r| Ok((r.get(0)?, r.get(1)?, r.get::<_, i64>(2)? as u64, r.get::<_, i64>(3)? as u64)),
    )?;
    let stored = one("SELECT COUNT(*) FROM events WHERE run = ?1")?;
    let metrics = one("SELECT COUNT(*) FROM events WHERE run = ?1 AND kind = 'metrics'")?;
    Ok(Committed { status, message, events, dropped, stored, metrics })
}

/// The disk fills while a run writes: the run is stopped and ends `failed`, saying the
/// disk under the data dir is full; what was stored stays readable; new runs are refused
/// naming why; once space returns, the lab writes what it kept (the run's end with it),
/// says the store is ok, and takes runs again; every event of the run is then stored or
/// counted as shed, and a shed one is reported.
#[test]
fn a_full_disk_fails_the_live_run_saying_so_keeps_what_was_stored_and_the_lab_recovers() {
    let disk = SmallDisk::start(8);
    let addr = disk.server.addr.clone();
    let id = launch(&addr, long_run());
    until("three stored metrics", || (stored_metrics(&addr, id) >= 3).then_some(()));
    disk.fill();

    let run = wait_for(&addr, id, &["failed", "finished", "stopped", "interrupted"]);
    assert_eq!(run["status"], "failed", "{run}");
    let message = run["message"].as_str().unwrap();
    assert!(message.contains("run store cannot write") && message.contains("is full"), "{message}");
    let store = store_state(&addr);
    assert_eq!(store["state"], "failing", "{store}");
    assert!(store["message"].as_str().unwrap().contains("the disk under the data dir"), "{store}");
    let kept = stored_metrics(&addr, id);
    assert!(kept >= 3, "what was stored is read: {kept} metrics");
    let (status, body) = http(&addr, "POST", "/api/runs", &[AUTH], small_run().to_string().as_bytes());
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("store_failing") && body.contains("is full"), "{body}");
    assert_eq!(disk.committed(id).status, "running", "the end waits in the store's queue");

    std::fs::remove_file(disk.path("filler")).unwrap();
    until("the store to write again", || (store_state(&addr)["state"] == "ok").then_some(()));
    let c = until("the run's end to be stored", || Some(disk.committed(id)).filter(|c| c.status != "running"));
    assert_eq!((c.status.as_str(), c.message.as_str()), ("failed", message), "{c:?}");
    assert!(c.metrics >= kept as u64, "{c:?}: {kept} metrics before");
    // The accounting, as for a stalled store: every event the run published is stored or
    // counted as shed, and what was shed is reported, by the run and by the store.
    assert_eq!(c.stored + c.dropped, c.events, "every event stored or counted as shed: {c:?}");
    // (A run that shed nothing leaves `dropped` out.)
    let reported = get_json(&addr, &format!("/api/runs/{id}"))["dropped"].as_u64().unwrap_or(0);
    assert_eq!(reported, c.dropped, "the run reports what it shed: {c:?}");
    assert!(store_state(&addr)["shed"].as_u64().unwrap() >= c.dropped, "{c:?}: {}", store_state(&addr));
    let next = launch(&addr, small_run());
    assert_eq!(wait_for(&addr, next, &["finished", "failed"])["status"], "finished");
}

/// Each metrics event a viewer got: when it came, and its update.
type Seen = Arc<Mutex<Vec<(Instant, u64)>>>;

/// A viewer of `id` from event `since` on: each metrics event's update and when it came,
/// until the run ends.
fn viewer(addr: &str, id: u64, since: u64) -> (std::thread::JoinHandle<()>, Seen) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (url, out) = (format!("ws://{addr}/api/ws?run={id}&since={since}"), Arc::clone(&seen));
    let handle = std::thread::spawn(move || {
        runtime().block_on(async move {
            let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
            while let Some(Ok(msg)) = ws.next().await {
                let tokio_tungstenite::tungstenite::Message::Text(text) = msg else { continue };
                let e: Value = serde_json::from_str(&text).unwrap();
                if e["kind"] == "metrics" {
                    out.lock().unwrap().push((Instant::now(), e["metrics"]["update"].as_u64().unwrap()));
                }
                if e["kind"] == "status" && !matches!(e["status"].as_str(), Some("queued" | "running")) {
                    break;
                }
            }
        })
    });
    (handle, seen)
}

/// Another process holds the store's database locked, as a slow disk would stall it: the
/// lab says the store is slow, a viewer's live stream goes on, requests are answered, and
/// what does not fit the store's queue is shed and counted, so that every event of the
/// run is either stored or counted as shed; the lock gone, the store is ok again.
#[test]
fn a_stalled_store_keeps_viewers_live_answers_requests_and_counts_every_event_it_sheds() {
    let data = tempfile::tempdir().unwrap();
    let keep_frames = ["--finished-frames-per-minute", "1000000"];
    let server = start_with_env(data.path(), 0, &keep_frames, &[("HOTLAB_STORE_QUEUE", "64")]);
    let addr = server.addr.clone();
    let id = launch(&addr, long_run());
    until("two stored metrics", || (stored_metrics(&addr, id) >= 2).then_some(()));
    let since = get_json(&addr, &format!("/api/runs/{id}"))["events"].as_u64().unwrap();
    let (watching, seen) = viewer(&addr, id, since);

    let db = rusqlite::Connection::open(data.path().join("hotlab.sqlite")).unwrap();
    db.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let locked = Instant::now();
    // Requests that would wait on the store (a launch is answered once it is stored, a live
    // run's outputs are looked for there) wait a bounded while, then are answered.
    let (a, b) = (addr.clone(), addr.clone());
    let launched =
        std::thread::spawn(move || http(&a, "POST", "/api/runs", &[AUTH], small_run().to_string().as_bytes()));
    let policy = std::thread::spawn(move || get(&b, &format!("/api/runs/{id}/policy")));
    let stalled = |s: &Value| s["state"] == "slow" && s["message"].as_str().unwrap().contains("a commit has taken");
    until("the store to say a commit stalls", || Some(store_state(&addr)).filter(stalled));
    until("events shed", || (get_json(&addr, &format!("/api/runs/{id}"))["dropped"].as_u64() > Some(0)).then_some(()));
    for path in ["/api/runs".to_string(), format!("/api/runs/{id}"), format!("/api/runs/{id}/events?limit=5")] {
        let (status, body) = get(&addr, &path);
        assert_eq!(status, 200, "{path}: {body}");
    }
    let live = || seen.lock().unwrap().iter().filter(|(t, _)| *t > locked).count();
    until("three updates streamed while the store stalls", || (live() >= 3).then_some(()));
    let (status, body) = launched.join().unwrap();
    assert_eq!(status, 201, "a launch while the store stalls: {body}");
    let (status, body) = policy.join().unwrap();
    assert_eq!(status, 404, "a live run has no policy yet: {body}");
    // The writer waits 30 s for a lock before its commit fails: all of the above came first.
    assert!(locked.elapsed() < Duration::from_secs(25), "held past the writer's wait: {:?}", locked.elapsed());
    drop(db);

    until("the store to catch up", || (store_state(&addr)["state"] == "ok").then_some(()));
    let (status, body) = http(&addr, "POST", &format!("/api/runs/{id}/stop"), &[AUTH], b"");
    assert_eq!(status, 200, "{body}");
    wait_for(&addr, id, &["stopped"]);
    watching.join().unwrap();
    let db = data.path().join("hotlab.sqlite");
    let c = until("the run's end to be stored", || Some(committed(&db, id)).filter(|c| c.status == "stopped"));
    assert_eq!(c.stored + c.dropped, c.events, "every event stored or counted as shed: {c:?}");
    assert!(c.dropped > 0 && c.metrics > 0, "{c:?}");
    assert!(store_state(&addr)["shed"].as_u64().unwrap() >= c.dropped);
}
