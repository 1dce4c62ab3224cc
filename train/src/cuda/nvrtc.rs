//! The CUDA C source of the kernels, the trainer's and the workloads' ([`Source`]), and
//! its compilation to PTX with NVRTC, all in one module. NVRTC is a plain library in the
//! torch wheel's CUDA libraries: compiling needs no GPU, so CI compiles every kernel
//! (`hotlab gpu-check --compile-only`).

use cudarc::nvrtc::{CompileError, CompileOptions, Ptx};
use std::time::Instant;

/// CUDA C compiled at run time: the trainer's own kernels ([`trainer`]) or a workload's,
/// which its folder declares (the registry's `Native::kernels`).
#[derive(Clone, Debug)]
pub struct Source {
    /// The file it comes from, for the reader.
    pub name: &'static str,
    /// Its text: a prelude of `#define`s first where it has one, then its kernels. It may
    /// use the trainer's prelude ([`source`]): `i64`, `u32`, `u64` and `MAX_WIDTH`.
    pub text: String,
    /// The kernels it defines, every one of which must come out of a compilation.
    pub kernels: &'static [&'static str],
}

/// The trainer's kernels: GAE on the device (`gae.cu`), the clip and Adam (`optim.cu`),
/// the PPO loss's gradient (`loss.cu`).
pub fn trainer() -> Source {
    Source {
        name: "gae.cu, optim.cu, loss.cu",
        text: [include_str!("gae.cu"), include_str!("optim.cu"), include_str!("loss.cu")].concat(),
        kernels: &["gae", "clip_adam", "ppo_loss_grad"],
    }
}

/// Architectures `--compile-only` compiles for without a GPU: Turing (NVRTC 13's
/// oldest), Ampere, Hopper.
pub const CHECK_ARCHS: &[&str] = &["compute_75", "compute_80", "compute_90"];

/// Widest layer the rollout kernel's forward holds in shared memory when none is given.
pub const DEFAULT_MAX_WIDTH: usize = 64;

/// The full source: the trainer's prelude (its integer types; `MAX_WIDTH`, the widest
/// layer a kernel launched a warp per row holds twice in shared memory), then each of
/// `workloads`' sources, then the trainer's kernels.
pub fn source(max_width: usize, workloads: &[Source]) -> String {
    let mut s = String::from("// Written by hotlab: the trainer's prelude, the workloads' kernels, the trainer's.\n");
    s += "typedef long long i64;\ntypedef unsigned int u32;\ntypedef unsigned long long u64;\n";
    s += &format!("#define MAX_WIDTH {}\n", max_width.max(4));
    for w in workloads {
        s += &w.text;
    }
    s + &trainer().text
}

/// Every kernel a compilation of `workloads` with the trainer's must hold, the workloads'
/// first.
pub fn kernels(workloads: &[Source]) -> Vec<&'static str> {
    workloads.iter().chain([&trainer()]).flat_map(|w| w.kernels.iter().copied()).collect()
}

/// Whether libnvrtc can be loaded (it comes with the torch wheel's CUDA libraries; the
/// binary has an rpath to them where it was built, `scripts/gpu-check` sets
/// LD_LIBRARY_PATH elsewhere).
pub fn available() -> bool {
    preload_builtins();
    // SAFETY: only tries to dlopen the library by its names.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// libnvrtc dlopens `libnvrtc-builtins` by name, which our rpath does not reach: loading
/// it first from the directory found at build time (or on LD_LIBRARY_PATH) satisfies that.
fn preload_builtins() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let from_env = std::env::var("LD_LIBRARY_PATH").unwrap_or_default();
        let dirs = option_env!("HOTLAB_NVRTC_DIR").into_iter().chain(from_env.split(':'));
        for dir in dirs.filter(|d| !d.is_empty()) {
            let path = std::path::Path::new(dir).join("libnvrtc-builtins.so.13.0");
            if let Some(c) = path.to_str().filter(|_| path.exists()).and_then(|p| std::ffi::CString::new(p).ok()) {
                // SAFETY: a plain shared library of CUDA's, kept loaded for the process's life.
                if !unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) }.is_null() {
                    return;
                }
            }
        }
    });
}

/// NVRTC's version, e.g. `13.0`.
pub fn version() -> Option<String> {
    if !available() {
        return None;
    }
    let (mut major, mut minor) = (0, 0);
    // SAFETY: the library is present; two out-parameters.
    let status = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
    (status == cudarc::nvrtc::sys::nvrtcResult::NVRTC_SUCCESS).then(|| format!("{major}.{minor}"))
}

/// A compilation's outcome.
pub struct Compiled {
    pub ptx: Ptx,
    pub arch: &'static str,
    pub seconds: f64,
    /// PTX size in bytes.
    pub ptx_bytes: usize,
}

