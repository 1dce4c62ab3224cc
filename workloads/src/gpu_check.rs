//! What the workloads' GPU checks (`hotlab gpu-check`, run on a machine with CUDA) report:
//! each check a JSON object, and a line on stderr as each one starts. The checks of a
//! workload that has GPU paths of its own are in its folder (`morpho/gpu.rs`,
//! `dreamer/gpu.rs`), each its settings' [`crate::Native::gpu_checks`], gathered by
//! [`crate::gpu_checks`].

use serde_json::{json, Value};

/// A check's result: its name, whether it held, the tolerance it was held to, what it saw.
pub fn check(name: &str, ok: bool, tolerance: &str, detail: Value) -> Value {
    json!({ "name": name, "ok": ok, "tolerance": tolerance, "detail": detail })
}

/// A line for the person waiting on the checks.
pub fn progress(msg: &str) {
    eprintln!("gpu-check: {msg}");
}
