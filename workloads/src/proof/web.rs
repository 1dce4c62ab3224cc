//! The proof env's view: env 0's goal list, the successors offered (masked ones dimmed)
//! and the one chosen.
//!
//! A module of `hotlab-views` (its root, `workloads/src/views.rs`, is beside this folder),
//! which it names `hotlab_views`; the web app (wasm32) shows it.

use hotlab_protocol::Frame;
use hotlab_specs::proof::ProofFrame;
use hotlab_specs::EnvName;
use leptos::prelude::*;

#[component]
pub fn View(frame: Signal<Option<Frame>>) -> impl IntoView {
    let mine = move || frame.with(|f| f.as_ref().and_then(|f| f.read::<ProofFrame>(EnvName::Proof)));
    move || {
        mine().map(|ProofFrame { goals, successors, allowed, choice }| {
            view! {
                <div class="proof" data-testid="rollout-proof">
                    <p><span class="muted">"goals "</span><code>{goals}</code></p>
                    <ol start="0" class="successors">
                        {successors.into_iter().enumerate().map(|(k, s)| {
                            let class = match (k as i64 == choice, allowed.get(k).copied().unwrap_or(false)) {
                                (true, _) => "chosen",
                                (false, true) => "",
                                (false, false) => "masked",
                            };
                            view! { <li class=class><code>{s}</code></li> }
                        }).collect_view()}
                    </ol>
                </div>
            }
        })
    }
}
