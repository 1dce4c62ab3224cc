//! `hotlab-protocol`: what the lab, its workers, the CLI and the browser say to each other.
//! This root is the event protocol; [`system`] is what `/api/system` answers, [`sweep`] a
//! grid of knob values and its table, [`suggestions`] the values a machine offers for a
//! knob, and [`pixels`] grey frames on the wire.
//!
//! The lab's event protocol, version [`PROTOCOL_VERSION`]: what a run's history over REST
//! and its WebSocket stream carry, in the same form.
//!
//! A run is a sequence of events numbered from 1 (`seq`). Every event is a JSON object
//! with `v`, `run`, `seq` and `kind`, and the fields of its kind:
//!
//! | kind | fields |
//! |---|---|
//! | `status` | `status` (`queued`, `running`, `finished`, `failed`, `stopped`, `interrupted`), `message` when there is one |
//! | `metrics` | `metrics`: one update's [`MetricsPoint`] |
//! | `profile` | `profile`: that update's phase times ([`Profile`]) |
//! | `report` | `report`: the bottleneck report ([`Report`]) at the end of the run |
//! | `rollout` | `frame`: what a few envs are doing ([`Frame`]) |
//!
//! Rollout frames are kept in the history at a rate fixed by the run (one a second);
//! a live viewer also gets the newest frame at its own rate (`fps`), and such a frame,
//! not kept, has `seq` 0 ([`LIVE_FRAME_SEQ`]): it is shown, never counted.

pub mod pixels;
pub mod suggestions;
pub mod sweep;
pub mod system;

use hotlab_core::profile::Profile;
use hotlab_report::Report;
use serde::{Deserialize, Serialize};

pub const PROTOCOL_VERSION: u32 = 1;

/// The `seq` of a live rollout frame that the history does not keep.
pub const LIVE_FRAME_SEQ: u64 = 0;

/// Where a run is in its life.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    #[default]
    Queued,
    Running,
    Finished,
    Failed,
    Stopped,
    /// It was queued or running when the server died.
    Interrupted,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Queued => "queued",
            RunStatus::Running => "running",
            RunStatus::Finished => "finished",
            RunStatus::Failed => "failed",
            RunStatus::Stopped => "stopped",
            RunStatus::Interrupted => "interrupted",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [Self::Queued, Self::Running, Self::Finished, Self::Failed, Self::Stopped, Self::Interrupted]
            .into_iter()
            .find(|x| x.as_str() == s)
    }

    /// No event follows a final status.
    pub fn is_final(self) -> bool {
        !matches!(self, RunStatus::Queued | RunStatus::Running)
    }
}

/// One update's figures.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MetricsPoint {
    pub update: u64,
    pub updates: u64,
    pub global_step: u64,
    pub wall_s: f64,
    pub sps: f64,
    pub episodes: u64,
    pub mean_return_last_100: Option<f64>,
    pub lr: f64,
    /// The learner's own figures, by name, beside these keys in JSON ([`Losses`]).
    #[serde(flatten)]
    pub losses: Losses,
    /// Seconds of this update's rollout and of its learning.
    pub rollout_s: f64,
    pub update_s: f64,
}

/// A learner's figures of one iteration, by name, in the order it gives them: PPO's
/// `policy_loss`, `value_loss`, `entropy`, `approx_kl`, `clip_fraction`; the dreamer's
/// `actor_loss`, …, and its world model's terms as `world.image`, `world.kl`, …
///
/// In JSON each is a key of the object that holds them; a name with a dot is a key of a
/// nested object (`world.image` is `"world": {"image": …}`), so a learner's group of terms
/// reads as one object. The loop and the lab name none of them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Losses(pub Vec<(String, f64)>);

impl Losses {
    /// Adds a figure (names are the learner's; the last one given for a name counts).
    pub fn push(&mut self, name: impl Into<String>, value: f64) {
        let name = name.into();
        match self.0.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = value,
            None => self.0.push((name, value)),
        }
    }

    pub fn get(&self, name: &str) -> Option<f64> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(n, _)| n.as_str())
    }

    /// The first figure that is not a finite number, if any.
    pub fn first_not_finite(&self) -> Option<(&str, f64)> {
        self.0.iter().find(|(_, v)| !v.is_finite()).map(|(n, v)| (n.as_str(), *v))
    }
}

impl<S: Into<String>> FromIterator<(S, f64)> for Losses {
    fn from_iter<I: IntoIterator<Item = (S, f64)>>(iter: I) -> Self {
        let mut out = Losses::default();
        for (n, v) in iter {
            out.push(n, v);
        }
        out
    }
}

