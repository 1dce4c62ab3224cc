//! Grey frames on the wire: `side × side` bytes, rows first, as base64 (a JSON array of
//! numbers would be about three times larger), and halving a frame's side for the viewer.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;

pub fn encode(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

/// The bytes of a frame, if `text` is base64 of exactly `side × side` bytes.
pub fn decode(text: &str, side: usize) -> Option<Vec<u8>> {
    decode_len(text, side * side)
}

/// The bytes of a frame, if `text` is base64 of exactly `len` bytes.
pub fn decode_len(text: &str, len: usize) -> Option<Vec<u8>> {
    STANDARD.decode(text).ok().filter(|b| b.len() == len)
}

/// A `side × side` frame at half the side, each pixel the mean of its 2 × 2 block.
pub fn halve(frame: &[u8], side: usize) -> Vec<u8> {
    let half = side / 2;
    let mut out = Vec::with_capacity(half * half);
    for r in 0..half {
        for c in 0..half {
            let at = |dr: usize, dc: usize| frame[(2 * r + dr) * side + 2 * c + dc] as u32;
            out.push(((at(0, 0) + at(0, 1) + at(1, 0) + at(1, 1) + 2) / 4) as u8);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_halve_by_block_means() {
        let frame: Vec<u8> = (0..16).map(|i| (i * 16) as u8).collect();
        assert_eq!(decode(&encode(&frame), 4).unwrap(), frame);
        assert_eq!(decode(&encode(&frame), 5), None, "the wrong size is refused");
        assert_eq!(decode("not base64!", 4), None);
        // Rows 0–1, columns 0–1: 0, 16, 64, 80 → 40.
        assert_eq!(halve(&frame, 4), vec![40, 72, 168, 200]);
    }
}
