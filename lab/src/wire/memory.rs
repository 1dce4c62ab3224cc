//! A memory limit on each run's process (`--run-memory MB` of `hotlab serve` and `hotlab
//! worker`): a memory cgroup of its own per run, inside one the lab makes for itself in its
//! own cgroup, entered by the run's process before it runs hotlab. A run past its limit is
//! killed by the kernel's out-of-memory killer (SIGKILL), alone; the lab and the other
//! runs go on, and the cgroup's own count of out-of-memory kills says that is what
//! happened.
//!
//! cgroup v1's memory controller (`memory.limit_in_bytes`) and v2's (`memory.max`) both
//! serve; v2 only where the lab's cgroup may have children with the memory controller
//! (a delegated one). Where neither can be had, the lab refuses to start with the flag,
//! saying why.

use std::ffi::CString;
use std::path::{Path, PathBuf};

/// The lab's cgroup for its runs, and the limit each run gets.
#[derive(Debug)]
pub struct RunMemory {
    dir: PathBuf,
    v2: bool,
    bytes: u64,
}

/// One run's cgroup (removed when dropped, once its process is gone).
#[derive(Debug)]
pub struct RunCgroup {
    dir: PathBuf,
    v2: bool,
    /// Its `cgroup.procs`, ready for the child (no allocation between fork and exec).
    procs: CString,
}

/// Why a memory cgroup cannot be had, naming the flag.
fn refused(what: impl std::fmt::Display) -> String {
    format!("--run-memory: {what}; serve without --run-memory, or where the lab may make memory cgroups (as root, or in a delegated cgroup)")
}

impl RunMemory {
    /// Makes the lab's cgroup for runs of at most `mb` MiB each.
    pub fn new(mb: u64) -> Result<Self, String> {
        if mb == 0 {
            return Err("--run-memory: 0 MB; allowed: a limit in MiB ≥ 1".into());
        }
        let own =
            std::fs::read_to_string("/proc/self/cgroup").map_err(|e| refused(format!("/proc/self/cgroup: {e}")))?;
        let (base, v2) = find(&own).ok_or_else(|| refused("this machine has no memory cgroup controller"))?;
        forget_dead_labs(&base);
        let dir = base.join(format!("hotlab-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| refused(format!("cannot make {} ({e})", dir.display())))?;
        if v2 {
            // Children with a memory limit need the controller handed down.
            let control = dir.join("cgroup.subtree_control");
            if let Err(e) = std::fs::write(&control, "+memory") {
                let _ = std::fs::remove_dir(&dir);
                return Err(refused(format!("cannot hand down the memory controller in {} ({e})", control.display())));
            }
        }
        Ok(Self { dir, v2, bytes: mb << 20 })
    }

    /// The limit, in MiB.
    pub fn mb(&self) -> u64 {
        self.bytes >> 20
    }

    /// A cgroup for the run `name`, with the limit set.
    pub fn for_run(&self, name: &str) -> std::io::Result<RunCgroup> {
        let dir = self.dir.join(name);
        std::fs::create_dir_all(&dir)?;
        let limit = self.bytes.to_string();
        if self.v2 {
            std::fs::write(dir.join("memory.max"), &limit)?;
            // No swap past it either, where swap is accounted.
            let _ = std::fs::write(dir.join("memory.swap.max"), "0");
        } else {
            std::fs::write(dir.join("memory.limit_in_bytes"), &limit)?;
            // Memory and swap together, where the kernel accounts swap (it must be ≥ the limit).
            let _ = std::fs::write(dir.join("memory.memsw.limit_in_bytes"), &limit);
        }
        let procs = CString::new(dir.join("cgroup.procs").as_os_str().as_encoded_bytes())
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        Ok(RunCgroup { dir, v2: self.v2, procs })
    }
}

impl Drop for RunMemory {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

impl RunCgroup {
    /// Its `cgroup.procs`, for [`enter`] in the child.
    pub fn procs(&self) -> CString {
        self.procs.clone()
    }

    /// How many times the kernel's out-of-memory killer killed a process in it.
    pub fn oom_kills(&self) -> u64 {
        let file = if self.v2 { "memory.events" } else { "memory.oom_control" };
        let text = std::fs::read_to_string(self.dir.join(file)).unwrap_or_default();
        counter(&text, "oom_kill").unwrap_or(0)
    }
}

impl Drop for RunCgroup {
    fn drop(&mut self) {
        // The process may still be leaving it a moment after it was reaped.
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        tracing::warn!("could not remove the run's memory cgroup {}", self.dir.display());
    }
}

/// Moves the calling process into the cgroup whose `cgroup.procs` is `procs`. For the
/// child between fork and exec: only open, write and close, on a path made before the fork.
pub fn enter(procs: &std::ffi::CStr) -> std::io::Result<()> {
    // SAFETY: a NUL-terminated path; async-signal-safe calls only, no allocation.
    unsafe {
        let fd = libc::open(procs.as_ptr(), libc::O_WRONLY);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // "0": the writing process itself.
        let written = libc::write(fd, b"0".as_ptr().cast(), 1);
        libc::close(fd);
        if written != 1 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The folder to make the lab's cgroup in, from `/proc/self/cgroup`'s text, and whether it
/// is cgroup v2's: v1's memory hierarchy where the memory controller is mounted there,
/// else v2's unified one where it offers the memory controller.
fn find(own: &str) -> Option<(PathBuf, bool)> {
    let root = Path::new("/sys/fs/cgroup");
    for line in own.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        if controllers.split(',').any(|c| c == "memory") {
            let v1 = root.join("memory");
            if v1.join("memory.limit_in_bytes").exists() {
                return Some((v1.join(path.trim_start_matches('/')), false));
            }
        }
    }
    let unified = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    let offered = std::fs::read_to_string(root.join("cgroup.controllers")).ok()?;
    offered.split_whitespace().any(|c| c == "memory").then(|| (root.join(unified.trim_start_matches('/')), true))
}

/// Removes the cgroups of labs that died without removing theirs (`hotlab-PID` with no
/// such process; a cgroup goes only once it holds no process).
fn forget_dead_labs(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else { return };
    for lab in entries.flatten() {
        let name = lab.file_name();
        let pid = name.to_str().and_then(|n| n.strip_prefix("hotlab-")?.parse::<u32>().ok());
        if pid.is_none_or(|p| Path::new(&format!("/proc/{p}")).exists()) {
            continue;
        }
        for run in std::fs::read_dir(lab.path()).into_iter().flatten().flatten().filter(|e| e.path().is_dir()) {
            let _ = std::fs::remove_dir(run.path());
        }
        let _ = std::fs::remove_dir(lab.path());
    }
}

/// `key N` from a cgroup file of such lines.
fn counter(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oom_kill_count_is_read_from_either_version() {
        let v1 = "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n";
        let v2 = "low 0\nhigh 0\nmax 7\noom 3\noom_kill 3\noom_group_kill 0\n";
        assert_eq!((counter(v1, "oom_kill"), counter(v2, "oom_kill")), (Some(2), Some(3)));
        assert_eq!(counter("oom_kill_disable 0\n", "oom_kill"), None, "another key that starts alike");
    }
}
