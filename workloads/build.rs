//! This crate's tests run against the libtorch that torch-sys linked (`hotlab-link`).
fn main() {
    hotlab_link::libtorch();
}
