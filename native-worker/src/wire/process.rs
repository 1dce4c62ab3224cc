//! Each run trains in a process of its own (`hotlab run-worker`, hidden), so that a run
//! that dies (the kernel's out-of-memory killer, an abort in libtorch) ends `failed` and
//! the lab stays up: the kernel is told to pick the run, not the lab, when memory runs out.
//!
//! The run writes one JSON message a line on its stdout ([`FromRun`]); the lab writes
//! `stop`, `watched` and `unwatched` lines to its stdin. The run dies with the lab
//! (`PR_SET_PDEATHSIG`) and stops when its stdin closes.

use crate::train::frames::FrameFeed;
use crate::train::{TrainOptions, Trained, UpdateMetrics};
use anyhow::{Context, Result};
use hotlab_shared::profile::Profile;
use hotlab_shared::protocol::{EventBody, MetricsPoint, RunStatus};
use hotlab_shared::spec::RunSpec;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What a run process says, a line each.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FromRun {
    /// One update's figures, and the seconds the trainer has spent handing out events so far.
    Update {
        metrics: MetricsPoint,
        profile: Profile,
        publish_s: f64,
    },
    Event(EventBody),
    /// An output written at the end (`trace`, `policy`, `summary`), as text.
    Blob {
        name: String,
        body: String,
    },
    /// How it ended (its last line), and the trainer's publishing time in all.
    End {
        status: RunStatus,
        message: Option<String>,
        publish_s: f64,
    },
}

/// Rollout frames are taken 30 times a second while someone watches the run, once a
/// second otherwise.
const FRAME_GAP_WATCHED: Duration = Duration::from_millis(33);
const FRAME_GAP_UNWATCHED: Duration = Duration::from_secs(1);

/// The run process's side: trains `spec`, saying everything on stdout.
pub fn serve(spec: &RunSpec) -> Result<()> {
    // SAFETY: prctl with valid constants; the kernel kills this run when the lab dies.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
    let (stop, watched) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    let (s, w) = (Arc::clone(&stop), Arc::clone(&watched));
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            match line.as_deref().map(str::trim) {
                Ok("stop") => s.store(true, Ordering::Relaxed),
                Ok("watched") => w.store(true, Ordering::Relaxed),
                Ok("unwatched") => w.store(false, Ordering::Relaxed),
                Ok(_) => {}
                Err(_) => break,
            }
        }
        // The lab is gone: stop.
        s.store(true, Ordering::Relaxed);
    });
    let (sender, writer) = Sender::start();
    let out = Arc::new(sender);
    let sink = Arc::clone(&out);
    let frames = FrameFeed {
        sink: Box::new(move |frame| sink.send(FromRun::Event(EventBody::Rollout { frame }))),
        gap: Box::new(move || match watched.load(Ordering::Relaxed) {
            true => FRAME_GAP_WATCHED,
            false => FRAME_GAP_UNWATCHED,
        }),
    };
    let opts = TrainOptions {
        trace: Some(crate::profiler::TraceWindow { first: 0, end: 64 }),
        telemetry_sink: None,
        stop: Some(Arc::clone(&stop)),
        frames: Some(frames),
        skip_evaluation: false,
    };
    let mut observe = |m: &UpdateMetrics| {
        let (metrics, profile, publish_s) = (m.point.clone(), m.profile.clone(), out.spent());
        out.send(FromRun::Update { metrics, profile, publish_s });
    };
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        crate::workloads::train_with(spec, opts, &mut observe)
    }));
    let (status, message) = match outcome {
        Ok(Ok(trained)) => {
            let report = hotlab_shared::report::analyze(&trained.report.profile, &trained.report.config);
            out.send(FromRun::Event(EventBody::Report { report }));
            let blobs = [
                ("trace", trained.trace.as_ref().map(|t| t.to_string())),
                ("policy", Some(policy_json(&trained))),
                ("summary", serde_json::to_string(&trained.report).ok()),
            ];
            for (name, body) in blobs {
                if let Some(body) = body {
                    out.send(FromRun::Blob { name: name.into(), body });
                }
            }
            match stop.load(Ordering::Relaxed) {
                true => (RunStatus::Stopped, None),
                false => (RunStatus::Finished, None),
            }
        }
        Ok(Err(e)) => (RunStatus::Failed, Some(format!("{e:#}"))),
        Err(panic) => {
            let what = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown".into());
            (RunStatus::Failed, Some(format!("internal error: {what}")))
        }
    };
    out.send(FromRun::End { status, message, publish_s: out.spent() });
    // Everything written before the process ends (the frame feed's sender went with the
    // training options).
    drop(out);
    let _ = writer.join();
    Ok(())
}

