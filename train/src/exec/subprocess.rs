//! `subprocess`: W worker processes (`hotlab env-worker`, the same binary), each owning
//! a slice of the envs; actions, observations, rewards and dones live in shared memory.
//!
//! `--wait spin` busy-polls the count of busy workers and checks every 64 polls that the
//! unfinished workers are alive — seed 000's `is_set`/`is_alive` polling, reproduced on
//! purpose (it collapses when workers outnumber cores). `--wait block` sleeps on futexes:
//! one wake-up call starts every worker, the last worker to finish wakes the trainer.
//!
//! A worker that dies is noticed within one poll or 50 ms of sleep: the step fails with
//! the worker's index, pid and exit status, and the other workers are stopped and reaped.
//! Workers die with the trainer (`PR_SET_PDEATHSIG`) and exit on their own when their
//! parent is gone.

use super::shm::{futex_wait, futex_wake, Layout, Region, CMD_EXIT, CMD_RESET, CMD_STEP, MAX_FIELDS, PARTS_BYTES};
use super::{partition, EnvMaker};
use hotlab_core::choices::WaitMode;
use hotlab_core::counters::{EnvCounters, ENV_COUNTS, ENV_PARTS};
use hotlab_env::{Actions, BatchEnv, EnvError, EnvSpec, EpisodeEnd, Observations, StepBatch};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How often a spinning waiter checks that the worker is alive.
const ALIVE_EVERY: u64 = 64;
/// How long a blocked waiter sleeps before checking that the worker is alive.
const BLOCK_SLICE: Duration = Duration::from_millis(50);
/// How long a blocking wait on one worker's `done` polls before it sleeps, when the
/// workers leave a core free ([`Completion::EachWorker`]).
const EACH_SPIN: Duration = Duration::from_micros(200);

pub struct Subprocess {
    spec: EnvSpec,
    region: Region,
    children: Vec<Child>,
    /// What each worker printed on stderr lately, where it was captured (a Python
    /// worker's traceback).
    stderr: Vec<Option<Tail>>,
    done: Completion,
    /// Whether the workers leave a core free (known once: asking costs a read of the
    /// cgroup's files).
    spare_core: bool,
    wait: WaitMode,
    seq: u32,
    counters: EnvCounters,
    failure: Option<EnvError>,
    /// How long a worker may stay silent in one round (`--worker-timeout`).
    timeout: Duration,
}

/// The timeout of a backend made without one (the spec's default).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// How the trainer learns that a round is over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Completion {
    /// The workers count down `remaining` (an atomic decrement) and the last one wakes the
    /// trainer: one wake-up per round (`hotlab env-worker`).
    Countdown,
    /// Each worker sets its own `done` word and wakes whoever waits on it; the trainer
    /// looks at each in turn. For workers with no atomic read-modify-write (Python).
    EachWorker,
}

/// The last bytes a worker wrote to its stderr.
type Tail = std::sync::Arc<std::sync::Mutex<String>>;
/// Bytes of a worker's stderr kept for an error message.
const TAIL_BYTES: usize = 8192;

/// Keeps the last [`TAIL_BYTES`] of `child`'s piped stderr, read all along on a thread
/// (so that the worker never blocks on a full pipe).
fn capture_stderr(child: &mut Child) -> Option<Tail> {
    let mut pipe = child.stderr.take()?;
    let tail: Tail = Default::default();
    let sink = std::sync::Arc::clone(&tail);
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = std::io::Read::read(&mut pipe, &mut buf) {
            let mut t = sink.lock().unwrap_or_else(|p| p.into_inner());
            t.push_str(&String::from_utf8_lossy(&buf[..n]));
            if t.len() > 2 * TAIL_BYTES {
                let cut = t.len() - TAIL_BYTES;
                let cut = (cut..t.len()).find(|&i| t.is_char_boundary(i)).unwrap_or(t.len());
                t.drain(..cut);
            }
        }
    });
    Some(tail)
}

/// How to start one worker process: its index, first env, env count and the region's
/// fd in, the command (not yet spawned) and what to write to its stdin out.
pub type Launch<'a> = &'a dyn Fn(usize, usize, usize, i32) -> (Command, Option<String>);

