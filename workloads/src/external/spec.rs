//! `external`: a user's own training script (`hotlab profile -- python train.py …`), run
//! unmodified under hotlab's probe. Its settings (the command as a template, where it runs,
//! the template's values), its phases, and the report's rules that map what the probe
//! measured to the catalogue's rows and lessons.
//!
//! A module of `hotlab-specs`, the registry (the lab and the browser read it too): it is
//! written in `hotlab-core`'s words, names the registry `hotlab_specs`, and links no libtorch.

use hotlab_core::advice::{amdahl, Recommendation};
use hotlab_core::choice;
use hotlab_core::choices::{Backend, Inference};
use hotlab_core::knob::{pairs, set_path, workload_name, Knob, KnobError, KnobKind::*};
use hotlab_core::profile::{Phase, PhaseInfo, PhaseKind, Profile};
use hotlab_core::run::RunContext;
use hotlab_core::script::{kind, site, ScriptProfile};
use hotlab_specs::{setting, EnvName, Settings};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fmt;

pub mod template;

pub use template::{Placeholder, Template};

choice!(
    /// What the probe measures in the script.
    ProbeMode, "probe modes" {
        /// Everything: env steps and episodes, the torch calls' phases, reads, copies, ops.
        #[default]
        Full = "full",
        /// Env steps and episodes only, no torch hook: its steps/s are the script's own
        /// within noise, what `--probe-cost` compares the full probe's with.
        Light = "light",
    }
);

/// A user's script: in JSON `{"external": {"command": …, "cwd": …, "vars": {…}, "probe": …}}`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ExternalSpec {
    /// The command that trains, as a shell would split it, with placeholders a change can
    /// set: `{NAME=DEFAULT}` (a value) and `{NAME?TEXT}` (TEXT when the switch NAME is on).
    /// Flag `--command`; `hotlab profile -- CMD…` sets it.
    pub command: String,
    /// The directory it runs in (None: hotlab's). Flag `--cwd`.
    pub cwd: Option<String>,
    /// Values of the command's placeholders, over their defaults. Flag `--vars NAME=VALUE,…`.
    pub vars: BTreeMap<String, String>,
    /// What the probe measures. Flag `--probe-mode`.
    pub probe: ProbeMode,
}

impl ExternalSpec {
    /// The command's words, its placeholders filled; refused naming the knob at fault.
    pub fn argv(&self) -> Result<Vec<String>, KnobError> {
        let template = Template::parse(&self.command).map_err(|m| KnobError::new(Self::COMMAND.name, m))?;
        template.expand(&self.vars).map_err(|m| KnobError::new(Self::VARS.name, m))
    }

    /// The command as a person would type it, its placeholders filled (or as written, when
    /// it does not expand).
    pub fn shown(&self) -> String {
        self.argv()
            .ok()
            .and_then(|words| shlex::try_join(words.iter().map(String::as_str)).ok())
            .unwrap_or_else(|| self.command.clone())
    }

    /// The command's placeholders (none where it does not parse).
    pub fn placeholders(&self) -> Vec<Placeholder> {
        Template::parse(&self.command).map(|t| t.placeholders().to_vec()).unwrap_or_default()
    }

    fn placeholder(&self, name: &str) -> Option<Placeholder> {
        self.placeholders().into_iter().find(|p| p.name == name)
    }
}

/// Reads of tensor values by the script (`.item()`, `.tolist()`, `.numpy()`, `bool()`,
/// `float()`, `.cpu()` of a device tensor): each one a device sync on a GPU.
pub const HOST_READ: Phase = Phase::new("host_read");
/// hotlab's probe itself: its bookkeeping, measured in the script's process.
pub const PROBE: Phase = Phase::new("probe");

/// The placeholder a change to the number of envs sets.
pub const ENVS_VAR: &str = "envs";
/// The switch that steps the envs in worker processes.
pub const ASYNC_VAR: &str = "async";

/// Share of the wall in env steps past which Python envs stepped one after another in one
/// process are worth spreading over worker processes (the gym workload's threshold).
const ENV_SHARE: f64 = 0.25;
/// Share of the wall in the rollout's forwards past which a small batch is worth growing.
const FORWARD_SHARE: f64 = 0.20;
/// A forward batch below this many rows is small for any device.
const SMALL_BATCH: f64 = 32.0;
/// The most envs a batch-size advice proposes.
const MOST_ENVS: u64 = 256;

