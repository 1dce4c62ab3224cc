//! Each run trains in a process of its own (`hotlab run-worker`, hidden), so that a run
//! that dies (the kernel's out-of-memory killer, an abort in libtorch) ends `failed` and
//! the lab stays up: the kernel is told to pick the run, not the lab, when memory runs out.
//!
//! The run writes one JSON message a line on its stdout ([`FromRun`]); the lab writes
//! `stop`, `watched` and `unwatched` lines to its stdin. The run dies with the lab
//! (`PR_SET_PDEATHSIG`) and stops when its stdin closes. This is the lab's side and the
//! messages; the run's side is the binary's (`hotlab run-worker`), which trains.

use anyhow::{Context, Result};
use hotlab_shared::profile::Profile;
use hotlab_shared::protocol::{EventBody, MetricsPoint, RunStatus};
use hotlab_shared::spec::RunSpec;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
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
