//! `target/release/hotlab` (and the integration tests) run against the libtorch that
//! torch-sys linked, with no environment variables (`hotlab-link`).
fn main() {
    hotlab_link::libtorch();
}