/// The knobs other code names (errors, hooks), declared once here and listed in `KNOBS`.
impl ExternalSpec {
    /// The knob of `--command`.
    pub const COMMAND: Knob = setting(EnvName::External, "command", "workload.external.command", Text, "external: the command that trains (a template: {NAME=DEFAULT}, {NAME?TEXT})")
        .about("the command that trains, your script unmodified (`python train.py --num-envs 8`), as a shell splits it; hotlab runs it under its probe and measures it. Placeholders let an audit change it: `{NAME=DEFAULT}` is a value (`--num-envs {envs=8}`), `{NAME?TEXT}` is TEXT when the switch NAME is on (`{async?--async}`); `hotlab profile -- CMD…` sets it");

    /// The knob of `--cwd`.
    pub const CWD: Knob = setting(
        EnvName::External,
        "cwd",
        "workload.external.cwd",
        OptionalText,
        "external: the directory the command runs in (empty: hotlab's)",
    )
    .about("the directory the command runs in (default: hotlab's own); the lab keeps it inside its data dir");

    /// The knob of `--vars`.
    pub const VARS: Knob = Knob {
        setter: Some(set_vars),
        ..setting(EnvName::External, "vars", "workload.external.vars", Pairs, "external: the command's placeholders' values, NAME=VALUE,… (over their defaults)")
            .about("values of the command's placeholders over their defaults, as NAME=VALUE pairs separated by commas (`envs=16,async=on`) or a JSON object; a switch takes on or off. Each value set is kept: setting one leaves the others")
    };

    /// The knob of `--probe-mode`.
    pub const PROBE_MODE: Knob = setting(EnvName::External, "probe_mode", "workload.external.probe", Choice(ProbeMode::ALL), "external: what the probe measures: full, or light (env steps and episodes only)")
        .about("what the probe measures: `full` (env steps and episodes, the phases of the torch calls, reads of tensor values and copies with their call sites, ops per step) or `light` (env steps and episodes only, no torch hook: the script's own speed within noise; `hotlab profile --probe-cost` runs both)");
}

