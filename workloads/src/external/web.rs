//! A script's view: none. Its envs are the script's own, so hotlab draws no rollout of it;
//! its run view shows its phases, counters and the report's table like any run's.
//!
//! A module of `hotlab-views` (its root, `workloads/src/views.rs`, is beside this folder),
//! which it names `hotlab_views`; the web app (wasm32) shows it.

use hotlab_protocol::Frame;
use leptos::prelude::*;

#[component]
pub fn View(frame: Signal<Option<Frame>>) -> impl IntoView {
    let _ = frame;
}
