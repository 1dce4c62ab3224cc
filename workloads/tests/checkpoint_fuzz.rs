//! Damaged checkpoints (issue 41): a checkpoint's two files, edited by hand or broken on
//! disk, load or fail with an error; nothing panics. The damage is aimed where a loader
//! trusts what it reads: the weights file's header (its length, then the JSON that gives
//! each tensor's dtype, shape and byte range) and `spec.json`, with bytes broken and with
//! well-formed JSON whose values are wrong. 300 cases in CI over four workloads' trained
//! checkpoints (`cargo xtask fuzz --cases N` sets N); a failing case is kept in
//! `checkpoint_fuzz.regressions` beside this file and tried first from then on.

mod fuzzing;

use hotlab_env::rng::HostRng;
use hotlab_spec::RunSpec;
use hotlab_train::checkpoint::{SPEC_FILE, WEIGHTS_FILE};
use proptest::prelude::*;
use serde_json::{json, Value};
use std::sync::OnceLock;

/// A checkpoint's directory and its two files' bytes (spec.json, the weights).
type Files = (tempfile::TempDir, Vec<u8>, Vec<u8>);

/// A small trained checkpoint of each workload, written once.
fn checkpoints() -> &'static Vec<Files> {
    static ONCE: OnceLock<Vec<Files>> = OnceLock::new();
    ONCE.get_or_init(|| {
        let tiny = json!({"envs": 2, "steps": 8, "total_steps": 16, "device": "cpu", "ppo": {"minibatches": 1}});
        let specs = [
            json!({}),
            json!({"workload": {"proof": {"kb": "family:people=12,seed=1"}}}),
            json!({"workload": {"morpho": {"images": 64, "epochs": 2, "width": 2, "tasks": 1}}, "envs": 1, "steps": 2,
                "total_steps": 2}),
            json!({"workload": {"dreamer": {"batch": 2, "seq_len": 4, "prefill": 0, "horizon": 3}}}),
        ];
        specs
            .into_iter()
            .map(|over| {
                let mut v = tiny.clone();
                v.as_object_mut().unwrap().extend(over.as_object().unwrap().clone());
                let spec: RunSpec = serde_json::from_value(v).unwrap();
                let dir = tempfile::tempdir().unwrap();
                hotlab_workloads::train(&spec, &mut |_| {}).unwrap().policy.save(dir.path(), &spec).unwrap();
                let meta = std::fs::read(dir.path().join(SPEC_FILE)).unwrap();
                let weights = std::fs::read(dir.path().join(WEIGHTS_FILE)).unwrap();
                (dir, meta, weights)
            })
            .collect()
    })
}

/// `bytes` with each edit applied at its place within `range`: a byte set, dropped or inserted.
fn edited(bytes: &[u8], range: std::ops::Range<usize>, edits: &[(usize, u8, u8)]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    for &(at, how, byte) in edits {
        let span = range.end.min(out.len()).saturating_sub(range.start).max(1);
        let at = (range.start + at % span).min(out.len());
        match how % 3 {
            0 if at < out.len() => out[at] = byte,
            1 if at < out.len() => {
                out.remove(at);
            }
            _ => out.insert(at, byte),
        }
    }
    out
}

/// The weights file's header: the 8-byte length, its JSON, and where the data starts.
fn header(weights: &[u8]) -> (Value, usize) {
    let len = u64::from_le_bytes(weights[..8].try_into().unwrap()) as usize;
    (serde_json::from_slice(&weights[8..8 + len]).expect("a written header is JSON"), 8 + len)
}