impl Subprocess {
    /// Starts `workers` processes of the current executable.
    pub fn spawn(env: &dyn EnvMaker, envs: usize, seed: u64, workers: usize, wait: WaitMode) -> anyhow::Result<Self> {
        let exe = std::env::current_exe()?;
        Self::spawn_with(&exe, env, envs, seed, workers, wait)
    }

    /// Fails a step or reset in which a worker stays silent longer than `timeout`.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    pub fn spawn_with(
        exe: &std::path::Path,
        env: &dyn EnvMaker,
        envs: usize,
        seed: u64,
        workers: usize,
        wait: WaitMode,
    ) -> anyhow::Result<Self> {
        let spec = env.vector_env(1, seed, 0).spec().clone();
        let parent = std::process::id();
        let (flags, input) = env.worker_flags();
        let launch = |w: usize, first: usize, count: usize, fd: i32| {
            let mut c = Command::new(exe);
            c.arg("env-worker")
                .args(["--shm-fd", &fd.to_string(), "--worker", &w.to_string(), "--workers", &workers.to_string()])
                .args(["--envs", &envs.to_string(), "--first", &first.to_string(), "--count", &count.to_string()])
                .args(&flags)
                .args(["--seed", &seed.to_string(), "--wait", wait.as_str()])
                .args(["--parent", &parent.to_string()]);
            (c, input.clone())
        };
        Self::start(spec, envs, workers, wait, Completion::Countdown, &launch)
    }

    /// Starts `workers` processes that serve the region's commands for `spec`'s envs
    /// (each a contiguous slice), however they are made: `hotlab env-worker`, or a
    /// workload's own (the `gym` workload's Python workers).
    pub fn start(
        spec: EnvSpec,
        envs: usize,
        workers: usize,
        wait: WaitMode,
        done: Completion,
        launch: Launch<'_>,
    ) -> anyhow::Result<Self> {
        if spec.fields.len() > MAX_FIELDS {
            anyhow::bail!("--backend subprocess: env '{}' has more than {MAX_FIELDS} observation fields", spec.name);
        }
        let layout = Layout::of(&spec, envs, workers);
        let region = Region::create(layout)?;
        let fd = region.share_with_children()?;
        let (mut children, mut stderr) = (Vec::new(), Vec::new());
        for (w, (first, count)) in partition(envs, workers).into_iter().enumerate() {
            let (mut command, input) = launch(w, first, count, fd);
            let what = format!("{:?}", command.get_program());
            let child = command
                .stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() })
                .stdout(Stdio::null())
                .spawn();
            match child {
                Ok(mut c) => {
                    // Closing the pipe (dropping it) is the end of the input.
                    let written = match (c.stdin.take(), &input) {
                        (Some(mut pipe), Some(text)) => std::io::Write::write_all(&mut pipe, text.as_bytes()),
                        _ => Ok(()),
                    };
                    stderr.push(capture_stderr(&mut c));
                    children.push(c);
                    if let Err(e) = written {
                        stop_all(&mut children);
                        anyhow::bail!("cannot hand env worker {w} its input: {e}");
                    }
                }
                Err(e) => {
                    stop_all(&mut children);
                    anyhow::bail!("cannot start env worker {w} ({what}): {e}");
                }
            }
        }
        let (seq, counters, failure) = (0, EnvCounters::default(), None);
        let spare_core = workers < std::thread::available_parallelism().map_or(1, |n| n.get());
        let timeout = DEFAULT_TIMEOUT;
        Ok(Self { spec, region, children, stderr, done, spare_core, wait, seq, counters, failure, timeout })
    }

    /// What worker `w` said on its stderr lately (empty where it was not captured), for
    /// an error message: after its death, once the pipe has drained.
    fn said(&self, w: usize) -> String {
        let Some(tail) = self.stderr.get(w).and_then(Option::as_ref) else { return String::new() };
        let deadline = Instant::now() + Duration::from_millis(500);
        // The reader thread ends when the dead worker's pipe closes; give it a moment.
        while std::sync::Arc::strong_count(tail) > 1 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let text = tail.lock().unwrap_or_else(|p| p.into_inner()).trim().to_string();
        if text.is_empty() {
            return text;
        }
        format!(": {text}")
    }

    /// Process ids of the workers (for tests and reports).
    pub fn pids(&self) -> Vec<u32> {
        self.children.iter().map(Child::id).collect()
    }

    /// Sends one command to every worker and waits for every answer.
    fn round(&mut self, command: u32) -> Result<(), EnvError> {
        if let Some(e) = &self.failure {
            return Err(e.clone());
        }
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        for w in 0..self.children.len() {
            self.region.command(w).store(command, Ordering::Relaxed);
        }
        self.region.remaining().store(self.children.len() as u32, Ordering::Release);
        self.region.go().store(seq, Ordering::Release);
        if self.wait == WaitMode::Block {
            futex_wake(self.region.go());
        }
        let start = Instant::now();
        let waited = match self.done {
            Completion::Countdown => self.wait_all(seq, start),
            Completion::EachWorker => (0..self.children.len()).try_for_each(|w| self.wait_one(w, seq, start)),
        };
        if let Err(e) = waited {
            self.failure = Some(e.clone());
            stop_all(&mut self.children);
            return Err(e);
        }
        self.counters.worker_wait_s += start.elapsed().as_secs_f64();
        self.counters.ipc_round_trips += self.children.len() as u64;
        Ok(())
    }

    /// Waits until `remaining` is 0, checking that unfinished workers are alive and have
    /// not been silent since `start` for longer than the timeout.
    fn wait_all(&mut self, seq: u32, start: Instant) -> Result<(), EnvError> {
        let mut polls = 0u64;
        let mut last_check = Instant::now();
        loop {
            let left = self.region.remaining().load(Ordering::Acquire);
            if left == 0 {
                return Ok(());
            }
            match self.wait {
                WaitMode::Spin => {
                    if !self.spun(&mut polls) {
                        continue;
                    }
                }
                WaitMode::Block => {
                    futex_wait(self.region.remaining(), left, BLOCK_SLICE);
                    if last_check.elapsed() < BLOCK_SLICE {
                        continue;
                    }
                    last_check = Instant::now();
                }
            }
            if self.region.remaining().load(Ordering::Acquire) == 0 {
                return Ok(());
            }
            for w in 0..self.children.len() {
                if self.region.done(w).load(Ordering::Acquire) != seq {
                    self.check(w, start)?;
                }
            }
        }
    }

    /// Waits until worker `w` has answered `seq`, checking that it is alive and has not
    /// been silent since `start` for longer than the timeout.
    fn wait_one(&mut self, w: usize, seq: u32, start: Instant) -> Result<(), EnvError> {
        let mut polls = 0u64;
        // With a core to spare, a blocking wait polls for a moment first: a futex wake-up
        // costs tens of microseconds on a virtual machine, often more than the wait.
        let spin_until = start + if self.spare_core { EACH_SPIN } else { Duration::ZERO };
        loop {
            let done = self.region.done(w).load(Ordering::Acquire);
            if done == seq {
                return Ok(());
            }
            if self.wait == WaitMode::Block && Instant::now() < spin_until {
                std::hint::spin_loop();
                continue;
            }
            match self.wait {
                WaitMode::Spin => {
                    if !self.spun(&mut polls) {
                        continue;
                    }
                }
                WaitMode::Block => futex_wait(self.region.done(w), done, BLOCK_SLICE),
            }
            if self.region.done(w).load(Ordering::Acquire) != seq {
                self.check(w, start)?;
            }
        }
    }

    /// One poll of a spinning wait, counted; true every [`ALIVE_EVERY`] polls, when the
    /// waiter looks whether the workers it waits on are alive.
    fn spun(&mut self, polls: &mut u64) -> bool {
        *polls += 1;
        self.counters.spin_iterations += 1;
        std::hint::spin_loop();
        polls.is_multiple_of(ALIVE_EVERY)
    }

    /// Worker `w` has not answered yet: an error if it died or has been silent too long.
    fn check(&mut self, w: usize, start: Instant) -> Result<(), EnvError> {
        let others = self.children.len() - 1;
        let silent = start.elapsed();
        let pid = self.children[w].id();
        if let Ok(Some(status)) = self.children[w].try_wait() {
            return Err(EnvError(format!(
                "env worker {w} (pid {pid}) died during a step ({status}); the other {others} workers were stopped{}",
                self.said(w)
            )));
        }
        if silent > self.timeout {
            return Err(EnvError(format!(
                "env worker {w} (pid {pid}) has not answered for {:.1} s (--worker-timeout {}); it and the other {others} workers were stopped",
                silent.as_secs_f64(),
                self.timeout.as_secs_f64()
            )));
        }
        Ok(())
    }

    fn read_obs(&self, out: &mut Observations) {
        let l = self.region.layout;
        for (f, dst) in out.fields.iter_mut().enumerate() {
            dst.as_bytes_mut().copy_from_slice(self.region.slice::<u8>(l.obs[f], l.envs * l.row_bytes[f]));
        }
    }
}

