//! A second thread for the update that spins for a while between jobs.
//!
//! The update hands it the critic's half of every minibatch (≈ 50 µs of work at the
//! cleanrl preset) and does the actor's half itself; a fused rollout step of many envs
//! hands it half of the envs. Waking a sleeping thread costs tens
//! of microseconds on a VM, as much as the job: a thread pool that parks its workers
//! (rayon's join here) made the update slower than running both halves on one thread.
//! So both sides spin on the hand-over for a bounded time before they block.

use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

type Job = Box<dyn FnOnce() + Send>;

/// How long either side spins before blocking: longer than a minibatch's gap between
/// two jobs, short enough not to burn a core while the rollout runs.
const SPIN: Duration = Duration::from_micros(300);

pub struct Helper {
    jobs: Option<Sender<Job>>,
    thread: Option<JoinHandle<()>>,
}

/// A job's result, to collect with [`Pending::wait`].
pub struct Pending<R> {
    done: Receiver<std::thread::Result<R>>,
}

/// Receives from `rx`, spinning for [`SPIN`] before blocking; `None` once the sender is gone.
fn spin_recv<T>(rx: &Receiver<T>) -> Option<T> {
    let start = Instant::now();
    for spins in 0u32.. {
        match rx.try_recv() {
            Ok(v) => return Some(v),
            Err(TryRecvError::Disconnected) => return None,
            // The clock is read every 64 spins: a read costs more than a spin.
            Err(TryRecvError::Empty) if spins % 64 != 0 || start.elapsed() < SPIN => std::hint::spin_loop(),
            Err(TryRecvError::Empty) => break,
        }
    }
    rx.recv().ok()
}

impl Helper {
    /// Starts the thread; `init` runs on it first (e.g. to set libtorch's thread count).
    pub fn new(name: &str, init: impl FnOnce() + Send + 'static) -> std::io::Result<Self> {
        let (tx, rx) = channel::<Job>();
        let thread = std::thread::Builder::new().name(name.into()).spawn(move || {
            init();
            while let Some(job) = spin_recv(&rx) {
                job();
            }
        })?;
        Ok(Self { jobs: Some(tx), thread: Some(thread) })
    }

    /// Runs `f` on the helper thread.
    pub fn spawn<R: Send + 'static>(&self, f: impl FnOnce() -> R + Send + 'static) -> Pending<R> {
        let (tx, done) = channel();
        let job: Job = Box::new(move || {
            let _ = tx.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)));
        });
        self.jobs.as_ref().expect("helper running").send(job).expect("the helper thread is alive");
        Pending { done }
    }
}

impl<R> Pending<R> {
    /// The job's result; a panic on the helper is resumed here.
    pub fn wait(self) -> R {
        match spin_recv(&self.done).expect("the helper thread is alive") {
            Ok(r) => r,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        drop(self.jobs.take()); // ends the thread's loop
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_jobs_in_order_on_its_own_thread_and_forwards_panics() {
        let helper = Helper::new("test-helper", || {}).unwrap();
        let main = std::thread::current().id();
        let got: Vec<_> = (0..50).map(|i| helper.spawn(move || (i * 2, std::thread::current().id()))).collect();
        for (i, p) in got.into_iter().enumerate() {
            let (v, id) = p.wait();
            assert_eq!(v, i * 2);
            assert_ne!(id, main);
        }
        let panicked =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| helper.spawn(|| panic!("boom")).wait()));
        assert!(panicked.is_err());
        assert_eq!(helper.spawn(|| 7).wait(), 7, "the helper survives a job's panic");
    }
}
