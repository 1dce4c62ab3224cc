//! `gym`: any Gymnasium env (`--env gym:ID`), stepped by Python worker processes through
//! shared memory ([`python`](crate::gym::python) says why not pyo3), trained by PPO with the MLP actor-critic, or the CNN one for an image.
//! Box observations of floats are flattened to f32; a uint8 or bool Box (an image, a
//! grid of flags) stays bytes in its own shape through the shared region; Discrete and
//! MultiDiscrete actions are
//! categorical heads (one per dimension); a Box action is the policy's diagonal Gaussian
//! head (flattened, clipped to its bounds by the worker before the env sees it, while the
//! rollout keeps the sample the loss needs).
//!
//! Two ways to run the envs, one code path: one Python process holding them all
//! ([`GymEnv::vector_env`](hotlab_train::exec::EnvMaker::vector_env), the single-process mode: every env steps under one GIL), or
//! `W` processes each holding a slice ([`GymEnv::worker_processes`](hotlab_train::exec::EnvMaker::worker_processes), the `subprocess`
//! backend). Both are the `subprocess` backend's [`Subprocess`](hotlab_train::exec::subprocess::Subprocess) with Python workers, so
//! the waits (`spin|block`), the worker timeout and the counters are the native ones.

pub mod pictures;
pub mod python;

use anyhow::Result;
use hotlab_core::choices::WaitMode;
use hotlab_env::{Actions, BatchEnv, EnvError, EnvSpec, FieldKind, FieldSpec, HeadSpec, Observations};
use hotlab_env::{FieldData, StepBatch};
use hotlab_env::{ScalarEnv, MAX_CONTINUOUS};
use hotlab_protocol::pixels;
use hotlab_protocol::suggestions::Suggestions;
use hotlab_protocol::Frame;
use hotlab_spec::{RunSpec, SpecError};
use hotlab_specs::gym::{GymFrame, GymLeaf, GymSeen};
use hotlab_specs::EnvName;
use hotlab_specs::GymSpec;
use hotlab_train::checkpoint::Stored;
use hotlab_train::error::RunError;
use hotlab_train::exec::shm::Layout;
use hotlab_train::exec::subprocess::{Completion, Subprocess};
use hotlab_train::exec::EnvMaker;
use hotlab_train::models;
use hotlab_train::models::cnn::Image;
use hotlab_train::workload::{Learner, Setup, TrainedPolicy, Workload};
use pictures::Pictures;
use python::{Engine, Probe};
use std::path::PathBuf;
use std::sync::Arc;

/// Envs shown per frame.
pub const FRAME_ENVS: usize = 4;

/// The registry's entry: the env probed (a missing interpreter or gymnasium, an unknown
/// id or an unsupported space is refused here, named).
impl crate::Native for GymSpec {
    fn load(settings: &Self, _spec: &RunSpec) -> Result<Arc<dyn Workload>, SpecError> {
        let python = settings.python.as_ref().map(PathBuf::from);
        let kwargs = serde_json::Value::Object(settings.kwargs.clone());
        let engine = Engine::Gymnasium { atari: settings.atari().then_some(settings.frame_stack) };
        Ok(Arc::new(GymEnv::open_with(&settings.id, python, kwargs, engine)?))
    }

    /// The Gymnasium ids the default Python can make, by family.
    fn suggestions() -> Option<Suggestions> {
        Some(python::registered_ids(&python::default_python(), Engine::default()))
    }
}

/// A Gymnasium env as hotlab steps it: its id, its interpreter, its `make` keywords, and
/// its spaces (probed once, when it is opened).
pub struct GymEnv {
    pub id: String,
    pub python: PathBuf,
    pub kwargs: serde_json::Value,
    pub probe: Probe,
    spec: EnvSpec,
    pictures: Pictures,
}

impl GymEnv {
    /// Probes `id` (a registered id, or `module:callable`) with `python` (the default
    /// interpreter when None); refused, naming the field, when it cannot run.
    pub fn open(id: &str, python: Option<PathBuf>, kwargs: serde_json::Value) -> Result<Self, SpecError> {
        Self::open_with(id, python, kwargs, Engine::default())
    }

