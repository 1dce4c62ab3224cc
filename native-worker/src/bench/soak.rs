//! `hotlab bench soak`: a real lab (`hotlab serve`, its own process) with one long run,
//! first unwatched, then with many WebSocket viewers and clients reading its history in a
//! loop. Measured: the server's resident memory over time, the run's steps/s and the
//! share of the trainer's time spent publishing in each phase, events stored and dropped.

use anyhow::{bail, Context, Result};
use futures_util::StreamExt;
use serde::Serialize;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What to run.
pub struct SoakSpec {
    /// The `hotlab` binary to serve with.
    pub exe: std::path::PathBuf,
    /// The run, as `POST /api/runs` takes it.
    pub run: serde_json::Value,
    pub baseline: Duration,
    pub watched: Duration,
    pub viewers: usize,
    /// Clients reading `/events` in a loop, each read reaching back `reach` events (past
    /// the in-memory window, into the store).
    pub readers: usize,
    pub reach: u64,
    pub sample: Duration,
}

/// One phase's figures.
#[derive(Clone, Debug, Serialize)]
pub struct Phase {
    pub name: &'static str,
    pub seconds: f64,
    /// Env steps per second over the phase (from the run's metrics).
    pub steps_per_s: f64,
    /// The trainer's publishing time over the phase's wall time.
    pub publish_share: f64,
    pub rss_mib_first: f64,
    pub rss_mib_max: f64,
    pub rss_mib_last: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct SoakReport {
    pub viewers: usize,
    pub readers: usize,
    pub phases: Vec<Phase>,
    /// (seconds since the start, the server's RSS in MiB).
    pub rss_mib: Vec<(f64, f64)>,
    pub events_stored: u64,
    pub events_dropped: u64,
    /// Messages the viewers received, in all, and history reads the readers completed.
    pub viewer_messages: u64,
    pub history_reads: u64,
    /// From asking to stop the run to its final status, in seconds.
    pub stop_s: f64,
}

/// The lab's address and operator token.
#[derive(Clone)]
struct Client {
    addr: String,
    token: String,
}

/// A served lab with its own data dir, killed when dropped.
struct Lab {
    child: Child,
    client: Client,
    _data: tempfile::TempDir,
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Lab {
    fn start(exe: &std::path::Path) -> Result<Self> {
        let data = tempfile::tempdir()?;
        let token = crate::lab::auth::generate()?;
        let mut child = Command::new(exe)
            .args(["serve", "--host", "127.0.0.1", "--port", "0", "--token", &token, "--data-dir"])
            .arg(data.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {} serve", exe.display()))?;
        let mut out = BufReader::new(child.stdout.take().context("the server's stdout")?);
        let mut line = String::new();
        out.read_line(&mut line)?;
        std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
        let Some(addr) = line.split("http://").nth(1).and_then(|r| r.split('/').next()) else {
            bail!("the server printed no URL: {line:?}");
        };
        Ok(Self { client: Client { addr: addr.to_string(), token }, child, _data: data })
    }

    fn rss_mib(&self) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap_or_default();
        let kib = status.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.split_whitespace().next());
        kib.and_then(|k| k.parse::<f64>().ok()).map_or(0.0, |k| k / 1024.0)
    }
}

impl Client {
    fn request(&self, method: &str, path: &str, body: &str) -> Result<(u16, String)> {
        let mut s = TcpStream::connect(&self.addr)?;
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nAuthorization: Bearer {}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            self.addr,
            self.token,
            body.len()
        )?;
        let mut raw = Vec::new();
        s.read_to_end(&mut raw)?;
        let raw = String::from_utf8_lossy(&raw);
        let status = raw.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
        Ok((status, raw.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default()))
    }

    fn json(&self, path: &str) -> Result<serde_json::Value> {
        let (status, body) = self.request("GET", path, "")?;
        if status != 200 {
            bail!("GET {path}: {status} {body}");
        }
        Ok(serde_json::from_str(&body)?)
    }
}

/// Where the run stands: (env steps, its wall seconds, publishing seconds, last seq).
fn progress(lab: &Client, id: u64) -> Result<(f64, f64, f64, u64)> {
    let s = lab.json(&format!("/api/runs/{id}/summary"))?;
    let last = &s["last"];
    Ok((
        last["global_step"].as_f64().unwrap_or(0.0),
        last["wall_s"].as_f64().unwrap_or(0.0),
        s["info"]["publish_s"].as_f64().unwrap_or(0.0),
        s["info"]["events"].as_u64().unwrap_or(0),
    ))
}

