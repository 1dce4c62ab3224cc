//! `hotlab worker`: a machine of the lab. It connects out to the lab (no inbound port on
//! the GPU box), says what it has, trains the runs the lab sends it, each in a process of
//! its own as the lab's local runs are ([`crate::wire::process`]), and streams what
//! they say back over the same connection ([`crate::wire::link`]).
//!
//! While the lab is unreachable the runs go on; their messages wait in the [`outbox`]
//! (spilled to a file past a limit) and are sent once the worker is back, which it tries
//! with a growing backoff. A refusal (a wrong token, another version) ends the worker with
//! the lab's message: retrying would not change it.

mod gpu;
pub mod outbox;
mod session;

use crate::wire::link::{FileCopy, Held, Resume, ToLab};
use crate::wire::process::{self as run_process, FromRun};
use anyhow::{Context, Result};
use hotlab_protocol::system::SystemInfo;
use hotlab_protocol::RunStatus;
use hotlab_spec::RunSpec;
use outbox::Outbox;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// How a worker is set up (`hotlab worker --help`).
pub struct WorkerConfig {
    /// The lab's address, `http://HOST:PORT` or `https://…` (behind a TLS proxy).
    pub lab: String,
    pub token: String,
    pub name: String,
    /// Runs at once.
    pub max_runs: usize,
    /// Where the spill file and the runs' files go.
    pub data_dir: PathBuf,
    /// Bytes of unacknowledged messages held in memory before they spill to disk.
    pub memory_limit: usize,
    /// Take this one run only, and end once the lab has all of it (a Ray job's worker).
    pub once: Option<u64>,
    /// Each run's process's memory limit in MiB (`--run-memory`), if any.
    pub run_memory: Option<u64>,
    /// This machine, as the worker announces it (the binary describes it: the lab does not
    /// link libtorch).
    pub system: SystemInfo,
}

/// A run training here.
struct Local {
    stop: Arc<AtomicBool>,
    watched: Arc<AtomicBool>,
}

