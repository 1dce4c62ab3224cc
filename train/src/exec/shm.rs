//! Shared memory between the trainer and its env worker processes: one `memfd` mapped
//! in both, a layout of flags and arrays computed from the batch's shape, and futex
//! waits on the flags for `--wait block`.

use hotlab_core::counters::{ENV_COUNTS, ENV_PARTS};
use hotlab_env::EnvSpec;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// Commands a worker runs (written to its slot before its sequence number is bumped).
pub const CMD_STEP: u32 = 0;
pub const CMD_RESET: u32 = 1;
pub const CMD_EXIT: u32 = 2;

/// Most observation fields an env may have (a Dict observation's leaves, one field each).
pub const MAX_FIELDS: usize = 16;

/// Bytes per worker of what its envs counted themselves.
pub const PARTS_BYTES: usize = (ENV_PARTS + ENV_COUNTS) * 8;

/// Byte offsets of everything in the region, for `envs` envs whose observation fields
/// take `row_bytes` bytes each per env, `heads` action heads and `continuous` real-valued
/// action components, split among `workers`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub envs: usize,
    pub fields: usize,
    pub row_bytes: [usize; MAX_FIELDS],
    pub heads: usize,
    pub continuous: usize,
    pub workers: usize,
    pub actions: usize,
    /// `envs × continuous` f32, the real-valued actions as sampled (unclipped).
    pub real_actions: usize,
    /// Per field: `envs × row_bytes`.
    pub obs: [usize; MAX_FIELDS],
    pub reward: usize,
    pub terminated: usize,
    pub truncated: usize,
    pub final_obs: [usize; MAX_FIELDS],
    pub episode_return: usize,
    pub episode_length: usize,
    /// `envs` bytes: 1 where an episode as the user counts it ended at this step (its
    /// return and length are then written). A step can end the learner's episode without
    /// it: under Atari's episodic life a lost life is `terminated` for the learner while
    /// the game, and its score, go on.
    pub ended: usize,
    /// Per worker ([`PARTS_BYTES`] each): its envs' part totals ([`ENV_PARTS`] f64,
    /// seconds), then their topology changes, lifecycle reads and host passes (u64 each).
    pub parts: usize,
    pub size: usize,
}

/// The header: `go` (the step's sequence number; every worker waits on this one word, so
/// one wake-up call starts them all) and `remaining` (workers still busy; the last one to
/// finish wakes the trainer), each on its own cache line.
const HEADER_BYTES: usize = 128;
/// Per worker: `command`, and `done` (the last sequence number answered) on its own
/// cache line, so spinning on one does not slow writes to the other.
const SLOT_BYTES: usize = 128;

fn align(x: usize) -> usize {
    x.div_ceil(64) * 64
}

impl Layout {
    /// The layout for `envs` envs of `spec` in `workers` processes. Panics with more than
    /// [`MAX_FIELDS`] fields (the caller checks).
    pub fn of(spec: &EnvSpec, envs: usize, workers: usize) -> Self {
        let rows: Vec<usize> = spec.fields.iter().map(|f| f.row_bytes()).collect();
        Self::new(envs, &rows, spec.heads.len(), spec.continuous, workers)
    }

    /// Panics with more than [`MAX_FIELDS`] fields (the caller checks).
    pub fn new(envs: usize, fields: &[usize], heads: usize, continuous: usize, workers: usize) -> Self {
        let mut row_bytes = [0; MAX_FIELDS];
        row_bytes[..fields.len()].copy_from_slice(fields);
        let mut at = align(HEADER_BYTES + workers * SLOT_BYTES);
        let mut take = |bytes: usize| {
            let start = at;
            at = align(at + bytes);
            start
        };
        let actions = take(envs * heads * 8);
        let real_actions = take(envs * continuous * 4);
        let obs = row_bytes.map(|b| take(envs * b));
        let reward = take(envs * 4);
        let terminated = take(envs);
        let truncated = take(envs);
        let final_obs = row_bytes.map(|b| take(envs * b));
        let episode_return = take(envs * 8);
        let episode_length = take(envs * 4);
        let ended = take(envs);
        let parts = take(workers * PARTS_BYTES);
        Self {
            envs,
            fields: fields.len(),
            row_bytes,
            heads,
            continuous,
            workers,
            actions,
            real_actions,
            obs,
            reward,
            terminated,
            truncated,
            final_obs,
            episode_return,
            episode_length,
            ended,
            parts,
            size: at.max(4096),
        }
    }
}

