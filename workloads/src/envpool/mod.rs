//! The workload's folder, which three crates read (`workloads/src/registry.rs`): each takes
//! its part, as the `hotlab_crate` cfg its build script sets says, loaded by `path` (so that
//! the part's modules are this folder's files) and re-exported whole.

#[cfg_attr(hotlab_crate = "specs", path = "spec.rs")]
#[cfg_attr(hotlab_crate = "views", path = "web.rs")]
#[cfg_attr(hotlab_crate = "workloads", path = "native.rs")]
pub mod part;
// Its native part is only the registry's hooks: nothing there for the crate to re-export.
#[cfg_attr(hotlab_crate = "workloads", allow(unused_imports))]
pub use part::*;
