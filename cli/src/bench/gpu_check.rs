//! `hotlab gpu-check`: compiles every NVRTC kernel (no GPU needed), then on a GPU runs the
//! trainer's checks (`hotlab_train::gpu_check`), each workload's (its folder's `gpu`, through
//! the registry), the lessons whose signature needs a GPU, then the benchmarks, and returns
//! one JSON summary. Each check states its tolerance; speed is measured, never asserted.

use hotlab_train::cuda::gpu::Support;
use hotlab_train::gpu_check::{self as checks, check, progress, Target};
use serde_json::{json, Value};

/// What to run.
pub struct Options {
    /// Only compile the kernels (works without a GPU).
    pub compile_only: bool,
    /// Skip the benchmarks (checks only).
    pub no_bench: bool,
    /// Largest env count of the stepping benchmark, as a power of two.
    pub max_log2_envs: u32,
}

/// Every lesson whose signature needs a GPU: its slow setting and its fix, one short run
/// each, reported as the check `lesson_<id>`.
fn gpu_lesson_checks() -> Vec<Value> {
    let lessons = hotlab_report::lessons::LESSONS.iter().filter(|l| l.needs_gpu());
    lessons
        .map(|lesson| {
            progress(&format!("lesson {} (its signature needs a GPU)", lesson.id));
            let name = format!("lesson_{}", lesson.id.replace('-', "_"));
            let params = hotlab_report::lessons::Params { seconds: Some(1.0), ..Default::default() };
            match crate::bench::lessons::check(lesson, &params) {
                Ok(c) => check(&name, c.shows, lesson.signature.text, json!(c.figures)),
                Err(e) => check(&name, false, "-", json!(format!("{e:#}"))),
            }
        })
        .collect()
}

/// Runs the check; the summary's `ok` says whether everything that ran passed.
pub fn run(opts: &Options) -> Value {
    let support = Support::probe();
    let kernels = hotlab_workloads::kernels();
    let (nvrtc, compiled) = checks::kernels(&kernels);
    let mut out = json!({
        "hotlab": env!("CARGO_PKG_VERSION"),
        "torch": hotlab_train::system::TORCH_VERSION,
        "support": format!("{support:?}").to_lowercase(),
        "nvrtc": nvrtc,
        "gpu": Value::Null,
        "checks": [],
        "benchmarks": {},
    });
    if opts.compile_only {
        out["ok"] = json!(compiled);
        return out;
    }
    let (rows, benches) = match checks::open(&support, &kernels) {
        Ok(gpu) => {
            out["gpu"] = match &gpu {
                Some(gpu) => json!({
                    "name": gpu.name, "capability": format!("{}.{}", gpu.capability.0, gpu.capability.1),
                    "arch": gpu.arch, "compile_s": gpu.compile_seconds,
                }),
                None => json!({ "name": "ROCm device (through HIP)", "nvrtc_paths": support.why_not() }),
            };
            let target = gpu.as_ref().map_or(Target::Rocm, Target::Cuda);
            let mut rows = hotlab_workloads::gpu_checks(&target);
            rows.extend(checks::checks(&target));
            if gpu.is_some() {
                rows.extend(gpu_lesson_checks());
            }
            let benches = match opts.no_bench {
                true => Vec::new(),
                false => hotlab_workloads::gpu_benches(&target, opts.max_log2_envs),
            };
            (rows, benches)
        }
        Err(row) => (vec![row], Vec::new()),
    };
    let ok = compiled && rows.iter().all(|c| c["ok"] == json!(true));
    out["checks"] = json!(rows);
    out["benchmarks"] = Value::Object(benches.into_iter().map(|(k, v)| (k.to_string(), v)).collect());
    out["ok"] = json!(ok);
    out
}
