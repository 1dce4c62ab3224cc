//! The user's script as a process: started under the probe (its files in a directory of
//! their own, first on `PYTHONPATH`; a Unix socket the probe connects to), its output
//! passed through to hotlab's stderr with its tail kept for errors, and ended whole: its
//! process group signalled, then anything still carrying the run's marker in its
//! environment (a worker that left the group) killed, so that no process stays behind.

use anyhow::{anyhow, Context, Result};
use hotlab_spec::SpecError;
use hotlab_specs::ExternalSpec;
use hotlab_train::error::RunError;
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The probe's files, written next to the socket for each run.
const SITECUSTOMIZE: &str = include_str!("probe/sitecustomize.py");
const PROBE: &str = include_str!("probe/hotlab_probe.py");

/// How often a blocked read looks at the stop flag and the process.
const POLL: Duration = Duration::from_millis(50);
/// How long a stopped script has to exit after SIGTERM before SIGKILL.
const GRACE: Duration = Duration::from_secs(3);
/// How long a script that said it ended has to exit.
const EXIT_WAIT: Duration = Duration::from_secs(30);
/// Lines of the script's output kept for an error message.
const TAIL_LINES: usize = 60;

/// A script to run: its words (placeholders filled), where, as shown, and whether the
/// probe is light (env steps and episodes only).
#[derive(Clone, Debug)]
pub struct ScriptCommand {
    pub argv: Vec<String>,
    pub cwd: Option<String>,
    pub shown: String,
    pub light: bool,
}

/// What the script's side said, or that it is over.
pub enum Said {
    /// One JSON line of the probe.
    Line(String),
    /// The probe's socket closed (the script is ending, or has ended).
    Closed,
    /// The stop flag was set.
    Stopped,
}

/// A running script.
pub struct Script {
    child: Child,
    /// What the command was, for messages.
    shown: String,
    marker: String,
    dir: PathBuf,
    listener: UnixListener,
    stream: Option<BufReader<UnixStream>>,
    /// A line being read across timeouts.
    partial: Vec<u8>,
    tail: Arc<Mutex<VecDeque<String>>>,
    ended: bool,
}

