//! For the build scripts of the crates that link libtorch (`hotlab-train`,
//! `hotlab-workloads`, `hotlab`): their binaries and test binaries run with no
//! environment variables. Each such crate depends on `torch-sys` directly, so that cargo
//! hands its build script `DEP_TCH_LIBTORCH_LIB`, and calls [`libtorch`].

use std::path::{Path, PathBuf};

/// Links this crate's binaries and tests to the libtorch that torch-sys found: an rpath to
/// it (and to the torch wheel's NVRTC beside it), and `torch_cuda` (or `torch_hip`) linked
/// even though no symbol of it is referenced, so that CUDA registers itself on a GPU box.
/// Returns libtorch's lib dir, None where torch-sys said none.
pub fn libtorch() -> Option<PathBuf> {
    println!("cargo:rerun-if-env-changed=DEP_TCH_LIBTORCH_LIB");
    let lib = PathBuf::from(std::env::var("DEP_TCH_LIBTORCH_LIB").ok()?);
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib.display());
    if let Some(dir) = nvrtc_dir(&lib) {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
    }
    for cuda in ["torch_cuda", "torch_hip"] {
        if lib.join(format!("lib{cuda}.so")).exists() {
            println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
            println!("cargo:rustc-link-arg=-l{cuda}");
            println!("cargo:rustc-link-arg=-Wl,--as-needed");
        }
    }
    Some(lib)
}

/// The torch wheel's NVRTC beside torch (`site-packages/nvidia/*/lib`); elsewhere
/// `scripts/gpu-check` sets `LD_LIBRARY_PATH`.
pub fn nvrtc_dir(lib: &Path) -> Option<PathBuf> {
    let site = lib.parent()?.parent()?;
    std::fs::read_dir(site.join("nvidia"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|d| d.path().join("lib"))
        .find(|dir| dir.join("libnvrtc.so.13").exists())
}
