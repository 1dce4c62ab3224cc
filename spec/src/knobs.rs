//! The table of knobs: every [`RunSpec`] field as a knob (what a
//! knob is: [`Knob`]): its name (the CLI flag in
//! snake_case, the name of the flat form and of the launch form's field), its path in the
//! nested JSON, its group, its kind, a one-line help and its whole story, in the order the
//! launch panel shows them. The CLI's flags are made from this table. A workload's own
//! settings are its module's knobs ([`hotlab_specs`]) and name their workload: the
//! form shows them only for it. A test keeps this table and the spec's fields the same set.

use crate::{RunSpec, SpecError};
use hotlab_core::knob::{set_path, workload_name, Knob, KnobKind};
use hotlab_core::run_knobs::RUN;
use hotlab_specs::{EnvName, WorkloadSpec};
use serde_json::{Map, Value};
use std::sync::LazyLock;

/// The workload, first of all knobs; the run's own come after the workloads' settings.
pub const ENV: Knob = Knob {
    setter: Some(set_env),
    ..Knob::new(
        "env",
        "workload",
        "Scenario",
        KnobKind::Choice(EnvName::ALL),
        "the workload: CartPole-v1, seed 000's proof search, seeds 001–003's growing hosts, seed 004's world model on pixels, or any Gymnasium env (gym:ID, e.g. gym:Acrobot-v1)",
    )
};

/// Sets `env` in a nested spec as JSON: another workload's settings become its defaults;
/// `NAME:VALUE` (`gym:Acrobot-v1`) names the workload NAME and sets its argument's knob.
fn set_env(spec: &mut Map<String, Value>, value: Value) {
    let value = value.as_str().unwrap_or_default().to_string();
    let argument = EnvName::with_argument(&value);
    let wanted = argument.map_or(value.as_str(), |(env, ..)| env.as_str()).to_string();
    if workload_name(spec).as_deref() != Some(wanted.as_str()) {
        let settings = wanted
            .parse::<EnvName>()
            .ok()
            .and_then(|e| serde_json::to_value(WorkloadSpec::default_for(e)).ok())
            .unwrap_or_else(|| serde_json::json!({ wanted: {} }));
        spec.insert("workload".into(), settings);
    }
    if let Some((_, knob, argument)) = argument {
        set_path(spec, knob.path, Value::from(argument));
    }
}

/// Every knob: `env`, each workload's settings (their knobs are their modules', in
/// [`hotlab_specs`]), then the run's own, in the order the launch panel shows them.
pub static KNOBS: LazyLock<Vec<Knob>> =
    LazyLock::new(|| std::iter::once(&ENV).chain(hotlab_specs::knobs()).chain(RUN).copied().collect());

/// Checks every run knob with a fixed range (PPO's where PPO trains the workload), in the
/// table's order; the first bad one is named. (A workload's own settings are checked by
/// [`WorkloadSpec::validate`](hotlab_specs::WorkloadSpec::validate).)
pub fn check_ranges(spec: &RunSpec) -> Result<(), SpecError> {
    let json = serde_json::to_value(spec).ok().and_then(|v| v.as_object().cloned()).unwrap_or_default();
    let ppo = spec.env().uses_ppo();
    for knob in RUN.iter().filter(|k| k.range.is_some()) {
        if !ppo && knob.path.starts_with("ppo.") {
            continue;
        }
        if let Some(v) = knob.get(&json) {
            knob.check(&v)?;
        }
    }
    Ok(())
}

/// The knob of a spec field, by its name (the flag in snake_case).
pub fn find(name: &str) -> Option<&'static Knob> {
    KNOBS.iter().find(|k| k.name == name)
}

/// The knob at a JSON path of the nested spec.
pub fn at_path(path: &str) -> Option<&'static Knob> {
    KNOBS.iter().find(|k| k.path == path)
}

