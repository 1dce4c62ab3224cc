//! EnvPool's view: none of its own. Its frames are the `gym` workload's (`GymFrame`: env
//! 0's observation as the policy sees it, the actions just chosen), so the gym view draws
//! them.
//!
//! A module of `hotlab-views` (its root, `workloads/src/views.rs`, is beside this folder),
//! which it names `hotlab_views`; the web app (wasm32) shows it.

use hotlab_protocol::Frame;
use leptos::prelude::*;

#[component]
pub fn View(frame: Signal<Option<Frame>>) -> impl IntoView {
    let _ = frame;
}