fn stop_all(children: &mut [Child]) {
    for c in children.iter_mut() {
        let _ = c.kill();
    }
    for c in children.iter_mut() {
        let _ = c.wait();
    }
}

impl BatchEnv for Subprocess {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn num_envs(&self) -> usize {
        self.region.layout.envs
    }

    fn reset(&mut self, out: &mut Observations) -> Result<(), EnvError> {
        self.round(CMD_RESET)?;
        self.read_obs(out);
        Ok(())
    }

    fn step(&mut self, actions: &[i64], out: &mut StepBatch) -> Result<(), EnvError> {
        self.step_actions(Actions::index(actions), out)
    }

    fn step_actions(&mut self, actions: Actions<'_>, out: &mut StepBatch) -> Result<(), EnvError> {
        let l = self.region.layout;
        if actions.real.len() != l.envs * l.continuous {
            return Err(EnvError(format!(
                "env '{}' takes {} real-valued action components per env, {} for {} envs (got {})",
                self.spec.name,
                l.continuous,
                l.envs * l.continuous,
                l.envs,
                actions.real.len()
            )));
        }
        self.region.slice::<i64>(l.actions, l.envs * l.heads).copy_from_slice(actions.index);
        self.region.slice::<f32>(l.real_actions, l.envs * l.continuous).copy_from_slice(actions.real);
        self.round(CMD_STEP)?;
        self.read_obs(&mut out.obs);
        out.reward.copy_from_slice(self.region.slice::<f32>(l.reward, l.envs));
        let term = self.region.slice::<u8>(l.terminated, l.envs);
        let trunc = self.region.slice::<u8>(l.truncated, l.envs);
        let returns = self.region.slice::<f64>(l.episode_return, l.envs);
        let lengths = self.region.slice::<u32>(l.episode_length, l.envs);
        let ended = self.region.slice::<u8>(l.ended, l.envs);
        out.episodes.clear();
        for e in 0..l.envs {
            out.terminated[e] = term[e] != 0;
            out.truncated[e] = trunc[e] != 0;
            if ended[e] != 0 {
                out.episodes.push(EpisodeEnd {
                    env: e,
                    episode_return: returns[e],
                    length: lengths[e],
                    terminated: out.terminated[e],
                });
            }
            if out.terminated[e] || out.truncated[e] {
                for (f, dst) in out.final_obs.fields.iter_mut().enumerate() {
                    let b = l.row_bytes[f];
                    let src = self.region.slice::<u8>(l.final_obs[f] + e * b, b);
                    dst.as_bytes_mut()[e * b..(e + 1) * b].copy_from_slice(src);
                }
            }
        }
        Ok(())
    }

    /// With what the workers' envs counted, as they wrote it after their last step.
    fn counters(&self) -> EnvCounters {
        let l = self.region.layout;
        (0..l.workers).fold(self.counters, |c, w| {
            let at = l.parts + w * PARTS_BYTES;
            let parts = std::array::from_fn(|i| self.region.slice::<f64>(at, ENV_PARTS)[i]);
            let counts = std::array::from_fn(|i| self.region.slice::<u64>(at + ENV_PARTS * 8, ENV_COUNTS)[i]);
            c.plus(&EnvCounters::from_own(parts, counts))
        })
    }
}

impl Drop for Subprocess {
    fn drop(&mut self) {
        if self.failure.is_none() {
            self.seq = self.seq.wrapping_add(1);
            for w in 0..self.children.len() {
                self.region.command(w).store(CMD_EXIT, Ordering::Relaxed);
            }
            self.region.go().store(self.seq, Ordering::Release);
            futex_wake(self.region.go());
            let deadline = Instant::now() + Duration::from_secs(2);
            for c in &mut self.children {
                while Instant::now() < deadline && matches!(c.try_wait(), Ok(None)) {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }
        stop_all(&mut self.children);
    }
}
