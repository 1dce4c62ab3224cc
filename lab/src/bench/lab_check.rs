//! `hotlab lab-check`: the lab end to end on this machine, as the web form drives it. It
//! starts `hotlab serve` (with a token and a worker token, no local machine) and
//! `hotlab worker --name gpu-box`, then, over REST and the WebSocket:
//! - a run placed on `gpu-box` trains on the device asked for; a WebSocket client counts
//!   its events, which must all be in the store, and its report's phases are device-timed
//!   on CUDA; the Machines panel's load (GPU memory and utilization) is sampled meanwhile;
//! - a second run is stopped mid-run and must end `stopped` promptly;
//! - an audit of the first run is placed on the same machine and returns a verdict.
//!
//! `scripts/gpu-check` runs it with `--device cuda` on a GPU box; CI runs it with
//! `--device cpu` (the same code, a dry run of the GPU box's check).

use anyhow::{anyhow, bail, Context, Result};
use futures_util::StreamExt;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const TOKEN: &str = "lab-check-token-0123456789";
const WORKER_TOKEN: &str = "lab-check-worker-0123456789";
/// The worker's name, as the GPU box's check names it.
pub const MACHINE: &str = "gpu-box";

/// What to run: on which device, and how long the runs train.
pub struct Options {
    /// The `hotlab` binary that serves the lab and runs the worker.
    pub exe: std::path::PathBuf,
    /// `cuda` or `cpu` (the dry run).
    pub device: String,
    /// Environment steps of the watched run.
    pub total_steps: u64,
    /// Seconds of each of the audit's runs.
    pub audit_seconds: f64,
}

impl Options {
    pub fn for_device(exe: std::path::PathBuf, device: &str) -> Self {
        let cuda = device.starts_with("cuda");
        Options {
            exe,
            device: device.into(),
            total_steps: if cuda { 20_000_000 } else { 300_000 },
            audit_seconds: if cuda { 3.0 } else { 0.5 },
        }
    }

    /// The watched run's spec, placed on the worker: CartPole on the device backend (the
    /// rollout a CUDA graph on CUDA).
    fn run_spec(&self, total_steps: u64) -> Value {
        let cuda = self.device.starts_with("cuda");
        json!({"machine": MACHINE, "device": self.device, "workload": {"cartpole": {}},
               "envs": if cuda { 4096 } else { 64 }, "steps": 16, "total_steps": total_steps,
               "ppo": {"minibatches": 4, "lr": 0.001},
               "exec": {"backend": "device", "inference": if cuda { "graph" } else { "fused" }}})
    }
}

