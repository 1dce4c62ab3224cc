//! The encoder: an image field (bytes, as the env gave them) in, features out, for the
//! policy's heads to read.
//!
//! Bytes stay bytes up to here: the encoder's first step converts the batch to float and
//! scales it (1/255 for pixels, 1 for flags) on whatever device the batch is on, once per
//! batch. Two trunks, chosen from the image's shape: the Nature CNN of CleanRL's
//! `ppo_atari.py` (8×8/4, 4×4/2, 3×3/1 with 32, 64, 64 channels, then 512 units; both sides
//! at least 36) and, for small grids such as MinAtar's 10×10, one 3×3 convolution of 16
//! channels, then 128 units (MinAtar's own baseline). Orthogonal weights (gain √2), zero
//! biases, as CleanRL's `layer_init`.

use crate::models::layers::{Builder, Conv, Init, Linear, Window};
use crate::params::FlatParams;
use anyhow::{bail, Result};
use hotlab_shared::env::{FieldKind, FieldSpec};
use tch::{Kind, Tensor};

/// Which convolutions an image gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trunk {
    /// CleanRL's Atari network: frames of 36×36 and up (84×84 after the usual preprocessing).
    Nature,
    /// One 3×3 convolution for small grids (MinAtar's 10×10).
    Small,
}

impl Trunk {
    /// Convolutions as (output channels, window), then the linear layer's width.
    pub fn layers(self) -> (&'static [(i64, Window)], i64) {
        const NATURE: [(i64, Window); 3] = [
            (32, Window { kernel: 8, stride: 4, padding: 0 }),
            (64, Window { kernel: 4, stride: 2, padding: 0 }),
            (64, Window { kernel: 3, stride: 1, padding: 0 }),
        ];
        const SMALL: [(i64, Window); 1] = [(16, Window { kernel: 3, stride: 1, padding: 0 })];
        match self {
            Trunk::Nature => (&NATURE, 512),
            Trunk::Small => (&SMALL, 128),
        }
    }

    /// The smallest side the Nature trunk can see (its three windows leave one pixel).
    pub const NATURE_MIN_SIDE: i64 = 36;
}

/// An image's layout: channels, height, width, and whether channels come last in memory
/// (`[H, W, C]`, Gymnasium's convention for RGB) or first (`[C, H, W]`, a frame stack's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Image {
    pub channels: i64,
    pub height: i64,
    pub width: i64,
    pub channels_last: bool,
}

impl Image {
    /// The layout of a field of bytes: a 2-dim field is one channel; of three dims the
    /// channel axis is the smallest (a tie goes to the last, Gymnasium's `[H, W, C]`).
    pub fn of(field: &FieldSpec) -> Result<Self> {
        if !field.kind.is_bytes() {
            bail!(
                "the CNN encoder reads images of bytes (uint8 or bool), not a {:?} field '{}'",
                field.kind,
                field.name
            );
        }
        let s: Vec<i64> = field.shape.iter().map(|&d| d as i64).collect();
        match *s.as_slice() {
            [h, w] => Ok(Self { channels: 1, height: h, width: w, channels_last: true }),
            [a, b, c] if c <= a && c <= b => Ok(Self { channels: c, height: a, width: b, channels_last: true }),
            [a, b, c] if a <= b && a <= c => Ok(Self { channels: a, height: b, width: c, channels_last: false }),
            _ => bail!(
                "field '{}' of shape {:?} is not an image: the CNN encoder reads [H, W], [H, W, C] or [C, H, W] with the channels the smallest dimension",
                field.name,
                field.shape
            ),
        }
    }

    /// The trunk for this image: the Nature CNN where it fits, the small one otherwise.
    pub fn trunk(&self) -> Trunk {
        if self.height.min(self.width) >= Trunk::NATURE_MIN_SIDE {
            Trunk::Nature
        } else {
            Trunk::Small
        }
    }
}

/// The encoder's layers and what it needs to read its input.
#[derive(Clone)]
pub struct Encoder {
    pub image: Image,
    pub trunk: Trunk,
    convs: Vec<Conv>,
    linear: Linear,
    /// Features out.
    pub width: i64,
    /// What one byte is worth as a feature.
    pub scale: f64,
}

/// √2: CleanRL's gain for layers followed by a ReLU.
const RELU_GAIN: f64 = std::f64::consts::SQRT_2;