impl Settings for ExternalSpec {
    const KNOBS: &'static [Knob] = &[Self::COMMAND, Self::CWD, Self::VARS, Self::PROBE_MODE];
    /// The script steps its own envs: hotlab's backends do not apply.
    const BACKENDS: &'static [Backend] = &[Backend::Vectorized];
    /// Its forwards are the script's own (the report's fused-forward rule does not apply).
    const INFERENCE: Option<Inference> = Some(Inference::Eager);
    const PPO: bool = false;
    const OPEN_ENDED: bool = true;
    const RUNS_COMMANDS: bool = true;
    const FLOAT_OBS: bool = false;
    /// The script's buffers are its own.
    const OBS_BYTES: u64 = 0;
    const PHASES: &'static [PhaseInfo] = &[
        PhaseInfo::new(
            HOST_READ,
            PhaseKind::Data,
            "#c792ea",
            "the script's reads of tensor values (.item(), .tolist(), .numpy(), bool(), .cpu() of a device tensor): each a device sync on a GPU",
        ),
        PhaseInfo::new(PROBE, PhaseKind::Bookkeeping, "#5c6370", "hotlab's probe itself: its bookkeeping, measured"),
    ];

    fn validate(&self) -> Result<(), KnobError> {
        if self.command.trim().is_empty() {
            return Err(KnobError::new(
                "command",
                "is empty: give the command that trains, e.g. python train.py (hotlab profile -- python train.py)",
            ));
        }
        if self.cwd.as_deref().is_some_and(|c| c.trim().is_empty()) {
            return Err(KnobError::new(Self::CWD.name, "is empty: give a directory, or leave it out"));
        }
        self.argv().map(|_| ())
    }

    fn summary(&self) -> Option<String> {
        Some(match &self.cwd {
            Some(cwd) => format!("{} (in {cwd})", self.shown()),
            None => self.shown(),
        })
    }

    fn files(&mut self) -> Vec<(&'static str, &mut String)> {
        self.cwd.as_mut().map(|c| (Self::CWD.name, c)).into_iter().collect()
    }

    fn diagnosis(&self, phase: Phase, profile: &Profile, _run: &RunContext) -> Option<String> {
        let s = profile.script.as_ref()?;
        let per_step = |secs: f64| 1e6 * secs / s.vector_steps.max(1) as f64;
        let line = match phase {
            Phase::ENV_STEP => format!(
                "{} of {} envs, {}: {:.1} µs per vector step",
                s.env_class.as_deref().unwrap_or("the env"),
                s.num_envs,
                kind_words(s.kind()),
                per_step(profile.phase(Phase::ENV_STEP))
            ),
            Phase::ENV_WAIT => format!(
                "waiting on {}'s worker processes, {:.1} µs per vector step",
                s.env_class.as_deref().unwrap_or("the env"),
                per_step(profile.phase(Phase::ENV_WAIT))
            ),
            Phase::POLICY_FORWARD => {
                let batch = s.forward_batch().map_or("?".into(), |b| format!("{b:.0}"));
                let ops = match s.ops_per_step() {
                    Some(ops) => format!("{ops:.0} torch ops per env step (1 step in {} sampled)", s.op_sample_every),
                    None => "torch ops not counted".into(),
                };
                format!("the rollout's forwards (modules called without grad), batch {batch}; {ops}")
            }
            Phase::UPDATE_FORWARD => {
                format!("the update's forwards (modules called with grad), {} optimizer steps", s.optimizer_steps)
            }
            Phase::BACKWARD => "backward(): autograd's pass over the loss".into(),
            Phase::OPTIMIZER => format!("optimizer.step() and clip_grad_norm_, {} steps", s.optimizer_steps),
            Phase::OBS_TRANSFER => {
                let per = s.copies_per_step().map_or("no rollout step seen".into(), |c| format!("{c} per env step"));
                format!(
                    "explicit moves of host tensors to the device (.to(device), .cuda()): {per}{}",
                    busiest(s, site::H2D_COPY)
                )
            }
            p if p == HOST_READ => {
                let per = s.reads_per_step().map_or("no rollout step seen".into(), |r| format!("{r} per env step"));
                format!("reads of tensor values by Python: {per}{}", busiest(s, site::HOST_READ))
            }
            Phase::OTHER => {
                "the script's own Python outside these calls: its loop, sampling, losses, GAE, logging".into()
            }
            _ => return None,
        };
        Some(line)
    }

    fn recommend(&self, profile: &Profile, _run: &RunContext, out: &mut Vec<Recommendation>) {
        let Some(s) = profile.script.as_ref() else { return };
        self.worker_rules(profile, s, out);
        transfer_rules(profile, s, out);
        telemetry_rule(profile, s, out);
        self.batch_rule(profile, s, out);
    }
}

impl ExternalSpec {
    /// Row 1: Python envs stepped one after another in one process (or one env alone)
    /// while env time dominates.
    fn worker_rules(&self, profile: &Profile, s: &ScriptProfile, out: &mut Vec<Recommendation>) {
        let share = profile.share(Phase::ENV_STEP) + profile.share(Phase::ENV_WAIT);
        if share < ENV_SHARE {
            return;
        }
        let class = s.env_class.as_deref().unwrap_or("the env");
        let rec = match s.kind() {
            Some(kind::PYTHON_IN_PROCESS) if s.num_envs >= 2 => {
                let signature = format!(
                    "{:.0}% of wall stepping {} Python envs one after another in one process ({class})",
                    100.0 * share,
                    s.num_envs
                );
                let rec = Recommendation::new(&self.switch_on(ASYNC_VAR), Phase::ENV_STEP, share, signature);
                rec.fixing("step the envs in worker processes: gymnasium.vector.AsyncVectorEnv (Stable-Baselines3: SubprocVecEnv) instead of SyncVectorEnv (DummyVecEnv)")
                    .teaching(1, "python-processes")
            }
            // One env, alone or in a vector env of one (CleanRL's MuJoCo setting).
            Some(kind::SINGLE | kind::PYTHON_IN_PROCESS) => {
                let signature = format!(
                    "{:.0}% of wall stepping one env ({class}): one core steps it, one step at a time",
                    100.0 * share
                );
                let rec = Recommendation::new(&self.switch_on(ASYNC_VAR), Phase::ENV_STEP, share, signature);
                rec.fixing("collect the batch from several envs in worker processes (gymnasium.vector.AsyncVectorEnv)")
                    .teaching(1, "one-env")
            }
            _ => return,
        };
        out.push(rec);
    }

