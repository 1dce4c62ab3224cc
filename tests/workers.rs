//! Lab GPU boxes (issue 24): a lab and its workers as separate real processes on
//! 127.0.0.1; runs launched on a worker stream through the lab, survive either side going
//! away for a while, and end `interrupted` when the worker does not come back.

mod common;
mod lab_client;
use common::*;
use lab_client::*;
use serde_json::{json, Value};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

const WORKER_TOKEN: &str = "worker-token-abcdefgh";

struct Worker {
    child: Child,
    /// What it printed on stderr so far.
    log: std::sync::Arc<std::sync::Mutex<String>>,
    _data: tempfile::TempDir,
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn worker(addr: &str, name: &str, token: &str) -> Worker {
    let data = tempfile::tempdir().unwrap();
    let mut child = hotlab()
        .args(["worker", "--lab", &format!("http://{addr}"), "--worker-token", token, "--name", name, "--data-dir"])
        .arg(data.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read all along, so that the worker never blocks on a full pipe.
    let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let (mut stderr, sink) = (child.stderr.take().unwrap(), std::sync::Arc::clone(&log));
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = std::io::Read::read(&mut stderr, &mut buf) {
            sink.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    Worker { child, log, _data: data }
}

impl Worker {
    /// Waits until a line of its stderr matches (at most 120 s).
    fn wait_for_line(&self, matches: impl Fn(&str) -> bool) {
        let start = Instant::now();
        while !self.log.lock().unwrap().lines().any(&matches) {
            assert!(start.elapsed() < Duration::from_secs(120), "no such line: {}", self.log.lock().unwrap());
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A lab with no local machine: runs go to workers. Its grace period outlasts the
/// worker's longest backoff (10 s), so a worker that is only waiting to retry is never
/// taken for gone.
fn lab(data: &std::path::Path, port: u16) -> Server {
    lab_with_grace(data, port, "20")
}

fn lab_with_grace(data: &std::path::Path, port: u16, grace: &str) -> Server {
    start_on(data, port, &["--local-worker", "off", "--worker-token", WORKER_TOKEN, "--worker-grace", grace])
}

/// [`lab`] with environment variables of its own.
fn start_env(data: &std::path::Path, port: u16, env: &[(&str, &str)]) -> Server {
    let args = ["--local-worker", "off", "--worker-token", WORKER_TOKEN, "--worker-grace", "20"];
    start_with_env(data, port, &args, env)
}

/// Waits until the lab lists `name` as connected; its entry.
fn connected(addr: &str, name: &str) -> Value {
    let start = Instant::now();
    loop {
        let machines = get_json(addr, "/api/machines");
        if let Some(m) = machines.as_array().unwrap().iter().find(|m| m["name"] == name && m["connected"] == true) {
            return m.clone();
        }
        assert!(start.elapsed() < Duration::from_secs(60), "{name} never connected: {machines}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn metrics(addr: &str, id: u64) -> Vec<Value> {
    get_json(addr, &format!("/api/runs/{id}/metrics")).as_array().unwrap().clone()
}

fn wait_metrics(addr: &str, id: u64, n: usize) {
    let start = Instant::now();
    while metrics(addr, id).len() < n {
        assert!(start.elapsed() < Duration::from_secs(120), "run {id}: fewer than {n} metrics");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Every update of the run once, from 1, in order.
fn assert_whole(ms: &[Value]) {
    let updates: Vec<u64> = ms.iter().map(|m| m["metrics"]["update"].as_u64().unwrap()).collect();
    let expected: Vec<u64> = (1..=updates.len() as u64).collect();
    assert_eq!(updates, expected, "each update once, none missing");
}

fn on(machine: &str, mut spec: Value) -> Value {
    spec["machine"] = json!(machine);
    spec
}

#[test]
fn a_run_on_a_worker_streams_through_the_lab_and_is_stored() {
    let data = tempfile::tempdir().unwrap();
    let server = lab(data.path(), 0);
    let _w = worker(&server.addr, "box-1", WORKER_TOKEN);
    let m = connected(&server.addr, "box-1");
    assert_eq!(m["local"], false);
    assert!(m["system"]["devices"].as_array().unwrap().iter().any(|d| d["id"] == "cpu"), "{m}");
    assert_eq!(m["system"]["version"], get_json(&server.addr, "/api/system")["version"]);
    // No machine named: the free one with the device (the only one here).
    let id = launch(&server.addr, small_run());
    let streamed = runtime().block_on(follow(&server.addr, &format!("run={id}&since=0")));
    assert_eq!(streamed.last().unwrap()["status"], "finished", "{:?}", streamed.last());
    let run = get_json(&server.addr, &format!("/api/runs/{id}"));
    assert_eq!((run["status"].as_str(), run["machine"].as_str()), (Some("finished"), Some("box-1")));
    // The history equals the stream (rollout frames aside: an ended run's are thinned),
    // every update once.
    let stored = get_json(&server.addr, &format!("/api/runs/{id}/events"));
    let not_frames = |es: &mut dyn Iterator<Item = &Value>| {
        es.filter(|e| e["kind"] != "rollout").map(|e| e["seq"].as_u64().unwrap()).collect::<Vec<_>>()
    };
    assert_eq!(not_frames(&mut streamed.iter()), not_frames(&mut stored.as_array().unwrap().iter()));
    let ms = metrics(&server.addr, id);
    assert_eq!(ms.len(), 20, "20480 steps in updates of 8 × 128");
    assert_whole(&ms);
    // The outputs made on the worker came with it.
    for what in ["report", "policy"] {
        let (status, body) = get(&server.addr, &format!("/api/runs/{id}/{what}"));
        assert_eq!(status, 200, "{what}: {body}");
    }
    assert_eq!(connected(&server.addr, "box-1")["runs"], 0);
}

#[test]
fn a_worker_killed_mid_run_leaves_the_run_interrupted_with_its_metrics() {
    let data = tempfile::tempdir().unwrap();
    let server = lab_with_grace(data.path(), 0, "2");
    let mut w = worker(&server.addr, "box-2", WORKER_TOKEN);
    connected(&server.addr, "box-2");
    let id = launch(&server.addr, on("box-2", json!({"envs": 8, "total_steps": 50_000_000, "device": "cpu"})));
    wait_metrics(&server.addr, id, 3);
    unsafe { libc::kill(w.child.id() as i32, libc::SIGKILL) };
    let _ = w.child.wait();
    let run = wait_for(&server.addr, id, &["interrupted", "failed", "finished"]);
    assert_eq!(run["status"], "interrupted", "{run}");
    assert!(run["message"].as_str().unwrap().contains("box-2"), "{run}");
    assert!(metrics(&server.addr, id).len() >= 3, "the metrics received are kept");
    let m = get_json(&server.addr, "/api/machines");
    assert_eq!(m[0]["connected"], false, "{m}");
}

/// A worker machine that dies without a goodbye: its process frozen (SIGSTOP), its socket
/// left open, nothing more said on it. The lab takes it for gone after its silence: its run
/// ends `interrupted` once the grace period has passed (not before), naming it, with what it
/// sent kept whole and nothing more; of the
/// runs queued behind it, the one the lab placed moves to another worker and finishes, and
/// the one launched for that machine by name ends `interrupted`, saying it never started.
#[test]
fn a_worker_that_dies_without_a_goodbye_is_taken_for_gone_and_its_queue_moves_on() {
    let data = tempfile::tempdir().unwrap();
    let server = lab_with_grace(data.path(), 0, "2");
    let frozen = worker(&server.addr, "box-f", WORKER_TOKEN);
    connected(&server.addr, "box-f");
    let id = launch(&server.addr, on("box-f", json!({"envs": 8, "total_steps": 50_000_000, "device": "cpu"})));
    wait_metrics(&server.addr, id, 3);
    // box-f is the only machine, and busy: both wait there.
    let placed = launch(&server.addr, small_run());
    let named = launch(&server.addr, on("box-f", small_run()));
    for queued in [placed, named] {
        let run = get_json(&server.addr, &format!("/api/runs/{queued}"));
        assert_eq!((run["status"].as_str(), run["machine"].as_str()), (Some("queued"), Some("box-f")), "{run}");
    }
    let _other = worker(&server.addr, "box-g", WORKER_TOKEN);
    connected(&server.addr, "box-g");
    let before = metrics(&server.addr, id).len();
    unsafe { libc::kill(frozen.child.id() as i32, libc::SIGSTOP) };

    // Taken for gone after its silence: from then on nothing more can come from it, and
    // its run waits out the grace period (2 s) before it is interrupted.
    let box_f = || {
        let machines = get_json(&server.addr, "/api/machines");
        machines.as_array().unwrap().iter().find(|m| m["name"] == "box-f").cloned().unwrap()
    };
    let start = Instant::now();
    while box_f()["connected"] == true {
        assert!(start.elapsed() < Duration::from_secs(60), "box-f is never taken for gone");
        std::thread::sleep(Duration::from_millis(50));
    }
    let gone = Instant::now();
    let (status, kept) =
        (get_json(&server.addr, &format!("/api/runs/{id}"))["status"].clone(), metrics(&server.addr, id).len());
    assert_eq!(status, "running", "the run waits out the grace period");
    let run = wait_for(&server.addr, id, &["interrupted", "failed", "finished"]);
    let waited = gone.elapsed();
    assert_eq!(run["status"], "interrupted", "{run}");
    assert!(
        waited >= Duration::from_millis(1800),
        "interrupted {waited:?} after its machine was gone, within the 2 s grace"
    );
    let message = run["message"].as_str().unwrap();
    assert!(message.contains("'box-f' has been away"), "{message}");
    // What it sent is kept whole (each update once, none missing), and nothing comes after
    // the end.
    let after = metrics(&server.addr, id);
    assert_whole(&after);
    assert!(
        after.len() >= kept && kept >= before,
        "{before} metrics before the freeze, {kept} when gone, {}",
        after.len()
    );
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(metrics(&server.addr, id).len(), after.len(), "nothing after the run ended");
    let run = wait_for(&server.addr, placed, &["finished", "failed", "interrupted"]);
    assert_eq!((run["status"].as_str(), run["machine"].as_str()), (Some("finished"), Some("box-g")), "{run}");
    let run = wait_for(&server.addr, named, &["finished", "failed", "interrupted"]);
    assert_eq!(run["status"], "interrupted", "{run}");
    let message = run["message"].as_str().unwrap();
    assert!(message.contains("'box-f' has been away") && message.contains("did not start"), "{message}");
    let machines = get_json(&server.addr, "/api/machines");
    let f = machines.as_array().unwrap().iter().find(|m| m["name"] == "box-f").unwrap();
    assert_eq!((f["connected"].as_bool(), f["queued"].as_u64()), (Some(false), Some(0)), "{machines}");
}

/// The lab is killed twice, mid-run and as a run ends on its worker; the worker keeps what
/// it cannot send and the lab, back, stores it all. Its store's queue is 16 writes (the
/// hook `HOTLAB_STORE_QUEUE`), far below the backlog, so the backlog reaches both the
/// back-pressure (half the queue) and, were that missing, the shedding: every update's
/// metrics are counted against the report's env steps, the tail included.
#[test]
fn the_lab_killed_and_restarted_mid_run_loses_and_doubles_nothing() {
    let data = tempfile::tempdir().unwrap();
    let small = [("HOTLAB_STORE_QUEUE", "16")];
    let mut server = start_env(data.path(), 0, &small);
    let port: u16 = server.addr.rsplit(':').next().unwrap().parse().unwrap();
    let w = worker(&server.addr, "box-3", WORKER_TOKEN);
    connected(&server.addr, "box-3");
    // Long enough to go on while the lab is down, and to end by itself.
    let spec = json!({"envs": 8, "steps": 32, "total_steps": 50_000_000, "seconds": 8.0, "device": "cpu"});
    let id = launch(&server.addr, on("box-3", spec));
    wait_metrics(&server.addr, id, 5);
    unsafe { libc::kill(server.child.id() as i32, libc::SIGKILL) };
    let _ = server.child.wait();
    // The worker trains on and keeps what it cannot send: it says so when it retries.
    w.wait_for_line(|l| l.contains("is unreachable") && !l.contains("(0 bytes waiting"));
    let again = start_env(data.path(), port, &small);
    let run = wait_for(&again.addr, id, &["finished", "failed", "interrupted", "stopped"]);
    assert_eq!(run["status"], "finished", "{run}");
    let ms = metrics(&again.addr, id);
    assert!(ms.len() > 5, "{} metrics", ms.len());
    assert_whole(&ms);
    // Every event (a fast machine makes more than a default page of them in 8 s).
    let events = get_json(&again.addr, &format!("/api/runs/{id}/events?limit=100000"));
    assert_counted(&ms, &events, 8 * 32);
    let seqs: Vec<u64> = events.as_array().unwrap().iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "seqs strictly increasing");
    // Events came after the restart: numbered past the gap a restart leaves.
    assert!(
        *seqs.last().unwrap() > 1_000_000,
        "the run went on after the lab restarted: {:?}",
        &seqs[seqs.len() - 3..]
    );
    let reports = events.as_array().unwrap().iter().filter(|e| e["kind"] == "report").count();
    assert_eq!(reports, 1);
    // A run that ends while the lab is down arrives whole when it is back.
    let mut again = again;
    let short = launch(&again.addr, on("box-3", small_run()));
    wait_metrics(&again.addr, short, 1);
    unsafe { libc::kill(again.child.id() as i32, libc::SIGKILL) };
    let _ = again.child.wait();
    // Back only once the run has ended on the worker, the lab away.
    w.wait_for_line(|l| l.contains(&format!("run {short} ended on this worker")));
    let third = start_env(data.path(), port, &small);
    let run = wait_for(&third.addr, short, &["finished", "failed", "interrupted"]);
    assert_eq!(run["status"], "finished", "{run}");
    let ms = metrics(&third.addr, short);
    assert_eq!(ms.len(), 20, "every update of 20480 steps in 8 × 128");
    assert_whole(&ms);
    assert_counted(&ms, &get_json(&third.addr, &format!("/api/runs/{short}/events?limit=100000")), 8 * 128);
}

/// The stored metrics account for every env step the run's report counts: one per update
/// of `batch` steps, the last at the report's total (a lost tail fails here).
fn assert_counted(ms: &[Value], events: &Value, batch: u64) {
    let report = events.as_array().unwrap().iter().find(|e| e["kind"] == "report").expect("a report");
    let steps = report["report"]["env_steps"].as_u64().unwrap();
    assert_eq!(ms.len() as u64 * batch, steps, "{} updates of {batch} stored, the report counts {steps}", ms.len());
    assert_eq!(ms.last().unwrap()["metrics"]["global_step"].as_u64(), Some(steps));
}

/// The lab dies after a run's last message came and before its final status is stored:
/// the worker must still have that message (it was not acknowledged), and the restarted
/// lab ends the run whole, never taking it for a run the worker lost.
#[test]
fn the_lab_killed_as_a_run_ends_still_ends_it_whole() {
    let data = tempfile::tempdir().unwrap();
    let hold = [("HOTLAB_SLOW_END_MS", "10000")];
    let server = start_env(data.path(), 0, &hold);
    let port: u16 = server.addr.rsplit(':').next().unwrap().parse().unwrap();
    let w = worker(&server.addr, "box-5", WORKER_TOKEN);
    connected(&server.addr, "box-5");
    let id = launch(&server.addr, on("box-5", small_run()));
    w.wait_for_line(|l| l.contains(&format!("run {id} ended on this worker")));
    wait_metrics(&server.addr, id, 20);
    // Past two acknowledgements (every 0.5 s), well inside the 10 s hold.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(get_json(&server.addr, &format!("/api/runs/{id}"))["status"], "running", "still held");
    let mut server = server;
    unsafe { libc::kill(server.child.id() as i32, libc::SIGKILL) };
    let _ = server.child.wait();
    let again = lab(data.path(), port);
    let run = wait_for(&again.addr, id, &["finished", "failed", "interrupted"]);
    assert_eq!(run["status"], "finished", "{run}");
    let ms = metrics(&again.addr, id);
    assert_eq!(ms.len(), 20, "every update of 20480 steps in 8 × 128");
    assert_whole(&ms);
}

#[test]
fn a_wrong_token_or_another_version_is_refused_naming_why() {
    let data = tempfile::tempdir().unwrap();
    let server = lab(data.path(), 0);
    for token in ["not-the-worker-token", TOKEN] {
        let mut w = worker(&server.addr, "intruder", token);
        let start = Instant::now();
        let status = loop {
            if let Some(s) = w.child.try_wait().unwrap() {
                break s;
            }
            assert!(start.elapsed() < Duration::from_secs(30), "a refused worker gives up");
            std::thread::sleep(Duration::from_millis(50));
        };
        std::thread::sleep(Duration::from_millis(100));
        let err = w.log.lock().unwrap().clone();
        assert!(!status.success());
        assert!(err.contains("refused") && err.contains("worker token"), "{err}");
    }
    assert!(get_json(&server.addr, "/api/machines").as_array().unwrap().is_empty());
    // A worker of another version: refused before the upgrade, naming both versions.
    use tokio_tungstenite::tungstenite::{client::IntoClientRequest, Error};
    let mut req = format!("ws://{}/api/worker", server.addr).into_client_request().unwrap();
    for (k, v) in [
        ("authorization", format!("Bearer {WORKER_TOKEN}")),
        ("x-hotlab-worker", "old-box".into()),
        ("x-hotlab-version", "0.0.1".into()),
        ("x-hotlab-link", "7".into()),
    ] {
        req.headers_mut().insert(k, v.parse().unwrap());
    }
    let ours = get_json(&server.addr, "/api/system")["version"].as_str().unwrap().to_string();
    match runtime().block_on(tokio_tungstenite::connect_async(req)) {
        Err(Error::Http(res)) => {
            assert_eq!(res.status().as_u16(), 409);
            let body = String::from_utf8_lossy(res.body().as_deref().unwrap_or_default()).into_owned();
            assert!(body.contains("0.0.1") && body.contains(&ours) && body.contains("link protocol 7"), "{body}");
        }
        other => panic!("another version must be refused: {:?}", other.map(|(_, r)| r.status())),
    }
}

#[test]
fn where_a_run_goes_is_checked_naming_the_field() {
    let data = tempfile::tempdir().unwrap();
    let server = start(data.path(), &["--local-name", "here", "--worker-token", WORKER_TOKEN]);
    let machines = get_json(&server.addr, "/api/machines");
    assert_eq!(machines.as_array().unwrap().len(), 1);
    assert_eq!((machines[0]["name"].as_str(), machines[0]["local"].as_bool()), (Some("here"), Some(true)));
    let refused = |spec: Value| {
        let (status, body) = http(&server.addr, "POST", "/api/runs", &[AUTH], spec.to_string().as_bytes());
        assert_eq!(status, 400, "{body}");
        serde_json::from_str::<Value>(&body).unwrap()["error"].clone()
    };
    let e = refused(on("nowhere", small_run()));
    assert_eq!(e["field"], "machine");
    assert!(e["message"].as_str().unwrap().contains("here"), "names the machines there are: {e}");
    assert_eq!(refused(json!({"machine": 5}))["field"], "machine");
    if get_json(&server.addr, "/api/system")["cuda_available"] == false {
        let mut spec = on("here", small_run());
        spec["device"] = json!("cuda");
        let e = refused(spec);
        assert_eq!(e["field"], "device");
        assert!(e["message"].as_str().unwrap().contains("here"), "{e}");
    }
    let id = launch(&server.addr, on("here", small_run()));
    let run = wait_for(&server.addr, id, &["finished", "failed"]);
    assert_eq!((run["status"].as_str(), run["machine"].as_str()), (Some("finished"), Some("here")));
    drop(server);
    // A lab with no machine at all says how to get one.
    let data = tempfile::tempdir().unwrap();
    let bare = lab(data.path(), 0);
    let (status, body) = http(&bare.addr, "POST", "/api/runs", &[AUTH], small_run().to_string().as_bytes());
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("hotlab worker"), "{body}");
}

/// A real Ray head from the project's `.venv` (`cargo xtask test` installs `ray[default]`),
/// with CPUs only, on ports of its own and in a temp dir of its own; dropped, it stops its
/// own processes only (`ray stop` would stop every Ray on the machine).
struct RayHead {
    dir: tempfile::TempDir,
    url: String,
}

/// The environment variable that marks a test's Ray head's processes.
const HEAD_MARK: &str = "HOTLAB_TEST_RAY_HEAD";

/// A port nothing listens on now.
fn free_port() -> String {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port().to_string()
}

impl RayHead {
    fn start() -> Self {
        let ray = python().with_file_name("ray");
        // Short: Ray's socket paths live under it (at most 107 bytes).
        let dir = tempfile::Builder::new().prefix("ray").tempdir_in("/tmp").unwrap();
        let dashboard = free_port();
        let mut command = std::process::Command::new(&ray);
        command.args(["start", "--head", "--num-cpus", "2", "--num-gpus", "0", "--disable-usage-stats"]);
        command.args(["--include-dashboard", "true", "--dashboard-host", "127.0.0.1", "--dashboard-port", &dashboard]);
        command.arg("--temp-dir").arg(dir.path());
        // Every process of this head inherits it (Ray renames its processes, so their
        // command lines do not say whose they are; their environments do).
        command.env(HEAD_MARK, dir.path());
        for flag in [
            "--port",
            "--ray-client-server-port",
            "--dashboard-agent-listen-port",
            "--dashboard-agent-grpc-port",
            "--metrics-export-port",
            "--node-manager-port",
            "--object-manager-port",
            "--runtime-env-agent-port",
        ] {
            command.args([flag, &free_port()]);
        }
        let out = command
            .output()
            .unwrap_or_else(|e| panic!("{}: {e} (cargo xtask test installs ray[default] into .venv)", ray.display()));
        let head = Self { dir, url: format!("http://127.0.0.1:{dashboard}") };
        assert!(out.status.success(), "ray start: {}", String::from_utf8_lossy(&out.stderr));
        let start = Instant::now();
        let addr = format!("127.0.0.1:{dashboard}");
        while try_http(&addr, "GET", "/api/version", &[], b"").map(|(s, _)| s) != Some(200) {
            assert!(start.elapsed() < Duration::from_secs(90), "Ray's job API never answered");
            std::thread::sleep(Duration::from_millis(250));
        }
        head
    }

    /// This head's processes: those whose environment carries its mark.
    fn processes(&self) -> Vec<i32> {
        marked(&self.mark())
    }

    /// What marks this head's processes.
    fn mark(&self) -> String {
        format!("{HEAD_MARK}={}", self.dir.path().display())
    }
}

/// The processes whose environment carries `mark` (`KEY=VALUE`).
fn marked(mark: &str) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|&b| b == 0).any(|kv| kv == mark.as_bytes()))
        })
        .collect()
}

impl Drop for RayHead {
    fn drop(&mut self) {
        // Its processes by their temp dir, as often as new ones turn up (workers spawn late).
        for signal in [libc::SIGTERM, libc::SIGTERM, libc::SIGKILL, libc::SIGKILL] {
            let pids = self.processes();
            if pids.is_empty() {
                break;
            }
            for pid in pids {
                // SAFETY: a plain kill(2) of a process this test's head started.
                unsafe { libc::kill(pid, signal) };
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

#[test]
fn runs_go_to_ray_as_jobs_and_stream_back_and_a_head_that_is_down_fails_them() {
    let head = RayHead::start();
    let data = tempfile::tempdir().unwrap();
    let server = start(data.path(), &["--local-worker", "off", "--worker-token", WORKER_TOKEN, "--ray", &head.url]);
    let machines = get_json(&server.addr, "/api/machines");
    assert_eq!((machines[0]["name"].as_str(), machines[0]["ray"].as_bool()), (Some("ray"), Some(true)), "{machines}");
    // No machine named: Ray places it.
    let submitted = Instant::now();
    let id = launch(&server.addr, small_run());
    let streamed = runtime().block_on(follow(&server.addr, &format!("run={id}&since=0")));
    assert_eq!(streamed.last().unwrap()["status"], "finished", "{:?}", streamed.last());
    eprintln!("a Ray run, submission to its end: {:.1} s", submitted.elapsed().as_secs_f64());
    assert_whole(&metrics(&server.addr, id));
    let start_t = Instant::now();
    let run = loop {
        let run = get_json(&server.addr, &format!("/api/runs/{id}"));
        if run["ray_job"]["status"] == "SUCCEEDED" {
            break run;
        }
        assert!(start_t.elapsed() < Duration::from_secs(60), "the job never succeeded: {run}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(run["machine"], "ray");
    assert!(run["ray_job"]["id"].as_str().unwrap().starts_with(&format!("hotlab-run-{id}-")), "{run}");
    // The job's own worker is not one of the lab's machines.
    assert_eq!(get_json(&server.addr, "/api/machines").as_array().unwrap().len(), 1);
    // Stop goes through Ray too.
    let long = launch(&server.addr, json!({"envs": 8, "total_steps": 50_000_000, "device": "cpu"}));
    wait_metrics(&server.addr, long, 2);
    let (status, body) = http(&server.addr, "POST", &format!("/api/runs/{long}/stop"), &[AUTH], b"");
    assert_eq!(status, 200, "{body}");
    assert_eq!(wait_for(&server.addr, long, &["stopped", "failed", "finished"])["status"], "stopped");
    drop(server);
    // A head that is down: the run fails at once with what went wrong; nothing hangs.
    let data = tempfile::tempdir().unwrap();
    let server = start(data.path(), &["--local-worker", "off", "--ray", "http://127.0.0.1:1"]);
    let id = launch(&server.addr, small_run());
    let run = wait_for(&server.addr, id, &["failed", "finished"]);
    assert_eq!(run["status"], "failed");
    let message = run["message"].as_str().unwrap();
    assert!(message.contains("Ray") && message.contains("127.0.0.1:1"), "{message}");
    drop(server);

    // The head's cleanup ends every process of its own and no other: a bystander with a
    // mark of another head (as a second test's head would have) lives on.
    let (mine, theirs) = (head.mark(), format!("{HEAD_MARK}=/tmp/another-head"));
    assert!(!marked(&mine).is_empty(), "the head's processes carry its mark");
    let mut bystander =
        std::process::Command::new("sleep").arg("300").env(HEAD_MARK, "/tmp/another-head").spawn().unwrap();
    drop(head);
    assert_eq!(marked(&mine), Vec::<i32>::new(), "a process of the head outlived it");
    assert_eq!(bystander.try_wait().unwrap(), None, "another head's process was ended");
    assert_eq!(marked(&theirs), [bystander.id() as i32]);
    bystander.kill().unwrap();
    let _ = bystander.wait();
}

/// `hotlab sweep` with `args`, small runs of `steps` env steps on the CPU; its JSON.
fn sweep_cli(args: &[&str], steps: &str) -> Value {
    let small = ["--total-steps", steps, "--steps", "64", "--device", "cpu", "--json"];
    let out = run(hotlab().arg("sweep").args(args).args(small));
    assert!(out.status.success(), "{}", stderr(&out));
    last_json(&out)
}

#[test]
fn a_sweep_runs_on_the_workers_in_turn_and_names_the_best_cell() {
    let data = tempfile::tempdir().unwrap();
    let server = lab(data.path(), 0);
    let _a = worker(&server.addr, "box-a", WORKER_TOKEN);
    let _b = worker(&server.addr, "box-b", WORKER_TOKEN);
    connected(&server.addr, "box-a");
    connected(&server.addr, "box-b");
    let refused = |body: Value| {
        let (status, text) = http(&server.addr, "POST", "/api/sweeps", &[AUTH], body.to_string().as_bytes());
        assert_eq!(status, 400, "{text}");
        serde_json::from_str::<Value>(&text).unwrap()["error"]["field"].as_str().unwrap().to_string()
    };
    assert_eq!(refused(json!({"grid": "speed=1,2"})), "grid");
    assert_eq!(refused(json!({"grid": "envs=4,8", "on": "moon"})), "on");
    assert_eq!(refused(json!({"grid": "envs=4,8", "on": "ray"})), "on");
    assert_eq!(refused(json!({"grid": "envs=4,8", "spec": {"envs": -1}})), "envs");
    // The CLI, through the lab: its table in JSON at the end.
    let lab_url = format!("http://{}", server.addr);
    let sweep = sweep_cli(&["--grid", "envs=4,8", "--on", "workers", "--lab", &lab_url, "--token", TOKEN], "4096");
    assert_eq!(sweep["status"], "finished", "{sweep}");
    let cells = sweep["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2);
    let machines: Vec<&str> = cells.iter().map(|c| c["machine"].as_str().unwrap()).collect();
    assert_eq!(machines, ["box-a", "box-b"], "the workers in turn");
    for c in cells {
        assert_eq!(c["status"], "finished", "{c}");
        assert!(c["sps"].as_f64().unwrap() > 0.0);
        let run = get_json(&server.addr, &format!("/api/runs/{}", c["run"]));
        assert_eq!(run["machine"], c["machine"]);
    }
    let best = sweep["best"].as_u64().unwrap() as usize;
    let fastest = cells.iter().map(|c| c["sps"].as_f64().unwrap()).fold(0.0, f64::max);
    assert_eq!(cells[best]["sps"].as_f64().unwrap(), fastest);
    // Kept by the lab.
    let listed = get_json(&server.addr, "/api/sweeps");
    assert_eq!(listed[0]["id"], sweep["id"]);
    assert_eq!(get_json(&server.addr, &format!("/api/sweeps/{}", sweep["id"]))["best"], sweep["best"]);
}

#[test]
fn a_local_sweep_trains_each_cell_here_and_bad_grids_are_refused() {
    let sweep = sweep_cli(&["--grid", "backend=vectorized,sequential", "--envs", "4"], "2048");
    let labels: Vec<&str> = sweep["cells"].as_array().unwrap().iter().map(|c| c["label"].as_str().unwrap()).collect();
    assert_eq!(labels, ["backend=vectorized", "backend=sequential"]);
    assert!(sweep["best"].is_u64(), "{sweep}");
    let table =
        run(hotlab().args(["sweep", "--grid", "envs=4", "--total-steps", "1024", "--steps", "64", "--device", "cpu"]));
    assert!(stdout(&table).contains("best: envs=4"), "{}", stdout(&table));
    for (args, flag) in [
        (vec!["sweep", "--grid", "nope=1"], "--grid"),
        (vec!["sweep", "--grid", "envs=4", "--on", "ray"], "--lab"),
        (vec!["sweep", "--grid", "envs=4", "--on", "moon"], "--on"),
    ] {
        let out = run(hotlab().args(&args));
        assert!(!out.status.success());
        assert!(stderr(&out).contains(flag), "{args:?}: {}", stderr(&out));
    }
}

/// Issue 38: the GPU box's lab check, dry on the CPU: `hotlab lab-check` starts a lab and a
/// worker named gpu-box, places a run there and follows it over the WebSocket (every event
/// stored), stops a second one mid-run and audits the first on the same machine.
#[test]
fn the_gpu_box_lab_check_passes_dry_on_the_cpu() {
    let out = hotlab().args(["lab-check", "--device", "cpu", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: Value = serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().last().unwrap()).unwrap();
    let names: Vec<&str> = r["checks"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "run_trains_on_the_machine",
            "events_streamed_and_stored",
            "phases_device_timed",
            "machines_panel_shows_the_load",
            "stop_mid_run",
            "audit_on_the_machine_gives_a_verdict"
        ]
    );
    assert_eq!(r["ok"], true, "{r}");
    assert!(r["checks"][1]["detail"]["received"].as_u64().unwrap() > 0, "{r}");
    assert_eq!(r["checks"][4]["detail"]["status"], "stopped", "{r}");
    // Asked for CUDA where there is none: refused, naming the flag.
    if !tch::Cuda::is_available() {
        let out = hotlab().args(["lab-check", "--device", "cuda"]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("--device") && err.contains("--device cpu"), "{err}");
    }
}