impl Serialize for Losses {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        // Groups in the order their first term comes; NaN and infinities are null in JSON.
        let mut groups: Vec<(&str, serde_json::Map<String, serde_json::Value>)> = Vec::new();
        let mut map = s.serialize_map(None)?;
        for (name, v) in &self.0 {
            match name.split_once('.') {
                Some((group, term)) => match groups.iter_mut().find(|(g, _)| *g == group) {
                    Some((_, terms)) => {
                        terms.insert(term.into(), serde_json::Value::from(*v));
                    }
                    None => {
                        groups.push((group, [(term.to_string(), serde_json::Value::from(*v))].into_iter().collect()))
                    }
                },
                None => map.serialize_entry(name, v)?,
            }
        }
        for (group, terms) in groups {
            map.serialize_entry(group, &terms)?;
        }
        map.end()
    }
}

/// Reads every number as a figure and every object of numbers as a group. Other values
/// are not figures and are passed over: a point is read beside keys it does not know.
impl<'de> Deserialize<'de> for Losses {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let map = serde_json::Map::<String, serde_json::Value>::deserialize(d)?;
        let mut out = Losses::default();
        for (name, v) in map {
            match v {
                serde_json::Value::Number(n) => out.push(name, n.as_f64().unwrap_or(f64::NAN)),
                // A figure that was not finite when written.
                serde_json::Value::Null => out.push(name, f64::NAN),
                serde_json::Value::Object(terms) => {
                    for (term, v) in terms {
                        if let Some(x) = v.as_f64() {
                            out.push(format!("{name}.{term}"), x);
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(out)
    }
}

impl MetricsPoint {
    /// The points as CSV: the point's own columns, then every figure any point names, in
    /// the order they first come (an empty cell where a point lacks one).
    pub fn csv(points: &[MetricsPoint]) -> String {
        let mut names: Vec<&str> = Vec::new();
        for p in points {
            for n in p.losses.names() {
                if !names.contains(&n) {
                    names.push(n);
                }
            }
        }
        let mut out = String::from("update,updates,global_step,wall_s,sps,episodes,mean_return_last_100,lr");
        for n in &names {
            out.push(',');
            out.push_str(n);
        }
        out.push_str(",rollout_s,update_s\n");
        for p in points {
            let ret = p.mean_return_last_100.map_or(String::new(), |r| r.to_string());
            out.push_str(&format!(
                "{},{},{},{},{},{},{ret},{}",
                p.update, p.updates, p.global_step, p.wall_s, p.sps, p.episodes, p.lr
            ));
            for n in &names {
                out.push(',');
                if let Some(v) = p.losses.get(n) {
                    out.push_str(&v.to_string());
                }
            }
            out.push_str(&format!(",{},{}\n", p.rollout_s, p.update_s));
        }
        out
    }
}

/// A glimpse of the rollout, for watching it: which workload drew it, at which step, and
/// that workload's own fields (its frame type: `CartpoleFrame`, `MorphoFrame`… in
/// [`hotlab_specs`]), beside `env` and `step` in JSON.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Frame {
    pub env: String,
    pub step: u64,
    #[serde(flatten)]
    pub data: serde_json::Map<String, serde_json::Value>,
}

/// What a recurrent policy shows of itself in a frame, beside its workload's fields (under
/// [`PolicyMemory::KEY`]): env 0's state norm after each step of its current episode.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PolicyMemory {
    /// `lstm` or `gru`.
    pub cell: String,
    /// ‖state‖ (an LSTM's `h` and `c` together) after each of env 0's steps this episode.
    pub state_norm: Vec<f32>,
}

impl PolicyMemory {
    pub const KEY: &'static str = "memory";
}

impl Frame {
    /// `env`'s frame at `step`, from its workload's frame type.
    pub fn new<T: Serialize>(env: hotlab_specs::EnvName, step: u64, fields: &T) -> Self {
        let data = match serde_json::to_value(fields) {
            Ok(serde_json::Value::Object(data)) => data,
            _ => serde_json::Map::new(),
        };
        Self { env: env.as_str().into(), step, data }
    }

    /// Its fields as `env`'s frame type; None for another workload's frame (or one that
    /// does not read as it).
    pub fn read<T: serde::de::DeserializeOwned>(&self, env: hotlab_specs::EnvName) -> Option<T> {
        if self.env != env.as_str() {
            return None;
        }
        serde_json::from_value(serde_json::Value::Object(self.data.clone())).ok()
    }
}

/// What happened, by kind.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EventBody {
    Status {
        status: RunStatus,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    Metrics {
        metrics: MetricsPoint,
    },
    Profile {
        profile: Profile,
    },
    Report {
        report: Report,
    },
    Rollout {
        frame: Frame,
    },
}

impl EventBody {
    pub fn kind(&self) -> &'static str {
        match self {
            EventBody::Status { .. } => "status",
            EventBody::Metrics { .. } => "metrics",
            EventBody::Profile { .. } => "profile",
            EventBody::Report { .. } => "report",
            EventBody::Rollout { .. } => "rollout",
        }
    }
}

/// One event of one run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub v: u32,
    pub run: u64,
    pub seq: u64,
    #[serde(flatten)]
    pub body: EventBody,
}

