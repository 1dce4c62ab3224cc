//! A spec as JSON: the flat form of earlier versions migrated to the nested one, and a
//! user's JSON read field by field so that a refusal names the field.
//!
//! The flat form had every knob at the top level under its flag's name (`{"env": "proof",
//! "lr": 0.003, "kb": …, "proof_depth": 10}`), and every workload's settings whatever the
//! workload. [`nested`] moves each knob to its path from [`crate::knobs`] and keeps only
//! the named workload's own settings.

use super::{EnvName, RunSpec, SpecError};
use crate::knobs;
use hotlab_core::knob::set_path;
use serde_json::{Map, Value};

/// The top-level keys that only the nested form has.
const NESTED_ONLY: &[&str] = &["workload", "ppo", "exec", "telemetry"];

/// Whether `key` is a top-level key of the flat form that the nested form does not have.
fn flat_only(key: &str) -> bool {
    knobs::find(key).is_some_and(|k| k.path != k.name)
}

/// The nested form of a spec written in either form. A bare workload name
/// (`"workload": "proof"`) is that workload with its defaults. Keys that are no knob are
/// left where they are, for deserialization to refuse by name.
pub fn nested(value: Value) -> Result<Value, SpecError> {
    let Value::Object(mut obj) = value else { return Ok(value) };
    if let Some(Value::String(name)) = obj.get("workload") {
        let name = name.clone();
        obj.insert("workload".into(), serde_json::json!({ name: {} }));
    }
    let Some(flat) = obj.keys().find(|k| flat_only(k)).cloned() else { return Ok(Value::Object(obj)) };
    if let Some(nested) = obj.keys().find(|k| NESTED_ONLY.contains(&k.as_str())) {
        return Err(SpecError::new(
            &flat,
            format!("'{flat}' is the flat form of earlier versions and '{nested}' the nested one: write the spec in one form"),
        ));
    }
    let env = match obj.remove("env") {
        None => EnvName::default().as_str().to_string(),
        Some(Value::String(name)) => name,
        Some(other) => {
            return Err(SpecError::of(
                &knobs::ENV,
                format!("must be one of {} (got {other})", EnvName::ALL.join(", ")),
            ));
        }
    };
    let mut out = Map::new();
    out.insert("workload".into(), serde_json::json!({ &env: {} }));
    for (key, v) in obj {
        match knobs::find(&key) {
            // Earlier versions wrote every workload's settings: only this one's are kept.
            Some(k) if k.workload.is_some_and(|w| w != env) => {}
            Some(k) => set_path(&mut out, k.path, v),
            None => {
                out.insert(key, v);
            }
        }
    }
    Ok(Value::Object(out))
}

/// Why a JSON spec was refused: an unknown field, or a value that is not allowed.
#[derive(Clone, Debug, PartialEq)]
pub struct Refusal {
    /// True for a field that does not exist (then `error.field` is the key as written).
    pub unknown: bool,
    pub error: SpecError,
}

impl Refusal {
    fn unknown(key: &str, path: &str, allowed: Vec<&str>) -> Self {
        let message = format!("unknown field '{key}'; allowed: {}", allowed.join(", "));
        Refusal { unknown: true, error: SpecError { field: key.into(), path: path.into(), message } }
    }

    fn invalid(path: &str, message: String) -> Self {
        let field = knobs::at_path(path).map_or(path, |k| k.name);
        Refusal { unknown: false, error: SpecError { field: field.into(), path: path.into(), message } }
    }
}

/// A spec from a user's JSON in either form: every field known, every value of the right
/// type (the first bad one named by its knob and its path), then every value in range.
pub fn parse(value: Value) -> Result<RunSpec, Refusal> {
    let value = nested(value).map_err(|error| Refusal { unknown: false, error })?;
    let Value::Object(fields) = &value else {
        return Err(Refusal::invalid("body", "a run spec must be a JSON object".into()));
    };
    let mut defaults = serde_json::to_value(RunSpec::default()).expect("a spec serializes");
    if let Some(w) = fields.get("workload") {
        let env = w.as_object().filter(|o| o.len() == 1).and_then(|o| o.keys().next()?.parse::<EnvName>().ok());
        let Some(env) = env else {
            let shown = serde_json::to_string(w).unwrap_or_default();
            let message = format!(
                "must name one workload with its settings, e.g. {{\"proof\": {{\"kb\": …}}}}; allowed: {} (got {shown})",
                EnvName::ALL.join(", ")
            );
            return Err(Refusal::invalid("workload", message));
        };
        defaults["workload"] = serde_json::to_value(super::WorkloadSpec::default_for(env)).expect("serializes");
    }
    check(fields, defaults.as_object().expect("an object"), "")?;
    let spec = RunSpec::deserialize(value).map_err(|e| Refusal::invalid("body", e.to_string()))?;
    spec.validate().map_err(|error| Refusal { unknown: false, error })?;
    Ok(spec)
}