/// `spec` with knobs set (a knob and its typed value: the CLI's flags, a form's fields):
/// `env` first, so that a workload's settings land in the workload asked for wherever it
/// was named; a workload's own setting for another workload is refused, naming it.
pub fn apply(spec: RunSpec, given: &[(&Knob, Value)]) -> Result<RunSpec, SpecError> {
    if given.is_empty() {
        return Ok(spec);
    }
    let mut json = serde_json::to_value(&spec).ok().and_then(|v| v.as_object().cloned()).unwrap_or_default();
    let (env, rest): (Vec<_>, Vec<_>) = given.iter().partition(|(k, _)| k.path == "workload");
    for (knob, v) in env {
        knob.set(&mut json, v.clone());
    }
    let name = workload_name(&json).unwrap_or_default();
    let env: EnvName = name.parse().map_err(|m| SpecError::of(&ENV, m))?;
    for (knob, v) in rest {
        if !knob.applies_to(env.as_str()) {
            let owner = knob.workload.unwrap_or("another workload");
            return Err(SpecError::new(
                knob.name,
                format!("is a setting of --env {owner}, and this run's env is {env}"),
            ));
        }
        if v.is_null() && knob.kind != KnobKind::OptionalText {
            // JSON has no NaN or infinity: `Value::from` made them null.
            return Err(SpecError::new(knob.name, "must be a finite number"));
        }
        knob.set(&mut json, v.clone());
    }
    serde_json::from_value(Value::Object(json)).map_err(|e| SpecError::of(&ENV, e.to_string()))
}

/// `spec` with knobs set by name from text, as flags write them (a preset's list): each
/// name a knob (an unknown one is refused, naming it), each text its kind's value; then as
/// [`apply`].
pub fn apply_text(spec: RunSpec, pairs: &[(&str, &str)]) -> Result<RunSpec, SpecError> {
    let given = pairs
        .iter()
        .map(|(name, text)| {
            let knob = find(name).ok_or_else(|| SpecError::new(name, "is not a knob"))?;
            Ok((knob, knob.kind.value(text)))
        })
        .collect::<Result<Vec<_>, SpecError>>()?;
    apply(spec, &given)
}

