//! The lab's audits and lessons: each a plan ([`Plan`]) whose runs the manager runs one
//! after another, as ordinary runs that anyone can watch, and whose verdicts are stored
//! with the audit (one row per audit, its JSON replaced as each run starts and ends).
//!
//! Audits run one at a time, in the order they were asked for, on one OS thread: two
//! audits side by side would each measure the other.

use super::runs::Manager;
use crate::tune;
use hotlab_protocol::{AuditInfo, AuditRun, ChangeInfo, RunStatus, RunSummary, TuneStep};
use hotlab_report::audit::{Measured, Plan, Slot};
use hotlab_report::lessons::{Lesson, Params};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// How often the audit thread looks at the run it waits for.
const POLL: Duration = Duration::from_millis(50);

/// An audit waiting for its turn or running.
struct Job {
    plan: Plan,
    lesson: Option<&'static Lesson>,
    tune: Option<Search>,
    info: Arc<Mutex<AuditInfo>>,
    stop: Arc<AtomicBool>,
}

/// A search for the fastest setup: a chain of audits, each of the candidates the last
/// kept variant's own profile recommends.
#[derive(Clone, Debug)]
pub struct Search {
    /// This audit's place in the chain (1 for the first).
    pub step: usize,
    pub max_steps: usize,
    /// Every change audited so far (each is tried once).
    pub tried: Vec<String>,
    /// The kept ratios before this step, multiplied.
    pub speedup: f64,
}

#[derive(Default)]
struct Inner {
    next_id: u64,
    /// Queued and running audits, by id.
    live: HashMap<u64, (Arc<Mutex<AuditInfo>>, Arc<AtomicBool>)>,
    queue: VecDeque<Job>,
}

/// The audits of this server's life, and the thread that runs them.
pub struct Audits {
    manager: Arc<Manager>,
    inner: Mutex<Inner>,
    ready: Condvar,
}

