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
    /// Its learning-rate group: 0 the host's own, `slot + 1` a slot's seeds.
    group: usize,
    /// Who owns it: `None` the host, `Some((slot, blueprint))` a seed.
    owner: Option<(usize, usize)>,
    /// Stepped when it has a gradient (a sleeper seed's is masked while it sleeps).
    live: bool,
}

pub struct HostAdam {
    entries: Vec<Entry>,
    /// Learning rate per group.
    lr: Vec<f64>,
    /// Bumped by every change a [`DeviceState`] must follow.
    version: u64,
}

/// The optimizer's state as tensors on the device, for a captured step: each entry's step
/// count and live flag, each group's rate. Written from the host's state, only when that
/// changed ([`HostAdam::sync`]); the step counts then advance on the device.
pub struct DeviceState {
    step: Vec<Tensor>,
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
            self.entries.push(Entry { param: p.shallow_clone(), m, v, steps: 0, group, owner, live });
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
            let _ = (e.m.zero_(), e.v.zero_());
            (e.steps, e.live) = (0, live);
        }
        self.version += 1;
    }

    /// Marks `owner` live (stepped) or masked (never stepped).
    pub fn set_live(&mut self, owner: (usize, usize), live: bool) {
        self.entries.iter_mut().filter(|e| e.owner == Some(owner)).for_each(|e| e.live = live);
        self.version += 1;
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

    /// Tensors on the entries' device for [`HostAdam::step_static`], not yet written.
    pub fn device_state(&self) -> DeviceState {
        let device = self.entries.first().map_or(tch::Device::Cpu, |e| e.param.device());
        let zero = || Tensor::zeros([], (Kind::Float, device));
        DeviceState {
            step: self.entries.iter().map(|_| zero()).collect(),
            live: self.entries.iter().map(|_| zero()).collect(),
            lr: self.lr.iter().map(|_| zero()).collect(),
            version: None,
        }
    }

    /// Writes the host's step counts, live flags and rates into `d` if they changed since
    /// it was last written (a graft, a removal, a rate): a few small copies then, none
    /// otherwise.
    pub fn sync(&self, d: &mut DeviceState) {
        if d.version == Some(self.version) {
            return;
        }
        tch::no_grad(|| {
            for ((e, step), live) in self.entries.iter().zip(&mut d.step).zip(&mut d.live) {
                let _ = step.fill_(f64::from(e.steps));
                let _ = live.fill_(if e.live { 1.0 } else { 0.0 });
            }
            for (lr, &value) in d.lr.iter_mut().zip(&self.lr) {
                let _ = lr.fill_(value);
            }
        });
        d.version = Some(self.version);
    }

    /// [`HostAdam::step`] as the same ops whatever the state (what a captured graph
    /// replays): every entry stepped, its moments and parameter left as they were where its
    /// live flag is 0, its step count and rate read from `d` on the device. Run it, then
    /// [`HostAdam::count_step`] each time it (or its graph) runs.
    pub fn step_static(&mut self, d: &DeviceState) {
        let (ln1, ln2) = (BETA1.ln(), BETA2.ln());
        tch::no_grad(|| {
            for (i, e) in self.entries.iter_mut().enumerate() {
                let g = e.param.grad();
                if !g.defined() {
                    continue;
                }
                let (live, step) = (&d.live[i], &d.step[i]);
                let on = live.gt(0.5);
                let _ = step.shallow_clone().g_add_(live);
                let m = &e.m * BETA1 + &g * (1.0 - BETA1);
                let v = &e.v * BETA2 + g.square() * (1.0 - BETA2);
                e.m.copy_(&m.where_self(&on, &e.m));
                e.v.copy_(&v.where_self(&on, &e.v));
                // A sleeper never stepped has step 0: clamped, its update is 0 · finite.
                let t = step.clamp_min(1.0);
                let c1 = (&t * ln1).exp().neg() + 1.0;
                let c2 = (&t * ln2).exp().neg() + 1.0;
                let update = &e.m / ((&e.v / c2).sqrt() + EPS) * (&d.lr[e.group] / c1);
                let _ = e.param.g_sub_(&(update * live));
            }
        })
    }

    /// The host's count of a step [`HostAdam::step_static`] took on the device: each live
    /// entry with a gradient, as [`HostAdam::step`] counts (no read).
    pub fn count_step(&mut self) {
        for e in self.entries.iter_mut().filter(|e| e.live && e.param.grad().defined()) {
            e.steps += 1;
        }
    }
}