    /// [`GymEnv::open`], its envs stepped by `engine` (Gymnasium's, each wrapped in
    /// Atari's preprocessing or not, or an EnvPool batch).
    pub fn open_with(
        id: &str,
        python: Option<PathBuf>,
        kwargs: serde_json::Value,
        engine: Engine,
    ) -> Result<Self, SpecError> {
        let (id_knob, kwargs_knob) = match engine {
            Engine::Gymnasium { .. } => ("gym_id", "gym_kwargs"),
            Engine::EnvPool { .. } => ("envpool_id", "envpool_kwargs"),
        };
        if id.trim().is_empty() {
            return Err(SpecError::new(id_knob, "is empty: give an env's id (gym:CartPole-v1, envpool:Breakout-v5)"));
        }
        if !kwargs.is_object() {
            return Err(SpecError::new(
                kwargs_knob,
                format!("must be a JSON object of make()'s keywords (got {kwargs})"),
            ));
        }
        let python = python.unwrap_or_else(|| match engine {
            Engine::Gymnasium { .. } => python::default_python(),
            Engine::EnvPool { .. } => python::envpool_python(),
        });
        let probe = python::probe(&python, id, &kwargs, engine)?;
        if probe.continuous > MAX_CONTINUOUS {
            return Err(SpecError::new(
                id_knob,
                format!(
                    "'{id}' acts with {} real-valued components (a Box action space flattened); at most {MAX_CONTINUOUS} are allowed",
                    probe.continuous
                ),
            ));
        }
        let prefix = match engine {
            Engine::Gymnasium { .. } => "gym",
            Engine::EnvPool { .. } => "envpool",
        };
        let spec = EnvSpec {
            name: format!("{prefix}:{id}"),
            fields: probe.obs_fields(),
            heads: probe.heads.iter().enumerate().map(|(i, &n)| HeadSpec { name: format!("action{i}"), n }).collect(),
            masked: false,
            continuous: probe.continuous,
        };
        Ok(Self { id: id.to_string(), python, kwargs, probe, spec, pictures: Pictures::default() })
    }

    pub fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    /// `envs` envs (global indices from `first`) in `workers` Python processes.
    fn processes(&self, envs: usize, seed: u64, first: usize, workers: usize, wait: WaitMode) -> Result<Subprocess> {
        let layout = Layout::of(&self.spec, envs, workers);
        // Worker envs are seeded `base + g` (`g` within this batch); a slice of a larger
        // batch starts its streams at its first global index.
        let base = seed + first as u64;
        // The worker holding env 0 draws it, where the env has pictures to draw.
        let drawn = first == 0 && self.probe.render_modes.iter().any(|m| m == "rgb_array");
        let batch = python::Workers {
            python: &self.python,
            id: &self.id,
            kwargs: &self.kwargs,
            probe: &self.probe,
            layout: &layout,
            seed: base,
            wait,
        };
        let launch = |w: usize, start: usize, count: usize, fd: i32| {
            let pictures = if drawn && start == 0 { self.pictures.folder() } else { None };
            (python::worker_command(&batch, (w, start, count, fd), pictures.as_deref()), None)
        };
        Subprocess::start(self.spec.clone(), envs, workers, wait, Completion::EachWorker, &launch)
    }
}

/// A batch that could not start: its error, at every call.
struct Broken {
    spec: EnvSpec,
    envs: usize,
    error: EnvError,
}

impl BatchEnv for Broken {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }
    fn num_envs(&self) -> usize {
        self.envs
    }
    fn reset(&mut self, _out: &mut Observations) -> Result<(), EnvError> {
        Err(self.error.clone())
    }
    fn step(&mut self, _actions: &[i64], _out: &mut StepBatch) -> Result<(), EnvError> {
        Err(self.error.clone())
    }
}

/// No scalar env: a Python env steps in its interpreter, so the `sequential` and
/// `threads` backends (which step scalar envs in this process) are refused for `gym`
/// before a run starts. Every call answers its observation with zeros and ends the
/// episode, never a step of an env that is not there.
struct NoScalar(EnvSpec);

impl ScalarEnv for NoScalar {
    fn spec(&self) -> &EnvSpec {
        &self.0
    }
    fn reset(&mut self, obs: &mut [FieldData]) {
        obs.iter_mut().for_each(|f| *f = FieldData::zeros(&self.0.fields[0], 1));
    }
    fn step(&mut self, _action: &[i64], obs: &mut [FieldData]) -> (f64, bool, bool) {
        self.reset(obs);
        (0.0, true, false)
    }
}

impl EnvMaker for GymEnv {
    fn name(&self) -> &'static str {
        match self.probe.engine {
            Engine::Gymnasium { .. } => "gym",
            Engine::EnvPool { .. } => "envpool",
        }
    }

    /// One Python process holding all `count` envs.
    fn vector_env(&self, count: usize, seed: u64, first: u64) -> Box<dyn BatchEnv> {
        match self.processes(count, seed, first as usize, 1, WaitMode::Block) {
            Ok(p) => Box::new(p),
            Err(e) => Box::new(Broken { spec: self.spec.clone(), envs: count, error: EnvError(format!("{e:#}")) }),
        }
    }

    fn scalar_env(&self, _seed: u64, _index: u64) -> Box<dyn ScalarEnv> {
        Box::new(NoScalar(self.spec.clone()))
    }

    fn worker_flags(&self) -> (Vec<String>, Option<String>) {
        // Its workers are Python processes of its own (`worker_processes`).
        (Vec::new(), None)
    }

    fn worker_processes(&self, envs: usize, seed: u64, workers: usize, wait: WaitMode) -> Option<Result<Subprocess>> {
        Some(self.processes(envs, seed, 0, workers, wait))
    }
}

