//! The host: a small conv network (about 24k parameters at width 16) learning the glyph
//! task with its own Adam ([`HostAdam`]), with a slot after each of its three stages. A
//! seed in a slot adds `α·seed(x)` to the stage's activation `x`. A seed that is
//! `learning` (its training stage, α = 0) adds `s − detach(s)` with `s = seed(detach(x))`:
//! exactly zero, so the host's output is its own bit for bit, while the seed gets the
//! gradient it would get at α = 1 and the host gets none from it.
//!
//! `--slots` (catalogue row 9, seed 003 §2.3): `dynamic` makes a seed's tensors when it is
//! grafted and drops them (and their optimizer state) when it is removed: the set of
//! parameters changes with every graft, which no captured graph survives. `sleeper` makes
//! one seed of every blueprint in every slot up front and never frees one: a graft redraws
//! a sleeper's weights and zeroes its moments in place, and every step runs every sleeper,
//! masked (× 0, never stepped) unless it is live — the same ops every step, at the price
//! of computing the sleepers. Both draw the same weights and give the same results.

use super::adam::HostAdam;
use super::blueprint::{Blueprint, Seed, DRAWN_LATER, LINEAR};
use super::mixed;
use crate::morpho::glyphs::{Split, SIDE};
use hotlab_env::rng::HostRng;
use hotlab_specs::morpho::SlotPool;
use hotlab_specs::morpho::{HOST_BACKWARD, HOST_FORWARD, HOST_OPTIMIZER, HOST_PASSES, HOST_SAMPLES};
use hotlab_train::exec::parts::PartClock;
use hotlab_train::precision::DeviceScaler;
use std::time::Instant;
use tch::nn;
use tch::{Device, Kind, Tensor};

/// Slots per host, one after each stage.
pub const SLOTS: usize = 3;

pub mod batch;
mod graph;

/// A seed's module and its own store (dropping it frees the seed's tensors).
struct SeedModule {
    vs: nn::VarStore,
    net: Box<dyn Seed>,
    /// Its parameters, sorted by name (a fixed order for sums over them).
    params: Vec<Tensor>,
    named: Vec<(String, Tensor)>,
}

impl SeedModule {
    /// A seed of `blueprint` for `channels`, its weights zero until drawn.
    fn new(blueprint: Blueprint, channels: i64, device: Device) -> Self {
        let vs = nn::VarStore::new(device);
        let net = blueprint.build(vs.root() / "seed", channels);
        let mut named: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
        named.sort_by(|a, b| a.0.cmp(&b.0));
        Self { vs, net, params: named.iter().map(|(_, t)| t.shallow_clone()).collect(), named }
    }

    /// Its parameters by name.
    fn named(&self) -> &[(String, Tensor)] {
        &self.named
    }

    fn numel(&self) -> usize {
        self.params.iter().map(Tensor::numel).sum()
    }
}

/// A slot: its activation's channels, and the seed live there with its blend.
pub struct Slot {
    pub channels: i64,
    pub alpha: f64,
    /// The seed learns from the host's loss without changing its output (see above).
    pub learning: bool,
    /// The live seed's blueprint.
    pub live: Option<Blueprint>,
    /// Seeds by blueprint: the live one only (`dynamic`), or one of each, always (`sleeper`).
    seeds: Vec<Option<SeedModule>>,
}

pub struct Host {
    vs: nn::VarStore,
    stages: Vec<nn::Conv2D>,
    head: nn::Linear,
    pub slots: Vec<Slot>,
    opt: HostAdam,
    lr: f64,
    pool: SlotPool,
    /// The host's own parameters.
    base: usize,
    /// What its convolutions and matmuls compute in (fp32 or bf16: [`mixed`]).
    kind: Kind,
    /// A sleeper pool's step as a captured graph ([`graph`]), once asked for.
    captured: Option<graph::Captured>,
    /// fp16 hosts' dynamic loss scaling, on the device (no read per step).
    scaler: Option<DeviceScaler>,
}

/// Stage `s`'s stride: full resolution, then halved twice.
fn stage_stride(s: usize) -> i64 {
    if s == 0 {
        1
    } else {
        2
    }
}

