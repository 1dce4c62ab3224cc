//! The trainer's GPU check of its precision kinds (`--precision`).

use super::check;
use crate::models::mlp::policy::{ActorCritic, Architecture};
use hotlab_core::choices::Precision;
use serde_json::{json, Value};
use tch::{Device, Kind, Tensor};

/// AMP: `auto` picks bf16 from compute capability 8.0 (fp16 below it); the update's
/// matmuls really run in the asked kind (their products have it, and the forward's output
/// moves from fp32's by that kind's rounding: more than 0, less than 5%).
pub fn amp_check() -> Value {
    let dev = Device::Cuda(0);
    tch::manual_seed(2);
    // A small actor-critic (4 inputs, 2 actions): what the kinds are asked of is its forward.
    let net = ActorCritic::new(Architecture { obs_dim: 4, hidden: vec![64, 64], logits: 2, gaussian: 0 }, dev);
    let x = Tensor::randn([512, 4], (Kind::Float, dev));
    let mlp = net.network(false);
    let reference = tch::no_grad(|| mlp.forward_taped(&x, Kind::Float).out);
    let scale = f64::try_from(reference.abs().max()).unwrap_or(1.0).max(1e-6);
    let mut detail = serde_json::Map::new();
    let mut ok = true;
    for (name, kind, wanted) in [("fp16", Kind::Half, Precision::Fp16), ("bf16", Kind::BFloat16, Precision::Bf16)] {
        let resolved = crate::precision::resolve(wanted, dev).map(|p| p.kind);
        let out = tch::no_grad(|| mlp.forward_taped(&x, kind).out);
        let product = tch::no_grad(|| x.to_kind(kind).mm(&x.to_kind(kind).tr()).kind());
        let rel = f64::try_from((&out - &reference).abs().max()).unwrap_or(-1.0) / scale;
        let good = resolved == Ok(kind) && product == kind && rel > 0.0 && rel < 0.05;
        ok &= good;
        detail.insert(name.into(), json!({"ok": good, "product_kind": format!("{product:?}"), "relative_diff": rel}));
    }
    let auto = crate::precision::resolve(Precision::Auto, dev).map(|p| p.label());
    let want = match crate::cuda::gpu::capability(0) {
        Some((major, _)) if major < 8 => "fp16",
        _ => "bf16",
    };
    ok &= auto == Ok(want);
    detail.insert("auto".into(), json!({"resolved": auto.unwrap_or("error"), "expected": want}));
    check("amp_dtypes", ok, "each kind resolved and used; 0 < relative diff < 0.05", Value::Object(detail))
}