/// A run as `GET /api/runs` lists it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    pub id: u64,
    pub status: RunStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Milliseconds since the Unix epoch.
    pub created_ms: u64,
    pub spec: hotlab_spec::RunSpec,
    /// Events so far (the last `seq`).
    pub events: u64,
    /// Steps per second at the last update, once there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sps: Option<f64>,
    /// Events the store could not keep up with and did not write (frames go first; a
    /// metric only when no frame is left to drop).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped: u64,
    /// Seconds the trainer spent handing its events to the lab (the log, the store's
    /// queue and the live stream): what watching costs the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publish_s: Option<f64>,
    /// The machine it runs on (`GET /api/machines`); None for a run of a lab before
    /// machines were named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    /// Its Ray job, on a lab with `--ray`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ray_job: Option<RayJob>,
}

/// A run's Ray job: its submission id and its state as the head last said.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RayJob {
    pub id: String,
    /// `PENDING`, `RUNNING`, `SUCCEEDED`, `FAILED` or `STOPPED`.
    pub status: String,
}

/// A run in a few numbers, for comparing runs without reading every event
/// (`GET /api/runs/{id}/summary`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    pub info: RunInfo,
    /// Every profile window, summed.
    pub total: Profile,
    /// The last update's figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last: Option<MetricsPoint>,
    /// The bottleneck report, once the run has ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<Report>,
}

impl RunSummary {
    /// Folds one event in (status events change `info` only through the caller).
    pub fn add(&mut self, body: &EventBody) {
        match body {
            EventBody::Profile { profile } => self.total.accumulate(profile),
            EventBody::Metrics { metrics } => self.last = Some(metrics.clone()),
            EventBody::Report { report } => self.report = Some(report.clone()),
            _ => {}
        }
    }
}

/// An audit in the lab (`GET /api/audits/{id}`): what it compares, its runs so far, and
/// once they are all measured, its verdicts. A lesson is an audit with its lesson's id.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AuditInfo {
    pub id: u64,
    /// Milliseconds since the Unix epoch.
    pub created_ms: u64,
    /// The run it audits, when it was launched from a run's view.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<u64>,
    /// The lesson it is, with the parameters it ran with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lesson: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<hotlab_report::lessons::Params>,
    /// `queued`, `running`, then `finished`, `failed`, `stopped` or `interrupted`.
    pub status: RunStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    pub baseline: hotlab_spec::RunSpec,
    pub changes: Vec<ChangeInfo>,
    pub repeats: usize,
    /// The runs in the plan's order, as they start.
    pub runs: Vec<AuditRun>,
    /// The verdicts, once every run is measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<hotlab_report::audit::AuditReport>,
    /// A lesson's signature: the slow setting's figure, then each fix's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signature: Vec<hotlab_report::lessons::Figure>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shows: Option<bool>,
    /// A step of a search for the fastest setup (`POST /api/runs/{id}/tune`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tune: Option<TuneStep>,
}

/// Where a search for the fastest setup is, after one of its audits.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TuneStep {
    /// 1 for the first audit of the search.
    pub step: usize,
    /// The change kept by this step, and its measured ratio.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio: Option<f64>,
    /// The kept ratios so far, multiplied (×).
    pub speedup: f64,
    /// When the search ended here: the fastest configuration, and it as `hotlab train` flags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best: Option<hotlab_spec::RunSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flags: Option<String>,
}

/// A change an audit compares, as written, with the bound its report predicted.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChangeInfo {
    pub change: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound: Option<f64>,
}