/// Most channels of env 0's observation a frame carries (RGB's 3, a frame stack's 4).
const SEEN_PLANES: usize = 4;

/// Env 0's image as its channels' grey planes (flags as 0 and 255); None for a vector.
fn seen(spec: &FieldSpec, field: &FieldData) -> Option<GymSeen> {
    let image = Image::of(spec).ok()?;
    let (c, h, w) = (image.channels as usize, image.height as usize, image.width as usize);
    let (FieldData::U8(bytes) | FieldData::Bool(bytes)) = field else { return None };
    let env0 = bytes.get(..c * h * w)?;
    let scale = if spec.kind == FieldKind::Bool { 255 } else { 1 };
    let plane = |k: usize| -> Vec<u8> {
        match image.channels_last {
            true => env0.iter().skip(k).step_by(c).map(|&b| b.saturating_mul(scale)).collect(),
            false => env0[k * h * w..(k + 1) * h * w].iter().map(|&b| b.saturating_mul(scale)).collect(),
        }
    };
    let planes = (0..c.min(SEEN_PLANES)).map(|k| pixels::encode(&plane(k))).collect();
    Some(GymSeen { width: w as u32, height: h as u32, planes })
}

/// Env 0's leaves: each one's values listed, or its image painted.
fn leaves_of(specs: &[FieldSpec], obs: &Observations) -> Vec<GymLeaf> {
    let leaf = |(spec, field): (&FieldSpec, &FieldData)| {
        let n = spec.numel();
        let values = match field {
            FieldData::F32(v) => v.iter().take(n).copied().collect(),
            FieldData::I64(v) => v.iter().take(n).map(|&i| i as f32).collect(),
            FieldData::U8(_) | FieldData::Bool(_) => Vec::new(),
        };
        GymLeaf { key: spec.name.clone(), values, classes: spec.classes.clone(), seen: seen(spec, field) }
    };
    specs.iter().zip(&obs.fields).map(leaf).collect()
}

impl Workload for GymEnv {
    fn frame(&self, step: u64, obs: &Observations, actions: Actions<'_>) -> Option<Frame> {
        let field = obs.fields.first()?;
        let structured = !self.probe.leaves.is_empty();
        let (heads, dims) = (self.spec.heads.len(), self.spec.continuous);
        let dim = self.spec.fields[0].numel().max(1);
        // Envs whose actions are all there (a frame may come with none).
        let whole = |len: usize, k: usize| len.checked_div(k).unwrap_or(usize::MAX);
        let n = (field.len() / dim).min(whole(actions.index.len(), heads)).min(whole(actions.real.len(), dims));
        let n = n.min(FRAME_ENVS);
        let rows = |k: usize| (0..n).map(move |e| e * k..(e + 1) * k);
        // A vector is shown as numbers; an image is env 0's picture, not its bytes; a Dict's
        // or Tuple's leaves are env 0's, one by one.
        let obs_rows = match field {
            FieldData::F32(values) if !structured => values.chunks_exact(dim).take(n).map(<[f32]>::to_vec).collect(),
            _ => vec![Vec::new(); n],
        };
        let frame = GymFrame {
            id: self.id.clone(),
            obs: obs_rows,
            actions: rows(heads).map(|r| actions.index[r].to_vec()).collect(),
            real: if dims == 0 { Vec::new() } else { rows(dims).map(|r| actions.real[r].to_vec()).collect() },
            image: self.pictures.newest(),
            seen: if structured { None } else { seen(&self.spec.fields[0], field) },
            leaves: if structured { leaves_of(&self.spec.fields, obs) } else { Vec::new() },
        };
        Some(Frame::new(EnvName::Gym, step, &frame))
    }

    /// The CNN for an image, the MLP for a vector.
    fn learner(self: Arc<Self>, setup: &mut Setup<'_>) -> Result<Box<dyn Learner>, RunError> {
        let env_spec = self.spec.clone();
        models::ppo_learner(self, setup, &env_spec)
    }

    fn load_policy(self: Arc<Self>, stored: Stored) -> Result<Box<dyn TrainedPolicy>> {
        models::load_trained(stored, self)
    }
}