    /// Row 10: a rollout forward of few rows while the forwards take a large share.
    fn batch_rule(&self, profile: &Profile, s: &ScriptProfile, out: &mut Vec<Recommendation>) {
        let share = profile.share(Phase::POLICY_FORWARD);
        let Some(batch) = s.forward_batch() else { return };
        if share < FORWARD_SHARE || batch >= SMALL_BATCH {
            return;
        }
        let envs = s.num_envs.max(1);
        let more = (envs * 4).clamp(SMALL_BATCH as u64, MOST_ENVS);
        let signature = format!(
            "{:.0}% of wall in the rollout's forwards of {batch:.0} rows each: fixed per-call costs (dispatch, {}) paid for few rows",
            100.0 * share,
            s.ops_per_step().map_or("its ops".into(), |o| format!("{o:.0} ops per env step"))
        );
        let knob = match self.placeholder(ENVS_VAR) {
            Some(p) if !p.switch => format!("--vars {ENVS_VAR}={more}"),
            _ => String::new(),
        };
        // More envs share each forward: at most the forwards' share per env step goes.
        let bound = amdahl(share * (1.0 - envs as f64 / more as f64));
        let rec = Recommendation::bounded(&knob, Phase::POLICY_FORWARD, bound, signature)
            .fixing(format!("batch more envs per forward: {more} envs instead of {envs} (the number of envs, --num-envs in CleanRL's scripts)"))
            .teaching(10, "batch-size");
        out.push(rec);
    }

    /// `--vars NAME=on` where the command has that switch; empty (a change to the code) otherwise.
    fn switch_on(&self, name: &str) -> String {
        match self.placeholder(name) {
            Some(p) if p.switch && !p.is_on(&self.vars) => format!("--vars {name}=on"),
            _ => String::new(),
        }
    }
}

/// Rows 2, 4 and 11: what crosses between host and device, per step and at update time.
fn transfer_rules(profile: &Profile, s: &ScriptProfile, out: &mut Vec<Recommendation>) {
    if let Some(reads) = s.reads_per_step().filter(|r| *r >= 2) {
        // One read per step is the action's; the rest could go with it.
        let share = profile.share(HOST_READ) * (reads as f64 - 1.0) / reads as f64;
        let signature = format!(
            "{reads} reads of tensor values per env step ({:.1} per env), each a device sync on a GPU; {:.1}% of wall here",
            reads as f64 / s.num_envs.max(1) as f64,
            100.0 * profile.share(HOST_READ)
        );
        let rec = Recommendation::new("", HOST_READ, share, signature)
            .fixing("read each step's values at once: stack them and read one tensor (one .cpu().numpy()), or keep them on the device")
            .teaching(4, "per-item-sync")
            .at(s.busiest(site::HOST_READ).map(|x| x.short()));
        out.push(rec);
    }
    if let Some(copies) = s.copies_per_step().filter(|c| *c >= 2) {
        let share = profile.share(Phase::OBS_TRANSFER) * (copies as f64 - 1.0) / copies as f64;
        let signature = format!(
            "{copies} copies to the device per env step, each a host→device transfer on a GPU; {:.1}% of wall here",
            100.0 * profile.share(Phase::OBS_TRANSFER)
        );
        let rec = Recommendation::new("", Phase::OBS_TRANSFER, share, signature)
            .fixing("copy once per step: gather the step's arrays into one host buffer (pinned, non_blocking=True on a GPU) and move it with one .to(device)")
            .teaching(2, "observation-copies")
            .at(s.busiest(site::H2D_COPY).map(|x| x.short()));
        out.push(rec);
    }
    if s.optimizer_steps > 0 && s.update_copies >= s.optimizer_steps {
        let per = s.update_copies as f64 / s.optimizer_steps as f64;
        let signature = format!(
            "{per:.1} copies to the device per optimizer step at update time ({} bytes per update): the rollout is kept on the host",
            s.update_copy_bytes / s.updates.max(1)
        );
        let rec = Recommendation::new("", Phase::OBS_TRANSFER, profile.share(Phase::OBS_TRANSFER), signature)
            .fixing("keep the rollout on the device: write each step into device tensors (or move the whole rollout once per update)")
            .teaching(11, "update-copies")
            .at(s.busiest(site::UPDATE_COPY).map(|x| x.short()));
        out.push(rec);
    }
}