/// A child process killed with the check.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs the check; every part's outcome is in the summary (`ok` false when one failed).
pub fn run(opts: &Options, progress: &dyn Fn(&str)) -> Result<Value> {
    let dir = tempfile::tempdir()?;
    let exe = opts.exe.as_path();
    progress("starting hotlab serve and hotlab worker --name gpu-box");
    let (server, addr) = serve(exe, &dir.path().join("lab"))?;
    let worker = Proc(
        Command::new(exe)
            .args(["worker", "--lab", &format!("http://{addr}"), "--worker-token", WORKER_TOKEN, "--name", MACHINE])
            .args(["--max-runs", "1", "--data-dir"])
            .arg(dir.path().join("worker"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?,
    );
    let machine = wait(Duration::from_secs(60), || {
        let machines = get_json(&addr, "/api/machines").ok()?;
        machines.as_array()?.iter().find(|m| m["name"] == MACHINE && m["connected"] == true).cloned()
    })
    .context("the worker never connected")?;
    let devices = machine["system"]["devices"].as_array().cloned().unwrap_or_default();
    let gpu = devices.into_iter().find(|d| d["id"].as_str().is_some_and(|id| id.starts_with("cuda")));

    let mut checks = Vec::new();
    progress("a run on gpu-box, followed over the WebSocket");
    let (watched, figures) = check_watched_run(opts, &addr, &mut checks)?;
    progress("a run stopped mid-run");
    let stop = check_stop(opts, &addr, &mut checks)?;
    progress("an audit placed on gpu-box");
    check_audit(opts, &addr, watched, &mut checks)?;
    drop(worker);
    drop(server);
    let ok = checks.iter().all(|c| c["ok"] == true);
    Ok(json!({"device": opts.device, "gpu": gpu, "client": "websocket (tokio-tungstenite), no browser",
              "ok": ok, "checks": checks, "figures": {"watched": figures, "stop": stop}}))
}

fn check(checks: &mut Vec<Value>, name: &str, ok: bool, detail: Value) {
    checks.push(json!({"name": name, "ok": ok, "detail": detail}));
}

/// The run posted as the form posts it, followed over the WebSocket from its submission.
fn check_watched_run(opts: &Options, addr: &str, checks: &mut Vec<Value>) -> Result<(u64, Value)> {
    let posted = Instant::now();
    let id = launch(addr, opts.run_spec(opts.total_steps))?;
    let load = sample_load(addr.to_string());
    let events = follow(addr, id, None)?;
    let samples = load.finish();
    let run = get_json(addr, &format!("/api/runs/{id}"))?;
    let summary = get_json(addr, &format!("/api/runs/{id}/summary"))?;
    // Every status, metrics, profile and report event must reach the store (its writer may
    // commit the last ones just after the WebSocket sent them); rollout frames are thinned
    // once a run ends, and live ones (seq 0) never kept.
    let mut stored = Vec::new();
    let mut missing = usize::MAX;
    let mut absent_kinds: Vec<String> = Vec::new();
    let start = Instant::now();
    while missing > 0 && start.elapsed() < Duration::from_secs(10) {
        stored =
            get_json(addr, &format!("/api/runs/{id}/events?limit=100000"))?.as_array().cloned().unwrap_or_default();
        let seqs: std::collections::HashSet<u64> = stored.iter().filter_map(|e| e["seq"].as_u64()).collect();
        let absent: Vec<&Value> = events
            .iter()
            .map(|(_, e)| e)
            .filter(|e| e["kind"] != "rollout" && e["seq"].as_u64().is_some_and(|s| !seqs.contains(&s)))
            .collect();
        missing = absent.len();
        absent_kinds = absent.iter().map(|e| format!("{}#{}", e["kind"].as_str().unwrap_or("?"), e["seq"])).collect();
        std::thread::sleep(Duration::from_millis(if missing > 0 { 200 } else { 0 }));
    }
    let metrics = events.iter().filter(|(_, e)| e["kind"] == "metrics").count();
    let first = events.first().map(|(t, _)| t.duration_since(posted).as_secs_f64());
    let span = match (events.first(), events.last()) {
        (Some(a), Some(b)) => b.0.duration_since(a.0).as_secs_f64(),
        _ => 0.0,
    };
    let status = run["status"].as_str().unwrap_or("?").to_string();
    check(
        checks,
        "run_trains_on_the_machine",
        status == "finished" && run["machine"] == MACHINE && metrics > 0,
        json!({"run": id, "status": status, "machine": run["machine"], "message": run["message"],
               "mean_return": summary["last"]["mean_return_last_100"], "sps": run["sps"]}),
    );
    check(
        checks,
        "events_streamed_and_stored",
        !events.is_empty() && missing == 0,
        json!({"received": events.len(), "metrics": metrics, "stored": stored.len(), "missing_from_store": missing, "missing": absent_kinds}),
    );
    let phases = summary["total"]["phases"].as_array().cloned().unwrap_or_default();
    let timed = phases.iter().filter(|p| p["device_s"].as_f64().is_some_and(|s| s > 0.0)).count();
    let cuda = opts.device.starts_with("cuda");
    check(
        checks,
        "phases_device_timed",
        if cuda { timed > 0 } else { timed == 0 },
        json!({"phases": phases.len(), "cuda_event_timed": timed,
               "expected": if cuda { "CUDA-event time on the phases" } else { "none on the CPU" }}),
    );
    let peak_mem = samples.iter().filter_map(|l| l["gpu_memory_used_bytes"].as_u64()).max();
    let peak_util = samples
        .iter()
        .filter_map(|l| l["gpu_utilization"].as_f64())
        .fold(None, |m: Option<f64>, u| Some(m.map_or(u, |m| m.max(u))));
    check(
        checks,
        "machines_panel_shows_the_load",
        !cuda || peak_mem.is_some(),
        json!({"samples": samples.len(), "peak_gpu_memory_used_bytes": peak_mem, "peak_gpu_utilization": peak_util}),
    );
    let figures = json!({"submission_to_first_event_s": first, "events": events.len(),
                         "events_per_s": if span > 0.0 { events.len() as f64 / span } else { 0.0 },
                         "sps": run["sps"]});
    Ok((id, figures))
}

/// A long run, stopped once it has reported an update.
fn check_stop(opts: &Options, addr: &str, checks: &mut Vec<Value>) -> Result<Value> {
    let id = launch(addr, opts.run_spec(1 << 40))?;
    let seen = Arc::new(Mutex::new(None::<Instant>));
    let asked = Arc::clone(&seen);
    let addr2 = addr.to_string();
    // Asked to stop from beside the WebSocket reader, at its first update.
    let events = follow(
        addr,
        id,
        Some(Box::new(move || {
            let mut s = asked.lock().unwrap();
            if s.is_none() {
                *s = Some(Instant::now());
                let _ = http(&addr2, "POST", &format!("/api/runs/{id}/stop"), b"");
            }
        })),
    )?;
    let asked_at = (*seen.lock().unwrap()).ok_or_else(|| anyhow!("run {id} ended before its first update"))?;
    let end = events.last().map(|(t, e)| (t.duration_since(asked_at).as_secs_f64(), e["status"].clone()));
    let run = get_json(addr, &format!("/api/runs/{id}"))?;
    let summary = get_json(addr, &format!("/api/runs/{id}/summary"))?;
    let latency = end.as_ref().map(|e| e.0).unwrap_or(f64::NAN);
    let spec = opts.run_spec(0);
    let rollout = spec["envs"].as_u64().unwrap_or(0) * spec["steps"].as_u64().unwrap_or(0);
    check(
        checks,
        "stop_mid_run",
        run["status"] == "stopped" && latency < 10.0,
        json!({"run": id, "status": run["status"], "latency_s": latency,
               "steps_at_end": summary["last"]["global_step"], "rollout_steps": rollout}),
    );
    Ok(json!({"latency_s": latency}))
}

/// An audit of the watched run: its runs on the same machine, a verdict for its change.
fn check_audit(opts: &Options, addr: &str, run: u64, checks: &mut Vec<Value>) -> Result<()> {
    let body = json!({"changes": ["inference=eager"], "repeats": 2, "seconds": opts.audit_seconds});
    let (status, text) = http(addr, "POST", &format!("/api/runs/{run}/audit"), body.to_string().as_bytes())?;
    if status != 201 {
        bail!("POST /api/runs/{run}/audit: {status} {text}");
    }
    let id = serde_json::from_str::<Value>(&text)?["id"].as_u64().ok_or_else(|| anyhow!("no audit id: {text}"))?;
    let audit = wait(Duration::from_secs(600), || {
        let a = get_json(addr, &format!("/api/audits/{id}")).ok()?;
        matches!(a["status"].as_str(), Some("finished" | "failed" | "stopped")).then_some(a)
    })
    .context("the audit never ended")?;
    let machines: Vec<Value> = audit["runs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| get_json(addr, &format!("/api/runs/{}", r["run"])).ok().map(|r| r["machine"].clone()))
        .collect();
    let change = &audit["report"]["changes"][0];
    check(
        checks,
        "audit_on_the_machine_gives_a_verdict",
        audit["status"] == "finished" && change["verdict"].is_string() && machines.iter().all(|m| m == MACHINE),
        json!({"audit": id, "status": audit["status"], "change": change["change"], "verdict": change["verdict"],
               "ratio": change["ratio"], "noise": audit["report"]["noise"], "runs": machines.len()}),
    );
    Ok(())
}

/// `hotlab serve` on a free port, with no local machine: (the process, its address).
fn serve(exe: &Path, data: &Path) -> Result<(Proc, String)> {
    let mut child = Command::new(exe)
        .args(["serve", "--host", "127.0.0.1", "--port", "0", "--token", TOKEN, "--worker-token", WORKER_TOKEN])
        .args(["--local-worker", "off", "--data-dir"])
        .arg(data)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut out = BufReader::new(child.stdout.take().expect("piped"));
    let server = Proc(child);
    let mut line = String::new();
    out.read_line(&mut line)?;
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    let addr = line.split("http://").nth(1).and_then(|r| r.split('/').next());
    let addr = addr.ok_or_else(|| anyhow!("hotlab serve printed no URL: {line:?}"))?.to_string();
    Ok((server, addr))
}

/// Polls `f` until it answers or `limit` passes.
fn wait<T>(limit: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Some(v) = f() {
            return Some(v);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    None
}

fn launch(addr: &str, spec: Value) -> Result<u64> {
    let (status, body) = http(addr, "POST", "/api/runs", spec.to_string().as_bytes())?;
    if status != 201 {
        bail!("POST /api/runs: {status} {body}");
    }
    serde_json::from_str::<Value>(&body)?["id"].as_u64().ok_or_else(|| anyhow!("no run id: {body}"))
}

/// The run's events over the WebSocket until its final status, each with when it came;
/// `on_update` is called at each metrics event.
type OnUpdate = Option<Box<dyn Fn() + Send>>;
fn follow(addr: &str, run: u64, on_update: OnUpdate) -> Result<Vec<(Instant, Value)>> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async {
        let url = format!("ws://{addr}/api/ws?run={run}");
        let (mut ws, _) = tokio_tungstenite::connect_async(url).await?;
        let mut got = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(600);
        while let Ok(Some(msg)) = tokio::time::timeout_at(deadline, ws.next()).await {
            let tokio_tungstenite::tungstenite::Message::Text(text) = msg? else { continue };
            let e: Value = serde_json::from_str(&text)?;
            let done = e["kind"] == "status" && !matches!(e["status"].as_str(), Some("queued" | "running"));
            if e["kind"] == "metrics" {
                if let Some(f) = &on_update {
                    f();
                }
            }
            got.push((Instant::now(), e));
            if done {
                return Ok(got);
            }
        }
        bail!("run {run}: the WebSocket ended before its final status ({} events)", got.len())
    })
}

/// The worker's load as the Machines panel reads it, every 200 ms until finished.
struct LoadSampler {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Vec<Value>>,
}

fn sample_load(addr: String) -> LoadSampler {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let thread = std::thread::spawn(move || {
        let mut samples = Vec::new();
        while !flag.load(Ordering::Relaxed) {
            if let Ok(m) = get_json(&addr, "/api/machines") {
                if let Some(load) = m.as_array().and_then(|a| a.iter().find(|m| m["name"] == MACHINE)) {
                    samples.push(load["load"].clone());
                }
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        samples
    });
    LoadSampler { stop, thread }
}

impl LoadSampler {
    fn finish(self) -> Vec<Value> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap_or_default()
    }
}

fn get_json(addr: &str, path: &str) -> Result<Value> {
    let (status, body) = http(addr, "GET", path, b"")?;
    if status != 200 {
        bail!("GET {path}: {status} {body}");
    }
    Ok(serde_json::from_str(&body)?)
}

/// One HTTP/1.1 request with the operator token: (status, body).
fn http(addr: &str, method: &str, path: &str, body: &[u8]) -> Result<(u16, String)> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(60)))?;
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes())?;
    s.write_all(body)?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let raw = String::from_utf8_lossy(&raw);
    let status = raw.split_whitespace().nth(1).and_then(|c| c.parse().ok());
    let status = status.ok_or_else(|| anyhow!("{method} {path}: no HTTP answer"))?;
    let body = raw.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    Ok((status, body))
}