/// A split as tensors: images `[n, 1, 16, 16]` and classes `[n]`.
pub fn tensors(split: &Split, device: Device) -> (Tensor, Tensor) {
    let n = split.len() as i64;
    let x = Tensor::from_slice(&split.images).reshape([n, 1, SIDE as i64, SIDE as i64]).to(device);
    (x, Tensor::from_slice(&split.labels).to(device))
}

/// A blueprint's index in [`Blueprint::ALL`].
fn index(b: Blueprint) -> usize {
    Blueprint::ALL.iter().position(|&x| x == b).unwrap_or(0)
}

impl Host {
    /// A bare host of `width` channels in its first stage (2× and 4× in the next two),
    /// trained by Adam at `lr`, its weights drawn from `rng` (so that an env's host does
    /// not depend on other threads' draws from libtorch's generator); its seeds held as
    /// `pool` says.
    pub fn new(width: i64, lr: f64, pool: SlotPool, device: Device, rng: &mut HostRng) -> anyhow::Result<Self> {
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
        let head = nn::linear(&root / "head", channels[2], crate::morpho::glyphs::CLASSES as i64, LINEAR);
        init(&vs, rng);
        let mut opt = HostAdam::new(SLOTS + 1, lr);
        opt.add(&vs.trainable_variables(), 0, None, true);
        let base = vs.trainable_variables().iter().map(Tensor::numel).sum();
        let mut slots = Vec::new();
        for (slot, &c) in channels.iter().enumerate() {
            let seeds = Blueprint::ALL
                .iter()
                .map(|&b| {
                    (pool == SlotPool::Sleeper).then(|| {
                        let seed = SeedModule::new(b, c, device);
                        opt.add(&seed.params, slot + 1, Some((slot, index(b))), false);
                        seed
                    })
                })
                .collect();
            slots.push(Slot { channels: c, alpha: 0.0, learning: false, live: None, seeds });
        }
        Ok(Self { vs, stages, head, slots, opt, lr, pool, base, kind: Kind::Float, captured: None, scaler: None })
    }

    /// Computes the convolutions and matmuls in `kind` from now on (fp32 master weights);
    /// fp16 with a dynamic loss scaler (PyTorch's rule, from 2^16), which needs the static
    /// step ([`Host::static_steps`]).
    pub fn set_kind(&mut self, kind: Kind) {
        self.kind = kind;
        self.scaler = (kind == Kind::Half).then(|| DeviceScaler::starting_at(65536.0, self.vs.device()));
    }

    /// An fp16 host's loss scale and the steps its scaler skipped so far (one read).
    pub fn loss_scale(&self) -> Option<(f64, u64)> {
        self.scaler.as_ref().map(DeviceScaler::read)
    }

    /// An fp16 host's scaler restarted at `scale` (tests force overflows with a huge one).
    #[cfg(test)]
    pub fn restart_scaler(&mut self, scale: f64) {
        self.scaler = Some(DeviceScaler::starting_at(scale, self.vs.device()));
    }

    /// The epoch's mean loss and accuracy and, for an fp16 host, the steps its scaler has
    /// skipped so far: one read.
    pub fn finish_epoch(&self, epoch: Epoch, clock: &PartClock) -> (f64, f64, Option<u64>) {
        epoch.finish_with(self.scaler.as_ref().map(DeviceScaler::skipped), clock)
    }

    /// Grafts a seed of `blueprint` into `slot` at blend `alpha`, its weights drawn from
    /// `rng`, learning at `lr_scale` × the host's rate (each slot's seeds are a
    /// learning-rate group: `slot + 1`).
    pub fn graft(&mut self, slot: usize, blueprint: Blueprint, alpha: f64, lr_scale: f64, rng: &mut HostRng) {
        self.remove(slot);
        let (b, owner) = (index(blueprint), (slot, index(blueprint)));
        let device = self.vs.device();
        let s = &mut self.slots[slot];
        match self.pool {
            SlotPool::Dynamic => {
                let seed = SeedModule::new(blueprint, s.channels, device);
                init(&seed.vs, rng);
                self.opt.add(&seed.params, slot + 1, Some(owner), true);
                s.seeds[b] = Some(seed);
            }
            SlotPool::Sleeper => {
                let seed = s.seeds[b].as_ref().expect("a sleeper pool holds every blueprint");
                init(&seed.vs, rng);
                self.opt.reset(owner, true);
            }
        }
        self.opt.set_lr(slot + 1, self.lr * lr_scale);
        (s.live, s.alpha, s.learning) = (Some(blueprint), alpha, false);
    }

