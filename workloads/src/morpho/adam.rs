//! The host's Adam, written out so that its state is ours: a seed's moments can be dropped
//! with the seed (`--slots dynamic`: the optimizer rebuilt without it) or zeroed in place
//! (`--slots sleeper`: the pool's tensors never change), and a masked seed is never
//! stepped. libtorch's optimizer keeps its state out of reach, so neither could be done
//! alike with it.

use tch::{Kind, Tensor};

const BETA1: f64 = 0.9;
const BETA2: f64 = 0.999;
const EPS: f64 = 1e-8;

/// One parameter tensor and its moments.
struct Entry {
    param: Tensor,
    m: Tensor,
    v: Tensor,
    steps: i32,
    /// The step count of [`HostAdam::step_static`], kept on the device (f32, 0-dim): a
    /// step skipped there (an fp16 overflow) is never counted, and the host never reads it.
    dstep: Tensor,
    /// Its learning-rate group: 0 the host's own, `slot + 1` a slot's seeds.
    group: usize,
    /// Who owns it: `None` the host, `Some((slot, blueprint))` a seed.
    owner: Option<(usize, usize)>,
    /// Stepped (when it has a gradient): the host's own, and a live seed's while it takes
    /// part in the loss ([`super::host::Host`] marks it); never a masked sleeper's.
    live: bool,
}

pub struct HostAdam {
    entries: Vec<Entry>,
    /// Learning rate per group.
    lr: Vec<f64>,
    /// Bumped by every change a [`DeviceState`] must follow.
    version: u64,
}

/// What the host decides of the optimizer, as tensors on the device for a captured step:
/// each entry's live flag and each group's rate, written only when they changed
/// ([`HostAdam::sync`]; empty until first written).
#[derive(Default)]
pub struct DeviceState {
    live: Vec<Tensor>,
    lr: Vec<Tensor>,
    version: Option<u64>,
}

impl HostAdam {
    /// An optimizer for `groups` learning-rate groups, each at `lr` until set.
    pub fn new(groups: usize, lr: f64) -> Self {
        Self { entries: Vec::new(), lr: vec![lr; groups], version: 0 }
    }

    /// Takes `params` in with fresh moments (zeros, allocated now).
    pub fn add(&mut self, params: &[Tensor], group: usize, owner: Option<(usize, usize)>, live: bool) {
        for p in params {
            let (m, v) = (p.zeros_like(), p.zeros_like());
            let dstep = Tensor::zeros([], (Kind::Float, p.device()));
            self.entries.push(Entry { param: p.shallow_clone(), m, v, steps: 0, dstep, group, owner, live });
        }
        self.version += 1;
    }

    /// Drops `owner`'s parameters and their moments (the rest keep theirs).
    pub fn remove(&mut self, owner: (usize, usize)) {
        self.entries.retain(|e| e.owner != Some(owner));
        self.version += 1;
    }

    /// Zeroes `owner`'s moments and step counts in place and marks it live or masked.
    pub fn reset(&mut self, owner: (usize, usize), live: bool) {
        for e in self.entries.iter_mut().filter(|e| e.owner == Some(owner)) {
            let _ = (e.m.zero_(), e.v.zero_(), e.dstep.zero_());
            (e.steps, e.live) = (0, live);
        }
        self.version += 1;
    }

    /// Marks `owner` live (stepped) or masked (never stepped); a change only moves the
    /// version (a captured step's state is rewritten when it does).
    pub fn set_live(&mut self, owner: (usize, usize), live: bool) {
        let mut changed = false;
        for e in self.entries.iter_mut().filter(|e| e.owner == Some(owner) && e.live != live) {
            (e.live, changed) = (live, true);
        }
        if changed {
            self.version += 1;
        }
    }

    pub fn set_lr(&mut self, group: usize, lr: f64) {
        self.lr[group] = lr;
        self.version += 1;
    }

    /// Moment tensors held (two per parameter tensor).
    pub fn state_tensors(&self) -> usize {
        2 * self.entries.len()
    }