/// `value` with one of its parts, at any depth, replaced by a value of another kind or
/// range: what a hand edit that keeps the JSON well-formed can do.
fn twisted(value: &Value, rng: &mut HostRng) -> Value {
    let odd = [
        json!(null),
        json!(-1),
        json!(0),
        json!(1),
        json!(u64::MAX),
        json!(1e308),
        json!("x"),
        json!("F16"),
        json!("BF16"),
        json!("I64"),
        json!([]),
        json!([0]),
        json!([1, 1]),
        json!([4_294_967_296u64, 2]),
        json!({}),
        json!(true),
    ];
    fn at(v: &mut Value, rng: &mut HostRng, odd: &[Value]) {
        let deeper = rng.below(5) != 0;
        match v {
            Value::Object(m) if deeper && !m.is_empty() => {
                let k = m.keys().nth(rng.below(m.len() as u64) as usize).cloned().unwrap();
                at(m.get_mut(&k).unwrap(), rng, odd);
            }
            Value::Array(a) if deeper && !a.is_empty() => {
                let i = rng.below(a.len() as u64) as usize;
                at(&mut a[i], rng, odd);
            }
            _ => *v = odd[rng.below(odd.len() as u64) as usize].clone(),
        }
    }
    let mut out = value.clone();
    at(&mut out, rng, &odd);
    out
}

/// The two files as damaged by `how`.
fn damaged(meta: &[u8], weights: &[u8], how: u8, edits: &[(usize, u8, u8)], rng: &mut HostRng) -> (Vec<u8>, Vec<u8>) {
    let (head, data_at) = header(weights);
    match how % 5 {
        // Bytes broken anywhere, in both files.
        0 => (edited(meta, 0..meta.len(), edits), edited(weights, 0..weights.len(), &edits[edits.len() / 2..])),
        // Bytes broken in the weights' length and header.
        1 => (meta.to_vec(), edited(weights, 0..data_at, edits)),
        // The header's JSON well-formed and wrong (a dtype, a shape, a byte range), its
        // length rewritten to match.
        2 => {
            let text = serde_json::to_vec(&twisted(&head, rng)).unwrap();
            let mut w = (text.len() as u64).to_le_bytes().to_vec();
            w.extend(text);
            w.extend(&weights[data_at..]);
            (meta.to_vec(), w)
        }
        // The header's length alone wrong: past the end, zero, off by a little.
        3 => {
            let len = match rng.below(4) {
                0 => u64::MAX - rng.below(16),
                1 => 0,
                2 => (data_at - 8) as u64 + rng.below(16),
                _ => (data_at - 8) as u64 - 1 - rng.below(((data_at - 8) as u64).min(16)),
            };
            let mut w = weights.to_vec();
            w[..8].copy_from_slice(&len.to_le_bytes());
            (meta.to_vec(), w)
        }
        // spec.json well-formed and wrong.
        _ => {
            let spec: Value = serde_json::from_slice(meta).expect("a written spec is JSON");
            (serde_json::to_vec(&twisted(&spec, rng)).unwrap(), weights.to_vec())
        }
    }
}

proptest! {
    #![proptest_config(fuzzing::config(300))]

    /// Loading a damaged checkpoint never panics: it loads with a layout of whole
    /// tensors, or fails with a message.
    #[test]
    fn a_damaged_checkpoint_loads_or_fails_with_an_error(
        which in 0usize..4,
        how in any::<u8>(),
        edits in proptest::collection::vec((any::<usize>(), any::<u8>(), any::<u8>()), 1..5),
        twist in any::<u64>(),
    ) {
        let (_, meta, weights) = &checkpoints()[which];
        let (meta, weights) = damaged(meta, weights, how, &edits, &mut HostRng::new(twist));
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(SPEC_FILE), meta).unwrap();
        std::fs::write(dir.path().join(WEIGHTS_FILE), weights).unwrap();
        match hotlab_workloads::load_checkpoint(dir.path()) {
            Ok(policy) => prop_assert!(policy.layout().iter().all(|s| s.shape.iter().all(|&d| d > 0))),
            Err(e) => {
                let text = format!("{e:#}");
                prop_assert!(!text.trim().is_empty());
            }
        }
    }
}