    /// Takes the slot's seed out (α = 0): dropped with its optimizer state (`dynamic`), or
    /// masked (`sleeper`).
    pub fn remove(&mut self, slot: usize) {
        let s = &mut self.slots[slot];
        if let Some(b) = s.live.take().map(index) {
            match self.pool {
                SlotPool::Dynamic => {
                    s.seeds[b] = None;
                    self.opt.remove((slot, b));
                }
                SlotPool::Sleeper => self.opt.set_live((slot, b), false),
            }
        }
        (s.alpha, s.learning) = (0.0, false);
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
        let mut epoch = Epoch::draw(x.size()[0] as u64, steps, batch, rng, x.device());
        while self.minibatch(&mut epoch, x, y, clock) {}
        epoch.finish(clock)
    }

    /// The epoch's next minibatch: forward, backward and an optimizer step, queued on the
    /// current stream with no read; false (and nothing done) once the epoch is over.
    pub fn minibatch(&mut self, epoch: &mut Epoch, x: &Tensor, y: &Tensor, clock: &PartClock) -> bool {
        if epoch.done >= epoch.steps {
            return false;
        }
        self.mark_stepped();
        if self.captured.is_some() {
            self.minibatch_static(epoch, x, y, clock);
            return true;
        }
        let t = Instant::now();
        let idx = epoch.idx.narrow(0, i64::from(epoch.done) * epoch.batch, epoch.batch);
        let (xb, yb) = (x.index_select(0, &idx), y.index_select(0, &idx));
        let logits = self.forward(&xb);
        let loss = logits.cross_entropy_for_logits(&yb);
        tch::no_grad(|| {
            let _ = epoch.loss.g_add_(&loss.to_kind(Kind::Double));
            let _ = epoch.right.g_add_(&correct(&logits, &yb).to_kind(Kind::Double));
        });
        let t = clock.lap(HOST_FORWARD, t);
        self.opt.zero_grad();
        loss.backward();
        let t = clock.lap(HOST_BACKWARD, t);
        self.opt.step();
        clock.lap(HOST_OPTIMIZER, t);
        clock.count(HOST_PASSES, 1);
        epoch.done += 1;
        true
    }

    /// Marks each live seed stepped by Adam exactly while it takes part in the loss (learning,
    /// or blended at α ≠ 0). Outside it a sleeper's gradient is a defined 0 and a seed made
    /// anew has none: stepping on "has a gradient" counted Adam steps for the one and not
    /// the other (a different bias correction once it learns), and let a seed that had
    /// learned drift on its momentum at α = 0.
    pub(super) fn mark_stepped(&mut self) {
        for (s, slot) in self.slots.iter().enumerate() {
            if let Some(b) = slot.live.map(index) {
                self.opt.set_live((s, b), slot.learning || slot.alpha != 0.0);
            }
        }
    }

    /// Each slot's live seed's gradient norm after the last step (0 without one): one
    /// reduction over every live seed's gradients and one read; `None` (and no read)
    /// without a live seed.
    pub fn seed_grad_norms(&self) -> Option<[f64; SLOTS]> {
        let zero = || Tensor::zeros([], (Kind::Double, self.vs.device()));
        let mut any = false;
        let squares: Vec<Tensor> = self
            .slots
            .iter()
            .map(|slot| {
                let Some(seed) = slot.live.and_then(|b| slot.seeds[index(b)].as_ref()) else { return zero() };
                any = true;
                let grads: Vec<Tensor> = seed.params.iter().map(Tensor::grad).filter(Tensor::defined).collect();
                grads.iter().fold(zero(), |sum, g| sum + g.square().sum(Kind::Double))
            })
            .collect();
        if !any {
            return None;
        }
        let norms = Vec::<f64>::try_from(Tensor::stack(&squares, 0).sqrt()).ok()?;
        Some(std::array::from_fn(|i| norms[i]))
    }

    /// Every parameter tensor the host holds, its own then its seeds' (slot by slot,
    /// blueprint by blueprint), each in name order.
    #[cfg(test)]
    fn all_params(&self) -> Vec<Tensor> {
        let mut own: Vec<(String, Tensor)> = self.vs.variables().into_iter().collect();
        own.sort_by(|a, b| a.0.cmp(&b.0));
        let seeds = self.slots.iter().flat_map(|s| s.seeds.iter().flatten()).flat_map(|m| m.params.iter());
        own.into_iter().map(|(_, t)| t).chain(seeds.map(Tensor::shallow_clone)).collect()
    }