/// Every key of `fields` exists in `defaults`, and every leaf deserializes on its own.
fn check(fields: &Map<String, Value>, defaults: &Map<String, Value>, prefix: &str) -> Result<(), Refusal> {
    for (key, v) in fields {
        let path = if prefix.is_empty() { key.clone() } else { format!("{prefix}.{key}") };
        let Some(default) = defaults.get(key) else {
            return Err(Refusal::unknown(key, &path, defaults.keys().map(String::as_str).collect()));
        };
        match (v, default) {
            // An empty default is a settings struct without fields or a map of anything
            // (gym's `kwargs`): what the map takes is accepted, a struct's keys are unknown.
            (Value::Object(inner), Value::Object(d)) if d.is_empty() && !inner.is_empty() => {
                if alone(&path, v).is_err() {
                    check(inner, d, &path)?;
                }
            }
            (Value::Object(inner), Value::Object(d)) => check(inner, d, &path)?,
            _ => alone(&path, v).map_err(|e| Refusal::invalid(&path, format!("{path}: {e}")))?,
        }
    }
    Ok(())
}

/// `v` deserialized at `path` of a spec that has nothing else.
fn alone(path: &str, v: &Value) -> Result<(), serde_json::Error> {
    let mut only = Map::new();
    set_path(&mut only, path, v.clone());
    RunSpec::deserialize(Value::Object(only)).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hotlab_core::choices::Backend;
    use hotlab_specs::WorkloadSpec;
    use serde_json::json;

    #[test]
    fn the_flat_form_migrates_to_the_nested_one() {
        let flat = json!({"env": "proof", "envs": 8, "lr": 0.003, "backend": "threads", "kb": "kb.pl",
            "proof_depth": 6, "telemetry_every": 5, "hidden": [32]});
        let spec: RunSpec = serde_json::from_value(flat).unwrap();
        assert_eq!(
            (spec.env(), spec.envs, spec.ppo.lr, spec.exec.backend),
            (EnvName::Proof, 8, 0.003, Backend::Threads)
        );
        assert_eq!(
            (
                spec.settings::<hotlab_specs::ProofSpec>().unwrap().kb.as_str(),
                spec.settings::<hotlab_specs::ProofSpec>().unwrap().depth
            ),
            ("kb.pl", 6)
        );
        assert_eq!((spec.telemetry.every, spec.ppo.hidden.clone()), (5, vec![32]));
        // A flat CartPole spec carried the proof env's settings too: they are dropped.
        let old = json!({"env": "cartpole", "kb": "family:people=200,seed=3", "proof_depth": 10, "embed_dim": 32});
        let spec: RunSpec = serde_json::from_value(old).unwrap();
        assert_eq!(spec.workload, WorkloadSpec::default());
        assert_eq!(serde_json::to_value(&spec).unwrap()["workload"], json!({"cartpole": {}}));
    }

    #[test]
    fn a_spec_in_both_forms_or_with_a_bad_workload_is_refused() {
        let e = nested(json!({"lr": 0.1, "ppo": {"epochs": 2}})).unwrap_err();
        assert_eq!(e.field, "lr");
        assert!(e.message.contains("one form"), "{e}");
        let r = parse(json!({"workload": {"mountaincar": {}}})).unwrap_err();
        assert_eq!((r.unknown, r.error.path.as_str()), (false, "workload"));
        assert!(r.error.message.contains("allowed: cartpole, proof"), "{}", r.error.message);
    }

    #[test]
    fn a_refusal_names_the_knob_and_its_path() {
        let r = parse(json!({"ppo": {"lr": "fast"}})).unwrap_err();
        assert_eq!((r.unknown, r.error.field.as_str(), r.error.path.as_str()), (false, "lr", "ppo.lr"));
        let r = parse(json!({"lr": "fast"})).unwrap_err();
        assert_eq!((r.error.field.as_str(), r.error.path.as_str()), ("lr", "ppo.lr"), "the flat form too");
        let r = parse(json!({"exec": {"backnd": "threads"}})).unwrap_err();
        assert_eq!((r.unknown, r.error.field.as_str(), r.error.path.as_str()), (true, "backnd", "exec.backnd"));
        assert!(r.error.message.contains("backend"), "the allowed keys are listed: {}", r.error.message);
        let r = parse(json!({"workload": {"proof": {"depth": 0}}})).unwrap_err();
        assert_eq!((r.error.field.as_str(), r.error.path.as_str()), ("proof_depth", "workload.proof.depth"));
        assert_eq!(r.error.to_string().split(':').next(), Some("--proof-depth"), "the CLI flag");
        let r = parse(json!({"workload": {"cartpole": {"kb": "x"}}})).unwrap_err();
        assert!(r.unknown && r.error.path == "workload.cartpole.kb", "{r:?}");
        let r = parse(json!({"workload": "proof", "exec": {"backend": "device"}})).unwrap_err();
        assert_eq!(r.error.field, "backend");
        let ok = parse(json!({"workload": {"gym": {"id": "Acrobot-v1", "kwargs": {"max_episode_steps": 200}}}}));
        let kwargs = ok.map(|s| serde_json::to_value(&s).unwrap()["workload"]["gym"]["kwargs"].clone());
        assert_eq!(kwargs, Ok(json!({"max_episode_steps": 200})), "gym's kwargs are the env's, any key");
        let ok = parse(json!({"workload": "proof", "ppo": {"lr": 0.003}})).unwrap();
        assert_eq!((ok.env(), ok.ppo.lr), (EnvName::Proof, 0.003));
    }
}
