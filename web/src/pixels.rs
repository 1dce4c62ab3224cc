//! Grey pictures painted on canvases: a workload's frames as the policy or a model sees
//! them (the dreamer's, an image env's channels).

use wasm_bindgen::{Clamped, JsCast};

/// Paints `width × height` grey bytes onto `canvas`; None where the canvas cannot take them.
pub fn paint(canvas: &web_sys::HtmlCanvasElement, grey: &[u8], width: u32, height: u32) -> Option<()> {
    let ctx: web_sys::CanvasRenderingContext2d = canvas.get_context("2d").ok()??.dyn_into().ok()?;
    let rgba: Vec<u8> = grey.iter().flat_map(|&g| [g, g, g, 255]).collect();
    let image = web_sys::ImageData::new_with_u8_clamped_array_and_sh(Clamped(&rgba), width, height).ok()?;
    ctx.put_image_data(&image, 0.0, 0.0).ok()
}
