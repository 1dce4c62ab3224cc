//! Property-based tests: random and mutated input thrown at the spec parser (the REST
//! API's and the files'). None may panic; a spec it accepts is valid and survives a round
//! trip; a refusal names a field. Each property tries `CASES` inputs (2,000; 4,000 in all).
//! The Prolog parser's are the proof workload's (`workloads/tests/prolog_fuzz.rs`).

use hotlab_shared::knobs::KNOBS;
use hotlab_shared::spec::{json, RunSpec};
use proptest::prelude::*;
use serde_json::{Map, Value};

const CASES: u32 = 2_000;

fn config() -> ProptestConfig {
    ProptestConfig { cases: CASES, failure_persistence: None, ..ProptestConfig::default() }
}

/// Keys a spec may have, and nonsense.
fn key() -> impl Strategy<Value = String> {
    let known: Vec<String> = ["workload", "ppo", "exec", "telemetry", "cartpole", "proof", "every", "depth"]
        .iter()
        .map(|s| s.to_string())
        .chain(KNOBS.iter().map(|k| k.name.to_string()))
        .collect();
    prop_oneof![proptest::sample::select(known), "[a-z_]{1,10}"]
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (0u64..1 << 30).prop_map(Value::from),
        any::<f64>().prop_filter("JSON numbers are finite", |f| f.is_finite()).prop_map(Value::from),
        proptest::sample::select(vec!["cartpole", "proof", "cpu", "cuda", "threads", "fused", "graph", "bf16", ""])
            .prop_map(Value::from),
        "[ -~]{0,12}".prop_map(Value::from),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 40, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..6)
                .prop_map(|kvs| Value::Object(kvs.into_iter().collect::<Map<String, Value>>())),
        ]
    })
}

/// What a parsed spec must be: valid, and the same after a trip through JSON.
fn accepted_is_valid(spec: RunSpec) -> Result<(), TestCaseError> {
    prop_assert!(spec.validate().is_ok());
    let back: RunSpec = serde_json::from_value(serde_json::to_value(&spec).unwrap()).unwrap();
    prop_assert_eq!(back, spec);
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_json_is_parsed_or_refused_naming_a_field(v in value()) {
        match json::parse(v) {
            Ok(spec) => accepted_is_valid(spec)?,
            Err(r) => prop_assert!(!r.error.field.is_empty() && !r.error.message.is_empty()),
        }
    }

    #[test]
    fn a_valid_spec_with_one_knob_set_to_anything_is_parsed_or_refused(
        knob in 0..KNOBS.len(),
        v in value(),
        proof in any::<bool>(),
        flat in any::<bool>(),
    ) {
        let base = if proof { hotlab_shared::spec::Preset::find("proof").unwrap().spec() } else { RunSpec::default() };
        let mut spec = serde_json::to_value(&base).unwrap().as_object().unwrap().clone();
        let knob = &KNOBS[knob];
        if flat {
            // The flat form of earlier versions: every knob at the top under its name.
            let mut f: Map<String, Value> =
                KNOBS.iter().filter_map(|k| Some((k.name.to_string(), k.get(&spec)?))).collect();
            f.insert(knob.name.to_string(), v);
            spec = f;
        } else {
            knob.set(&mut spec, v);
        }
        match json::parse(Value::Object(spec)) {
            Ok(spec) => accepted_is_valid(spec)?,
            Err(r) => prop_assert!(!r.error.field.is_empty() && !r.error.path.is_empty()),
        }
    }
}
