//! EnvPool's view: none of its own. Its frames are the `gym` workload's (`GymFrame`: env
//! 0's observation as the policy sees it, the actions just chosen), so the gym view draws
//! them.
//!
//! Compiled into `hotlab-web` (wasm32) from the registry, which it names `hotlab_web`.

use hotlab_shared::protocol::Frame;
use leptos::prelude::*;

#[component]
pub fn View(frame: Signal<Option<Frame>>) -> impl IntoView {
    let _ = frame;
}