impl Layout {
    /// Where worker `w`'s command word is (a worker in another language reads it there).
    pub fn command_at(&self, w: usize) -> usize {
        HEADER_BYTES + w * SLOT_BYTES
    }

    /// Where worker `w`'s `done` word is.
    pub fn done_at(&self, w: usize) -> usize {
        HEADER_BYTES + w * SLOT_BYTES + 64
    }
}

/// A mapped shared-memory region.
pub struct Region {
    fd: OwnedFd,
    base: *mut u8,
    pub layout: Layout,
}

// SAFETY: the region is plain memory; concurrent access is coordinated by the atomics
// in the slots (a side touches the arrays only between a `seq` and its `done`).
unsafe impl Send for Region {}

impl Region {
    /// A new zeroed region (trainer side).
    pub fn create(layout: Layout) -> io::Result<Self> {
        // SAFETY: plain syscalls with valid arguments; the fd is owned right away.
        let fd = unsafe { libc::memfd_create(c"hotlab-envs".as_ptr(), 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        if unsafe { libc::ftruncate(fd.as_raw_fd(), layout.size as libc::off_t) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Self::map(fd, layout)
    }

    /// Maps an inherited region (worker side).
    pub fn open(fd: RawFd, layout: Layout) -> io::Result<Self> {
        // SAFETY: the worker was started with this fd open for it and owns it from here.
        Self::map(unsafe { OwnedFd::from_raw_fd(fd) }, layout)
    }

    fn map(fd: OwnedFd, layout: Layout) -> io::Result<Self> {
        // SAFETY: a fresh shared mapping of the whole file; unmapped in Drop.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                layout.size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Self { fd, base: base as *mut u8, layout })
    }

    /// Lets child processes inherit the fd (clears close-on-exec).
    pub fn share_with_children(&self) -> io::Result<RawFd> {
        let fd = self.fd.as_raw_fd();
        // SAFETY: fcntl on an fd we own.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
        if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(fd)
    }

    fn word(&self, offset: usize) -> &AtomicU32 {
        assert!(offset + 4 <= HEADER_BYTES + self.layout.workers * SLOT_BYTES);
        // SAFETY: inside the flag area, 4-byte aligned, and only accessed atomically.
        unsafe { &*(self.base.add(offset) as *const AtomicU32) }
    }

    /// The sequence number the trainer bumps to start a command on every worker.
    pub fn go(&self) -> &AtomicU32 {
        self.word(0)
    }

    /// Workers that have not finished the current command.
    pub fn remaining(&self) -> &AtomicU32 {
        self.word(64)
    }

    pub fn command(&self, worker: usize) -> &AtomicU32 {
        self.word(self.layout.command_at(worker))
    }

    /// The last sequence number the worker finished.
    pub fn done(&self, worker: usize) -> &AtomicU32 {
        self.word(self.layout.done_at(worker))
    }

    /// A typed array in the region. Callers touch only their own env rows between a
    /// command and its answer, so the slices never alias across processes in time.
    #[allow(clippy::mut_from_ref)]
    pub fn slice<T>(&self, offset: usize, len: usize) -> &mut [T] {
        assert!(offset + len * std::mem::size_of::<T>() <= self.layout.size);
        assert_eq!(offset % std::mem::align_of::<T>(), 0);
        // SAFETY: in bounds and aligned (checked); T is a plain number type here.
        unsafe { std::slice::from_raw_parts_mut(self.base.add(offset) as *mut T, len) }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what map() mapped.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.layout.size) };
    }
}

/// Sleeps while `word` still holds `expected`, at most `timeout` (spurious wake-ups happen).
pub fn futex_wait(word: &AtomicU32, expected: u32, timeout: Duration) {
    let ts = libc::timespec { tv_sec: timeout.as_secs() as libc::time_t, tv_nsec: timeout.subsec_nanos() as _ };
    // SAFETY: a futex wait on a valid aligned u32 shared between processes.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAIT, expected, &ts as *const libc::timespec);
    }
}

/// Wakes every process sleeping on `word`.
pub fn futex_wake(word: &AtomicU32) {
    // SAFETY: a futex wake on a valid aligned u32.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, i32::MAX);
    }
}
