//! Ray, for many machines and for batches: a run is submitted as a Ray job over Ray's
//! job-submission REST API (`POST /api/jobs/` on the head's dashboard port); Ray places it
//! on a node with the resources asked for, where its entrypoint is `hotlab worker --once`,
//! which connects back to the lab and streams the run like any worker. The lab follows the
//! job's state (shown with the run), and stops it through Ray's stop endpoint.
//!
//! The client is plain HTTP/1.1 over a socket, with timeouts: a head that is down or
//! refuses fails the run with what it said, and nothing waits forever.

use super::machines::Machines;
use crate::wire::http;
use anyhow::{anyhow, bail, Context, Result};
use hotlab_protocol::RunStatus;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// How often a run's job state is asked for.
const POLL: Duration = Duration::from_secs(1);

/// How a lab sends runs to Ray (`hotlab serve --ray`).
#[derive(Clone, Debug)]
pub struct RayConfig {
    pub head: Head,
    /// Where a job's worker finds the lab (`--ray-lab-url`, else the address it listens on).
    pub lab_url: String,
    /// The `hotlab` a job runs (`--ray-hotlab`, else this server's own binary).
    pub exe: String,
    /// The lab's worker token (handed to the job in its environment, not its command line).
    pub worker_token: String,
}

impl RayConfig {
    /// The job of run `run`: a `hotlab worker --once` named `worker`, with a GPU when its
    /// spec asks for CUDA.
    pub fn submission<'a>(&'a self, id: &'a str, run: u64, worker: &str, device: &str) -> Submission<'a> {
        let entrypoint = format!(
            "{} worker --lab {} --name {worker} --once --run {run} --max-runs 1 --data-dir hotlab-ray-{run}",
            shell_quote(&self.exe),
            shell_quote(&self.lab_url)
        );
        let num_gpus = if device.starts_with("cuda") { 1.0 } else { 0.0 };
        Submission { id, entrypoint, num_gpus, env: vec![("HOTLAB_WORKER_TOKEN", self.worker_token.clone())] }
    }
}

/// A word for a shell command line (Ray runs the entrypoint through a shell).
fn shell_quote(word: &str) -> String {
    match word.chars().all(|c| c.is_ascii_alphanumeric() || "/._-:=@".contains(c)) {
        true => word.to_string(),
        false => format!("'{}'", word.replace('\'', "'\\''")),
    }
}

/// Watches a run's Ray job while the run streams: passes a stop on to Ray, keeps the
/// job's state current, and ends the run when the job ended without it (Ray's message and
/// the end of its log), when the head stays unreachable, or when the job's worker has
/// been away longer than the grace period.
pub struct JobWatch<'a> {
    pub head: &'a Head,
    pub job: String,
    pub machines: &'a Machines,
    /// The job's worker's name.
    pub worker: &'a str,
    /// Told each state the head reports.
    pub on_state: &'a dyn Fn(&JobState),
    last_poll: Option<Instant>,
    unreachable_since: Option<Instant>,
    stop_asked: Option<Instant>,
    stop_sent: bool,
}

/// How long a stopped run's worker has to end it by itself before Ray stops its job.
const STOP_GRACE: Duration = Duration::from_secs(5);

impl<'a> JobWatch<'a> {
    pub fn new(
        head: &'a Head,
        job: String,
        machines: &'a Machines,
        worker: &'a str,
        on_state: &'a dyn Fn(&JobState),
    ) -> Self {
        Self {
            head,
            job,
            machines,
            worker,
            on_state,
            last_poll: None,
            unreachable_since: None,
            stop_asked: None,
            stop_sent: false,
        }
    }

    /// The run's end, when the job's has come (see [`super::remote::Watchdog`]).
    pub fn check(&mut self, stop: bool) -> Option<(RunStatus, Option<String>)> {
        if stop && !self.stop_sent {
            // A connected worker stops the run itself (its last figures come with it); Ray
            // stops a job whose worker is not there, or does not stop in time.
            let asked = *self.stop_asked.get_or_insert_with(Instant::now);
            if !self.machines.is_connected(self.worker) || asked.elapsed() > STOP_GRACE {
                self.stop_sent = true;
                if let Err(e) = self.head.stop(&self.job) {
                    tracing::warn!("stopping Ray job {}: {e:#}", self.job);
                }
            }
        }
        if let Some(end) = super::remote::grace(self.machines, self.worker)(stop) {
            return Some(end);
        }
        if self.last_poll.is_some_and(|t| t.elapsed() < POLL) {
            return None;
        }
        self.last_poll = Some(Instant::now());
        match self.head.state(&self.job) {
            Ok(state) => {
                self.unreachable_since = None;
                (self.on_state)(&state);
                state.is_final().then(|| self.ended(&state))
            }
            Err(e) => {
                let since = *self.unreachable_since.get_or_insert_with(Instant::now);
                (since.elapsed() > self.machines.grace).then(|| {
                    (RunStatus::Failed, Some(format!("Ray job {}: the head stopped answering: {e:#}", self.job)))
                })
            }
        }
    }

    /// The job ended before its run said so.
    fn ended(&self, state: &JobState) -> (RunStatus, Option<String>) {
        if state.status == "STOPPED" && self.stop_asked.is_some() {
            return (RunStatus::Stopped, None);
        }
        let said = state.message.as_deref().unwrap_or("no message");
        let log = self.head.log_tail(&self.job, 5).filter(|l| !l.trim().is_empty());
        let log = log.map_or(String::new(), |l| format!("; its log ends: {l}"));
        (RunStatus::Failed, Some(format!("Ray job {} ended {}: {said}{log}", self.job, state.status)))
    }
}

