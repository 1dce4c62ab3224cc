//! `threads`: W workers, each owning a contiguous slice of the envs as a struct-of-arrays
//! batch, woken once per step. The trainer thread is worker 0 (as in EnvPool: no core
//! sits idle waiting), the other W − 1 are threads.
//!
//! A step: the trainer copies each slice's actions into its worker's slot, bumps the
//! shared epoch and unparks the helpers, steps its own slice, then waits for the last
//! helper to finish. Helpers spin for a while before parking, so back-to-back steps do
//! not pay a futex round trip when there are cores to spare.

use super::{copy_rows, partition, EnvMaker};
use hotlab_core::counters::EnvCounters;
use hotlab_env::{BatchEnv, EnvError, EnvSpec, Observations, StepBatch};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant};

/// Polls before a helper parks (tens of microseconds: longer than a policy forward
/// between two steps, far shorter than an update).
const SPIN_BEFORE_PARK: u32 = 20_000;

enum Command {
    Reset,
    Step,
}

struct Slot {
    first: usize,
    count: usize,
    command: Command,
    actions: Vec<i64>,
    out: StepBatch,
    obs: Observations,
    error: Option<EnvError>,
}

struct Shared {
    epoch: AtomicU64,
    remaining: AtomicUsize,
    shutdown: AtomicBool,
    trainer: Mutex<Option<Thread>>,
}

pub struct Threads {
    spec: EnvSpec,
    envs: usize,
    /// Worker 0: the slice the trainer thread steps itself.
    local: Box<dyn BatchEnv>,
    local_count: usize,
    own_out: StepBatch,
    shared: Arc<Shared>,
    slots: Vec<Arc<Mutex<Slot>>>,
    handles: Vec<JoinHandle<()>>,
    counters: EnvCounters,
}

impl Threads {
    pub fn new(env: &dyn EnvMaker, envs: usize, seed: u64, workers: usize) -> Self {
        let spec = env.vector_env(1, seed, 0).spec().clone();
        let shared = Arc::new(Shared {
            epoch: AtomicU64::new(0),
            remaining: AtomicUsize::new(0),
            shutdown: AtomicBool::new(false),
            trainer: Mutex::new(None),
        });
        let mut slots = Vec::new();
        let mut handles = Vec::new();
        let parts = partition(envs, workers.max(1));
        let local_count = parts[0].1;
        let local = env.vector_env(local_count, seed, 0);
        for (w, (first, count)) in parts.into_iter().enumerate().skip(1) {
            let slot = Arc::new(Mutex::new(Slot {
                first,
                count,
                command: Command::Reset,
                actions: vec![0; count * spec.heads.len()],
                out: StepBatch::new(&spec, count),
                obs: Observations::zeros(&spec, count),
                error: None,
            }));
            let (shared2, slot2) = (shared.clone(), slot.clone());
            let batch = env.vector_env(count, seed, first as u64);
            let handle = std::thread::Builder::new()
                .name(format!("hotlab-env-{w}"))
                .spawn(move || worker(shared2, slot2, batch))
                .expect("spawning an env thread");
            slots.push(slot);
            handles.push(handle);
        }
        let own_out = StepBatch::new(&spec, local_count);
        Self { spec, envs, local, local_count, own_out, shared, slots, handles, counters: EnvCounters::default() }
    }

