//! This crate's part of each workload folder (`workloads/src/<name>/mod.rs`: `native.rs`
//! and the files it declares); its tests run against the libtorch that torch-sys linked
//! (`hotlab-link`).
fn main() {
    println!("cargo::rustc-check-cfg=cfg(hotlab_crate, values(\"specs\", \"workloads\", \"views\"))");
    println!("cargo::rustc-cfg=hotlab_crate=\"workloads\"");
    hotlab_link::libtorch();
}
