//! The rollout viewer: the newest frame's step, and the view of the workload that drew it
//! (each workload's view is a file of [`crate::workloads`]).

use hotlab_shared::protocol::Frame;
use hotlab_views::FrameViews;
use leptos::prelude::*;

#[component]
pub fn RolloutView(frame: Signal<Option<Frame>>) -> impl IntoView {
    let step = move || match frame.with(|f| f.as_ref().map(|f| f.step)) {
        Some(step) => format!("step {step}"),
        None => "waiting for the first frame…".into(),
    };
    view! {
        <div class="rollout">
            <p class="muted small" data-testid="rollout-step">{step}</p>
            <FrameViews frame/>
        </div>
    }
}
