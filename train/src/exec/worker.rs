//! The child side of the `subprocess` backend: `hotlab env-worker` (hidden subcommand).

use super::shm::PARTS_BYTES;
use super::shm::{futex_wait, futex_wake, Layout, Region, CMD_EXIT, CMD_RESET};
use super::EnvMaker;
use anyhow::{bail, Result};
use hotlab_core::choices::WaitMode;
use hotlab_core::counters::{ENV_COUNTS, ENV_PARTS};
use hotlab_env::{Observations, StepBatch};
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Polls before a blocking worker sleeps, when the workers and the trainer have cores
/// of their own: a step's round trip is then a few microseconds, about what a futex
/// wake-up costs. With more processes than cores, spinning only steals their time.
const SPIN_FIRST: u64 = 1_000;

/// What the trainer tells a worker on its command line.
#[derive(Clone, Debug)]
pub struct WorkerArgs {
    pub shm_fd: i32,
    pub worker: usize,
    pub workers: usize,
    pub envs: usize,
    pub first: usize,
    pub count: usize,
    pub seed: u64,
    pub wait: WaitMode,
    pub parent: u32,
}

fn parent_gone(parent: u32) -> bool {
    // SAFETY: getppid has no preconditions.
    unsafe { libc::getppid() as u32 != parent }
}

/// Serves step and reset commands until told to exit or orphaned, on the envs of the
/// workload that `load` makes (after this process is tied to its parent's life).
pub fn run(a: WorkerArgs, load: impl FnOnce() -> Result<std::sync::Arc<dyn EnvMaker>>) -> Result<()> {
    // SAFETY: prctl with valid constants; makes the kernel kill us when the parent dies.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
    if parent_gone(a.parent) {
        bail!("env worker {}: parent {} is gone", a.worker, a.parent);
    }
    let maker = load()?;
    let mut batch = maker.vector_env(a.count, a.seed, a.first as u64);
    let spec = batch.spec().clone();
    let region = Region::open(a.shm_fd, Layout::of(&spec, a.envs, a.workers))?;
    let l = region.layout;
    let (first, count, heads) = (a.first, a.count, l.heads);
    let mut obs = Observations::zeros(&spec, count);
    let mut out = StepBatch::new(&spec, count);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let spin_first = if a.workers < cores { SPIN_FIRST } else { 0 };
    let mut seen = region.done(a.worker).load(Ordering::Acquire);
    loop {
        let seq = region.go();
        let mut polls = 0u64;
        let now = loop {
            let s = seq.load(Ordering::Acquire);
            if s != seen {
                break s;
            }
            match a.wait {
                WaitMode::Spin => {
                    polls += 1;
                    std::hint::spin_loop();
                    if polls.is_multiple_of(1 << 20) && parent_gone(a.parent) {
                        return Ok(());
                    }
                }
                WaitMode::Block if polls < spin_first => {
                    polls += 1;
                    std::hint::spin_loop();
                }
                WaitMode::Block => {
                    futex_wait(seq, s, Duration::from_millis(500));
                    if parent_gone(a.parent) {
                        return Ok(());
                    }
                }
            }
        };
        let command = region.command(a.worker).load(Ordering::Relaxed);
        if command == CMD_EXIT {
            return Ok(());
        }
        let write_obs = |obs: &Observations| {
            for (f, field) in obs.fields.iter().enumerate() {
                let b = l.row_bytes[f];
                region.slice::<u8>(l.obs[f] + first * b, count * b).copy_from_slice(field.as_bytes());
            }
        };
        if command == CMD_RESET {
            batch.reset(&mut obs)?;
            write_obs(&obs);
        } else {
            let actions = region.slice::<i64>(l.actions + first * heads * 8, count * heads);
            batch.step(actions, &mut out)?;
            write_obs(&out.obs);
            region.slice::<f32>(l.reward + first * 4, count).copy_from_slice(&out.reward);
            let term = region.slice::<u8>(l.terminated + first, count);
            let trunc = region.slice::<u8>(l.truncated + first, count);
            for e in 0..count {
                term[e] = out.terminated[e] as u8;
                trunc[e] = out.truncated[e] as u8;
            }
            let ended = region.slice::<u8>(l.ended + first, count);
            ended.fill(0);
            for end in &out.episodes {
                let g = first + end.env;
                ended[end.env] = 1;
                region.slice::<f64>(l.episode_return + g * 8, 1)[0] = end.episode_return;
                region.slice::<u32>(l.episode_length + g * 4, 1)[0] = end.length;
                for (f, field) in out.final_obs.fields.iter().enumerate() {
                    let b = l.row_bytes[f];
                    let row = &field.as_bytes()[end.env * b..(end.env + 1) * b];
                    region.slice::<u8>(l.final_obs[f] + g * b, b).copy_from_slice(row);
                }
            }
            let own = maker.env_counters();
            let at = l.parts + a.worker * PARTS_BYTES;
            region.slice::<f64>(at, ENV_PARTS).copy_from_slice(&own.parts);
            region.slice::<u64>(at + ENV_PARTS * 8, ENV_COUNTS).copy_from_slice(&own.counts);
        }
        region.done(a.worker).store(now, Ordering::Release);
        if region.remaining().fetch_sub(1, Ordering::AcqRel) == 1 && a.wait == WaitMode::Block {
            futex_wake(region.remaining());
        }
        seen = now;
    }
}
