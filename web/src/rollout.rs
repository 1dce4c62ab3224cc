//! The rollout viewer: CartPole drawn on a canvas (a lane per env, the cart, the pole,
//! the action), the proof env's goal list with its successors and the choice, or the
//! morpho hosts (slots coloured by stage, validation accuracy over the episode's epochs,
//! the decision's eight heads), or the dreamer's frames ([`crate::rollout_dreamer`]).

use hotlab_shared::protocol::{Frame, MorphoView};
use leptos::prelude::*;
use std::collections::BTreeMap;
use wasm_bindgen::JsCast;

const W: f64 = 560.0;
const H: f64 = 170.0;

/// Where and how one CartPole is drawn.
pub struct Cell {
    pub left: f64,
    pub width: f64,
    pub track_y: f64,
    /// Track's inset from the cell's sides.
    pub margin: f64,
    /// The cart's width, height and how far its top is above the track.
    pub cart: (f64, f64, f64),
    /// The pole's longest drawn length and its line width.
    pub pole: (f64, f64),
}

/// The track, the cart at x and the pole at θ. Gymnasium's track is x ∈ [−2.4, 2.4]
/// and the pole is 1.0 long (2 × half-length), drawn to the same scale where it fits.
pub fn draw_one(ctx: &web_sys::CanvasRenderingContext2d, c: &Cell, s: [f32; 4]) {
    let scale = (c.width - 2.0 * c.margin) / 4.8;
    let cx = c.left + c.width / 2.0 + s[0] as f64 * scale;
    let (cart_w, cart_h, cart_top) = c.cart;
    ctx.set_stroke_style_str("#3a4656");
    ctx.set_line_width(1.0);
    ctx.begin_path();
    ctx.move_to(c.left + c.margin, c.track_y);
    ctx.line_to(c.left + c.width - c.margin, c.track_y);
    ctx.stroke();
    ctx.set_fill_style_str("#8a96a3");
    ctx.fill_rect(cx - cart_w / 2.0, c.track_y - cart_top, cart_w, cart_h);
    let (len, pivot) = (scale.min(c.pole.0), c.track_y - cart_top);
    ctx.set_stroke_style_str("#f0a030");
    ctx.set_line_width(c.pole.1);
    ctx.begin_path();
    ctx.move_to(cx, pivot);
    ctx.line_to(cx + len * (s[2] as f64).sin(), pivot - len * (s[2] as f64).cos());
    ctx.stroke();
}

fn draw_cartpole(canvas: &web_sys::HtmlCanvasElement, states: &[[f32; 4]], actions: &[i64]) -> Option<()> {
    let ctx: web_sys::CanvasRenderingContext2d = canvas.get_context("2d").ok()??.dyn_into().ok()?;
    ctx.set_fill_style_str("#182029");
    ctx.fill_rect(0.0, 0.0, W, H);
    let lanes = states.len().max(1) as f64;
    let lane = W / lanes;
    for (i, s) in states.iter().enumerate() {
        let left = i as f64 * lane;
        let cell =
            Cell { left, width: lane, track_y: H - 40.0, margin: 10.0, cart: (36.0, 16.0, 12.0), pole: (100.0, 5.0) };
        draw_one(&ctx, &cell, *s);
        ctx.set_fill_style_str("#e6e9ee");
        ctx.set_font("12px sans-serif");
        let push = match actions.get(i) {
            Some(0) => "◀ push",
            Some(_) => "push ▶",
            None => "",
        };
        let _ = ctx.fill_text(&format!("env {i}   {push}"), left + 10.0, H - 12.0);
    }
    Some(())
}