/// What `spec` sets over `base`, knob by knob in the table's order, each with its value
/// as text that its knob's parser reads back: `env` where the workload differs, then each
/// knob of the spec's workload and of the run whose value differs from `base` with its
/// workload made the spec's (what `--env NAME` alone makes). What a preset's flags and a
/// lesson's settings are made from.
pub fn changed(base: &RunSpec, spec: &RunSpec) -> Vec<(&'static Knob, String)> {
    let json = |s: &RunSpec| serde_json::to_value(s).ok().and_then(|v| v.as_object().cloned()).unwrap_or_default();
    let env = spec.env();
    let switched = base.env() != env;
    let mut base = base.clone();
    if switched {
        base.workload = WorkloadSpec::default_for(env);
    }
    let (a, b) = (json(spec), json(&base));
    let mut out = Vec::new();
    for knob in KNOBS.iter().filter(|k| k.applies_to(env.as_str())) {
        let value = knob.get(&a);
        let differs = match knob.path {
            "workload" => switched,
            _ => value != knob.get(&b),
        };
        if differs {
            out.push((knob, hotlab_core::knob::text(value.as_ref())));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use hotlab_core::knob::get_path;
    use hotlab_core::run_knobs::GROUPS;

    /// Every leaf's path of a nested spec as JSON, and `workload` (the workload's name).
    fn leaves(v: &Map<String, Value>, prefix: &str, out: &mut Vec<String>) {
        for (k, v) in v {
            let path = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
            if path == "workload" {
                out.push(path.clone());
            }
            let object_knob =
                KNOBS.iter().any(|k| k.path == path && matches!(k.kind, KnobKind::Object | KnobKind::Pairs));
            match v {
                Value::Object(o) if !object_knob => leaves(o, &path, out),
                _ => out.push(path),
            }
        }
    }

    /// `--env NAME:VALUE` names a workload that takes an argument (gym's id) and sets its
    /// argument's knob, keeping its other settings when it is already the workload; a
    /// workload without an argument is not named so.
    #[test]
    fn a_workload_named_with_an_argument_sets_its_knob() {
        let env = KNOBS.iter().find(|k| k.path == "workload").unwrap();
        let to_json = |spec: &RunSpec| serde_json::to_value(spec).unwrap().as_object().unwrap().clone();
        let mut spec = to_json(&RunSpec::default());
        env.set(&mut spec, Value::from("gym:Acrobot-v1"));
        assert_eq!(
            spec["workload"],
            serde_json::json!({"gym": {"id": "Acrobot-v1", "python": null, "kwargs": {}, "wrappers": "auto", "frame_stack": 4}})
        );
        spec["workload"]["gym"]["python"] = Value::from("/opt/py");
        env.set(&mut spec, Value::from("gym:my_envs:make"));
        assert_eq!(spec["workload"]["gym"]["id"], "my_envs:make", "the id is all after the first ':'");
        assert_eq!(spec["workload"]["gym"]["python"], "/opt/py", "the gym workload's other settings kept");
        let (gym, knob, id) = EnvName::with_argument("gym:CartPole-v1").unwrap();
        assert_eq!((gym, knob.name, id), (EnvName::Gym, "gym_id", "CartPole-v1"));
        assert!(EnvName::with_argument("cartpole:x").is_none(), "cartpole takes no argument");
        assert!(EnvName::with_argument("gym").is_none() && EnvName::with_argument("nothing:x").is_none());
    }

    #[test]
    fn every_spec_field_has_one_knob_in_a_known_group() {
        for env in EnvName::ALL {
            let env: EnvName = env.parse().unwrap();
            let spec = RunSpec { workload: hotlab_specs::WorkloadSpec::default_for(env), ..RunSpec::default() };
            let json = serde_json::to_value(spec).unwrap();
            let mut fields = Vec::new();
            leaves(json.as_object().unwrap(), "", &mut fields);
            let mut fields: Vec<&str> = fields.iter().map(String::as_str).collect();
            let mut knobs: Vec<&str> = KNOBS.iter().filter(|k| k.applies_to(env.as_str())).map(|k| k.path).collect();
            fields.sort();
            knobs.sort();
            assert_eq!(fields, knobs, "{env}");
        }
        let mut names: Vec<&str> = KNOBS.iter().map(|k| k.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), KNOBS.len(), "one knob per name");
        assert!(KNOBS.iter().all(|k| GROUPS.contains(&k.group)));
        assert!(GROUPS.iter().all(|g| KNOBS.iter().any(|k| k.group == *g)), "no empty group");
    }

    #[test]
    fn knobs_read_and_write_the_nested_spec_by_path() {
        let mut spec = serde_json::to_value(RunSpec::default()).unwrap().as_object().unwrap().clone();
        find("lr").unwrap().set(&mut spec, Value::from(0.001));
        assert_eq!(spec["ppo"]["lr"], 0.001);
        find("kb").unwrap().set(&mut spec, Value::from("x.pl"));
        assert!(get_path(&spec, "workload.proof").is_none(), "a proof setting does not apply to cartpole");
        find("env").unwrap().set(&mut spec, Value::from("proof"));
        assert_eq!(find("env").unwrap().get(&spec), Some(Value::from("proof")));
        assert_eq!(find("proof_depth").unwrap().get(&spec), Some(Value::from(10)), "the proof env's defaults");
        find("kb").unwrap().set(&mut spec, Value::from("x.pl"));
        assert_eq!(spec["workload"]["proof"]["kb"], "x.pl");
        let back: RunSpec = serde_json::from_value(Value::Object(spec)).unwrap();
        assert_eq!(
            (back.env(), back.ppo.lr, back.settings::<hotlab_specs::ProofSpec>().unwrap().kb.as_str()),
            (EnvName::Proof, 0.001, "x.pl")
        );
    }

    /// A spec of workload `env` with one knob set (by JSON), validated.
    fn with(env: EnvName, knob: &Knob, v: Value) -> Result<RunSpec, SpecError> {
        let base = RunSpec { workload: hotlab_specs::WorkloadSpec::default_for(env), ..RunSpec::default() };
        let mut json = serde_json::to_value(base).unwrap().as_object().unwrap().clone();
        let v = if knob.kind == KnobKind::IntList { Value::Array(vec![v]) } else { v };
        knob.set(&mut json, v);
        let spec: RunSpec =
            serde_json::from_value(Value::Object(json)).map_err(|e| SpecError::new(knob.name, e.to_string()))?;
        spec.validate().map(|_| spec)
    }

    /// The knobs that have a range, by name: a range deleted (or added) fails here, not
    /// silently in the count of ranges checked below.
    const RANGED: &[&str] = &[
        "proof_depth",
        "embed_dim",
        "tasks",
        "task_images",
        "host_epochs",
        "host_width",
        "rent",
        "shaping",
        "clone_grower",
        "shapley_perms",
        "curriculum_from",
        "curriculum_episodes",
        "size",
        "batch_size",
        "seq_len",
        "train_ratio",
        "horizon",
        "replay_capacity",
        "prefill",
        "wm_lr",
        "ac_lr",
        "gym_frame_stack",
        "envpool_threads",
        "envs",
        "steps",
        "seconds",
        "workers",
        "worker_timeout",
        "threads",
        "epochs",
        "lr",
        "gamma",
        "gae_lambda",
        "clip",
        "ent_coef",
        "vf_coef",
        "max_grad_norm",
        "hidden",
        "rnn_width",
        "telemetry_every",
    ];

    /// A knob refused at a bound of its range by a rule with another knob (the message's
    /// start): the only refusals at a bound that name the knob itself.
    const HARDER: &[(&str, &str)] = &[
        ("envs", "envs × steps must be at most"),
        ("steps", "envs × steps must be at most"),
        ("workers", "must be at most envs ="),
    ];

    /// Each knob's range is what validation allows: its bounds pass (where another knob
    /// bounds it harder, the refusal names that other knob), just past them is refused
    /// naming the knob with its range's words, on every workload the knob applies to;
    /// every ranged knob is checked on at least one workload.
    #[test]
    fn every_range_is_enforced_at_its_bounds_naming_the_knob() {
        let ranged: Vec<&str> = KNOBS.iter().filter(|k| k.range.is_some()).map(|k| k.name).collect();
        assert_eq!(ranged, RANGED, "the ranged knobs");
        let mut checked = std::collections::BTreeSet::new();
        for env in EnvName::ALL.iter().map(|e| e.parse::<EnvName>().unwrap()) {
            let ppo = env.uses_ppo();
            for knob in KNOBS.iter().filter(|k| k.applies_to(env.as_str()) && (ppo || !k.path.starts_with("ppo."))) {
                let Some(r) = knob.range else { continue };
                let int = matches!(knob.kind, KnobKind::Int | KnobKind::IntList);
                let step = if int { 1.0 } else { 1e-9 * r.hi.max(1.0) };
                let number = |x: f64| if int { Value::from(x as u64) } else { Value::from(x) };
                let words = |m: &str| m.starts_with("must be between") || m.starts_with("must be in ");
                let refused = |x: f64| {
                    let e = with(env, knob, number(x)).expect_err(&format!("{env}: {} = {x} is allowed", knob.name));
                    assert_eq!(e.field, knob.name, "{env}: {} = {x}: {}", knob.name, e.message);
                    assert!(
                        words(&e.message),
                        "{env}: {} = {x} refused, but not by its range: {}",
                        knob.name,
                        e.message
                    );
                };
                refused(r.hi + step);
                if r.lo_open || r.lo > 0.0 {
                    refused(if r.lo_open { r.lo } else { r.lo - step });
                }
                let lo = if r.lo_open { r.lo + step } else { r.lo };
                // The bounds themselves pass, unless another knob bounds this one harder
                // (workers ≤ envs, steps × envs ≤ the rollout's cap): then that one is named.
                for x in [lo, r.hi] {
                    if let Err(e) = with(env, knob, number(x)) {
                        let harder = HARDER.iter().any(|(k, m)| *k == knob.name && e.message.starts_with(m));
                        assert!(
                            e.field != knob.name || harder,
                            "{env}: {} = {x} is in its range, yet refused: {}",
                            knob.name,
                            e.message
                        );
                    }
                }
                checked.insert(knob.name);
            }
        }
        let unchecked: Vec<&&str> = RANGED.iter().filter(|k| !checked.contains(*k)).collect();
        assert!(unchecked.is_empty(), "ranged knobs no workload checks: {unchecked:?}");
    }
}
