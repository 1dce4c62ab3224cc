//! `hotlab run-worker` (hidden): one run of the lab, in its own process. The lab's side,
//! and the messages a run says a line each on its stdout, are `hotlab_lab::wire::process`;
//! this is the run's side: it trains, says everything, and hears `stop`, `watched` and
//! `unwatched` on its stdin.

use crate::failure::Outcome;
use anyhow::Context;
use clap::Args;
use hotlab_lab::wire::process::FromRun;
use hotlab_protocol::{EventBody, RunStatus};
use hotlab_spec::RunSpec;
use hotlab_train::frames::FrameFeed;
use hotlab_train::{TrainOptions, UpdateMetrics};
use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
pub struct RunWorkerArgs {
    /// The run's spec as JSON (validated by the lab).
    #[arg(long)]
    pub spec: String,
}

pub fn run_worker(a: RunWorkerArgs) -> Outcome<()> {
    let spec: RunSpec = serde_json::from_str(&a.spec).context("--spec: not a run spec")?;
    serve(&spec)
}

/// Rollout frames are taken 30 times a second while someone watches the run, once a
/// second otherwise.
const FRAME_GAP_WATCHED: Duration = Duration::from_millis(33);
const FRAME_GAP_UNWATCHED: Duration = Duration::from_secs(1);

/// The run process's side: trains `spec`, saying everything on stdout.
fn serve(spec: &RunSpec) -> Outcome<()> {
    // SAFETY: prctl with valid constants; the kernel kills this run when the lab dies.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
    let (stop, watched) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    let (s, w) = (Arc::clone(&stop), Arc::clone(&watched));
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            match line.as_deref().map(str::trim) {
                Ok("stop") => s.store(true, Ordering::Relaxed),
                Ok("watched") => w.store(true, Ordering::Relaxed),
                Ok("unwatched") => w.store(false, Ordering::Relaxed),
                Ok(_) => {}
                Err(_) => break,
            }
        }
        // The lab is gone: stop.
        s.store(true, Ordering::Relaxed);
    });
    let (sender, writer) = Sender::start();
    let out = Arc::new(sender);
    let sink = Arc::clone(&out);
    let frames = FrameFeed {
        sink: Box::new(move |frame| sink.send(FromRun::Event(EventBody::Rollout { frame }))),
        gap: Box::new(move || match watched.load(Ordering::Relaxed) {
            true => FRAME_GAP_WATCHED,
            false => FRAME_GAP_UNWATCHED,
        }),
    };
    let opts = TrainOptions {
        trace: Some(hotlab_train::profiler::TraceWindow { first: 0, end: 64 }),
        telemetry_sink: None,
        stop: Some(Arc::clone(&stop)),
        frames: Some(frames),
        skip_evaluation: false,
    };
    let mut observe = |m: &UpdateMetrics| {
        let (metrics, profile, publish_s) = (m.point.clone(), m.profile.clone(), out.spent());
        out.send(FromRun::Update { metrics, profile, publish_s });
    };
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        hotlab_workloads::train_with(spec, opts, &mut observe)
    }));
    let (status, message) = match outcome {
        Ok(Ok(trained)) => {
            let mut report = hotlab_report::analyze(&trained.report.profile, &trained.report.config);
            report.steady_sps = trained.report.steady.as_ref().map(|s| s.sps);
            out.send(FromRun::Event(EventBody::Report { report }));
            let blobs = [
                ("trace", trained.trace.as_ref().map(|t| t.to_string())),
                ("policy", Some(trained.policy.policy_json(&trained.report.env))),
                ("summary", serde_json::to_string(&trained.report).ok()),
            ];
            for (name, body) in blobs {
                if let Some(body) = body {
                    out.send(FromRun::Blob { name: name.into(), body });
                }
            }
            match stop.load(Ordering::Relaxed) {
                true => (RunStatus::Stopped, None),
                false => (RunStatus::Finished, None),
            }
        }
        Ok(Err(e)) => (RunStatus::Failed, Some(format!("{e:#}"))),
        Err(panic) => {
            let what = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown".into());
            (RunStatus::Failed, Some(format!("internal error: {what}")))
        }
    };
    out.send(FromRun::End { status, message, publish_s: out.spent() });
    // Everything written before the process ends (the frame feed's sender went with the
    // training options).
    drop(out);
    let _ = writer.join();
    Ok(())
}

/// How often the writer thread sends what the trainer handed over.
const WRITE_GAP: Duration = Duration::from_millis(10);

/// Messages waiting for the writer thread, at most; a rollout frame that finds the queue
/// full is dropped, anything else waits (the lab would have to stall for that long).
const QUEUE: usize = 1024;

/// The trainer's side of stdout: a queue to a writer thread, which serializes and writes,
/// so the trainer never waits on the pipe. Counts the trainer's time handing messages over.
struct Sender {
    tx: std::sync::mpsc::SyncSender<FromRun>,
    spent: Mutex<Duration>,
}

impl Sender {
    /// The sender and the writer thread (which ends once the sender is dropped).
    fn start() -> (Self, std::thread::JoinHandle<()>) {
        let (tx, rx) = std::sync::mpsc::sync_channel::<FromRun>(QUEUE);
        // The writer looks for messages every few milliseconds rather than being woken
        // for each: handing one over is then a push onto the queue and nothing more.
        let writer = std::thread::spawn(move || {
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            loop {
                let mut open = true;
                loop {
                    match rx.try_recv() {
                        Ok(msg) => {
                            let _ = serde_json::to_writer(&mut out, &msg);
                            let _ = out.write_all(b"\n");
                        }
                        Err(std::sync::mpsc::TryRecvError::Empty) => break,
                        Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                            open = false;
                            break;
                        }
                    }
                }
                // A lab that is gone is noticed on stdin; a failed write is not an error here.
                let _ = out.flush();
                if !open {
                    return;
                }
                std::thread::sleep(WRITE_GAP);
            }
        });
        (Self { tx, spent: Mutex::new(Duration::ZERO) }, writer)
    }

    fn send(&self, msg: FromRun) {
        let start = Instant::now();
        let _ = match msg {
            FromRun::Event(EventBody::Rollout { .. }) => self.tx.try_send(msg).map_err(|_| ()),
            other => self.tx.send(other).map_err(|_| ()),
        };
        *self.spent.lock().unwrap_or_else(|p| p.into_inner()) += start.elapsed();
    }

    fn spent(&self) -> f64 {
        self.spent.lock().unwrap_or_else(|p| p.into_inner()).as_secs_f64()
    }
}
