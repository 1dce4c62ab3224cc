//! The host: a small conv network (about 24k parameters at width 16) learning the glyph
//! task with its own optimizer, with a slot after each of its three stages. A seed in a
//! slot adds `α·seed(x)` to the stage's activation `x`. A seed that is `learning` (its
//! training stage, α = 0) adds `s − detach(s)` with `s = seed(detach(x))`: exactly zero, so
//! the host's output is its own bit for bit, while the seed gets the gradient it would get
//! at α = 1 and the host gets none from it.

use super::blueprint::{Blueprint, Seed, DRAWN_LATER, LINEAR};
use crate::exec::parts::PartClock;
use hotlab_shared::glyphs::{Split, SIDE};
use hotlab_shared::profile::Phase;
use hotlab_shared::rng::HostRng;
use std::time::Instant;
use tch::nn::{self, Module, OptimizerConfig};
use tch::{Device, Kind, Tensor};

/// Slots per host, one after each stage.
pub const SLOTS: usize = 3;

/// A slot: its activation's channels, and the seed grafted there with its blend.
pub struct Slot {
    pub channels: i64,
    pub alpha: f64,
    /// The seed learns from the host's loss without changing its output (see above).
    pub learning: bool,
    pub seed: Option<(Blueprint, Box<dyn Seed>)>,
    /// Its parameters' names start with this.
    prefix: String,
}

pub struct Host {
    vs: nn::VarStore,
    stages: Vec<nn::Conv2D>,
    head: nn::Linear,
    pub slots: Vec<Slot>,
    opt: nn::Optimizer,
    lr: f64,
    /// Seeds grafted so far (each one's parameters get a path of their own).
    grafted: usize,
}

/// A split as tensors: images `[n, 1, 16, 16]` and classes `[n]`.
pub fn tensors(split: &Split, device: Device) -> (Tensor, Tensor) {
    let n = split.len() as i64;
    let x = Tensor::from_slice(&split.images).reshape([n, 1, SIDE as i64, SIDE as i64]).to(device);
    (x, Tensor::from_slice(&split.labels).to(device))
}

impl Host {
    /// A bare host of `width` channels in its first stage (2× and 4× in the next two),
    /// trained by Adam at `lr`, its weights drawn from `rng` (so that an env's host does
    /// not depend on other threads' draws from libtorch's generator).
    pub fn new(width: i64, lr: f64, device: Device, rng: &mut HostRng) -> anyhow::Result<Self> {
        let vs = nn::VarStore::new(device);
        let root = vs.root();
        let channels = [width, 2 * width, 4 * width];
        let conv = |name: &str, i, o, stride| {
            let c =
                nn::ConvConfig { padding: 1, stride, ws_init: DRAWN_LATER, bs_init: DRAWN_LATER, ..Default::default() };
            nn::conv2d(&root / name, i, o, 3, c)
        };
        let stages = vec![
            conv("stage0", 1, channels[0], 1),
            conv("stage1", channels[0], channels[1], 2),
            conv("stage2", channels[1], channels[2], 2),
        ];
        let head = nn::linear(&root / "head", channels[2], hotlab_shared::glyphs::CLASSES as i64, LINEAR);
        let slots = channels
            .iter()
            .map(|&c| Slot { channels: c, alpha: 0.0, learning: false, seed: None, prefix: String::new() })
            .collect();
        let opt = nn::Adam::default().build(&vs, lr)?;
        init(&vs, "", rng);
        Ok(Self { vs, stages, head, slots, opt, lr, grafted: 0 })
    }

    /// Grafts a seed of `blueprint` into `slot` at blend `alpha`, its weights drawn from
    /// `rng`, learning at `lr_scale` × the host's rate (each slot's seeds are a parameter
    /// group of the optimizer: group `slot + 1`).
    pub fn graft(&mut self, slot: usize, blueprint: Blueprint, alpha: f64, lr_scale: f64, rng: &mut HostRng) {
        self.grafted += 1;
        let name = format!("seed{}_{}", self.grafted, blueprint.name());
        let seed = blueprint.build(self.vs.root().set_group(slot + 1) / name.as_str(), self.slots[slot].channels);
        init(&self.vs, &name, rng);
        // The optimizer takes new variables in (and makes their group) when it zeroes.
        self.opt.zero_grad();
        self.opt.set_lr_group(slot + 1, self.lr * lr_scale);
        let s = &mut self.slots[slot];
        (s.seed, s.alpha, s.learning, s.prefix) = (Some((blueprint, seed)), alpha, false, name);
    }

