//! Makes `target/release/hotlab` run with no environment variables: an rpath to the
//! libtorch that torch-sys linked, and `torch_cuda` linked even though no symbol of it
//! is referenced, so that CUDA registers itself on a GPU box.
use std::path::Path;

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_TCH_LIBTORCH_LIB");
    let Ok(lib) = std::env::var("DEP_TCH_LIBTORCH_LIB") else {
        return;
    };
    println!("cargo:rustc-link-arg=-Wl,-rpath,{lib}");
    // NVRTC for the CUDA kernels: the torch wheel's CUDA libraries beside torch
    // (site-packages/nvidia/*/lib); elsewhere scripts/gpu-check sets LD_LIBRARY_PATH.
    if let Some(site) = Path::new(&lib).parent().and_then(Path::parent) {
        let nvidia = site.join("nvidia");
        for dir in std::fs::read_dir(&nvidia).into_iter().flatten().flatten() {
            let libdir = dir.path().join("lib");
            if libdir.join("libnvrtc.so.13").exists() {
                println!("cargo:rustc-link-arg=-Wl,-rpath,{}", libdir.display());
                println!("cargo:rustc-env=HOTLAB_NVRTC_DIR={}", libdir.display());
            }
        }
    }
    if Path::new(&lib).join("libtorch_hip.so").exists() {
        println!("cargo:rustc-env=HOTLAB_TORCH_HIP=1");
    }
    for cuda in ["torch_cuda", "torch_hip"] {
        if Path::new(&lib).join(format!("lib{cuda}.so")).exists() {
            println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
            println!("cargo:rustc-link-arg=-l{cuda}");
            println!("cargo:rustc-link-arg=-Wl,--as-needed");
        }
    }
    // The libtorch version, for `hotlab system`.
    let version = Path::new(&lib)
        .parent()
        .and_then(|torch| std::fs::read_to_string(torch.join("version.py")).ok())
        .and_then(|v| {
            v.lines().find_map(|l| l.strip_prefix("__version__ = ").map(|s| s.trim().trim_matches('\'').to_string()))
        })
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=HOTLAB_TORCH_VERSION={version}");
    cuda_shim(Path::new(&lib));
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