    /// Trainable parameters in use: the host's and its live seeds'.
    pub fn params(&self) -> usize {
        let live = |s: &Slot| s.live.and_then(|b| s.seeds[index(b)].as_ref()).map_or(0, SeedModule::numel);
        self.base + self.slots.iter().map(live).sum::<usize>()
    }

    /// Tensors allocated for seeds (parameters and optimizer moments): what `dynamic`
    /// changes with each graft and `sleeper` holds fixed.
    pub fn seed_tensors(&self) -> usize {
        let params: usize = self.slots.iter().flat_map(|s| &s.seeds).flatten().map(|s| s.params.len()).sum();
        params + self.opt.state_tensors() - 2 * self.vs.trainable_variables().len()
    }

    /// The class logits of images `x` in a training step.
    pub fn forward(&self, x: &Tensor) -> Tensor {
        self.forward_with(x, self.pool == SlotPool::Sleeper)
    }

    /// The class logits, running the masked sleepers or not (they add exactly 0: a
    /// validation, never captured, skips them).
    fn forward_with(&self, x: &Tensor, sleepers: bool) -> Tensor {
        let mut h = x.shallow_clone();
        for (s, (stage, slot)) in self.stages.iter().zip(&self.slots).enumerate() {
            let a = mixed::conv(stage, &h, stage_stride(s), 1, 1, self.kind).relu();
            h = a.shallow_clone();
            for (b, seed) in slot.seeds.iter().enumerate() {
                let Some(seed) = seed else { continue };
                let live = slot.live.is_some_and(|l| index(l) == b);
                if live && slot.learning {
                    let shadow = seed.net.forward_in(&a.detach(), self.kind);
                    h = &h + (&shadow - shadow.detach());
                } else if live && slot.alpha != 0.0 {
                    h = &h + seed.net.forward_in(&a, self.kind) * slot.alpha;
                } else if sleepers {
                    // A sleeper runs masked: it adds exactly 0 and its gradient is 0.
                    h = &h + seed.net.forward_in(&a, self.kind) * 0.0;
                }
            }
        }
        mixed::linear(&self.head, &h.mean_dim(&[2i64, 3][..], false, Kind::Float), self.kind)
    }

    /// One epoch over `(x, y)` in minibatches of `batch`, in an order drawn from `rng`;
    /// the mean training loss.
    pub fn train_epoch(&mut self, x: &Tensor, y: &Tensor, batch: i64, rng: &mut HostRng) -> f64 {
        let n = x.size()[0];
        let mut order: Vec<i64> = (0..n).collect();
        rng.shuffle(&mut order);
        let order = Tensor::from_slice(&order).to(x.device());
        let (mut total, mut batches) = (0.0, 0);
        self.mark_stepped();
        for start in (0..n).step_by(batch as usize) {
            let idx = order.narrow(0, start, batch.min(n - start));
            let loss = self.forward(&x.index_select(0, &idx)).cross_entropy_for_logits(&y.index_select(0, &idx));
            self.opt.zero_grad();
            loss.backward();
            self.opt.step();
            total += loss.double_value(&[]);
            batches += 1;
        }
        total / batches.max(1) as f64
    }

    /// Loss and accuracy on `(x, y)`.
    pub fn evaluate(&self, x: &Tensor, y: &Tensor) -> (f64, f64) {
        tch::no_grad(|| {
            let logits = self.forward_with(x, false);
            (logits.cross_entropy_for_logits(y).double_value(&[]), accuracy(&logits, y))
        })
    }
}

/// The share of `logits`' argmax that is `y`.
fn accuracy(logits: &Tensor, y: &Tensor) -> f64 {
    correct(logits, y).double_value(&[])
}

/// [`accuracy`] as a tensor on the logits' device (fp32, 0-dim), read by no one yet.
fn correct(logits: &Tensor, y: &Tensor) -> Tensor {
    logits.argmax(-1, false).eq_tensor(y).to_kind(Kind::Float).mean(Kind::Float)
}

