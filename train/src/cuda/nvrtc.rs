//! The CUDA C source of the kernels and its compilation to PTX with NVRTC. NVRTC is a
//! plain library in the torch wheel's CUDA libraries: compiling needs no GPU, so CI
//! compiles every kernel (`hotlab gpu-check --compile-only`).

use cudarc::nvrtc::{CompileError, CompileOptions, Ptx};
use hotlab_env::cartpole as cp;
use std::time::Instant;

/// The kernels of `cartpole.cu`, `optim.cu` and `loss.cu`, every one of which must come out
/// of a compilation.
pub const KERNELS: &[&str] =
    &["cartpole_step", "cartpole_multistep", "rollout_step", "gae", "clip_adam", "ppo_loss_grad"];

/// Architectures `--compile-only` compiles for without a GPU: Turing (NVRTC 13's
/// oldest), Ampere, Hopper.
pub const CHECK_ARCHS: &[&str] = &["compute_75", "compute_80", "compute_90"];

/// Widest layer the rollout kernel's forward holds in shared memory when none is given.
pub const DEFAULT_MAX_WIDTH: usize = 64;

/// The full source: shared's constants as a prelude, then `cartpole.cu`, `optim.cu` and `loss.cu`. `max_width` is
/// the widest layer of the policy (`rollout_step` keeps two layers in shared memory).
pub fn source(max_width: usize) -> String {
    let f = |name: &str, v: f64| format!("#define {name} {:?}f\n", v as f32);
    let mut s = String::from("// Written by hotlab from hotlab_env::cartpole.\n");
    s += &f("G", cp::GRAVITY);
    s += &f("MP", cp::MASS_POLE);
    s += &f("TM", cp::TOTAL_MASS);
    s += &f("L", cp::LENGTH);
    s += &f("PML", cp::POLE_MASS_LENGTH);
    s += &f("FORCE", cp::FORCE_MAG);
    s += &f("T", cp::TAU);
    s += &f("X_T", cp::X_THRESHOLD);
    s += &f("THETA_T", cp::THETA_THRESHOLD);
    s += &f("RESET_B", cp::RESET_BOUND);
    s += &f("TWO_OVER_PI", std::f64::consts::FRAC_2_PI);
    s += &format!("#define MAX_STEPS {}\n#define MAX_WIDTH {}\n", cp::MAX_STEPS, max_width.max(4));
    s + include_str!("cartpole.cu") + include_str!("optim.cu") + include_str!("loss.cu")
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

/// Compiles the kernels for `arch` (e.g. `compute_90`) and checks that each one is in the
/// PTX. The error holds NVRTC's log.
pub fn compile(arch: &'static str, max_width: usize) -> Result<Compiled, String> {
    if !available() {
        return Err(
            "NVRTC (libnvrtc.so.13) was not found: put the torch wheel's nvidia/cu13/lib on LD_LIBRARY_PATH".into()
        );
    }
    let start = Instant::now();
    let opts = CompileOptions {
        // No fused multiply-add: the same rounding as shared's batch env.
        fmad: Some(false),
        arch: Some(arch),
        name: Some("cartpole.cu".into()),
        ..Default::default()
    };
    let ptx = compile_source(source(max_width), opts)?;
    let text = ptx.to_src();
    if let Some(missing) = KERNELS.iter().find(|k| !text.contains(&format!(".entry {k}("))) {
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
            let c = compile(arch, DEFAULT_MAX_WIDTH).unwrap_or_else(|e| panic!("{e}"));
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
    fn the_prelude_carries_shareds_constants() {
        let src = source(256);
        assert!(src.contains("#define MAX_WIDTH 256\n"));
        assert!(src.contains("#define MAX_STEPS 500\n"));
        assert!(src.contains(&format!("#define TM {:?}f\n", cp::TOTAL_MASS as f32)));
    }
}