/// Runs the soak; `tick` is called with the seconds done and the total, about once a second.
pub fn soak(spec: &SoakSpec, tick: &mut dyn FnMut(f64, f64)) -> Result<SoakReport> {
    let served = Lab::start(&spec.exe)?;
    let lab = &served.client;
    let (status, body) = lab.request("POST", "/api/runs", &spec.run.to_string())?;
    if status != 201 {
        bail!("the lab refused the run: {status} {body}");
    }
    let id = serde_json::from_str::<serde_json::Value>(&body)?["id"].as_u64().context("the run's id")?;
    let begin = Instant::now();
    while progress(lab, id)?.1 == 0.0 {
        if begin.elapsed() > Duration::from_secs(120) {
            bail!("the run reported no update within 2 minutes");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let total = (spec.baseline + spec.watched).as_secs_f64();
    let start = Instant::now();
    let mut rss = Vec::new();
    let mut phases = Vec::new();
    let mut measure = |name: &'static str, length: Duration, rss: &mut Vec<(f64, f64)>| -> Result<Phase> {
        let (steps0, wall0, pub0, _) = progress(lab, id)?;
        let from = rss.len();
        let end = Instant::now() + length;
        let mut next_sample = Instant::now();
        while Instant::now() < end {
            if Instant::now() >= next_sample {
                rss.push((start.elapsed().as_secs_f64(), served.rss_mib()));
                next_sample += spec.sample;
            }
            tick(start.elapsed().as_secs_f64(), total);
            std::thread::sleep(Duration::from_millis(200).min(end.saturating_duration_since(Instant::now())));
        }
        rss.push((start.elapsed().as_secs_f64(), served.rss_mib()));
        let (steps1, wall1, pub1, _) = progress(lab, id)?;
        let mine: Vec<f64> = rss[from..].iter().map(|r| r.1).collect();
        let wall = (wall1 - wall0).max(1e-9);
        Ok(Phase {
            name,
            seconds: length.as_secs_f64(),
            steps_per_s: (steps1 - steps0) / wall,
            publish_share: (pub1 - pub0) / wall,
            rss_mib_first: mine.first().copied().unwrap_or(0.0),
            rss_mib_max: mine.iter().copied().fold(0.0, f64::max),
            rss_mib_last: mine.last().copied().unwrap_or(0.0),
        })
    };
    phases.push(measure("unwatched", spec.baseline, &mut rss)?);

    // The watchers: viewers on an async runtime, readers on threads.
    let stop = Arc::new(AtomicBool::new(false));
    let (messages, reads) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
    for _ in 0..spec.viewers {
        let (url, messages) = (format!("ws://{}/api/ws?run={id}", lab.addr), Arc::clone(&messages));
        runtime.spawn(async move {
            let Ok((mut ws, _)) = tokio_tungstenite::connect_async(url).await else { return };
            while let Some(Ok(_)) = ws.next().await {
                messages.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
    let readers: Vec<_> = (0..spec.readers)
        .map(|_| {
            let (stop, reads, reach) = (Arc::clone(&stop), Arc::clone(&reads), spec.reach);
            let me = lab.clone();
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let last = progress(&me, id).map_or(0, |p| p.3);
                    if me
                        .request("GET", &format!("/api/runs/{id}/events?since={}", last.saturating_sub(reach)), "")
                        .is_ok()
                    {
                        reads.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    let watched = measure("watched", spec.watched, &mut rss);
    stop.store(true, Ordering::Relaxed);
    readers.into_iter().for_each(|r| drop(r.join()));
    phases.push(watched?);

    let asked = Instant::now();
    lab.request("POST", &format!("/api/runs/{id}/stop"), "")?;
    let info = loop {
        let info = lab.json(&format!("/api/runs/{id}"))?;
        if info["status"] != "running" {
            break info;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let stop_s = asked.elapsed().as_secs_f64();
    runtime.shutdown_timeout(Duration::from_secs(1));
    Ok(SoakReport {
        viewers: spec.viewers,
        readers: spec.readers,
        phases,
        rss_mib: rss,
        events_stored: info["events"].as_u64().unwrap_or(0),
        events_dropped: info["dropped"].as_u64().unwrap_or(0),
        viewer_messages: messages.load(Ordering::Relaxed),
        history_reads: reads.load(Ordering::Relaxed),
        stop_s,
    })
}
