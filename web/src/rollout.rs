//! The rollout viewer: the newest frame's step, the view of the workload that drew it
//! (each workload's view is a file of `hotlab_views`), and, for a recurrent policy,
//! env 0's state norm over its episode.

use crate::charts::{Chart, Line};
use hotlab_protocol::{Frame, PolicyMemory};
use hotlab_views::FrameViews;
use leptos::prelude::*;

#[component]
pub fn RolloutView(frame: Signal<Option<Frame>>) -> impl IntoView {
    let step = move || match frame.with(|f| f.as_ref().map(|f| f.step)) {
        Some(step) => format!("step {step}"),
        None => "waiting for the first frame…".into(),
    };
    let memory = Memo::new(move |_| {
        frame.with(|f| {
            let v = f.as_ref()?.data.get(PolicyMemory::KEY)?;
            serde_json::from_value::<PolicyMemory>(v.clone()).ok()
        })
    });
    let norm_line = Signal::derive(move || {
        memory.with(|m| {
            m.iter()
                .map(|m| Line {
                    name: format!("‖{} state‖", m.cell),
                    color: (0xe0, 0xa4, 0x58),
                    points: m.state_norm.iter().enumerate().map(|(i, &v)| (i as f64 + 1.0, v as f64)).collect(),
                })
                .collect()
        })
    });
    view! {
        <div class="rollout">
            <p class="muted small" data-testid="rollout-step">{step}</p>
            <FrameViews frame/>
            <Show when=move || memory.with(Option::is_some)>
                <div data-testid="memory">
                    <Chart title="env 0's recurrent state norm over its episode (by step)" testid="chart-memory" lines=norm_line/>
                    <p class="muted small">{move || memory.with(|m| m.as_ref().map(|m| format!(
                        "{} steps into env 0's episode; the state is zeroed where an episode starts",
                        m.state_norm.len()
                    )))}</p>
                </div>
            </Show>
        </div>
    }
}
