//! Property-based tests: random and mutated input thrown at the spec parser (the REST
//! API's and the files'). None may panic; a spec it accepts is valid and survives a round
//! trip; a refusal names a field. Each property tries 2,000 inputs in CI (`cargo xtask
//! fuzz --cases N` sets N); a failing case is kept in `fuzz.regressions` beside this file
//! and tried first from then on. The Prolog parser's are the proof workload's
//! (`workloads/tests/prolog_fuzz.rs`).

use hotlab_core::fuzz;
use hotlab_spec::knobs::KNOBS;
use hotlab_spec::{json, presets, PresetSpec, RunSpec};
use proptest::prelude::*;
use proptest::test_runner::{FileFailurePersistence, RngSeed};
use serde_json::{Map, Value};

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: fuzz::cases(2_000),
        rng_seed: RngSeed::Fixed(fuzz::seed(1)),
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("regressions"))),
        ..ProptestConfig::default()
    }
}

/// One valid spec per workload to start from: every preset, and a Gymnasium env's.
fn bases() -> Vec<Value> {
    let gym = json::parse(
        serde_json::json!({"workload": {"gym": {"id": "Acrobot-v1", "kwargs": {"max_episode_steps": 200}}}}),
    );
    presets::all()
        .map(|p| p.spec())
        .chain([gym.expect("the gym base is valid")])
        .map(|spec| serde_json::to_value(&spec).expect("a spec serializes"))
        .collect()
}

/// Keys a spec may have, and nonsense.
fn key() -> impl Strategy<Value = String> {
    let known: Vec<String> = ["workload", "ppo", "exec", "telemetry", "every", "depth", "id", "kwargs"]
        .iter()
        .map(|s| s.to_string())
        .chain(hotlab_specs::EnvName::ALL.iter().map(|e| e.to_string()))
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
        proptest::sample::select(vec![
            "cartpole", "proof", "morpho", "dreamer", "gym", "cpu", "cuda", "threads", "fused", "graph", "bf16", "",
        ])
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
        base in 0..bases().len(),
        flat in any::<bool>(),
    ) {
        let mut spec = bases()[base].as_object().unwrap().clone();
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