/// Compiles the trainer's kernels with `workloads`' for `arch` (e.g. `compute_90`) and
/// checks that each one is in the PTX. The error holds NVRTC's log.
pub fn compile(arch: &'static str, max_width: usize, workloads: &[Source]) -> Result<Compiled, String> {
    if !available() {
        return Err(
            "NVRTC (libnvrtc.so.13) was not found: put the torch wheel's nvidia/cu13/lib on LD_LIBRARY_PATH".into()
        );
    }
    let start = Instant::now();
    let opts = CompileOptions {
        // No fused multiply-add: the same rounding as the host's (an env's batch, GAE).
        fmad: Some(false),
        arch: Some(arch),
        name: Some("hotlab.cu".into()),
        ..Default::default()
    };
    let ptx = compile_source(source(max_width, workloads), opts)?;
    let text = ptx.to_src();
    if let Some(missing) = kernels(workloads).iter().find(|k| !text.contains(&format!(".entry {k}("))) {
        return Err(format!("the PTX for {arch} has no kernel {missing}"));
    }
    Ok(Compiled { ptx_bytes: text.len(), ptx, arch, seconds: start.elapsed().as_secs_f64() })
}

/// NVRTC on `src`; the error names the architecture and holds NVRTC's log.
fn compile_source(src: String, opts: CompileOptions) -> Result<Ptx, String> {
    let arch = opts.arch.unwrap_or("NVRTC's default architecture");
    cudarc::nvrtc::compile_ptx_with_opts(src, opts).map_err(|e| match e {
        CompileError::CompileError { log, .. } => format!("NVRTC failed for {arch}:\n{}", log.to_string_lossy()),
        other => format!("NVRTC failed for {arch}: {other:?}"),
    })
}

/// The `compute_XY` architecture of a compute capability, among those NVRTC 13 knows.
pub fn arch_of(major: i32, minor: i32) -> Result<&'static str, String> {
    const KNOWN: &[(i32, i32, &str)] = &[
        (7, 5, "compute_75"),
        (8, 0, "compute_80"),
        (8, 6, "compute_86"),
        (8, 7, "compute_87"),
        (8, 9, "compute_89"),
        (9, 0, "compute_90"),
        (10, 0, "compute_100"),
        (10, 3, "compute_103"),
        (12, 0, "compute_120"),
        (12, 1, "compute_121"),
    ];
    // The newest known architecture not above the device's: PTX runs on later GPUs.
    KNOWN
        .iter()
        .rev()
        .find(|(ma, mi, _)| (*ma, *mi) <= (major, minor))
        .map(|(_, _, a)| *a)
        .ok_or_else(|| format!("compute capability {major}.{minor} is older than NVRTC 13 supports (7.5)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kernel_compiles_for_every_checked_architecture() {
        assert!(available(), "libnvrtc.so.13 must load here (the torch wheel's CUDA libraries)");
        for arch in CHECK_ARCHS {
            let c = compile(arch, DEFAULT_MAX_WIDTH, &[]).unwrap_or_else(|e| panic!("{e}"));
            assert!(c.ptx_bytes > 1000, "{arch}: {} bytes of PTX", c.ptx_bytes);
            assert!(c.ptx.to_src().contains(&format!(".target sm_{}", &arch["compute_".len()..])), "{arch}");
        }
        assert!(version().unwrap().starts_with("13."));
    }

    #[test]
    fn a_kernel_error_comes_back_with_nvrtcs_log_and_architectures_map() {
        assert!(available());
        let opts = CompileOptions { arch: Some("compute_80"), ..Default::default() };
        let e = compile_source("__global__ void k() { undefined_thing(); }".into(), opts).unwrap_err();
        assert!(e.contains("compute_80") && e.contains("undefined_thing"), "{e}");
        assert_eq!(arch_of(9, 0).unwrap(), "compute_90");
        assert_eq!(arch_of(8, 6).unwrap(), "compute_86");
        assert_eq!(arch_of(9, 1).unwrap(), "compute_90", "an unknown minor falls back");
        assert!(arch_of(7, 0).unwrap_err().contains("7.0"));
    }

    #[test]
    fn a_workloads_source_compiles_with_the_trainers_and_its_kernels_are_checked() {
        assert!(available());
        let own = Source {
            name: "own.cu",
            text: "extern \"C\" __global__ void own_kernel(i64* out) { out[0] = MAX_WIDTH; }\n".into(),
            kernels: &["own_kernel"],
        };
        let src = source(256, std::slice::from_ref(&own));
        assert!(src.contains("#define MAX_WIDTH 256\n"), "the trainer's prelude first");
        assert!(src.find("own_kernel").unwrap() < src.find("clip_adam").unwrap());
        assert_eq!(kernels(std::slice::from_ref(&own)), ["own_kernel", "gae", "clip_adam", "ppo_loss_grad"]);
        let c = compile("compute_80", 256, std::slice::from_ref(&own)).unwrap_or_else(|e| panic!("{e}"));
        assert!(c.ptx.to_src().contains(".entry own_kernel("));
        // A kernel a source claims but does not define is caught.
        let claims = Source { kernels: &["own_kernel", "missing_kernel"], ..own };
        let e = compile("compute_80", 256, &[claims]).err().expect("a missing kernel fails the compilation");
        assert!(e.contains("missing_kernel"), "{e}");
    }
}
