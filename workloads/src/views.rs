//! `hotlab-views`: each workload's view of its rollout frames, the `web.rs` of its folder
//! (`workloads/src/<name>/web.rs`), read from the registry (`registry.rs`, `hotlab_specs::workload_list!`),
//! for the web app (`hotlab-web`, wasm32). A view shows the frames of its own workload only
//! (each reads its frame type from `hotlab_specs`).
//!
//! This file is the crate's root, beside the workload folders (its `Cargo.toml` is
//! `workloads/views/`).

// A folder's view names this crate as the other crates are named: `hotlab_views::…`.
extern crate self as hotlab_views;

use hotlab_protocol::Frame;
use leptos::prelude::*;
use wasm_bindgen::{Clamped, JsCast};

/// The registry as this crate reads it: each workload's `web.rs` and its `View`.
macro_rules! registry {
    ($($(#[$doc:meta])* $variant:ident = $name:literal in $module:ident ($settings:ident)),+ $(,)?) => {
        /// Every workload's view of the run's newest frame.
        #[component]
        pub fn FrameViews(frame: Signal<Option<Frame>>) -> impl IntoView {
            view! { $(<$module::View frame/>)+ }
        }
    };
}

hotlab_specs::workload_list!(registry);

// The workload folders, whose `mod.rs` give this crate their `web.rs`.
#[path = "registry.rs"]
mod registry;
pub use registry::*;

/// Paints `width × height` grey bytes onto `canvas`; None where the canvas cannot take them.
pub fn paint(canvas: &web_sys::HtmlCanvasElement, grey: &[u8], width: u32, height: u32) -> Option<()> {
    let ctx: web_sys::CanvasRenderingContext2d = canvas.get_context("2d").ok()??.dyn_into().ok()?;
    let rgba: Vec<u8> = grey.iter().flat_map(|&g| [g, g, g, 255]).collect();
    let image = web_sys::ImageData::new_with_u8_clamped_array_and_sh(Clamped(&rgba), width, height).ok()?;
    ctx.put_image_data(&image, 0.0, 0.0).ok()
}