/// What the connection and the run threads share.
pub(crate) struct Shared {
    cfg: WorkerConfig,
    system: SystemInfo,
    processes: run_process::RunProcesses,
    outbox: Mutex<Outbox>,
    runs: Mutex<HashMap<u64, Local>>,
    /// Runs the lab no longer has live: their messages are not kept.
    forgotten: Mutex<HashSet<u64>>,
    /// Every run started here.
    started: Mutex<HashSet<u64>>,
    /// Rings when a run has a message to send.
    wake: tokio::sync::Notify,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    fn outbox(&self) -> MutexGuard<'_, Outbox> {
        lock(&self.outbox)
    }

    /// The runs this worker holds, for the lab's hello.
    fn held(&self) -> Vec<Held> {
        let live: HashSet<u64> = lock(&self.runs).keys().copied().collect();
        let mut runs: Vec<u64> = live.union(&self.outbox().runs()).copied().collect();
        runs.sort_unstable();
        runs.into_iter().map(|run| Held { run, live: live.contains(&run) }).collect()
    }

    /// What the lab has of each run, and the runs it no longer has live.
    fn welcome(&self, resume: &[Resume], forget: &[u64]) -> Result<()> {
        let mut outbox = self.outbox();
        for r in resume {
            outbox.ack(r.run, r.committed)?;
        }
        for &run in forget {
            lock(&self.forgotten).insert(run);
            if let Some(local) = lock(&self.runs).get(&run) {
                local.stop.store(true, Ordering::Relaxed);
            }
            outbox.forget(run)?;
        }
        outbox.resend_all();
        for r in resume {
            outbox.mark_sent(r.run, r.have);
        }
        Ok(())
    }

    /// Numbers and keeps one message of a run, and wakes the connection.
    fn push(&self, run: u64, msg: &FromRun) {
        if lock(&self.forgotten).contains(&run) {
            return;
        }
        let pushed = self
            .outbox()
            .push(run, |n| serde_json::json!({ "type": "run", "run": run, "n": n, "msg": msg }).to_string());
        if let Err(e) = pushed {
            tracing::error!("run {run}: a message could not be kept for the lab: {e:#}");
        }
        self.wake.notify_one();
    }

    /// Whether a `--once` worker is done: its run has ended and the lab has all of it.
    fn done(&self) -> bool {
        self.cfg.once.is_some_and(|run| {
            lock(&self.started).contains(&run) && lock(&self.runs).is_empty() && self.outbox().runs().is_empty()
        })
    }

    /// Starts a run the lab sent (once: a repeated start is ignored).
    fn start(self: &Arc<Self>, run: u64, spec: RunSpec, files: Vec<FileCopy>) {
        if self.cfg.once.is_some_and(|only| only != run) {
            tracing::warn!("the lab sent run {run} to a worker started for run {:?} only: ignored", self.cfg.once);
            return;
        }
        let local = Local { stop: Arc::default(), watched: Arc::default() };
        let (stop, watched) = (Arc::clone(&local.stop), Arc::clone(&local.watched));
        {
            let mut runs = lock(&self.runs);
            if runs.contains_key(&run) || self.outbox().runs().contains(&run) {
                return;
            }
            runs.insert(run, local);
            lock(&self.started).insert(run);
        }
        let me = Arc::clone(self);
        let spawned = std::thread::Builder::new().name(format!("hotlab-run-{run}")).spawn(move || {
            me.train(run, spec, files, stop, watched);
            lock(&me.runs).remove(&run);
            me.wake.notify_one();
        });
        if let Err(e) = spawned {
            lock(&self.runs).remove(&run);
            self.end(run, RunStatus::Failed, Some(format!("the worker cannot start a thread for the run: {e}")));
        }
    }

    fn end(&self, run: u64, status: RunStatus, message: Option<String>) {
        self.push(run, &FromRun::End { status, message, publish_s: 0.0 });
    }

    /// Trains one run in a process of its own, passing on everything it says; every
    /// outcome ends with an `End` message.
    fn train(
        &self,
        run: u64,
        mut spec: RunSpec,
        files: Vec<FileCopy>,
        stop: Arc<AtomicBool>,
        watched: Arc<AtomicBool>,
    ) {
        // (Its memory is checked by the run's process, on this machine.)
        if let Err(e) = self.place_files(run, &mut spec, &files) {
            return self.end(run, RunStatus::Failed, Some(format!("on worker {}: {e:#}", self.cfg.name)));
        }
        let control = run_process::Control { stop, watched: Box::new(move || watched.load(Ordering::Relaxed)) };
        let mut ended = false;
        let outcome = self.processes.run(&format!("run-{run}"), &spec, control, &mut |msg| {
            ended |= matches!(msg, FromRun::End { .. });
            self.push(run, &msg);
        });
        if !ended {
            let (status, message) = outcome.unwrap_or_else(|e| (RunStatus::Failed, Some(format!("{e:#}"))));
            self.end(run, status, message);
        }
        let (bytes, spilled) = self.outbox().size();
        tracing::info!(
            "run {run} ended on this worker; {bytes} bytes not yet acknowledged by the lab ({spilled} spilled)"
        );
    }

    /// Writes the files a run's spec names (sent by the lab) into this worker's data dir
    /// and points the spec at them.
    fn place_files(&self, run: u64, spec: &mut RunSpec, files: &[FileCopy]) -> Result<()> {
        let dir = self.cfg.data_dir.join("runs").join(run.to_string());
        for (field, path) in spec.workload.files() {
            let copy =
                files.iter().find(|f| f.field == field).with_context(|| format!("{field}: the lab sent no file"))?;
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            let file = dir.join(field.trim_start_matches('-'));
            std::fs::write(&file, &copy.body).with_context(|| format!("writing {}", file.display()))?;
            *path = file.to_string_lossy().into_owned();
        }
        Ok(())
    }

    fn set_flag(&self, run: u64, flag: impl Fn(&Local) -> &AtomicBool, value: bool) {
        if let Some(local) = lock(&self.runs).get(&run) {
            flag(local).store(value, Ordering::Relaxed);
        }
    }
}

/// Runs the worker until it is refused or interrupted.
pub fn run(cfg: WorkerConfig) -> Result<()> {
    let url = session::ws_url(&cfg.lab)?;
    // `wss://` (a lab behind a TLS proxy) uses rustls, with ring's cryptography.
    let _ = rustls::crypto::ring::default_provider().install_default();
    std::fs::create_dir_all(&cfg.data_dir)
        .with_context(|| format!("--data-dir: cannot create {}", cfg.data_dir.display()))?;
    let outbox = Outbox::new(cfg.data_dir.join(format!("outbox-{}.spill", cfg.name)), cfg.memory_limit);
    let memory = cfg.run_memory.map(crate::wire::memory::RunMemory::new).transpose().map_err(anyhow::Error::msg)?;
    let shared = Arc::new(Shared {
        system: cfg.system.clone(),
        processes: run_process::RunProcesses {
            exe: std::env::current_exe().context("finding the hotlab binary (each run is a process of it)")?,
            memory,
        },
        outbox: Mutex::new(outbox),
        runs: Mutex::default(),
        forgotten: Mutex::default(),
        started: Mutex::default(),
        wake: tokio::sync::Notify::new(),
        cfg,
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(session::connect_loop(url, shared))
}

/// The hello a connection opens with.
fn hello(shared: &Shared) -> ToLab {
    ToLab::Hello {
        system: shared.system.clone(),
        max_runs: shared.cfg.max_runs,
        held: shared.held(),
        once: shared.cfg.once,
    }
}
