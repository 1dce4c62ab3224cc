//! `hotlab bench soak`: a real lab (`hotlab serve`, its own process) with one long run,
//! first unwatched, then with many WebSocket viewers and clients reading its history in a
//! loop. Measured: the server's resident memory over time, the run's steps/s and the
//! share of the trainer's time spent publishing in each phase, events stored and dropped.
//!
//! The run can train on the lab's own machine, on a worker (`hotlab worker`, a process of
//! its own that relays the run through the lab; then the lab is also killed and restarted
//! once, and the worker's reconnect timed), or on Ray (`--on-ray URL`).

use anyhow::{bail, Context, Result};
use futures_util::StreamExt;
use serde::Serialize;
use std::io::{BufRead, BufReader};
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
    /// Where the run trains.
    pub place: Place,
}

/// Where a soak's run trains.
#[derive(Clone, Debug, PartialEq)]
pub enum Place {
    Local,
    Worker,
    /// A Ray head's job API.
    Ray(String),
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
    /// The server's RSS growth over the phase, in MiB per minute: the least-squares line
    /// through its samples. It counts the viewers' catch-up as they join.
    pub rss_mib_per_min: Option<f64>,
    /// The same over the phase's second half, once the viewers have caught up: a lab whose
    /// memory is bounded levels off near 0; a leak keeps it positive. None with fewer than
    /// two samples there.
    pub rss_mib_per_min_second_half: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct SoakReport {
    /// `local`, `worker` or `ray`.
    pub place: &'static str,
    /// From the launch to the run's first update in the lab, in seconds (on Ray: the
    /// job's submission, placement, the worker's start and connect, the first update).
    pub first_update_s: f64,
    /// Messages per second the viewers received in all, while watched.
    pub viewer_messages_per_s: f64,
    /// On a worker: from the lab's restart (its URL printed) to the worker connected
    /// again, and to the run's next update in the lab, in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reconnect_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resumed_update_s: Option<f64>,
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
    data: tempfile::TempDir,
    args: Vec<String>,
}

/// A child process killed when dropped (a worker).
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The worker token of a soak's lab.
const WORKER_TOKEN: &str = "soak-worker-token-0123456789";

impl Lab {
    fn start(exe: &std::path::Path, args: Vec<String>) -> Result<Self> {
        let data = tempfile::tempdir()?;
        let token = crate::auth::generate()?;
        let (child, addr) = Self::serve(exe, data.path(), "0", &token, &args)?;
        Ok(Self { client: Client { addr, token }, child, data, args })
    }

    fn serve(
        exe: &std::path::Path,
        data: &std::path::Path,
        port: &str,
        token: &str,
        args: &[String],
    ) -> Result<(Child, String)> {
        let mut child = Command::new(exe)
            .args(["serve", "--host", "127.0.0.1", "--port", port, "--token", token, "--data-dir"])
            .arg(data)
            .args(args)
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
        Ok((child, addr.to_string()))
    }

    /// Kills the server as a crash would and serves the same data dir on the same port
    /// again; the moment it printed its URL.
    fn restart(&mut self, exe: &std::path::Path) -> Result<Instant> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let port = self.client.addr.rsplit(':').next().unwrap_or("0").to_string();
        let (child, _) = Self::serve(exe, self.data.path(), &port, &self.client.token, &self.args)?;
        self.child = child;
        Ok(Instant::now())
    }

    fn rss_mib(&self) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap_or_default();
        let kib = status.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.split_whitespace().next());
        kib.and_then(|k| k.parse::<f64>().ok()).map_or(0.0, |k| k / 1024.0)
    }
}

impl Client {
    fn request(&self, method: &str, path: &str, body: Option<&serde_json::Value>) -> Result<(u16, String)> {
        let (host, port) = self.addr.rsplit_once(':').context("the lab's address")?;
        let auth = format!("Bearer {}", self.token);
        crate::wire::http::request(host, port.parse()?, method, path, &[("Authorization", &auth)], body)
    }

    fn json(&self, path: &str) -> Result<serde_json::Value> {
        let (status, body) = self.request("GET", path, None)?;
        if status != 200 {
            bail!("GET {path}: {status} {body}");
        }
        Ok(serde_json::from_str(&body)?)
    }
}

