//! The encoder: an image field (bytes, as the env gave them) in, features out, for the
//! policy's heads to read.
//!
//! Bytes stay bytes up to here: the encoder's first step converts the batch to float and
//! scales it (1/255 for pixels, 1 for flags) on whatever device the batch is on, once per
//! batch, and lays it out as the convolutions want it (`--conv-layout`: channels last on
//! the CPU, where oneDNN's kernels read it without a reorder).
//!
//! Two trunks, chosen from the image's shape: the Nature CNN of CleanRL's
//! `ppo_atari.py` (8×8/4, 4×4/2, 3×3/1 with 32, 64, 64 channels, then 512 units; both sides
//! at least 36) and, for small grids such as MinAtar's 10×10, one 3×3 convolution of 16
//! channels, then 128 units (MinAtar's own baseline). Orthogonal weights (gain √2), zero
//! biases, as CleanRL's `layer_init`.

use crate::models::layers::{Builder, Conv, Init, Linear, Window};
use crate::params::FlatParams;
use anyhow::{bail, Result};
use hotlab_core::choices::ConvLayout;
use hotlab_env::{FieldKind, FieldSpec};
use tch::{Device, Kind, Tensor};

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

/// Where the channels sit in memory when the convolutions read an image (`--conv-layout`,
/// resolved for a device). The products are the same; the kernels differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// `[B, C, H, W]` contiguous: libtorch's default.
    Nchw,
    /// `[B, H, W, C]` contiguous, seen as `[B, C, H, W]`: PyTorch's `channels_last`.
    Nhwc,
}

impl Layout {
    /// `auto`: channels last on the CPU (the atari preset's update, Breakout on 2 cores:
    /// docs/benchmarks.md), channels first on a GPU, where it has not been measured yet.
    pub fn resolve(wanted: ConvLayout, device: Device) -> Self {
        match wanted {
            ConvLayout::Nchw => Layout::Nchw,
            ConvLayout::Nhwc => Layout::Nhwc,
            ConvLayout::Auto if device == Device::Cpu => Layout::Nhwc,
            ConvLayout::Auto => Layout::Nchw,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Layout::Nchw => "nchw",
            Layout::Nhwc => "nhwc",
        }
    }
}

/// A batch of images as the convolutions read them: float, scaled, `[B, C, H, W]` in the
/// encoder's [`Layout`]. Only [`Encoder::convert`] makes one.
pub struct Images(Tensor);

impl Images {
    pub fn tensor(&self) -> &Tensor {
        &self.0
    }
}

/// The encoder's layers and what it needs to read its input.
#[derive(Clone)]
pub struct Encoder {
    pub image: Image,
    pub trunk: Trunk,
    /// Where the channels sit in memory for the convolutions.
    pub layout: Layout,
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
    /// The encoder of `field`'s images, its parameters added to `b` (named `prefix.…`), its
    /// convolutions reading them in `layout`.
    pub fn new(b: &mut Builder, prefix: &str, field: &FieldSpec, layout: Layout) -> Result<Self> {
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
        Ok(Self { image, trunk, layout, convs: built, linear, width, scale })
    }

    /// Features `[B, width]` of a batch [`Encoder::convert`] made: the convolutions and the
    /// linear layer, each followed by a ReLU.
    pub fn forward(&self, p: &FlatParams, images: &Images) -> Tensor {
        let mut x = images.0.shallow_clone();
        for conv in &self.convs {
            x = conv.forward(p, &x).relu();
        }
        // `flatten` reads the logical `[C, H, W]` order in either layout (a copy for nhwc),
        // so the linear layer's weights mean the same in both.
        self.linear.forward(p, &x.flatten(1, -1)).relu()
    }

    /// Images `[B, …shape]` or `[B, bytes]` (bytes, or floats scaled on the host by
    /// `--frames float`), on any device, as the convolutions read them: converted to float
    /// and scaled there, once per batch, then laid out in the encoder's [`Layout`]. Floats
    /// first: a contiguous conversion, then a permute of floats, costs about half of
    /// permuting the bytes (4 channels innermost: a byte at a time) and converting those.
    pub fn convert(&self, x: &Tensor) -> Images {
        let Image { channels: c, height: h, width: w, channels_last } = self.image;
        let rows = x.size()[0];
        let logical =
            if channels_last { x.view([rows, h, w, c]).permute([0, 3, 1, 2]) } else { x.view([rows, c, h, w]) };
        // `to_kind` keeps the strides, so frames the env gave channels last stay so.
        let floats = match logical.kind() {
            Kind::Float => logical,
            _ => logical.to_kind(Kind::Float).g_mul_scalar_(self.scale),
        };
        Images(match self.layout {
            Layout::Nchw => floats.contiguous(),
            Layout::Nhwc => floats.permute([0, 2, 3, 1]).contiguous().permute([0, 3, 1, 2]),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(shape: &[usize], kind: FieldKind) -> FieldSpec {
        FieldSpec::new("obs", shape.to_vec(), kind)
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
        let tiny = Encoder::new(&mut Builder::new(Kind::Float), "e", &field(&[2, 2, 1], FieldKind::U8), Layout::Nchw);
        assert!(tiny.err().unwrap().to_string().contains("too small"));
    }

    /// The same parameters and frames give the same features and gradients in both layouts
    /// (to float rounding), and near them in bf16 (to bf16's rounding, not bit for bit):
    /// Atari's frame stack and an RGB frame, channels first and last, over seeds.
    #[test]
    fn layouts_agree_and_bf16_stays_near_fp32() {
        // Its seeds hold only while no other test draws from libtorch's generator.
        let _seeded = crate::testing::torch_seed(0);
        for (seed, shape) in [(1i64, vec![4, 84, 84]), (2, vec![48, 40, 3]), (3, vec![10, 10, 4])] {
            let f = field(&shape, FieldKind::U8);
            let run = |kind: Kind, layout: Layout, flat: Option<&Tensor>| {
                tch::manual_seed(seed);
                let mut b = Builder::new(kind);
                let enc = Encoder::new(&mut b, "e", &f, layout).unwrap();
                let mut p = match flat {
                    Some(flat) => b.with(flat.copy()).unwrap(),
                    None => b.finish(Device::Cpu),
                };
                let n: i64 = shape.iter().product::<usize>() as i64;
                tch::manual_seed(seed + 1000);
                let x = Tensor::randint(256, [3 * n], (Kind::Uint8, Device::Cpu)).view([3, n]);
                let y = enc.forward(&p, &enc.convert(&x));
                (&y * &y).sum(Kind::Float).backward();
                let grad = p.grad.copy();
                p.zero_grad();
                (p.flat.copy(), y.detach(), grad)
            };
            let gap = |a: &Tensor, b: &Tensor| {
                f64::try_from((a - b).abs().max()).unwrap() / f64::try_from(b.abs().max()).unwrap()
            };
            let (flat, y, g) = run(Kind::Float, Layout::Nchw, None);
            let (_, y_last, g_last) = run(Kind::Float, Layout::Nhwc, Some(&flat));
            assert!(gap(&y_last, &y) < 1e-5 && gap(&g_last, &g) < 1e-5, "{shape:?}: nhwc against nchw");
            let (_, y16, g16) = run(Kind::BFloat16, Layout::Nhwc, Some(&flat));
            let (fy, fg) = (gap(&y16, &y), gap(&g16, &g));
            assert!(
                fy > 0.0 && fy < 3e-2 && fg < 6e-2,
                "{shape:?}: bf16 features {fy:e}, gradients {fg:e} from fp32's"
            );
        }
    }
}
