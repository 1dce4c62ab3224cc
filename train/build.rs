//! What the trainer's code needs to know of the libtorch it links (where NVRTC is, whether
//! it is a ROCm build, its version), its tests' link to it (`hotlab-link`), and the C++
//! shim for libtorch's CUDA streams and graph capture.
use std::path::Path;

fn main() {
    let Some(lib) = hotlab_link::libtorch() else { return };
    if let Some(dir) = hotlab_link::nvrtc_dir(&lib) {
        println!("cargo:rustc-env=HOTLAB_NVRTC_DIR={}", dir.display());
    }
    if lib.join("libtorch_hip.so").exists() {
        println!("cargo:rustc-env=HOTLAB_TORCH_HIP=1");
    }
    // The libtorch version, for `hotlab system`.
    let version = lib
        .parent()
        .and_then(|torch| std::fs::read_to_string(torch.join("version.py")).ok())
        .and_then(|v| {
            v.lines().find_map(|l| l.strip_prefix("__version__ = ").map(|s| s.trim().trim_matches('\'').to_string()))
        })
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=HOTLAB_TORCH_VERSION={version}");
    cuda_shim(&lib);
}

/// Compiles `src/cuda/shim.cpp` (libtorch's CUDA streams and graph capture, which tch does
/// not reach) where this libtorch was built for CUDA and its headers and the CUDA runtime's
/// are at hand (the torch wheel has both); elsewhere (ROCm, CPU-only torch) the build goes
/// on without it and `cuda::shim` says so at run time.
fn cuda_shim(lib: &Path) {
    println!("cargo::rustc-check-cfg=cfg(hotlab_cuda_shim)");
    println!("cargo:rerun-if-changed=src/cuda/shim.cpp");
    let Some(torch) = lib.parent() else { return };
    let include = torch.join("include");
    let nvidia = torch.parent().map(|p| p.join("nvidia")).unwrap_or_default();
    let runtime = std::fs::read_dir(nvidia)
        .into_iter()
        .flatten()
        .flatten()
        .map(|d| d.path().join("include"))
        .chain([Path::new("/usr/local/cuda/include").to_path_buf()])
        .find(|dir| dir.join("cuda_runtime_api.h").exists());
    let (true, true, Some(runtime)) =
        (lib.join("libc10_cuda.so").exists(), include.join("ATen/cuda/CUDAGraph.h").exists(), runtime)
    else {
        return;
    };
    cc::Build::new()
        .cpp(true)
        .std("c++17")
        .file("src/cuda/shim.cpp")
        .include(&include)
        .include(include.join("torch/csrc/api/include"))
        .include(runtime)
        .define("_GLIBCXX_USE_CXX11_ABI", "1")
        .flag_if_supported("-w")
        .compile("hotlab_cuda_shim");
    for name in ["c10_cuda", "torch_cuda", "c10", "torch_cpu"] {
        println!("cargo:rustc-link-lib=dylib={name}");
    }
    println!("cargo:rustc-cfg=hotlab_cuda_shim");
}
