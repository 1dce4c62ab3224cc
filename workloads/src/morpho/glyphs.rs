//! The morphogenetic workload's task: 10-class classification of
//! 16×16 glyphs drawn procedurally from a seed, so that no data is downloaded and every
//! task seed is a new, held-out task.
//!
//! Each class is a few strokes in the unit square. A sample draws its class's strokes
//! through a random affine jitter (rotation, scale, shift), with a random stroke width,
//! adds clutter (short strokes of other shapes) and pixel noise. The clutter and the
//! jitter are what make a small host plateau: it must tell strokes from clutter wherever
//! the glyph lands.

use hotlab_env::rng::HostRng;

/// Pixels per side.
pub const SIDE: usize = 16;
/// Pixels per image.
pub const PIXELS: usize = SIDE * SIDE;
/// Classes.
pub const CLASSES: usize = 10;

/// A stroke: from one point to another, in the unit square.
type Stroke = ([f32; 2], [f32; 2]);

/// Each class's strokes.
const GLYPHS: [&[Stroke]; CLASSES] = [
    // a box
    &[([0.2, 0.2], [0.8, 0.2]), ([0.8, 0.2], [0.8, 0.8]), ([0.8, 0.8], [0.2, 0.8]), ([0.2, 0.8], [0.2, 0.2])],
    // a bar
    &[([0.5, 0.15], [0.5, 0.85])],
    // a Z
    &[([0.2, 0.2], [0.8, 0.2]), ([0.8, 0.2], [0.2, 0.8]), ([0.2, 0.8], [0.8, 0.8])],
    // an E
    &[([0.25, 0.2], [0.25, 0.8]), ([0.25, 0.2], [0.75, 0.2]), ([0.25, 0.5], [0.65, 0.5]), ([0.25, 0.8], [0.75, 0.8])],
    // a plus
    &[([0.5, 0.2], [0.5, 0.8]), ([0.2, 0.5], [0.8, 0.5])],
    // an X
    &[([0.2, 0.2], [0.8, 0.8]), ([0.8, 0.2], [0.2, 0.8])],
    // a triangle
    &[([0.5, 0.2], [0.8, 0.8]), ([0.8, 0.8], [0.2, 0.8]), ([0.2, 0.8], [0.5, 0.2])],
    // a 7
    &[([0.2, 0.2], [0.8, 0.2]), ([0.8, 0.2], [0.4, 0.85])],
    // an L
    &[([0.3, 0.2], [0.3, 0.8]), ([0.3, 0.8], [0.8, 0.8])],
    // a T
    &[([0.2, 0.2], [0.8, 0.2]), ([0.5, 0.2], [0.5, 0.85])],
];

/// How a task is drawn.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskSpec {
    /// The task's seed: another seed, another task (held-out tasks for evaluation).
    pub seed: u64,
    pub train: usize,
    pub val: usize,
    /// Pixel noise's standard deviation.
    pub noise: f32,
    /// Largest rotation (radians) and shift (pixels), and the scale's spread.
    pub rotate: f32,
    pub shift: f32,
    pub scale: f32,
    /// Clutter strokes per image.
    pub clutter: usize,
}

impl Default for TaskSpec {
    fn default() -> Self {
        Self { seed: 1, train: 2048, val: 512, noise: 0.25, rotate: 0.35, shift: 2.5, scale: 0.15, clutter: 3 }
    }
}

/// Images (`n × PIXELS`, row-major, about 0 to 1 before noise) and their classes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Split {
    pub images: Vec<f32>,
    pub labels: Vec<i64>,
}

impl Split {
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    pub fn image(&self, i: usize) -> &[f32] {
        &self.images[i * PIXELS..(i + 1) * PIXELS]
    }
}

/// A task: its train and validation splits, drawn from one seed.
#[derive(Clone, Debug, PartialEq)]
pub struct Task {
    pub train: Split,
    pub val: Split,
}

/// Draws the task `spec` describes; the same spec gives the same task, bit for bit.
pub fn generate(spec: &TaskSpec) -> Task {
    let mut rng = HostRng::new(hotlab_env::rng::splitmix64(spec.seed ^ 0x6d6f_7270_686f));
    let train = split(spec, spec.train, &mut rng);
    let val = split(spec, spec.val, &mut rng);
    Task { train, val }
}

fn split(spec: &TaskSpec, n: usize, rng: &mut HostRng) -> Split {
    // Balanced: each class n / 10 times (the first n % 10 classes once more), shuffled.
    let mut labels: Vec<i64> = (0..n).map(|i| (i % CLASSES) as i64).collect();
    rng.shuffle(&mut labels);
    let mut images = vec![0f32; n * PIXELS];
    for (image, &label) in images.chunks_mut(PIXELS).zip(&labels) {
        draw(spec, label as usize, rng, image);
    }
    Split { images, labels }
}