    /// Takes the slot's seed out (α = 0). Its parameters stay in the store, unused.
    pub fn remove(&mut self, slot: usize) {
        let s = &mut self.slots[slot];
        (s.seed, s.alpha, s.learning) = (None, 0.0, false);
    }

    /// `steps` minibatches of `batch` drawn from `(x, y)` by `rng`, each an optimizer step,
    /// their parts timed on `clock`; their mean loss and accuracy.
    pub fn train_steps(
        &mut self,
        x: &Tensor,
        y: &Tensor,
        steps: u32,
        batch: i64,
        rng: &mut HostRng,
        clock: &PartClock,
    ) -> (f64, f64) {
        let n = x.size()[0] as u64;
        let (mut loss_sum, mut right) = (0.0, 0.0);
        for _ in 0..steps {
            let t = Instant::now();
            let idx: Vec<i64> = (0..batch).map(|_| rng.below(n) as i64).collect();
            let idx = Tensor::from_slice(&idx).to(x.device());
            let (xb, yb) = (x.index_select(0, &idx), y.index_select(0, &idx));
            let logits = self.forward(&xb);
            let loss = logits.cross_entropy_for_logits(&yb);
            loss_sum += loss.double_value(&[]);
            right += accuracy(&logits, &yb);
            let t = clock.lap(Phase::HostForward, t);
            self.opt.zero_grad();
            loss.backward();
            let t = clock.lap(Phase::HostBackward, t);
            self.opt.step();
            clock.lap(Phase::HostOptimizer, t);
        }
        let steps = steps.max(1) as f64;
        (loss_sum / steps, right / steps)
    }

    /// Each slot's seed's gradient norm after the last step (0 without a seed).
    pub fn seed_grad_norms(&self) -> [f64; SLOTS] {
        let vars = self.vs.variables();
        let mut out = [0.0; SLOTS];
        for (norm, slot) in out.iter_mut().zip(&self.slots).filter(|(_, s)| s.seed.is_some()) {
            let squares: f64 = vars
                .iter()
                .filter(|(name, _)| name.starts_with(slot.prefix.as_str()))
                .map(|(_, t)| t.grad())
                .filter(Tensor::defined)
                .map(|g| g.square().sum(Kind::Double).double_value(&[]))
                .sum();
            *norm = squares.sqrt();
        }
        out
    }

    /// Trainable parameters, seeds included.
    pub fn params(&self) -> usize {
        self.vs.trainable_variables().iter().map(Tensor::numel).sum()
    }

    /// The class logits of images `x`.
    pub fn forward(&self, x: &Tensor) -> Tensor {
        let mut h = x.shallow_clone();
        for (stage, slot) in self.stages.iter().zip(&self.slots) {
            h = stage.forward(&h).relu();
            match &slot.seed {
                Some((_, seed)) if slot.learning => {
                    let shadow = seed.forward(&h.detach());
                    h = &h + (&shadow - shadow.detach());
                }
                Some((_, seed)) if slot.alpha != 0.0 => h = &h + seed.forward(&h) * slot.alpha,
                _ => {}
            }
        }
        self.head.forward(&h.mean_dim(&[2i64, 3][..], false, Kind::Float))
    }

    /// One epoch over `(x, y)` in minibatches of `batch`, in an order drawn from `rng`;
    /// the mean training loss.
    pub fn train_epoch(&mut self, x: &Tensor, y: &Tensor, batch: i64, rng: &mut HostRng) -> f64 {
        let n = x.size()[0];
        let mut order: Vec<i64> = (0..n).collect();
        rng.shuffle(&mut order);
        let order = Tensor::from_slice(&order).to(x.device());
        let (mut total, mut batches) = (0.0, 0);
        for start in (0..n).step_by(batch as usize) {
            let idx = order.narrow(0, start, batch.min(n - start));
            let loss = self.forward(&x.index_select(0, &idx)).cross_entropy_for_logits(&y.index_select(0, &idx));
            self.opt.backward_step(&loss);
            total += loss.double_value(&[]);
            batches += 1;
        }
        total / batches.max(1) as f64
    }

    /// Loss and accuracy on `(x, y)`.
    pub fn evaluate(&self, x: &Tensor, y: &Tensor) -> (f64, f64) {
        tch::no_grad(|| {
            let logits = self.forward(x);
            (logits.cross_entropy_for_logits(y).double_value(&[]), accuracy(&logits, y))
        })
    }
}

