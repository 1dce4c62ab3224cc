//! The lab machine's lesson checks: `hotlab lesson check ID --json`, one process per
//! lesson, one lesson after another on one thread, each result kept in the data dir's
//! `lesson-checks.json` as it ends (the lab's home and the lesson cards say, from it,
//! whether each lesson's signature shows on this machine).
//!
//! A check trains each setting once, briefly: while it runs, a run beside it is slower
//! and so are the check's own; what a check judges is mostly counts per env step, which
//! sharing the machine does not move.

use crate::clock::now_ms;
use hotlab_protocol::LessonChecks;
use hotlab_report::lessons;
use hotlab_report::lessons::{Check, Lesson};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

/// The cache's file name in the data dir.
pub const FILE: &str = "lesson-checks.json";

/// Lines of a failed check's stderr kept for its message.
const STDERR_LINES: usize = 12;

pub struct Checks {
    exe: PathBuf,
    file: PathBuf,
    state: Mutex<LessonChecks>,
}

impl Checks {
    /// The cache in `data_dir` as the last check left it (a file that does not read is
    /// set aside as `lesson-checks.json.bad`, not overwritten).
    pub fn new(exe: PathBuf, data_dir: &Path, machine: String) -> Arc<Self> {
        let file = data_dir.join(FILE);
        let mut state = match std::fs::read(&file) {
            Ok(bytes) => serde_json::from_slice::<LessonChecks>(&bytes).unwrap_or_else(|e| {
                tracing::warn!("{}: {e}; set aside as {FILE}.bad", file.display());
                let _ = std::fs::rename(&file, file.with_extension("json.bad"));
                LessonChecks::default()
            }),
            Err(_) => LessonChecks::default(),
        };
        state.running = None;
        state.left = 0;
        state.machine = machine;
        Arc::new(Self { exe, file, state: Mutex::new(state) })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LessonChecks> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn get(&self) -> LessonChecks {
        self.lock().clone()
    }

    /// Starts checking `chosen` with `seconds` of training per run; None when a check
    /// is already running.
    pub fn start(self: &Arc<Self>, chosen: Vec<&'static Lesson>, seconds: f64) -> Option<LessonChecks> {
        let mut state = self.lock();
        if state.running.is_some() || chosen.is_empty() {
            return None;
        }
        state.running = Some(chosen[0].id.to_string());
        state.left = chosen.len() - 1;
        let answer = state.clone();
        drop(state);
        let me = Arc::clone(self);
        std::thread::spawn(move || {
            for (i, lesson) in chosen.iter().enumerate() {
                {
                    let mut s = me.lock();
                    s.running = Some(lesson.id.to_string());
                    s.left = chosen.len() - 1 - i;
                }
                let check = me.check(lesson, seconds);
                me.keep(check);
            }
            let mut s = me.lock();
            s.running = None;
            s.left = 0;
        });
        Some(answer)
    }

    /// One lesson's check in a process of the `hotlab` binary.
    fn check(&self, lesson: &Lesson, seconds: f64) -> Check {
        let failed = |error: String| Check {
            lesson: lesson.id.to_string(),
            measure: lesson.signature.text.to_string(),
            figures: Vec::new(),
            shows: false,
            skipped: None,
            error: Some(error),
        };
        let mut command = Command::new(&self.exe);
        command.args(["lesson", "check", lesson.id, "--json", "--seconds", &seconds.to_string()]);
        // The check ends with the lab, however the lab ends (no process stays behind).
        // SAFETY: between fork and exec only prctl, async-signal-safe.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut command, || {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let out = command.output();
        let out = match out {
            Ok(out) => out,
            Err(e) => return failed(format!("cannot start `{} lesson check`: {e}", self.exe.display())),
        };
        // It exits 1 when the signature does not show, and prints its JSON either way.
        let stdout = String::from_utf8_lossy(&out.stdout);
        let parsed = stdout.lines().last().and_then(|l| serde_json::from_str::<Vec<Check>>(l).ok());
        match parsed.and_then(|mut v| v.pop()) {
            Some(c) => c,
            None => {
                let stderr = String::from_utf8_lossy(&out.stderr);
                let lines: Vec<&str> = stderr.lines().collect();
                let tail = lines[lines.len().saturating_sub(STDERR_LINES)..].join("\n");
                failed(format!("the check's process ended with {}: {tail}", out.status))
            }
        }
    }

    /// Keeps `check` in place of the lesson's last one and writes the cache.
    fn keep(&self, check: Check) {
        let mut s = self.lock();
        s.checks.retain(|c| c.lesson != check.lesson);
        s.checks.push(check);
        let order = |c: &Check| lessons::LESSONS.iter().position(|l| l.id == c.lesson).unwrap_or(usize::MAX);
        s.checks.sort_by_key(order);
        s.checked_ms = Some(now_ms());
        let stored = LessonChecks { running: None, left: 0, ..s.clone() };
        drop(s);
        if let Err(e) = write(&self.file, &stored) {
            tracing::warn!("{}: {e}", self.file.display());
        }
    }
}

/// Writes the whole file or nothing (a crash leaves the last one whole).
fn write(file: &Path, checks: &LessonChecks) -> std::io::Result<()> {
    let tmp = file.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(checks)?)?;
    std::fs::rename(tmp, file)
}