/// What to audit and why.
pub struct Request {
    pub plan: Plan,
    /// The run audited (from a run's view).
    pub run: Option<u64>,
    /// The lesson, with the parameters it runs with.
    pub lesson: Option<(&'static Lesson, Params)>,
    /// A step of a search for the fastest setup.
    pub tune: Option<Search>,
}

impl Audits {
    pub fn new(manager: Arc<Manager>) -> anyhow::Result<Arc<Self>> {
        let next_id = manager.store().last_audit_id()? + 1;
        let me =
            Arc::new(Self { manager, inner: Mutex::new(Inner { next_id, ..Inner::default() }), ready: Condvar::new() });
        let worker = Arc::clone(&me);
        std::thread::Builder::new().name("hotlab-audits".into()).spawn(move || worker.work())?;
        Ok(me)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues an audit; returns it as stored.
    pub fn start(&self, r: Request) -> AuditInfo {
        self.queue(r, false)
    }

    /// Queues an audit at the back, or (the next step of a search) at the front.
    fn queue(&self, r: Request, first: bool) -> AuditInfo {
        let mut inner = self.lock();
        let id = inner.next_id;
        inner.next_id += 1;
        let plan = r.plan;
        let info = AuditInfo {
            id,
            created_ms: crate::clock::now_ms(),
            run: r.run,
            lesson: r.lesson.as_ref().map(|(l, _)| l.id.to_string()),
            params: r.lesson.as_ref().map(|(_, p)| p.clone()),
            status: RunStatus::Queued,
            baseline: plan.baseline.clone(),
            changes: plan.changes.iter().map(|c| ChangeInfo { change: c.text.clone(), bound: c.bound }).collect(),
            repeats: plan.repeats,
            tune: r.tune.as_ref().map(|t| TuneStep { step: t.step, speedup: t.speedup, ..TuneStep::default() }),
            ..AuditInfo::default()
        };
        self.manager.store().add_audit(&info);
        let shared = Arc::new(Mutex::new(info.clone()));
        let stop = Arc::new(AtomicBool::new(false));
        inner.live.insert(id, (Arc::clone(&shared), Arc::clone(&stop)));
        let job = Job { plan, lesson: r.lesson.map(|(l, _)| l), tune: r.tune, info: shared, stop };
        match first {
            true => inner.queue.push_front(job),
            false => inner.queue.push_back(job),
        }
        self.ready.notify_one();
        info
    }

    /// A live audit from memory, an ended one from the store. Blocks on the store: call
    /// it off the async runtime.
    pub fn get(&self, id: u64) -> anyhow::Result<Option<AuditInfo>> {
        if let Some((info, _)) = self.lock().live.get(&id) {
            return Ok(Some(info.lock().unwrap_or_else(|p| p.into_inner()).clone()));
        }
        self.manager.store().audit(id)
    }

    /// Up to `limit` audits, newest first, of one run or one lesson or all (live ones as they are now).
    pub fn list(&self, run: Option<u64>, lesson: Option<&str>, limit: usize) -> anyhow::Result<Vec<AuditInfo>> {
        let stored = self.manager.store().audits(run, lesson, limit)?;
        let inner = self.lock();
        Ok(stored
            .into_iter()
            .map(|a| match inner.live.get(&a.id) {
                Some((info, _)) => info.lock().unwrap_or_else(|p| p.into_inner()).clone(),
                None => a,
            })
            .collect())
    }

    /// Stops a queued or running audit (and its run in progress); false when it is over.
    pub fn stop(&self, id: u64) -> bool {
        let inner = self.lock();
        let Some((info, stop)) = inner.live.get(&id) else { return false };
        stop.store(true, Ordering::Relaxed);
        let current = info.lock().unwrap_or_else(|p| p.into_inner()).runs.last().map(|r| r.run);
        drop(inner);
        if let Some(run) = current {
            self.manager.stop(run);
        }
        true
    }

    /// The audit thread: one audit at a time, in order.
    fn work(self: Arc<Self>) {
        loop {
            let job = {
                let mut inner = self.lock();
                loop {
                    match inner.queue.pop_front() {
                        Some(job) => break job,
                        None => inner = self.ready.wait(inner).unwrap_or_else(|p| p.into_inner()),
                    }
                }
            };
            let (status, message, next) = match self.execute(&job) {
                Ok(runs) => (RunStatus::Finished, None, self.search_on(&job, &runs)),
                Err(_) if job.stop.load(Ordering::Relaxed) => (RunStatus::Stopped, None, None),
                Err(e) => (RunStatus::Failed, Some(e), None),
            };
            let id = self.update(&job, |a| {
                a.status = status;
                a.message = message;
            });
            if let Some(next) = next {
                self.queue(next, true);
            }
            self.manager.store().flush();
            self.lock().live.remove(&id);
        }
    }

    /// Changes the live audit and stores it as it now is; returns its id.
    fn update(&self, job: &Job, change: impl FnOnce(&mut AuditInfo)) -> u64 {
        let mut a = job.info.lock().unwrap_or_else(|p| p.into_inner());
        change(&mut a);
        self.manager.store().add_audit(&a);
        a.id
    }

    /// After a search's audit: what it kept, and the next step's audit unless the search
    /// ends here (nothing kept, no candidate left, or the last step), in which case this
    /// audit carries the fastest configuration.
    fn search_on(&self, job: &Job, runs: &[Measured]) -> Option<Request> {
        let search = job.tune.as_ref()?;
        let plan = &job.plan;
        let report = job.info.lock().unwrap_or_else(|p| p.into_inner()).report.clone()?;
        let kept = tune::keep(&report).cloned();
        let kept_at = kept.as_ref().and_then(|k| plan.changes.iter().position(|c| c.text == k.change));
        let (best, speedup) = match (kept_at, &kept) {
            (Some(i), Some(k)) => (plan.variants[i].clone(), search.speedup * k.ratio.median),
            _ => (plan.baseline.clone(), search.speedup),
        };
        let next = kept_at.filter(|_| search.step < search.max_steps).and_then(|i| {
            // The kept variant's own profile says what to try next.
            let m = *plan.runs_of(Slot::Variant(i), runs).last()?;
            let changes = tune::candidates(&hotlab_report::analyze(&m.profile, &best), &best, &search.tried);
            let mut tried = search.tried.clone();
            tried.extend(changes.iter().map(|c| c.text.clone()));
            let plan = Plan::new(best.clone(), changes, plan.repeats).ok()?;
            let run = job.info.lock().unwrap_or_else(|p| p.into_inner()).run;
            let tune = Some(Search { step: search.step + 1, max_steps: search.max_steps, tried, speedup });
            Some(Request { plan, run, lesson: None, tune })
        });
        self.update(job, |a| {
            a.tune = Some(TuneStep {
                step: search.step,
                kept: kept.as_ref().map(|k| k.change.clone()),
                ratio: kept.as_ref().map(|k| k.ratio.median),
                speedup,
                flags: next.is_none().then(|| tune::flags(&best)),
                best: next.is_none().then_some(best.clone()),
            })
        });
        next
    }

    /// Runs the plan's runs one after another, then judges; what they measured.
    fn execute(&self, job: &Job) -> Result<Vec<Measured>, String> {
        self.update(job, |a| a.status = RunStatus::Running);
        let plan = &job.plan;
        // Every run of an audit on one machine: its figures compare only there.
        let source = job.info.lock().unwrap_or_else(|p| p.into_inner()).run;
        let machine = match source.and_then(|r| self.manager.machine_of(r)) {
            Some(m) => m,
            None => {
                let queued = self.manager.queued_per_machine();
                let choice = self.manager.machines().choose(None, &plan.baseline.device, &queued);
                choice.map_err(|(field, m)| format!("{field}: {m}"))?
            }
        };
        let mut measured = Vec::new();
        for (i, slot) in plan.schedule().into_iter().enumerate() {
            if job.stop.load(Ordering::Relaxed) {
                return Err("stopped".into());
            }
            let setting = plan.label(slot).to_string();
            let run = self.manager.launch(plan.spec(slot).clone(), machine.clone(), true);
            self.update(job, |a| a.runs.push(AuditRun { setting: setting.clone(), run, measured: None }));
            let summary = self.wait(run)?;
            if summary.info.status != RunStatus::Finished {
                let why = summary.info.message.as_deref().unwrap_or("no message");
                return Err(format!("run {run} ({setting}) ended {}: {why}", summary.info.status.as_str()));
            }
            let m = measure(&summary).ok_or_else(|| format!("run {run} ({setting}) measured no steps"))?;
            self.update(job, |a| a.runs[i].measured = Some(m.clone()));
            measured.push(m);
        }
        let report = plan.conclude(&measured)?;
        let figures = job.lesson.map(|l| l.figures(plan, &measured));
        self.update(job, |a| {
            a.report = Some(report);
            if let Some((signature, shows)) = figures {
                a.signature = signature;
                a.shows = Some(shows);
            }
        });
        Ok(measured)
    }

    /// Waits for a run to end; its summary.
    fn wait(&self, run: u64) -> Result<Arc<RunSummary>, String> {
        loop {
            match self.manager.summary(run) {
                Ok(Some(s)) if s.info.status.is_final() => return Ok(s),
                Ok(_) => std::thread::sleep(POLL),
                Err(e) => return Err(format!("reading run {run}: {e:#}")),
            }
        }
    }
}

/// What an audit needs of a finished run: its steps/s (the report's steady window's, else
/// the whole run's), its phase totals and counters, and its return.
fn measure(s: &RunSummary) -> Option<Measured> {
    let sps = s.report.as_ref().map(|r| r.steady_sps.unwrap_or(r.steps_per_s)).or(s.last.as_ref().map(|m| m.sps))?;
    (sps > 0.0).then(|| Measured {
        sps,
        profile: s.total.clone(),
        mean_return: s.last.as_ref().and_then(|m| m.mean_return_last_100),
    })
}