/// Row 7: gradient statistics read every optimizer step.
fn telemetry_rule(profile: &Profile, s: &ScriptProfile, out: &mut Vec<Recommendation>) {
    if s.optimizer_steps == 0 || s.grad_reads < s.optimizer_steps {
        return;
    }
    let per = s.grad_reads as f64 / s.optimizer_steps as f64;
    let signature = format!(
        "{per:.1} reads of gradient statistics per optimizer step ({} in all): each a device sync inside the update on a GPU",
        s.grad_reads
    );
    let rec = Recommendation::new("", HOST_READ, profile.share(HOST_READ), signature)
        .fixing("log gradient norms every k updates, from one fused norm, and read them off the hot path")
        .teaching(7, "telemetry")
        .at(s.busiest(site::GRAD_READ).map(|x| x.short()));
    out.push(rec);
}

/// ", the busiest at FILE:LINE (FUNCTION)", where a site of `kind` was seen.
fn busiest(s: &ScriptProfile, kind: &str) -> String {
    s.busiest(kind).map_or(String::new(), |x| format!(", the busiest at {}", x.short()))
}

fn kind_words(kind: Option<&str>) -> &'static str {
    match kind {
        Some(kind::PYTHON_IN_PROCESS) => "Python envs stepped one after another in the script's process",
        Some(kind::WORKER_PROCESSES) => "envs in worker processes",
        Some(kind::BATCHED) => "a batch stepped in one call",
        Some(kind::SINGLE) => "one env",
        _ => "stepped as it does",
    }
}