/// One run of an audit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AuditRun {
    /// `baseline` or the change.
    pub setting: String,
    /// The lab's run.
    pub run: u64,
    /// What it measured, once it finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured: Option<hotlab_report::audit::Measured>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_flat_json_objects_with_seq_and_kind() {
        let e = Event {
            v: PROTOCOL_VERSION,
            run: 3,
            seq: 7,
            body: EventBody::Status { status: RunStatus::Failed, message: Some("NaN".into()) },
        };
        let j = serde_json::to_value(&e).unwrap();
        assert_eq!(j["seq"], 7);
        assert_eq!(j["kind"], "status");
        assert_eq!(j["status"], "failed");
        assert_eq!(serde_json::from_value::<Event>(j).unwrap(), e);
        assert!(RunStatus::Interrupted.is_final() && !RunStatus::Queued.is_final());
        assert_eq!(RunStatus::parse("stopped"), Some(RunStatus::Stopped));
    }

    /// A learner's figures sit beside the point's own keys, a dotted name nested as a group;
    /// they read back in their order, and a point of another learner keeps its own names.
    #[test]
    fn figures_are_keys_of_the_point_and_groups_nest() {
        let mut p = MetricsPoint { update: 3, ..MetricsPoint::default() };
        p.losses =
            [("actor_loss", 0.5), ("world.image", 800.0), ("world.kl", 2.0), ("entropy", 0.7)].into_iter().collect();
        let j = serde_json::to_value(&p).unwrap();
        assert_eq!((j["actor_loss"].as_f64(), j["world"]["image"].as_f64()), (Some(0.5), Some(800.0)));
        assert!(j.get("world.image").is_none(), "grouped, not dotted, in JSON");
        let back: MetricsPoint = serde_json::from_value(j).unwrap();
        assert_eq!(back.losses.get("world.kl"), Some(2.0));
        assert_eq!(back.update, 3);
        let ppo = MetricsPoint { losses: [("policy_loss", f64::NAN)].into_iter().collect(), ..MetricsPoint::default() };
        let ppo: MetricsPoint = serde_json::from_str(&serde_json::to_string(&ppo).unwrap()).unwrap();
        assert!(ppo.losses.get("policy_loss").is_some_and(f64::is_nan), "null reads back as not finite");
        assert_eq!(ppo.losses.first_not_finite().map(|(n, _)| n), Some("policy_loss"));
        let csv = MetricsPoint::csv(&[back, ppo]);
        let header = csv.lines().next().unwrap();
        assert!(
            header.ends_with("lr,actor_loss,entropy,world.image,world.kl,policy_loss,rollout_s,update_s"),
            "{header}"
        );
        assert_eq!(csv.lines().nth(2).unwrap().split(',').count(), header.split(',').count());
    }

    /// A frame reads back as its own workload's type only.
    #[test]
    fn a_frame_reads_as_its_workloads_type_only() {
        use hotlab_specs::cartpole::CartpoleFrame;
        use hotlab_specs::proof::ProofFrame;
        use hotlab_specs::EnvName;
        let fields = CartpoleFrame { states: vec![[0.1, 0.0, -0.2, 0.0]], actions: vec![1] };
        let f = Frame::new(EnvName::Cartpole, 7, &fields);
        let j = serde_json::to_value(&f).unwrap();
        assert_eq!(
            (j["env"].as_str(), j["step"].as_u64(), j["actions"][0].as_i64()),
            (Some("cartpole"), Some(7), Some(1))
        );
        let back: Frame = serde_json::from_value(j).unwrap();
        assert_eq!(back.read::<CartpoleFrame>(EnvName::Cartpole), Some(fields));
        assert_eq!(back.read::<ProofFrame>(EnvName::Proof), None);
    }
}

/// One of the lab's machines (`GET /api/machines`): the built-in local one, or a worker
/// connected to the lab (`hotlab worker`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MachineInfo {
    pub name: String,
    /// The lab's own machine (runs in processes of the server).
    pub local: bool,
    /// The Ray cluster (`hotlab serve --ray`): each run a Ray job, placed by Ray.
    #[serde(default)]
    pub ray: bool,
    /// Connected now (the local one always is).
    pub connected: bool,
    /// Its versions, devices and cores (None until a worker the lab expects is back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<crate::system::SystemInfo>,
    /// Runs at once.
    pub max_runs: usize,
    /// Runs on it now.
    pub runs: usize,
    /// Runs waiting for it.
    pub queued: usize,
    /// Milliseconds since the Unix epoch of its last heartbeat (None: local, or not yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seen_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<Load>,
}

/// A worker's load, from its heartbeats.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Load {
    /// Runs training on it.
    pub runs: usize,
    /// GPU memory in use, summed over its GPUs (where the driver tells).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_memory_used_bytes: Option<u64>,
    /// GPU utilization, 0 to 1, averaged over its GPUs (where the driver tells).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_utilization: Option<f64>,
}

/// The lab machine's lesson checks (`GET /api/lessons/checks`): what `hotlab lesson check`
/// found here, one process per lesson, cached in the lab's data dir.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LessonChecks {
    /// The newest check of each lesson checked here, in catalogue order.
    pub checks: Vec<hotlab_report::lessons::Check>,
    /// When the newest check ended (ms since the epoch), if one has.
    pub checked_ms: Option<u64>,
    /// What they ran on (the first device's name).
    pub machine: String,
    /// The lesson being checked now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running: Option<String>,
    /// Lessons queued after it.
    #[serde(default)]
    pub left: usize,
}
