//! A Gymnasium env's view: the first few envs' observation vectors and the actions just
//! chosen, a row per env (the returns are the run's episode chart).
//!
//! Compiled into `hotlab-web` (wasm32) from the registry: `crate` here is that crate.

use hotlab_shared::protocol::Frame;
use hotlab_shared::workloads::gym::GymFrame;
use hotlab_shared::workloads::EnvName;
use leptos::prelude::*;

#[component]
pub fn View(frame: Signal<Option<Frame>>) -> impl IntoView {
    let mine = move || frame.with(|f| f.as_ref().and_then(|f| f.read::<GymFrame>(EnvName::Gym)));
    move || {
        mine().map(|GymFrame { id, obs, actions }| {
            let rows = obs.into_iter().zip(actions).enumerate().map(|(e, (o, a))| {
                let values = o.iter().map(|v| format!("{v:+.3}")).collect::<Vec<_>>().join(" ");
                let action = a.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
                view! {
                    <tr data-testid="gym-env">
                        <td class="muted">{format!("env {e}")}</td>
                        <td><code>{values}</code></td>
                        <td>{format!("action {action}")}</td>
                    </tr>
                }
            });
            view! {
                <div class="gym" data-testid="rollout-gym">
                    <p><span class="muted">"gym "</span><code>{id}</code></p>
                    <table class="gym-obs">{rows.collect_view()}</table>
                </div>
            }
        })
    }
}