/// How often the writer thread sends what the trainer handed over.
const WRITE_GAP: Duration = Duration::from_millis(10);

/// Messages waiting for the writer thread, at most; a rollout frame that finds the queue
/// full is dropped, anything else waits (the lab would have to stall for that long).
const QUEUE: usize = 1024;

/// The trainer's side of stdout: a queue to a writer thread, which serializes and writes,
/// so the trainer never waits on the pipe. Counts the trainer's time handing messages over.
struct Sender {
    tx: std::sync::mpsc::SyncSender<FromRun>,
    spent: Mutex<Duration>,
}

impl Sender {
    /// The sender and the writer thread (which ends once the sender is dropped).
    fn start() -> (Self, std::thread::JoinHandle<()>) {
        let (tx, rx) = std::sync::mpsc::sync_channel::<FromRun>(QUEUE);
        // The writer looks for messages every few milliseconds rather than being woken
        // for each: handing one over is then a push onto the queue and nothing more.
        let writer = std::thread::spawn(move || {
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            loop {
                let mut open = true;
                loop {
                    match rx.try_recv() {
                        Ok(msg) => {
                            let _ = serde_json::to_writer(&mut out, &msg);
                            let _ = out.write_all(b"\n");
                        }
                        Err(std::sync::mpsc::TryRecvError::Empty) => break,
                        Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                            open = false;
                            break;
                        }
                    }
                }
                // A lab that is gone is noticed on stdin; a failed write is not an error here.
                let _ = out.flush();
                if !open {
                    return;
                }
                std::thread::sleep(WRITE_GAP);
            }
        });
        (Self { tx, spent: Mutex::new(Duration::ZERO) }, writer)
    }

    fn send(&self, msg: FromRun) {
        let start = Instant::now();
        let _ = match msg {
            FromRun::Event(EventBody::Rollout { .. }) => self.tx.try_send(msg).map_err(|_| ()),
            other => self.tx.send(other).map_err(|_| ()),
        };
        *self.spent.lock().unwrap_or_else(|p| p.into_inner()) += start.elapsed();
    }

    fn spent(&self) -> f64 {
        self.spent.lock().unwrap_or_else(|p| p.into_inner()).as_secs_f64()
    }
}

/// The trained weights for the in-browser env: the shape and the flat parameters.
fn policy_json(trained: &Trained) -> String {
    let policy = &trained.policy;
    let layout: Vec<serde_json::Value> = policy
        .layout()
        .iter()
        .map(|s| serde_json::json!({"name": s.name, "shape": s.shape, "offset": s.offset}))
        .collect();
    let (env, shape, params) = (&trained.report.env, policy.shape(), policy.host_params());
    serde_json::json!({"env": env, "shape": shape, "layout": layout, "params": params}).to_string()
}

/// What the lab tells a run process while it runs.
pub struct Control {
    pub stop: Arc<AtomicBool>,
    /// Whether anyone watches (frames are taken more often then).
    pub watched: Box<dyn Fn() -> bool + Send>,
}

/// How often the lab passes `stop` and viewers on.
const CONTROL_GAP: Duration = Duration::from_millis(20);