/// A host epoch under way: its minibatches' indices, drawn up front in the order one draw
/// per minibatch would give and copied to the host's device once, and its loss and
/// accuracy summed there (in f64, as the host would sum them), read once at its end.
pub struct Epoch {
    idx: Tensor,
    steps: u32,
    batch: i64,
    done: u32,
    loss: Tensor,
    right: Tensor,
}

impl Epoch {
    /// `steps` minibatches of `batch` of `n` examples, drawn from `rng`.
    pub fn draw(n: u64, steps: u32, batch: i64, rng: &mut HostRng, device: Device) -> Self {
        let idx: Vec<i64> = (0..i64::from(steps) * batch).map(|_| rng.below(n) as i64).collect();
        let zero = || Tensor::zeros([], (Kind::Double, device));
        Self { idx: Tensor::from_slice(&idx).to(device), steps, batch, done: 0, loss: zero(), right: zero() }
    }

    /// Minibatches still to run.
    pub fn remaining(&self) -> u32 {
        self.steps - self.done
    }

    /// The epoch's mean loss and accuracy: one read (timed as the forward's: it waits for
    /// the epoch's work where that runs on a device).
    pub fn finish(self, clock: &PartClock) -> (f64, f64) {
        let (loss, accuracy, _) = self.finish_with(None, clock);
        (loss, accuracy)
    }

    /// [`Epoch::finish`], with a `[1]` device count (an fp16 host's skipped steps) read in
    /// the same transfer.
    pub fn finish_with(self, count: Option<&Tensor>, clock: &PartClock) -> (f64, f64, Option<u64>) {
        let t = Instant::now();
        let mut parts = vec![self.loss, self.right];
        parts.extend(count.map(|c| c.to_kind(Kind::Double).view([])));
        let sums = Vec::<f64>::try_from(Tensor::stack(&parts, 0)).unwrap_or_default();
        clock.lap(HOST_FORWARD, t);
        clock.count(HOST_SAMPLES, u64::from(self.done) * self.batch as u64);
        let steps = self.steps.max(1) as f64;
        let at = |i: usize| sums.get(i).copied().unwrap_or(f64::NAN);
        (at(0) / steps, at(1) / steps, count.map(|_| at(2) as u64))
    }
}

