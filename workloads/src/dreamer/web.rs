//! The dreamer's rollout: the frame env 0 sees, the world model's reconstruction of it,
//! and the frames it imagines ahead under the actor (grey pixels painted on canvases).
//!
//! A module of `hotlab-views` (its root, `workloads/src/views.rs`, is beside this folder),
//! which it names `hotlab_views`; the web app (wasm32) shows it.

use hotlab_protocol::pixels;
use hotlab_protocol::Frame;
use hotlab_specs::dreamer::DreamerFrame;
use hotlab_specs::EnvName;
use leptos::prelude::*;

/// One frame with its caption; a frame that does not decode shows as blank.
#[component]
fn Pixels(caption: String, data: Option<String>, side: u32) -> impl IntoView {
    let node = NodeRef::<leptos::html::Canvas>::new();
    let grey = data.and_then(|d| pixels::decode(&d, side as usize));
    Effect::new(move |_| {
        if let (Some(canvas), Some(grey)) = (node.get(), grey.as_ref()) {
            hotlab_views::paint(&canvas, grey, side, side);
        }
    });
    view! {
        <figure class="pixels" data-testid="dreamer-frame">
            <canvas node_ref=node width=side height=side class="pixelated"></canvas>
            <figcaption class="small muted">{caption}</figcaption>
        </figure>
    }
}

#[component]
pub fn View(frame: Signal<Option<Frame>>) -> impl IntoView {
    let mine = move || frame.with(|f| f.as_ref().and_then(|f| f.read::<DreamerFrame>(EnvName::Dreamer)));
    move || mine().map(frames)
}

fn frames(f: DreamerFrame) -> impl IntoView {
    let DreamerFrame { side, observed, reconstruction, imagined, every } = f;
    let waiting = reconstruction.is_none();
    view! {
        <div class="dreamer" data-testid="rollout-dreamer">
            <div class="host-row">
                <Pixels caption="seen".into() data=Some(observed) side/>
                <Pixels caption="reconstructed".into() data=reconstruction side/>
                {imagined.into_iter().enumerate().map(|(k, d)| view! {
                    <Pixels caption=format!("imagined +{}", (k as u32 + 1) * every) data=Some(d) side/>
                }).collect_view()}
            </div>
            {waiting.then(|| view! {
                <p class="small muted">"prefilling the replay buffer with random actions: the model has nothing to show yet"</p>
            })}
        </div>
    }
}
