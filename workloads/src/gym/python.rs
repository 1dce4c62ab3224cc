//! The interpreter behind a `gym` env: which Python runs it, the probe that learns its
//! spaces before anything starts, and the command line of one worker process.
//!
//! Python workers over shared memory, not Python embedded with pyo3: a worker is then a
//! plain process of the interpreter the user names (`--python`, their venv with their
//! env's dependencies), the `hotlab` binary links no libpython (it runs on the GPU boxes,
//! which have none that matches), and the trainer's side is the `subprocess` backend's own
//! region, waits and counters (`hotlab_train::exec::subprocess`).

use super::pictures;
use hotlab_core::choices::WaitMode;
use hotlab_env::{FieldKind, FieldSpec};
use hotlab_protocol::suggestions::{SuggestionGroup, Suggestions};
use hotlab_spec::SpecError;
use hotlab_specs::gym::GymImage;
use hotlab_train::exec::shm::{Layout, PARTS_BYTES};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The worker's source, run with `python -c`.
const WORKER: &str = include_str!("worker.py");

/// The interpreter when none is named: `$HOTLAB_PYTHON`, the active venv's, the project's
/// `.venv` above the running binary, or `python3` on the `PATH`.
pub fn default_python() -> PathBuf {
    if let Some(p) = std::env::var_os("HOTLAB_PYTHON").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    if let Some(venv) = std::env::var_os("VIRTUAL_ENV").filter(|p| !p.is_empty()) {
        return Path::new(&venv).join("bin/python");
    }
    above_binary(".venv/bin/python").unwrap_or_else(|| PathBuf::from("python3"))
}

/// The interpreter of an EnvPool env when none is named: `$HOTLAB_ENVPOOL_PYTHON`, the
/// project's `.venv-envpool` above the running binary (`cargo xtask lab --envpool` makes
/// it), then [`default_python`].
pub fn envpool_python() -> PathBuf {
    if let Some(p) = std::env::var_os("HOTLAB_ENVPOOL_PYTHON").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    above_binary(".venv-envpool/bin/python").unwrap_or_else(default_python)
}

/// `rel` in the nearest folder above the running binary that has it (the project's, for a
/// binary in its `target/`), None where none does.
pub fn above_binary(rel: &str) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    exe.ancestors().map(|d| d.join(rel)).find(|p| p.exists())
}

/// What the probe learned of an env's spaces.
#[derive(Clone, Debug, Deserialize)]
pub struct Probe {
    /// Elements of one flattened observation.
    pub obs_dim: usize,
    pub obs_shape: Vec<usize>,
    /// How the observation crosses the region: `f32` (a Box of any float or integer
    /// dtype, converted), or `u8` / `bool` (a Box of that dtype: bytes, as the env gave them).
    #[serde(default = "f32_kind")]
    pub obs_kind: FieldKind,
    /// Choices of each action head (one for Discrete, one per dimension for MultiDiscrete;
    /// none for a Box).
    pub heads: Vec<usize>,
    /// Components of a Box action space, flattened (0 for a Discrete or MultiDiscrete).
    #[serde(default)]
    pub continuous: usize,
    /// A Box action's bounds per component, `None` where a bound is infinite (the worker
    /// clips the sampled action to the finite ones before the env sees it).
    #[serde(default)]
    pub action_low: Vec<Option<f32>>,
    #[serde(default)]
    pub action_high: Vec<Option<f32>>,
    /// Each head's first action (a Discrete's `start`), added by the worker.
    pub starts: Vec<i64>,
    /// A Dict's or Tuple's leaves (nested ones too), in the space's order; empty for a
    /// plain Box (its one field is [`Probe::obs_field`]).
    #[serde(default)]
    pub leaves: Vec<Leaf>,
    pub render_modes: Vec<String>,
    pub max_episode_steps: Option<u64>,
    /// The env's registered id (or what it prints as).
    pub name: String,
    /// What steps the envs (what the probe was asked).
    #[serde(skip)]
    pub engine: Engine,
}

/// What steps a worker's envs: Gymnasium's, one after another (wrapped in Atari's
/// preprocessing where `atari`, its last `atari` frames stacked), or one EnvPool batch on EnvPool's own C++ threads
/// (`threads` 0: EnvPool's default), the `envpool` workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    Gymnasium { atari: Option<usize> },
    EnvPool { threads: usize },
}

impl Default for Engine {
    fn default() -> Self {
        Engine::Gymnasium { atari: None }
    }
}

