//! A Gymnasium env's view: env 0's picture where the env draws itself (`rgb_array`), env 0's
//! image as the policy sees it (each channel), or its Dict's or Tuple's leaves one by one
//! (values listed, images painted), then the first few envs' observation vectors and the
//! actions just chosen, a row per env
//! (the returns are the run's episode chart).
//!
//! A module of `hotlab-views` (its root, `workloads/src/views.rs`, is beside this folder),
//! which it names `hotlab_views`; the web app (wasm32) shows it.

use hotlab_protocol::pixels;
use hotlab_protocol::Frame;
use hotlab_specs::gym::{GymFrame, GymImage, GymLeaf, GymSeen};
use hotlab_specs::EnvName;
use leptos::prelude::*;

#[component]
pub fn View(frame: Signal<Option<Frame>>) -> impl IntoView {
    let mine = move || frame.with(|f| f.as_ref().and_then(|f| f.read::<GymFrame>(EnvName::Gym)));
    move || {
        mine().map(|GymFrame { id, obs, actions, real, image, seen, leaves }| {
            let rows = obs.into_iter().zip(actions).enumerate().map(|(e, (o, a))| {
                let values = o.iter().map(|v| format!("{v:+.3}")).collect::<Vec<_>>().join(" ");
                let mut action: Vec<String> = a.iter().map(i64::to_string).collect();
                action.extend(real.get(e).into_iter().flatten().map(|v| format!("{v:+.3}")));
                let action = action.join(",");
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
                    {image.map(picture)}
                    {seen.map(|s| planes(s, "env 0 as the policy sees it"))}
                    {(!leaves.is_empty()).then(|| leaf_table(leaves))}
                    <table class="gym-obs">{rows.collect_view()}</table>
                </div>
            }
        })
    }
}

/// Env 0's Dict or Tuple observation, a row per leaf: its key, then its values (an index
/// with its choices) or its image's channels.
fn leaf_table(leaves: Vec<GymLeaf>) -> impl IntoView {
    let rows = leaves.into_iter().map(|GymLeaf { key, values, classes, seen }| {
        let shown = match seen {
            Some(s) => planes(s, "").into_any(),
            None if !classes.is_empty() => {
                let each = values.iter().zip(&classes).map(|(v, c)| format!("{v:.0} of {c}")).collect::<Vec<_>>();
                view! { <code>{each.join(", ")}</code> }.into_any()
            }
            None => view! { <code>{values.iter().map(|v| format!("{v:+.3}")).collect::<Vec<_>>().join(" ")}</code> }
                .into_any(),
        };
        view! {
            <tr data-testid="gym-leaf">
                <td><code>{key}</code></td>
                <td>{shown}</td>
            </tr>
        }
    });
    view! {
        <table class="gym-leaves">
            <caption class="muted">"env 0's observation, leaf by leaf"</caption>
            {rows.collect_view()}
        </table>
    }
}

/// Env 0's observation (or one leaf of it) as the policy sees it: each channel a grey
/// canvas, captioned `what` and the channels' size (no caption when `what` is empty).
fn planes(seen: GymSeen, what: &'static str) -> impl IntoView {
    let GymSeen { width, height, planes } = seen;
    let n = planes.len();
    let canvases = planes.into_iter().map(move |data| {
        let node = NodeRef::<leptos::html::Canvas>::new();
        let grey = pixels::decode_len(&data, (width * height) as usize);
        Effect::new(move |_| {
            if let (Some(canvas), Some(grey)) = (node.get(), grey.as_ref()) {
                hotlab_views::paint(&canvas, grey, width, height);
            }
        });
        view! { <canvas node_ref=node width=width height=height class="pixelated" data-testid="gym-seen"></canvas> }
    });
    view! {
        <figure class="gym-seen">
            <div class="planes">{canvases.collect_view()}</div>
            {(!what.is_empty()).then(|| view! {
                <figcaption class="muted">{format!("{what}: {n} channels of {width}×{height}")}</figcaption>
            })}
        </figure>
    }
}

/// Env 0's picture with what it cost, or why there is none.
fn picture(image: GymImage) -> AnyView {
    if let Some(error) = image.error {
        return view! {
            <p class="muted" data-testid="gym-picture-error">{format!("env 0 has no picture: {error}")}</p>
        }
        .into_any();
    }
    let caption = format!(
        "env 0 at batch step {}, drawn in {:.1} ms (once a second at most, timed as its own phase)",
        image.at_step, image.render_ms
    );
    view! {
        <figure class="gym-picture">
            <img
                data-testid="gym-picture"
                src=format!("data:image/png;base64,{}", image.png)
                width=image.width
                height=image.height
                alt="env 0, as the env draws itself"
            />
            <figcaption class="muted">{caption}</figcaption>
        </figure>
    }
    .into_any()
}