/// Sets `vars` in a nested spec as JSON: merges NAME=VALUE pairs (or a JSON object) into
/// the values already set, so that a change to one placeholder keeps the others.
fn set_vars(spec: &mut Map<String, Value>, value: Value) {
    if workload_name(spec).as_deref() != Some(EnvName::External.as_str()) {
        return;
    }
    const PATH: &str = "workload.external.vars";
    let mut vars = hotlab_core::knob::get_path(spec, PATH).and_then(Value::as_object).cloned().unwrap_or_default();
    // A name given null (or empty) is taken back to its default.
    let mut merge = |more: Map<String, Value>| {
        for (k, v) in more {
            match v {
                Value::Null => vars.remove(&k),
                Value::String(s) if s.is_empty() => vars.remove(&k),
                v => vars.insert(k, v),
            };
        }
    };
    match value {
        Value::Object(more) => merge(more),
        Value::String(text) => match pairs(&text) {
            Some(more) => merge(more),
            // Not pairs: kept as written, so that the spec's reading names the field.
            None => return set_path(spec, PATH, Value::String(text)),
        },
        other => return set_path(spec, PATH, other),
    }
    set_path(spec, PATH, Value::Object(vars));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn vars_merge_pairs_and_objects_into_what_is_set() {
        let mut spec = json!({"workload": {"external": {"command": "python t.py", "vars": {"envs": "8"}}}});
        let map = spec.as_object_mut().unwrap();
        set_vars(map, Value::String("async=on".into()));
        set_vars(map, json!({"lr": "0.1"}));
        assert_eq!(spec["workload"]["external"]["vars"], json!({"envs": "8", "async": "on", "lr": "0.1"}));
        set_vars(spec.as_object_mut().unwrap(), Value::String("lr=".into()));
        assert_eq!(spec["workload"]["external"]["vars"], json!({"envs": "8", "async": "on"}), "lr= takes it back");
        assert_eq!(Pairs.value("a=1, b = 2"), json!({"a": "1", "b": "2"}));
        assert_eq!(Pairs.value("a"), json!("a"), "not pairs: left for the spec's reading to name");
        assert_eq!(Pairs.value(r#"{"a": "1"}"#), json!({"a": "1"}));
        let mut other = json!({"workload": {"cartpole": {}}});
        set_vars(other.as_object_mut().unwrap(), Value::String("a=1".into()));
        assert_eq!(other, json!({"workload": {"cartpole": {}}}), "another workload's spec is left alone");
    }

    /// A profile of `shares` (phase, share of 10 s) with `facts`.
    fn profile(shares: &[(Phase, f64)], facts: ScriptProfile) -> Profile {
        let phases = shares
            .iter()
            .map(|&(phase, s)| hotlab_core::profile::PhaseTime { phase, wall_s: 10.0 * s, calls: 1, device_s: None })
            .collect();
        Profile { wall_s: 10.0, phases, script: Some(Box::new(facts)), ..Profile::default() }
    }

    fn advice(spec: &ExternalSpec, p: &Profile) -> Vec<(Option<u8>, String)> {
        let (ppo, exec, telemetry) = Default::default();
        let run = RunContext { device: "cpu", envs: 1, steps: 1, ppo: &ppo, exec: &exec, telemetry: &telemetry };
        let mut out = Vec::new();
        spec.recommend(p, &run, &mut out);
        out.into_iter().map(|r| (r.row, r.knob)).collect()
    }

    /// A small forward batch (row 10) where the forwards take a large share: its knob is the
    /// command's `{envs}` where it has one, a change to the code where it does not; the rollout
    /// copied at update time (row 11) is advised from its copies per optimizer step.
    #[test]
    fn a_small_batch_and_update_time_copies_are_advised_where_they_show() {
        let facts = ScriptProfile { num_envs: 4, forward_rows: 400, forwards: 100, ..Default::default() };
        let busy = profile(&[(Phase::POLICY_FORWARD, 0.4)], facts.clone());
        let templated = ExternalSpec { command: "python t.py --num-envs {envs=4}".into(), ..Default::default() };
        assert_eq!(advice(&templated, &busy), [(Some(10), "--vars envs=32".to_string())]);
        let plain = ExternalSpec { command: "python t.py".into(), ..Default::default() };
        assert_eq!(advice(&plain, &busy), [(Some(10), String::new())]);
        let light = profile(&[(Phase::POLICY_FORWARD, 0.1)], facts.clone());
        assert!(advice(&plain, &light).is_empty(), "a small share: nothing to gain");
        let wide = ScriptProfile { forward_rows: 6400, ..facts.clone() };
        assert!(advice(&plain, &profile(&[(Phase::POLICY_FORWARD, 0.4)], wide)).is_empty(), "64 rows: not small");
        let copied = ScriptProfile { optimizer_steps: 16, update_copies: 32, updates: 1, ..Default::default() };
        assert_eq!(advice(&plain, &profile(&[], copied)), [(Some(11), String::new())]);
        let once = ScriptProfile { optimizer_steps: 16, update_copies: 3, updates: 1, ..Default::default() };
        assert!(advice(&plain, &profile(&[], once)).is_empty(), "a few copies per update is the floor");
    }

    /// Python envs in one process (row 1): the command's `{async?…}` switch is the knob
    /// while it is off; once on (or absent), the advice is a change to the code.
    #[test]
    fn python_envs_in_one_process_are_advised_worker_processes() {
        let facts = ScriptProfile {
            num_envs: 8,
            kinds: [(kind::PYTHON_IN_PROCESS.to_string(), 10)].into(),
            env_class: Some("SyncVectorEnv".into()),
            ..Default::default()
        };
        let p = profile(&[(Phase::ENV_STEP, 0.6)], facts.clone());
        let switch = ExternalSpec { command: "python t.py {async?--async}".into(), ..Default::default() };
        assert_eq!(advice(&switch, &p), [(Some(1), "--vars async=on".to_string())]);
        let on = ExternalSpec { vars: [("async".into(), "on".into())].into(), ..switch.clone() };
        assert_eq!(advice(&on, &p), [(Some(1), String::new())]);
        let batched = ScriptProfile { kinds: [(kind::BATCHED.to_string(), 10)].into(), ..facts };
        assert!(advice(&switch, &profile(&[(Phase::ENV_STEP, 0.6)], batched)).is_empty(), "a batch: nothing to spread");
    }

    #[test]
    fn a_command_is_refused_naming_what_is_wrong() {
        let spec = |command: &str| ExternalSpec { command: command.into(), ..Default::default() };
        assert_eq!(spec("").validate().unwrap_err().knob, "command");
        assert_eq!(spec("python 't.py").validate().unwrap_err().knob, "command");
        let unknown = ExternalSpec { vars: [("envz".into(), "4".into())].into(), ..spec("python t.py --n {envs=8}") };
        let e = unknown.validate().unwrap_err();
        assert_eq!(e.knob, "vars");
        assert!(e.message.contains("'envz' is not a placeholder") && e.message.contains("envs"), "{}", e.message);
        assert_eq!(spec("python t.py --n {envs=8} {async?--async}").shown(), "python t.py --n 8");
    }
}
