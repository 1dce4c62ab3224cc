//! The lab's machines: the built-in local one (runs in processes of this server) and the
//! workers connected over [`crate::wire::link`]. Each has its own limit of runs at once; a run
//! waits in the manager's queue until its machine has room (and, for a worker, is
//! connected).
//!
//! A run on a worker has a route here while it is live: what the worker says of it is
//! delivered, in order and without duplicates, to the lab thread that publishes it
//! ([`super::remote`]), and what the lab says to it goes out on the worker's connection.

use crate::clock::now_ms;
use crate::wire::link::{FileCopy, Held, Resume, ToWorker};
use crate::wire::process::FromRun;
use hotlab_protocol::system::SystemInfo;
use hotlab_protocol::{Load, MachineInfo};
use hotlab_spec::RunSpec;
use std::collections::{BTreeMap, HashMap};
use std::sync::{mpsc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::mpsc::UnboundedSender;

/// What reaches a remote run's lab thread.
pub enum Delivery {
    /// Message `n` of the run.
    Message(u64, Box<FromRun>),
    /// The run is gone with its worker (the reason).
    Lost(String),
}

/// A machine's connection to the lab.
struct Link {
    id: u64,
    tx: UnboundedSender<ToWorker>,
}

#[derive(Default)]
struct Machine {
    local: bool,
    /// The Ray cluster (`--ray`): always there, its runs placed by Ray, each by a
    /// worker of its own started as a Ray job.
    ray: bool,
    /// A worker started for one run (a Ray job's): not listed, forgotten after its run.
    ephemeral: bool,
    system: Option<SystemInfo>,
    max_runs: usize,
    /// Runs started on it and not over.
    running: usize,
    link: Option<Link>,
    last_seen: Option<(Instant, u64)>,
    /// Since when a worker is away (None while connected, and for the local machine).
    away_since: Option<Instant>,
    load: Option<Load>,
}

/// A live run on a worker.
struct Route {
    machine: String,
    tx: mpsc::Sender<Delivery>,
    spec: RunSpec,
    files: Vec<FileCopy>,
    /// The last message delivered, and the last one published (queued for the store).
    delivered: u64,
    published: u64,
    /// The last `n` acknowledged to the worker.
    acked: u64,
    stop: bool,
    watched: bool,
}

#[derive(Default)]
struct Inner {
    machines: BTreeMap<String, Machine>,
    routes: HashMap<u64, Route>,
    next_link: u64,
}

pub struct Machines {
    inner: Mutex<Inner>,
    /// How long a worker may be away before its runs are `interrupted`.
    pub grace: Duration,
}

/// What the lab answers a worker's hello with, and what it sends right after.
pub struct Welcome {
    pub resume: Vec<Resume>,
    pub forget: Vec<u64>,
    pub then: Vec<ToWorker>,
}

impl Machines {
    pub fn new(grace: Duration) -> Self {
        Self { inner: Mutex::default(), grace }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds the built-in local machine.
    pub fn add_local(&self, name: &str, system: SystemInfo, max_runs: usize) {
        let m = Machine { local: true, system: Some(system), max_runs: max_runs.max(1), ..Machine::default() };
        self.lock().machines.insert(name.to_string(), m);
    }

    /// A machine the store says a live run was on, before its worker is back (after the
    /// lab restarted): known, away since now.
    pub fn expect(&self, name: &str) {
        let away = || Machine { away_since: Some(Instant::now()), ..Machine::default() };
        self.lock().machines.entry(name.to_string()).or_insert_with(away);
    }

    /// Adds the Ray cluster as the machine `ray`: it takes any number of runs (Ray queues
    /// them) and any device (Ray places them where it is).
    pub fn add_ray(&self) {
        let m = Machine { ray: true, max_runs: RAY_RUNS, ..Machine::default() };
        self.lock().machines.insert(RAY.to_string(), m);
    }

    /// Whether `name` is the Ray cluster.
    pub fn is_ray(&self, name: &str) -> bool {
        self.lock().machines.get(name).is_some_and(|m| m.ray)
    }

    /// Whether `name` is the local machine.
    pub fn is_local(&self, name: &str) -> bool {
        self.lock().machines.get(name).is_some_and(|m| m.local)
    }

    /// Every machine, for `GET /api/machines`.
    pub fn list(&self, queued: &HashMap<String, usize>) -> Vec<MachineInfo> {
        let inner = self.lock();
        inner
            .machines
            .iter()
            .filter(|(_, m)| !m.ephemeral)
            .map(|(name, m)| MachineInfo {
                name: name.clone(),
                local: m.local,
                ray: m.ray,
                connected: m.local || m.ray || m.link.is_some(),
                system: m.system.clone(),
                max_runs: m.max_runs,
                runs: m.running,
                queued: queued.get(name).copied().unwrap_or(0),
                last_seen_ms: m.last_seen.map(|(_, ms)| ms),
                load: m.load.clone(),
            })
            .collect()
    }

    /// The machine for a spec: `wanted` when given (refused when unknown or without the
    /// device the spec asks for), else the connected machine with the device and the
    /// most room. `Err((field, message))`.
    pub fn choose(
        &self,
        wanted: Option<&str>,
        device: &str,
        queued: &HashMap<String, usize>,
    ) -> Result<String, (&'static str, String)> {
        let inner = self.lock();
        let names = || inner.machines.keys().cloned().collect::<Vec<_>>().join(", ");
        if let Some(name) = wanted {
            let Some(m) = inner.machines.get(name) else {
                let known = match inner.machines.is_empty() {
                    true => "none is connected".to_string(),
                    false => format!("known: {}", names()),
                };
                return Err(("machine", format!("'{name}': no such machine ({known})")));
            };
            return match has_device(m, device) {
                true => Ok(name.to_string()),
                false => {
                    Err(("device", format!("'{device}': the machine '{name}' has no such device ({})", devices(m))))
                }
            };
        }
        // With Ray, Ray places what no one placed.
        if inner.machines.get(RAY).is_some_and(|m| m.ray) {
            return Ok(RAY.to_string());
        }
        let free = |(name, m): &(&String, &Machine)| {
            let load = m.running + queued.get(*name).copied().unwrap_or(0);
            load as f64 / m.max_runs.max(1) as f64
        };
        let candidates: Vec<(&String, &Machine)> = inner
            .machines
            .iter()
            .filter(|(_, m)| !m.ephemeral && (m.local || m.link.is_some()) && has_device(m, device))
            .collect();
        match candidates.into_iter().min_by(|a, b| free(a).total_cmp(&free(b))) {
            Some((name, _)) => Ok(name.clone()),
            None if inner.machines.is_empty() => Err((
                "machine",
                "no machine is connected: start `hotlab worker --lab URL --worker-token T` on one (or serve with the local worker on)"
                    .into(),
            )),
            None => Err(("device", format!("'{device}': no connected machine has it (machines: {})", names()))),
        }
    }

    /// Takes a place on `name` for a run, when it is connected and has room.
    pub fn try_take(&self, name: &str) -> bool {
        let mut inner = self.lock();
        match inner.machines.get_mut(name) {
            Some(m) if (m.local || m.ray || m.link.is_some()) && m.running < m.max_runs => {
                m.running += 1;
                true
            }
            _ => false,
        }
    }

    /// Takes a place for a run that was already running there (resumed after a restart).
    pub fn take_resumed(&self, name: &str) {
        if let Some(m) = self.lock().machines.get_mut(name) {
            m.running += 1;
        }
    }

    /// Gives back a run's place.
    pub fn release(&self, name: &str) {
        if let Some(m) = self.lock().machines.get_mut(name) {
            m.running = m.running.saturating_sub(1);
        }
    }

    /// A worker said hello: it is connected now (a previous connection of the same name
    /// is replaced: its session ends). Returns the connection's id and the welcome.
    pub fn connect(
        &self,
        name: &str,
        hello: Hello,
        held: &[Held],
        tx: UnboundedSender<ToWorker>,
    ) -> Result<(u64, Welcome), String> {
        let Hello { system, max_runs, once } = hello;
        let mut inner = self.lock();
        if let Some(m) = inner.machines.get(name).filter(|m| m.local || m.ray) {
            let what = if m.local { "local" } else { "Ray" };
            return Err(format!("'{name}' is the name of the lab's own {what} machine: give the worker another"));
        }
        inner.next_link += 1;
        let id = inner.next_link;
        let m = inner.machines.entry(name.to_string()).or_default();
        m.system = Some(system);
        m.max_runs = max_runs.max(1);
        m.ephemeral = once.is_some();
        m.link = Some(Link { id, tx });
        m.away_since = None;
        m.last_seen = Some((Instant::now(), now_ms()));
        let mut welcome = Welcome { resume: Vec::new(), forget: Vec::new(), then: Vec::new() };
        for h in held {
            match inner.routes.get(&h.run) {
                Some(r) if r.machine == name => {
                    welcome.resume.push(Resume { run: h.run, have: r.delivered, committed: r.acked })
                }
                _ => welcome.forget.push(h.run),
            }
        }
        for (&run, r) in inner.routes.iter_mut().filter(|(_, r)| r.machine == name) {
            if held.iter().any(|h| h.run == run) {
                if r.stop {
                    welcome.then.push(ToWorker::Stop { run });
                }
                if r.watched {
                    welcome.then.push(ToWorker::Watched { run, watched: true });
                }
            } else if r.delivered == 0 {
                // The start was lost with the last connection: it goes again.
                welcome.then.push(ToWorker::Start { run, spec: Box::new(r.spec.clone()), files: r.files.clone() });
            } else {
                let why = format!("the worker '{name}' came back without run {run} (it was restarted?)");
                let _ = r.tx.send(Delivery::Lost(why));
            }
        }
        Ok((id, welcome))
    }

    /// A worker's connection ended (unless a newer one has replaced it).
    pub fn disconnect(&self, name: &str, link: u64) {
        if let Some(m) = self.lock().machines.get_mut(name) {
            if m.link.as_ref().is_some_and(|l| l.id == link) {
                m.link = None;
                m.away_since = Some(Instant::now());
            }
        }
    }

    /// Whether `link` is still `name`'s connection.
    pub fn is_current(&self, name: &str, link: u64) -> bool {
        self.lock().machines.get(name).and_then(|m| m.link.as_ref()).is_some_and(|l| l.id == link)
    }

    pub fn heartbeat(&self, name: &str, load: Option<Load>) {
        if let Some(m) = self.lock().machines.get_mut(name) {
            m.last_seen = Some((Instant::now(), now_ms()));
            if load.is_some() {
                m.load = load;
            }
        }
    }

    /// Whether `name` is a worker connected now.
    pub fn is_connected(&self, name: &str) -> bool {
        self.lock().machines.get(name).is_some_and(|m| m.link.is_some())
    }

    /// How long a worker has been away (None: connected, or local).
    pub fn away_for(&self, name: &str) -> Option<Duration> {
        self.lock().machines.get(name).and_then(|m| m.away_since).map(|t| t.elapsed())
    }

    /// Sends to a worker; false when it is not connected (the route keeps what matters,
    /// and the next welcome repeats it).
    pub fn send(&self, name: &str, m: ToWorker) -> bool {
        let inner = self.lock();
        inner.machines.get(name).and_then(|m| m.link.as_ref()).is_some_and(|l| l.tx.send(m).is_ok())
    }

    /// Opens a remote run's route; `delivered` is the last message the lab has of it.
    pub fn open_route(
        &self,
        run: u64,
        machine: &str,
        spec: RunSpec,
        files: Vec<FileCopy>,
        delivered: u64,
    ) -> mpsc::Receiver<Delivery> {
        let (tx, rx) = mpsc::channel();
        let route = Route {
            machine: machine.to_string(),
            tx,
            spec,
            files,
            delivered,
            published: delivered,
            acked: delivered,
            stop: false,
            watched: false,
        };
        self.lock().routes.insert(run, route);
        rx
    }

    pub fn close_route(&self, run: u64) {
        let mut inner = self.lock();
        let Some(route) = inner.routes.remove(&run) else { return };
        // A run's own worker (a Ray job's) goes with its run once it has gone.
        if inner.machines.get(&route.machine).is_some_and(|m| m.ephemeral && m.link.is_none()) {
            inner.machines.remove(&route.machine);
        }
    }

    /// Forgets a run's own worker that has gone (its route closed before it left).
    pub fn forget_ephemeral(&self, name: &str) {
        let mut inner = self.lock();
        let gone = inner.machines.get(name).is_some_and(|m| m.ephemeral && m.link.is_none());
        if gone && !inner.routes.values().any(|r| r.machine == name) {
            inner.machines.remove(name);
        }
    }

    /// Records a wish (stop, watched) on the route, and passes it on when connected.
    pub fn tell(&self, run: u64, m: ToWorker) {
        let mut inner = self.lock();
        let Some(r) = inner.routes.get_mut(&run) else { return };
        match &m {
            ToWorker::Stop { .. } => r.stop = true,
            ToWorker::Watched { watched, .. } => r.watched = *watched,
            _ => {}
        }
        let name = r.machine.clone();
        if let Some(l) = inner.machines.get(&name).and_then(|m| m.link.as_ref()) {
            let _ = l.tx.send(m);
        }
    }

    /// Message `n` of `run` from the worker `from`: delivered when it is the next one of
    /// a run of that worker's; a duplicate or another worker's run is dropped; a gap is
    /// an error (the connection is closed, and the worker resends from what the lab has).
    pub fn deliver(&self, from: &str, run: u64, n: u64, msg: FromRun) -> Result<(), String> {
        let mut inner = self.lock();
        let Some(r) = inner.routes.get_mut(&run) else { return Ok(()) };
        if r.machine != from {
            // A worker reports its own runs only.
            tracing::warn!("worker '{from}' sent a message of run {run}, which is '{}''s: dropped", r.machine);
            return Ok(());
        }
        if n <= r.delivered {
            return Ok(());
        }
        if n != r.delivered + 1 {
            return Err(format!("run {run}: message {n} came after {} (one is missing)", r.delivered));
        }
        r.delivered = n;
        let _ = r.tx.send(Delivery::Message(n, Box::new(msg)));
        Ok(())
    }

    /// Messages of `name`'s runs delivered to their lab threads and not yet published (on
    /// their way to the store's queue, which does not count them yet).
    pub fn in_flight(&self, name: &str) -> usize {
        let inner = self.lock();
        let routes = inner.routes.values().filter(|r| r.machine == name);
        routes.map(|r| r.delivered.saturating_sub(r.published) as usize).sum()
    }

    /// The lab thread has published message `n` of `run` (queued it for the store).
    pub fn published(&self, run: u64, n: u64) {
        if let Some(r) = self.lock().routes.get_mut(&run) {
            r.published = n;
        }
    }

    /// The runs of `name` with messages published since their last acknowledgement, and
    /// up to where: to acknowledge once the store has committed them.
    pub fn to_ack(&self, name: &str) -> Vec<(u64, u64)> {
        let inner = self.lock();
        let routes = inner.routes.iter().filter(|(_, r)| r.machine == name && r.published > r.acked);
        routes.map(|(&run, r)| (run, r.published)).collect()
    }

    /// Those have been acknowledged.
    pub fn acked(&self, acks: &[(u64, u64)]) {
        let mut inner = self.lock();
        for &(run, n) in acks {
            if let Some(r) = inner.routes.get_mut(&run) {
                r.acked = r.acked.max(n);
            }
        }
    }
}

/// The Ray cluster's name as a machine.
pub const RAY: &str = "ray";

/// Runs the Ray cluster takes at once (it queues them itself).
const RAY_RUNS: usize = 10_000;

/// What a worker's hello says of its machine.
pub struct Hello {
    pub system: SystemInfo,
    pub max_runs: usize,
    pub once: Option<u64>,
}

impl Machines {
    /// Whether a run asking for `device` on machine `name` lands on a CUDA device there
    /// (`auto` does where it has one); false for a machine not known.
    pub fn cuda_for(&self, name: &str, device: &str) -> bool {
        let inner = self.lock();
        let Some(m) = inner.machines.get(name) else { return false };
        let has_cuda = m.system.as_ref().is_some_and(|s| s.devices.iter().any(|d| d.id.starts_with("cuda")));
        match device {
            "auto" => has_cuda,
            d => d.starts_with("cuda"),
        }
    }
}

fn has_device(m: &Machine, device: &str) -> bool {
    let Some(system) = &m.system else { return true };
    match device {
        "auto" | "cpu" => true,
        "cuda" => system.devices.iter().any(|d| d.id.starts_with("cuda")),
        other => system.devices.iter().any(|d| d.id == other),
    }
}

fn devices(m: &Machine) -> String {
    m.system
        .as_ref()
        .map_or("not known yet".into(), |s| s.devices.iter().map(|d| d.id.as_str()).collect::<Vec<_>>().join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hotlab_protocol::system::DeviceInfo;

    fn system(cuda: bool) -> SystemInfo {
        let mut devices = vec![DeviceInfo { id: "cpu".into(), name: "cpu".into(), memory_bytes: None }];
        if cuda {
            devices.push(DeviceInfo { id: "cuda:0".into(), name: "gpu".into(), memory_bytes: None });
        }
        SystemInfo {
            name: "hotlab".into(),
            version: "0".into(),
            torch_version: "0".into(),
            cuda_available: cuda,
            devices,
            cpu_cores: 2,
            torch_threads: 2,
            store_bytes: None,
            store: None,
            scripts: None,
        }
    }

    fn hello(cuda: bool, max_runs: usize) -> Hello {
        Hello { system: system(cuda), max_runs, once: None }
    }

    #[test]
    fn a_run_goes_where_the_device_is_and_the_room() {
        let m = Machines::new(Duration::from_secs(1));
        let none = HashMap::new();
        assert_eq!(m.choose(None, "cpu", &none).unwrap_err().0, "machine");
        m.add_local("here", system(false), 1);
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        m.connect("gpu-box", hello(true, 2), &[], tx).unwrap();
        assert_eq!(m.choose(None, "cuda", &none).unwrap(), "gpu-box");
        let cuda = |name, device| m.cuda_for(name, device);
        assert_eq!((cuda("gpu-box", "auto"), cuda("gpu-box", "cuda:0"), cuda("gpu-box", "cpu")), (true, true, false));
        assert_eq!((cuda("here", "auto"), cuda("elsewhere", "auto")), (false, false));
        assert_eq!(m.choose(Some("here"), "cuda:0", &none).unwrap_err().0, "device");
        assert_eq!(m.choose(Some("elsewhere"), "cpu", &none).unwrap_err().0, "machine");
        // The local machine full, the worker has room.
        assert!(m.try_take("here"));
        assert!(!m.try_take("here"), "one run at a time there");
        assert_eq!(m.choose(None, "cpu", &HashMap::from([("here".to_string(), 3)])).unwrap(), "gpu-box");
        m.release("here");
        assert!(m.try_take("here"));
        // A worker cannot take the local machine's name.
        let (tx, _rx2) = tokio::sync::mpsc::unbounded_channel();
        assert!(m.connect("here", hello(false, 1), &[], tx).is_err());
        m.add_ray();
        assert_eq!(m.choose(None, "cuda", &none).unwrap(), RAY, "with Ray, Ray places what no one placed");
        assert_eq!(m.list(&none).len(), 3);
    }

    #[test]
    fn messages_are_delivered_once_and_in_order_and_only_from_their_worker() {
        let m = Machines::new(Duration::from_secs(1));
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        m.connect("box", hello(false, 1), &[], tx).unwrap();
        let rx = m.open_route(7, "box", RunSpec::default(), vec![], 0);
        let end = || FromRun::End { status: hotlab_protocol::RunStatus::Finished, message: None, publish_s: 0.0 };
        assert!(m.deliver("box", 7, 1, end()).is_ok());
        assert!(m.deliver("box", 7, 1, end()).is_ok(), "a duplicate is dropped quietly");
        assert!(m.deliver("box", 7, 3, end()).is_err(), "a gap closes the connection");
        assert!(m.deliver("other", 7, 2, end()).is_ok(), "another worker's message is dropped");
        let got: Vec<u64> = rx
            .try_iter()
            .map(|d| match d {
                Delivery::Message(n, _) => n,
                Delivery::Lost(_) => 0,
            })
            .collect();
        assert_eq!(got, [1]);
        m.published(7, 1);
        assert_eq!(m.to_ack("box"), [(7, 1)]);
        m.acked(&[(7, 1)]);
        assert!(m.to_ack("box").is_empty());
    }

    #[test]
    fn a_worker_that_comes_back_resumes_its_runs_and_restarts_lost_starts() {
        let m = Machines::new(Duration::from_secs(1));
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let (first, _) = m.connect("box", hello(false, 2), &[], tx).unwrap();
        let going = m.open_route(1, "box", RunSpec::default(), vec![], 0);
        let _unsent = m.open_route(2, "box", RunSpec::default(), vec![], 0);
        let end = FromRun::End { status: hotlab_protocol::RunStatus::Finished, message: None, publish_s: 0.0 };
        m.deliver("box", 1, 1, end).unwrap();
        m.disconnect("box", first);
        assert!(m.away_for("box").is_some());
        // Back, holding run 1 and a run the lab no longer has; run 2's start was lost.
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let held = [Held { run: 1, live: true }, Held { run: 9, live: false }];
        let (_, w) = m.connect("box", hello(false, 2), &held, tx).unwrap();
        assert_eq!(w.resume, [Resume { run: 1, have: 1, committed: 0 }]);
        assert_eq!(w.forget, [9]);
        assert!(matches!(w.then.as_slice(), [ToWorker::Start { run: 2, .. }]));
        assert!(m.away_for("box").is_none());
        // Back again without run 1 (the worker restarted): the run is lost.
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        m.connect("box", hello(false, 2), &[], tx).unwrap();
        assert!(going.try_iter().any(|d| matches!(d, Delivery::Lost(why) if why.contains("without run 1"))));
    }
}