/// Lines of a run's stderr kept for its failure message.
const STDERR_LINES: usize = 20;

/// The lab's side: runs `spec` in a process of `exe`, handing each message to `on`; the
/// run's final status and message (failed, naming how, when the process died).
pub fn run(
    exe: &Path,
    spec: &RunSpec,
    control: Control,
    on: &mut dyn FnMut(FromRun),
) -> Result<(RunStatus, Option<String>)> {
    let mut command = Command::new(exe);
    command.args(["run-worker", "--spec", &serde_json::to_string(spec)?]);
    // When memory runs out, the kernel is to kill this run rather than the lab: set in the
    // child before it runs hotlab, so no moment of the run goes without it.
    // SAFETY: between fork and exec only async-signal-safe calls (open, write, close) on a
    // static path, no allocation.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut command, || {
            let fd = libc::open(c"/proc/self/oom_score_adj".as_ptr(), libc::O_WRONLY);
            if fd >= 0 {
                libc::write(fd, b"1000".as_ptr().cast(), 4);
                libc::close(fd);
            }
            Ok(())
        });
    }
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot start the run's process ({} run-worker)", exe.display()))?;
    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let done = Arc::new(AtomicBool::new(false));
    let over = Arc::clone(&done);
    let controller = std::thread::spawn(move || {
        let Some(mut stdin) = stdin else { return };
        let (mut stopped, mut watching) = (false, false);
        while !over.load(Ordering::Relaxed) {
            if !stopped && control.stop.load(Ordering::Relaxed) {
                stopped = true;
                let _ = stdin.write_all(b"stop\n");
            }
            if (control.watched)() != watching {
                watching = !watching;
                let _ = stdin.write_all(if watching { b"watched\n" } else { b"unwatched\n" });
            }
            std::thread::sleep(CONTROL_GAP);
        }
    });
    let tail = std::thread::spawn(move || {
        let mut kept = std::collections::VecDeque::new();
        for line in stderr.map(BufReader::new).into_iter().flat_map(|r| r.lines()).map_while(Result::ok) {
            if kept.len() == STDERR_LINES {
                kept.pop_front();
            }
            kept.push_back(line);
        }
        Vec::from(kept).join("\n")
    });
    let mut end = None;
    for line in stdout.map(BufReader::new).into_iter().flat_map(|r| r.lines()).map_while(Result::ok) {
        match serde_json::from_str::<FromRun>(&line) {
            Ok(FromRun::End { status, message, publish_s }) => {
                end = Some((status, message.clone()));
                on(FromRun::End { status, message, publish_s });
                break;
            }
            Ok(msg) => on(msg),
            Err(_) => tracing::warn!("a run's process said something unexpected: {line:.200}"),
        }
    }
    if let Some(end) = end {
        // The run has ended; its process's teardown (libtorch's, a tenth of a second or
        // more) is no business of the run's status: it is reaped aside.
        std::thread::spawn(move || {
            let _ = child.wait();
            done.store(true, Ordering::Relaxed);
            let _ = (controller.join(), tail.join());
        });
        return Ok(end);
    }
    let exit = child.wait()?;
    done.store(true, Ordering::Relaxed);
    let _ = controller.join();
    let stderr = tail.join().unwrap_or_default();
    Ok((RunStatus::Failed, Some(died(exit, &stderr))))
}

/// Why a run's process ended without saying how its run ended.
fn died(exit: std::process::ExitStatus, stderr: &str) -> String {
    use std::os::unix::process::ExitStatusExt;
    let how = match exit.signal() {
        Some(libc::SIGKILL) => {
            "was killed (SIGKILL: the kernel's out-of-memory killer, most likely; the lab is still up)".to_string()
        }
        Some(sig) => format!("died of signal {sig}"),
        None => format!("exited with {exit}"),
    };
    match stderr.trim() {
        "" => format!("the run's process {how}"),
        last => format!("the run's process {how}: {last}"),
    }
}