/// Waits until the lab lists a connected worker.
fn wait_connected(lab: &Client, within: Duration) -> Result<()> {
    let start = Instant::now();
    loop {
        let machines = lab.json("/api/machines").unwrap_or_default();
        if machines.as_array().is_some_and(|m| m.iter().any(|m| m["connected"] == true && m["local"] == false)) {
            return Ok(());
        }
        anyhow::ensure!(start.elapsed() < within, "no worker connected within {} s", within.as_secs());
        std::thread::sleep(Duration::from_millis(10));
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
    let args: Vec<String> = match &spec.place {
        Place::Local => vec![],
        Place::Worker => ["--local-worker", "off", "--worker-token", WORKER_TOKEN].map(String::from).to_vec(),
        Place::Ray(url) => ["--local-worker", "off", "--ray", url].map(String::from).to_vec(),
    };
    let mut served = Lab::start(&spec.exe, args)?;
    let lab = served.client.clone();
    let lab = &lab;
    let _worker = match spec.place {
        Place::Worker => Some(start_worker(spec, &served)?),
        _ => None,
    };
    let (id, first_update_s) = launch(lab, spec)?;
    let total = (spec.baseline + spec.watched).as_secs_f64();
    let mut sampler = Sampler { lab, id, start: Instant::now(), every: spec.sample, rss: Vec::new() };
    let mut phases = Vec::new();
    let mut measure =
        |name, length, sampler: &mut Sampler| sampler.measure(name, length, &served, &mut |done| tick(done, total));
    phases.push(measure("unwatched", spec.baseline, &mut sampler)?);

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
                        .request("GET", &format!("/api/runs/{id}/events?since={}", last.saturating_sub(reach)), None)
                        .is_ok()
                    {
                        reads.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    let messages_before = messages.load(Ordering::Relaxed);
    let watched = measure("watched", spec.watched, &mut sampler);
    let viewer_messages_per_s =
        (messages.load(Ordering::Relaxed) - messages_before) as f64 / spec.watched.as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    readers.into_iter().for_each(|r| drop(r.join()));
    phases.push(watched?);
    runtime.shutdown_timeout(Duration::from_secs(1));

    // On a worker: the lab dies and comes back; the worker reconnects and the run goes on.
    let (reconnect_s, resumed_update_s) = match spec.place {
        Place::Worker => {
            let (reconnect, resumed) = restart(&mut served, spec, id)?;
            (Some(reconnect), Some(resumed))
        }
        _ => (None, None),
    };
    let (info, stop_s) = stop_run(lab, id)?;
    Ok(SoakReport {
        place: match spec.place {
            Place::Local => "local",
            Place::Worker => "worker",
            Place::Ray(_) => "ray",
        },
        first_update_s,
        viewer_messages_per_s,
        reconnect_s,
        resumed_update_s,
        viewers: spec.viewers,
        readers: spec.readers,
        phases,
        rss_mib: sampler.rss,
        events_stored: info["events"].as_u64().unwrap_or(0),
        events_dropped: info["dropped"].as_u64().unwrap_or(0),
        viewer_messages: messages.load(Ordering::Relaxed),
        history_reads: reads.load(Ordering::Relaxed),
        stop_s,
    })
}

/// Starts a worker for `served` and waits until the lab lists it connected.
fn start_worker(spec: &SoakSpec, served: &Lab) -> Result<Killed> {
    let child = Command::new(&spec.exe)
        .args(["worker", "--lab", &format!("http://{}", served.client.addr), "--worker-token", WORKER_TOKEN])
        .args(["--name", "soak-worker", "--data-dir"])
        .arg(served.data.path().join("worker"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting the worker")?;
    let worker = Killed(child);
    wait_connected(&served.client, Duration::from_secs(60))?;
    Ok(worker)
}

/// Launches the soak's run; its id and the seconds until its first update.
fn launch(lab: &Client, spec: &SoakSpec) -> Result<(u64, f64)> {
    let (status, body) = lab.request("POST", "/api/runs", Some(&spec.run))?;
    if status != 201 {
        bail!("the lab refused the run: {status} {body}");
    }
    let id = serde_json::from_str::<serde_json::Value>(&body)?["id"].as_u64().context("the run's id")?;
    let begin = Instant::now();
    while progress(lab, id)?.1 == 0.0 {
        if begin.elapsed() > Duration::from_secs(120) {
            bail!("the run reported no update within 2 minutes");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok((id, begin.elapsed().as_secs_f64()))
}

/// Kills the lab and serves it again: the seconds until the worker reconnected, and until
/// run `id` reported an update after the restart.
fn restart(served: &mut Lab, spec: &SoakSpec, id: u64) -> Result<(f64, f64)> {
    let lab = served.client.clone();
    let (_, wall_before, _, _) = progress(&lab, id)?;
    let back = served.restart(&spec.exe)?;
    wait_connected(&lab, Duration::from_secs(60))?;
    let reconnect_s = back.elapsed().as_secs_f64();
    while progress(&lab, id).map_or(0.0, |p| p.1) <= wall_before {
        anyhow::ensure!(back.elapsed() < Duration::from_secs(60), "the run did not go on after the restart");
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok((reconnect_s, back.elapsed().as_secs_f64()))
}

/// Asks run `id` to stop; its record once it has, and the seconds that took.
fn stop_run(lab: &Client, id: u64) -> Result<(serde_json::Value, f64)> {
    let asked = Instant::now();
    lab.request("POST", &format!("/api/runs/{id}/stop"), None)?;
    loop {
        let info = lab.json(&format!("/api/runs/{id}"))?;
        if info["status"] != "running" {
            return Ok((info, asked.elapsed().as_secs_f64()));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The lab's memory over the soak: (seconds since `start`, MiB resident), a sample every
/// `every`, with run `id`'s progress read at each phase's edges.
struct Sampler<'a> {
    lab: &'a Client,
    id: u64,
    start: Instant,
    every: Duration,
    rss: Vec<(f64, f64)>,
}

impl Sampler<'_> {
    /// One phase of `length`: the run's steps/s and publishing share over it, and the
    /// server's memory, its first, largest and last samples and their slopes; `tick` gets
    /// the seconds since the start about every 200 ms.
    fn measure(
        &mut self,
        name: &'static str,
        length: Duration,
        served: &Lab,
        tick: &mut dyn FnMut(f64),
    ) -> Result<Phase> {
        let (steps0, wall0, pub0, _) = progress(self.lab, self.id)?;
        let from = self.rss.len();
        let end = Instant::now() + length;
        let mut next_sample = Instant::now();
        while Instant::now() < end {
            if Instant::now() >= next_sample {
                self.rss.push((self.start.elapsed().as_secs_f64(), served.rss_mib()));
                next_sample += self.every;
            }
            tick(self.start.elapsed().as_secs_f64());
            std::thread::sleep(Duration::from_millis(200).min(end.saturating_duration_since(Instant::now())));
        }
        self.rss.push((self.start.elapsed().as_secs_f64(), served.rss_mib()));
        let (steps1, wall1, pub1, _) = progress(self.lab, self.id)?;
        let mine: Vec<f64> = self.rss[from..].iter().map(|r| r.1).collect();
        let per_min: Vec<(f64, f64)> = self.rss[from..].iter().map(|&(t, m)| (t / 60.0, m)).collect();
        let middle = per_min.first().map_or(0.0, |p| p.0) + length.as_secs_f64() / 120.0;
        let second_half: Vec<(f64, f64)> = per_min.iter().copied().filter(|p| p.0 >= middle).collect();
        let wall = (wall1 - wall0).max(1e-9);
        Ok(Phase {
            name,
            seconds: length.as_secs_f64(),
            steps_per_s: (steps1 - steps0) / wall,
            publish_share: (pub1 - pub0) / wall,
            rss_mib_first: mine.first().copied().unwrap_or(0.0),
            rss_mib_max: mine.iter().copied().fold(0.0, f64::max),
            rss_mib_last: mine.last().copied().unwrap_or(0.0),
            rss_mib_per_min: slope(&per_min),
            rss_mib_per_min_second_half: slope(&second_half),
        })
    }
}

/// The slope of the least-squares line through `(x, y)` points; `None` with fewer than two
/// distinct `x`.
pub fn slope(points: &[(f64, f64)]) -> Option<f64> {
    let n = points.len() as f64;
    let (mx, my) = points.iter().fold((0.0, 0.0), |(x, y), p| (x + p.0 / n, y + p.1 / n));
    let (sxy, sxx) =
        points.iter().fold((0.0, 0.0), |(xy, xx), p| (xy + (p.0 - mx) * (p.1 - my), xx + (p.0 - mx).powi(2)));
    (sxx > 0.0).then(|| sxy / sxx)
}

#[cfg(test)]
mod tests {
    use super::slope;

    #[test]
    fn the_slope_is_the_least_squares_lines() {
        assert_eq!(slope(&[]), None);
        assert_eq!(slope(&[(1.0, 5.0)]), None);
        assert_eq!(slope(&[(2.0, 5.0), (2.0, 9.0)]), None, "no spread in time, no slope");
        for (a, b) in [(0.0, 100.0), (3.5, 40.0), (-2.0, 7.0)] {
            let line: Vec<(f64, f64)> = (0..7).map(|i| (0.3 * i as f64, a * 0.3 * i as f64 + b)).collect();
            assert!((slope(&line).unwrap() - a).abs() < 1e-9, "{a}: {:?}", slope(&line));
        }
        // Noise symmetric about a flat line leaves it flat; one outlier at the end tilts it.
        assert!(slope(&[(0.0, 10.0), (1.0, 12.0), (2.0, 12.0), (3.0, 10.0)]).unwrap().abs() < 1e-9);
        assert!(slope(&[(0.0, 10.0), (1.0, 10.0), (2.0, 10.0), (3.0, 16.0)]).unwrap() > 0.0);
    }
}