    pub fn zero_grad(&mut self) {
        for e in &mut self.entries {
            let mut g = e.param.grad();
            if g.defined() {
                let _ = g.zero_();
            }
        }
    }

    /// One Adam step of every live parameter that has a gradient.
    pub fn step(&mut self) {
        tch::no_grad(|| {
            for e in self.entries.iter_mut().filter(|e| e.live) {
                let g = e.param.grad();
                if !g.defined() {
                    continue;
                }
                e.steps += 1;
                let _ = e.m.g_mul_scalar_(BETA1).g_add_(&(&g * (1.0 - BETA1)));
                let _ = e.v.g_mul_scalar_(BETA2).g_add_(&(g.square() * (1.0 - BETA2)));
                let (c1, c2) = (1.0 - BETA1.powi(e.steps), 1.0 - BETA2.powi(e.steps));
                let denom = (&e.v / c2).sqrt() + EPS;
                let _ = e.param.g_sub_(&(&e.m / denom * (self.lr[e.group] / c1)));
            }
        })
    }

    /// Writes the live flags and rates into `d` if they changed since it was last written
    /// (a graft, a removal, a rate): a few small copies then, none otherwise. A dynamic
    /// pool's entries come and go: `d` follows them.
    pub fn sync(&self, d: &mut DeviceState) {
        if d.version == Some(self.version) {
            return;
        }
        let device = self.entries.first().map_or(tch::Device::Cpu, |e| e.param.device());
        let zero = || Tensor::zeros([], (Kind::Float, device));
        d.live.resize_with(self.entries.len(), zero);
        d.lr.resize_with(self.lr.len(), zero);
        tch::no_grad(|| {
            for (e, live) in self.entries.iter().zip(&mut d.live) {
                let _ = live.fill_(if e.live { 1.0 } else { 0.0 });
            }
            for (lr, &value) in d.lr.iter_mut().zip(&self.lr) {
                let _ = lr.fill_(value);
            }
        });
        d.version = Some(self.version);
    }

    /// The parameters' gradients (those that have one), to unscale in place.
    pub fn grads(&self) -> Vec<Tensor> {
        self.entries.iter().map(|e| e.param.grad()).filter(Tensor::defined).collect()
    }

    /// [`HostAdam::step`] as the same ops whatever the state (what a captured graph
    /// replays): every entry stepped, its moments, step count and parameter left as they
    /// were where its live flag is 0 or `keep` is 0 (an fp16 step whose gradients
    /// overflowed), its step count on the device and its rate read from `d`.
    pub fn step_static(&mut self, d: &DeviceState, keep: Option<&Tensor>) {
        let (ln1, ln2) = (BETA1.ln(), BETA2.ln());
        let keep = keep.map(|k| k.reshape([]));
        tch::no_grad(|| {
            for (e, live) in self.entries.iter_mut().zip(&d.live) {
                let g = e.param.grad();
                if !g.defined() {
                    continue;
                }
                let live = match &keep {
                    Some(k) => live * k,
                    None => live.shallow_clone(),
                };
                let on = live.gt(0.5);
                let _ = e.dstep.g_add_(&live);
                let m = &e.m * BETA1 + &g * (1.0 - BETA1);
                let v = &e.v * BETA2 + g.square() * (1.0 - BETA2);
                e.m.copy_(&m.where_self(&on, &e.m));
                e.v.copy_(&v.where_self(&on, &e.v));
                // A sleeper never stepped counts 0: clamped, its update is 0 · finite.
                let t = e.dstep.clamp_min(1.0);
                let c1 = (&t * ln1).exp().neg() + 1.0;
                let c2 = (&t * ln2).exp().neg() + 1.0;
                let update = &e.m / ((&e.v / c2).sqrt() + EPS) * (&d.lr[e.group] / c1);
                let _ = e.param.g_sub_(&(update * &live));
            }
        })
    }
}