    /// Wakes every helper for one command, runs `own` (the trainer's slice) meanwhile,
    /// and waits until all helpers have answered.
    fn round(
        &mut self,
        command: fn() -> Command,
        own: impl FnOnce(&mut dyn BatchEnv) -> Result<(), EnvError>,
    ) -> Result<(), EnvError> {
        *self.shared.trainer.lock().unwrap() = Some(std::thread::current());
        for slot in &self.slots {
            slot.lock().unwrap().command = command();
        }
        self.shared.remaining.store(self.slots.len(), Ordering::Release);
        self.shared.epoch.fetch_add(1, Ordering::AcqRel);
        for h in &self.handles {
            h.thread().unpark();
        }
        own(self.local.as_mut())?;
        let start = Instant::now();
        let mut spins = 0u32;
        while self.shared.remaining.load(Ordering::Acquire) != 0 {
            if spins < SPIN_BEFORE_PARK {
                spins += 1;
                std::hint::spin_loop();
            } else {
                std::thread::park_timeout(Duration::from_millis(10));
            }
            if self.handles.iter().any(|h| h.is_finished()) {
                return Err(EnvError("an env worker thread stopped unexpectedly".into()));
            }
        }
        self.counters.spin_iterations += spins as u64;
        self.counters.worker_wait_s += start.elapsed().as_secs_f64();
        match self.slots.iter().find_map(|s| s.lock().unwrap().error.take()) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

fn worker(shared: Arc<Shared>, slot: Arc<Mutex<Slot>>, mut batch: Box<dyn BatchEnv>) {
    let mut seen = 0u64;
    loop {
        let mut spins = 0u32;
        loop {
            let epoch = shared.epoch.load(Ordering::Acquire);
            if shared.shutdown.load(Ordering::Acquire) {
                return;
            }
            if epoch != seen {
                seen = epoch;
                break;
            }
            if spins < SPIN_BEFORE_PARK {
                spins += 1;
                std::hint::spin_loop();
            } else {
                std::thread::park();
            }
        }
        {
            let mut guard = slot.lock().unwrap();
            let s = &mut *guard;
            let result = match s.command {
                Command::Reset => batch.reset(&mut s.obs),
                Command::Step => batch.step(&s.actions, &mut s.out),
            };
            s.error = result.err();
        }
        if shared.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            if let Some(t) = shared.trainer.lock().unwrap().as_ref() {
                t.unpark();
            }
        }
    }
}

impl BatchEnv for Threads {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn num_envs(&self) -> usize {
        self.envs
    }

    fn reset(&mut self, out: &mut Observations) -> Result<(), EnvError> {
        let mut own = Observations::zeros(&self.spec, self.local_count);
        self.round(|| Command::Reset, |env| env.reset(&mut own))?;
        for (dst, src) in out.fields.iter_mut().zip(&own.fields) {
            copy_rows(dst, src, 0, self.local_count);
        }
        for slot in &self.slots {
            let s = slot.lock().unwrap();
            for (dst, src) in out.fields.iter_mut().zip(&s.obs.fields) {
                copy_rows(dst, src, s.first, s.count);
            }
        }
        Ok(())
    }

    fn step(&mut self, actions: &[i64], out: &mut StepBatch) -> Result<(), EnvError> {
        let heads = self.spec.heads.len();
        for slot in &self.slots {
            let mut s = slot.lock().unwrap();
            let (a, b) = (s.first * heads, (s.first + s.count) * heads);
            s.actions.copy_from_slice(&actions[a..b]);
        }
        // The trainer's own slice writes straight into `out`'s leading rows.
        let n0 = self.local_count;
        let mut own = std::mem::replace(&mut self.own_out, StepBatch::new(&self.spec, 0));
        self.round(|| Command::Step, |env| env.step(&actions[..n0 * heads], &mut own))?;
        out.episodes.clear();
        out.reward[..n0].copy_from_slice(&own.reward);
        out.terminated[..n0].copy_from_slice(&own.terminated);
        out.truncated[..n0].copy_from_slice(&own.truncated);
        for (dst, src) in out.obs.fields.iter_mut().zip(&own.obs.fields) {
            copy_rows(dst, src, 0, n0);
        }
        for (dst, src) in out.final_obs.fields.iter_mut().zip(&own.final_obs.fields) {
            copy_rows(dst, src, 0, n0);
        }
        out.episodes.extend_from_slice(&own.episodes);
        self.own_out = own;
        for slot in &self.slots {
            let s = slot.lock().unwrap();
            let (first, count) = (s.first, s.count);
            out.reward[first..first + count].copy_from_slice(&s.out.reward);
            out.terminated[first..first + count].copy_from_slice(&s.out.terminated);
            out.truncated[first..first + count].copy_from_slice(&s.out.truncated);
            for (dst, src) in out.obs.fields.iter_mut().zip(&s.out.obs.fields) {
                copy_rows(dst, src, first, count);
            }
            for (dst, src) in out.final_obs.fields.iter_mut().zip(&s.out.final_obs.fields) {
                copy_rows(dst, src, first, count);
            }
            out.episodes.extend(s.out.episodes.iter().map(|e| {
                let mut e = e.clone();
                e.env += first;
                e
            }));
        }
        Ok(())
    }

    fn counters(&self) -> EnvCounters {
        self.counters
    }
}

impl Drop for Threads {
    fn drop(&mut self) {
        self.shared.shutdown.store(true, Ordering::Release);
        for h in &self.handles {
            h.thread().unpark();
        }
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}
