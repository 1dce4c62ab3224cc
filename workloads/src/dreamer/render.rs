//! CartPole drawn to a 64×64 grey frame from its state `[x, ẋ, θ, θ̇]`, for the world
//! model to learn from: a track, the cart and the pole, anti-aliased so that the small
//! angles CartPole allows (±12°) still move pixels.
//!
//! The pole is drawn twice Gymnasium's length: at 64 pixels for 4.8 units of track, the
//! true pole's tip would move under three pixels across the whole legal range.

use hotlab_env::cartpole::X_THRESHOLD;
use hotlab_specs::dreamer::DREAMER_IMAGE;

/// Pixels in a frame (one grey channel).
pub const PIXELS: i64 = (DREAMER_IMAGE * DREAMER_IMAGE) as i64;

const SIDE: usize = DREAMER_IMAGE;
/// Pixels per unit of track: the track's ±2.4 fills the frame.
const SCALE: f32 = SIDE as f32 / (2.0 * X_THRESHOLD as f32);
/// Rows of the track and of the cart's centre.
const TRACK_ROW: f32 = 50.0;
const CART_ROW: f32 = 46.0;
const CART_HALF_W: f32 = 5.0;
const CART_HALF_H: f32 = 3.0;
const POLE_LEN: f32 = 30.0;
const POLE_HALF_W: f32 = 1.2;

/// Draws `state` into `out` (`SIDE × SIDE` bytes, rows first).
pub fn draw(state: &[f32], out: &mut [u8]) {
    let (x, theta) = (state[0], state[2]);
    let cx = SIDE as f32 / 2.0 + x * SCALE;
    // The pole from the cart's top centre, θ from the vertical, clockwise positive.
    let (px, py) = (cx, CART_ROW - CART_HALF_H);
    let (dx, dy) = (theta.sin() * POLE_LEN, -theta.cos() * POLE_LEN);
    let len2 = dx * dx + dy * dy;
    for row in 0..SIDE {
        for col in 0..SIDE {
            let (fx, fy) = (col as f32 + 0.5, row as f32 + 0.5);
            let mut v = 0.0f32;
            if (fy - TRACK_ROW).abs() < 0.5 {
                v = 0.3;
            }
            let cart = coverage(CART_HALF_W - (fx - cx).abs()).min(coverage(CART_HALF_H - (fy - CART_ROW).abs()));
            v = v.max(0.7 * cart);
            let t = (((fx - px) * dx + (fy - py) * dy) / len2).clamp(0.0, 1.0);
            let (ex, ey) = (fx - (px + t * dx), fy - (py + t * dy));
            let pole = coverage(POLE_HALF_W - (ex * ex + ey * ey).sqrt());
            v = v.max(pole);
            out[row * SIDE + col] = (v * 255.0).round() as u8;
        }
    }
}

/// How much of a pixel lies inside an edge `d` pixels away (negative: outside).
fn coverage(d: f32) -> f32 {
    (d + 0.5).clamp(0.0, 1.0)
}

/// Frames of every env in a batch of states (`[envs × 4]`).
pub fn draw_all(states: &[f32], out: &mut Vec<u8>) {
    let px = SIDE * SIDE;
    out.resize(states.len() / 4 * px, 0);
    for (s, frame) in states.chunks_exact(4).zip(out.chunks_exact_mut(px)) {
        draw(s, frame);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(state: [f32; 4]) -> Vec<u8> {
        let mut out = vec![0; SIDE * SIDE];
        draw(&state, &mut out);
        out
    }

    /// Mean column of the pixels brighter than 150 in rows `rows`.
    fn centre(f: &[u8], rows: std::ops::Range<usize>) -> f32 {
        let (mut sum, mut weight) = (0.0, 0.0);
        for r in rows {
            for c in 0..SIDE {
                let v = f[r * SIDE + c] as f32;
                if v > 150.0 {
                    sum += v * c as f32;
                    weight += v;
                }
            }
        }
        sum / weight
    }

    /// The cart moves with x, the pole's tip with θ (and the cart stays put when only θ
    /// changes); the smallest angle that ends an episode moves the tip by pixels.
    #[test]
    fn the_frame_shows_the_carts_place_and_the_poles_angle() {
        let upright = frame([0.0; 4]);
        let right = frame([1.0, 0.0, 0.0, 0.0]);
        let tilted = frame([0.0, 0.0, 0.21, 0.0]);
        let cart_rows = 44..49;
        assert!((centre(&upright, cart_rows.clone()) - 31.5).abs() < 1.0);
        assert!((centre(&right, cart_rows.clone()) - centre(&upright, cart_rows.clone()) - SCALE).abs() < 1.0);
        assert!((centre(&tilted, cart_rows.clone()) - centre(&upright, cart_rows)).abs() < 0.5);
        let tip = 14..20;
        let shift = centre(&tilted, tip.clone()) - centre(&upright, tip);
        assert!(shift > 4.0, "the tip moved {shift} px at 12°");
        assert_ne!(upright, tilted);
    }
}
