//! The rollout viewer: CartPole drawn on a canvas (a lane per env, the cart, the pole,
//! the action), or the proof env's goal list with its successors and the choice.

use hotlab_shared::protocol::Frame;
use leptos::prelude::*;
use wasm_bindgen::JsCast;

const W: f64 = 560.0;
const H: f64 = 170.0;

fn draw_cartpole(canvas: &web_sys::HtmlCanvasElement, states: &[[f32; 4]], actions: &[i64]) -> Option<()> {
    let ctx: web_sys::CanvasRenderingContext2d = canvas.get_context("2d").ok()??.dyn_into().ok()?;
    ctx.set_fill_style_str("#182029");
    ctx.fill_rect(0.0, 0.0, W, H);
    let lanes = states.len().max(1) as f64;
    let lane = W / lanes;
    for (i, s) in states.iter().enumerate() {
        let left = i as f64 * lane;
        let track_y = H - 40.0;
        // Gymnasium's track is x ∈ [-2.4, 2.4]; the pole is 1.0 long (2 × half-length).
        let scale = (lane - 20.0) / 4.8;
        let cx = left + lane / 2.0 + s[0] as f64 * scale;
        ctx.set_stroke_style_str("#3a4656");
        ctx.set_line_width(1.0);
        ctx.begin_path();
        ctx.move_to(left + 10.0, track_y);
        ctx.line_to(left + lane - 10.0, track_y);
        ctx.stroke();
        ctx.set_fill_style_str("#8a96a3");
        ctx.fill_rect(cx - 18.0, track_y - 12.0, 36.0, 16.0);
        let len = scale.min(100.0);
        let (px, py) = (cx + len * (s[2] as f64).sin(), track_y - 12.0 - len * (s[2] as f64).cos());
        ctx.set_stroke_style_str("#f0a030");
        ctx.set_line_width(5.0);
        ctx.begin_path();
        ctx.move_to(cx, track_y - 12.0);
        ctx.line_to(px, py);
        ctx.stroke();
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
    let is_proof = move || matches!(frame.get(), Some(Frame::Proof { .. }));
    let step = move || match frame.get() {
        Some(Frame::Cartpole { step, .. } | Frame::Proof { step, .. }) => format!("step {step}"),
        None => "waiting for the first frame…".into(),
    };
    view! {
        <div class="rollout">
            <p class="muted small" data-testid="rollout-step">{step}</p>
            <canvas node_ref=node width="560" height="170" class="rollout-canvas" data-testid="rollout-canvas"
                style:display=move || if is_proof() { "none" } else { "block" }></canvas>
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
                _ => ().into_any(),
            }}
        </div>
    }
}