/// A Ray head's job API, `http://HOST:PORT` (the dashboard's port, 8265 by default).
#[derive(Clone, Debug)]
pub struct Head {
    host: String,
    port: u16,
}

/// A Ray job's state as the head reports it.
#[derive(Clone, Debug, PartialEq)]
pub struct JobState {
    /// `PENDING`, `RUNNING`, `SUCCEEDED`, `FAILED` or `STOPPED`.
    pub status: String,
    pub message: Option<String>,
}

impl JobState {
    /// No state follows this one.
    pub fn is_final(&self) -> bool {
        matches!(self.status.as_str(), "SUCCEEDED" | "FAILED" | "STOPPED")
    }
}

/// What a run's job is asked to run, and with what.
pub struct Submission<'a> {
    pub id: &'a str,
    pub entrypoint: String,
    pub num_gpus: f64,
    pub env: Vec<(&'a str, String)>,
}

impl Head {
    /// From `http://HOST:PORT` (`--ray`), the dashboard's port 8265 when none is given.
    pub fn parse(url: &str) -> Result<Self, String> {
        let (host, port) = http::host_port(url, 8265)
            .map_err(|e| format!("{e}: the Ray head's job API, on the dashboard's port (8265 by default)"))?;
        Ok(Self { host, port })
    }

    pub fn url(&self) -> String {
        format!("http://{}:{}", self.host, self.port)
    }

    /// Submits a job; its submission id.
    pub fn submit(&self, s: &Submission<'_>) -> Result<String> {
        let env: serde_json::Map<String, Value> = s.env.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
        let body = json!({
            "entrypoint": s.entrypoint,
            "submission_id": s.id,
            "entrypoint_num_cpus": 1,
            "entrypoint_num_gpus": s.num_gpus,
            "runtime_env": {"env_vars": env},
            "metadata": {"hotlab": "run"},
        });
        let answer = self.request("POST", "/api/jobs/", Some(&body))?;
        let id = answer["submission_id"].as_str().or(answer["job_id"].as_str()).unwrap_or(s.id);
        Ok(id.to_string())
    }

    /// The job's state now.
    pub fn state(&self, id: &str) -> Result<JobState> {
        let v = self.request("GET", &format!("/api/jobs/{id}"), None)?;
        let status = v["status"].as_str().ok_or_else(|| anyhow!("the answer names no status: {v}"))?;
        let message = v["message"].as_str().filter(|m| !m.is_empty()).map(str::to_string);
        Ok(JobState { status: status.to_string(), message })
    }

    /// Asks Ray to stop the job.
    pub fn stop(&self, id: &str) -> Result<()> {
        self.request("POST", &format!("/api/jobs/{id}/stop"), Some(&json!({}))).map(|_| ())
    }

    /// The end of the job's log (what its entrypoint printed), for a failure's message.
    pub fn log_tail(&self, id: &str, lines: usize) -> Option<String> {
        let v = self.request("GET", &format!("/api/jobs/{id}/logs"), None).ok()?;
        let logs = v["logs"].as_str()?;
        let tail: Vec<&str> = logs.lines().rev().take(lines).collect();
        Some(tail.into_iter().rev().collect::<Vec<_>>().join("\n"))
    }

    /// One request; the answer's JSON, or Ray's message on a 4xx/5xx.
    fn request(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Value> {
        let where_ = format!("the Ray head at {}", self.url());
        let (status, text) =
            http::request(&self.host, self.port, method, path, &[], body).with_context(|| where_.clone())?;
        if !(200..300).contains(&status) {
            let said = serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|v| v["message"].as_str().or(v["detail"].as_str()).map(str::to_string))
                .unwrap_or(text);
            bail!("{where_} refused ({status}): {}", said.trim());
        }
        serde_json::from_str(&text).with_context(|| format!("{where_}: not JSON: {text:.200}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_is_an_http_address() {
        let h = Head::parse("http://10.0.0.5:8265/").unwrap();
        assert_eq!(h.url(), "http://10.0.0.5:8265");
        assert_eq!(Head::parse("http://head").unwrap().url(), "http://head:8265");
        for bad in ["10.0.0.5:8265", "https://h:1", "http://h:port", "http://:1"] {
            assert!(Head::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_job_runs_a_worker_for_its_run_with_the_token_out_of_sight() {
        let cfg = RayConfig {
            head: Head::parse("http://127.0.0.1:8265").unwrap(),
            lab_url: "http://10.0.0.2:8080".into(),
            exe: "/opt/hot lab/hotlab".into(),
            worker_token: "secret-secret-secret".into(),
        };
        let s = cfg.submission("hotlab-run-7-1", 7, "ray-run-7", "cuda:0");
        assert_eq!(
            s.entrypoint,
            "'/opt/hot lab/hotlab' worker --lab http://10.0.0.2:8080 --name ray-run-7 --once --run 7 --max-runs 1 --data-dir hotlab-ray-7"
        );
        assert!(!s.entrypoint.contains("secret"));
        assert_eq!((s.num_gpus, s.env[0].1.as_str()), (1.0, "secret-secret-secret"));
        assert_eq!(cfg.submission("x", 7, "w", "cpu").num_gpus, 0.0);
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }

    #[test]
    fn a_head_that_is_down_fails_fast_naming_it() {
        // Port 1 on loopback: nothing listens there.
        let h = Head::parse("http://127.0.0.1:1").unwrap();
        let e = h.state("x").unwrap_err();
        assert!(format!("{e:#}").contains("http://127.0.0.1:1"), "{e:#}");
    }
}