fn draw(spec: &TaskSpec, class: usize, rng: &mut HostRng, image: &mut [f32]) {
    let angle = (rng.next_f32() * 2.0 - 1.0) * spec.rotate;
    let scale = 1.0 + (rng.next_f32() * 2.0 - 1.0) * spec.scale;
    let shift = [(rng.next_f32() * 2.0 - 1.0) * spec.shift, (rng.next_f32() * 2.0 - 1.0) * spec.shift];
    let width = 1.0 + rng.next_f32() * 0.8;
    let (sin, cos) = angle.sin_cos();
    // The unit square onto pixels, turned about its centre.
    let place = |p: [f32; 2]| {
        let (x, y) = ((p[0] - 0.5) * scale, (p[1] - 0.5) * scale);
        let (x, y) = (x * cos - y * sin, x * sin + y * cos);
        [(x + 0.5) * SIDE as f32 + shift[0], (y + 0.5) * SIDE as f32 + shift[1]]
    };
    for &(a, b) in GLYPHS[class] {
        stroke(image, place(a), place(b), width, 1.0);
    }
    for _ in 0..spec.clutter {
        // A short piece of a random glyph's stroke, anywhere, fainter.
        let glyph = GLYPHS[rng.below(CLASSES as u64) as usize];
        let (a, b) = glyph[rng.below(glyph.len() as u64) as usize];
        let at = [rng.next_f32() * SIDE as f32, rng.next_f32() * SIDE as f32];
        let half = [(b[0] - a[0]) * 0.25 * SIDE as f32, (b[1] - a[1]) * 0.25 * SIDE as f32];
        let ink = 0.4 + 0.4 * rng.next_f32();
        stroke(image, [at[0] - half[0], at[1] - half[1]], [at[0] + half[0], at[1] + half[1]], width, ink);
    }
    for px in image.iter_mut() {
        *px += spec.noise * gaussian(rng);
    }
}

/// Inks a stroke of `width` pixels (anti-aliased over one pixel), keeping the darker ink.
fn stroke(image: &mut [f32], a: [f32; 2], b: [f32; 2], width: f32, ink: f32) {
    let (dx, dy) = (b[0] - a[0], b[1] - a[1]);
    let length2 = (dx * dx + dy * dy).max(1e-6);
    for y in 0..SIDE {
        for x in 0..SIDE {
            let p = [x as f32 + 0.5, y as f32 + 0.5];
            let t = (((p[0] - a[0]) * dx + (p[1] - a[1]) * dy) / length2).clamp(0.0, 1.0);
            let (ex, ey) = (p[0] - a[0] - t * dx, p[1] - a[1] - t * dy);
            let distance = (ex * ex + ey * ey).sqrt();
            let cover = (width / 2.0 + 0.5 - distance).clamp(0.0, 1.0) * ink;
            let px = &mut image[y * SIDE + x];
            *px = px.max(cover);
        }
    }
}

/// A standard normal draw (Box–Muller).
fn gaussian(rng: &mut HostRng) -> f32 {
    let u = rng.next_f64().max(1e-12);
    let v = rng.next_f64();
    ((-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small(seed: u64) -> TaskSpec {
        TaskSpec { seed, train: 500, val: 200, ..TaskSpec::default() }
    }

    #[test]
    fn a_seed_is_one_task_bit_for_bit_and_another_seed_another() {
        let (a, b) = (generate(&small(3)), generate(&small(3)));
        assert_eq!(a, b);
        let c = generate(&small(4));
        assert_ne!(a.train.images, c.train.images);
        assert_eq!((a.train.len(), a.val.len()), (500, 200));
        assert_eq!(a.train.images.len(), 500 * PIXELS);
        for class in 0..CLASSES as i64 {
            assert_eq!(a.train.labels.iter().filter(|&&l| l == class).count(), 50, "balanced");
        }
        assert!(a.train.images.iter().all(|p| p.is_finite()));
    }

    /// The nearest class mean over the training split, scored on validation: far above
    /// chance (the classes are there to learn), far below perfect (a linear template does
    /// not solve it: the jitter and clutter leave room for a learned, grown network).
    #[test]
    fn the_task_is_learnable_and_not_trivial() {
        let t = generate(&TaskSpec { seed: 7, train: 2000, val: 500, ..TaskSpec::default() });
        let mut means = vec![[0f32; PIXELS]; CLASSES];
        let mut counts = [0f32; CLASSES];
        for i in 0..t.train.len() {
            let c = t.train.labels[i] as usize;
            counts[c] += 1.0;
            for (m, p) in means[c].iter_mut().zip(t.train.image(i)) {
                *m += p;
            }
        }
        for (m, n) in means.iter_mut().zip(counts) {
            m.iter_mut().for_each(|v| *v /= n);
        }
        let right = (0..t.val.len())
            .filter(|&i| {
                let image = t.val.image(i);
                let distance = |m: &[f32; PIXELS]| m.iter().zip(image).map(|(a, b)| (a - b) * (a - b)).sum::<f32>();
                let best = (0..CLASSES).min_by(|&a, &b| distance(&means[a]).total_cmp(&distance(&means[b]))).unwrap();
                best as i64 == t.val.labels[i]
            })
            .count();
        let accuracy = right as f64 / t.val.len() as f64;
        assert!((0.3..0.85).contains(&accuracy), "nearest class mean: {accuracy:.3}");
    }
}
