//! This crate's part of each workload folder (`workloads/src/<name>/mod.rs`: `web.rs`).
fn main() {
    println!("cargo::rustc-check-cfg=cfg(hotlab_crate, values(\"specs\", \"workloads\", \"views\"))");
    println!("cargo::rustc-cfg=hotlab_crate=\"views\"");
}