impl Script {
    /// Starts `argv` in `cwd` under the probe. A program that is not there is refused
    /// naming `--command`; a directory that is not there, `--cwd`.
    pub fn start(command: &ScriptCommand) -> Result<Self, RunError> {
        let (argv, cwd, shown) = (&command.argv, command.cwd.as_deref(), command.shown.as_str());
        let (program, args) = argv.split_first().ok_or_else(|| SpecError::of(&ExternalSpec::COMMAND, "is empty"))?;
        if let Some(cwd) = cwd.filter(|c| !Path::new(c).is_dir()) {
            return Err(SpecError::of(&ExternalSpec::CWD, format!("'{cwd}' is not a directory")).into());
        }
        let marker = format!("{}-{}", std::process::id(), unique());
        let dir = std::env::temp_dir().join(format!("hotlab-probe-{marker}"));
        std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
        std::fs::write(dir.join("sitecustomize.py"), SITECUSTOMIZE)?;
        std::fs::write(dir.join("hotlab_probe.py"), PROBE)?;
        let socket = dir.join("probe.sock");
        let listener = UnixListener::bind(&socket).with_context(|| format!("cannot listen on {}", socket.display()))?;
        listener.set_nonblocking(true)?;
        let path = match std::env::var_os("PYTHONPATH").filter(|p| !p.is_empty()) {
            Some(old) => {
                let mut joined = dir.clone().into_os_string();
                joined.push(":");
                joined.push(old);
                joined
            }
            None => dir.clone().into_os_string(),
        };
        let mut cmd = Command::new(program);
        cmd.args(args)
            .env("PYTHONPATH", path)
            .env("HOTLAB_PROBE_SOCKET", &socket)
            .env("HOTLAB_PROBE_RUN", &marker)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        if std::env::var_os("PYTHONUNBUFFERED").is_none() {
            // Its prints pass through as they happen, not at exit.
            cmd.env("PYTHONUNBUFFERED", "1");
        }
        if let Some(cwd) = cwd {
            cmd.current_dir(cwd);
        }
        if command.light {
            cmd.env("HOTLAB_PROBE_LIGHT", "1");
        }
        // SAFETY: prctl with valid constants, between fork and exec: the script is killed
        // when the thread that started it (the run's) dies with its process.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child = match cmd.spawn() {
            Ok(child) => child,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                let why = match e.kind() {
                    ErrorKind::NotFound => format!("'{program}' was not found (not on PATH, nor a file)"),
                    ErrorKind::PermissionDenied => format!("'{program}' cannot be run (permission denied)"),
                    _ => format!("'{program}' did not start: {e}"),
                };
                return Err(SpecError::of(&ExternalSpec::COMMAND, why).into());
            }
        };
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        if let Some(out) = child.stdout.take() {
            relay(out, Arc::clone(&tail));
        }
        if let Some(err) = child.stderr.take() {
            relay(err, Arc::clone(&tail));
        }
        Ok(Script {
            child,
            shown: shown.to_string(),
            marker,
            dir,
            listener,
            stream: None,
            partial: Vec::new(),
            tail,
            ended: false,
        })
    }

    /// The next thing the probe says; waits (looking at `stop` and the process) until
    /// then. A script that exits without its probe ever connecting is an error.
    pub fn next(&mut self, stop: Option<&AtomicBool>) -> Result<Said> {
        loop {
            if hotlab_train::workload::asked_to_stop(stop) {
                return Ok(Said::Stopped);
            }
            let Some(stream) = self.stream.as_mut() else {
                match self.listener.accept() {
                    Ok((s, _)) => {
                        s.set_nonblocking(false)?;
                        s.set_read_timeout(Some(POLL))?;
                        self.stream = Some(BufReader::new(s));
                        continue;
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {
                        if let Some(status) = self.child.try_wait()? {
                            return Err(self.failure(status).unwrap_or_else(|| {
                                anyhow!(
                                    "'{}' ran without hotlab's probe: it ignores PYTHONPATH (python -E or -I), \
                                     or runs no Python",
                                    self.shown
                                )
                            }));
                        }
                        std::thread::sleep(POLL);
                        continue;
                    }
                    Err(e) => return Err(e.into()),
                }
            };
            match stream.read_until(b'\n', &mut self.partial) {
                Ok(0) => return Ok(Said::Closed),
                Ok(_) if self.partial.ends_with(b"\n") => {
                    let line = String::from_utf8_lossy(&self.partial).trim().to_string();
                    self.partial.clear();
                    return Ok(Said::Line(line));
                }
                Ok(_) => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Whether the script has not been seen to end yet.
    pub fn running(&self) -> bool {
        !self.ended
    }

    /// Waits for the script to exit (after its probe said it ended); its failure, with its
    /// last lines, is an error.
    pub fn finish(&mut self) -> Result<()> {
        let deadline = Instant::now() + EXIT_WAIT;
        let status = loop {
            if let Some(status) = self.child.try_wait()? {
                break status;
            }
            if Instant::now() > deadline {
                self.kill();
                return Err(anyhow!(
                    "'{}' did not exit {} s after its training ended",
                    self.shown,
                    EXIT_WAIT.as_secs()
                ));
            }
            std::thread::sleep(POLL);
        };
        self.ended = true;
        // Its workers go with it (those that outlive it would be orphans).
        self.sweep();
        match self.failure(status) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Ends the script and everything it started: SIGTERM to its group, SIGKILL after a
    /// grace, then any process still carrying its marker.
    pub fn kill(&mut self) {
        if self.ended {
            return;
        }
        self.ended = true;
        let group = self.child.id() as libc::pid_t;
        // SAFETY: signals to the script's own process group.
        unsafe { libc::killpg(group, libc::SIGTERM) };
        let deadline = Instant::now() + GRACE;
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) && !group_alive(group) {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // SAFETY: as above.
        unsafe { libc::killpg(group, libc::SIGKILL) };
        let _ = self.child.wait();
        self.sweep();
    }

    /// Kills every process whose environment carries this run's marker.
    fn sweep(&self) {
        for pid in marked(&self.marker) {
            // SAFETY: a process this run started (it carries the run's marker).
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }

    /// The script's exit as an error, when it failed: its status and its last lines (a
    /// missing Python module named as such).
    fn failure(&self, status: ExitStatus) -> Option<anyhow::Error> {
        if status.success() {
            return None;
        }
        let tail: Vec<String> = self.tail.lock().map(|t| t.iter().cloned().collect()).unwrap_or_default();
        let how = match (status.code(), status.signal()) {
            (Some(code), _) => format!("exit status {code}"),
            (None, Some(sig)) => format!("killed by signal {sig}"),
            _ => "failed".to_string(),
        };
        let missing = tail.iter().rev().find_map(|l| {
            let rest = l.split("ModuleNotFoundError: No module named ").nth(1)?;
            Some(rest.trim().trim_matches('\'').to_string())
        });
        let last = tail.join("\n");
        Some(match missing {
            Some(module) => anyhow!(
                "'{}' needs the Python module '{module}', which its interpreter does not have (pip install it \
                 there, or run the command with another Python); {how}:\n{last}",
                self.shown
            ),
            None => anyhow!("'{}' failed ({how}); its last lines:\n{last}", self.shown),
        })
    }
}

impl Drop for Script {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A number unique to this call in this process.
fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    (u64::from(nanos) << 16) ^ NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Copies the script's output to hotlab's stderr a line at a time, keeping the last lines.
fn relay(from: impl Read + Send + 'static, tail: Arc<Mutex<VecDeque<String>>>) {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(from);
        let mut line = Vec::new();
        while matches!(reader.read_until(b'\n', &mut line), Ok(n) if n > 0) {
            let _ = std::io::stderr().lock().write_all(&line);
            if let Ok(mut t) = tail.lock() {
                if t.len() == TAIL_LINES {
                    t.pop_front();
                }
                t.push_back(String::from_utf8_lossy(&line).trim_end().to_string());
            }
            line.clear();
        }
    });
}

/// Whether any process of group `group` is alive.
fn group_alive(group: libc::pid_t) -> bool {
    // SAFETY: signal 0 checks for existence only.
    unsafe { libc::killpg(group, 0) == 0 }
}

/// The processes whose environment holds `HOTLAB_PROBE_RUN=<marker>`.
pub fn marked(marker: &str) -> Vec<libc::pid_t> {
    let needle = format!("HOTLAB_PROBE_RUN={marker}");
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<libc::pid_t>().ok()))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|&b| b == 0).any(|kv| kv == needle.as_bytes()))
        })
        .collect()
}
