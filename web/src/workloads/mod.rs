//! Each workload's view of its rollout frames, a file each, and the registry below: one
//! line per workload. A view shows the frames of its own workload only (each reads its
//! frame type from `hotlab_shared::workloads`).

mod cartpole;
mod dreamer;
mod morpho;
mod proof;

pub use cartpole::{draw_one, Cell};

use hotlab_shared::protocol::Frame;
use leptos::prelude::*;

/// Every workload's view of the run's newest frame.
#[component]
pub fn FrameViews(frame: Signal<Option<Frame>>) -> impl IntoView {
    view! {
        <cartpole::View frame/>
        <proof::View frame/>
        <morpho::View frame/>
        <dreamer::View frame/>
    }
}
