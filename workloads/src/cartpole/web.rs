//! CartPole's view: a lane per env on a canvas, the cart, the pole and the action. The
//! playground draws its envs with the same [`draw_one`].
//!
//! A module of `hotlab-views` (its root, `workloads/src/views.rs`, is beside this folder),
//! which it names `hotlab_views`; the web app (wasm32) shows it.

use hotlab_protocol::Frame;
use hotlab_specs::cartpole::CartpoleFrame;
use hotlab_specs::EnvName;
use leptos::prelude::*;
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

/// The canvas, drawn on each CartPole frame; it shows while the run has no frame yet.
#[component]
pub fn View(frame: Signal<Option<Frame>>) -> impl IntoView {
    let node = NodeRef::<leptos::html::Canvas>::new();
    let mine = move || frame.with(|f| f.as_ref().and_then(|f| f.read::<CartpoleFrame>(EnvName::Cartpole)));
    Effect::new(move |_| {
        if let (Some(f), Some(canvas)) = (mine(), node.get()) {
            draw_cartpole(&canvas, &f.states, &f.actions);
        }
    });
    let shown = move || frame.with(|f| f.as_ref().is_none_or(|f| f.env == EnvName::Cartpole.as_str()));
    view! {
        <canvas node_ref=node width="560" height="170" class="rollout-canvas" data-testid="rollout-canvas"
            style:display=move || if shown() { "block" } else { "none" }></canvas>
    }
}