impl Encoder {
    /// The encoder of `field`'s images, its parameters added to `b` (named `prefix.…`).
    pub fn new(b: &mut Builder, prefix: &str, field: &FieldSpec) -> Result<Self> {
        let image = Image::of(field)?;
        let trunk = image.trunk();
        let (convs, width) = trunk.layers();
        let (mut channels, mut h, mut w) = (image.channels, image.height, image.width);
        let mut built = Vec::new();
        for (i, &(out, window)) in convs.iter().enumerate() {
            let (Some(nh), Some(nw)) = (window.side(h), window.side(w)) else {
                bail!(
                    "an image of {}×{} is too small for the {:?} encoder's convolution {i}",
                    image.height,
                    image.width,
                    trunk
                );
            };
            built.push(b.conv_with(&format!("{prefix}.conv{i}"), channels, out, window, Init::Orthogonal(RELU_GAIN)));
            (channels, h, w) = (out, nh, nw);
        }
        let linear = b.linear_with(&format!("{prefix}.linear"), channels * h * w, width, Init::Orthogonal(RELU_GAIN));
        let scale = if field.kind == FieldKind::U8 { 1.0 / 255.0 } else { 1.0 };
        Ok(Self { image, trunk, convs: built, linear, width, scale })
    }

    /// Features `[B, width]` of images `[B, …shape]` (bytes, on any device): converted to
    /// float and scaled there, channels moved first, convolutions and the linear layer
    /// each followed by a ReLU. Images that come as floats were scaled on the host
    /// (`--frames float`) and are read as they are.
    pub fn forward(&self, p: &FlatParams, x: &Tensor) -> Tensor {
        let Image { channels, height, width, channels_last } = self.image;
        let rows = x.size()[0];
        let x = self.convert(x);
        let mut x = if channels_last {
            x.view([rows, height, width, channels]).permute([0, 3, 1, 2])
        } else {
            x.view([rows, channels, height, width])
        };
        for conv in &self.convs {
            x = conv.forward(p, &x).relu();
        }
        self.linear.forward(p, &x.flatten(1, -1)).relu()
    }
}

impl Encoder {
    /// Images as the convolutions read them: bytes converted to float and scaled, on their
    /// device; floats (scaled on the host, `--frames float`, or converted already) as they are.
    pub fn convert(&self, x: &Tensor) -> Tensor {
        match x.kind() {
            Kind::Float => x.shallow_clone(),
            _ => x.to_kind(Kind::Float) * self.scale,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(shape: &[usize], kind: FieldKind) -> FieldSpec {
        FieldSpec { name: "obs".into(), shape: shape.to_vec(), kind }
    }

    /// Layouts and trunks as Atari's, MinAtar's and a raw RGB frame have them; floats and
    /// shapes that are not images are refused, naming the field.
    #[test]
    fn layouts_and_trunks_follow_the_image_s_shape() {
        let cases = [
            (vec![4, 84, 84], (4, 84, 84, false), Trunk::Nature),
            (vec![84, 84], (1, 84, 84, true), Trunk::Nature),
            (vec![210, 160, 3], (3, 210, 160, true), Trunk::Nature),
            (vec![10, 10, 4], (4, 10, 10, true), Trunk::Small),
            (vec![10, 10, 10], (10, 10, 10, true), Trunk::Small),
            (vec![3, 64, 64], (3, 64, 64, false), Trunk::Nature),
        ];
        for (shape, (c, h, w, last), trunk) in cases {
            let image = Image::of(&field(&shape, FieldKind::U8)).unwrap();
            assert_eq!(image, Image { channels: c, height: h, width: w, channels_last: last }, "{shape:?}");
            assert_eq!(image.trunk(), trunk, "{shape:?}");
        }
        let floats = Image::of(&field(&[4, 84, 84], FieldKind::F32)).unwrap_err().to_string();
        assert!(floats.contains("uint8 or bool") && floats.contains("'obs'"), "{floats}");
        let flat = Image::of(&field(&[128], FieldKind::U8)).unwrap_err().to_string();
        assert!(flat.contains("[128]") && flat.contains("not an image"), "{flat}");
        let tiny = Encoder::new(&mut Builder::new(Kind::Float), "e", &field(&[2, 2, 1], FieldKind::U8));
        assert!(tiny.err().unwrap().to_string().contains("too small"));
    }
}
