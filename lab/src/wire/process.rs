//! Each run trains in a process of its own (`hotlab run-worker`, hidden), so that a run
//! that dies (the kernel's out-of-memory killer, an abort in libtorch) ends `failed` and
//! the lab stays up: the kernel is told to pick the run, not the lab, when memory runs out.
//!
//! The run writes one JSON message a line on its stdout ([`FromRun`]); the lab writes
//! `stop`, `watched` and `unwatched` lines to its stdin. The run dies with the lab
//! (`PR_SET_PDEATHSIG`) and stops when its stdin closes. This is the lab's side and the
//! messages; the run's side is the binary's (`hotlab run-worker`), which trains.
//!
//! With `--run-memory`, each run's process has a memory limit of its own ([`super::memory`]).

use super::memory::{self, RunMemory};
use anyhow::{Context, Result};
use hotlab_core::profile::Profile;
use hotlab_protocol::{EventBody, MetricsPoint, RunStatus};
use hotlab_spec::RunSpec;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

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

/// How a lab (or a worker) starts its runs' processes.
pub struct RunProcesses {
    /// The `hotlab` binary (`hotlab run-worker`).
    pub exe: PathBuf,
    /// Each run's memory limit (`--run-memory`), if any.
    pub memory: Option<RunMemory>,
}

impl RunProcesses {
    /// Runs `spec` (the run `name`) in a process of its own, handing each message to `on`;
    /// the run's final status and message (failed, naming how, when the process died).
    pub fn run(
        &self,
        name: &str,
        spec: &RunSpec,
        control: Control,
        on: &mut dyn FnMut(FromRun),
    ) -> Result<(RunStatus, Option<String>)> {
        let cgroup = match &self.memory {
            Some(m) => Some(m.for_run(name).context("making the run's memory cgroup (--run-memory)")?),
            None => None,
        };
        let limit = self.memory.as_ref().map(RunMemory::mb);
        let exe = &self.exe;
        let mut command = Command::new(exe);
        command.args(["run-worker", "--spec", &serde_json::to_string(spec)?]);
        let procs = cgroup.as_ref().map(memory::RunCgroup::procs);
        // When memory runs out, the kernel is to kill this run rather than the lab, and a
        // run with a limit is inside it: both set in the child before it runs hotlab, so no
        // moment of the run goes without them.
        // SAFETY: between fork and exec only async-signal-safe calls (open, write, close)
        // on paths made before the fork, no allocation.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut command, move || {
                let fd = libc::open(c"/proc/self/oom_score_adj".as_ptr(), libc::O_WRONLY);
                if fd >= 0 {
                    libc::write(fd, b"1000".as_ptr().cast(), 4);
                    libc::close(fd);
                }
                match &procs {
                    Some(p) => memory::enter(p),
                    None => Ok(()),
                }
            });
        }
        let child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot start the run's process ({} run-worker)", exe.display()))?;
        follow(child, cgroup, limit, control, on)
    }
}

/// Follows a run's process to its end (see [`RunProcesses::run`]); its memory cgroup goes
/// once the process is reaped.
fn follow(
    mut child: std::process::Child,
    cgroup: Option<memory::RunCgroup>,
    limit: Option<u64>,
    control: Control,
    on: &mut dyn FnMut(FromRun),
) -> Result<(RunStatus, Option<String>)> {
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
            drop(cgroup);
            done.store(true, Ordering::Relaxed);
            let _ = (controller.join(), tail.join());
        });
        return Ok(end);
    }
    let exit = child.wait()?;
    done.store(true, Ordering::Relaxed);
    let _ = controller.join();
    let stderr = tail.join().unwrap_or_default();
    let oom = cgroup.as_ref().map(memory::RunCgroup::oom_kills).filter(|k| *k > 0).and(limit);
    Ok((RunStatus::Failed, Some(died(exit, &stderr, oom))))
}

/// Why a run's process ended without saying how its run ended; `oom_at` is its memory
/// limit in MiB when its cgroup counted an out-of-memory kill.
fn died(exit: std::process::ExitStatus, stderr: &str, oom_at: Option<u64>) -> String {
    use std::os::unix::process::ExitStatusExt;
    let how = match (exit.signal(), oom_at) {
        (Some(libc::SIGKILL), Some(mb)) => format!(
            "was killed (SIGKILL) by the kernel's out-of-memory killer at its memory limit of {mb} MiB (--run-memory; the lab is still up)"
        ),
        (Some(libc::SIGKILL), None) => {
            "was killed (SIGKILL: the kernel's out-of-memory killer, most likely; the lab is still up)".to_string()
        }
        (Some(sig), _) => format!("died of signal {sig}"),
        (None, _) => format!("exited with {exit}"),
    };
    match stderr.trim() {
        "" => format!("the run's process {how}"),
        last => format!("the run's process {how}: {last}"),
    }
}