impl Engine {
    /// How the worker's arguments say it.
    fn args(self) -> serde_json::Value {
        match self {
            Engine::Gymnasium { atari } => {
                serde_json::json!({"engine": "gymnasium", "atari": atari.is_some(), "stack": atari.unwrap_or(0)})
            }
            Engine::EnvPool { threads } => serde_json::json!({"engine": "envpool", "threads": threads}),
        }
    }
}

fn f32_kind() -> FieldKind {
    FieldKind::F32
}

/// One leaf of a structured observation, as the worker writes it: its key (a Dict's keys
/// joined by `.`, a Tuple's positions), its kind (an image's bytes, floats flattened, or a
/// `Discrete`/`MultiDiscrete`'s indices from 0) and shape, and an index leaf's choices.
#[derive(Clone, Debug, Deserialize)]
pub struct Leaf {
    pub key: String,
    pub kind: FieldKind,
    pub shape: Vec<usize>,
    #[serde(default)]
    pub classes: Vec<usize>,
}

impl Probe {
    /// The observation as the trainer's field: floats flattened, bytes in the env's shape
    /// (channels first or last, as the env has them).
    pub fn obs_field(&self) -> FieldSpec {
        let shape = if self.obs_kind.is_bytes() { self.obs_shape.clone() } else { vec![self.obs_dim] };
        FieldSpec::new("obs", shape, self.obs_kind)
    }

    /// The observation's fields: a plain Box's one, or a leaf's each.
    pub fn obs_fields(&self) -> Vec<FieldSpec> {
        if self.leaves.is_empty() {
            return vec![self.obs_field()];
        }
        let field =
            |l: &Leaf| FieldSpec { classes: l.classes.clone(), ..FieldSpec::new(&l.key, l.shape.clone(), l.kind) };
        self.leaves.iter().map(field).collect()
    }
}

#[derive(Deserialize)]
struct Refusal {
    field: String,
    message: String,
}

/// The env's spaces, from one short run of the worker in probe mode; a missing
/// interpreter, a missing gymnasium, an unknown id or an unsupported space is refused with
/// what to do.
pub fn probe(python: &Path, id: &str, kwargs: &serde_json::Value, engine: Engine) -> Result<Probe, SpecError> {
    let mut args = serde_json::json!({"mode": "probe", "id": id, "kwargs": kwargs, "python": python});
    merge(&mut args, engine.args());
    let out = Command::new(python).arg("-c").arg(WORKER).arg(args.to_string()).stdin(Stdio::null()).output();
    let out = out.map_err(|e| {
        SpecError::new(
            "python",
            format!(
                "cannot run the Python interpreter {} ({e}): name one with --python PATH, or create the project's venv (`cargo xtask test` makes .venv with gymnasium)",
                python.display()
            ),
        )
    })?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().rev().find(|l| l.trim_start().starts_with('{')).unwrap_or("");
    if let Ok(refused) = serde_json::from_str::<Refusal>(line) {
        // An unsupported space is the chosen env's: named on its id.
        let field = match (refused.field.as_str(), engine) {
            ("python", Engine::Gymnasium { .. }) => "python",
            ("wrappers", _) => "gym_wrappers",
            (_, Engine::Gymnasium { .. }) => "gym_id",
            ("python", Engine::EnvPool { .. }) => "envpool_python",
            ("kwargs", Engine::EnvPool { .. }) => "envpool_kwargs",
            (_, Engine::EnvPool { .. }) => "envpool_id",
        };
        return Err(SpecError::new(field, refused.message));
    }
    let probe = serde_json::from_str::<Probe>(line).map_err(|_| {
        let stderr = String::from_utf8_lossy(&out.stderr);
        SpecError::new(
            "gym_id",
            format!("probing '{id}' with {} failed ({}): {}", python.display(), out.status, stderr.trim()),
        )
    })?;
    Ok(Probe { engine, ..probe })
}

/// `extra`'s keys added to the object `args`.
fn merge(args: &mut serde_json::Value, extra: serde_json::Value) {
    if let (Some(args), serde_json::Value::Object(extra)) = (args.as_object_mut(), extra) {
        args.extend(extra);
    }
}