/// Draws every weight of `vs` from `rng` (sorted by name, so the draws land alike every
/// time), in place: a matrix or kernel uniform in ±1/√fan-in, a bias 0, a norm's scale 1
/// (a sleeper seed regrafted starts as a new one would).
fn init(vs: &nn::VarStore, rng: &mut HostRng) {
    let mut vars: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
    vars.sort_by(|a, b| a.0.cmp(&b.0));
    tch::no_grad(|| {
        for (name, mut t) in vars {
            let shape = t.size();
            let values: Vec<f32> = match shape.len() {
                0 | 1 if name.ends_with("bias") => vec![0.0; t.numel()],
                0 | 1 => vec![1.0; t.numel()],
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
    use crate::morpho::glyphs::{generate, TaskSpec};
    use crate::morpho::part_clock;

    #[test]
    fn a_seed_at_alpha_zero_leaves_the_output_exactly_the_hosts() {
        let mut rng = HostRng::new(5);
        let mut host = Host::new(8, 1e-3, SlotPool::Dynamic, Device::Cpu, &mut rng).unwrap();
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
        let norms = host.seed_grad_norms().expect("live seeds");
        assert!(norms[0] > 0.0 && norms[1] == 0.0);
        host.slots[0].learning = false;
        host.slots[0].alpha = 0.5;
        assert!(!host.forward(&x).equal(&bare));
    }

    /// A seed's life and its neighbours', with `train` after each change: a 3×3 convolution
    /// learning at α = 0 in slot 0, then blending at 0.5 beside an attention seed (half the
    /// rate) fully blended in slot 2; slot 0's removed, then regrafted with a norm seed in
    /// slot 1 (twice the rate in slot 0).
    pub(super) fn grow_and_prune(host: &mut Host, rng: &mut HostRng, train: &mut dyn FnMut(&mut Host, &mut HostRng)) {
        host.graft(0, Blueprint::Conv3x3, 0.0, 1.0, rng);
        host.slots[0].learning = true;
        train(host, rng);
        (host.slots[0].learning, host.slots[0].alpha) = (false, 0.5);
        host.graft(2, Blueprint::Attention, 0.0, 0.5, rng);
        host.slots[2].alpha = 1.0;
        train(host, rng);
        host.remove(0);
        train(host, rng);
        host.graft(0, Blueprint::Conv3x3, 1.0, 2.0, rng);
        host.graft(1, Blueprint::Norm, 1.0, 1.0, rng);
        train(host, rng);
    }

    /// `--slots`: the same draws, the same minibatches and the same grafts and removals give
    /// the same host bit for bit, whether seeds are made and freed or sleep in a pool;
    /// regrafting a slept-in seed starts it afresh. Only what is allocated differs.
    #[test]
    fn a_sleeper_pool_and_dynamic_seeds_give_the_same_host() {
        let task = generate(&TaskSpec { seed: 3, train: 256, val: 128, ..TaskSpec::default() });
        let ((x, y), (xv, yv)) = (tensors(&task.train, Device::Cpu), tensors(&task.val, Device::Cpu));
        let clock = part_clock();
        let run = |pool: SlotPool| {
            let mut rng = HostRng::new(9);
            let mut host = Host::new(4, 3e-3, pool, Device::Cpu, &mut rng).unwrap();
            let mut trace = Vec::new();
            let mut train = |host: &mut Host, rng: &mut HostRng| {
                host.train_steps(&x, &y, 2, 32, rng, &clock);
                let logits = tch::no_grad(|| host.forward(&xv));
                let norms = host.seed_grad_norms();
                trace.push((Vec::<f32>::try_from(logits.view([-1])).unwrap(), norms, host.params()));
            };
            grow_and_prune(&mut host, &mut rng, &mut train);
            (trace, host.evaluate(&xv, &yv), host.seed_tensors())
        };
        let (dynamic, sleeper) = (run(SlotPool::Dynamic), run(SlotPool::Sleeper));
        assert!(dynamic.0 == sleeper.0, "logits, gradient norms and parameter counts at every stage");
        assert_eq!(dynamic.1, sleeper.1);
        assert!(
            dynamic.0[1].1.unwrap()[2] > 0.0 && dynamic.0[2].2 < dynamic.0[1].2,
            "a live seed learns; a removal frees"
        );
        // Live at the end: conv3x3 (2 tensors), norm (2), attention (6), each with 2 moments.
        assert_eq!(dynamic.2, 10 * 3);
        assert!(sleeper.2 > 3 * dynamic.2, "the pool holds every blueprint in every slot: {}", sleeper.2);
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
            let mut host = Host::new(16, 3e-3, SlotPool::Dynamic, Device::Cpu, &mut init).unwrap();
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

    /// `--host-precision bf16`: the products really run in bf16 (the logits differ from
    /// fp32's, slightly), and a grown host learns the task as well as in fp32.
    #[test]
    fn a_bf16_host_learns_as_the_fp32_host_does() {
        let task = generate(&TaskSpec { seed: 8, train: 1024, val: 256, ..TaskSpec::default() });
        let ((x, y), (xv, yv)) = (tensors(&task.train, Device::Cpu), tensors(&task.val, Device::Cpu));
        let train = |kind: Kind| {
            let mut rng = HostRng::new(2);
            let mut host = Host::new(8, 3e-3, SlotPool::Dynamic, Device::Cpu, &mut rng).unwrap();
            host.set_kind(kind);
            host.graft(1, Blueprint::Conv3x3, 1.0, 1.0, &mut rng);
            host.graft(2, Blueprint::Mlp, 0.5, 1.0, &mut rng);
            let start = host.forward(&xv.narrow(0, 0, 8));
            let (before, _) = host.evaluate(&xv, &yv);
            for _ in 0..6 {
                host.train_epoch(&x, &y, 64, &mut rng);
            }
            (start, before, host.evaluate(&xv, &yv))
        };
        let (start32, before32, (_, acc32)) = train(Kind::Float);
        let (start16, before16, (loss16, acc16)) = train(Kind::BFloat16);
        let gap = (&start32 - &start16).abs().max().double_value(&[]);
        assert!(gap > 0.0 && gap < 0.05, "bf16 products round: {gap}");
        assert!(loss16 < before16 && (before16 - before32).abs() < 0.05, "{before16} -> {loss16}");
        assert!(acc16 > 0.2 && (acc16 - acc32).abs() < 0.08, "bf16 {acc16} against fp32 {acc32}");
    }
}
