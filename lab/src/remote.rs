//! A run on a worker, from the lab's side: the same shape as a local run's process
//! ([`crate::wire::process::RunProcesses::run`]): it hands each message to the publisher, passes stop
//! and viewers on, and answers the run's final status. What differs is the wire: the
//! messages come through the worker's route ([`super::machines`]), and a worker away
//! longer than the grace period ends the run `interrupted`.

use super::machines::{Delivery, Machines};
use crate::wire::link::{FileCopy, ToWorker};
use crate::wire::process::{Control, FromRun};
use hotlab_protocol::RunStatus;
use hotlab_spec::RunSpec;
use std::sync::atomic::Ordering;
use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;

/// How often stop and viewers are looked at (as for a local run).
const CONTROL_GAP: Duration = Duration::from_millis(20);

/// Where a remote run starts from.
pub enum From {
    /// A new run: the worker is sent its spec.
    Start(Vec<FileCopy>),
    /// A run the lab had before it restarted: the worker still trains it and resends what
    /// came after `n`, the last message the store has. Its route was opened before the lab
    /// took connections ([`Machines::open_route`]), so that the worker's hello finds it.
    Resume(u64, Route),
}

/// Where a run's messages arrive from its worker.
pub type Route = std::sync::mpsc::Receiver<Delivery>;

/// Looked at every few milliseconds while no message comes, with whether a stop was
/// asked for: the run's end when something outside the link ended it.
pub type Watchdog<'a> = &'a mut dyn FnMut(bool) -> Option<(RunStatus, Option<String>)>;

/// The watchdog of a run on a worker: its end when the worker has been away longer than
/// the grace period.
pub fn grace<'a>(
    machines: &'a Machines,
    machine: &'a str,
) -> impl FnMut(bool) -> Option<(RunStatus, Option<String>)> + 'a {
    move |_| {
        let away = machines.away_for(machine).filter(|a| *a > machines.grace)?;
        let why = format!(
            "the worker '{machine}' has been away for {:.0} s (the grace period is {:.0} s)",
            away.as_secs_f64(),
            machines.grace.as_secs_f64()
        );
        Some((RunStatus::Interrupted, Some(why)))
    }
}

/// A run placed on a worker: the lab's machines, the worker's name, the run's id.
#[derive(Clone, Copy)]
pub struct Placed<'a> {
    pub machines: &'a Machines,
    pub machine: &'a str,
    pub run: u64,
}

/// Runs `spec` where `at` places it; `on` gets each message with its number.
pub fn run(
    at: Placed<'_>,
    spec: &RunSpec,
    from: From,
    control: Control,
    on: &mut dyn FnMut(u64, FromRun),
    watchdog: Watchdog<'_>,
) -> (RunStatus, Option<String>) {
    let Placed { machines, machine, run } = at;
    let (files, delivered, rx) = match from {
        From::Start(files) => {
            let rx = machines.open_route(run, machine, spec.clone(), files.clone(), 0);
            (files, 0, rx)
        }
        From::Resume(n, rx) => (Vec::new(), n, rx),
    };
    if delivered == 0 {
        // Not connected: the next welcome sends it.
        machines.send(machine, ToWorker::Start { run, spec: Box::new(spec.clone()), files });
    }
    let outcome = follow(at, &rx, control, on, watchdog);
    machines.close_route(run);
    outcome
}

fn follow(
    at: Placed<'_>,
    rx: &Route,
    control: Control,
    on: &mut dyn FnMut(u64, FromRun),
    watchdog: Watchdog<'_>,
) -> (RunStatus, Option<String>) {
    let Placed { machines, machine, run } = at;
    let (mut stopped, mut watching) = (false, false);
    loop {
        if !stopped && control.stop.load(Ordering::Relaxed) {
            stopped = true;
            machines.tell(run, ToWorker::Stop { run });
        }
        if (control.watched)() != watching {
            watching = !watching;
            machines.tell(run, ToWorker::Watched { run, watched: watching });
        }
        match rx.recv_timeout(CONTROL_GAP) {
            Ok(Delivery::Message(n, msg)) => {
                let end = match &*msg {
                    FromRun::End { status, message, .. } => Some((*status, message.clone())),
                    _ => None,
                };
                on(n, *msg);
                if let Some(end) = end {
                    return end;
                }
            }
            Ok(Delivery::Lost(why)) => return (RunStatus::Interrupted, Some(why)),
            Err(RecvTimeoutError::Timeout) => {
                if let Some(end) = watchdog(stopped) {
                    return end;
                }
            }
            Err(RecvTimeoutError::Disconnected) => {
                return (RunStatus::Interrupted, Some(format!("the route to the worker '{machine}' closed")))
            }
        }
    }
}