#[component]
pub fn RolloutView(frame: Signal<Option<Frame>>) -> impl IntoView {
    let node = NodeRef::<leptos::html::Canvas>::new();
    Effect::new(move |_| {
        if let (Some(Frame::Cartpole { states, actions, .. }), Some(canvas)) = (frame.get(), node.get()) {
            draw_cartpole(&canvas, &states, &actions);
        }
    });
    let is_cartpole = move || matches!(frame.get(), Some(Frame::Cartpole { .. }) | None);
    // Each shown env's validation accuracy by epoch, gathered over the frames of its
    // current episode (frames are sampled, so an epoch may be missing).
    let curves = RwSignal::new(BTreeMap::<usize, Vec<(u32, f32)>>::new());
    Effect::new(move |_| {
        if let Some(Frame::Morpho { envs, .. }) = frame.get() {
            curves.update(|c| envs.iter().for_each(|v| remember(c, v)));
        }
    });
    let step = move || match frame.get() {
        Some(
            Frame::Cartpole { step, .. }
            | Frame::Proof { step, .. }
            | Frame::Morpho { step, .. }
            | Frame::Dreamer { step, .. },
        ) => {
            format!("step {step}")
        }
        None => "waiting for the first frame…".into(),
    };
    view! {
        <div class="rollout">
            <p class="muted small" data-testid="rollout-step">{step}</p>
            <canvas node_ref=node width="560" height="170" class="rollout-canvas" data-testid="rollout-canvas"
                style:display=move || if is_cartpole() { "block" } else { "none" }></canvas>
            {move || match frame.get() {
                Some(Frame::Proof { goals, successors, allowed, choice, .. }) => view! {
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
                }.into_any(),
                Some(Frame::Morpho { envs, .. }) => view! {
                    <div class="morpho" data-testid="rollout-morpho">
                        {envs.into_iter().map(|v| host_view(v, curves)).collect_view()}
                    </div>
                }.into_any(),
                Some(Frame::Dreamer { side, observed, reconstruction, imagined, every, .. }) => view! {
                    <crate::rollout_dreamer::DreamerView side observed reconstruction imagined every/>
                }.into_any(),
                _ => ().into_any(),
            }}
        </div>
    }
}

/// Adds a frame's accuracy to its env's curve; a new episode (the epoch went back) starts it over.
fn remember(curves: &mut BTreeMap<usize, Vec<(u32, f32)>>, v: &MorphoView) {
    let curve = curves.entry(v.env).or_default();
    if curve.last().is_some_and(|&(e, _)| e > v.epoch) {
        curve.clear();
    }
    if curve.last().is_none_or(|&(e, _)| e < v.epoch) {
        curve.push((v.epoch, v.accuracy));
    }
}

/// One host: its epoch and accuracy, the curve so far, its slots, and (for env 0) the decision.
fn host_view(v: MorphoView, curves: RwSignal<BTreeMap<usize, Vec<(u32, f32)>>>) -> impl IntoView {
    let (env, epochs) = (v.env, v.epochs.max(1));
    let points = move || {
        let curve = curves.with(|c| c.get(&env).cloned().unwrap_or_default());
        curve
            .iter()
            .map(|&(e, a)| format!("{:.1},{:.1}", e as f64 / epochs as f64 * 120.0, 36.0 - a as f64 * 36.0))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let decision = (env == 0).then(|| {
        view! {
            <table class="heads small" data-testid="morpho-heads">
                {v.decision.into_iter().map(|h| view! {
                    <tr class=if h.read { "" } else { "unread" }><td class="muted">{h.head}</td><td>{h.choice}</td></tr>
                }).collect_view()}
            </table>
        }
    });
    view! {
        <div class="host" data-testid="morpho-host">
            <p class="small"><b>{format!("env {env}")}</b>
                <span class="muted">{format!(" · epoch {}/{} · validation {:.1} %", v.epoch, v.epochs, v.accuracy * 100.0)}</span></p>
            <div class="host-row">
                <svg class="curve" width="120" height="36" viewBox="0 0 120 36">
                    <polyline points=points fill="none" stroke="#f0a030" stroke-width="1.5" />
                </svg>
                {v.slots.into_iter().enumerate().map(|(i, s)| {
                    let label = s.blueprint.clone().unwrap_or_default();
                    view! {
                        <div class=format!("slot stage-{}", s.stage) data-testid="morpho-slot" title=format!("slot {i}: {}", s.stage)>
                            <span class="small">{format!("slot {i} · {}", s.stage)}</span>
                            <span class="small">{label}</span>
                            <span class="small muted">{format!("α {:.2}", s.alpha)}</span>
                        </div>
                    }
                }).collect_view()}
            </div>
            {decision}
        </div>
    }
}