/// The share of `logits`' argmax that is `y`.
fn accuracy(logits: &Tensor, y: &Tensor) -> f64 {
    logits.argmax(-1, false).eq_tensor(y).to_kind(Kind::Float).mean(Kind::Float).double_value(&[])
}

/// Draws the weights whose names start with `prefix` from `rng` (sorted by name, so the
/// draws land alike every time): a matrix or kernel uniform in ±1/√fan-in, a bias 0; a
/// norm's own scale (1) and shift (0) stay.
fn init(vs: &nn::VarStore, prefix: &str, rng: &mut HostRng) {
    let mut vars: Vec<(String, Tensor)> = vs.variables().into_iter().filter(|(n, _)| n.starts_with(prefix)).collect();
    vars.sort_by(|a, b| a.0.cmp(&b.0));
    tch::no_grad(|| {
        for (name, mut t) in vars {
            let shape = t.size();
            let values: Vec<f32> = match shape.len() {
                0 | 1 if name.ends_with("bias") => vec![0.0; t.numel()],
                0 | 1 => continue,
                _ => {
                    let bound = 1.0 / (shape[1..].iter().product::<i64>() as f32).sqrt();
                    (0..t.numel()).map(|_| (rng.next_f32() * 2.0 - 1.0) * bound).collect()
                }
            };
            let drawn = Tensor::from_slice(&values).reshape(&shape).to(t.device());
            t.copy_(&drawn);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use hotlab_shared::glyphs::{generate, TaskSpec};

    #[test]
    fn a_seed_at_alpha_zero_leaves_the_output_exactly_the_hosts() {
        let mut rng = HostRng::new(5);
        let mut host = Host::new(8, 1e-3, Device::Cpu, &mut rng).unwrap();
        let x = Tensor::randn([4, 1, 16, 16], (Kind::Float, Device::Cpu));
        let bare = host.forward(&x);
        let before = host.params();
        for (slot, bp) in [Blueprint::Conv3x3, Blueprint::Attention, Blueprint::Mlp].into_iter().enumerate() {
            host.graft(slot, bp, 0.0, 1.0, &mut rng);
        }
        assert!(host.params() > before);
        assert!(host.forward(&x).equal(&bare), "α = 0: the host's output, bit for bit");
        // Learning at α = 0: still the host's output, and the seed gets a gradient.
        host.slots[0].learning = true;
        let out = host.forward(&x);
        assert!(out.equal(&bare), "a learning seed leaves the output bit for bit");
        out.sum(Kind::Float).backward();
        assert!(host.seed_grad_norms()[0] > 0.0 && host.seed_grad_norms()[1] == 0.0);
        host.slots[0].learning = false;
        host.slots[0].alpha = 0.5;
        assert!(!host.forward(&x).equal(&bare));
    }

    /// The promise: grown capacity raises validation accuracy measurably. The same
    /// host, the same initialization and the same minibatches for 6 epochs, bare and with a
    /// 3×3 convolution fossilized (α = 1) in every slot.
    #[test]
    fn a_host_grown_in_every_slot_beats_the_bare_host_by_five_points() {
        let task = generate(&TaskSpec { seed: 11, ..TaskSpec::default() });
        let ((x, y), (xv, yv)) = (tensors(&task.train, Device::Cpu), tensors(&task.val, Device::Cpu));
        let accuracy = |grown: bool| {
            let mut init = HostRng::new(1);
            let mut host = Host::new(16, 3e-3, Device::Cpu, &mut init).unwrap();
            if grown {
                (0..SLOTS).for_each(|s| host.graft(s, Blueprint::Conv3x3, 1.0, 1.0, &mut init));
            }
            let mut rng = HostRng::new(2);
            for _ in 0..6 {
                host.train_epoch(&x, &y, 64, &mut rng);
            }
            (host.evaluate(&xv, &yv).1, host.params())
        };
        let ((bare, bare_params), (grown, grown_params)) = (accuracy(false), accuracy(true));
        eprintln!("validation accuracy after 6 epochs: bare {bare:.3} ({bare_params} parameters), grown {grown:.3} ({grown_params})");
        assert!((20_000..30_000).contains(&bare_params), "tens of thousands of parameters: {bare_params}");
        assert!(grown > bare + 0.05, "grown {grown:.3} ({grown_params} parameters) against bare {bare:.3}");
    }
}