/// The registered ids by family, as `python` sees them (the worker in `ids` mode):
/// Gymnasium's for `gym_id`, EnvPool's for `envpool_id`. An interpreter that cannot run or has no gymnasium gives
/// the error and no ids.
pub fn registered_ids(python: &Path, engine: Engine) -> Suggestions {
    let shown = python.display().to_string();
    let knob = match engine {
        Engine::Gymnasium { .. } => "gym_id",
        Engine::EnvPool { .. } => "envpool_id",
    };
    let none = |source: String, error: String| Suggestions {
        knob: knob.into(),
        source,
        unit: "ids".into(),
        groups: Vec::new(),
        error: Some(error),
    };
    let mut args = serde_json::json!({"mode": "ids", "python": python});
    merge(&mut args, engine.args());
    let out = match Command::new(python).arg("-c").arg(WORKER).arg(args.to_string()).stdin(Stdio::null()).output() {
        Ok(out) => out,
        Err(e) => {
            let error = format!("cannot run the Python interpreter {shown} ({e}): set HOTLAB_PYTHON, or create the project's venv (`cargo xtask lab`)");
            return none(shown, error);
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().rev().find(|l| l.trim_start().starts_with('{')).unwrap_or("");
    if let Ok(refused) = serde_json::from_str::<Refusal>(line) {
        return none(shown, refused.message);
    }
    match serde_json::from_str::<Registered>(line) {
        Ok(found) => Suggestions {
            knob: knob.into(),
            source: format!("{} {} in {shown}", found.library, found.version),
            unit: "ids".into(),
            groups: found
                .families
                .into_iter()
                .map(|f| SuggestionGroup { group: f.family, values: f.ids, missing: f.missing, install: f.install })
                .collect(),
            error: None,
        },
        Err(_) => {
            let error = format!(
                "listing the ids {shown} can make failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
            none(shown, error)
        }
    }
}

/// What the worker's `ids` mode prints: the library (Gymnasium, EnvPool), its version and
/// its registry by family.
#[derive(Deserialize)]
struct Registered {
    library: String,
    version: String,
    families: Vec<Family>,
}

/// One family of registered ids, and what its envs need where it is missing.
#[derive(Deserialize)]
struct Family {
    family: String,
    ids: Vec<String>,
    missing: Option<String>,
    install: Option<String>,
}

/// What every worker process of one batch shares: the Python and env that it runs, what the
/// probe found, the region's layout, the batch's first seed and how a worker waits.
pub struct Workers<'a> {
    pub python: &'a Path,
    pub id: &'a str,
    pub kwargs: &'a serde_json::Value,
    pub probe: &'a Probe,
    pub layout: &'a Layout,
    pub seed: u64,
    pub wait: WaitMode,
}

/// One worker's command line: worker `w` serves envs `first..first + count` of the batch
/// through the region `fd`; with `pictures`, it draws env 0 into that folder when asked
/// ([`super::pictures`]).
pub fn worker_command(
    workers: &Workers<'_>,
    (w, first, count, fd): (usize, usize, usize, i32),
    pictures: Option<&Path>,
) -> Command {
    let Workers { python, id, kwargs, probe, layout: l, seed, wait } = *workers;
    // Each field's arrays, width and element as the worker writes them (flags as bytes).
    let fields: Vec<serde_json::Value> = probe
        .obs_fields()
        .iter()
        .enumerate()
        .map(|(f, field)| {
            let kind = match field.kind {
                FieldKind::U8 | FieldKind::Bool => "u8",
                FieldKind::I64 => "i64",
                FieldKind::F32 => "f32",
            };
            serde_json::json!({"obs": l.obs[f], "final_obs": l.final_obs[f], "width": field.numel(), "kind": kind})
        })
        .collect();
    let region = serde_json::json!({
        "command": l.command_at(w), "done": l.done_at(w), "heads": l.heads, "fields": fields,
        "actions": l.actions, "continuous": l.continuous, "real_actions": l.real_actions, "reward": l.reward,
        "terminated": l.terminated, "truncated": l.truncated, "episode_return": l.episode_return,
        "episode_length": l.episode_length, "ended": l.ended, "parts": l.parts, "parts_bytes": PARTS_BYTES, "size": l.size,
    });
    let mut args = serde_json::json!({
        "mode": "serve", "id": id, "kwargs": kwargs, "python": python, "fd": fd, "worker": w, "workers": l.workers,
        "envs": l.envs, "first": first, "count": count, "seed": seed, "wait": wait.as_str(),
        "parent": std::process::id(), "starts": probe.starts, "layout": region,
        "frame": pictures.map(|dir| serde_json::json!({
            "path": dir.join(pictures::PICTURE), "want": dir.join(pictures::WANT),
            "every_s": pictures::EVERY_S, "max_side": GymImage::MAX_SIDE,
        })),
    });
    merge(&mut args, probe.engine.args());
    let mut c = Command::new(python);
    c.arg("-c").arg(WORKER).arg(args.to_string()).stderr(Stdio::piped());
    c
}
